//! Mutations of the `.slt` statements.

use super::*;

/// Every statement of `sql_tests/**/*.slt`, in file order, except `WAIT` (which waits for
/// every creating job, and a mutated rate limit of 0 legitimately pauses one forever) and
/// `CANCEL` (which could cancel the fuzzer's own background views by id).
pub(super) fn slt_corpus() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql_tests");
    let mut files = Vec::new();
    let mut pending = vec![root];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read sql_tests") {
            let path: PathBuf = entry.expect("read a directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "slt") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut corpus = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read an .slt file");
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if !(line.starts_with("statement ") || line.starts_with("query ")) {
                continue;
            }
            let sql: Vec<&str> =
                lines.by_ref().take_while(|l| !l.trim().is_empty() && *l != "----").collect();
            let sql = sql.join("\n");
            let first = sql.split_whitespace().next().unwrap_or("").to_uppercase();
            if !sql.is_empty() && first != "WAIT" && first != "CANCEL" {
                corpus.push(sql);
            }
        }
    }
    corpus
}

#[derive(Clone)]
pub(super) struct Tok {
    pub(super) text: String,
    /// Whether whitespace preceded it, so an unmutated statement is rebuilt unchanged.
    pub(super) space: bool,
}

pub(super) fn tokenize(sql: &str) -> Vec<Tok> {
    let chars: Vec<char> = sql.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut space = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            space = true;
            i += 1;
            continue;
        }
        let start = i;
        if c == '\'' || c == '"' {
            i += 1;
            while i < chars.len() {
                if chars[i] == c {
                    if chars.get(i + 1) == Some(&c) {
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                i += 1;
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else if "<>=!|:".contains(c) {
            while i < chars.len() && "<>=!|:".contains(chars[i]) {
                i += 1;
            }
        } else {
            i += 1;
        }
        tokens.push(Tok { text: chars[start..i].iter().collect(), space });
        space = false;
    }
    tokens
}

pub(super) fn untokenize(tokens: &[Tok]) -> String {
    let mut sql = String::new();
    for t in tokens {
        if t.space && !sql.is_empty() {
            sql.push(' ');
        }
        sql.push_str(&t.text);
    }
    sql
}

pub(super) const KEYWORDS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "JOIN",
    "LEFT",
    "ON",
    "GROUP",
    "BY",
    "ORDER",
    "LIMIT",
    "UNION",
    "ALL",
    "DISTINCT",
    "AS",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "int",
    "bigint",
    "varchar",
    "numeric",
    "date",
    "boolean",
    "true",
    "false",
    "IS",
    "IN",
    "BETWEEN",
    "LIKE",
    "count",
    "sum",
    "min",
    "max",
    "avg",
    "coalesce",
    "VALUES",
    "INSERT",
    "INTO",
    "UPDATE",
    "SET",
    "DELETE",
    "TABLE",
    "MATERIALIZED",
    "VIEW",
    "CREATE",
    "DROP",
    "CASCADE",
    "PRIMARY",
    "KEY",
    "EXISTS",
    "WITH",
    "HAVING",
    "OFFSET",
    "FLUSH",
    "EXPLAIN",
];

pub(super) const INSERTABLE: &[&str] = &[
    "NULL",
    "(",
    ")",
    ",",
    "*",
    "-",
    "+",
    "::int",
    "::varchar",
    "'x'",
    "0",
    "SELECT",
    "FROM",
    "WHERE",
    "AND",
    "OR",
    "NOT",
    "CASE",
    "END",
    "||",
    ";",
    "=",
    "IS",
    "DISTINCT",
    "ALL",
    "/",
];

pub(super) const EXTREME_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "1e308",
    "1e-320",
    "1e400",
    "99999999999999999999999999999999999999.99",
    "0.0000000000000000000000000001",
    "NULL",
    "'NaN'",
    "-0",
];

/// Numbers for statements that generate rows (`generate_series`): an extreme bound there
/// would only ask for billions of rows.
pub(super) const SMALL_NUMBERS: &[&str] = &["0", "1", "-1", "2", "7", "13", "NULL", "100"];

pub(super) const HOSTILE_STRINGS: &[&str] = &[
    "''",
    "'NaN'",
    "'-Infinity'",
    "'2147483648'",
    "'1970-01-01'",
    "'99999-12-31'",
    "'é日本🦀'",
    "'{\"a\": [1, {\"b\": null}]}'",
    "'\\x00ff'",
    "'it''s'",
    "' 1 '",
];

pub(super) fn mutate(rng: &mut Rng, sql: &str, words: &[String]) -> String {
    let mut toks = tokenize(sql);
    let rows_generator = sql.to_lowercase().contains("generate_series");
    let numbers = if rows_generator { SMALL_NUMBERS } else { EXTREME_NUMBERS };
    for _ in 0..1 + rng.below(3) {
        if toks.is_empty() {
            break;
        }
        let i = rng.below(toks.len());
        let of_kind = |toks: &[Tok], f: fn(&str) -> bool| -> Vec<usize> {
            (0..toks.len()).filter(|&j| f(&toks[j].text)).collect()
        };
        match rng.below(11) {
            0 => {
                toks.remove(i);
            }
            1 => {
                let mut t = toks[i].clone();
                t.space = true;
                toks.insert(i, t);
            }
            2 => {
                let j = rng.below(toks.len());
                let (a, b) = (toks[i].text.clone(), toks[j].text.clone());
                toks[i].text = b;
                toks[j].text = a;
            }
            3 => {
                let nums = of_kind(&toks, |t| t.starts_with(|c: char| c.is_ascii_digit()));
                let j = if nums.is_empty() { i } else { *rng.pick(&nums) };
                toks[j].text = rng.pick(numbers).to_string();
            }
            4 => {
                let strings = of_kind(&toks, |t| t.starts_with('\''));
                let j = if strings.is_empty() { i } else { *rng.pick(&strings) };
                toks[j].text = if rng.chance(10) {
                    format!("'{}'", "z".repeat(10_000))
                } else {
                    rng.pick(HOSTILE_STRINGS).to_string()
                };
            }
            5 => {
                let idents =
                    of_kind(&toks, |t| t.starts_with(|c: char| c.is_alphabetic() || c == '_'));
                let j = if idents.is_empty() { i } else { *rng.pick(&idents) };
                toks[j].text = if rng.chance(50) && !words.is_empty() {
                    rng.pick(words).clone()
                } else {
                    rng.pick(KEYWORDS).to_string()
                };
            }
            6 => toks.truncate(i.max(1)),
            7 => toks.insert(i, Tok { text: rng.pick(INSERTABLE).to_string(), space: true }),
            8 if !rows_generator => {
                let ty = *rng.pick(&Ty::ALL);
                let mut g = ExprGen { rng: &mut *rng, cols: &[], scalar_subqueries: true };
                toks[i].text = format!("({})", g.expr(ty, 2));
            }
            _ => {
                let ty = rng.pick(&Ty::ALL).sql();
                toks[i].text = format!("CAST({} AS {ty})", toks[i].text);
            }
        }
    }
    untokenize(&toks)
}
