//! `ALTER {TABLE | MATERIALIZED VIEW} name SET {BACKFILL_RATE_LIMIT | PARALLELISM} ..`.
//!
//! A new backfill rate limit is stored in the catalog (so it holds after a restart) and sent to
//! the running job as a throttle mutation on the next checkpoint barrier: every backfill actor
//! of the job switches to it at that barrier, and the statement returns once that checkpoint
//! is committed.

use datafusion::sql::sqlparser::ast;

use crate::catalog::RelationKind;
use crate::engine::ddl::relation_name;
use crate::engine::session::default_parallelism;
use crate::engine::session::parse_rate_limit;
use crate::engine::{CommandTag, Engine, Output};
use crate::error::{Error, Result};
use crate::sql::parser::AlterSetting;

/// At most one actor per vnode.
const MAX_PARALLELISM: i64 = crate::catalog::VirtualNode::COUNT as i64;

impl Engine {
    /// Runs `ALTER .. SET setting = value` (`value` `None` for DEFAULT).
    pub(crate) async fn alter_set(
        &self,
        materialized_view: bool,
        name: &ast::ObjectName,
        setting: AlterSetting,
        value: Option<i64>,
    ) -> Result<Output> {
        let _ddl = self.ddl_lock.lock().await;
        let (kind, tag) = if materialized_view {
            (RelationKind::MaterializedView, "ALTER MATERIALIZED VIEW")
        } else {
            (RelationKind::Table, "ALTER TABLE")
        };
        let name = relation_name(name)?;
        if self.catalog.source_by_name(&name).is_some() {
            return Err(Error::WrongObjectType(format!(
                "\"{name}\" is a source: it has no streaming job of its own to alter; alter the \
                 tables created from it"
            )));
        }
        let relation = self
            .catalog
            .table_by_name(&name)
            .ok_or_else(|| Error::UnknownRelation { kind: kind.noun(), name: name.clone() })?;
        if relation.kind != kind {
            return Err(Error::WrongObjectType(format!(
                "\"{name}\" is a {}, not a {}{}",
                relation.kind.noun(),
                kind.noun(),
                match relation.kind {
                    RelationKind::Internal => "; internal tables cannot be altered",
                    RelationKind::MaterializedView => "; use ALTER MATERIALIZED VIEW",
                    RelationKind::Table => "; use ALTER TABLE",
                }
            )));
        }
        match setting {
            AlterSetting::BackfillRateLimit => {
                if relation.kind == RelationKind::Table && relation.cdc.is_none() {
                    return Err(Error::WrongObjectType(format!(
                        "table \"{name}\" has no backfill: only materialized views and tables \
                         created FROM a source have a backfill rate limit"
                    )));
                }
                let limit = parse_rate_limit(value)?;
                self.catalog.update_table(relation.id, |t| t.backfill_rate_limit = limit)?;
                self.barrier.throttle(relation.id, limit).await?;
                tracing::info!(relation = %name, ?limit, "backfill rate limit set");
                Ok(Output::Command(CommandTag::new(tag)))
            }
            AlterSetting::Parallelism => {
                let parallelism = match value {
                    None => default_parallelism(),
                    Some(n) if (1..=MAX_PARALLELISM).contains(&n) => n as usize,
                    Some(n) => {
                        return Err(Error::InvalidParameter(format!(
                            "parallelism must be from 1 to {MAX_PARALLELISM} (or DEFAULT), not {n}"
                        )));
                    }
                };
                if relation.parallelism.max(1) != parallelism {
                    self.reschedule(&relation, parallelism).await?;
                }
                Ok(Output::Command(CommandTag::new(tag)))
            }
        }
    }
}
