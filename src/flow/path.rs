//! Argument paths in packs (`$.recipients[*]`, `$.to`, `$..email`): a small JSONPath
//! subset, compiled once, that names where a sink call carries its destinations.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    /// `..name`: the key at any depth.
    Descend(String),
    Index(usize),
    /// `[*]` or `.*`: every element or member.
    All,
}

/// A compiled argument path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgPath {
    text: String,
    steps: Vec<Step>,
}

impl std::fmt::Display for ArgPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Deeper paths are not argument names but a sign of a pack written wrongly.
const MAX_STEPS: usize = 16;

impl ArgPath {
    /// Parses `$`, then `.key`, `..key`, `["key"]`, `[N]`, `[*]` or `.*` steps.
    pub fn parse(text: &str) -> Result<ArgPath, String> {
        let rest = text
            .trim()
            .strip_prefix('$')
            .ok_or_else(|| format!("`{text}` must start with `$`"))?;
        let mut steps = Vec::new();
        let b = rest.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if rest[i..].starts_with("..") {
                let (name, next) = ident(rest, i + 2);
                if name.is_empty() {
                    return Err(format!("`{text}`: `..` must be followed by a key"));
                }
                steps.push(Step::Descend(name.to_string()));
                i = next;
            } else if b[i] == b'.' {
                if rest[i + 1..].starts_with('*') {
                    steps.push(Step::All);
                    i += 2;
                    continue;
                }
                let (name, next) = ident(rest, i + 1);
                if name.is_empty() {
                    return Err(format!("`{text}`: `.` must be followed by a key"));
                }
                steps.push(Step::Key(name.to_string()));
                i = next;
            } else if b[i] == b'[' {
                let close = rest[i..]
                    .find(']')
                    .map(|j| i + j)
                    .ok_or_else(|| format!("`{text}`: `[` is not closed"))?;
                let inner = rest[i + 1..close].trim();
                steps.push(if inner == "*" {
                    Step::All
                } else if let Ok(n) = inner.parse::<usize>() {
                    Step::Index(n)
                } else if let Some(k) = quoted(inner) {
                    Step::Key(k.to_string())
                } else {
                    return Err(format!(
                        "`{text}`: `[{inner}]` must be `[*]`, an index or a quoted key"
                    ));
                });
                i = close + 1;
            } else {
                return Err(format!(
                    "`{text}`: unexpected `{}` (steps are `.key`, `..key`, `[N]`, `[*]`)",
                    &rest[i..].chars().next().unwrap_or(' ')
                ));
            }
            if steps.len() > MAX_STEPS {
                return Err(format!("`{text}` has more than {MAX_STEPS} steps"));
            }
        }
        Ok(ArgPath {
            text: text.trim().to_string(),
            steps,
        })
    }

    /// `$`: the whole arguments.
    pub fn root() -> ArgPath {
        ArgPath {
            text: "$".into(),
            steps: Vec::new(),
        }
    }

    /// Every string, number or boolean the path reaches in `root`, as text; arrays and
    /// objects reached by the path contribute their scalar leaves.
    pub fn texts(&self, root: &Value, out: &mut Vec<String>) {
        walk(&self.steps, root, out);
    }
}

fn ident(s: &str, from: usize) -> (&str, usize) {
    let end = s[from..]
        .find(['.', '['])
        .map(|j| from + j)
        .unwrap_or(s.len());
    (&s[from..end], end)
}

fn quoted(s: &str) -> Option<&str> {
    s.strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| s.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
}

/// Results are bounded: a sink's destinations are few, and an argument that expands to
/// thousands of leaves is read no further than this.
const MAX_TEXTS: usize = 256;

fn walk(steps: &[Step], v: &Value, out: &mut Vec<String>) {
    if out.len() >= MAX_TEXTS {
        return;
    }
    let Some((first, rest)) = steps.split_first() else {
        leaves(v, out);
        return;
    };
    match (first, v) {
        (Step::Key(k), Value::Object(m)) => {
            if let Some(c) = m.get(k) {
                walk(rest, c, out);
            }
        }
        (Step::Index(n), Value::Array(a)) => {
            if let Some(c) = a.get(*n) {
                walk(rest, c, out);
            }
        }
        (Step::All, Value::Array(a)) => a.iter().for_each(|c| walk(rest, c, out)),
        (Step::All, Value::Object(m)) => m.values().for_each(|c| walk(rest, c, out)),
        (Step::Descend(k), Value::Object(m)) => {
            for (key, c) in m {
                if key == k {
                    walk(rest, c, out);
                } else {
                    walk(steps, c, out);
                }
            }
        }
        (Step::Descend(_), Value::Array(a)) => a.iter().for_each(|c| walk(steps, c, out)),
        _ => {}
    }
}

fn leaves(v: &Value, out: &mut Vec<String>) {
    if out.len() >= MAX_TEXTS {
        return;
    }
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|c| leaves(c, out)),
        Value::Object(m) => m.values().for_each(|c| leaves(c, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn get(path: &str, v: &Value) -> Vec<String> {
        let mut out = Vec::new();
        ArgPath::parse(path).unwrap().texts(v, &mut out);
        out
    }

    #[test]
    fn reads_keys_indexes_wildcards_and_descent() {
        let v = json!({"to": "a@x.io", "cc": ["b@x.io", "c@x.io"], "meta": {"n": {"email": "d@x.io"}}, "iban": 12345678});
        assert_eq!(get("$.to", &v), vec!["a@x.io"]);
        assert_eq!(get("$.cc[*]", &v), vec!["b@x.io", "c@x.io"]);
        assert_eq!(get("$.cc[1]", &v), vec!["c@x.io"]);
        assert_eq!(get("$['to']", &v), vec!["a@x.io"]);
        assert_eq!(get("$..email", &v), vec!["d@x.io"]);
        assert_eq!(get("$.iban", &v), vec!["12345678"]);
        assert_eq!(get("$.cc", &v), vec!["b@x.io", "c@x.io"]);
        assert!(get("$.missing", &v).is_empty());
    }

    #[test]
    fn bad_paths_say_what_is_wrong() {
        assert!(
            ArgPath::parse("to")
                .unwrap_err()
                .contains("must start with `$`")
        );
        assert!(ArgPath::parse("$.a[").unwrap_err().contains("not closed"));
        assert!(ArgPath::parse("$.a[x]").unwrap_err().contains("quoted key"));
        assert!(
            ArgPath::parse("$.")
                .unwrap_err()
                .contains("followed by a key")
        );
    }
}
