//! The live policy: an atomically swapped snapshot plus the status of the last reload.
//! Readers take an `Arc<Policy>` and keep it for the whole request.

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

#[derive(Debug)]
pub struct PolicyStore {
    current: ArcSwap<Policy>,
    status: Mutex<ReloadStatus>,
}

impl PolicyStore {
    pub fn new(policy: Policy) -> PolicyStore {
        PolicyStore {
            current: ArcSwap::from_pointee(policy),
            status: Mutex::new(ReloadStatus::default()),
        }
    }

    /// The snapshot a request evaluates against from start to end.
    pub fn load(&self) -> Arc<Policy> {
        self.current.load_full()
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
