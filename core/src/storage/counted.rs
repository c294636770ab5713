//! [`CountedMap`]: the watch cache's objects by key, able to say how many keys lie after a key in a prefix without
//! walking them. A paged LIST reports `remainingItemCount`; counting the rest of a million-object collection one
//! entry at a time took ~100 ms per page, under the cache's lock.

use std::collections::BTreeMap;
use std::ops::Bound;

/// A bucket is split in two once it holds more keys than this.
const MAX_BUCKET: usize = 2048;

/// A `BTreeMap` plus a coarse index: the keys are cut into buckets at boundary keys, each boundary with the number
/// of keys from it up to the next boundary. Counting a range walks at most the two buckets at its ends and adds
/// the counts of those between: O(bucket + n / bucket) rather than O(n).
#[derive(Debug)]
pub(crate) struct CountedMap<V> {
    map: BTreeMap<String, V>,
    /// Boundary → keys in [boundary, next boundary). The first boundary is `""`, below every key. A boundary need
    /// not be a key of the map (its key may have been removed since).
    buckets: BTreeMap<String, usize>,
}

impl<V> Default for CountedMap<V> {
    fn default() -> Self {
        CountedMap {
            map: BTreeMap::new(),
            buckets: BTreeMap::from([(String::new(), 0)]),
        }
    }
}

impl<V> From<BTreeMap<String, V>> for CountedMap<V> {
    fn from(map: BTreeMap<String, V>) -> Self {
        let mut buckets = BTreeMap::from([(String::new(), 0)]);
        let mut current = String::new();
        for key in map.keys() {
            let count = buckets.get_mut(&current).expect("the current bucket");
            if *count == MAX_BUCKET / 2 {
                current = key.clone();
                buckets.insert(current.clone(), 1);
            } else {
                *count += 1;
            }
        }
        CountedMap { map, buckets }
    }
}

impl<V> CountedMap<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.map.get(key)
    }

    pub fn range(
        &self,
        range: (Bound<&str>, Bound<&str>),
    ) -> std::collections::btree_map::Range<'_, String, V> {
        self.map.range::<str, _>(range)
    }

    pub fn clear(&mut self) {
        *self = CountedMap::default();
    }

    /// The boundary of the bucket `key` falls in.
    fn bucket_of(&self, key: &str) -> &str {
        self.buckets
            .range::<str, _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .map(|(boundary, _)| boundary.as_str())
            .unwrap_or("")
    }

    pub fn insert(&mut self, key: String, value: V) -> Option<V> {
        let bucket = self.bucket_of(&key).to_string();
        let old = self.map.insert(key, value);
        if old.is_none() {
            let count = self.buckets.get_mut(&bucket).expect("a bucket");
            *count += 1;
            if *count > MAX_BUCKET {
                self.split(bucket);
            }
        }
        old
    }

    pub fn remove(&mut self, key: &str) -> Option<V> {
        let old = self.map.remove(key)?;
        let bucket = self.bucket_of(key).to_string();
        let count = self.buckets.get_mut(&bucket).expect("a bucket");
        *count -= 1;
        // An empty bucket joins the one before it (whose count does not change); the first one stays.
        if *count == 0 && !bucket.is_empty() {
            self.buckets.remove(&bucket);
        }
        Some(old)
    }

    /// Cuts the bucket at `boundary` in two at its middle key.
    fn split(&mut self, boundary: String) {
        let count = self.buckets[&boundary];
        let middle = self
            .map
            .range::<str, _>((Bound::Included(boundary.as_str()), Bound::Unbounded))
            .nth(count / 2)
            .map(|(key, _)| key.clone())
            .expect("a bucket holds its count of keys");
        self.buckets.insert(boundary, count / 2);
        self.buckets.insert(middle, count - count / 2);
    }

    /// How many keys above `lower` and below `before` (`None`: no upper bound).
    fn count_between(&self, lower: Bound<&str>, before: Option<&str>) -> usize {
        let (Bound::Included(floor) | Bound::Excluded(floor)) = lower else {
            return self.count_between(Bound::Included(""), before);
        };
        if before.is_some_and(|before| before <= floor) {
            return 0;
        }
        let upper = before.map_or(Bound::Unbounded, Bound::Excluded);
        // The first boundary above `floor`: keys up to it are counted one by one, as are keys from the last
        // boundary below `before`; the buckets in between by their counts.
        let Some((first, _)) = self
            .buckets
            .range::<str, _>((Bound::Excluded(floor), upper))
            .next()
        else {
            return self.map.range::<str, _>((lower, upper)).count();
        };
        let head = self
            .map
            .range::<str, _>((lower, Bound::Excluded(first.as_str())))
            .count();
        let mut middle = self
            .buckets
            .range::<str, _>((Bound::Included(first.as_str()), upper))
            .peekable();
        let mut counted = 0;
        while let Some((boundary, count)) = middle.next() {
            if middle.peek().is_some() || before.is_none() {
                counted += count;
            } else {
                // The last bucket may reach past `before`.
                counted += self
                    .map
                    .range::<str, _>((Bound::Included(boundary.as_str()), upper))
                    .count();
            }
        }
        head + counted
    }

    /// How many keys starting with `prefix` come after `after`.
    pub fn count_after_in_prefix(&self, after: &str, prefix: &str) -> usize {
        let lower = if after >= prefix {
            Bound::Excluded(after)
        } else {
            Bound::Included(prefix)
        };
        match prefix_end(prefix) {
            Some(end) => self.count_between(lower, Some(&end)),
            None if prefix.is_empty() => self.count_between(lower, None),
            None => self
                .map
                .range::<str, _>((lower, Bound::Unbounded))
                .take_while(|(key, _)| key.starts_with(prefix))
                .count(),
        }
    }
}

/// The smallest string above every string starting with `prefix`, when its last character is ASCII below `~`
/// (storage prefixes end with `/`).
fn prefix_end(prefix: &str) -> Option<String> {
    let last = *prefix.as_bytes().last()?;
    (last < 0x7e).then(|| {
        let mut end = prefix[..prefix.len() - 1].to_string();
        end.push(char::from(last + 1));
        end
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The count by walking, to compare with.
    fn walked(map: &CountedMap<u32>, after: &str, prefix: &str) -> usize {
        map.map
            .keys()
            .filter(|k| k.as_str() > after && k.starts_with(prefix))
            .count()
    }

    fn check(map: &CountedMap<u32>) {
        assert_eq!(map.buckets.values().sum::<usize>(), map.map.len());
        assert!(map.buckets.values().all(|c| *c <= MAX_BUCKET));
        for prefix in ["/r/", "/r/a/", "/r/b/", "/s/", ""] {
            for after in [
                "",
                "/r/",
                "/r/a/",
                "/r/a/00500",
                "/r/a/02999\0",
                "/r/b/0",
                "/r/b/01234",
                "/t",
            ] {
                assert_eq!(
                    map.count_after_in_prefix(after, prefix),
                    walked(map, after, prefix),
                    "after {after:?} in {prefix:?}"
                );
            }
        }
    }

    #[test]
    fn counts_as_walking_does_through_inserts_and_removes() {
        let mut map = CountedMap::default();
        // Inserted out of order, so that buckets split in the middle of the key space.
        for i in (0..6000).rev().step_by(2).chain((0..6000).step_by(2)) {
            let ns = if i % 3 == 0 { "a" } else { "b" };
            map.insert(format!("/r/{ns}/{i:05}"), i);
        }
        map.insert("/s/x".into(), 0);
        assert!(
            map.buckets.len() >= 3,
            "buckets split: {:?}",
            map.buckets.values().collect::<Vec<_>>()
        );
        check(&map);
        // Removing most keys empties buckets, which join their neighbours.
        for i in 0..5500 {
            let ns = if i % 3 == 0 { "a" } else { "b" };
            assert_eq!(map.remove(&format!("/r/{ns}/{i:05}")), Some(i));
        }
        assert_eq!(map.remove("/r/a/00000"), None);
        check(&map);
        // Replacing a value changes no count.
        map.insert("/s/x".into(), 1);
        check(&map);
    }

    #[test]
    fn a_loaded_map_is_counted_too() {
        let loaded: BTreeMap<String, u32> =
            (0..5000).map(|i| (format!("/r/a/{i:05}"), i)).collect();
        let mut map = CountedMap::from(loaded);
        check(&map);
        map.insert("/r/b/01234".into(), 0);
        map.remove("/r/a/00500");
        check(&map);
        map.clear();
        assert_eq!(map.count_after_in_prefix("", ""), 0);
    }

    #[test]
    fn prefix_end_is_above_every_key_with_the_prefix() {
        assert_eq!(
            prefix_end("/registry/pizzas/").as_deref(),
            Some("/registry/pizzas0")
        );
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("a~"), None);
    }
}
