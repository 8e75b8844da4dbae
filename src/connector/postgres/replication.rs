//! A Postgres source's change stream: one streaming replication connection
//! (`START_REPLICATION SLOT .. LOGICAL .. (proto_version '1', publication_names ..)`), read by a
//! task of its own.
//!
//! The connection is `pg_walstream`'s (libpq underneath, so `ssl.mode` and `ssl.root.cert` mean
//! exactly what `sslmode` and `sslrootcert` mean to libpq). The task decodes pgoutput into
//! [`RowChange`]s, holds each transaction until its commit, and hands whole transactions to the
//! source's executor in [`Batch`]es through a bounded channel: a slow reader stops the task,
//! and the task stops reading the socket.
//!
//! The slot's confirmed position is what the task reports as flushed in its standby status
//! updates, and that is only ever what [`ChangeStream::confirm`] was told: the end of the last
//! transaction inside a committed checkpoint. A restart streams again from there.
//!
//! Keepalives tell how far the upstream has decoded its WAL (its send position). Every
//! transaction committed below that position has been sent before the keepalive, so, between
//! transactions, the position of a keepalive is one the offset may move to even when none of
//! the WAL below it touched a published table; the task answers each keepalive that moved, so
//! the upstream sends the next one as soon as it has decoded more.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pg_walstream::protocol::{LogicalReplicationMessage, LogicalReplicationParser, TupleData};
use pg_walstream::{CancellationToken, PgReplicationConnection, ReplicationError};
use tokio::sync::mpsc;

use crate::connector::common::RowChange;
use crate::connector::postgres::{PgSourceConfig, quote_ident};
use crate::error::{Error, Result};

/// Batches waiting for the executor, at most; the task waits for room beyond them.
const BATCHES_QUEUED: usize = 16;

/// Decoded changes the task holds while the executor has no room, at most; beyond them it stops
/// reading until there is room.
const CHANGES_HELD: usize = 8192;

/// How often the task tells the upstream what is durable, when that has moved.
const STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// How long connecting may take.
const CONNECT_TIMEOUT_SECS: u32 = 10;

/// Whole transactions, in commit order, and how far the stream has got.
#[derive(Debug, Default, PartialEq)]
pub struct Batch {
    /// The changes of whole transactions, each carrying its transaction's end LSN.
    pub changes: Vec<RowChange>,
    /// Every transaction that commits at or below this position is in this batch or an earlier
    /// one (0: not known yet).
    pub position: u64,
}

/// A running replication stream of one slot; dropping it ends the stream and its connection.
pub struct ChangeStream {
    batches: mpsc::Receiver<Result<Batch>>,
    durable: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl ChangeStream {
    /// Starts streaming the slot of `config` from `start` (transactions that commit before it
    /// are not sent), reporting `durable` as flushed until told more by [`Self::confirm`].
    ///
    /// Connecting happens in the task: a failure to connect is the stream's first item.
    pub fn spawn(config: PgSourceConfig, start: u64, durable: u64) -> Self {
        let (sender, batches) = mpsc::channel(BATCHES_QUEUED);
        let durable = Arc::new(AtomicU64::new(durable));
        let shared = durable.clone();
        let task = tokio::spawn(async move {
            if let Err(e) = stream(&config, start, &shared, &sender).await {
                let _ = sender.send(Err(e)).await;
            }
        });
        Self { batches, durable, task }
    }

    /// The next batch; an error ends the stream (the task is gone), and so does `None`.
    ///
    /// Cancel-safe: nothing is lost when the future is dropped before it is ready.
    pub async fn next(&mut self) -> Option<Result<Batch>> {
        self.batches.recv().await
    }

    /// A batch that is ready now, if any.
    pub fn try_next(&mut self) -> Option<Result<Batch>> {
        self.batches.try_recv().ok()
    }

    /// Changes up to `lsn` are durable: the slot may release them.
    pub fn confirm(&self, lsn: u64) {
        self.durable.fetch_max(lsn, Ordering::Release);
    }
}

impl Drop for ChangeStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connects, starts replication and streams until the connection fails or the receiver is
/// gone.
async fn stream(
    config: &PgSourceConfig,
    start: u64,
    durable: &AtomicU64,
    sender: &mpsc::Sender<Result<Batch>>,
) -> Result<()> {
    let mut connection = PgReplicationConnection::connect_async(&conninfo(config)?)
        .await
        .map_err(replication_error)?;
    let publication = quote_ident(&config.publication);
    connection
        .start_replication_async(
            &config.slot,
            start,
            &[("proto_version", "1"), ("publication_names", &publication)],
        )
        .await
        .map_err(replication_error)?;
    tracing::info!(slot = %config.slot, start = %pg_walstream::format_lsn(start), "streaming changes");
    if crate::failpoint::fires(|| format!("replication:stall:{}", config.slot)) {
        // A stream that stops reading its connection (see the source's stall check).
        std::future::pending::<()>().await;
    }
    let mut decoder = Decoder::default();
    // What the upstream was last told: (received, flushed).
    let mut told = (0, 0);
    let token = CancellationToken::new();
    let mut status = tokio::time::interval(STATUS_INTERVAL);
    status.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sent_position = 0;
    let mut side: Option<tokio_postgres::Client> = None;
    loop {
        if !decoder.awaiting.is_empty() {
            // Their replacing updates read the upstream (see `Decoder::awaiting`).
            if side.is_none() {
                side = Some(config.connect().await?);
            }
            let client = side.as_ref().expect("connected above");
            wait_visible(client, &decoder.awaiting).await?;
            decoder.awaiting.clear();
        }
        let has_news = !decoder.ready.is_empty() || decoder.position > sent_position;
        tokio::select! {
            biased;
            permit = sender.reserve(), if has_news => {
                let Ok(permit) = permit else { return Ok(()) };
                sent_position = decoder.position;
                permit.send(Ok(decoder.take()));
            }
            // Cancel-safe: the connection keeps what it has read of a message until the next
            // call (it waits for the socket, then drains whole messages into its own queue).
            frame = connection.get_copy_data_async(&token), if decoder.ready.len() < CHANGES_HELD => {
                let frame = frame.map_err(replication_error)?;
                if let Some(reply) = decoder.frame(&frame)? {
                    let flushed = durable.load(Ordering::Acquire);
                    let received = decoder.received.max(flushed);
                    if reply || received > told.0 {
                        report(&mut connection, received, flushed).await?;
                        told = (received, flushed);
                    }
                }
            }
            _ = status.tick() => {
                let flushed = durable.load(Ordering::Acquire);
                if flushed > told.1 {
                    let received = decoder.received.max(flushed);
                    report(&mut connection, received, flushed).await?;
                    told = (received, flushed);
                }
            }
        }
    }
}

/// Waits until every transaction of `xids` is visible to new snapshots. A commit is decoded
/// once its WAL is flushed, a moment before other sessions see it: a read of the upstream
/// right after its changes arrive could miss the rows it wrote.
async fn wait_visible(client: &tokio_postgres::Client, xids: &[u32]) -> Result<()> {
    let list: Vec<String> = xids.iter().map(u32::to_string).collect();
    // Each 32-bit xid is widened by the epoch of the snapshot's xmax (it is older than xmax).
    let sql = format!(
        "SELECT bool_and(txid_visible_in_snapshot(txid_snapshot_xmax(s) -          ((txid_snapshot_xmax(s) % 4294967296) - x + 4294967296) % 4294967296, s))::text          FROM (SELECT txid_current_snapshot() AS s) AS c, unnest(ARRAY[{}]::bigint[]) AS x",
        list.join(",")
    );
    let mut pause = Duration::from_micros(200);
    for _ in 0..200 {
        let rows =
            client.simple_query(&sql).await.map_err(crate::connector::postgres::upstream_error)?;
        let visible = rows.iter().any(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0) == Some("true"),
            _ => false,
        });
        if visible {
            return Ok(());
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    Err(Error::Upstream {
        code: "55000",
        message: format!("transactions {list:?} committed upstream but never became visible"),
    })
}

/// A standby status update: `received` written, `flushed` flushed and applied.
async fn report(
    connection: &mut PgReplicationConnection,
    received: u64,
    flushed: u64,
) -> Result<()> {
    connection
        .send_standby_status_update(received, flushed, flushed, false)
        .await
        .map_err(replication_error)
}

/// The libpq connection string of the source's replication connection.
fn conninfo(config: &PgSourceConfig) -> Result<String> {
    let mut info = String::new();
    let mut add = |key: &str, value: &str| {
        let value = value.replace('\\', "\\\\").replace('\'', "\\'");
        info.push_str(&format!("{key}='{value}' "));
    };
    add("host", &config.hostname);
    add("port", &config.port.to_string());
    add("user", &config.username);
    add("password", &config.password);
    add("dbname", &config.database);
    add("replication", "database");
    add("application_name", "sluice");
    add("connect_timeout", &CONNECT_TIMEOUT_SECS.to_string());
    add("sslmode", config.tls.mode.libpq_name());
    if let Some(path) = root_cert_file(config.tls.root_cert.as_deref())? {
        add("sslrootcert", &path);
    }
    Ok(info.trim_end().to_owned())
}

/// `ssl.root.cert` as a file libpq can read: the path itself, or the PEM text written to a file
/// named after its content.
fn root_cert_file(root_cert: Option<&str>) -> Result<Option<String>> {
    let Some(text) = root_cert else { return Ok(None) };
    if !text.trim_start().starts_with("-----BEGIN") {
        return Ok(Some(text.to_owned()));
    }
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    let path = std::env::temp_dir().join(format!("sluice-root-cert-{:016x}.pem", hasher.finish()));
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
        std::fs::write(&path, text).map_err(|e| {
            Error::Stream(format!("cannot write ssl.root.cert to {}: {e}", path.display()))
        })?;
    }
    Ok(Some(path.display().to_string()))
}

/// A replication error as Sluice reports upstream errors: with the SQLSTATE the upstream sent,
/// when there was one.
fn replication_error(e: ReplicationError) -> Error {
    let text = e.to_string();
    let code = text
        .split_once('[')
        .and_then(|(_, rest)| rest.get(..6))
        .filter(|code| code.ends_with(']'))
        .map(|code| &code[..5]);
    let code = match code {
        Some("42704") => "42704",
        Some("55000") => "55000",
        Some("55006") => "55006",
        Some("28P01" | "28000") => "28P01",
        Some("3D000") => "3D000",
        Some("42501") => "42501",
        _ => "08006",
    };
    Error::Upstream { code, message: format!("replication connection: {text}") }
}

/// The type of `char(n)` (`bpchar`), whose values arrive blank-padded.
const BPCHAR_OID: u32 = 1042;

/// Decodes the frames of a replication stream into whole transactions.
#[derive(Default)]
struct Decoder {
    parser: Option<LogicalReplicationParser>,
    /// `schema.table` of each relation the stream described.
    relations: HashMap<u32, String>,
    /// The `char(n)` columns of each relation (see [`BPCHAR_OID`]).
    padded: HashMap<u32, Vec<usize>>,
    /// The changes of the transaction being sent, from its begin.
    open: Option<Vec<RowChange>>,
    /// Whole transactions not yet handed on.
    ready: Vec<RowChange>,
    /// See [`Batch::position`].
    position: u64,
    /// The xid of the transaction being sent.
    xid: u32,
    /// Transactions whose replacing updates left values unsent (see [`RowChange::replaces`]):
    /// the CDC backfill reads those values from the upstream, so these must be visible there
    /// before their changes are handed on.
    awaiting: Vec<u32>,
    /// The furthest WAL position any frame named.
    received: u64,
}

impl Decoder {
    /// Reads one frame (`w`: WAL data, `k`: keepalive); for a keepalive, whether it asks for a
    /// reply (`Some(false)`: it does not, but the upstream would like to hear the position).
    fn frame(&mut self, frame: &[u8]) -> Result<Option<bool>> {
        match frame.first() {
            Some(b'w') if frame.len() >= 25 => {
                let wal_end = u64::from_be_bytes(frame[9..17].try_into().expect("8 bytes"));
                self.received = self.received.max(wal_end);
                self.message(&frame[25..])?;
                Ok(None)
            }
            Some(b'k') => {
                let keepalive =
                    pg_walstream::parse_keepalive_message(frame).map_err(replication_error)?;
                self.received = self.received.max(keepalive.wal_end);
                if self.open.is_none() {
                    // Between transactions: everything committed below the upstream's send
                    // position has been sent (see the module docs).
                    self.position = self.position.max(keepalive.wal_end);
                }
                Ok(Some(keepalive.reply_requested))
            }
            _ => Err(Error::Upstream {
                code: "08P01",
                message: format!("unexpected replication frame {:?}", frame.first()),
            }),
        }
    }

    /// Reads one pgoutput message.
    fn message(&mut self, data: &[u8]) -> Result<()> {
        let parser =
            self.parser.get_or_insert_with(|| LogicalReplicationParser::with_protocol_version(1));
        let message = parser
            .parse_wal_message(data)
            .map_err(|e| Error::Upstream {
                code: "XX000",
                message: format!("cannot decode a pgoutput message: {e}"),
            })?
            .message;
        match message {
            LogicalReplicationMessage::Begin { xid, .. } => {
                self.open = Some(Vec::new());
                self.xid = xid;
            }
            LogicalReplicationMessage::Relation {
                relation_id,
                namespace,
                relation_name,
                columns,
                ..
            } => {
                // Sent before the first change of a table in a stream, and after its columns
                // change: its changes have these columns from here on.
                let table = format!("{namespace}.{relation_name}");
                let names = columns.iter().map(|c| c.name.to_string()).collect();
                let types = columns.iter().map(|c| (c.type_id, c.type_modifier)).collect();
                self.relations.insert(relation_id, table.clone());
                // `char(n)` values arrive blank-padded; Sluice holds them without the padding
                // (as the snapshot reads them, and as Postgres compares them).
                let padded = columns.iter().enumerate().filter(|(_, c)| c.type_id == BPCHAR_OID);
                self.padded.insert(relation_id, padded.map(|(i, _)| i).collect());
                if let Some(open) = self.open.as_mut() {
                    open.push(RowChange::relation(table, names, types));
                }
            }
            LogicalReplicationMessage::Insert { relation_id, tuple } => {
                let change = self.change(relation_id, false, &tuple)?;
                self.push(change)?;
            }
            LogicalReplicationMessage::Update { relation_id, old_tuple, new_tuple, key_type } => {
                // An old tuple comes when the key changed (or with REPLICA IDENTITY FULL): the
                // row under the old key goes.
                let mut new = self.change(relation_id, false, &new_tuple)?;
                if let Some(old) = old_tuple {
                    let old = self.change(relation_id, true, &old)?;
                    if key_type == Some('O') {
                        // A whole old row (REPLICA IDENTITY FULL) has its TOASTed values
                        // inline: what the new row did not send, the old row holds.
                        fill_unchanged(&mut new, &old);
                    }
                    new.replaces = !new.unchanged.is_empty();
                    self.push(old)?;
                }
                self.push(new)?;
            }
            LogicalReplicationMessage::Delete { relation_id, old_tuple, .. } => {
                let change = self.change(relation_id, true, &old_tuple)?;
                self.push(change)?;
            }
            LogicalReplicationMessage::Truncate { relation_ids, .. } => {
                for id in relation_ids {
                    let table =
                        self.relations.get(&id).cloned().ok_or_else(|| Error::Upstream {
                            code: "XX000",
                            message: format!(
                                "a truncate of relation {id} came before its description"
                            ),
                        })?;
                    self.push(RowChange::truncation(table))?;
                }
            }
            LogicalReplicationMessage::Commit { end_lsn, .. } => {
                let mut txn = self.open.take().ok_or_else(|| Error::Upstream {
                    code: "08P01",
                    message: "a commit came without its begin".into(),
                })?;
                txn.iter_mut().for_each(|c| c.position = end_lsn);
                if txn.iter().any(|c| c.replaces) {
                    self.awaiting.push(self.xid);
                }
                self.ready.append(&mut txn);
                self.position = self.position.max(end_lsn);
            }
            _ => {}
        }
        Ok(())
    }

    fn push(&mut self, change: RowChange) -> Result<()> {
        let open = self.open.as_mut().ok_or_else(|| Error::Upstream {
            code: "08P01",
            message: "a change came outside a transaction".into(),
        })?;
        open.push(RowChange { xid: self.xid, ..change });
        Ok(())
    }

    fn change(&self, relation: u32, delete: bool, tuple: &TupleData) -> Result<RowChange> {
        let table = self.relations.get(&relation).cloned().ok_or_else(|| Error::Upstream {
            code: "XX000",
            message: format!("a change of relation {relation} came before its description"),
        })?;
        let mut values: Vec<Option<String>> = tuple
            .columns
            .iter()
            .map(|c| if c.is_null() || c.is_unchanged() { None } else { c.as_string() })
            .collect();
        for &i in self.padded.get(&relation).into_iter().flatten() {
            if let Some(Some(v)) = values.get_mut(i) {
                v.truncate(v.trim_end_matches(' ').len());
            }
        }
        let unchanged = tuple
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.is_unchanged())
            .map(|(i, _)| i)
            .collect();
        Ok(RowChange { table, delete, values, unchanged, ..RowChange::default() })
    }

    /// The ready transactions and the position, handed on.
    fn take(&mut self) -> Batch {
        Batch { changes: std::mem::take(&mut self.ready), position: self.position }
    }
}

/// Fills the columns `new` did not send from `old`, a whole old row that sent them.
fn fill_unchanged(new: &mut RowChange, old: &RowChange) {
    new.unchanged.retain(|&u| match old.values.get(u) {
        Some(value) if !old.unchanged.contains(&u) => {
            new.values[u] = value.clone();
            false
        }
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use pg_walstream::protocol::ColumnData;

    use super::*;

    /// A `w` frame holding one pgoutput message.
    fn wal(message: LogicalReplicationMessage, wal_end: u64) -> Vec<u8> {
        let mut body = BytesMut::new();
        pg_walstream::encode_message(&message, 1, &mut body);
        let mut frame = vec![b'w'];
        frame.extend_from_slice(&wal_end.to_be_bytes()); // start
        frame.extend_from_slice(&wal_end.to_be_bytes()); // end
        frame.extend_from_slice(&0i64.to_be_bytes()); // time
        frame.extend_from_slice(&body);
        frame
    }

    fn keepalive(wal_end: u64, reply: bool) -> Vec<u8> {
        let mut frame = vec![b'k'];
        frame.extend_from_slice(&wal_end.to_be_bytes());
        frame.extend_from_slice(&0i64.to_be_bytes());
        frame.push(reply as u8);
        frame
    }

    fn begin() -> LogicalReplicationMessage {
        LogicalReplicationMessage::Begin { final_lsn: 0, timestamp: 0, xid: 7 }
    }

    fn commit(end_lsn: u64) -> LogicalReplicationMessage {
        LogicalReplicationMessage::Commit {
            flags: 0,
            commit_lsn: end_lsn - 8,
            end_lsn,
            timestamp: 0,
        }
    }

    fn relation() -> LogicalReplicationMessage {
        LogicalReplicationMessage::Relation {
            relation_id: 16384,
            namespace: "public".into(),
            relation_name: "t".into(),
            replica_identity: b'd',
            columns: vec![
                pg_walstream::ColumnInfo::new(1, "id".into(), 23, -1),
                pg_walstream::ColumnInfo::new(0, "v".into(), 25, -1),
            ],
        }
    }

    fn tuple(values: &[Option<&str>]) -> TupleData {
        TupleData::new(
            values
                .iter()
                .map(|v| match v {
                    Some("<toast>") => ColumnData::unchanged(),
                    Some(v) => ColumnData::text(v.as_bytes().to_vec()),
                    None => ColumnData::null(),
                })
                .collect(),
        )
    }

    fn insert(values: &[Option<&str>]) -> LogicalReplicationMessage {
        LogicalReplicationMessage::Insert { relation_id: 16384, tuple: tuple(values) }
    }

    /// The changes of a batch, one per line: `table delete lsn values unchanged replaces`, or
    /// `table truncate lsn`.
    fn lines(batch: &Batch) -> Vec<String> {
        batch
            .changes
            .iter()
            .map(|c| {
                if c.truncate {
                    return format!("{} truncate {}", c.table, c.position);
                }
                if c.relation {
                    let names: Vec<_> =
                        c.values.iter().map(|v| v.as_deref().unwrap_or("?")).collect();
                    return format!("{} columns [{}]", c.table, names.join(", "));
                }
                let values: Vec<_> = c.values.iter().map(|v| v.as_deref().unwrap_or(".")).collect();
                format!(
                    "{} {} {} [{}] {:?} {}",
                    c.table,
                    c.delete,
                    c.position,
                    values.join(", "),
                    c.unchanged,
                    c.replaces
                )
            })
            .collect()
    }

    #[test]
    fn char_values_lose_their_blank_padding_and_other_text_keeps_its_spaces() {
        let mut decoder = Decoder::default();
        let relation = LogicalReplicationMessage::Relation {
            relation_id: 16384,
            namespace: "public".into(),
            relation_name: "t".into(),
            replica_identity: b'd',
            columns: vec![
                pg_walstream::ColumnInfo::new(1, "c".into(), BPCHAR_OID, 14),
                pg_walstream::ColumnInfo::new(0, "v".into(), 25, -1),
            ],
        };
        let row = insert(&[Some("BUILDING  "), Some("x  ")]);
        let blank = insert(&[Some("          "), Some(" ")]);
        for message in [begin(), relation, row, blank, commit(300)] {
            decoder.frame(&wal(message, 300)).unwrap();
        }
        assert_eq!(
            lines(&decoder.take()),
            [
                "public.t columns [c, v]",
                "public.t false 300 [BUILDING, x  ] [] false",
                "public.t false 300 [,  ] [] false",
            ]
        );
    }

    #[test]
    fn whole_transactions_are_handed_on_at_their_commit() {
        let mut decoder = Decoder::default();
        for message in [begin(), relation(), insert(&[Some("1"), Some("a")])] {
            assert_eq!(decoder.frame(&wal(message, 100)).unwrap(), None);
        }
        assert!(decoder.ready.is_empty(), "nothing before the commit");
        decoder.frame(&wal(commit(120), 120)).unwrap();
        let update = LogicalReplicationMessage::Update {
            relation_id: 16384,
            old_tuple: Some(tuple(&[Some("1"), None])),
            new_tuple: tuple(&[Some("2"), Some("<toast>")]),
            key_type: Some('K'),
        };
        let delete = LogicalReplicationMessage::Delete {
            relation_id: 16384,
            old_tuple: tuple(&[Some("2"), None]),
            key_type: 'K',
        };
        let second = LogicalReplicationMessage::Begin { final_lsn: 0, timestamp: 0, xid: 9 };
        for message in [second, update, delete, commit(200)] {
            decoder.frame(&wal(message, 150)).unwrap();
        }
        let batch = decoder.take();
        // Each change carries its transaction's id.
        let xids: Vec<u32> = batch.changes.iter().filter(|c| !c.relation).map(|c| c.xid).collect();
        assert_eq!(xids, [7, 9, 9, 9]);
        assert_eq!(
            lines(&batch),
            [
                "public.t columns [id, v]",
                "public.t false 120 [1, a] [] false",
                "public.t true 200 [1, .] [] false",
                "public.t false 200 [2, .] [1] true",
                "public.t true 200 [2, .] [] false",
            ]
        );
        assert_eq!(batch.position, 200);
        assert_eq!(decoder.take(), Batch { changes: vec![], position: 200 }, "handed on once");
    }

    #[test]
    fn a_whole_old_row_fills_what_the_new_row_did_not_send() {
        let mut decoder = Decoder::default();
        // REPLICA IDENTITY FULL: the old row comes whole, TOASTed values inline; with or
        // without a key change the new row is complete. A key-only old row (DEFAULT) cannot.
        let full = |old: &[Option<&str>], new: &[Option<&str>], key_type| {
            LogicalReplicationMessage::Update {
                relation_id: 16384,
                old_tuple: Some(tuple(old)),
                new_tuple: tuple(new),
                key_type: Some(key_type),
            }
        };
        let messages = [
            begin(),
            relation(),
            full(&[Some("1"), Some("big")], &[Some("2"), Some("<toast>")], 'O'),
            full(&[Some("3"), None], &[Some("3"), Some("<toast>")], 'O'),
            full(&[Some("4"), None], &[Some("5"), Some("<toast>")], 'K'),
            commit(300),
        ];
        for message in messages {
            decoder.frame(&wal(message, 300)).unwrap();
        }
        assert_eq!(
            lines(&decoder.take()),
            [
                "public.t columns [id, v]",
                "public.t true 300 [1, big] [] false",
                "public.t false 300 [2, big] [] false",
                "public.t true 300 [3, .] [] false",
                "public.t false 300 [3, .] [] false",
                "public.t true 300 [4, .] [] false",
                "public.t false 300 [5, .] [1] true",
            ]
        );
    }

    #[test]
    fn a_truncate_is_a_change_in_its_place_in_the_transaction() {
        let mut decoder = Decoder::default();
        let truncate = LogicalReplicationMessage::Truncate { relation_ids: vec![16384], flags: 0 };
        for message in [begin(), relation(), insert(&[Some("1"), Some("a")]), truncate] {
            decoder.frame(&wal(message, 100)).unwrap();
        }
        decoder.frame(&wal(insert(&[Some("2"), Some("b")]), 100)).unwrap();
        decoder.frame(&wal(commit(120), 120)).unwrap();
        let batch = decoder.take();
        assert_eq!(
            lines(&batch),
            [
                "public.t columns [id, v]",
                "public.t false 120 [1, a] [] false",
                "public.t truncate 120",
                "public.t false 120 [2, b] [] false"
            ]
        );
    }

    #[test]
    fn a_keepalive_between_transactions_moves_the_position_and_one_inside_does_not() {
        let mut decoder = Decoder::default();
        assert_eq!(decoder.frame(&keepalive(500, false)).unwrap(), Some(false));
        assert_eq!(decoder.position, 500, "nothing open: all below 500 was sent");
        for message in [begin(), relation(), insert(&[Some("1"), None])] {
            decoder.frame(&wal(message, 600)).unwrap();
        }
        // Sent while the transaction is on the wire: its commit may lie below 900.
        assert_eq!(decoder.frame(&keepalive(900, true)).unwrap(), Some(true));
        assert_eq!((decoder.position, decoder.received), (500, 900));
        decoder.frame(&wal(commit(700), 600)).unwrap();
        assert_eq!(decoder.position, 700);
        decoder.frame(&keepalive(900, false)).unwrap();
        assert_eq!(decoder.position, 900);
        let batch = decoder.take();
        assert_eq!(
            lines(&batch),
            ["public.t columns [id, v]", "public.t false 700 [1, .] [] false"]
        );
    }

    #[test]
    fn a_change_of_an_undescribed_relation_or_outside_a_transaction_is_an_error() {
        let mut decoder = Decoder::default();
        decoder.frame(&wal(begin(), 1)).unwrap();
        let e = decoder.frame(&wal(insert(&[Some("1")]), 1)).unwrap_err();
        assert!(e.to_string().contains("before its description"), "{e}");
        let mut decoder = Decoder::default();
        decoder.frame(&wal(relation(), 1)).unwrap();
        let e = decoder.frame(&wal(insert(&[Some("1")]), 1)).unwrap_err();
        assert!(e.to_string().contains("outside a transaction"), "{e}");
        assert!(decoder.frame(b"x").is_err());
    }

    #[test]
    fn the_connection_string_quotes_every_value_and_names_the_tls_settings() {
        let mut config = crate::stream::test_utils::pg_source_config("db.example", 6543);
        config.password = r"it's \secret".into();
        let info = conninfo(&config).unwrap();
        assert!(info.contains(r"password='it\'s \\secret'"), "{info}");
        assert!(info.contains("host='db.example' port='6543'"), "{info}");
        assert!(info.contains("replication='database'"), "{info}");
        assert!(info.contains("sslmode='disable'"), "{info}");
        assert!(!info.contains("sslrootcert"), "{info}");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let path = root_cert_file(Some(pem)).unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), pem);
        assert_eq!(root_cert_file(Some("/etc/ca.pem")).unwrap().as_deref(), Some("/etc/ca.pem"));
    }

    #[test]
    fn replication_errors_keep_the_upstream_sqlstate() {
        let e = replication_error(ReplicationError::ReplicationSlot(
            "[42704] replication slot \"s\" does not exist".into(),
        ));
        assert!(matches!(e, Error::Upstream { code: "42704", .. }), "{e:?}");
        let e = replication_error(ReplicationError::TransientConnection("closed".into()));
        assert!(matches!(e, Error::Upstream { code: "08006", .. }), "{e:?}");
    }
}
