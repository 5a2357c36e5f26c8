//! Tool-name globs (`shell.*`, `*.delete_?ser`): `*` matches any run, `?` one char.

/// A compiled glob. Matching is case-sensitive, as tool names are identifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    pattern: String,
    /// True when the pattern has no wildcard: an equality check suffices.
    literal: bool,
}

impl Glob {
    pub fn new(pattern: &str) -> Glob {
        Glob {
            pattern: pattern.to_string(),
            literal: !pattern.contains(['*', '?']),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.pattern
    }

    pub fn is_literal(&self) -> bool {
        self.literal
    }

    /// Count of non-wildcard chars: more specific globs win when several match.
    pub fn specificity(&self) -> usize {
        self.pattern
            .chars()
            .filter(|c| *c != '*' && *c != '?')
            .count()
    }

    /// The glob as an anchored regex source, for joining many globs into one automaton.
    pub fn regex_source(&self) -> String {
        let mut out = String::from("^(?:");
        let mut lit = String::new();
        for c in self.pattern.chars() {
            if c == '*' || c == '?' {
                out.push_str(&regex_syntax::escape(&lit));
                lit.clear();
                out.push_str(if c == '*' { "(?s:.*)" } else { "(?s:.)" });
            } else {
                lit.push(c);
            }
        }
        out.push_str(&regex_syntax::escape(&lit));
        out.push_str(")$");
        out
    }

    pub fn matches(&self, name: &str) -> bool {
        if self.literal {
            return self.pattern == name;
        }
        glob_match(self.pattern.as_bytes(), name.as_bytes())
    }
}

/// Iterative wildcard match with single-star backtracking: linear in practice, no recursion.
fn glob_match(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::Glob;

    #[test]
    fn globs() {
        assert!(Glob::new("shell.*").matches("shell.exec"));
        assert!(!Glob::new("shell.*").matches("myshell.exec"));
        assert!(Glob::new("*").matches(""));
        assert!(Glob::new("*.delete_?ser").matches("tools.delete_user"));
        assert!(Glob::new("a*b*c").matches("axxbyyc"));
        assert!(!Glob::new("a*b*c").matches("axxbyy"));
        assert!(Glob::new("tools.x").matches("tools.x"));
        assert!(!Glob::new("tools.x").matches("tools.xy"));
        assert!(Glob::new("shell.*").specificity() > Glob::new("*").specificity());
    }

    #[test]
    fn the_regex_form_matches_like_the_glob() {
        for pat in [
            "*send_email*",
            "email.send*",
            "a?c",
            "exact.name",
            "*",
            "x.(y)+*",
        ] {
            let g = Glob::new(pat);
            let re = regex::Regex::new(&g.regex_source()).unwrap();
            for name in [
                "send_email",
                "gmail.send_email_v2",
                "email.send",
                "email.sender",
                "abc",
                "ac",
                "exact.name",
                "exact_name",
                "x.(y)+z",
                "",
            ] {
                assert_eq!(re.is_match(name), g.matches(name), "{pat} vs {name}");
            }
        }
    }
}
