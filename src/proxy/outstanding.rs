//! Tool calls forwarded whose replies have not been guarded yet, keyed by MCP session and
//! JSON-RPC id. A reply normally comes back on the call's own POST stream; when that stream
//! breaks, the client resumes on a GET stream and the reply arrives there, and must be
//! guarded all the same. Bounded in size and age: the map cannot grow without limit when
//! replies never come.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// (MCP session id, the JSON-RPC id as JSON text, so `1` and `"1"` differ).
pub type CallKey = (String, String);

pub struct Outstanding<T> {
    map: Mutex<HashMap<CallKey, (Instant, T)>>,
    capacity: usize,
    ttl: Duration,
}

impl<T> Outstanding<T> {
    pub fn new(capacity: usize, ttl: Duration) -> Outstanding<T> {
        Outstanding {
            map: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            ttl,
        }
    }

    /// Remembers a call. When full, expired entries go first, then the oldest.
    pub fn insert(&self, key: CallKey, value: T) {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= self.capacity && !map.contains_key(&key) {
            map.retain(|_, (at, _)| now.duration_since(*at) < self.ttl);
            if map.len() >= self.capacity
                && let Some(oldest) = map
                    .iter()
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(key, (now, value));
    }

    /// The call, if it is still awaited (and not expired); it is no longer awaited after.
    pub fn take(&self, key: &CallKey) -> Option<T> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let (at, value) = map.remove(key)?;
        (at.elapsed() < self.ttl).then_some(value)
    }

    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str, id: &str) -> CallKey {
        (s.to_string(), id.to_string())
    }

    #[tokio::test(start_paused = true)]
    async fn calls_are_taken_once_and_expire() {
        let o = Outstanding::new(8, Duration::from_secs(60));
        o.insert(key("s", "1"), "echo");
        o.insert(key("s", "\"1\""), "leak");
        assert_eq!(o.take(&key("s", "1")), Some("echo"));
        assert_eq!(o.take(&key("s", "1")), None, "taken once");
        assert_eq!(o.take(&key("t", "\"1\"")), None, "another session");
        tokio::time::advance(Duration::from_secs(61)).await;
        assert_eq!(o.take(&key("s", "\"1\"")), None, "expired");
        assert!(o.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_map_drops_the_expired_then_the_oldest() {
        let o = Outstanding::new(2, Duration::from_secs(60));
        o.insert(key("s", "1"), 1);
        tokio::time::advance(Duration::from_secs(1)).await;
        o.insert(key("s", "2"), 2);
        o.insert(key("s", "3"), 3);
        assert_eq!(o.len(), 2);
        assert_eq!(o.take(&key("s", "1")), None, "the oldest went");
        tokio::time::advance(Duration::from_secs(61)).await;
        o.insert(key("s", "4"), 4);
        o.insert(key("s", "5"), 5);
        assert_eq!(o.len(), 2, "expired entries made room");
        assert_eq!(o.take(&key("s", "4")), Some(4));
    }
}
