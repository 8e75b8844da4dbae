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
    /// A MySQL / MariaDB binlog position: the file's sequence number (`binlog.000003` is 3)
    /// and the byte position in it.
    MySql {
        /// The binlog file's number.
        file_seq: u32,
        /// The position in the file.
        pos: u32,
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
        self.position() == 0
    }

    /// The binlog position `pos` in the file called `file` (`binlog.000003`).
    pub fn mysql(file: &str, pos: u64) -> Result<Self> {
        let seq = file.rsplit('.').next().and_then(|s| s.parse().ok());
        match (seq, u32::try_from(pos)) {
            (Some(file_seq), Ok(pos)) => Ok(CdcOffset::MySql { file_seq, pos }),
            _ => Err(Error::Upstream {
                code: "XX000",
                message: format!(
                    "the upstream reported an unreadable binlog position {file}:{pos}"
                ),
            }),
        }
    }

    /// The offset as one number that orders like the upstream's log: the LSN of Postgres; the
    /// file number and position of a binlog, in the high and low 32 bits. Changes carry it.
    pub fn position(&self) -> u64 {
        match *self {
            CdcOffset::Postgres { lsn } => lsn,
            CdcOffset::MySql { file_seq, pos } => (u64::from(file_seq) << 32) | u64::from(pos),
        }
    }

    /// An offset of the same kind of upstream as `self` at `position` (see
    /// [`CdcOffset::position`]).
    pub fn at(&self, position: u64) -> Self {
        match self {
            CdcOffset::Postgres { .. } => CdcOffset::Postgres { lsn: position },
            CdcOffset::MySql { .. } => {
                CdcOffset::MySql { file_seq: (position >> 32) as u32, pos: position as u32 }
            }
        }
    }
}

/// Offsets of one upstream compare by their position in its log; offsets of different kinds of
/// upstream do not compare.
impl PartialOrd for CdcOffset {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (CdcOffset::Postgres { .. }, CdcOffset::Postgres { .. })
            | (CdcOffset::MySql { .. }, CdcOffset::MySql { .. }) => {
                Some(self.position().cmp(&other.position()))
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for CdcOffset {
    /// As the upstream prints it: `16/B374D848` for a Postgres LSN, `000003:1234` (file
    /// number and position) for a binlog.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CdcOffset::Postgres { lsn } => write!(f, "{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF),
            CdcOffset::MySql { file_seq, pos } => write!(f, "{file_seq:06}:{pos}"),
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
    fn binlog_offsets_order_by_file_then_position() {
        let at = |file: &str, pos| CdcOffset::mysql(file, pos).unwrap();
        assert_eq!(at("binlog.000003", 1234), CdcOffset::MySql { file_seq: 3, pos: 1234 });
        assert!(at("binlog.000004", 4) > at("binlog.000003", 900_000));
        assert_eq!(at("binlog.000003", 1234).to_string(), "000003:1234");
        let json = at("binlog.000003", 1234).to_json();
        assert_eq!(json, r#"{"MySql":{"file_seq":3,"pos":1234}}"#);
        assert_eq!(CdcOffset::from_json(&json).unwrap(), at("binlog.000003", 1234));
        let position = at("binlog.000003", 1234).position();
        assert_eq!(at("binlog.000001", 4).at(position), at("binlog.000003", 1234));
        assert_eq!(at("b.000001", 4).partial_cmp(&CdcOffset::Postgres { lsn: 1 }), None);
        assert!(CdcOffset::mysql("binlog", 4).is_err());
    }

    #[test]
    fn offsets_order_by_their_log_position() {
        let at = |lsn| CdcOffset::Postgres { lsn };
        assert!(at(0x1_0000_0000) > at(0xFFFF_FFFF));
        assert!(at(5) >= at(5) && at(4) < at(5));
        assert!(at(0).is_start() && !at(1).is_start());
    }
}
