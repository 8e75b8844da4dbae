//! The groups an aggregate keeps between flushes, and what it knows of those it does not keep.
//!
//! After a flush every group it touched is cached as stored, so a group touched again needs no
//! read. The cache is emptied whole when the next flush's groups would take it past its
//! capacity ([`CACHE_GROUPS`]). A new view's aggregate starts over an empty result table
//! (`complete`): a group it has never stored is then new and is not looked for in storage (a
//! point read per new group was a fifth of a grouped view's build). To keep knowing that once
//! its cache has been emptied, it keeps the hashes of the emptied groups' keys (up to
//! [`EVICTED_KEYS`]): a group among them is read back (a hash that collides, or a group
//! deleted since, costs a read that finds nothing), any other is new.

use super::Group;

/// Groups an actor keeps in memory between epochs: a backfill's epochs touch most groups again
/// when there are fewer than its rows.
pub const CACHE_GROUPS: usize = 100_000;

/// Hashes of emptied groups' keys an actor keeps (about 16 bytes each) before it stops
/// knowing which groups are new.
const EVICTED_KEYS: usize = 4 << 20;

/// Where a group not in the cache is.
#[derive(Debug, PartialEq)]
pub enum Elsewhere {
    /// Surely in no stored row: a new group.
    Nowhere,
    /// Perhaps stored: read it.
    Storage,
}

/// An aggregate's cache of groups (see the module docs).
pub struct GroupCache {
    groups: hashbrown::HashMap<Vec<u8>, Group>,
    capacity: usize,
    complete: bool,
    evicted: hashbrown::HashSet<u64>,
}

impl GroupCache {
    /// An empty cache of `capacity` groups; `complete` when nothing is stored yet.
    pub fn new(capacity: usize, complete: bool) -> Self {
        let (groups, evicted) = Default::default();
        Self { groups, capacity, complete, evicted }
    }

    /// The group under `key`, taken out of the cache, or where else it is.
    pub fn take(&mut self, key: &[u8]) -> Result<Group, Elsewhere> {
        self.groups.remove(key).ok_or_else(|| self.elsewhere(key))
    }

    /// Where the group under `key` is when the cache does not hold it; `None` when it does.
    pub fn locate(&self, key: &[u8]) -> Option<Elsewhere> {
        (!self.groups.contains_key(key)).then(|| self.elsewhere(key))
    }

    fn elsewhere(&self, key: &[u8]) -> Elsewhere {
        match self.complete {
            true if !self.evicted.contains(&key_hash(key)) => Elsewhere::Nowhere,
            _ => Elsewhere::Storage,
        }
    }

    /// Makes room for `incoming` groups: empties the cache when they would not fit beside it.
    pub fn make_room(&mut self, incoming: usize) {
        if self.groups.len() + incoming <= self.capacity {
            return;
        }
        if self.complete {
            self.evicted.extend(self.groups.keys().map(|k| key_hash(k)));
            if self.evicted.len() > EVICTED_KEYS {
                self.complete = false;
                self.evicted = hashbrown::HashSet::new();
            }
        }
        self.groups.clear();
    }

    /// Caches a stored group.
    pub fn insert(&mut self, key: Vec<u8>, group: Group) {
        self.groups.insert(key, group);
    }
}

/// The hash of a result key that [`GroupCache`] keeps once it lets the group go.
fn key_hash(key: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::VirtualNode;

    fn group(row_count: i64) -> Group {
        let (values, states) = (Vec::new(), Vec::new());
        let vnode = VirtualNode(0);
        Group { vnode, values, row_count, states, stored: true, previous: None }
    }

    #[test]
    fn a_complete_cache_tells_new_groups_from_emptied_ones_and_an_incomplete_one_reads_all() {
        let mut cache = GroupCache::new(3, true);
        assert_eq!(cache.take(b"a").unwrap_err(), Elsewhere::Nowhere, "nothing stored yet");
        cache.insert(b"a".to_vec(), group(1));
        cache.insert(b"b".to_vec(), group(2));
        assert_eq!(cache.locate(b"a"), None);
        cache.make_room(1); // fits beside them: kept
        assert_eq!(cache.locate(b"b"), None);
        cache.make_room(2); // does not: emptied, their keys remembered
        assert_eq!(cache.locate(b"a"), Some(Elsewhere::Storage));
        assert_eq!(cache.take(b"b").unwrap_err(), Elsewhere::Storage);
        assert_eq!(cache.take(b"c").unwrap_err(), Elsewhere::Nowhere, "never stored");
        cache.insert(b"c".to_vec(), group(3));
        assert_eq!(cache.take(b"c").unwrap().row_count, 3);
        // A view's aggregate over a table that held rows knows nothing new.
        let mut old = GroupCache::new(2, false);
        assert_eq!(old.take(b"z").unwrap_err(), Elsewhere::Storage);
    }
}
