//! One value per thread for an owner (a `Metrics`' counters, a decision log's spool): each
//! thread reaches its own without a shared write, and the owner reaches them all.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::LocalKey;

/// Tells owners apart in their thread-locals (tests run several of each kind at once).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A thread's values of every live owner of one kind, by `PerThread::id`. Each kind
/// declares its own (`thread_local!` cannot be generic): a shared one would need a
/// downcast on every use, which cost the decision path measurably.
pub(super) type Mine<T> = RefCell<Vec<(u64, Arc<T>)>>;

pub(super) struct PerThread<T: 'static> {
    id: u64,
    mine: &'static LocalKey<Mine<T>>,
    all: Mutex<Vec<Arc<T>>>,
}

impl<T: Send + Sync + 'static> PerThread<T> {
    pub(super) fn new(mine: &'static LocalKey<Mine<T>>) -> PerThread<T> {
        PerThread {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            mine,
            all: Mutex::new(Vec::new()),
        }
    }

    /// Runs `f` on this thread's value. On the thread's first use, `make` builds the value,
    /// given how many threads will then have one. `None` when the thread is past its
    /// thread-locals' teardown.
    pub(super) fn with<R>(
        &self,
        make: impl FnOnce(usize) -> T,
        f: impl FnOnce(&T) -> R,
    ) -> Option<R> {
        self.mine
            .try_with(|cell| {
                let mut mine = cell.borrow_mut();
                if let Some((_, v)) = mine.iter().find(|(id, _)| *id == self.id) {
                    return f(v);
                }
                // Values of owners that are gone are held only here; let them go.
                mine.retain(|(_, v)| Arc::strong_count(v) > 1);
                let value = {
                    let mut all = self.all();
                    let value = Arc::new(make(all.len() + 1));
                    all.push(value.clone());
                    value
                };
                let out = f(&value);
                mine.push((self.id, value));
                out
            })
            .ok()
    }

    /// Every thread's value. A value only this list holds belongs to a thread that has
    /// ended; the owner decides whether to keep it.
    pub(super) fn all(&self) -> MutexGuard<'_, Vec<Arc<T>>> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
impl<T> PerThread<T> {
    /// The owners of this kind this thread holds a value of.
    pub(super) fn ids_here(&self) -> Vec<u64> {
        self.mine
            .with(|m| m.borrow().iter().map(|(id, _)| *id).collect())
    }

    pub(super) fn id(&self) -> u64 {
        self.id
    }
}
