//! A bounded cache of answers that expire: what the token and access-review authenticators remember so that a
//! busy client does not cost a round trip to the core cluster per request.

use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lru::LruCache;

/// Least-recently-used entries go first when the cache is full; each entry has its own time to live.
pub struct ExpiringCache<K: Hash + Eq, V: Clone> {
    entries: Mutex<LruCache<K, (Instant, V)>>,
}

impl<K: Hash + Eq, V: Clone> ExpiringCache<K, V> {
    /// A cache of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = std::num::NonZeroUsize::new(capacity).unwrap_or(std::num::NonZeroUsize::MIN);
        ExpiringCache {
            entries: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// The value for `key` if it has not expired.
    pub fn get(&self, key: &K) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Some(value.clone()),
            Some(_) => {
                entries.pop(key);
                None
            }
            None => None,
        }
    }

    /// Remembers `value` for `ttl` (a zero TTL remembers nothing).
    pub fn insert(&self, key: K, value: V, ttl: Duration) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.put(key, (Instant::now() + ttl, value));
    }

    /// How many entries are held (expired ones included until they are looked up or pushed out).
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_and_expiring() {
        let cache = ExpiringCache::new(2);
        cache.insert("a", 1, Duration::from_secs(60));
        cache.insert("b", 2, Duration::from_secs(60));
        assert_eq!(cache.get(&"a"), Some(1));
        cache.insert("c", 3, Duration::from_secs(60));
        // "b" was the least recently used.
        assert_eq!(cache.get(&"b"), None);
        assert_eq!(cache.len(), 2);
        cache.insert("d", 4, Duration::from_nanos(1));
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(cache.get(&"d"), None);
        cache.insert("e", 5, Duration::ZERO);
        assert_eq!(cache.get(&"e"), None);
    }
}
