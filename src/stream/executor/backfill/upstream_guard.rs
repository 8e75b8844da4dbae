//! What a CDC backfill checks of its upstream table while it follows it: that the columns it
//! reads are still the ones the table was created over (by name, in order, and by type), and
//! that the table is still the one it was created over.
//!
//! Changes carry their values by position, so a column dropped, inserted before others,
//! renamed or retyped upstream would put values into the wrong columns, or make every change
//! fail. Sluice cannot follow such a change yet; the table stops at it instead, with the reason
//! in the log, `rw_cdc_progress.table_error`, the jobs view and the dashboard, and keeps the rows
//! it had. A column added after the others is followed: a table declared `(*)` takes it (see
//! `CdcBackfill::follow_added_columns`), others read the columns they have. Descriptions read
//! again from before a followed column name the columns there were then
//! ([`UpstreamGuard::columns_at`]).
//!
//! Where the checks come from: the source sends the table's columns ahead of the changes that
//! have them (Postgres's `Relation` message, sent before a table's first change in a stream and
//! after its columns change; a MySQL table map of a new layout), and the backfill checks the
//! names against its own. Types: a Postgres description names each column's type (oid and
//! modifier), checked against the ones the upstream's catalog gave when its printed types
//! were last found equal to the recorded ones, so the verdict is the description's own and
//! never depends on when an upstream query runs; where a description names no types
//! (MySQL), or none have been learnt yet, a fresh description of the table is read, and the
//! changes after it wait until it has been (an upstream that does not answer fails the
//! epoch, which is read again). A dropped
//! table sends nothing, so the backfill also asks the upstream every [`IDENTITY_INTERVAL`]
//! whether the table is there and (Postgres) has the oid and column numbers it was created
//! over (a column dropped and added again under its name has a new number). The first check
//! after a start also describes the table afresh, so a table stopped before a restart stops
//! again at once, whether or not a change shows the reason again.

use std::time::Duration;

use crate::connector::common::{TypeId, UpstreamTable};
use crate::connector::source::UpstreamSession;
use crate::error::{Error, Result};
use crate::types::DataType;

/// An upstream column retyped in a way the table follows: its index, its type as the
/// upstream prints it, and the Sluice type that holds it.
pub type Retype = (usize, String, DataType);

/// How often the upstream table's identity is checked.
pub const IDENTITY_INTERVAL: Duration = Duration::from_secs(5);

/// What a description of the upstream table's columns says, against the ones the table reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Described {
    /// The columns the table expects there, and maybe more after them that it does not know.
    Same,
    /// Columns were dropped (`dropped`: upstream column indices, see [`UpstreamGuard::layout_at`])
    /// and maybe others added after the rest (`added`, by name): a change the table can follow.
    Changed { dropped: Vec<usize>, added: Vec<String> },
    /// A change it cannot follow, with the reason to stop.
    Stop(String),
}

/// The upstream columns and identity a CDC table was created over.
pub struct UpstreamGuard {
    /// `schema.table`.
    name: String,
    /// The Sluice table, as the way on names it.
    relation: String,
    schema: String,
    table: String,
    /// Every upstream column the table knows, those dropped upstream since too.
    names: Vec<String>,
    types: Vec<String>,
    /// The Sluice type each upstream column is held as (text for those the table leaves out).
    data_types: Vec<DataType>,
    /// The upstream's key columns.
    pk: Vec<usize>,
    /// The recorded identity; learnt at the first check when none was recorded.
    identity: Option<String>,
    /// The catalog's type ids of the columns read, learnt from a description of the upstream
    /// table whose printed types were the recorded ones (see the module docs); a dropped
    /// column's is never compared.
    type_ids: Option<Vec<TypeId>>,
    /// Where columns were added and followed (see
    /// [`CdcTableInfo::columns_since`](crate::catalog::CdcTableInfo::columns_since)).
    columns_since: Vec<(u64, usize)>,
    /// Where columns were dropped and followed (see
    /// [`CdcTableInfo::dropped`](crate::catalog::CdcTableInfo::dropped)).
    dropped: Vec<(u64, usize)>,
    /// Columns the table reads that the last identity check found gone upstream.
    missing: Vec<usize>,
    /// Where text columns were retyped in place and followed (see
    /// [`CdcTableInfo::retyped`](crate::catalog::CdcTableInfo::retyped)).
    retyped_at: Vec<(u64, usize)>,
    /// Columns a fresh description found retyped in place, not yet followed.
    pending_retypes: Vec<Retype>,
}

impl UpstreamGuard {
    /// Guards `upstream`, created with `identity`.
    pub fn new(upstream: &UpstreamTable, identity: Option<String>) -> Self {
        Self {
            name: format!("{}.{}", upstream.schema, upstream.name),
            relation: upstream.name.clone(),
            schema: upstream.schema.clone(),
            table: upstream.name.clone(),
            names: upstream.columns.iter().map(|c| c.name.clone()).collect(),
            types: upstream.upstream_types.clone(),
            data_types: upstream.columns.iter().map(|c| c.data_type).collect(),
            pk: upstream.pk.clone(),
            identity,
            type_ids: None,
            columns_since: Vec::new(),
            dropped: Vec::new(),
            missing: Vec::new(),
            retyped_at: Vec::new(),
            pending_retypes: Vec::new(),
        }
    }

    /// The guard of the Sluice table called `relation` (named in the reasons to stop).
    pub fn for_relation(mut self, relation: &str) -> Self {
        relation.clone_into(&mut self.relation);
        self
    }

    /// The guard of a table that followed columns added upstream at the positions `since`.
    pub fn with_columns_since(mut self, since: Vec<(u64, usize)>) -> Self {
        self.columns_since = since;
        self
    }

    /// The guard of a table that followed columns dropped upstream (`(position, column)`).
    pub fn with_dropped(mut self, dropped: Vec<(u64, usize)>) -> Self {
        self.dropped = dropped;
        self
    }

    /// The guard of a table that followed text columns retyped in place (`(position, column)`).
    pub fn with_retyped(mut self, retyped: Vec<(u64, usize)>) -> Self {
        self.retyped_at = retyped;
        self
    }

    /// Whether column `u` retyped in place as a description at `position` says was followed
    /// already (the description is from before or at the followed retype).
    pub fn retype_followed(&self, u: usize, position: u64) -> bool {
        self.retyped_at.iter().any(|&(at, r)| r == u && position <= at)
    }

    /// Columns a fresh description found retyped in place (see [`Self::check_types`]), to
    /// follow.
    pub fn pending_retypes(&self) -> &[Retype] {
        &self.pending_retypes
    }

    /// How many of the upstream columns the table knows a description at `position` can
    /// name: all, or those there were before columns were added at a later position.
    pub fn columns_at(&self, position: u64) -> usize {
        let before = self.columns_since.iter().filter(|&&(at, _)| position < at);
        before.map(|&(_, n)| n).min().unwrap_or(self.names.len())
    }

    /// For each upstream column the table knows, its place among the columns a description
    /// (and a change) at `position` has: `None` for one not there then (added later, or
    /// dropped by then).
    pub fn layout_at(&self, position: u64) -> Vec<Option<usize>> {
        let known = self.columns_at(position);
        let mut next = 0;
        (0..self.names.len())
            .map(|u| {
                let gone = self.dropped.iter().any(|&(at, d)| d == u && at <= position);
                if u >= known || gone {
                    return None;
                }
                next += 1;
                Some(next - 1)
            })
            .collect()
    }

    /// Whether the layout ever differs from the upstream columns' own order (a column was
    /// dropped): changes are then mapped by [`Self::layout_at`].
    pub fn has_drops(&self) -> bool {
        !self.dropped.is_empty()
    }

    /// Takes `types` as the ones the columns have (a test without an upstream to learn them).
    #[cfg(test)]
    pub fn learn_types(&mut self, types: Vec<TypeId>) {
        self.type_ids = Some(types);
    }

    /// Which column a description naming the column `types`, laid out as `layout` (see
    /// [`Self::layout_at`], [`Self::places`]), retyped: `Some(None)` for none, `None` when that
    /// cannot be told (no types named, or none learnt yet).
    pub fn retyped_column(
        &self,
        types: &[TypeId],
        layout: &[Option<usize>],
    ) -> Option<Option<usize>> {
        let known = self.type_ids.as_ref()?;
        let places: Vec<(usize, usize)> =
            layout.iter().enumerate().filter_map(|(u, p)| p.map(|p| (u, p))).collect();
        if places.iter().any(|&(u, p)| p >= types.len() || u >= known.len()) {
            return None;
        }
        // A column dropped before its type was learnt has none to compare (`(0, 0)`).
        let retyped = places.iter().find(|&&(u, p)| known[u] != (0, 0) && known[u] != types[p]);
        Some(retyped.map(|&(u, _)| u))
    }

    /// The reason to stop at column `column` retyped, to the type named `now` when the
    /// upstream named it.
    pub fn retyped(&self, column: usize, now: Option<&str>) -> String {
        let (name, ty) = (&self.names[column], &self.types[column]);
        match now {
            Some(now) => {
                self.stopped(&format!("column {name} changed type upstream from {ty} to {now}"))
            }
            None => self.stopped(&format!("column {name} changed type upstream from {ty}")),
        }
    }

    /// What a description at `position` naming the columns `names` says. Each column the
    /// table knows is matched by name: one the description lacks is fine if it was added
    /// later (at or after `position`: a description from before the addition, maybe in the
    /// same transaction) or dropped and followed, else it was dropped now; one followed as
    /// dropped at or after `position` may still be there (a description from before the
    /// drop), but after it, it was dropped and added again. The columns it has must keep
    /// their order and come first; names after them are columns added. A renamed or moved
    /// column, a dropped key column, or a known name added again stops the table. MySQL DDL
    /// that drops columns comes as `[None, statement, names..]`, other DDL that reshapes
    /// the table as `[None, statement]`.
    pub fn check_names(&self, names: &[Option<&str>], position: u64) -> Described {
        let theirs: Vec<&str> = match names {
            [None, Some(statement)] => {
                return Described::Stop(self.stopped(&format!("the upstream ran {statement}")));
            }
            [None, Some(_), dropped @ ..] => {
                // DDL that dropped columns: the table's live ones it names are dropped now.
                let dropped: Vec<&str> = dropped.iter().flatten().copied().collect();
                let layout = self.layout_at(u64::MAX);
                let now: Vec<usize> = (0..self.names.len())
                    .filter(|&u| layout[u].is_some() && dropped.contains(&self.names[u].as_str()))
                    .collect();
                if let Some(&key) = now.iter().find(|u| self.pk.contains(u)) {
                    let what = format!("key column {} was dropped upstream", self.names[key]);
                    return Described::Stop(self.stopped(&what));
                }
                return match now.is_empty() {
                    true => Described::Same,
                    false => Described::Changed { dropped: now, added: Vec::new() },
                };
            }
            _ if names.iter().any(Option::is_none) => {
                // Unnamed columns (a MySQL table map without names): by place only.
                let expected = self.layout_at(position).iter().flatten().count();
                return match names.len() >= expected {
                    true => Described::Same,
                    false => Described::Stop(self.stopped(&format!(
                        "the upstream table has {} columns; the table reads {expected}",
                        names.len()
                    ))),
                };
            }
            _ => names.iter().map(|n| n.unwrap_or("?")).collect(),
        };
        let shown = theirs.join(", ");
        let ours: Vec<&str> = self.names.iter().map(String::as_str).collect();
        let ours = ours.join(", ");
        let changed = |what: String| {
            Described::Stop(self.stopped(&format!(
                "{what} upstream (its columns are now {shown}; the table knows {ours})"
            )))
        };
        let places = self.places(&theirs);
        let mut dropped = Vec::new();
        for (u, place) in places.iter().enumerate() {
            let name = &self.names[u];
            match (place, self.dropped_at(u)) {
                (Some(_), Some(at)) if position > at => {
                    return changed(format!("column {name} was dropped and added again"));
                }
                (Some(_), _) | (None, Some(_)) => {}
                (None, None) if self.added_at(u).is_some_and(|at| position <= at) => {}
                (None, None) => dropped.push(u),
            }
        }
        // The known columns it has, in their order, first; new ones after them.
        let known: Vec<usize> = places.iter().flatten().copied().collect();
        if known.iter().enumerate().any(|(i, &place)| place != i) {
            let renamed =
                theirs.iter().take(known.len()).find(|n| !self.names.contains(&n.to_string()));
            if let (Some(&u), Some(_)) = (dropped.first(), renamed) {
                return changed(format!("column {} was renamed", self.names[u]));
            }
            let moved = (0..self.names.len())
                .filter(|&u| places[u].is_some())
                .zip(0..)
                .find(|&(u, i)| places[u] != Some(i))
                .map_or("?", |(u, _)| self.names[u].as_str());
            return changed(format!("column {moved} was dropped and added again, or moved"));
        }
        if let Some(&key) = dropped.iter().find(|u| self.pk.contains(u)) {
            return changed(format!("key column {} was dropped", self.names[key]));
        }
        let added: Vec<String> = theirs[known.len()..].iter().map(|n| (*n).to_owned()).collect();
        match (dropped.is_empty(), added.is_empty()) {
            (true, true) => Described::Same,
            _ => Described::Changed { dropped, added },
        }
    }

    /// For each upstream column the table knows, its place among the columns `names` (by
    /// name), if there.
    pub fn places(&self, names: &[&str]) -> Vec<Option<usize>> {
        self.names.iter().map(|n| names.iter().position(|m| m == n)).collect()
    }

    /// Where upstream column `u` was followed as dropped, if it was.
    fn dropped_at(&self, u: usize) -> Option<u64> {
        self.dropped.iter().find(|&&(_, d)| d == u).map(|&(at, _)| at)
    }

    /// Where upstream column `u` was followed as added, if it was added after the table was
    /// created.
    fn added_at(&self, u: usize) -> Option<u64> {
        self.columns_since.iter().filter(|&&(_, n)| n <= u).map(|&(at, _)| at).max()
    }

    /// What keeps the table from following its upstream now that it says its columns
    /// changed, by a fresh description of it: a column retyped, or the table gone. Columns
    /// dropped there and not yet described by the stream are not a reason: the description
    /// that comes with the next change is followed.
    pub async fn check_types(&mut self, session: &mut UpstreamSession) -> Result<Option<String>> {
        let now = match session.describe_table(&self.schema, &self.table).await {
            Ok(now) => now,
            Err(Error::UnknownRelation { .. }) => return Ok(Some(self.dropped())),
            Err(e) => return Err(e),
        };
        let names: Vec<Option<&str>> = now.columns.iter().map(|c| Some(c.name.as_str())).collect();
        if let Described::Stop(reason) = self.check_names(&names, u64::MAX) {
            return Ok(Some(reason));
        }
        let layout = self.layout_at(u64::MAX);
        let mut learnt = Vec::with_capacity(self.names.len());
        let mut pending = false;
        let mut retyped = Vec::new();
        for (u, (name, ty)) in self.names.iter().zip(&self.types).enumerate() {
            let Some(i) = layout[u].and_then(|_| now.columns.iter().position(|c| &c.name == name))
            else {
                // Dropped (and followed), or dropped and not yet described by the stream: its
                // type is not known from this description.
                pending |= layout[u].is_some();
                learnt.push((0, 0));
                continue;
            };
            if now.upstream_types.get(i) != Some(ty) {
                let their_type = now.upstream_types.get(i).map_or("?", String::as_str);
                let holds = now.columns[i].data_type;
                if !self.retypes_in_place(u, their_type, holds) {
                    return Ok(Some(self.retyped(u, Some(their_type))));
                }
                retyped.push((u, their_type.to_owned(), holds));
            }
            learnt.push(now.type_ids.get(i).copied().unwrap_or((0, 0)));
        }
        self.pending_retypes = retyped;
        if !now.type_ids.is_empty() && !pending {
            self.type_ids = Some(learnt);
        }
        Ok(None)
    }

    /// What keeps the table from following its upstream: its identity, and its columns too
    /// when `columns` (see [`Self::check_types`]).
    pub async fn check(
        &mut self,
        session: &mut UpstreamSession,
        columns: bool,
    ) -> Result<Option<String>> {
        if columns && let Some(reason) = self.check_types(session).await? {
            return Ok(Some(reason));
        }
        self.check_identity(session).await
    }

    /// What keeps the table from following its upstream, by the upstream table's identity:
    /// dropped, or dropped and created again.
    pub async fn check_identity(
        &mut self,
        session: &mut UpstreamSession,
    ) -> Result<Option<String>> {
        let now = session.table_identity(&self.schema, &self.table).await?;
        self.missing = now.as_deref().map(|now| self.missing_from(now)).unwrap_or_default();
        Ok(match (now, &self.identity) {
            (None, _) => Some(self.dropped()),
            (Some(now), Some(was)) => self.compare_identity(was, &now),
            (Some(now), None) => {
                self.identity = Some(now);
                None
            }
        })
    }

    /// The columns the table reads (the upstream's, as far as it has followed them) that
    /// identity `now` lacks: dropped upstream, and not yet described by the stream (Postgres
    /// describes a table with its next change). Nothing where the identity names no columns.
    fn missing_from(&self, now: &str) -> Vec<usize> {
        let Some((_, columns)) = now.split_once(':') else { return Vec::new() };
        let names: Vec<&str> =
            columns.split(',').filter_map(|c| c.split_once('=')).map(|(_, n)| n).collect();
        if names.is_empty() && !columns.is_empty() {
            return Vec::new();
        }
        let layout = self.layout_at(u64::MAX);
        (0..self.names.len())
            .filter(|&u| layout[u].is_some() && !names.contains(&hex(&self.names[u]).as_str()))
            .collect()
    }

    /// Columns the table reads that the last identity check found gone upstream (see
    /// [`Self::missing_from`]).
    pub fn missing(&self) -> &[usize] {
        &self.missing
    }

    /// Whether column `u` may take upstream type `now` (Sluice's type for it: `holds`) in
    /// place: both hold text that Sluice keeps as it is (`text`, `varchar(n)` of any length,
    /// MySQL's `*text`), or Sluice's type takes `holds` in place (the same type, an integer,
    /// float or decimal widened: [`in_place`](crate::storage::row_codec::in_place)), or the
    /// table holds the column as text whatever its type. A key column takes only text to text
    /// in place, keeping its collation (MySQL), which orders the snapshot's pages.
    pub fn retypes_in_place(&self, u: usize, now: &str, holds: DataType) -> bool {
        if let (Some(was), Some(then)) = (text_type(&self.types[u]), text_type(now)) {
            return !self.pk.contains(&u) || was == then;
        }
        let held = self.data_types[u];
        let unconstrained = matches!(holds, DataType::Decimal { precision, scale }
            if crate::types::numeric::is_unconstrained(precision, scale));
        // A column of a type Sluice holds as text (`uuid`), or that the table declared text.
        let as_text = held == DataType::Varchar && text_type(&self.types[u]).is_none();
        !self.pk.contains(&u)
            && !unconstrained
            && (as_text || crate::storage::row_codec::in_place(held, holds).is_some())
    }

    /// The same for a type a Postgres description names by id, with the type as printed and
    /// Sluice's type for it: text, `varchar`, the integers, floats and constrained numerics.
    pub fn retypes_in_place_to(&self, u: usize, now: TypeId) -> Option<(String, DataType)> {
        let (name, holds) = match now {
            (25, _) => ("text".to_owned(), DataType::Varchar),
            (1043, -1) => ("character varying".to_owned(), DataType::Varchar),
            (1043, modifier) => (format!("character varying({})", modifier - 4), DataType::Varchar),
            (21, _) => ("smallint".to_owned(), DataType::Int16),
            (23, _) => ("integer".to_owned(), DataType::Int32),
            (20, _) => ("bigint".to_owned(), DataType::Int64),
            (700, _) => ("real".to_owned(), DataType::Float32),
            (701, _) => ("double precision".to_owned(), DataType::Float64),
            (1700, modifier) if modifier >= 4 => {
                let precision = ((modifier - 4) >> 16) & 0xffff;
                let scale = (modifier - 4) & 0xffff;
                let fits = precision <= i32::from(crate::types::numeric::MAX_PRECISION);
                if !fits || scale > precision {
                    return None;
                }
                let ty = DataType::Decimal { precision: precision as u8, scale: scale as i8 };
                (format!("numeric({precision},{scale})"), ty)
            }
            _ => return None,
        };
        self.retypes_in_place(u, &name, holds).then_some((name, holds))
    }

    /// Takes column `u` as having type `now` (`name` as printed, `holds` Sluice's) from here
    /// on: a type it takes in place (see [`Self::retypes_in_place`]). Descriptions from
    /// before, read again, are taken back the same way.
    pub fn retype(&mut self, u: usize, now: TypeId, name: String, holds: DataType) {
        if let Some(known) = self.type_ids.as_mut().and_then(|k| k.get_mut(u)) {
            *known = now;
        }
        self.types[u] = name;
        if self.data_types[u] != DataType::Varchar {
            self.data_types[u] = holds;
        }
    }

    /// Takes column `u` as described with type `now` by a description from before a retype
    /// the table followed (see [`Self::retype_followed`]): the next description is compared
    /// with it, and the types recorded stay.
    pub fn take_described_type(&mut self, u: usize, now: TypeId) {
        if let Some(known) = self.type_ids.as_mut().and_then(|k| k.get_mut(u)) {
            *known = now;
        }
    }

    /// Whether `u` is one of the upstream's key columns.
    pub fn is_key(&self, u: usize) -> bool {
        self.pk.contains(&u)
    }

    /// What changed between identities `was` and `now` (`oid:number=name,..`, the names in
    /// hex; `oid:number,..` as recorded before names were; or a constant where the upstream
    /// has none) that the table cannot follow: another table, or a column dropped and added
    /// again under its name (another number). Columns dropped and added after the others are
    /// followed (their descriptions come with the table's next change).
    fn compare_identity(&self, was: &str, now: &str) -> Option<String> {
        let (was_table, was_columns) = was.split_once(':').unwrap_or((was, ""));
        let (now_table, now_columns) = now.split_once(':').unwrap_or((now, ""));
        if was_table != now_table {
            return Some(self.stopped(
                "the upstream table was dropped and created again: its rows and changes are \
                 another table's",
            ));
        }
        let parse = |list: &str| -> Vec<(String, Option<String>)> {
            let entries = list.split(',').filter(|c| !c.is_empty());
            entries
                .map(|c| match c.split_once('=') {
                    Some((n, name)) => (n.to_owned(), Some(name.to_owned())),
                    None => (c.to_owned(), None),
                })
                .collect()
        };
        let (was, now) = (parse(was_columns), parse(now_columns));
        for (number, name) in &was {
            let Some(name) = name else { continue };
            if let Some((again, _)) =
                now.iter().find(|(n, m)| m.as_ref() == Some(name) && n != number)
            {
                let name = unhex(name);
                return Some(self.stopped(&format!(
                    "column {name} was dropped and added again (its column number changed from \
                     {number} to {again}): stored values no longer line up with the upstream's"
                )));
            }
        }
        None
    }

    fn dropped(&self) -> String {
        self.stopped("the upstream table was dropped")
    }
}

/// Whether a column of upstream type `was` (as printed) takes type `now` in place (see
/// [`UpstreamGuard::retypes_in_place`]; key columns aside).
pub fn in_place(was: &str, now: &str) -> bool {
    text_type(was).is_some() && text_type(now).is_some()
}

/// For a type that holds text Sluice keeps as it is (Postgres `text`, `character varying(n)`;
/// MySQL `varchar(n)`, `*text`), its collation as printed after it (empty for none).
fn text_type(printed: &str) -> Option<&str> {
    let lower = printed.trim();
    let (base, collation) = match lower.find(" collate ") {
        Some(at) => (&lower[..at], &lower[at..]),
        None => (lower, ""),
    };
    if base.ends_with(']') {
        // An array of text is another type.
        return None;
    }
    let text = base == "text"
        || base.starts_with("character varying")
        || base.starts_with("varchar(")
        || ["tinytext", "mediumtext", "longtext"].contains(&base);
    text.then_some(collation)
}

/// A column name's hex form in an identity (see [`UpstreamGuard::compare_identity`]).
fn hex(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

/// A column name from its hex form in an identity (see [`UpstreamGuard::compare_identity`]).
fn unhex(hex: &str) -> String {
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl UpstreamGuard {
    /// The whole reason, with what to do.
    fn stopped(&self, what: &str) -> String {
        format!(
            "the table stopped following {}: {what}. Sluice cannot follow this change; the table \
             keeps the rows it had. ALTER TABLE {} REFRESH SCHEMA builds it again from the \
             upstream table as it is now",
            self.name, self.relation
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::ColumnCatalog;
    use crate::types::DataType;

    fn guard() -> UpstreamGuard {
        UpstreamGuard::new(&guard_upstream(), Some("16384".into()))
    }

    fn guard_upstream() -> UpstreamTable {
        UpstreamTable {
            schema: "public".into(),
            name: "t".into(),
            columns: ["id", "a", "b"]
                .iter()
                .zip([DataType::Int32, DataType::Varchar, DataType::Varchar])
                .map(|(n, t)| ColumnCatalog::new(*n, t))
                .collect(),
            upstream_types: vec!["integer".into(), "text".into(), "text".into()],
            pk: vec![0],
            type_ids: Vec::new(),
            dropped: Vec::new(),
        }
    }

    /// `(id, a, b, c)`: `c` added after the table was created.
    fn four_columns() -> UpstreamTable {
        UpstreamTable {
            columns: ["id", "a", "b", "c"]
                .iter()
                .map(|n| ColumnCatalog::new(*n, DataType::Varchar))
                .collect(),
            upstream_types: ["integer", "text", "text", "text"].map(String::from).to_vec(),
            ..guard_upstream()
        }
    }

    fn stop(d: Described) -> String {
        match d {
            Described::Stop(reason) => reason,
            other => panic!("not a stop: {other:?}"),
        }
    }

    #[test]
    fn the_same_columns_or_more_after_them_are_followed() {
        let g = guard();
        assert_eq!(g.check_names(&[Some("id"), Some("a"), Some("b")], 0), Described::Same);
        assert_eq!(
            g.check_names(&[Some("id"), Some("a"), Some("b"), Some("c")], 0),
            Described::Changed { dropped: vec![], added: vec!["c".into()] }
        );
    }

    #[test]
    fn dropped_columns_are_followed_but_not_a_key_or_one_added_again() {
        let g = guard();
        assert_eq!(
            g.check_names(&[Some("id"), Some("b")], 0),
            Described::Changed { dropped: vec![1], added: vec![] }
        );
        assert_eq!(
            g.check_names(&[Some("id"), Some("b"), Some("x")], 0),
            Described::Changed { dropped: vec![1], added: vec!["x".into()] }
        );
        // MySQL: the DDL names what it drops.
        assert_eq!(
            g.check_names(&[None, Some("ALTER TABLE t DROP b"), Some("b")], 0),
            Described::Changed { dropped: vec![2], added: vec![] }
        );
        let key = stop(g.check_names(&[Some("a"), Some("b")], 0));
        assert!(key.contains("key column id was dropped upstream"), "{key}");
        let again = stop(g.check_names(&[Some("id"), Some("b"), Some("a")], 0));
        assert!(again.contains("column a was dropped and added again"), "{again}");
    }

    #[test]
    fn a_description_names_the_retyped_column_once_the_types_are_known() {
        let mut g = guard();
        let described = [(23, -1), (25, -1), (25, -1)];
        assert_eq!(
            g.retyped_column(&described, &g.layout_at(0)),
            None,
            "nothing learnt: ask the upstream"
        );
        g.type_ids = Some(described.to_vec());
        assert_eq!(g.retyped_column(&described, &g.layout_at(0)), Some(None));
        assert_eq!(
            g.retyped_column(&[(23, -1), (25, -1), (25, -1), (16, -1)], &g.layout_at(0)),
            Some(None)
        );
        assert_eq!(
            g.retyped_column(&[(23, -1), (1043, 24), (25, -1)], &g.layout_at(0)),
            Some(Some(1))
        );
        assert_eq!(
            g.retyped_column(&[], &g.layout_at(0)),
            None,
            "a description without types (MySQL)"
        );
        let reason = g.retyped(1, None);
        assert!(reason.contains("column a changed type upstream from text"), "{reason}");
        assert!(reason.contains("ALTER TABLE t REFRESH SCHEMA builds it again"), "{reason}");
    }

    #[test]
    fn another_table_or_a_column_added_again_under_its_name_stops_the_table() {
        let g = guard();
        let (id, a, b, c) = ("6964", "61", "62", "63");
        let identity = |columns: &[(u32, &str)]| {
            let list: Vec<String> = columns.iter().map(|(n, name)| format!("{n}={name}")).collect();
            format!("16384:{}", list.join(","))
        };
        let was = identity(&[(1, id), (2, a), (3, b)]);
        assert_eq!(g.compare_identity(&was, &was), None);
        assert_eq!(g.compare_identity(&was, &identity(&[(1, id), (2, a), (3, b), (5, c)])), None);
        assert_eq!(g.compare_identity(&was, &identity(&[(1, id), (3, b)])), None, "a drop");
        assert_eq!(g.compare_identity(&was, &identity(&[(1, id), (3, b), (4, c)])), None);
        let again = g.compare_identity(&was, &was.replace("16384", "16390")).unwrap();
        assert!(again.contains("dropped and created again"), "{again}");
        let readded = g.compare_identity(&was, &identity(&[(1, id), (3, b), (4, a)])).unwrap();
        assert!(readded.contains("column a was dropped and added again"), "{readded}");
        assert!(readded.contains("from 2 to 4"), "{readded}");
        assert_eq!(g.compare_identity("16384:1,2,3", "16384:1,3,4"), None, "no names recorded");
        assert_eq!(g.missing_from(&identity(&[(1, id), (3, b), (4, c)])), vec![1], "a is gone");
        assert_eq!(g.missing_from(&was), Vec::<usize>::new());
        assert_eq!(g.missing_from("16384:1,3"), Vec::<usize>::new(), "no names to tell");
        assert_eq!(hex("a"), a);
        assert_eq!(g.compare_identity("table", "table"), None, "MySQL: there or not");
    }

    #[test]
    fn a_renamed_or_moved_column_stops_the_table() {
        let g = guard();
        let moved = stop(g.check_names(&[Some("id"), Some("b"), Some("a")], 0));
        // A column cannot move in place upstream without being dropped and added again.
        assert!(moved.contains("column a was dropped and added again"), "{moved}");
        let moved = stop(g.check_names(&[Some("b"), Some("id"), Some("a")], 0));
        assert!(moved.contains("column id was dropped and added again, or moved"), "{moved}");
        let renamed = stop(g.check_names(&[Some("id"), Some("x"), Some("b")], 0));
        assert!(renamed.contains("column a was renamed"), "{renamed}");
        assert!(
            renamed.contains("its columns are now id, x, b; the table knows id, a, b"),
            "{renamed}"
        );
        assert!(renamed.starts_with("the table stopped following public.t"), "{renamed}");
        let ddl = stop(g.check_names(&[None, Some("RENAME TABLE t TO u")], 0));
        assert!(ddl.contains("the upstream ran RENAME TABLE t TO u"), "{ddl}");
    }

    #[test]
    fn descriptions_from_before_followed_columns_name_fewer() {
        // `c` was added and followed at position 100: descriptions before it name id, a, b.
        let upstream = four_columns();
        let mut g = UpstreamGuard::new(&upstream, None).with_columns_since(vec![(100, 3)]);
        let old = [Some("id"), Some("a"), Some("b")];
        assert_eq!((g.columns_at(99), g.columns_at(100)), (3, 4));
        assert_eq!(g.check_names(&old, 99), Described::Same);
        assert_eq!(g.check_names(&old, 100), Described::Same, "before it, in its transaction");
        assert_eq!(
            g.check_names(&old, 101),
            Described::Changed { dropped: vec![3], added: vec![] },
            "c dropped again"
        );
        g.type_ids = Some(vec![(23, -1), (25, -1), (25, -1), (25, -1)]);
        assert_eq!(g.retyped_column(&[(23, -1), (25, -1), (25, -1)], &g.layout_at(99)), Some(None));
        assert_eq!(g.retyped_column(&[(23, -1), (25, -1), (25, -1)], &g.layout_at(100)), None);
        assert_eq!(
            g.retyped_column(&[(23, -1), (25, -1), (16, -1)], &g.layout_at(99)),
            Some(Some(2))
        );
    }

    #[test]
    fn descriptions_after_a_followed_drop_lack_the_column() {
        // `a` was dropped and followed at position 100, then `c` added at 200.
        let upstream = four_columns();
        let mut g = UpstreamGuard::new(&upstream, None)
            .with_columns_since(vec![(200, 3)])
            .with_dropped(vec![(100, 1)]);
        assert_eq!(g.layout_at(99), vec![Some(0), Some(1), Some(2), None]);
        assert_eq!(g.layout_at(100), vec![Some(0), None, Some(1), None]);
        assert_eq!(g.layout_at(200), vec![Some(0), None, Some(1), Some(2)]);
        assert_eq!(g.check_names(&[Some("id"), Some("a"), Some("b")], 99), Described::Same);
        assert_eq!(g.check_names(&[Some("id"), Some("b")], 150), Described::Same);
        // From before the drop, in its transaction: the column is still there.
        assert_eq!(g.check_names(&[Some("id"), Some("a"), Some("b")], 100), Described::Same);
        assert_eq!(g.places(&["id", "a", "b"]), vec![Some(0), Some(1), Some(2), None]);
        assert_eq!(g.places(&["id", "b", "c"]), vec![Some(0), None, Some(1), Some(2)]);
        assert_eq!(g.check_names(&[Some("id"), Some("b"), Some("c")], 200), Described::Same);
        g.type_ids = Some(vec![(23, -1), (25, -1), (25, -1), (25, -1)]);
        assert_eq!(
            g.retyped_column(&[(23, -1), (25, -1), (25, -1)], &g.layout_at(200)),
            Some(None)
        );
        assert_eq!(
            g.retyped_column(&[(23, -1), (25, -1), (16, -1)], &g.layout_at(200)),
            Some(Some(3))
        );
        let again = stop(g.check_names(&[Some("id"), Some("b"), Some("c"), Some("a")], 200));
        assert!(again.contains("column a was dropped and added again"), "{again}");
    }

    #[test]
    fn text_columns_take_wider_text_types_in_place() {
        let g = guard();
        let text = DataType::Varchar;
        assert!(g.retypes_in_place(1, "character varying(20)", text));
        assert!(g.retypes_in_place(1, "character varying", text));
        assert!(!g.retypes_in_place(1, "integer", DataType::Int32));
        assert!(!g.retypes_in_place(0, "text", text), "integer to text is another type");
        let named = |t: Option<(String, DataType)>| t.map(|(name, _)| name);
        assert_eq!(
            named(g.retypes_in_place_to(1, (1043, 24))).as_deref(),
            Some("character varying(20)")
        );
        assert_eq!(named(g.retypes_in_place_to(1, (25, -1))).as_deref(), Some("text"));
        assert_eq!(g.retypes_in_place_to(1, (23, -1)), None);
        assert_eq!(text_type("varchar(10) collate utf8mb4_bin"), Some(" collate utf8mb4_bin"));
        assert_eq!(text_type("longtext"), Some(""));
        assert_eq!(text_type("char(3)"), None, "blank-padded: not in place");
        assert_eq!(text_type("character varying(6)[]"), None, "an array");
    }

    #[test]
    fn numbers_take_wider_types_in_place_and_key_columns_none() {
        // `(id integer key, n integer, r real, d numeric(10,2), u uuid)`.
        let dec = |precision, scale| DataType::Decimal { precision, scale };
        let types =
            [DataType::Int32, DataType::Int32, DataType::Float32, dec(10, 2), DataType::Varchar];
        let upstream = UpstreamTable {
            columns: ["id", "n", "r", "d", "u"]
                .iter()
                .zip(types)
                .map(|(n, t)| ColumnCatalog::new(*n, t))
                .collect(),
            upstream_types: ["integer", "integer", "real", "numeric(10,2)", "uuid"]
                .map(String::from)
                .to_vec(),
            ..guard_upstream()
        };
        let g = UpstreamGuard::new(&upstream, None);
        let to = |u, id| g.retypes_in_place_to(u, id);
        assert_eq!(to(1, (20, -1)), Some(("bigint".into(), DataType::Int64)));
        assert_eq!(to(0, (20, -1)), None, "a key column keeps its type");
        assert_eq!(to(1, (21, -1)), None, "narrowed");
        assert_eq!(to(2, (701, -1)), Some(("double precision".into(), DataType::Float64)));
        // numeric(12,2) and numeric(40,4) are wider; numeric(12,4) has fewer integer digits
        // at another scale of the same width; unconstrained numeric is not taken.
        let numeric = |p: i32, s: i32| (1700, ((p << 16) | s) + 4);
        assert_eq!(to(3, numeric(12, 2)), Some(("numeric(12,2)".into(), dec(12, 2))));
        assert_eq!(to(3, numeric(40, 4)), Some(("numeric(40,4)".into(), dec(40, 4))));
        assert_eq!(to(3, numeric(12, 4)), None);
        assert_eq!(to(3, (1700, -1)), None);
        // A uuid held as text takes any type the upstream gives it.
        assert!(g.retypes_in_place(4, "text", DataType::Varchar));
        assert!(!g.retypes_in_place(1, "text", DataType::Varchar), "integer to text");
    }
}
