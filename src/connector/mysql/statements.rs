//! What the MySQL binlog reader learns from the statements the binlog holds as text (query
//! events): the tables a `TRUNCATE` empties, the tables DDL drops, renames or reshapes, and
//! row changes logged as statements, which it cannot apply.

use crate::connector::offset::CdcOffset;
use crate::error::Error;

/// Whether `statement` (run with default database `schema`) is a row change that may touch
/// `database`: under `binlog_format = STATEMENT` or `MIXED` the binlog holds such statements
/// instead of the rows they changed.
pub fn changes_rows(statement: &str, schema: &str, database: &str) -> bool {
    let lower = statement.trim_start().to_ascii_lowercase();
    let dml = ["insert", "update", "delete", "replace", "load data", "load xml"];
    if !dml.iter().any(|k| lower.starts_with(k)) {
        return false;
    }
    let db = database.to_ascii_lowercase();
    schema.eq_ignore_ascii_case(database)
        || lower.contains(&format!("`{db}`."))
        || lower.contains(&format!("{db}."))
}

/// The error of a row change the binlog holds as a statement: Sluice cannot apply it, and must
/// not go past it.
pub fn statement_logged(statement: &str, database: &str, at: CdcOffset) -> Error {
    let shown: String = statement.chars().take(120).collect();
    Error::Upstream {
        code: "55000",
        message: format!(
            "the upstream binlog holds a change to database {database} as a statement, not as \
             rows (binlog_format is STATEMENT or MIXED), after {at}: {shown}; Sluice reads row \
             events only and stops here rather than lose it: set binlog_format = ROW upstream \
             (SET GLOBAL, and in the server's configuration), then drop and create the source \
             and its tables again"
        ),
    }
}

/// The tables of `database` that `statement` truncates, as `database.table`; `schema` is the
/// statement's default database. Anything else (other DDL, or a statement that does not
/// parse) truncates nothing.
pub fn truncated_tables(statement: &str, schema: &str, database: &str) -> Vec<String> {
    use datafusion::sql::sqlparser::ast::Statement;
    if !statement.to_ascii_lowercase().contains("truncate") {
        return Vec::new();
    }
    let mut tables = Vec::new();
    for statement in parsed(statement, "truncated a table") {
        let Statement::Truncate(truncate) = statement else { continue };
        for target in truncate.table_names {
            tables.extend(of_database(&target.name, schema, database));
        }
    }
    tables
}

/// The tables of `database` whose rows `statement` (DDL) takes away from what a CDC table
/// reads: dropped or renamed tables, and tables whose columns it renames, retypes or adds
/// before others. Adding a column after the others is not among them, nor dropping columns
/// and nothing else ([`dropped_columns`]): those are followed.
pub fn reshaped_tables(statement: &str, schema: &str, database: &str) -> Vec<String> {
    use datafusion::sql::sqlparser::ast::{AlterTableOperation as Op, ObjectType, Statement};
    let lower = statement.trim_start().to_ascii_lowercase();
    if !["drop", "rename", "alter"].iter().any(|k| lower.starts_with(k)) {
        return Vec::new();
    }
    let mut tables = Vec::new();
    for statement in parsed(statement, "reshaped a table") {
        match statement {
            Statement::Drop { object_type: ObjectType::Table, names, .. } => {
                names.iter().for_each(|n| tables.extend(of_database(n, schema, database)));
            }
            Statement::RenameTable(renames) => {
                renames
                    .iter()
                    .for_each(|r| tables.extend(of_database(&r.old_name, schema, database)));
            }
            Statement::AlterTable(alter) if only_drops_columns(&alter.operations) => {}
            Statement::AlterTable(alter) => {
                let reshapes = alter.operations.iter().any(|op| match op {
                    Op::AddColumn { column_position, .. } => column_position.is_some(),
                    // A column retyped in place is checked by the table, which follows what it
                    // can (text to text, a number widened) and stops at the rest.
                    Op::ModifyColumn { column_position: None, .. } => false,
                    Op::DropColumn { .. }
                    | Op::RenameColumn { .. }
                    | Op::ChangeColumn { .. }
                    | Op::ModifyColumn { .. }
                    | Op::AlterColumn { .. }
                    | Op::RenameTable { .. } => true,
                    _ => false,
                });
                if reshapes {
                    tables.extend(of_database(&alter.name, schema, database));
                }
            }
            _ => {}
        }
    }
    tables
}

/// The tables of `database` whose columns `statement` drops, and nothing else, with the
/// names of the columns: a CDC table follows the drop (`docs/cdc.md`, "When the upstream
/// changes").
pub fn dropped_columns(
    statement: &str,
    schema: &str,
    database: &str,
) -> Vec<(String, Vec<String>)> {
    use datafusion::sql::sqlparser::ast::{AlterTableOperation as Op, Statement};
    if !statement.trim_start().to_ascii_lowercase().starts_with("alter") {
        return Vec::new();
    }
    let mut tables = Vec::new();
    for statement in parsed(statement, "dropped a column") {
        let Statement::AlterTable(alter) = statement else { continue };
        if !only_drops_columns(&alter.operations) {
            continue;
        }
        let Some(table) = of_database(&alter.name, schema, database) else { continue };
        let names = alter
            .operations
            .iter()
            .flat_map(|op| match op {
                Op::DropColumn { column_names, .. } => column_names.clone(),
                _ => Vec::new(),
            })
            .map(|name| name.value)
            .collect();
        tables.push((table, names));
    }
    tables
}

/// Whether `operations` drop columns and do nothing else.
fn only_drops_columns(operations: &[datafusion::sql::sqlparser::ast::AlterTableOperation]) -> bool {
    use datafusion::sql::sqlparser::ast::AlterTableOperation as Op;
    !operations.is_empty() && operations.iter().all(|op| matches!(op, Op::DropColumn { .. }))
}

/// The statements of `text` (MySQL's dialect); none, said in the log, when it does not parse.
fn parsed(text: &str, what: &str) -> Vec<datafusion::sql::sqlparser::ast::Statement> {
    use datafusion::sql::sqlparser::dialect::MySqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    Parser::parse_sql(&MySqlDialect {}, text).unwrap_or_else(|e| {
        tracing::warn!(statement = text, error = %e, "an upstream statement did not parse: if it {what} of the source, Sluice does not see it", what = what);
        Vec::new()
    })
}

/// `database.table` for `name` (`table` in the default database `schema`, or `db.table`), when
/// it is a table of `database`.
fn of_database(
    name: &datafusion::sql::sqlparser::ast::ObjectName,
    schema: &str,
    database: &str,
) -> Option<String> {
    let parts: Vec<String> =
        name.0.iter().filter_map(|p| p.as_ident().map(|i| i.value.clone())).collect();
    let (db, table) = match parts.as_slice() {
        [table] => (schema.to_owned(), table.clone()),
        [db, table] => (db.clone(), table.clone()),
        _ => return None,
    };
    (db == database).then(|| format!("{db}.{table}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncate_names_the_tables_of_the_source_database_it_empties() {
        let cases = [
            ("TRUNCATE TABLE t", vec!["shop.t"]),
            ("truncate `t`", vec!["shop.t"]),
            ("TRUNCATE TABLE shop.t", vec!["shop.t"]),
            ("TRUNCATE TABLE `other`.`t`", vec![]),
            ("/* c */ TRUNCATE t", vec!["shop.t"]),
            ("CREATE TABLE t (id int)", vec![]),
            ("ALTER TABLE t ADD truncate int", vec![]),
        ];
        for (statement, tables) in cases {
            assert_eq!(truncated_tables(statement, "shop", "shop"), tables, "{statement}");
        }
        assert_eq!(truncated_tables("TRUNCATE t", "other", "shop"), Vec::<String>::new());
    }

    #[test]
    fn ddl_that_reshapes_a_table_of_the_source_database_names_it() {
        let cases = [
            ("DROP TABLE t", vec!["shop.t"]),
            ("DROP TABLE IF EXISTS `t`, other.u /* generated by server */", vec!["shop.t"]),
            ("RENAME TABLE t TO t_old", vec!["shop.t"]),
            ("ALTER TABLE t DROP COLUMN b, ADD COLUMN c int", vec!["shop.t"]),
            ("ALTER TABLE shop.t MODIFY COLUMN b bigint FIRST", vec!["shop.t"]),
            ("ALTER TABLE t CHANGE b c int", vec!["shop.t"]),
            ("ALTER TABLE t ADD COLUMN c int FIRST", vec!["shop.t"]),
            ("ALTER TABLE t RENAME COLUMN b TO c", vec!["shop.t"]),
            // Followed (or checked by the table): a column after the others, a retype in
            // place, an index.
            ("DROP TABLE `shop`.`t` /* generated by server */", vec!["shop.t"]),
            ("ALTER TABLE shop.t MODIFY COLUMN c0 bigint", vec![]),
            ("ALTER TABLE shop.t MODIFY COLUMN c0 varchar(20) FIRST", vec!["shop.t"]),
            ("ALTER TABLE shop.t MODIFY COLUMN c0 varchar(200)", vec![]),
            ("ALTER TABLE shop.t MODIFY COLUMN c0 longtext", vec![]),
            ("ALTER TABLE t ADD COLUMN c int DEFAULT 5", vec![]),
            ("ALTER TABLE shop.t DROP COLUMN c1", vec![]),
            ("ALTER TABLE t ADD INDEX (b)", vec![]),
            ("CREATE TABLE u (id int)", vec![]),
            ("DROP TABLE other.t", vec![]),
        ];
        for (statement, tables) in cases {
            assert_eq!(reshaped_tables(statement, "shop", "shop"), tables, "{statement}");
        }
    }

    #[test]
    fn ddl_that_only_drops_columns_names_them() {
        let dropped = |s: &str| dropped_columns(s, "shop", "shop");
        assert_eq!(
            dropped("ALTER TABLE t DROP COLUMN b"),
            vec![("shop.t".into(), vec!["b".into()])]
        );
        assert_eq!(
            dropped("ALTER TABLE `shop`.`t` DROP COLUMN `b`, DROP c"),
            vec![("shop.t".to_owned(), vec!["b".to_owned(), "c".to_owned()])]
        );
        assert!(dropped("ALTER TABLE t DROP COLUMN b, ADD COLUMN c int").is_empty());
        assert!(dropped("ALTER TABLE other.t DROP COLUMN b").is_empty());
        assert!(dropped("ALTER TABLE t ADD COLUMN c int").is_empty());
    }
}
