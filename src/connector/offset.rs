//! Upstream positions: where in an upstream's change log a CDC backfill or source stands.
//!
//! A CDC backfill's state table stores its offset in the `cdc_offset` column as JSON
//! (`{"Postgres":{"lsn":123}}`, the layout RisingWave users know from its state tables). This
//! type is the one place that writes and reads it.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A position in an upstream's change log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CdcOffset {
    /// A PostgreSQL WAL position.
    Postgres {
        /// The log sequence number.
        lsn: u64,
    },
}

impl CdcOffset {
    /// The JSON stored in a state table's `cdc_offset` column.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an offset serializes")
    }

    /// The offset stored as `json`.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json)
            .map_err(|e| Error::Storage(format!("a stored CDC offset is malformed ({json}): {e}")))
    }

    /// True for the offset of no position (a backfill that has not read yet).
    pub fn is_start(&self) -> bool {
        matches!(self, CdcOffset::Postgres { lsn: 0 })
    }
}

/// Offsets of one upstream compare by their position in its log; offsets of different kinds of
/// upstream do not compare.
impl PartialOrd for CdcOffset {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (CdcOffset::Postgres { lsn: a }, CdcOffset::Postgres { lsn: b }) => Some(a.cmp(b)),
        }
    }
}

impl std::fmt::Display for CdcOffset {
    /// As the upstream prints it: `16/B374D848` for a Postgres LSN.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CdcOffset::Postgres { lsn } => write!(f, "{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_round_trip_through_the_stored_json() {
        let offset = CdcOffset::Postgres { lsn: 0x16_B374_D848 };
        assert_eq!(offset.to_json(), r#"{"Postgres":{"lsn":97500059720}}"#);
        assert_eq!(CdcOffset::from_json(&offset.to_json()).unwrap(), offset);
        assert_eq!(offset.to_string(), "16/B374D848");
        assert!(CdcOffset::from_json(r#"{"Postgres":{}}"#).is_err());
        assert!(CdcOffset::Postgres { lsn: 0 }.is_start());
    }

    #[test]
    fn offsets_order_by_their_log_position() {
        let at = |lsn| CdcOffset::Postgres { lsn };
        assert!(at(0x1_0000_0000) > at(0xFFFF_FFFF));
        assert!(at(5) >= at(5) && at(4) < at(5));
        assert!(at(0).is_start() && !at(1).is_start());
    }
}
