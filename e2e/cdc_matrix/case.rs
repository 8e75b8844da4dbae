//! One case of the matrix: an upstream table (key shape, columns, replica identity) and the
//! statements that change it, drawn from the case's own seed. The case keeps which keys are
//! live, so every statement it writes succeeds upstream.

use std::collections::BTreeSet;

use crate::cdc_matrix::space::{ColType, KeyShape, quote};
use crate::harness::Rng;

/// Cases whose upstream table gets a schema change at the end, in percent.
const SCHEMA_CHANGE_PERCENT: u64 = 30;

/// A generated upstream table and the model of its live keys.
pub struct Case {
    /// Its place in the run (the table is `t<index>`).
    pub index: usize,
    /// The seed its choices come from.
    pub seed: u64,
    pub key: KeyShape,
    /// Non-key columns `c0, c1, ..`.
    pub columns: Vec<ColType>,
    /// `REPLICA IDENTITY FULL` (else DEFAULT).
    pub full_identity: bool,
    /// `snapshot.batch_size` of the Sluice table.
    pub batch_size: usize,
    /// Rows inserted before the table is created in Sluice.
    pub initial_rows: usize,
    /// The upstream table gets a schema change at the end.
    pub schema_changes: bool,
    /// The upstream is MariaDB (else Postgres).
    pub mysql: bool,
    /// The column `c<i>` dropped upstream by the schema change, no longer compared.
    pub dropped: Option<usize>,
    /// What else happened to it, for reports.
    notes: Vec<String>,
    rng: Rng,
    used: BTreeSet<Vec<String>>,
    live: Vec<Vec<String>>,
}

impl Case {
    /// Draws case `index` of a run from `seed`, its columns from `types`, for a MariaDB
    /// upstream when `mysql`.
    pub fn new(index: usize, seed: u64, types: &[ColType], mysql: bool) -> Self {
        let mut rng = Rng::new(seed);
        let key = KeyShape::ALL[rng.below(KeyShape::ALL.len() as u64) as usize];
        let width = rng.between(1, 5) as usize;
        let mut columns: Vec<ColType> =
            (0..width).map(|_| types[rng.below(types.len() as u64) as usize]).collect();
        // A third of the tables hold TOASTed values, the case most upstream habits touch.
        if rng.chance(35) && types.contains(&ColType::Toasted) {
            columns.push(ColType::Toasted);
        }
        let full_identity = rng.chance(30);
        let batch_size = [3, 7, 16, 50][rng.below(4) as usize];
        let initial_rows = rng.below(150) as usize;
        let schema_changes = rng.chance(SCHEMA_CHANGE_PERCENT);
        Self {
            index,
            seed,
            key,
            columns,
            full_identity,
            batch_size,
            initial_rows,
            schema_changes,
            mysql,
            dropped: None,
            notes: Vec::new(),
            rng,
            used: BTreeSet::new(),
            live: Vec::new(),
        }
    }

    pub fn table(&self) -> String {
        format!("t{}", self.index)
    }

    /// The table's name in upstream statements (MariaDB sessions have no default database).
    pub fn upstream(&self) -> String {
        match self.mysql {
            true => format!("shop.t{}", self.index),
            false => self.table(),
        }
    }

    /// The key columns' definitions upstream.
    fn key_columns(&self) -> Vec<(String, String)> {
        match self.mysql {
            true => self.key.mysql_columns(),
            false => self.key.columns(),
        }
    }

    /// A new key upstream.
    fn fresh_key(&mut self) -> Vec<String> {
        match self.mysql {
            true => self.key.mysql_fresh(&mut self.rng, &mut self.used),
            false => self.key.fresh(&mut self.rng, &mut self.used),
        }
    }

    /// A value of `ty` upstream.
    fn value(&mut self, ty: ColType) -> String {
        match self.mysql {
            true => ty.mysql_value(&mut self.rng),
            false => ty.value(&mut self.rng),
        }
    }

    /// The upstream DDL of the table.
    pub fn ddl(&self) -> String {
        if self.mysql {
            let mut defs: Vec<String> =
                self.key_columns().iter().map(|(name, ty)| format!("{name} {ty}")).collect();
            defs.extend(
                self.columns.iter().enumerate().map(|(i, ty)| format!("c{i} {}", ty.mysql_sql())),
            );
            return format!(
                "CREATE TABLE {} ({}, PRIMARY KEY ({}))",
                self.upstream(),
                defs.join(", "),
                self.key_list()
            );
        }
        let table = self.table();
        let mut defs: Vec<String> =
            self.key.columns().iter().map(|(name, ty)| format!("{name} {ty}")).collect();
        defs.extend(self.columns.iter().enumerate().map(|(i, ty)| format!("c{i} {}", ty.sql())));
        let keys: Vec<String> = self.key.columns().into_iter().map(|(name, _)| name).collect();
        let mut sql = format!(
            "CREATE TABLE {table} ({}, PRIMARY KEY ({}));",
            defs.join(", "),
            keys.join(", ")
        );
        for (i, ty) in self.columns.iter().enumerate() {
            if *ty == ColType::Toasted {
                sql.push_str(&format!(
                    " ALTER TABLE {table} ALTER COLUMN c{i} SET STORAGE EXTERNAL;"
                ));
            }
        }
        if self.full_identity {
            sql.push_str(&format!(" ALTER TABLE {table} REPLICA IDENTITY FULL;"));
        }
        sql
    }

    /// Adds `note` to what [`Self::describe`] says.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// One line describing the case, for failure reports.
    pub fn describe(&self) -> String {
        let types: Vec<String> = self.columns.iter().map(|t| t.sql()).collect();
        format!(
            "{}t{} (seed {}): key {:?}, columns [{}], replica identity {}, batch {}",
            if self.mysql { "mysql " } else { "" },
            self.index,
            self.seed,
            self.key,
            types.join(", "),
            if self.full_identity { "FULL" } else { "DEFAULT" },
            self.batch_size
        ) + &self.notes.iter().map(|n| format!("; {n}")).collect::<String>()
    }

    /// The key columns, comma-separated (for ORDER BY and ON CONFLICT).
    pub fn key_list(&self) -> String {
        let keys: Vec<String> = self.key.columns().into_iter().map(|(name, _)| name).collect();
        keys.join(", ")
    }

    fn row(&mut self, key: &[String]) -> String {
        let values: Vec<String> = self.columns.clone().into_iter().map(|t| self.value(t)).collect();
        format!("({})", [key.to_vec(), values].concat().join(", "))
    }

    /// An insert of `n` new rows.
    pub fn insert(&mut self, n: usize) -> String {
        let rows: Vec<String> = (0..n)
            .map(|_| {
                let key = self.fresh_key();
                self.live.push(key.clone());
                self.row(&key)
            })
            .collect();
        format!("INSERT INTO {} VALUES {}", self.upstream(), rows.join(", "))
    }

    fn where_key(&self, key: &[String]) -> String {
        let names = self.key.columns();
        let terms: Vec<String> =
            names.iter().zip(key).map(|((name, _), v)| format!("{name} = {v}")).collect();
        terms.join(" AND ")
    }

    fn any_live(&mut self) -> Option<usize> {
        match self.live.len() {
            0 => None,
            n => Some(self.rng.below(n as u64) as usize),
        }
    }

    /// `c3 = <value>` for one to two random columns; `avoid_toasted` leaves TOASTed ones out.
    fn assignments(&mut self, avoid_toasted: bool) -> Option<String> {
        let choices: Vec<usize> = (0..self.columns.len())
            .filter(|&i| !(avoid_toasted && self.columns[i] == ColType::Toasted))
            .collect();
        if choices.is_empty() {
            return None;
        }
        let n = self.rng.between(1, 2) as usize;
        let mut picked: Vec<usize> =
            (0..n).map(|_| choices[self.rng.below(choices.len() as u64) as usize]).collect();
        picked.sort();
        picked.dedup();
        Some(
            picked
                .into_iter()
                .map(|i| format!("c{i} = {}", self.value(self.columns[i])))
                .collect::<Vec<_>>()
                .join(", "),
        )
    }

    /// One random change, or a transaction of a few (now and then rolled back).
    pub fn event(&mut self) -> String {
        match self.rng.below(100) {
            0..=11 => {
                let n = self.rng.between(2, 4);
                let statements: Vec<String> = (0..n).map(|_| self.single()).collect();
                format!("BEGIN; {}; COMMIT", statements.join("; "))
            }
            12..=14 => {
                let live = self.live.clone();
                let statement = self.single();
                // Rolled back: the model is as before (keys drawn stay used, harmlessly).
                self.live = live;
                format!("BEGIN; {statement}; ROLLBACK")
            }
            _ => self.single(),
        }
    }

    /// One statement.
    fn single(&mut self) -> String {
        let table = self.upstream();
        let roll = self.rng.below(100);
        let Some(at) = self.any_live().filter(|_| roll >= 22) else {
            let n = self.rng.between(1, 3) as usize;
            return self.insert(n);
        };
        let key = self.live[at].clone();
        let whr = self.where_key(&key);
        match roll {
            22..=41 => match self.assignments(false) {
                Some(set) => format!("UPDATE {table} SET {set} WHERE {whr}"),
                None => self.insert(1),
            },
            // Leaves TOASTed values alone: the upstream does not send them.
            42..=53 => match self.assignments(true) {
                Some(set) => format!("UPDATE {table} SET {set} WHERE {whr}"),
                None => self.key_change(at, &whr),
            },
            54..=69 => self.key_change(at, &whr),
            70..=81 => {
                self.live.swap_remove(at);
                format!("DELETE FROM {table} WHERE {whr}")
            }
            82..=91 => {
                // An upsert of a live key (an update) or of a new one (an insert).
                let key = match self.rng.chance(60) {
                    true => key,
                    false => {
                        let fresh = self.fresh_key();
                        self.live.push(fresh.clone());
                        fresh
                    }
                };
                let row = self.row(&key);
                let width = self.columns.len();
                match (self.mysql, width) {
                    (false, 0) => {
                        format!("INSERT INTO {table} VALUES {row} ON CONFLICT DO NOTHING")
                    }
                    (false, _) => format!(
                        "INSERT INTO {table} VALUES {row} ON CONFLICT ({}) DO UPDATE SET {}",
                        self.key_list(),
                        (0..width)
                            .map(|i| format!("c{i} = excluded.c{i}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    (true, 0) => format!("INSERT IGNORE INTO {table} VALUES {row}"),
                    (true, _) => format!(
                        "INSERT INTO {table} VALUES {row} ON DUPLICATE KEY UPDATE {}",
                        (0..width)
                            .map(|i| format!("c{i} = VALUES(c{i})"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            }
            92..=97 => {
                // Several rows by one statement.
                let n = self.rng.between(2, 5);
                let at: Vec<usize> = (0..n).filter_map(|_| self.any_live()).collect();
                let picks: Vec<String> =
                    at.iter().map(|&i| format!("({})", self.where_key(&self.live[i]))).collect();
                let avoid_toasted = self.rng.chance(50);
                match self.assignments(avoid_toasted) {
                    Some(set) => format!("UPDATE {table} SET {set} WHERE {}", picks.join(" OR ")),
                    None => self.insert(1),
                }
            }
            _ => {
                self.live.clear();
                format!("TRUNCATE {table}")
            }
        }
    }

    /// Moves the row at `live[at]` to a new key, sometimes changing a column too.
    fn key_change(&mut self, at: usize, whr: &str) -> String {
        let new = self.fresh_key();
        let names = self.key.columns();
        let mut set: Vec<String> =
            names.iter().zip(&new).map(|((name, _), v)| format!("{name} = {v}")).collect();
        if self.rng.chance(30)
            && let Some(more) = self.assignments(true)
        {
            set.push(more);
        }
        self.live[at] = new;
        format!("UPDATE {} SET {} WHERE {whr}", self.upstream(), set.join(", "))
    }
}

/// What a CDC table must do after an upstream schema change.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expect {
    /// Equal its upstream on the columns it was created with.
    Follow,
    /// Also take the column `extra` added upstream, old rows holding its default.
    Added,
    /// Follow the column `c<i>` dropped upstream: it goes from `SELECT *` (no view reads it).
    Dropped(usize),
    /// Stop with a clear error in `rw_cdc_progress.table_error`.
    Stop,
}

impl Case {
    /// The original columns, key first, as a select list. An unconstrained numeric prints
    /// with each value's own display scale on both sides (`1.50`).
    pub fn select_list(&self, upstream: bool) -> String {
        let mut names: Vec<String> = self.key.columns().into_iter().map(|(n, _)| n).collect();
        names.extend(self.compared().map(|(i, ty)| match (ty, upstream) {
            // Sluice holds `char(n)` without its blank padding, as Postgres compares it.
            (ColType::Char(_), true) => format!("c{i}::text AS c{i}"),
            _ => format!("c{i}"),
        }));
        names.join(", ")
    }

    /// Whether `error` is the clear stop for a value this table's columns cannot hold exactly:
    /// an unconstrained numeric of more than 56 integer or 20 fraction digits (NaN, the
    /// infinities and every other value are held).
    pub fn cannot_hold(&self, error: &str) -> bool {
        let free = self.columns.iter().any(|t| matches!(t, ColType::FreeNumeric));
        let value = error
            .split_once("the upstream value ")
            .filter(|_| error.contains("cannot be held exactly"))
            .and_then(|(_, rest)| rest.split_whitespace().next());
        // Sluice's arrays have one dimension: an upstream value of two stops the table.
        let arrays =
            self.columns.iter().any(|t| matches!(t, ColType::IntArray | ColType::TextArray));
        if arrays && value.is_some_and(|v| v.starts_with("{{")) {
            return true;
        }
        let value = value.map(|value| value.trim_start_matches('-'));
        let Some(value) = value.filter(|_| free) else { return false };
        let (int, frac) = value.split_once('.').unwrap_or((value, ""));
        int.trim_start_matches('0').len() > 56 || frac.trim_end_matches('0').len() > 20
    }

    /// A schema change of the upstream table, then a change the table must see under it
    /// (Postgres describes a table's new columns with its next change), and what the CDC
    /// table must do.
    pub fn schema_change(&mut self) -> (String, Expect) {
        if self.mysql {
            return self.mysql_schema_change();
        }
        let table = self.upstream();
        let keys: Vec<String> = self.key.columns().into_iter().map(|(n, _)| n).collect();
        let key = self.fresh_key();
        let insert =
            format!("INSERT INTO {table} ({}) VALUES ({})", keys.join(", "), key.join(", "));
        let column =
            (!self.columns.is_empty()).then(|| self.rng.below(self.columns.len() as u64) as usize);
        match (self.rng.below(8), column) {
            (0, _) | (_, None) => (
                format!("ALTER TABLE {table} ADD COLUMN extra int DEFAULT 7; {insert}"),
                Expect::Added,
            ),
            (1, Some(c)) => {
                self.dropped = Some(c);
                (format!("ALTER TABLE {table} DROP COLUMN c{c}; {insert}"), Expect::Dropped(c))
            }
            // No change describes it: the table's periodic check finds it.
            (6, Some(c)) => {
                self.dropped = Some(c);
                (format!("ALTER TABLE {table} DROP COLUMN c{c}"), Expect::Dropped(c))
            }
            // The last column renamed reads as a drop and an add, and is followed as both;
            // another renamed stops the table.
            (7, Some(c)) => {
                let sql = format!("ALTER TABLE {table} RENAME COLUMN c{c} TO renamed; {insert}");
                if c + 1 == self.columns.len() {
                    self.dropped = Some(c);
                    (sql, Expect::Dropped(c))
                } else {
                    (sql, Expect::Stop)
                }
            }
            (2, Some(c)) => {
                // Text to text, a number widened, and any type of a column Sluice holds as
                // text are followed in place; any other type change stops the table.
                let (ty, now, expect) = match self.columns[c] {
                    ColType::Text | ColType::Toasted => {
                        ("varchar(100000)".into(), None, Expect::Follow)
                    }
                    ColType::Int2 | ColType::Int4 => {
                        ("bigint".into(), Some(ColType::Int8), Expect::Follow)
                    }
                    ColType::Float4 => {
                        ("double precision".into(), Some(ColType::Float8), Expect::Follow)
                    }
                    ColType::Numeric(p, s) | ColType::WideNumeric(p, s) if p <= 66 => {
                        let wider = ColType::numeric(p + 10, s);
                        (wider.sql(), Some(wider), Expect::Follow)
                    }
                    ColType::Varchar(_)
                    | ColType::Char(_)
                    | ColType::Uuid
                    | ColType::Inet
                    | ColType::Interval
                    | ColType::Time => ("text".into(), None, Expect::Follow),
                    _ => ("text".into(), None, Expect::Stop),
                };
                if let Some(now) = now {
                    self.columns[c] = now;
                }
                (
                    format!(
                        "ALTER TABLE {table} ALTER COLUMN c{c} TYPE {ty} USING c{c}::{ty}; {insert}"
                    ),
                    expect,
                )
            }
            (3, Some(c)) => (
                format!(
                    "ALTER TABLE {table} DROP COLUMN c{c}; ALTER TABLE {table} ADD COLUMN c{c} {}; {insert}",
                    self.columns[c].sql()
                ),
                Expect::Stop,
            ),
            (4, _) => (format!("DROP TABLE {table}"), Expect::Stop),
            _ => (format!("DROP TABLE {table}; {}; {insert}", self.ddl()), Expect::Stop),
        }
    }
}

impl ColType {
    /// `numeric(p, s)`, within 38 digits or past them.
    fn numeric(p: u8, s: u8) -> ColType {
        if p <= 38 { ColType::Numeric(p, s) } else { ColType::WideNumeric(p, s) }
    }
}

impl Case {
    /// [`Case::schema_change`] on MariaDB.
    fn mysql_schema_change(&mut self) -> (String, Expect) {
        let table = self.upstream();
        let key = self.fresh_key();
        let insert =
            format!("INSERT INTO {table} ({}) VALUES ({})", self.key_list(), key.join(", "));
        let column =
            (!self.columns.is_empty()).then(|| self.rng.below(self.columns.len() as u64) as usize);
        match (self.rng.below(8), column) {
            (0, _) | (_, None) => (
                format!("ALTER TABLE {table} ADD COLUMN extra int DEFAULT 7; {insert}"),
                Expect::Added,
            ),
            (1, Some(c)) => {
                self.dropped = Some(c);
                (format!("ALTER TABLE {table} DROP COLUMN c{c}; {insert}"), Expect::Dropped(c))
            }
            // No change after it: the binlog's DDL says it.
            (6, Some(c)) => {
                self.dropped = Some(c);
                (format!("ALTER TABLE {table} DROP COLUMN c{c}"), Expect::Dropped(c))
            }
            (7, Some(c)) => (
                format!("ALTER TABLE {table} RENAME COLUMN c{c} TO renamed; {insert}"),
                Expect::Stop,
            ),
            // JSON (MariaDB's is text with a check) is not retyped here.
            (2, Some(c)) if self.columns[c] != ColType::Jsonb => {
                // A type every value converts to (bytes that are not UTF-8 are no text): text
                // to text, bytes to bytes, a number widened, and any type of a column Sluice
                // holds as text are followed in place; other types stop the table.
                let (ty, now, expect) = match self.columns[c] {
                    ColType::Text | ColType::Toasted => ("longtext".into(), None, Expect::Follow),
                    ColType::Bytea | ColType::Point => {
                        ("longblob".into(), Some(ColType::Bytea), Expect::Follow)
                    }
                    ColType::Int2 => ("int".into(), Some(ColType::Int4), Expect::Follow),
                    ColType::Int4 => ("bigint".into(), Some(ColType::Int8), Expect::Follow),
                    ColType::Float4 => ("double".into(), Some(ColType::Float8), Expect::Follow),
                    ColType::Numeric(p, s) | ColType::WideNumeric(p, s) if p <= 55 => {
                        let wider = ColType::numeric(p + 10, s);
                        (wider.mysql_sql(), Some(wider), Expect::Follow)
                    }
                    ColType::Varchar(_) | ColType::Char(_) | ColType::Uuid => {
                        ("varchar(200)".into(), None, Expect::Follow)
                    }
                    _ => ("varchar(200)".into(), None, Expect::Stop),
                };
                if let Some(now) = now {
                    self.columns[c] = now;
                }
                (format!("ALTER TABLE {table} MODIFY COLUMN c{c} {ty}; {insert}"), expect)
            }
            (3, Some(c)) => (
                format!(
                    "ALTER TABLE {table} DROP COLUMN c{c}; ALTER TABLE {table} ADD COLUMN c{c} {}; {insert}",
                    self.columns[c].mysql_sql()
                ),
                Expect::Stop,
            ),
            (4, _) => (format!("DROP TABLE {table}"), Expect::Stop),
            _ => (format!("DROP TABLE {table}; {}; {insert}", self.ddl()), Expect::Stop),
        }
    }

    /// `rows` (key first, then the original columns) with each float and JSON value printed
    /// as its value, for a comparison across printers: MariaDB prints `1e300` and `{"a":1}`
    /// where Sluice prints `1e+300` and `{"a": 1}`. A float is the shortest text that reads
    /// back as the same float (a MariaDB `float` as the 4-byte float it is); a JSON document
    /// is re-printed with its numbers as floats and its keys in order. Sorted again.
    pub fn as_values(&self, rows: Vec<Vec<Option<String>>>) -> Vec<Vec<Option<String>>> {
        let skip = self.key.columns().len();
        let mut rows: Vec<Vec<Option<String>>> = rows
            .into_iter()
            .map(|mut row| {
                for (place, (_, ty)) in self.compared().enumerate() {
                    let Some(Some(text)) = row.get_mut(skip + place) else { continue };
                    let value = match ty {
                        ColType::Float4 => {
                            text.parse::<f64>().map(|f| format!("{:?}", f as f32)).ok()
                        }
                        ColType::Float8 => text.parse::<f64>().map(|f| format!("{f:?}")).ok(),
                        ColType::Jsonb => serde_json::from_str(text).ok().map(|v| json_value(&v)),
                        _ => None,
                    };
                    if let Some(value) = value {
                        *text = value;
                    }
                }
                row
            })
            .collect();
        rows.sort();
        rows
    }

    /// The original columns, key first, as MariaDB's values read as Sluice prints them.
    pub fn mysql_select_list(&self) -> String {
        let mut names: Vec<String> = self.key.columns().into_iter().map(|(n, _)| n).collect();
        names.extend(self.compared().map(|(i, ty)| ty.mysql_select(&format!("c{i}"))));
        names.join(", ")
    }

    /// The original columns compared: all but one dropped upstream.
    fn compared(&self) -> impl Iterator<Item = (usize, &ColType)> {
        self.columns.iter().enumerate().filter(move |&(i, _)| self.dropped != Some(i))
    }
}

/// The key of a row as printed, for matching rows in a report: its first `n` values.
pub fn key_of(row: &[Option<String>], n: usize) -> Vec<Option<String>> {
    row.iter().take(n).cloned().collect()
}

/// A value shortened for a report.
pub fn short(value: &Option<String>) -> String {
    match value {
        None => "NULL".into(),
        Some(v) if v.chars().count() > 40 => {
            format!("{}..({} chars)", v.chars().take(32).collect::<String>(), v.chars().count())
        }
        Some(v) => quote(v),
    }
}

/// A JSON document printed with its numbers as floats and its object keys in order.
fn json_value(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Number(n) => format!("{:?}", n.as_f64().unwrap_or(f64::NAN)),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(json_value).collect::<Vec<_>>().join(","))
        }
        Value::Object(map) => {
            let mut entries: Vec<String> =
                map.iter().map(|(k, v)| format!("{k:?}:{}", json_value(v))).collect();
            entries.sort();
            format!("{{{}}}", entries.join(","))
        }
        other => other.to_string(),
    }
}
