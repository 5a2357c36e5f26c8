//! One value per thread for an owner (a `Metrics`' counters, a decision log's spool): each
//! thread reaches its own without a shared write, and the owner reaches them all.

use std::any::Any;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Tells owners apart in `MINE` (tests run several of each kind at once).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// This thread's value of each live owner, by `PerThread::id`.
    static MINE: RefCell<Vec<(u64, Arc<dyn Any + Send + Sync>)>> =
        const { RefCell::new(Vec::new()) };
}

pub(super) struct PerThread<T> {
    id: u64,
    all: Mutex<Vec<Arc<T>>>,
}

impl<T: Send + Sync + 'static> PerThread<T> {
    pub(super) fn new() -> PerThread<T> {
        PerThread {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
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
        MINE.try_with(|cell| {
            let mut mine = cell.borrow_mut();
            // Ids are never reused, so the value under this id is a `T`.
            if let Some(v) = mine
                .iter()
                .find(|(id, _)| *id == self.id)
                .and_then(|(_, v)| v.as_ref().downcast_ref::<T>())
            {
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

/// The owners this thread holds a value of (for tests).
#[cfg(test)]
pub(super) fn ids_here() -> Vec<u64> {
    MINE.with(|m| m.borrow().iter().map(|(id, _)| *id).collect())
}

#[cfg(test)]
impl<T> PerThread<T> {
    pub(super) fn id(&self) -> u64 {
        self.id
    }
}
