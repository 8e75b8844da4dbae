//! Hostile statements.

use super::*;

/// What identifies a hostile statement's template and size: its length and start.
pub(super) fn hostile_key(statements: &[String]) -> (usize, String) {
    let first = statements.first().map_or("", String::as_str);
    (first.len(), first.chars().take(40).collect())
}

/// A deliberately extreme statement (or a short sequence, run in order).
pub(super) fn hostile(rng: &mut Rng) -> Vec<String> {
    let n = |rng: &mut Rng, sizes: &[usize]| *rng.pick(sizes);
    match rng.below(14) {
        0 => {
            let terms = n(rng, &[500, 3000, 10_000]);
            let ors: Vec<String> = (0..terms).map(|i| format!("x = {i}")).collect();
            vec![format!("SELECT count(*) FROM fz_a WHERE {}", ors.join(" OR "))]
        }
        1 => {
            let depth = n(rng, &[16, 48, 200]);
            let types = ["int", "bigint", "varchar", "numeric", "double precision", "int"];
            let mut e = "1".to_owned();
            for i in 0..depth {
                e = format!("CAST({e} AS {})", types[i % types.len()]);
            }
            vec![format!("SELECT {e}")]
        }
        2 => {
            let depth = n(rng, &[100, 1000, 5000]);
            vec![format!("SELECT {}1{}", "(".repeat(depth), ")".repeat(depth))]
        }
        3 => {
            let terms = n(rng, &[1000, 10_000]);
            vec![format!("SELECT 1{}", " + 1".repeat(terms))]
        }
        4 => {
            let depth = n(rng, &[50, 300]);
            let mut e = "0".to_owned();
            for i in 0..depth {
                e = format!("CASE WHEN x > {i} THEN {e} ELSE {i} END");
            }
            vec![format!("SELECT {e} FROM fz_a")]
        }
        5 => {
            let digits = n(rng, &[40, 400, 5000]);
            let lit = "9".repeat(digits);
            vec![
                rng.pick(&[
                    format!("SELECT {lit}"),
                    format!("SELECT {lit} + 1"),
                    format!("SELECT CAST({lit} AS int)"),
                    format!("SELECT 1e{digits}"),
                    format!("SELECT x FROM fz_a WHERE x = {lit}"),
                ])
                .clone(),
            ]
        }
        6 => {
            let len = n(rng, &[100_000, 1_000_000]);
            vec![format!("SELECT length('{}')", "x".repeat(len))]
        }
        7 => vec![
            rng.pick(&[
                "SELECT NULL + NULL, NULL || NULL, NULL = NULL, CASE NULL WHEN NULL THEN NULL END, \
                 coalesce(NULL, NULL), NULL::int / NULL::int, nullif(NULL, NULL), NOT NULL, \
                 NULL AND NULL, - NULL::int",
                "SELECT max(NULL), min(NULL), count(NULL), sum(NULL::int), avg(NULL::int) FROM fz_a",
                "SELECT NULL FROM fz_a WHERE NULL GROUP BY NULL",
                "SELECT * FROM fz_a a JOIN fz_b b ON NULL",
                "SELECT NULL IN (NULL), NULL BETWEEN NULL AND NULL, NULL LIKE NULL, NULL IS DISTINCT FROM NULL",
                "SELECT CAST(NULL AS date) + NULL::int, upper(NULL), substr(NULL, NULL, NULL)",
                "SELECT x / NULL, NULL % x FROM fz_a",
            ])
            .to_string(),
        ],
        8 => {
            let items = n(rng, &[1000, 20_000]);
            let list: Vec<String> = (0..items).map(|i| i.to_string()).collect();
            vec![format!("SELECT count(*) FROM fz_a WHERE x IN ({})", list.join(", "))]
        }
        9 => {
            let cols = n(rng, &[1000, 5000]);
            let items: Vec<String> = (0..cols).map(|i| format!("{i} AS c{i}")).collect();
            vec![format!("SELECT {}", items.join(", "))]
        }
        10 => {
            let depth = n(rng, &[20, 100, 500]);
            vec![format!("SELECT {}1{}", "(SELECT ".repeat(depth), ")".repeat(depth))]
        }
        11 => {
            let depth = n(rng, &[100, 3000]);
            vec![
                rng.pick(&[
                    format!("SELECT {}true", "NOT ".repeat(depth)),
                    format!("SELECT {}1", "- ".repeat(depth)),
                ])
                .clone(),
            ]
        }
        12 => {
            let name = rng
                .pick(&[
                    format!("\"fz weird \"\"q\"\" {}\"", "名"),
                    format!("fz_{}", "l".repeat(100)),
                    "\"FZ_Upper\"".to_owned(),
                ])
                .clone();
            vec![
                format!("CREATE TABLE {name} (\"select\" int PRIMARY KEY, \"a b\" varchar)"),
                format!("INSERT INTO {name} VALUES (1, 'x'), (2, NULL)"),
                format!("SELECT \"a b\", count(*) FROM {name} GROUP BY \"a b\""),
                format!("DROP TABLE {name}"),
            ]
        }
        _ => {
            let depth = n(rng, &[30, 200, 2000]);
            let mut e = "x".to_owned();
            for i in 0..depth {
                e = format!("({e} + {})", i % 3);
            }
            vec![
                format!("CREATE MATERIALIZED VIEW fz_hostile AS SELECT id, {e} AS deep FROM fz_a"),
                "SELECT count(*) FROM fz_hostile".to_owned(),
                "DROP MATERIALIZED VIEW fz_hostile".to_owned(),
            ]
        }
    }
}
