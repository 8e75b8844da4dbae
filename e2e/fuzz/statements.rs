//! Statements beyond the oracle's writes: random SELECTs, scratch tables, session settings
//! and table DDL.

use super::*;

impl Fuzzer {
    pub(super) fn random_select(&mut self) -> String {
        let rels = self.relations();
        let rng = &mut self.rng;
        let depth = 1 + rng.below(6) as u32;
        match rng.below(7) {
            0 | 1 => {
                let mut g = ExprGen { rng: &mut *rng, cols: &[], scalar_subqueries: true };
                let items: Vec<String> = (0..1 + g.rng.below(3))
                    .map(|_| {
                        let ty = g.any_ty();
                        g.expr(ty, depth)
                    })
                    .collect();
                format!("SELECT {}", items.join(", "))
            }
            2 | 3 => {
                let rel = rng.pick(&rels).clone();
                let mut g = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: true };
                let items: Vec<String> = (0..1 + g.rng.below(3))
                    .map(|_| {
                        let ty = g.any_ty();
                        g.expr(ty, depth)
                    })
                    .collect();
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if g.rng.chance(60) {
                    write!(sql, " WHERE {}", g.expr(Ty::Bool, depth.min(4))).unwrap();
                }
                if g.rng.chance(30) {
                    sql.push_str(" ORDER BY 1");
                }
                if g.rng.chance(20) {
                    write!(sql, " LIMIT {}", g.rng.range(0, 5)).unwrap();
                }
                sql
            }
            4 => {
                let rel = rng.pick(&rels).clone();
                let mut g = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false };
                let mut items = vec!["count(*)".to_owned()];
                for _ in 0..1 + g.rng.below(3) {
                    let f = *g.rng.pick(&["sum", "min", "max", "avg", "count", "count(DISTINCT"]);
                    let ty = *g.rng.pick(&[Ty::Int, Ty::BigInt, Ty::Numeric, Ty::Double, Ty::Text]);
                    let e = g.expr(ty, depth.min(3));
                    items.push(if f == "count(DISTINCT" {
                        format!("{f} {e})")
                    } else {
                        format!("{f}({e})")
                    });
                }
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if g.rng.chance(50) {
                    let (c, _) = g.rng.pick(&rel.cols).clone();
                    sql = sql.replacen("SELECT ", &format!("SELECT {c}, "), 1);
                    write!(sql, " GROUP BY {c}").unwrap();
                    if g.rng.chance(30) {
                        write!(sql, " HAVING count(*) > {}", g.rng.range(0, 2)).unwrap();
                    }
                }
                sql
            }
            5 => {
                let cols: Vec<Col> =
                    [("a.x", Ty::Int), ("a.s", Ty::Text), ("b.k", Ty::Int), ("b.v", Ty::Double)]
                        .iter()
                        .map(|(n, t)| (n.to_string(), Some(*t)))
                        .collect();
                let join =
                    *rng.pick(&["JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN", "CROSS JOIN"]);
                let mut g = ExprGen { rng: &mut *rng, cols: &cols, scalar_subqueries: true };
                let ty = g.any_ty();
                let item = g.expr(ty, depth.min(4));
                let on =
                    if join == "CROSS JOIN" { String::new() } else { " ON a.x = b.k".to_owned() };
                format!("SELECT a.id, b.id, {item} FROM fz_a a {join} fz_b b{on}")
            }
            _ => {
                let a = rng.pick(&rels).clone();
                let col = rng.pick(&a.cols).0.clone();
                format!(
                    "SELECT {col}, count(*) FROM (SELECT * FROM {} UNION ALL SELECT * FROM {}) t GROUP BY {col} ORDER BY 2 DESC LIMIT 3",
                    a.name, a.name
                )
            }
        }
    }

    pub(super) async fn scratch_table_statement(&mut self) {
        if self.scratch_tables.is_empty()
            || (self.scratch_tables.len() < MAX_SCRATCH_TABLES && self.rng.chance(15))
        {
            let name = self.fresh_name("fz_s");
            let pk = *self.rng.pick(&["int", "bigint", "varchar", "date"]);
            let pk_ty = match pk {
                "int" => Ty::Int,
                "bigint" => Ty::BigInt,
                "varchar" => Ty::Text,
                _ => Ty::Date,
            };
            let mut cols: Vec<Col> = vec![("c0".into(), Some(pk_ty))];
            let mut defs = vec![format!("c0 {pk}")];
            let mut types = vec![""];
            for i in 1..2 + self.rng.below(5) {
                let (sql, ty, lit) = *self.rng.pick(SCRATCH_TYPES);
                cols.push((format!("c{i}"), ty));
                defs.push(format!("c{i} {sql}"));
                types.push(lit);
            }
            match self.rng.below(4) {
                0 => {}
                1 => defs.push("PRIMARY KEY (c0, c1)".into()),
                _ => defs[0].push_str(" PRIMARY KEY"),
            }
            let sql = format!("CREATE TABLE {name} ({})", defs.join(", "));
            if let Reply::Rows { .. } = self.exec(Session::Main, Source::Grammar, &sql).await {
                self.scratch_ddl.insert(name.clone(), sql);
                self.scratch_tables.push(Rel { name, cols });
            }
            return;
        }
        let table = self.rng.pick(&self.scratch_tables).clone();
        match self.rng.below(10) {
            0..=4 => {
                let rows: Vec<String> = (0..1 + self.rng.below(4))
                    .map(|_| {
                        let items: Vec<String> = table
                            .cols
                            .iter()
                            .map(|(c, ty)| match ty {
                                Some(_) if self.rng.chance(8) => {
                                    let other = *self.rng.pick(&Ty::ALL);
                                    literal(&mut self.rng, other)
                                }
                                Some(ty) if c == "c0" && self.rng.chance(80) => match ty {
                                    Ty::Text => format!("'k{}'", self.rng.range(0, 30)),
                                    Ty::Date => {
                                        format!("DATE '2024-01-01' + {}", self.rng.range(0, 30))
                                    }
                                    _ => self.rng.range(0, 30).to_string(),
                                },
                                Some(ty) => {
                                    let depth = self.rng.below(3) as u32;
                                    ExprGen {
                                        rng: &mut self.rng,
                                        cols: &[],
                                        scalar_subqueries: true,
                                    }
                                    .expr(*ty, depth)
                                }
                                None => {
                                    let lit = SCRATCH_TYPES
                                        .iter()
                                        .filter(|t| t.1.is_none())
                                        .map(|t| t.2)
                                        .collect::<Vec<_>>();
                                    if self.rng.chance(20) {
                                        "NULL".into()
                                    } else {
                                        self.rng.pick(&lit).to_string()
                                    }
                                }
                            })
                            .collect();
                        format!("({})", items.join(", "))
                    })
                    .collect();
                let sql = format!("INSERT INTO {} VALUES {}", table.name, rows.join(", "));
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            5..=6 => {
                let (c, ty) = self.rng.pick(&table.cols[1..]).clone();
                let mut g =
                    ExprGen { rng: &mut self.rng, cols: &table.cols, scalar_subqueries: false };
                let value = match ty {
                    Some(ty) => g.expr(ty, 2),
                    None => "NULL".into(),
                };
                let p = g.expr(Ty::Bool, 2);
                let sql = format!("UPDATE {} SET {c} = {value} WHERE {p}", table.name);
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            7 => {
                let p = ExprGen { rng: &mut self.rng, cols: &table.cols, scalar_subqueries: false }
                    .expr(Ty::Bool, 2);
                let sql = format!("DELETE FROM {} WHERE {p}", table.name);
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            8 => {
                let sql = format!("SELECT * FROM {} ORDER BY 1", table.name);
                self.exec(Session::Main, Source::Grammar, &sql).await;
            }
            _ => {
                // Views on it go first; the table must then drop. A view still creating in
                // the background is canceled, not dropped: wait for it.
                let doomed = self.dependents(&table.name);
                if self.views.iter().any(|v| v.pending && doomed.contains(&v.name)) {
                    return;
                }
                for view in doomed.iter().skip(1) {
                    if self.views.iter().any(|v| &v.name == view) {
                        let sql = format!("DROP MATERIALIZED VIEW IF EXISTS {view} CASCADE");
                        self.exec(Session::Main, Source::View, &sql).await;
                    }
                }
                self.sync_views().await;
                let sql = format!("DROP TABLE {}", table.name);
                let restarts = self.stats.restarts;
                match self.exec(Session::Main, Source::Grammar, &sql).await {
                    Reply::Rows { .. } => self.scratch_tables.retain(|t| t.name != table.name),
                    Reply::Failed { code, message }
                        if self.stats.restarts == restarts && code != "XX000" =>
                    {
                        let message = format!("DROP TABLE without dependents failed | {message}");
                        self.find(Kind::DdlOutcome, Source::Grammar, &sql, &code, &message);
                    }
                    _ => {}
                }
            }
        }
    }

    pub(super) async fn session_statement(&mut self) {
        let sql = match self.rng.below(9) {
            0 | 1 => {
                let v = *self.rng.pick(&["1", "2", "3", "4", "DEFAULT", "0", "257", "'many'"]);
                format!("SET streaming_parallelism = {v}")
            }
            2 => {
                let on = self.rng.chance(40);
                let sql = format!("SET background_ddl = {on}");
                if let Reply::Rows { .. } = self.exec(Session::Main, Source::Grammar, &sql).await {
                    self.background_ddl = on;
                }
                return;
            }
            3 if self.rng.chance(50) => {
                let v = *self.rng.pick(&["on", "off", "DEFAULT"]);
                format!("SET eager_aggregation = {v}")
            }
            3 => {
                let v = *self.rng.pick(&["DEFAULT", "100000", "-1", "-7"]);
                format!("SET backfill_rate_limit = {v}")
            }
            4 | 5 => "FLUSH".to_owned(),
            6 => {
                let n = self.rng.range(1, 4);
                let t = *self.rng.pick(&["fz_a", "fz_b"]);
                format!("ALTER TABLE {t} SET PARALLELISM = {n}")
            }
            _ => self
                .rng
                .pick(&[
                    "SHOW TABLES",
                    "SHOW MATERIALIZED VIEWS",
                    "SHOW INTERNAL TABLES",
                    "SHOW JOBS",
                    "DESCRIBE fz_a",
                    "SHOW streaming_parallelism",
                    "SELECT * FROM rw_catalog.rw_fragments",
                    "SELECT * FROM rw_catalog.rw_ddl_progress",
                    "SELECT * FROM rw_catalog.rw_materialized_views",
                    "SELECT * FROM rw_catalog.rw_internal_tables",
                    "SELECT relname FROM pg_catalog.pg_class",
                    "EXPLAIN SELECT * FROM fz_a a JOIN fz_b b ON a.x = b.k",
                ])
                .to_string(),
        };
        self.exec(Session::Main, Source::Grammar, &sql).await;
    }

    /// DDL on the oracle tables that must fail and change nothing.
    pub(super) async fn table_ddl(&mut self) {
        let readers = self.views.iter().find(|v| v.deps.iter().any(|d| d == "fz_a" || d == "fz_b"));
        let (sql, why) = match readers {
            Some(view) if self.rng.chance(50) => {
                let table =
                    view.deps.iter().find(|d| *d == "fz_a" || *d == "fz_b").unwrap().clone();
                (format!("DROP TABLE {table}"), "DROP TABLE of a table views read succeeded")
            }
            _ => {
                let sql = *self.rng.pick(&[CREATE_A, CREATE_B]);
                (sql.to_owned(), "CREATE TABLE of an existing table succeeded")
            }
        };
        let restarts = self.stats.restarts;
        if let Reply::Rows { .. } = self.exec(Session::Main, Source::Grammar, &sql).await {
            self.find(Kind::DdlOutcome, Source::Grammar, &sql, "", why);
            // Put the oracle back together.
            for sql in [CREATE_A, CREATE_B] {
                self.exec(Session::Main, Source::Grammar, sql).await;
            }
            self.sync_views().await;
            self.resync().await;
        } else if self.stats.restarts == restarts {
            self.check_tables(None, Kind::TableMismatch, &sql).await;
        }
    }
}
