//! Reloads the pack when its file changes (polled, so ConfigMap symlink swaps are seen) and
//! on SIGHUP: read, validate, compile, then swap. A bad pack never replaces a good one.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::compile_file;
use super::store::PolicyStore;

/// How often the file is checked. Kubernetes updates mounted ConfigMaps within about a
/// minute; a one-second poll costs one small read.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// What a reload reports: the policy now serving, or a rejected pack. Implemented by
/// whoever counts reloads (the metrics), so policy knows no metrics registry.
pub trait ReloadObserver: Send + Sync {
    fn loaded(&self, policy: &super::Policy);
    fn failed(&self);
}

pub struct Reloader {
    pub path: PathBuf,
    pub env: Option<String>,
    pub store: Arc<PolicyStore>,
    pub observer: Option<Arc<dyn ReloadObserver>>,
    /// `serve --mode`: kept over whatever the reloaded pack says.
    pub mode: Option<super::Mode>,
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl Reloader {
    /// Tries one reload now; returns true when a new policy was swapped in.
    pub fn reload_now(&self) -> bool {
        match compile_file(&self.path, self.env.as_deref()) {
            Ok(mut policy) => {
                if let Some(m) = self.mode {
                    policy.mode = m;
                }
                for w in &policy.warnings {
                    tracing::warn!(policy = %self.path.display(), warning = %w, "policy warning");
                }
                // Connections are made once, at start-up (`cache_ttl_s` applies at once).
                let old = self.store.load();
                let url_env =
                    |p: &super::Policy| p.tenants.as_ref().map(|t| t.database_url_env.clone());
                if url_env(&old) != url_env(&policy)
                    || old.sessions.shared != policy.sessions.shared
                {
                    tracing::warn!(
                        "the tenant database or the shared session settings changed: they take effect when the server restarts"
                    );
                }
                tracing::info!(
                    pack = %policy.name,
                    version = %policy.version_tag(),
                    "policy reloaded"
                );
                if let Some(o) = &self.observer {
                    o.loaded(&policy);
                }
                self.store.swap(policy);
                true
            }
            Err(e) => {
                tracing::error!(error = %e, "policy reload rejected; keeping the current policy");
                self.store.record_failure(e.to_string());
                if let Some(o) = &self.observer {
                    o.failed();
                }
                false
            }
        }
    }

    /// Runs until `shutdown` flips: polls the file and listens for SIGHUP.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut last = std::fs::read(&self.path).ok().map(|b| digest(&b));
        let mut tick = tokio::time::interval(POLL_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        #[cfg(unix)]
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            #[cfg(unix)]
            let hup_fut = async {
                match hup.as_mut() {
                    Some(h) => {
                        h.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            #[cfg(not(unix))]
            let hup_fut = std::future::pending::<()>();
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = hup_fut => {
                    tracing::info!("SIGHUP: reloading policy");
                    last = std::fs::read(&self.path).ok().map(|b| digest(&b));
                    self.reload_now();
                }
                _ = tick.tick() => {
                    let now = std::fs::read(&self.path).ok().map(|b| digest(&b));
                    if now.is_some() && now != last {
                        last = now;
                        self.reload_now();
                    }
                }
            }
        }
    }
}
