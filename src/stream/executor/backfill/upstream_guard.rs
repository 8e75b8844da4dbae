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

/// How often the upstream table's identity is checked.
pub const IDENTITY_INTERVAL: Duration = Duration::from_secs(5);

/// The upstream columns and identity a CDC table was created over.
pub struct UpstreamGuard {
    /// `schema.table`.
    name: String,
    schema: String,
    table: String,
    names: Vec<String>,
    types: Vec<String>,
    /// The recorded identity; learnt at the first check when none was recorded.
    identity: Option<String>,
    /// The catalog's type ids of the columns read, learnt from a description of the upstream
    /// table whose printed types were the recorded ones (see the module docs).
    type_ids: Option<Vec<TypeId>>,
    /// Where columns were added and followed (see
    /// [`CdcTableInfo::columns_since`](crate::catalog::CdcTableInfo::columns_since)).
    columns_since: Vec<(u64, usize)>,
}

impl UpstreamGuard {
    /// Guards `upstream`, created with `identity`.
    pub fn new(upstream: &UpstreamTable, identity: Option<String>) -> Self {
        Self {
            name: format!("{}.{}", upstream.schema, upstream.name),
            schema: upstream.schema.clone(),
            table: upstream.name.clone(),
            names: upstream.columns.iter().map(|c| c.name.clone()).collect(),
            types: upstream.upstream_types.clone(),
            identity,
            type_ids: None,
            columns_since: Vec::new(),
        }
    }

    /// The guard of a table that followed columns added upstream at the positions `since`.
    pub fn with_columns_since(mut self, since: Vec<(u64, usize)>) -> Self {
        self.columns_since = since;
        self
    }

    /// How many upstream columns the table reads.
    pub fn width(&self) -> usize {
        self.names.len()
    }

    /// How many of the columns a description at `position` names: all, or those there were
    /// before columns were added at a later position.
    pub fn columns_at(&self, position: u64) -> usize {
        let before = self.columns_since.iter().filter(|&&(at, _)| position < at);
        before.map(|&(_, n)| n).min().unwrap_or(self.names.len())
    }

    /// Takes `types` as the ones the columns have (a test without an upstream to learn them).
    #[cfg(test)]
    pub fn learn_types(&mut self, types: Vec<TypeId>) {
        self.type_ids = Some(types);
    }

    /// Which column a description naming the column `types` retyped: `Some(None)` for none,
    /// `None` when that cannot be told (no types named, or none learnt yet).
    pub fn retyped_column(&self, types: &[TypeId], position: u64) -> Option<Option<usize>> {
        let known = self.type_ids.as_ref()?;
        let known = &known[..self.columns_at(position).min(known.len())];
        if types.len() < known.len() {
            return None;
        }
        Some(known.iter().zip(types).position(|(was, now)| was != now))
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

    /// What keeps the table from following changes with the columns `names`, described at
    /// `position`, if anything.
    pub fn check_names(&self, names: &[Option<&str>], position: u64) -> Option<String> {
        if let [None, Some(statement)] = names {
            // Not a description but DDL that drops, renames or reshapes the table (MySQL).
            return Some(self.stopped(&format!("the upstream ran {statement}")));
        }
        let ours = self.names.join(", ");
        let theirs: Vec<&str> = names.iter().map(|n| n.unwrap_or("?")).collect();
        let theirs = theirs.join(", ");
        for (i, name) in self.names[..self.columns_at(position)].iter().enumerate() {
            if names.get(i).copied().flatten() == Some(name.as_str()) {
                continue;
            }
            let what = match names.contains(&Some(name.as_str())) {
                true => format!("column {name} moved"),
                false => format!("column {name} was dropped or renamed"),
            };
            return Some(self.stopped(&format!(
                "{what} upstream (its columns are now {theirs}; the table reads {ours})"
            )));
        }
        None
    }

    /// What keeps the table from following its upstream now that it says its columns
    /// changed, by a fresh description of it: a column retyped, or the table gone.
    pub async fn check_types(&mut self, session: &mut UpstreamSession) -> Result<Option<String>> {
        let now = match session.describe_table(&self.schema, &self.table).await {
            Ok(now) => now,
            Err(Error::UnknownRelation { .. }) => return Ok(Some(self.dropped())),
            Err(e) => return Err(e),
        };
        for (i, (name, ty)) in self.names.iter().zip(&self.types).enumerate() {
            let theirs = now.columns.get(i).map(|c| c.name.as_str());
            let their_type = now.upstream_types.get(i);
            if theirs != Some(name.as_str()) {
                let names: Vec<Option<&str>> =
                    now.columns.iter().map(|c| Some(c.name.as_str())).collect();
                return Ok(self.check_names(&names, u64::MAX));
            }
            if their_type != Some(ty) {
                let now = their_type.map_or("?", String::as_str);
                return Ok(Some(self.retyped(i, Some(now))));
            }
        }
        if now.type_ids.len() >= self.names.len() {
            self.type_ids = Some(now.type_ids[..self.names.len()].to_vec());
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
        Ok(match (now, &self.identity) {
            (None, _) => Some(self.dropped()),
            (Some(now), Some(was)) => self.compare_identity(was, &now),
            (Some(now), None) => {
                self.identity = Some(now);
                None
            }
        })
    }

    /// What changed between identities `was` and `now` (`oid:column numbers`, or a constant
    /// where the upstream has none) that the table cannot follow: another table, or columns
    /// dropped and added again (more columns after the ones read are followed).
    fn compare_identity(&self, was: &str, now: &str) -> Option<String> {
        let (was_table, was_columns) = was.split_once(':').unwrap_or((was, ""));
        let (now_table, now_columns) = now.split_once(':').unwrap_or((now, ""));
        if was_table != now_table {
            return Some(self.stopped(
                "the upstream table was dropped and created again: its rows and changes are \
                 another table's",
            ));
        }
        let now_columns: Vec<&str> = now_columns.split(',').collect();
        let same = was_columns.split(',').enumerate().all(|(i, c)| now_columns.get(i) == Some(&c));
        (!same).then(|| {
            self.stopped(
                "columns of the upstream table were dropped or added again (the upstream's \
                 column numbers changed): stored values no longer line up with the upstream's",
            )
        })
    }

    fn dropped(&self) -> String {
        self.stopped("the upstream table was dropped")
    }

    /// The whole reason, with what to do.
    fn stopped(&self, what: &str) -> String {
        format!(
            "the table stopped following {}: {what}. Sluice cannot follow this change yet; the table \
             keeps the rows it had. Drop it and create it again to read the upstream table as \
             it is now",
            self.name
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
                .map(|n| ColumnCatalog::new(*n, DataType::Varchar))
                .collect(),
            upstream_types: vec!["integer".into(), "text".into(), "text".into()],
            pk: vec![0],
            type_ids: Vec::new(),
        }
    }

    #[test]
    fn the_same_columns_or_more_after_them_are_followed() {
        let g = guard();
        assert_eq!(g.check_names(&[Some("id"), Some("a"), Some("b")], 0), None);
        assert_eq!(g.check_names(&[Some("id"), Some("a"), Some("b"), Some("c")], 0), None);
    }

    #[test]
    fn a_description_names_the_retyped_column_once_the_types_are_known() {
        let mut g = guard();
        let described = [(23, -1), (25, -1), (25, -1)];
        assert_eq!(g.retyped_column(&described, 0), None, "nothing learnt: ask the upstream");
        g.type_ids = Some(described.to_vec());
        assert_eq!(g.retyped_column(&described, 0), Some(None));
        assert_eq!(g.retyped_column(&[(23, -1), (25, -1), (25, -1), (16, -1)], 0), Some(None));
        assert_eq!(g.retyped_column(&[(23, -1), (1043, 24), (25, -1)], 0), Some(Some(1)));
        assert_eq!(g.retyped_column(&[], 0), None, "a description without types (MySQL)");
        let reason = g.retyped(1, None);
        assert!(reason.contains("column a changed type upstream from text"), "{reason}");
        assert!(reason.contains("Drop it and create it again"), "{reason}");
    }

    #[test]
    fn another_table_or_renumbered_columns_stop_the_table() {
        let g = guard();
        assert_eq!(g.compare_identity("16384:1,2,3", "16384:1,2,3"), None);
        assert_eq!(g.compare_identity("16384:1,2,3", "16384:1,2,3,5"), None, "one added after");
        let again = g.compare_identity("16384:1,2,3", "16390:1,2,3").unwrap();
        assert!(again.contains("dropped and created again"), "{again}");
        let readded = g.compare_identity("16384:1,2,3", "16384:1,2,4").unwrap();
        assert!(readded.contains("column numbers changed"), "{readded}");
        assert_eq!(g.compare_identity("table", "table"), None, "MySQL: there or not");
    }

    #[test]
    fn a_dropped_renamed_or_moved_column_stops_the_table() {
        let g = guard();
        let dropped = g.check_names(&[Some("id"), Some("b")], 0).unwrap();
        assert!(dropped.contains("column a was dropped or renamed upstream"), "{dropped}");
        assert!(
            dropped.contains("its columns are now id, b; the table reads id, a, b"),
            "{dropped}"
        );
        let moved = g.check_names(&[Some("id"), Some("b"), Some("a")], 0).unwrap();
        assert!(moved.contains("column a moved upstream"), "{moved}");
        let renamed = g.check_names(&[Some("id"), Some("x"), Some("b")], 0).unwrap();
        assert!(renamed.contains("column a was dropped or renamed"), "{renamed}");
        assert!(renamed.starts_with("the table stopped following public.t"), "{renamed}");
    }

    #[test]
    fn descriptions_from_before_followed_columns_name_fewer() {
        // `c` was added and followed at position 100: descriptions before it name id, a, b.
        let upstream = UpstreamTable {
            columns: ["id", "a", "b", "c"]
                .iter()
                .map(|n| ColumnCatalog::new(*n, DataType::Varchar))
                .collect(),
            upstream_types: ["integer", "text", "text", "text"].map(String::from).to_vec(),
            ..guard_upstream()
        };
        let mut g = UpstreamGuard::new(&upstream, None).with_columns_since(vec![(100, 3)]);
        let old = [Some("id"), Some("a"), Some("b")];
        assert_eq!((g.columns_at(99), g.columns_at(100)), (3, 4));
        assert_eq!(g.check_names(&old, 99), None);
        let dropped = g.check_names(&old, 100).unwrap();
        assert!(dropped.contains("column c was dropped or renamed"), "{dropped}");
        assert!(g.check_names(&[Some("id"), Some("b")], 99).is_some(), "a dropped column stops");
        g.type_ids = Some(vec![(23, -1), (25, -1), (25, -1), (25, -1)]);
        assert_eq!(g.retyped_column(&[(23, -1), (25, -1), (25, -1)], 99), Some(None));
        assert_eq!(g.retyped_column(&[(23, -1), (25, -1), (25, -1)], 100), None);
        assert_eq!(g.retyped_column(&[(23, -1), (25, -1), (16, -1)], 99), Some(Some(2)));
    }
}
