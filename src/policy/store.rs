//! The live policy: an atomically swapped snapshot plus the status of the last reload, and
//! the tenants' overlays on it. Readers take an `Arc<Policy>` and keep it for the whole
//! request.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::SystemTime;

use arc_swap::ArcSwap;

use super::Policy;

#[derive(Debug, Clone, Default)]
pub struct ReloadStatus {
    pub last_error: Option<String>,
    pub last_error_at: Option<SystemTime>,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
}

/// The tenants' compiled overlays, swapped as a whole: a reader never sees half an update.
#[derive(Debug, Default)]
pub struct TenantTable {
    /// Tenant → its policy (the base pack with the tenant's rows merged in).
    pub overlays: HashMap<String, Arc<Policy>>,
    /// Set while the tenant database cannot be read: tenants with no overlay get this copy
    /// of the base pack, whose version tag ends in `+static`, so their decisions say that
    /// the tenant's rows may be missing.
    pub fallback: Option<Arc<Policy>>,
}

#[derive(Debug)]
pub struct PolicyStore {
    current: ArcSwap<Policy>,
    tenants: ArcSwap<TenantTable>,
    status: Mutex<ReloadStatus>,
}

impl PolicyStore {
    pub fn new(policy: Policy) -> PolicyStore {
        PolicyStore {
            current: ArcSwap::from_pointee(policy),
            tenants: ArcSwap::from_pointee(TenantTable::default()),
            status: Mutex::new(ReloadStatus::default()),
        }
    }

    /// The snapshot a request evaluates against from start to end.
    pub fn load(&self) -> Arc<Policy> {
        self.current.load_full()
    }

    /// The snapshot for one tenant's event: its overlay when it has one, the static
    /// fallback while the tenant database is unreadable, else the base pack.
    pub fn for_tenant(&self, tenant: &str, base: Arc<Policy>) -> Arc<Policy> {
        if tenant.is_empty() {
            return base;
        }
        let table = self.tenants.load();
        if table.overlays.is_empty() && table.fallback.is_none() {
            return base;
        }
        // After a pack reload an overlay still carries the older base until it is compiled
        // again over the new one (moments later); its tenant's rules stay enforced meanwhile.
        match table.overlays.get(tenant) {
            Some(p) => p.clone(),
            None => table.fallback.clone().unwrap_or(base),
        }
    }

    pub fn tenants(&self) -> Arc<TenantTable> {
        self.tenants.load_full()
    }

    pub fn swap_tenants(&self, table: TenantTable) {
        self.tenants.store(Arc::new(table));
    }

    pub fn swap(&self, policy: Policy) {
        self.current.store(Arc::new(policy));
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.reloads_ok += 1;
        s.last_error = None;
        s.last_error_at = None;
    }

    /// Records a rejected reload; the current policy keeps serving.
    pub fn record_failure(&self, error: String) {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.reloads_failed += 1;
        s.last_error = Some(error);
        s.last_error_at = Some(SystemTime::now());
    }

    pub fn status(&self) -> ReloadStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
