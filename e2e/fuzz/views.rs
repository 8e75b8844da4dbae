//! The fuzzer's views: planning random views, creating and dropping them, and comparing each
//! with its query run as a batch SELECT.

use super::*;

impl Fuzzer {
    pub(super) fn fresh_name(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    pub(super) async fn view_ddl(&mut self) {
        let r = self.rng.below(100);
        if self.views.len() >= MAX_VIEWS || (r < 15 && !self.views.is_empty()) {
            self.drop_view().await;
        } else if r < 25 && !self.views.is_empty() {
            let view = self.rng.pick(&self.views).name.clone();
            let n = self.rng.range(1, 4);
            let sql = format!("ALTER MATERIALIZED VIEW {view} SET PARALLELISM = {n}");
            self.exec(Session::Main, Source::View, &sql).await;
        } else if r < 30 {
            let (query, _, _) = self.plan_view();
            let sql = format!("EXPLAIN CREATE MATERIALIZED VIEW fz_explained AS {query}");
            self.exec(Session::Main, Source::View, &sql).await;
        } else {
            self.create_view().await;
        }
    }

    pub(super) async fn create_view(&mut self) {
        let (query, cols, deps) = self.plan_view();
        let name = self.fresh_name("fz_v");
        // A stated backfill order: any order of the relations read gives the same view.
        let mut distinct = deps.clone();
        distinct.sort();
        distinct.dedup();
        let with = match self.rng.below(10) {
            0 => " WITH (backfill_rate_limit = 1000)".to_owned(),
            1 => " WITH (backfill_rate_limit = 100000)".to_owned(),
            2 => " WITH (backfill_order = 'none')".to_owned(),
            3 if distinct.len() >= 2 => {
                format!(" WITH (backfill_order = FIXED({} -> {}))", distinct[1], distinct[0])
            }
            _ => String::new(),
        };
        let sql = format!("CREATE MATERIALIZED VIEW {name}{with} AS {query}");
        let restarts = self.stats.restarts;
        let background = self.background_ddl;
        let reply = self.exec(Session::Main, Source::View, &sql).await;
        let view = View { name: name.clone(), query, cols, deps, pending: background };
        match reply {
            Reply::Rows { .. } => {
                self.stats.views_created += 1;
                self.views.push(view);
            }
            Reply::Failed { .. } if self.stats.restarts == restarts => {
                // A failed CREATE leaves nothing behind.
                let check = format!(
                    "SELECT count(*) FROM rw_catalog.rw_materialized_views WHERE name = '{name}'"
                );
                if let Reply::Rows { rows, .. } =
                    self.exec(Session::Main, Source::Check, &check).await
                    && rows.first().and_then(|r| r[0].as_deref()) != Some("0")
                {
                    self.find(
                        Kind::DdlOutcome,
                        Source::View,
                        &sql,
                        "",
                        "a failed CREATE MATERIALIZED VIEW left the view behind",
                    );
                }
            }
            // No reply: it exists if the catalog says so.
            _ => {
                let check = format!(
                    "SELECT count(*) FROM rw_catalog.rw_materialized_views WHERE name = '{name}'"
                );
                if let Reply::Rows { rows, .. } =
                    self.exec(Session::Main, Source::Check, &check).await
                    && rows.first().and_then(|r| r[0].as_deref()) == Some("1")
                {
                    self.views.push(View { pending: true, ..view });
                }
            }
        }
    }

    /// Names of `name` and of every view depending on it, transitively.
    pub(super) fn dependents(&self, name: &str) -> Vec<String> {
        let mut out = vec![name.to_owned()];
        let mut i = 0;
        while i < out.len() {
            for v in &self.views {
                if v.deps.contains(&out[i]) && !out.contains(&v.name) {
                    out.push(v.name.clone());
                }
            }
            i += 1;
        }
        out
    }

    pub(super) async fn drop_view(&mut self) {
        // A view still creating in the background is canceled, not dropped.
        let created: Vec<String> =
            self.views.iter().filter(|v| !v.pending).map(|v| v.name.clone()).collect();
        if created.is_empty() {
            return;
        }
        let name = self.rng.pick(&created).clone();
        let doomed = self.dependents(&name);
        let cascade = self.rng.chance(50);
        let sql = format!("DROP MATERIALIZED VIEW {name}{}", if cascade { " CASCADE" } else { "" });
        let restarts = self.stats.restarts;
        let reply = self.exec(Session::Main, Source::View, &sql).await;
        if self.stats.restarts != restarts {
            self.sync_views().await;
            return;
        }
        match reply {
            Reply::Rows { .. } if doomed.len() > 1 && !cascade => {
                self.find(
                    Kind::DdlOutcome,
                    Source::View,
                    &sql,
                    "",
                    "DROP MATERIALIZED VIEW without CASCADE dropped a view other views read",
                );
                let readers: Vec<String> = self
                    .views
                    .iter()
                    .filter(|v| doomed[1..].contains(&v.name))
                    .map(|v| {
                        format!("(reads it) CREATE MATERIALIZED VIEW {} AS {}", v.name, v.query)
                    })
                    .collect();
                if let Some(finding) = self.findings.last_mut() {
                    finding.reads.extend(readers);
                }
                self.sync_views().await;
            }
            Reply::Rows { .. } => {
                // Exactly the view and (with CASCADE) the views reading it are gone.
                let names = "SELECT name FROM rw_catalog.rw_materialized_views";
                if let Reply::Rows { rows, .. } =
                    self.exec(Session::Main, Source::Check, names).await
                {
                    let left: BTreeSet<String> =
                        rows.into_iter().filter_map(|r| r[0].clone()).collect();
                    let kept: Vec<&String> = doomed.iter().filter(|v| left.contains(*v)).collect();
                    let lost: Vec<&String> = self
                        .views
                        .iter()
                        .map(|v| &v.name)
                        .filter(|v| !doomed.contains(v) && !left.contains(*v))
                        .collect();
                    if !kept.is_empty() || !lost.is_empty() {
                        let message = format!(
                            "DROP MATERIALIZED VIEW left views reading it, or dropped others | still there: {kept:?}, gone: {lost:?}"
                        );
                        self.find(Kind::DdlOutcome, Source::View, &sql, "", &message);
                        let kept: Vec<String> = self
                            .views
                            .iter()
                            .filter(|v| kept.contains(&&v.name))
                            .map(|v| {
                                format!("(left) CREATE MATERIALIZED VIEW {} AS {}", v.name, v.query)
                            })
                            .collect();
                        if let Some(finding) = self.findings.last_mut() {
                            finding.reads.extend(kept);
                        }
                    }
                }
                self.views.retain(|v| !doomed.contains(&v.name));
                self.sync_views().await;
            }
            Reply::Failed { code, message } if doomed.len() == 1 || cascade => {
                if code != "XX000" {
                    let message = format!("DROP MATERIALIZED VIEW failed | {message}");
                    self.find(Kind::DdlOutcome, Source::View, &sql, &code, &message);
                }
                self.sync_views().await;
            }
            _ => {}
        }
    }

    /// The CREATE statements of every view of the fuzzer, in creation order.
    pub(super) fn view_definitions(&self) -> Vec<String> {
        self.views
            .iter()
            .map(|v| format!("CREATE MATERIALIZED VIEW {} AS {}", v.name, v.query))
            .collect()
    }

    /// Drops every view of the fuzzer, readers first. If that stalls too, the server is
    /// wedged for good: the run goes on with a new server on a new data directory.
    pub(super) async fn drop_all_views(&mut self) {
        let names: Vec<String> = self.views.iter().rev().map(|v| v.name.clone()).collect();
        for name in names {
            let sql = format!("DROP MATERIALIZED VIEW IF EXISTS {name} CASCADE");
            let views = self.view_definitions();
            if let Reply::Lost = self.exec(Session::Main, Source::Check, &sql).await {
                let message = "the server stays wedged: after a stall and a restart, dropping the views stalls too";
                self.find(Kind::Timeout, Source::Check, &sql, "", message);
                if let Some(finding) = self.findings.last_mut() {
                    finding.reads = views;
                }
                self.new_server().await;
                return;
            }
        }
        self.sync_views().await;
    }

    /// Forgets views the catalog no longer has.
    pub(super) async fn sync_views(&mut self) {
        let sql = "SELECT name FROM rw_catalog.rw_materialized_views";
        if let Reply::Rows { rows, .. } = self.exec(Session::Main, Source::Check, sql).await {
            let names: BTreeSet<String> = rows.into_iter().filter_map(|r| r[0].clone()).collect();
            self.views.retain(|v| names.contains(&v.name));
        }
    }

    /// A view query over the available relations: its SQL, output columns and inputs.
    pub(super) fn plan_view(&mut self) -> (String, Vec<Col>, Vec<String>) {
        let rels = self.relations();
        let rng = &mut self.rng;
        let rel = rng.pick(&rels).clone();
        let typed = |cols: &[Col], ty: Ty| -> Vec<String> {
            cols.iter().filter(|(_, t)| *t == Some(ty)).map(|(n, _)| n.clone()).collect()
        };
        // Two relations with int columns, and an int column of each to join on.
        let join_sides = |rng: &mut Rng| {
            let with_int: Vec<&Rel> =
                rels.iter().filter(|r| !typed(&r.cols, Ty::Int).is_empty()).collect();
            let l = (*rng.pick(&with_int)).clone();
            let r = (*rng.pick(&with_int)).clone();
            let lk = rng.pick(&typed(&l.cols, Ty::Int)).clone();
            let rk = rng.pick(&typed(&r.cols, Ty::Int)).clone();
            (l, r, lk, rk)
        };
        match rng.below(8) {
            // Filter and project, with expressions that can fail.
            0 | 1 => {
                let mut items = Vec::new();
                let mut cols = Vec::new();
                for (n, t) in rel.cols.iter() {
                    if rng.chance(60) {
                        items.push(n.clone());
                        cols.push((n.clone(), *t));
                    }
                }
                for i in 0..rng.below(3) {
                    let ty = *rng.pick(&Ty::ALL);
                    let depth = 1 + rng.below(3) as u32;
                    let e = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                        .expr(ty, depth);
                    items.push(format!("{e} AS e{i}"));
                    cols.push((format!("e{i}"), Some(ty)));
                }
                if items.is_empty() {
                    let (n, t) = rel.cols[0].clone();
                    items.push(n.clone());
                    cols.push((n, t));
                }
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if rng.chance(60) {
                    let depth = 1 + rng.below(3) as u32;
                    let p = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                        .expr(Ty::Bool, depth);
                    write!(sql, " WHERE {p}").unwrap();
                }
                (sql, cols, vec![rel.name])
            }
            // Aggregates, grouped or not.
            2 => {
                let mut items = Vec::new();
                let mut cols = Vec::new();
                let mut group = None;
                if rng.chance(75) {
                    let g = match rng.below(3) {
                        0 => {
                            let ints = typed(&rel.cols, Ty::Int);
                            match ints.first() {
                                Some(_) => format!("{} % 3", rng.pick(&ints)),
                                None => rel.cols[0].0.clone(),
                            }
                        }
                        1 => {
                            let ty = *rng.pick(&Ty::ALL);
                            ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                                .expr(ty, 1)
                        }
                        _ => rng.pick(&rel.cols).0.clone(),
                    };
                    items.push(format!("{g} AS g"));
                    cols.push(("g".to_owned(), None));
                    group = Some(g);
                }
                items.push("count(*) AS n".to_owned());
                cols.push(("n".to_owned(), Some(Ty::BigInt)));
                for i in 0..1 + rng.below(3) {
                    let (c, t) = rng.pick(&rel.cols).clone();
                    let exact = matches!(t, Some(Ty::Int | Ty::BigInt | Ty::Numeric));
                    let f = if exact {
                        *rng.pick(&["count", "sum", "min", "max", "avg"])
                    } else {
                        *rng.pick(&["count", "min", "max"])
                    };
                    let arg = if rng.chance(25) && exact {
                        let cols = &rel.cols;
                        ExprGen { rng: &mut *rng, cols, scalar_subqueries: false }
                            .expr(t.unwrap_or(Ty::Int), 2)
                    } else {
                        c
                    };
                    // Over distinct values, and over the rows a filter keeps.
                    let distinct = match f {
                        "count" | "sum" if rng.chance(30) => "DISTINCT ",
                        _ => "",
                    };
                    let filter = match rng.chance(25) {
                        true => {
                            let cols = &rel.cols;
                            let p = ExprGen { rng: &mut *rng, cols, scalar_subqueries: false }
                                .expr(Ty::Bool, 1);
                            format!(" FILTER (WHERE {p})")
                        }
                        false => String::new(),
                    };
                    items.push(format!("{f}({distinct}{arg}){filter} AS a{i}"));
                    cols.push((format!("a{i}"), if f == "count" { Some(Ty::BigInt) } else { t }));
                }
                if rng.chance(25) {
                    let p = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                        .expr(Ty::Bool, 1);
                    let f = *rng.pick(&["bool_and", "bool_or"]);
                    items.push(format!("{f}({p}) AS b"));
                    cols.push(("b".to_owned(), Some(Ty::Bool)));
                }
                let mut sql = format!("SELECT {} FROM {}", items.join(", "), rel.name);
                if rng.chance(40) {
                    let p = ExprGen { rng: &mut *rng, cols: &rel.cols, scalar_subqueries: false }
                        .expr(Ty::Bool, 2);
                    write!(sql, " WHERE {p}").unwrap();
                }
                if let Some(g) = group {
                    write!(sql, " GROUP BY {g}").unwrap();
                }
                (sql, cols, vec![rel.name])
            }
            // Inner and left equi-joins on int columns.
            3 => {
                let (l, r, lk, rk) = join_sides(rng);
                let mut items = Vec::new();
                let mut cols = Vec::new();
                for (alias, rel) in [("l", &l), ("r", &r)] {
                    for (n, t) in &rel.cols {
                        if rng.chance(50) || n == &lk {
                            items.push(format!("{alias}.{n} AS {alias}_{n}"));
                            cols.push((format!("{alias}_{n}"), *t));
                        }
                    }
                }
                let join = *rng.pick(&["JOIN", "JOIN", "LEFT JOIN", "RIGHT JOIN", "FULL JOIN"]);
                let mut on = format!("l.{lk} = r.{rk}");
                if rng.chance(25) {
                    // A condition besides the key: it decides which pairs match.
                    let both = both_sides(&l, &r);
                    let p = ExprGen { rng: &mut *rng, cols: &both, scalar_subqueries: false }
                        .expr(Ty::Bool, 1);
                    write!(on, " AND {p}").unwrap();
                }
                let mut sql = format!(
                    "SELECT {} FROM {} l {join} {} r ON {on}",
                    items.join(", "),
                    l.name,
                    r.name
                );
                if rng.chance(30) {
                    let prefixed: Vec<Col> =
                        l.cols.iter().map(|(n, t)| (format!("l.{n}"), *t)).collect();
                    let p = ExprGen { rng: &mut *rng, cols: &prefixed, scalar_subqueries: false }
                        .expr(Ty::Bool, 1);
                    write!(sql, " WHERE {p}").unwrap();
                }
                (sql, cols, vec![l.name, r.name])
            }
            // Aggregates over an inner equi-join: eager aggregation pre-aggregates one side.
            4 => {
                let (l, r, lk, rk) = join_sides(rng);
                let group = format!("r.{}", rng.pick(&r.cols).0);
                let mut items = vec![format!("{group} AS g"), "count(*) AS n".to_owned()];
                let mut cols = vec![("g".to_owned(), None), ("n".to_owned(), Some(Ty::BigInt))];
                for i in 0..1 + rng.below(3) {
                    let (c, t) = rng.pick(&l.cols).clone();
                    let exact = matches!(t, Some(Ty::Int | Ty::BigInt | Ty::Numeric));
                    let f = match exact {
                        true => *rng.pick(&["count", "sum", "min", "max"]),
                        false => *rng.pick(&["count", "min", "max"]),
                    };
                    items.push(format!("{f}(l.{c}) AS a{i}"));
                    cols.push((format!("a{i}"), if f == "count" { Some(Ty::BigInt) } else { t }));
                }
                let sql = format!(
                    "SELECT {} FROM {} l JOIN {} r ON l.{lk} = r.{rk} GROUP BY {group}",
                    items.join(", "),
                    l.name,
                    r.name
                );
                (sql, cols, vec![l.name, r.name])
            }
            // EXISTS, NOT EXISTS and IN (subquery): semi and anti joins, some with a condition
            // besides the key.
            5 => {
                let (l, r, lk, rk) = join_sides(rng);
                let mut items = Vec::new();
                let mut cols = Vec::new();
                for (n, t) in &l.cols {
                    if rng.chance(60) || n == &lk {
                        items.push(format!("l.{n} AS {n}"));
                        cols.push((n.clone(), *t));
                    }
                }
                let mut correlation = format!("r.{rk} = l.{lk}");
                if rng.chance(30) {
                    let both = both_sides(&l, &r);
                    let p = ExprGen { rng: &mut *rng, cols: &both, scalar_subqueries: false }
                        .expr(Ty::Bool, 1);
                    write!(correlation, " AND {p}").unwrap();
                }
                let predicate = match rng.below(6) {
                    0 => format!("EXISTS (SELECT 1 FROM {} r WHERE {correlation})", r.name),
                    1 => format!("NOT EXISTS (SELECT 1 FROM {} r WHERE {correlation})", r.name),
                    2 => format!("l.{lk} NOT IN (SELECT r.{rk} FROM {} r)", r.name),
                    // Correlated: planned as the NOT EXISTS it means.
                    3 => {
                        let value = rng.pick(&typed(&r.cols, Ty::Int)).clone();
                        format!(
                            "l.{lk} NOT IN (SELECT r.{value} FROM {} r WHERE r.{rk} = l.{lk})",
                            r.name
                        )
                    }
                    4 => {
                        // EXISTS in the select list, under OR.
                        let exists =
                            format!("EXISTS (SELECT 1 FROM {} r WHERE {correlation})", r.name);
                        items.push(format!("{exists} AS ex"));
                        cols.push(("ex".to_owned(), Some(Ty::Bool)));
                        format!("l.{lk} > 0 OR NOT {exists}")
                    }
                    _ => format!("l.{lk} IN (SELECT r.{rk} FROM {} r)", r.name),
                };
                let mut predicate = predicate;
                let mut reads = vec![l.name.clone(), r.name.clone()];
                if rng.chance(40) {
                    // A comparison with a one-row subquery (a dynamic filter, pushed below the
                    // semi or anti join when it reads only the kept side).
                    let s = rng.pick(&rels).clone();
                    let ints = typed(&s.cols, Ty::Int);
                    let value = match ints.is_empty() {
                        true => "count(*)".to_owned(),
                        false => {
                            let c = rng.pick(&ints).clone();
                            let agg = *rng.pick(&["max", "min", "sum", "avg", "count"]);
                            format!("{agg}(s.{c})")
                        }
                    };
                    let op = *rng.pick(&["<", "<=", ">", ">="]);
                    let shift = rng.below(7) as i64 - 3;
                    write!(
                        predicate,
                        " AND l.{lk} {op} (SELECT {value} + {shift} FROM {} s)",
                        s.name
                    )
                    .unwrap();
                    reads.push(s.name);
                }
                let sql =
                    format!("SELECT {} FROM {} l WHERE {predicate}", items.join(", "), l.name);
                reads.dedup();
                (sql, cols, reads)
            }
            // Top-N over an oracle table (its `id` makes every order total, so the view and
            // its batch query agree on the rows): overall, or per group with row_number.
            6 => {
                let rel = if rng.chance(50) { table_a() } else { table_b() };
                let others: Vec<Col> =
                    rel.cols.iter().filter(|(n, _)| n != "id").cloned().collect();
                let (c, t) = rng.pick(&others).clone();
                let dir = *rng.pick(&["", " DESC"]);
                let nulls = *rng.pick(&["", " NULLS FIRST", " NULLS LAST"]);
                let n = 1 + rng.below(4);
                let mut cols = vec![("id".to_owned(), Some(Ty::Int)), ("c".to_owned(), t)];
                let sql = if rng.chance(25) {
                    // A window function over partitions, ordered totally (or over the whole
                    // partition, where only its rows count).
                    let ints = typed(&rel.cols, Ty::Int);
                    let group = format!("{} % 3", rng.pick(&ints));
                    let f = match rng.below(6) {
                        0 => "rank()".to_owned(),
                        1 => "dense_rank()".to_owned(),
                        2 => "row_number()".to_owned(),
                        3 => format!("lag({c})::text"),
                        4 => format!("count({c})"),
                        _ => format!("sum({})", rng.pick(&ints)),
                    };
                    let over = match rng.chance(75) {
                        true => format!("PARTITION BY {group} ORDER BY {c}{dir}{nulls}, id"),
                        false => format!("PARTITION BY {group}"),
                    };
                    let over = match f.starts_with("lag") || f.ends_with("()") {
                        // Order-dependent functions need the total order.
                        true => format!("PARTITION BY {group} ORDER BY {c}{dir}{nulls}, id"),
                        false => over,
                    };
                    let f = match f.strip_suffix("::text") {
                        Some(lag) => format!("({lag} OVER ({over}))::text"),
                        None => format!("({f} OVER ({over}))::text"),
                    };
                    cols[1].1 = Some(Ty::Text);
                    format!("SELECT id, {f} AS c FROM {}", rel.name)
                } else if rng.chance(25) {
                    // The first row per group: DISTINCT ON, a top-1.
                    let ints = typed(&rel.cols, Ty::Int);
                    let group = format!("{} % 3", rng.pick(&ints));
                    format!(
                        "SELECT DISTINCT ON ({group}) id, {c} AS c FROM {} ORDER BY {group}, \
                         {c}{dir}{nulls}, id",
                        rel.name
                    )
                } else if rng.chance(20) {
                    // The rows tied with the n-th stay.
                    format!(
                        "SELECT id, {c} AS c FROM {} ORDER BY {c}{dir}{nulls} FETCH FIRST {n} \
                         ROWS WITH TIES",
                        rel.name
                    )
                } else if rng.chance(50) {
                    let offset = match rng.chance(30) {
                        true => format!(" OFFSET {}", rng.below(3)),
                        false => String::new(),
                    };
                    format!(
                        "SELECT id, {c} AS c FROM {} ORDER BY {c}{dir}{nulls}, id LIMIT {n}{offset}",
                        rel.name
                    )
                } else {
                    let ints = typed(&rel.cols, Ty::Int);
                    let group = format!("{} % 3", rng.pick(&ints));
                    format!(
                        "SELECT id, c FROM (SELECT id, {c} AS c, row_number() OVER (PARTITION BY \
                         {group} ORDER BY {c}{dir}{nulls}, id) AS rn FROM {}) t WHERE rn <= {n}",
                        rel.name
                    )
                };
                (sql, cols, vec![rel.name])
            }
            // UNION [ALL] of two relations' columns of one type.
            _ => {
                let ty = *rng.pick(&[Ty::Int, Ty::Int, Ty::Text]);
                let with_ty: Vec<&Rel> =
                    rels.iter().filter(|r| !typed(&r.cols, ty).is_empty()).collect();
                if with_ty.is_empty() {
                    return (
                        "SELECT id, x FROM fz_a UNION ALL SELECT id, k FROM fz_b".into(),
                        vec![("id".into(), Some(Ty::Int)), ("x".into(), Some(Ty::Int))],
                        vec!["fz_a".into(), "fz_b".into()],
                    );
                }
                let a = (*rng.pick(&with_ty)).clone();
                let b = (*rng.pick(&with_ty)).clone();
                let ac = rng.pick(&typed(&a.cols, ty)).clone();
                let bc = rng.pick(&typed(&b.cols, ty)).clone();
                let union = if rng.chance(25) { "UNION" } else { "UNION ALL" };
                let mut left = format!("SELECT {ac} AS u FROM {}", a.name);
                if rng.chance(50) {
                    let p = ExprGen { rng: &mut *rng, cols: &a.cols, scalar_subqueries: false }
                        .expr(Ty::Bool, 1);
                    write!(left, " WHERE {p}").unwrap();
                }
                let sql = format!("{left} {union} SELECT {bc} FROM {}", b.name);
                (sql, vec![("u".to_owned(), Some(ty))], vec![a.name, b.name])
            }
        }
    }

    /// Waits until a view created in the background is created; false if it never is.
    pub(super) async fn wait_created(&mut self, name: &str) -> bool {
        let sql =
            format!("SELECT status FROM rw_catalog.rw_materialized_views WHERE name = '{name}'");
        let client = &self.main;
        let timeout = self.statement_timeout;
        let created = retry_until(BACKGROUND_VIEW_TIMEOUT, || {
            let sql = sql.clone();
            async move {
                let rows =
                    tokio::time::timeout(timeout, harness::text_rows(client, &sql)).await??;
                let status = rows.first().and_then(|r| r[0].clone());
                ensure!(status.as_deref() == Some("created"), "status {status:?}");
                Ok(())
            }
        })
        .await;
        match created {
            Ok(()) => true,
            Err(error) => {
                let message = format!("a background view never finished creating | {error:#}");
                self.find(Kind::Timeout, Source::Check, &sql, "", &clip(&message, 300));
                self.views.retain(|v| v.name != name);
                let drop = format!("DROP MATERIALIZED VIEW IF EXISTS {name}");
                self.exec(Session::Main, Source::View, &drop).await;
                false
            }
        }
    }

    /// Compares every view with its query run as a batch query.
    pub(super) async fn check_views(&mut self) {
        let restarts = self.stats.restarts;
        let views = self.views.clone();
        for view in views {
            if self.dead || self.stats.restarts != restarts {
                return;
            }
            if view.pending {
                if !self.wait_created(&view.name).await {
                    continue;
                }
                if let Some(v) = self.views.iter_mut().find(|v| v.name == view.name) {
                    v.pending = false;
                }
            }
            let select = format!("SELECT * FROM {}", view.name);
            let found = self.exec(Session::Main, Source::Check, &select).await;
            let expected = self.exec(Session::Main, Source::Check, &view.query).await;
            let (found, expected) = match (found, expected) {
                (Reply::Rows { rows: f, .. }, Reply::Rows { rows: e, .. }) => (f, e),
                (Reply::Lost, _) | (_, Reply::Lost) => return,
                (_, Reply::Failed { .. }) => {
                    self.stats.view_skips += 1;
                    continue;
                }
                (Reply::Failed { code, message }, Reply::Rows { .. }) => {
                    if code != "XX000" {
                        let message = format!("a view of the fuzzer cannot be read | {message}");
                        self.find(Kind::DdlOutcome, Source::Check, &select, &code, &message);
                    }
                    continue;
                }
            };
            self.stats.view_checks += 1;
            let (found, expected) = (comparable(found), comparable(expected));
            if found == expected {
                continue;
            }
            // Stale (catching up later) or wrong (never)?
            let client = &self.main;
            let query = view.query.clone();
            let converged = retry_until(CONVERGE_TIMEOUT, || {
                let (select, query) = (select.clone(), query.clone());
                async move {
                    let f = comparable(harness::text_rows(client, &select).await?);
                    let e = comparable(harness::text_rows(client, &query).await?);
                    ensure!(f == e, "differs");
                    Ok(())
                }
            })
            .await
            .is_ok();
            let missing: Vec<_> = expected.iter().filter(|r| !found.contains(r)).take(3).collect();
            let extra: Vec<_> = found.iter().filter(|r| !expected.contains(r)).take(3).collect();
            let message = format!(
                "{} | {} rows vs {} from the batch query; missing {:?}, unexpected {:?}; query: {}",
                if converged {
                    "a view lagged behind its query (equal only later)"
                } else {
                    "a view differs from its query run as a batch query"
                },
                found.len(),
                expected.len(),
                missing,
                extra,
                clip(&view.query, 300)
            );
            let sql = format!("CREATE MATERIALIZED VIEW {} AS {}", view.name, view.query);
            self.find(Kind::ViewMismatch, Source::Check, &sql, "", &message);
        }
    }
}

/// The columns of both sides of a join, as `l.c` and `r.c`, for conditions over a pair.
fn both_sides(l: &Rel, r: &Rel) -> Vec<Col> {
    let side = |alias: &str, rel: &Rel| -> Vec<Col> {
        rel.cols.iter().map(|(n, t)| (format!("{alias}.{n}"), *t)).collect()
    };
    [side("l", l), side("r", r)].concat()
}
