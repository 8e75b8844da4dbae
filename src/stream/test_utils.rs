//! Chunks written as text tables, for executor unit tests.
//!
//! A chunk is a header of column types followed by one row per line, each starting with its op:
//!
//! ```text
//!  i  I   T
//!  + 1 10  a
//!  - 2 20  .
//! U- 3 30  b
//! U+ 3 31  c
//! ```
//!
//! Types: `i` int, `I` bigint, `h` smallint, `u` unsigned int (`UInt32`), `F` double precision,
//! `f` real, `T` text, `B` boolean, `N` numeric (`decimal(38,2)`), and `[x]` a list of `x`,
//! whose cells are written `[1, 2]` (`[]` empty; items as cells of `x`, so `.` is a NULL item;
//! text items are not empty and hold no `,` `[` `]` or spaces). `.` is NULL. [`StreamChunk::to_pretty`] prints
//! a chunk the same way, so a test states its input and its expected output as text:
//!
//! ```text
//! let out = run(FilterExecutor::new(..), [chunk("i\n+ 1\n+ 5")]).await;
//! assert_eq!(out, "i\n+ 5");
//! ```
//!
//! [`MockSource`] replays messages (chunks and barriers) into an executor, and [`Pretty`]
//! prints what comes out: chunks as tables, barriers as `barrier <epoch>`.

use std::fmt::Write as _;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Decimal128Array, Float32Array, Float64Array, Int16Array, Int32Array,
    Int64Array, ListArray, StringArray, UInt32Array, UInt64Array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use futures::StreamExt;

use crate::catalog::Epoch;
use crate::stream::executor::{BoxedMessageStream, Executor};
use crate::stream::message::{Barrier, Message, Op, StreamChunk};

/// The Arrow type a header letter stands for.
fn type_of(letter: &str) -> DataType {
    if let Some(item) = letter.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
        return DataType::new_list(type_of(item), true);
    }
    match letter {
        "i" => DataType::Int32,
        "u" => DataType::UInt32,
        "U" => DataType::UInt64,
        "I" => DataType::Int64,
        "h" => DataType::Int16,
        "F" => DataType::Float64,
        "f" => DataType::Float32,
        "T" => DataType::Utf8,
        "B" => DataType::Boolean,
        "N" => DataType::Decimal128(38, 2),
        other => panic!("unknown column type letter {other:?} (see stream::test_utils)"),
    }
}

/// The header letter of an Arrow type.
fn letter_of(ty: &DataType) -> String {
    let letter = match ty {
        DataType::List(item) => return format!("[{}]", letter_of(item.data_type())),
        DataType::Int32 => "i",
        DataType::Int64 => "I",
        DataType::Int16 => "h",
        DataType::UInt32 => "u",
        DataType::UInt64 => "U",
        DataType::Float64 => "F",
        DataType::Float32 => "f",
        DataType::Utf8 => "T",
        DataType::Boolean => "B",
        DataType::Decimal128(..) => "N",
        other => panic!("no text-table letter for {other}"),
    };
    letter.into()
}

/// A schema of nullable columns `c0, c1, ..` of the types in `header` (e.g. `"i I T"`).
pub fn schema(header: &str) -> SchemaRef {
    let fields: Vec<Field> = header
        .split_whitespace()
        .enumerate()
        .map(|(i, letter)| Field::new(format!("c{i}"), type_of(letter), true))
        .collect();
    Arc::new(Schema::new(fields))
}

/// The column of `values` (text cells, `.` for NULL) as an array of type `ty`.
fn column(ty: &DataType, values: &[&str]) -> ArrayRef {
    fn parse<T: std::str::FromStr>(v: &str) -> Option<T>
    where
        T::Err: std::fmt::Debug,
    {
        (v != ".").then(|| v.parse().unwrap_or_else(|e| panic!("bad cell {v:?}: {e:?}")))
    }
    let cells = values.iter().copied();
    match ty {
        DataType::Int32 => Arc::new(cells.map(parse::<i32>).collect::<Int32Array>()),
        DataType::Int64 => Arc::new(cells.map(parse::<i64>).collect::<Int64Array>()),
        DataType::Int16 => Arc::new(cells.map(parse::<i16>).collect::<Int16Array>()),
        DataType::UInt32 => Arc::new(cells.map(parse::<u32>).collect::<UInt32Array>()),
        DataType::UInt64 => Arc::new(cells.map(parse::<u64>).collect::<UInt64Array>()),
        DataType::Float64 => Arc::new(cells.map(parse::<f64>).collect::<Float64Array>()),
        DataType::Float32 => Arc::new(cells.map(parse::<f32>).collect::<Float32Array>()),
        DataType::Boolean => Arc::new(
            cells
                .map(|v| (v != ".").then_some(matches!(v, "t" | "true")))
                .collect::<BooleanArray>(),
        ),
        DataType::Utf8 => Arc::new(cells.map(|v| (v != ".").then_some(v)).collect::<StringArray>()),
        DataType::Decimal128(precision, scale) => {
            let scaled = cells.map(|v| match crate::types::numeric::Special::parse(v) {
                Some(special) => Some(special.as_i128()),
                None => {
                    parse::<f64>(v).map(|x| (x * 10f64.powi(i32::from(*scale))).round() as i128)
                }
            });
            Arc::new(
                scaled
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(*precision, *scale)
                    .expect("valid decimal type"),
            )
        }
        DataType::List(item) => list_column(item, values),
        other => panic!("no text-table column of type {other}"),
    }
}

/// The list column of `values` (cells `[a, b]`, `[]` or `.`), of items `item`.
fn list_column(item: &Arc<Field>, values: &[&str]) -> ArrayRef {
    let lists: Vec<Option<Vec<&str>>> = values
        .iter()
        .map(|&v| {
            if v == "." {
                return None;
            }
            let inner = v.strip_prefix('[').and_then(|v| v.strip_suffix(']'));
            let inner = inner.unwrap_or_else(|| panic!("bad list cell {v:?}"));
            Some(inner.split(',').map(str::trim).filter(|i| !i.is_empty()).collect())
        })
        .collect();
    let lengths = lists.iter().map(|l| l.as_ref().map_or(0, Vec::len));
    let items: Vec<&str> = lists.iter().flatten().flatten().copied().collect();
    Arc::new(ListArray::new(
        item.clone(),
        OffsetBuffer::from_lengths(lengths),
        column(item.data_type(), &items),
        Some(NullBuffer::from_iter(lists.iter().map(Option::is_some))),
    ))
}

/// The cells of a text-table row: words, except that a list cell `[a, b]` is one cell.
fn cells(row: &str) -> Vec<String> {
    let mut cells: Vec<String> = Vec::new();
    let mut open = false;
    for word in row.split_whitespace() {
        match cells.last_mut() {
            Some(cell) if open => {
                cell.push(' ');
                cell.push_str(word);
            }
            _ => cells.push(word.into()),
        }
        open = cells.last().is_some_and(|c| c.starts_with('[') && !c.ends_with(']'));
    }
    cells
}

impl StreamChunk {
    /// A chunk from a text table (see the module docs). Columns are named `c0, c1, ..`.
    pub fn from_pretty(text: &str) -> StreamChunk {
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        let header = lines.next().expect("a header line of column types");
        let schema = schema(header);
        let width = schema.fields().len();
        let mut ops = Vec::new();
        let mut columns: Vec<Vec<String>> = vec![Vec::new(); width];
        for line in lines {
            let (op, row) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let op = match op {
                "+" => Op::Insert,
                "-" => Op::Delete,
                "U-" => Op::UpdateDelete,
                "U+" => Op::UpdateInsert,
                other => panic!("a row starts with +, -, U- or U+, not {other:?}"),
            };
            ops.push(op);
            let row = cells(row);
            assert_eq!(row.len(), width, "row {line:?} has {} cells, not {width}", row.len());
            for (column, cell) in columns.iter_mut().zip(row) {
                column.push(cell);
            }
        }
        let columns: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .zip(&columns)
            .map(|(f, v)| column(f.data_type(), &v.iter().map(String::as_str).collect::<Vec<_>>()))
            .collect();
        let data = crate::stream::batch_with_rows(schema, columns, ops.len())
            .expect("columns match the header");
        StreamChunk::new(ops, data)
    }

    /// The chunk as a text table (see the module docs).
    pub fn to_pretty(&self) -> String {
        let header: Vec<String> =
            self.schema().fields().iter().map(|f| letter_of(f.data_type())).collect();
        let mut out = header.join(" ");
        let options = FormatOptions::default().with_null(".");
        // Numerics print as Sluice prints them, `NaN` and the infinities included.
        let columns: Vec<ArrayRef> = self
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Decimal128(..) | DataType::Decimal256(..) => {
                    Arc::new(crate::types::numeric::texts(c.as_ref())) as ArrayRef
                }
                _ => c.clone(),
            })
            .collect();
        let formatters: Vec<ArrayFormatter<'_>> = columns
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).expect("printable column"))
            .collect();
        for (row, op) in self.ops().iter().enumerate() {
            write!(out, "\n{op}").unwrap();
            for formatter in &formatters {
                write!(out, " {}", formatter.value(row)).unwrap();
            }
        }
        out
    }
}

/// Column `c<i>` of a text-table chunk, as an expression.
pub fn c(i: usize) -> Arc<dyn PhysicalExpr> {
    Arc::new(Column::new(&format!("c{i}"), i))
}

/// `left op right`.
pub fn binary(
    left: Arc<dyn PhysicalExpr>,
    op: Operator,
    right: Arc<dyn PhysicalExpr>,
) -> Arc<dyn PhysicalExpr> {
    Arc::new(BinaryExpr::new(left, op, right))
}

/// A chunk from a text table; short for [`StreamChunk::from_pretty`].
pub fn chunk(text: &str) -> Message {
    Message::Chunk(StreamChunk::from_pretty(text))
}

/// A checkpoint barrier ending epoch `prev`.
pub fn barrier(prev: u64) -> Message {
    Message::Barrier(Barrier::checkpoint(Epoch(prev)))
}

/// The first barrier of an actor starting from the state committed at epoch `committed`.
pub fn initial(committed: u64) -> Message {
    Message::Barrier(Barrier::initial(Epoch(committed), Epoch(committed + 1)))
}

/// A Postgres source configuration on `hostname:port` for tests that never (or only try to)
/// connect.
pub fn pg_source_config(hostname: &str, port: u16) -> crate::connector::postgres::PgSourceConfig {
    crate::connector::postgres::PgSourceConfig {
        hostname: hostname.into(),
        port,
        username: "u".into(),
        password: String::new(),
        database: "d".into(),
        schema: "public".into(),
        slot: "s".into(),
        publication: "p".into(),
        create_publication: false,
        tls: crate::connector::postgres::tls::TlsSettings {
            mode: crate::connector::postgres::tls::SslMode::Disable,
            root_cert: None,
        },
        resnapshot_lost_slot: false,
    }
}

/// An executor that yields the given messages, then ends.
pub struct MockSource {
    messages: Vec<Message>,
}

impl MockSource {
    /// Yields `messages` in order.
    pub fn new(messages: impl IntoIterator<Item = Message>) -> Self {
        Self { messages: messages.into_iter().collect() }
    }

    /// The source as a boxed executor, ready to be an input.
    pub fn boxed(messages: impl IntoIterator<Item = Message>) -> Box<dyn Executor> {
        Box::new(Self::new(messages))
    }
}

impl Executor for MockSource {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        futures::stream::iter(self.messages.into_iter().map(Ok)).boxed()
    }

    fn identity(&self) -> &str {
        "MockSource"
    }
}

/// Text forms of messages, for assertions.
pub trait Pretty {
    /// The text form (chunks as tables, barriers as `barrier <epoch it ends>`, `truncate`), one message
    /// after another separated by blank lines.
    fn pretty(&self) -> String;
}

impl Pretty for Message {
    fn pretty(&self) -> String {
        match self {
            Message::Chunk(chunk) => chunk.to_pretty(),
            Message::Barrier(b) => format!("barrier {}", b.epoch.prev.0),
            Message::Watermark(w) => format!("watermark c{} {}", w.col_idx, w.value),
            Message::Truncate => "truncate".to_owned(),
        }
    }
}

impl Pretty for [Message] {
    fn pretty(&self) -> String {
        self.iter().map(Pretty::pretty).collect::<Vec<_>>().join("\n\n")
    }
}

/// Runs `executor` to its end and prints everything it emitted (see [`Pretty`]); an error is
/// printed as `error: <message>` and ends the output.
pub async fn run(executor: Box<dyn Executor>) -> String {
    let mut stream = executor.execute();
    let mut out = Vec::new();
    while let Some(message) = stream.next().await {
        match message {
            Ok(message) => out.push(message.pretty()),
            Err(e) => {
                out.push(format!("error: {e}"));
                break;
            }
        }
    }
    out.join("\n\n")
}

/// `text` with each line trimmed and blank-line runs kept, so expected outputs can be indented
/// in the test source.
pub fn dedent(text: &str) -> String {
    let lines: Vec<&str> = text.trim().lines().map(str::trim).collect();
    lines.join("\n")
}

/// A small deterministic generator for tests that draw random changes (a linear congruential
/// generator: good enough to pick test data, and the same sequence for a seed everywhere).
pub struct Lcg(u64);

impl Lcg {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Lcg(seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407))
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// Adds the rows of printed chunks (`op values..` lines after their headers) to `view`, a
/// multiset of rows: `+` and `U+` add one, `-` and `U-` take one away.
pub fn apply_printed(view: &mut std::collections::BTreeMap<String, i64>, printed: &str) {
    for line in printed.lines() {
        let Some((op, row)) = line.split_once(' ') else { continue };
        let delta = match op {
            "+" | "U+" => 1,
            "-" | "U-" => -1,
            _ => continue,
        };
        *view.entry(row.to_owned()).or_default() += delta;
    }
    view.retain(|_, n| *n != 0);
}

/// Feeds `messages` one at a time to the executor `build` makes over them, and returns the
/// output so far (see [`apply_printed`]) as it stands when each checkpoint barrier ending an
/// epoch `n > 0` comes out: element `n - 1`. Epoch `n` is committed in `store` then, as the
/// barrier manager commits it, so later reads meet committed rows under newer writes.
pub async fn views_at_barriers(
    store: &Arc<crate::storage::store::Store>,
    build: impl FnOnce(Box<dyn Executor>) -> Box<dyn Executor>,
    messages: Vec<Message>,
) -> Vec<std::collections::BTreeMap<String, i64>> {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let input = Box::new(crate::stream::executor::receiver::ReceiverExecutor::new(rx));
    let mut out = build(input).execute();
    let mut view = std::collections::BTreeMap::new();
    let mut views = Vec::new();
    for message in messages {
        let ends = match &message {
            Message::Barrier(b) => Some(b.epoch.prev.0),
            _ => None,
        };
        tx.send(message).await.expect("the executor runs");
        let Some(n) = ends else { continue };
        // Everything up to the barrier comes out before it.
        loop {
            let message = out.next().await.expect("running").expect("no error");
            let Message::Chunk(chunk) = message else { break };
            apply_printed(&mut view, &Message::Chunk(chunk).pretty());
        }
        if n > 0 {
            store.commit(Epoch(n)).expect("commit");
            views.push(view.clone());
        }
    }
    views
}

/// Passes its input through and, when the next message is asked for after a checkpoint
/// barrier (that is, once every executor above has handled that barrier), commits the
/// epoch the barrier ends, as the barrier manager does once it collects the barrier.
/// Epochs after `until` are left uncommitted, as a crash would.
pub struct CommitAtBarriers {
    input: Box<dyn Executor>,
    store: Arc<crate::storage::store::Store>,
    until: Epoch,
}

/// `messages` as an input whose checkpoints up to epoch `until` commit in `store`.
pub fn committing_until(
    store: &Arc<crate::storage::store::Store>,
    until: u64,
    messages: impl IntoIterator<Item = Message>,
) -> Box<dyn Executor> {
    let input = MockSource::boxed(messages);
    Box::new(CommitAtBarriers { input, store: store.clone(), until: Epoch(until) })
}

/// `messages` as an input whose checkpoints commit in `store`.
pub fn committing(
    store: &Arc<crate::storage::store::Store>,
    messages: impl IntoIterator<Item = Message>,
) -> Box<dyn Executor> {
    committing_until(store, u64::MAX, messages)
}

impl Executor for CommitAtBarriers {
    fn execute(self: Box<Self>) -> BoxedMessageStream {
        let Self { input, store, until } = *self;
        async_stream::try_stream! {
            let mut input = input.execute();
            while let Some(msg) = input.next().await {
                let msg = msg?;
                let ends = match &msg {
                    Message::Barrier(b) if b.is_checkpoint() && b.epoch.prev <= until => {
                        Some(b.epoch.prev)
                    }
                    _ => None,
                };
                yield msg;
                if let Some(epoch) = ends {
                    store.commit(epoch)?;
                }
            }
        }
        .boxed()
    }

    fn identity(&self) -> &str {
        "CommitAtBarriers"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_through_text() {
        let text = "i I T F B N\n+ 1 10 a 1.5 t 12.50\n- 2 . . . f .\nU- 3 30 b 2 . 1\nU+ 3 31 c 2.25 t 0.05";
        let chunk = StreamChunk::from_pretty(text);
        assert_eq!(chunk.len(), 4);
        assert_eq!(
            chunk.to_pretty(),
            "i I T F B N\n+ 1 10 a 1.5 true 12.50\n- 2 . . . false .\nU- 3 30 b 2.0 . 1.00\nU+ 3 31 c 2.25 true 0.05"
        );
    }

    #[test]
    fn a_list_cell_is_one_cell() {
        let chunk = StreamChunk::from_pretty("[T] [u] i\n+ [a, ., b] [1,2] 7\n- [] . 8");
        assert_eq!(chunk.to_pretty(), "[T] [u] i\n+ [a, ., b] [1, 2] 7\n- [] . 8");
    }

    #[tokio::test]
    async fn mock_source_replays_its_messages() {
        let source = MockSource::boxed([chunk("i\n+ 1"), barrier(1), chunk("i\n- 1")]);
        assert_eq!(run(source).await, dedent("i\n+ 1\n\nbarrier 1\n\ni\n- 1"));
    }
}
