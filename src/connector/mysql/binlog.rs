//! Reading a MySQL / MariaDB binlog as a replica: committed transactions as [`RowChange`](crate::connector::common::RowChange)s.
//!
//! [`BinlogReader`](crate::connector::mysql::binlog::BinlogReader) registers with the source's `server.id` and streams the binlog from a
//! position (a transaction boundary). Each transaction (`BEGIN` .. `XID`, or `COMMIT` for
//! non-transactional engines) comes back whole, its changes tagged with the position of its
//! end ([`CdcOffset::position`] of file and offset), so a reader that restarts from the last
//! recorded position sees the next transaction whole again.
//!
//! Values are rendered as the text a snapshot page reads for the same stored value (see
//! [`text`](crate::connector::mysql::text)), so a row read by the snapshot and the same row from the
//! binlog are identical after the cast. Column types, signedness, names, charsets and the
//! members of ENUM and SET come from each event's table map (`binlog_row_metadata = FULL`), not
//! from a description taken earlier: a row follows the schema it was written with.
//!
//! Workarounds for the binlog decoder (mysql_common 0.37): signed MEDIUMINT arrives without
//! sign extension; negative TIME(1) / TIME(2) values with a fraction make it overflow, so such
//! columns are decoded through a copy of the table map that reads their four bytes raw
//! ([`table_map_for_rows`]); the first rotate event of a stream (before the format description)
//! carries checksum bytes in its name and is ignored.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use futures::StreamExt;
use mysql_async::binlog::BinlogVersion;
use mysql_async::binlog::events::{Event, EventData, OptionalMetadataField, TableMapEvent};
use mysql_async::binlog::row::BinlogRow;
use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn};

use crate::connector::common::RowChange;
use crate::connector::mysql::statements::{
    changes_rows, dropped_columns, reshaped_tables, statement_logged, truncated_tables,
};
use crate::connector::mysql::text::{BinlogColumn, binlog_text};
use crate::connector::mysql::{MySqlSourceConfig, master_status, upstream_error};
use crate::connector::offset::CdcOffset;
use crate::error::{Error, Result};

/// What the reader knows of a table id of the source's database.
struct TableInfo {
    /// `database.table`, as CDC tables name it.
    name: String,
    columns: Vec<BinlogColumn>,
    /// Primary-key column indices, when the table map lists them.
    pk: Option<Vec<usize>>,
    /// The table map to decode rows with, when the real one trips the decoder.
    patched: Option<TableMapEvent<'static>>,
}

/// A committed transaction read from the binlog.
#[derive(Debug)]
pub struct Transaction {
    /// Its changes to the source's tables.
    pub changes: Vec<RowChange>,
    /// The position of its end (see [`CdcOffset::position`]).
    pub position: u64,
    /// When it committed upstream, in seconds since the Unix epoch.
    pub committed_at: u32,
    /// The GTID position after it, where the server has GTIDs.
    pub gtid: Option<String>,
    /// False for a part of a large transaction: more of it follows, and `position` is not a
    /// place to resume from.
    pub complete: bool,
}

/// A replica's view of the binlog, from a position on.
pub struct BinlogReader {
    config: MySqlSourceConfig,
    stream: Option<BinlogStream>,
    /// The binlog files' base name (`binlog` of `binlog.000003`).
    base: Option<String>,
    /// Where the next transaction starts: the end of the last one returned.
    at: CdcOffset,
    /// A format description was seen on this stream (rotates before it are artificial).
    seen_format: bool,
    tables: HashMap<u64, TableInfo>,
    /// Changes of the transaction being read.
    pending: Vec<RowChange>,
    /// Inside `BEGIN` (or a GTID event) .. commit.
    in_transaction: bool,
    /// MariaDB's GTID position after the last transaction returned: per replication domain,
    /// the server id and sequence number of its last transaction. Empty where the server has
    /// no GTIDs (MySQL here, or a MariaDB that never logged a transaction).
    gtids: BTreeMap<u32, (u32, u64)>,
    /// The GTID of the transaction being read.
    current_gtid: Option<(u32, u32, u64)>,
    /// The server's binlog events carry a CRC32 (which a rotate event sent before the format
    /// description still has at the end of its file name).
    checksum: bool,
    /// The stream was asked for by GTID: its file is learnt from its first rotate event.
    by_gtid: bool,
    /// The upstream is MariaDB (whose table maps give geometry columns a charset).
    mariadb: bool,
    /// Part of the transaction being read has been returned already.
    parted: bool,
    /// When the stream last handed over an event (or was started).
    last_event: Instant,
    /// How long it may hand over nothing (see [`STALL_AFTER`]).
    stall_after: Duration,
    /// The stream reads nothing (the failpoint `binlog:stall:<database>`).
    stalled: bool,
}

/// How often an upstream with nothing new sends a heartbeat event on the binlog stream.
const HEARTBEAT_PERIOD: Duration = Duration::from_secs(5);
/// How long the stream may hand over nothing, not even a heartbeat, before it is taken for
/// stuck: the stall is an error (shown as the source's) and the stream is started again from
/// the last transaction's end, so nothing is lost or read twice. Each stall in a row doubles
/// it (up to [`MAX_STALL_AFTER`]), so a link that is only slow is not started over and over.
const STALL_AFTER: Duration = Duration::from_secs(30);
const MAX_STALL_AFTER: Duration = Duration::from_secs(3600);

/// Changes of one transaction held before they go on without waiting for its commit, which
/// bounds the memory a large transaction takes. Parts are safe to emit early: a transaction's
/// events are contiguous in the binlog, so their own positions fall on the same side of every
/// snapshot page's low offset (a transaction boundary) as its commit; the recorded position
/// moves only at commits, and a transaction read again after a crash re-applies rows the
/// table holds already, which its upserts absorb.
const PART_CHANGES: usize = 4096;

/// A MariaDB GTID event (type 162), which the decoder does not know.
const MARIADB_GTID_EVENT: u8 = 162;
/// Its flag for a statement outside a transaction (DDL): no XID ends it.
const GTID_STANDALONE: u8 = 0x01;

impl BinlogReader {
    /// A reader that starts after the transaction ending at `at` (at the end of the binlog
    /// when `None`). On MariaDB a recorded GTID position `gtid` (`0-1-42,1-1-7`) takes
    /// precedence: it still finds the place after the upstream's files changed (a failover to
    /// a replica, whose files are numbered differently).
    pub fn new(config: MySqlSourceConfig, at: Option<CdcOffset>, gtid: Option<&str>) -> Self {
        Self {
            config,
            stream: None,
            base: None,
            at: at.unwrap_or(CdcOffset::MySql { file_seq: 0, pos: 0 }),
            seen_format: false,
            tables: HashMap::new(),
            pending: Vec::new(),
            in_transaction: false,
            gtids: gtid.map(parse_gtids).unwrap_or_default(),
            current_gtid: None,
            checksum: true,
            by_gtid: false,
            mariadb: false,
            parted: false,
            last_event: Instant::now(),
            stall_after: STALL_AFTER,
            stalled: false,
        }
    }

    /// Where the next transaction starts.
    pub fn position(&self) -> CdcOffset {
        self.at
    }

    /// The GTID position after the last transaction returned (`domain-server-seq`, one per
    /// domain, comma-separated), where the server has GTIDs.
    pub fn gtid_position(&self) -> Option<String> {
        (!self.gtids.is_empty()).then(|| format_gtids(&self.gtids))
    }

    /// Drops the connection (after an error); the next read reconnects at [`Self::position`].
    pub fn reset(&mut self) {
        self.stream = None;
        self.pending.clear();
        self.in_transaction = false;
        self.parted = false;
        self.tables.clear();
        self.seen_format = false;
        self.stalled = false;
    }

    async fn connect(&mut self) -> Result<&mut BinlogStream> {
        if self.stream.is_none() {
            let mut conn = self.config.connect_to(None).await?;
            let (file, pos) = master_status(&mut conn).await?;
            let base = match file.rsplit_once('.') {
                Some((base, _)) => base.to_owned(),
                None => file.clone(),
            };
            let server: Option<(String, String)> = conn
                .query_first("SELECT VERSION(), @@binlog_checksum")
                .await
                .map_err(upstream_error)?;
            let (version, checksum) = server.unwrap_or_default();
            let mariadb = version.contains("MariaDB");
            self.mariadb = mariadb;
            self.checksum = !checksum.eq_ignore_ascii_case("NONE");
            if self.at.is_start() {
                self.at = CdcOffset::mysql(&file, pos)?;
                if mariadb {
                    self.gtids = parse_gtids(&gtid_position_at(&mut conn, &file, pos).await?);
                }
            }
            let CdcOffset::MySql { file_seq, pos } = self.at else {
                return Err(Error::Storage(format!(
                    "a mysql-cdc source holds a non-binlog offset {}",
                    self.at
                )));
            };
            let file = format!("{base}.{file_seq:06}");
            // Heartbeats while there is nothing new (in nanoseconds), so a quiet stream is
            // told from a stuck one (see `STALL_AFTER`).
            conn.query_drop(format!(
                "SET @master_heartbeat_period = {}",
                HEARTBEAT_PERIOD.as_nanos()
            ))
            .await
            .map_err(upstream_error)?;
            let mut request = BinlogStreamRequest::new(self.config.server_id);
            self.by_gtid = mariadb && !self.gtids.is_empty();
            if mariadb {
                // GTID events as they are, rather than rewritten as `BEGIN`.
                conn.query_drop("SET @mariadb_slave_capability = 4")
                    .await
                    .map_err(upstream_error)?;
            }
            if self.by_gtid {
                let state = format_gtids(&self.gtids);
                conn.exec_drop("SET @slave_connect_state = ?", (state,))
                    .await
                    .map_err(upstream_error)?;
                conn.query_drop("SET @slave_gtid_strict_mode = 0").await.map_err(upstream_error)?;
            } else {
                request = request.with_filename(file.as_bytes()).with_pos(u64::from(pos.max(4)));
            }
            let stream =
                conn.get_binlog_stream(request).await.map_err(|e| binlog_error(e, self.at))?;
            self.base = Some(base);
            self.seen_format = false;
            self.stream = Some(stream);
            self.last_event = Instant::now();
            self.stalled =
                crate::failpoint::fires(|| format!("binlog:stall:{}", self.config.database));
        }
        Ok(self.stream.as_mut().expect("connected above"))
    }

    /// The next committed transaction: its changes to tables of the source's database (none
    /// for a transaction on other tables, or a DDL statement), the position of its end (which
    /// [`Self::position`] then returns) and when it committed (seconds since the Unix epoch).
    pub async fn next_transaction(&mut self) -> Result<Transaction> {
        loop {
            let at = self.at;
            self.connect().await?;
            let deadline = self.last_event + self.stall_after;
            let stalled = self.stalled;
            let stream = self.stream.as_mut().expect("connected above");
            let next = async {
                match stalled {
                    true => std::future::pending().await,
                    false => stream.next().await,
                }
            };
            // The event if one is there (even past the deadline, after a pause of the reader).
            let read = tokio::time::timeout_at(deadline.into(), next).await;
            let Ok(read) = read else {
                let quiet = self.last_event.elapsed();
                self.stall_after = (self.stall_after * 2).min(MAX_STALL_AFTER);
                return Err(Error::Upstream {
                    code: "08006",
                    message: format!(
                        "the binlog stream read nothing for {} s, not even the heartbeat the \
                         upstream sends every {} s; reading it again",
                        quiet.as_secs(),
                        HEARTBEAT_PERIOD.as_secs()
                    ),
                });
            };
            self.last_event = Instant::now();
            self.stall_after = STALL_AFTER;
            let event = match read {
                Some(event) => event.map_err(|e| binlog_error(e, at))?,
                None => {
                    return Err(Error::Upstream {
                        code: "08006",
                        message: "the upstream closed the binlog stream".into(),
                    });
                }
            };
            if let Some((changes, position)) = self.on_event(&event)? {
                let committed_at = event.header().timestamp();
                let gtid = self.gtid_position();
                return Ok(Transaction { changes, position, committed_at, gtid, complete: true });
            }
            if self.pending.len() >= PART_CHANGES {
                // A large transaction goes on in parts, each change tagged with the position of
                // its own rows event (see `PART_CHANGES`).
                let changes = std::mem::take(&mut self.pending);
                self.parted = true;
                let position = changes.last().map_or(0, |c| c.position);
                let committed_at = event.header().timestamp();
                return Ok(Transaction {
                    changes,
                    position,
                    committed_at,
                    gtid: None,
                    complete: false,
                });
            }
        }
    }

    /// Handles one event; returns a finished transaction.
    fn on_event(&mut self, event: &Event) -> Result<Option<(Vec<RowChange>, u64)>> {
        let log_pos = event.header().log_pos();
        if event.header().event_type_raw() == MARIADB_GTID_EVENT {
            self.on_gtid_event(event);
            return Ok(None);
        }
        let data = event.read_data().map_err(decode_error)?;
        match data {
            Some(EventData::FormatDescriptionEvent(_)) => self.seen_format = true,
            // The first rotate of a stream asked for by GTID names the file it starts in; it
            // comes before the format description, with the checksum still on its name.
            Some(EventData::RotateEvent(rotate)) if self.by_gtid && !self.seen_format => {
                let name = rotate.name_raw();
                let name = match self.checksum {
                    true => &name[..name.len().saturating_sub(4)],
                    false => name,
                };
                self.at = CdcOffset::mysql(&String::from_utf8_lossy(name), rotate.position())?;
            }
            Some(EventData::RotateEvent(rotate)) if self.seen_format => {
                let name = rotate.name();
                let at = CdcOffset::mysql(&name, rotate.position())?;
                if self.pending.is_empty() {
                    self.at = at;
                }
            }
            Some(EventData::TableMapEvent(map)) => self.on_table_map(event, &map),
            Some(EventData::QueryEvent(query)) => {
                let text = query.query();
                match text.as_ref() {
                    "BEGIN" => {
                        self.pending.clear();
                        self.parted = false;
                        self.in_transaction = true;
                    }
                    // A rolled-back transaction logged only what could not be rolled back
                    // (non-transactional tables): that happened.
                    "COMMIT" | "ROLLBACK" => return Ok(Some(self.commit(log_pos))),
                    q if q.starts_with('#') => {}
                    q if changes_rows(q, &query.schema(), &self.config.database) => {
                        return Err(statement_logged(q, &self.config.database, self.at));
                    }
                    // A statement outside a transaction (DDL): the position moves past it, and
                    // a `TRUNCATE` of the source's tables is a change of its own. Inside one
                    // (SAVEPOINT, ..) it moves nothing.
                    q if log_pos > 0 && !self.in_transaction => {
                        let (schema, database) = (query.schema(), &self.config.database);
                        let truncated = truncated_tables(q, &schema, database);
                        self.pending.extend(truncated.into_iter().map(RowChange::truncation));
                        let reshaped = reshaped_tables(q, &schema, database);
                        self.pending
                            .extend(reshaped.into_iter().map(|t| RowChange::reshaped(t, q)));
                        let dropped = dropped_columns(q, &schema, database);
                        self.pending.extend(
                            dropped.into_iter().map(|(t, c)| RowChange::columns_dropped(t, q, c)),
                        );
                        return Ok(Some(self.commit(log_pos)));
                    }
                    _ => {}
                }
            }
            Some(EventData::RowsEvent(rows)) => {
                let table_id = rows.table_id();
                let Some(table) = self.tables.get(&table_id) else { return Ok(None) };
                let stream = self.stream.as_ref().expect("an event came from it");
                let map = match (&table.patched, stream.get_tme(table_id)) {
                    (Some(patched), _) => patched,
                    (None, Some(map)) => map,
                    (None, None) => {
                        return Err(Error::Upstream {
                            code: "XX000",
                            message: format!(
                                "rows of table id {table_id} came without a table map"
                            ),
                        });
                    }
                };
                let mut changes = Vec::new();
                for row in rows.rows(map) {
                    let (before, after) = row.map_err(decode_error)?;
                    let before = before.map(|r| row_text(&r, &table.columns));
                    let after = after.map(|r| row_text(&r, &table.columns));
                    changes.extend(row_changes(&table.name, table.pk.as_deref(), before, after));
                }
                // The event's own position, until the commit gives the transaction's.
                if let CdcOffset::MySql { file_seq, .. } = self.at {
                    let position = CdcOffset::MySql { file_seq, pos: log_pos }.position();
                    changes.iter_mut().for_each(|c| c.position = position);
                }
                self.pending.extend(changes);
            }
            Some(EventData::XidEvent(_)) => return Ok(Some(self.commit(log_pos))),
            _ => {}
        }
        Ok(None)
    }

    /// A MariaDB GTID event: `seq_no` (8 bytes), `domain_id` (4), flags (1); it starts a
    /// transaction unless it is standalone (a DDL statement follows, without XID).
    fn on_gtid_event(&mut self, event: &Event) {
        let data = event.data();
        if data.len() < 13 {
            return;
        }
        let seq = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
        let domain = u32::from_le_bytes(data[8..12].try_into().expect("4 bytes"));
        self.current_gtid = Some((domain, event.header().server_id(), seq));
        self.pending.clear();
        self.parted = false;
        self.in_transaction = data[12] & GTID_STANDALONE == 0;
    }

    /// Ends the transaction read at `log_pos` (the end of its last event).
    fn commit(&mut self, log_pos: u32) -> (Vec<RowChange>, u64) {
        self.in_transaction = false;
        if let Some((domain, server, seq)) = self.current_gtid.take() {
            self.gtids.insert(domain, (server, seq));
        }
        if let CdcOffset::MySql { file_seq, .. } = self.at
            && log_pos > 0
        {
            self.at = CdcOffset::MySql { file_seq, pos: log_pos };
        }
        let position = self.at.position();
        let mut changes = std::mem::take(&mut self.pending);
        // A transaction returned whole carries its commit position; what is left of one that
        // went on in parts keeps its events' (which are below it).
        if !self.parted {
            for change in &mut changes {
                change.position = position;
            }
        }
        self.parted = false;
        (changes, position)
    }

    fn on_table_map(&mut self, event: &Event, map: &TableMapEvent<'_>) {
        if map.database_name() != self.config.database.as_str() {
            return;
        }
        if self.tables.contains_key(&map.table_id()) {
            return; // Ids are not reused for another layout: a DDL gives the table a new id.
        }
        let (columns, pk) = table_columns(map, self.mariadb);
        let name = format!("{}.{}", map.database_name(), map.table_name());
        // A table id is new for each layout: its rows have these columns from here on.
        let names: Option<Vec<String>> = columns.iter().map(|c| c.name.clone()).collect();
        if let Some(names) = names {
            self.pending.push(RowChange::relation(name.clone(), names, Vec::new()));
        }
        let info = TableInfo { name, columns, pk, patched: table_map_for_rows(event) };
        self.tables.insert(map.table_id(), info);
    }
}

/// MariaDB's GTID position at binlog `file` and `pos` (empty where it has none), so a later
/// resume by GTID starts there.
async fn gtid_position_at(conn: &mut Conn, file: &str, pos: u64) -> Result<String> {
    let gtids: Option<Option<String>> = conn
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (file, pos))
        .await
        .map_err(upstream_error)?;
    Ok(gtids.flatten().unwrap_or_default())
}

/// The upstream's binlog end now, as a position (see [`CdcOffset::position`]) and, on MariaDB,
/// the GTID position there: where a new source starts reading.
pub async fn current_position(config: &MySqlSourceConfig) -> Result<(u64, Option<String>)> {
    let mut conn = config.connect_to(None).await?;
    let (file, pos) = master_status(&mut conn).await?;
    let version: Option<String> =
        conn.query_first("SELECT VERSION()").await.map_err(upstream_error)?;
    let gtid = match version.unwrap_or_default().contains("MariaDB") {
        true => Some(gtid_position_at(&mut conn, &file, pos).await?).filter(|g| !g.is_empty()),
        false => None,
    };
    Ok((CdcOffset::mysql(&file, pos)?.position(), gtid))
}

/// A MariaDB GTID position (`0-1-42,1-1-7`), by domain; parts that do not parse are left out.
fn parse_gtids(text: &str) -> BTreeMap<u32, (u32, u64)> {
    text.split(',')
        .filter_map(|gtid| {
            let mut parts = gtid.trim().split('-').map(str::parse::<u64>);
            match (parts.next(), parts.next(), parts.next()) {
                (Some(Ok(domain)), Some(Ok(server)), Some(Ok(seq))) => {
                    Some((domain as u32, (server as u32, seq)))
                }
                _ => None,
            }
        })
        .collect()
}

fn format_gtids(gtids: &BTreeMap<u32, (u32, u64)>) -> String {
    let parts: Vec<String> =
        gtids.iter().map(|(domain, (server, seq))| format!("{domain}-{server}-{seq}")).collect();
    parts.join(",")
}

/// The changes of one binlog row: an insert, a delete, or an update (an upsert of the new row,
/// after a delete of the old one when its key changed or is unknown).
fn row_changes(
    table: &str,
    pk: Option<&[usize]>,
    before: Option<Vec<Option<String>>>,
    after: Option<Vec<Option<String>>>,
) -> Vec<RowChange> {
    let change = |delete, values| RowChange {
        table: table.to_owned(),
        delete,
        values,
        ..RowChange::default()
    };
    match (before, after) {
        (None, Some(after)) => vec![change(false, after)],
        (Some(before), None) => vec![change(true, before)],
        (Some(before), Some(after)) => {
            let same_key = pk.is_some_and(|pk| pk.iter().all(|&i| before.get(i) == after.get(i)));
            if same_key {
                vec![change(false, after)]
            } else {
                vec![change(true, before), change(false, after)]
            }
        }
        (None, None) => Vec::new(),
    }
}

/// An error of the binlog stream; a position the upstream no longer has says so plainly.
fn binlog_error(e: mysql_async::Error, at: CdcOffset) -> Error {
    match e {
        mysql_async::Error::Server(s) if s.code == 1236 => Error::Upstream {
            code: "55000",
            message: format!(
                "the upstream no longer has the binlog at {at} where this source stopped (purged \
                 while Sluice was away?): {}; the changes since are lost to the source, so \
                 recreate it and the tables reading it, or create the source with binlog.lost = \
                 'resnapshot' to have Sluice read on from the binlog's end and read every table \
                 again",
                s.message
            ),
        },
        other => upstream_error(other),
    }
}

fn decode_error(e: std::io::Error) -> Error {
    Error::Upstream { code: "XX000", message: format!("cannot decode a binlog event: {e}") }
}

/// Every value of a binlog row as text.
fn row_text(row: &BinlogRow, columns: &[BinlogColumn]) -> Vec<Option<String>> {
    (0..row.len())
        .map(|i| match (row.as_ref(i), columns.get(i)) {
            (Some(value), Some(column)) => binlog_text(value, column),
            _ => None,
        })
        .collect()
}

/// The columns of a table map (types, signedness, charsets, ENUM and SET members) and its
/// primary key. The optional metadata lists are per class of column, in table order; MariaDB
/// counts geometry columns (binary blobs to it) among the character ones, MySQL does not.
fn table_columns(
    map: &TableMapEvent<'_>,
    mariadb: bool,
) -> (Vec<BinlogColumn>, Option<Vec<usize>>) {
    let n = map.columns_count() as usize;
    let mut columns: Vec<BinlogColumn> = (0..n)
        .map(|i| BinlogColumn {
            ty: map.get_column_type(i).ok().flatten().unwrap_or(ColumnType::MYSQL_TYPE_NULL),
            meta: map.get_column_metadata(i).unwrap_or(&[]).to_vec(),
            unsigned: false,
            charset: 0,
            members: Vec::new(),
            name: None,
        })
        .collect();
    let class = |f: fn(&ColumnType) -> bool| -> Vec<usize> {
        (0..n).filter(|&i| f(&columns[i].ty)).collect()
    };
    let numeric = class(ColumnType::is_numeric_type);
    let character: Vec<usize> = (0..n)
        .filter(|&i| {
            let ty = columns[i].ty;
            ty.is_character_type() || (mariadb && ty == ColumnType::MYSQL_TYPE_GEOMETRY)
        })
        .collect();
    let enum_or_set = class(ColumnType::is_enum_or_set_type);
    let enums = class(ColumnType::is_enum_type);
    let sets = class(ColumnType::is_set_type);
    let mut pk = None;
    for field in map.iter_optional_meta() {
        let Ok(field) = field else { break };
        match field {
            OptionalMetadataField::Signedness(bits) => {
                for (k, &i) in numeric.iter().enumerate() {
                    columns[i].unsigned = bits.get(k).is_some_and(|b| *b);
                }
            }
            OptionalMetadataField::DefaultCharset(charsets) => {
                for &i in &character {
                    columns[i].charset = charsets.default_charset();
                }
                for other in charsets.iter_non_default().flatten() {
                    if let Some(&i) = character.get(other.column_index() as usize) {
                        columns[i].charset = other.charset();
                    }
                }
            }
            OptionalMetadataField::ColumnCharset(charsets) => {
                for (k, charset) in charsets.iter_charsets().enumerate() {
                    if let (Some(&i), Ok(charset)) = (character.get(k), charset) {
                        columns[i].charset = charset;
                    }
                }
            }
            OptionalMetadataField::EnumAndSetDefaultCharset(charsets) => {
                for &i in &enum_or_set {
                    columns[i].charset = charsets.default_charset();
                }
            }
            OptionalMetadataField::EnumStrValue(values) => {
                let lists = values.iter_values().map(|members| {
                    members.map(|m| m.values().iter().map(|v| v.value().into_owned()).collect())
                });
                set_members(&mut columns, &enums, lists);
            }
            OptionalMetadataField::SetStrValue(values) => {
                let lists = values.iter_values().map(|members| {
                    members.map(|m| m.values().iter().map(|v| v.value().into_owned()).collect())
                });
                set_members(&mut columns, &sets, lists);
            }
            OptionalMetadataField::ColumnName(names) => {
                for (column, name) in columns.iter_mut().zip(names.iter_names()) {
                    column.name = name.ok().map(|n| n.name().into_owned());
                }
            }
            OptionalMetadataField::SimplePrimaryKey(key) => {
                pk = Some(key.iter_indexes().flatten().map(|i| i as usize).collect());
            }
            OptionalMetadataField::PrimaryKeyWithPrefix(key) => {
                let columns =
                    key.iter_keys().flatten().map(|k| k.column_index() as usize).collect();
                pk = Some(columns);
            }
            _ => {}
        }
    }
    (columns, pk)
}

/// Gives the `k`-th ENUM (or SET) column of `targets` the `k`-th list of members.
fn set_members(
    columns: &mut [BinlogColumn],
    targets: &[usize],
    lists: impl Iterator<Item = std::io::Result<Vec<String>>>,
) {
    for (&i, members) in targets.iter().zip(lists) {
        if let Ok(members) = members {
            columns[i].members = members;
        }
    }
}

/// A copy of the table map of `event` in which TIME(1) and TIME(2) columns read as
/// TIMESTAMP(0): the same four bytes, taken raw (the decoder overflows on negative values with
/// a fraction); [`time12_text`] decodes them. `None` when the table has no such column.
fn table_map_for_rows(event: &Event) -> Option<TableMapEvent<'static>> {
    const HEADER_LEN: usize = 19;
    let map: TableMapEvent<'_> = event.read_event().ok()?;
    let data = event.data();
    let base = data.as_ptr() as usize;
    let n = map.columns_count() as usize;
    let count_len = match n {
        0..251 => 1,
        251..65_536 => 3,
        65_536..16_777_216 => 4,
        _ => 9,
    };
    let name = map.table_name_raw();
    let types_at = name.as_ptr() as usize - base + name.len() + 1 + count_len;
    let mut patches = Vec::new();
    for i in 0..n {
        if map.get_column_type(i).ok().flatten() == Some(ColumnType::MYSQL_TYPE_TIME2) {
            let meta = map.get_column_metadata(i)?;
            if matches!(meta.first(), Some(1 | 2)) {
                patches.push((types_at + i, meta.as_ptr() as usize - base));
            }
        }
    }
    if patches.is_empty() {
        return None;
    }
    let mut bytes = Vec::new();
    event.write(BinlogVersion::Version4, &mut bytes).ok()?;
    for (type_at, meta_at) in patches {
        bytes[HEADER_LEN + type_at] = ColumnType::MYSQL_TYPE_TIMESTAMP2 as u8;
        bytes[HEADER_LEN + meta_at] = 0;
    }
    let patched = Event::read(event.fde(), &bytes[..]).ok()?;
    Some(patched.read_event::<TableMapEvent<'_>>().ok()?.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gtid_positions_round_trip() {
        let gtids = parse_gtids("0-1-42, 1-2-7");
        assert_eq!(gtids[&0], (1, 42));
        assert_eq!(format_gtids(&gtids), "0-1-42,1-2-7");
        assert!(parse_gtids("").is_empty());
        assert!(parse_gtids("x-1").is_empty());
    }

    #[test]
    fn updates_delete_the_old_row_only_when_the_key_changes() {
        let row = |k: &str, v: &str| Some(vec![Some(k.to_owned()), Some(v.to_owned())]);
        let kinds = |changes: Vec<RowChange>| -> Vec<(bool, String)> {
            changes.iter().map(|c| (c.delete, c.values[0].clone().unwrap())).collect()
        };
        let same = row_changes("d.t", Some(&[0]), row("1", "a"), row("1", "b"));
        assert_eq!(kinds(same), [(false, "1".to_owned())]);
        let moved = row_changes("d.t", Some(&[0]), row("1", "a"), row("2", "a"));
        assert_eq!(kinds(moved), [(true, "1".to_owned()), (false, "2".to_owned())]);
        let unknown = row_changes("d.t", None, row("1", "a"), row("1", "b"));
        assert_eq!(kinds(unknown), [(true, "1".to_owned()), (false, "1".to_owned())]);
        assert_eq!(kinds(row_changes("d.t", None, None, row("3", "c"))), [(false, "3".to_owned())]);
        assert_eq!(kinds(row_changes("d.t", None, row("3", "c"), None)), [(true, "3".to_owned())]);
    }
}
