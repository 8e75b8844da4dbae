//! Identifiers of catalog and runtime objects, each its own newtype.

use std::fmt;

use serde::{Deserialize, Serialize};

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// A relation with stored state: a table, a materialized view or an internal state table.
    /// It is also the key prefix of the relation's rows in storage.
    TableId(u32)
);
id_type!(
    /// A streaming actor: one task running a chain of executors.
    ActorId(u32)
);
id_type!(
    /// A logical time slice cut by barriers. Epoch `e` holds the changes between barrier `e` and
    /// barrier `e + 1`; it is committed when barrier `e + 1` has passed every actor.
    Epoch(u64)
);
id_type!(
    /// One of [`VirtualNode::COUNT`] hash partitions of a relation's key space.
    VirtualNode(u16)
);

impl VirtualNode {
    /// How many virtual nodes every relation is partitioned into.
    pub const COUNT: usize = 256;
}

impl Epoch {
    /// The epoch after this one.
    pub fn next(self) -> Epoch {
        Epoch(self.0 + 1)
    }
}
