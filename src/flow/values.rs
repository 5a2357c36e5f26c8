//! The values a flow is traced by: email addresses, IBANs, account and phone numbers, URL
//! hosts and file paths, found in text and normalized, then kept only as keyed hashes.

use std::hash::{BuildHasher, Hasher};
use std::ops::Range;
use std::sync::LazyLock;

use regex_automata::Input;
use regex_automata::meta::Regex;

use crate::text::{is_path_byte, is_url_byte};

/// What kind of destination a value is; part of its hash, so a number and a path that
/// happen to print alike are different values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum ValueKind {
    Email = 1,
    Iban = 2,
    /// Account and phone numbers: a run of digits, kept as digits only.
    Number = 3,
    /// The host of a URL, or a bare `www.` host.
    Host = 4,
    Path = 5,
    /// A destination argument that holds none of the above (`#general`, `Fred`): kept
    /// whole, trimmed and lowercased.
    Name = 6,
}

impl ValueKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ValueKind::Email => "an email address",
            ValueKind::Iban => "an IBAN",
            ValueKind::Number => "an account or phone number",
            ValueKind::Host => "a host",
            ValueKind::Path => "a file path",
            ValueKind::Name => "a name",
        }
    }
}

/// A normalized value: its kind and its canonical text. Raw values never leave this module
/// except as `ValueKey`s and in pack allow-list matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    pub kind: ValueKind,
    pub text: String,
}

/// A value as the session keeps it: a 64-bit hash under a key drawn at start-up, so the
/// session store never holds the addresses and accounts it traces, and a caller who knows
/// the hash function still cannot aim collisions at it.
pub type ValueKey = u64;

static HASH_KEYS: LazyLock<std::collections::hash_map::RandomState> =
    LazyLock::new(std::collections::hash_map::RandomState::new);

/// Set when sessions are shared by replicas: every replica must hash a value alike, so the
/// key is derived from a secret they share instead of drawn at start-up.
static SHARED_KEY: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

/// Hashes values under a key derived from `secret` from now on (before any session is
/// recorded). Returns false when a different key was already set.
pub fn share_hash_key(secret: &[u8]) -> bool {
    use sha2::Digest;
    let d = sha2::Sha256::digest([b"toolgate flow values\0".as_slice(), secret].concat());
    let mut k0 = [0u8; 8];
    let mut k1 = [0u8; 8];
    k0.copy_from_slice(&d[..8]);
    k1.copy_from_slice(&d[8..16]);
    let key = (u64::from_le_bytes(k0), u64::from_le_bytes(k1));
    *SHARED_KEY.get_or_init(|| key) == key
}

impl Value {
    pub fn key(&self) -> ValueKey {
        match SHARED_KEY.get() {
            Some(&(k0, k1)) => {
                // SipHash-2-4 with an explicit key: a fixed, specified function, so replicas
                // built by different compilers still agree (std's RandomState may change).
                #[allow(deprecated)]
                let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
                h.write_u8(self.kind as u8);
                h.write(self.text.as_bytes());
                h.finish()
            }
            None => {
                let mut h = HASH_KEYS.build_hasher();
                h.write_u8(self.kind as u8);
                h.write(self.text.as_bytes());
                h.finish()
            }
        }
    }
}

/// Digits in a number at least this long: shorter runs are amounts, dates and counters.
const MIN_NUMBER_DIGITS: usize = 7;
/// Longest IBAN (34) plus its spaces; longer digit runs are not account numbers.
const MAX_NUMBER_DIGITS: usize = 34;

// INVARIANT: these patterns are constants checked by the unit tests below.
#[allow(clippy::expect_used)]
static EMAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})+")
        .expect("email regex")
});
#[allow(clippy::expect_used)]
static URL_HOST: LazyLock<Regex> = LazyLock::new(|| {
    // No capture groups, so the fast engine does all the work; the host is cut out in code.
    Regex::new(r"(?i)(?:(?-u:\b)[a-z][a-z0-9+.-]{1,15}://(?:[^\s/@]*@)?|(?-u:\b)www\.)[a-z0-9-]{1,63}(?:\.[a-z0-9-]{1,63})*")
        .expect("url regex")
});
#[allow(clippy::expect_used)]
static IBAN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}(?-u:\b)").expect("iban regex")
});
#[allow(clippy::expect_used)]
static NUMBER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\+?[0-9][0-9 ().-]{5,48}[0-9]").expect("number regex"));
#[allow(clippy::expect_used)]
static PATH: LazyLock<Regex> = LazyLock::new(|| {
    // One optional delimiter, then the path; the delimiter is trimmed off in code.
    Regex::new(r"(?:^|[\s'`(=]|\x22)(?:(?:~|\.{1,2})?/[\w.@%+-]+(?:/[\w.@%+-]*)+|[A-Za-z]:\\[\w .-]+(?:\\[\w .-]+)*)")
        .expect("path regex")
});

/// Compiles the value patterns now, so the first result the flow stage records after
/// start-up does not pay for them.
pub fn warm_up() {
    LazyLock::force(&EMAIL);
    LazyLock::force(&URL_HOST);
    LazyLock::force(&IBAN);
    LazyLock::force(&NUMBER);
    LazyLock::force(&PATH);
}

/// Every value in `text`, in order of kind then position. `limit` bounds how many are
/// returned; the second value says whether more were there.
///
/// Each pattern runs only over the stretches of text a match of it can lie in: the run of
/// its characters around an anchor every match contains (`@` for an email, `://` or
/// `www.` for a URL, a digit for an IBAN or a number, a slash for a path). Ordinary prose
/// has few anchors, so the patterns read a small part of it; the matches are the same as
/// over the whole text, because the runs are cut only at bytes no match can contain and
/// the search keeps the surrounding text as context for `\b` and `^`.
pub fn extract(text: &str, limit: usize, out: &mut Vec<Value>) -> bool {
    extract_in(text, limit, out, Reading::Runs)
}

/// How `extract_in` picks the text each pattern reads.
#[derive(Clone, Copy)]
enum Reading {
    /// Only the runs around anchors (what `extract` does).
    Runs,
    /// The whole text; the reference the runs must agree with.
    #[cfg(test)]
    Whole,
}

/// One pattern, the runs of text it reads, and how a match becomes a value (`None`: not one).
type Pass<'a> = (&'a Regex, Vec<Range<usize>>, fn(&str) -> Option<Value>);

fn extract_in(text: &str, limit: usize, out: &mut Vec<Value>, reading: Reading) -> bool {
    let bytes = text.as_bytes();
    let region =
        |anchors: &mut dyn Iterator<Item = usize>, inside: fn(u8) -> bool, lead| match reading {
            Reading::Runs => crate::text::runs_around(bytes, anchors, inside, lead),
            #[cfg(test)]
            Reading::Whole => std::iter::once(0..bytes.len()).collect(),
        };
    let digits = digit_runs(bytes);
    let passes: [Pass; 5] = [
        (
            &EMAIL,
            region(&mut memchr::memchr_iter(b'@', bytes), is_email_byte, 0),
            |s| Some(email(s)),
        ),
        (
            &URL_HOST,
            region(&mut url_anchors(bytes), is_url_byte, 0),
            |s| {
                let after_scheme = s.find("://").map_or(s, |i| &s[i + 3..]);
                let h = after_scheme
                    .rsplit_once('@')
                    .map_or(after_scheme, |(_, h)| h);
                Some(host(h))
            },
        ),
        (
            &IBAN,
            region(&mut digits.iter().copied(), is_iban_byte, 0),
            |s| {
                Some(Value {
                    kind: ValueKind::Iban,
                    text: compact(s),
                })
            },
        ),
        (
            &NUMBER,
            region(&mut digits.iter().copied(), is_number_byte, 0),
            |s| {
                let digits = compact(s);
                let n = digits.bytes().filter(u8::is_ascii_digit).count();
                let account =
                    (MIN_NUMBER_DIGITS..=MAX_NUMBER_DIGITS).contains(&n) && !looks_like_date(s);
                account.then(|| number(&digits))
            },
        ),
        (
            // A path's first byte may be the delimiter before it (a space, a quote, `(`, `=`).
            &PATH,
            region(
                &mut memchr::memchr2_iter(b'/', b'\\', bytes),
                is_path_byte,
                1,
            ),
            |s| {
                let p = s.trim_start_matches(|c: char| c.is_whitespace() || "'`(=\"".contains(c));
                Some(Value {
                    kind: ValueKind::Path,
                    text: p.trim_end_matches(['.', ',']).to_string(),
                })
            },
        ),
    ];
    let start = out.len();
    for (re, runs, value) in passes {
        for run in runs {
            for m in re.find_iter(Input::new(text).range(run)) {
                let Some(v) = value(&text[m.range()]) else {
                    continue;
                };
                if out.len() - start >= limit {
                    return true;
                }
                out.push(v);
            }
        }
    }
    false
}

/// The values a destination argument names; a value naming none of the known kinds is
/// kept whole as a name, so `#general` or `Fred` can still be allowed or traced.
pub fn destination(text: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    extract(text, limit, &mut out);
    // IBANs are read in capitals only (a lowercase run of letters and digits in prose is
    // rarely one), but a destination argument is one value: read it in capitals too.
    if text.len() <= 64 && text.bytes().any(|b| b.is_ascii_lowercase()) {
        let upper = text.to_ascii_uppercase();
        for m in IBAN.find_iter(&upper).take(limit.saturating_sub(out.len())) {
            let v = Value {
                kind: ValueKind::Iban,
                text: compact(&upper[m.range()]),
            };
            if !out.contains(&v) {
                out.push(v);
            }
        }
    }
    // A URL also matches as a path (`//host/...`); the host is what names the destination.
    if out.iter().any(|v| v.kind == ValueKind::Host) {
        out.retain(|v| v.kind != ValueKind::Path);
    }
    if out.is_empty()
        && let Some(n) = name(text)
    {
        out.push(n);
    }
    out
}

/// A name as a destination or as a word the user wrote: trimmed, lowercased, without a
/// leading `#` or `@`, so `#general`, `@general` and `general` are one channel.
pub fn name(text: &str) -> Option<Value> {
    let t = text.trim().trim_start_matches(['#', '@']);
    (!t.is_empty()).then(|| Value {
        kind: ValueKind::Name,
        text: t.to_lowercase(),
    })
}

/// How an allow-list entry in a pack reads: the same normalization as a traced value, so
/// `Mark@Example.com` in a pack allows `mark@example.com` in a call.
pub fn normalize_pattern(s: &str) -> String {
    s.trim().to_lowercase()
}

fn is_email_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'%' | b'+' | b'-' | b'@')
}

fn is_iban_byte(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit() || b == b' '
}

fn is_number_byte(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b' ' | b'(' | b')' | b'.' | b'-' | b'+')
}

/// Where `://` and `www.` (in any case) start, in order: every URL match holds one.
fn url_anchors(bytes: &[u8]) -> std::vec::IntoIter<usize> {
    let mut at: Vec<usize> = memchr::memmem::find_iter(bytes, b"://").collect();
    let www = memchr::memchr_iter(b'.', bytes)
        .filter(|&dot| dot >= 3 && bytes[dot - 3..dot].eq_ignore_ascii_case(b"www"))
        .map(|dot| dot - 3);
    let scheme_only = at.len();
    at.extend(www);
    if scheme_only > 0 && at.len() > scheme_only {
        at.sort_unstable();
    }
    at.into_iter()
}

/// The first byte of every run of ASCII digits. Eight bytes are tested at once and words
/// without a digit are passed over whole, so prose costs little.
fn digit_runs(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut prev_digit = false;
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        if !has_digit(u64::from_le_bytes(w)) {
            prev_digit = false;
        } else {
            digit_starts(word, at, &mut prev_digit, &mut out);
        }
        at += 8;
    }
    digit_starts(words.remainder(), at, &mut prev_digit, &mut out);
    out
}

fn digit_starts(bytes: &[u8], base: usize, prev_digit: &mut bool, out: &mut Vec<usize>) {
    for (j, b) in bytes.iter().enumerate() {
        let digit = b.is_ascii_digit();
        if digit && !*prev_digit {
            out.push(base + j);
        }
        *prev_digit = digit;
    }
}

/// Whether any byte of `x` is an ASCII digit: XOR with `0` maps exactly the digits to
/// 0..=9, and the classic has-a-byte-below-n test answers for all eight at once (a borrow
/// can only spread from a byte that is below n, so the answer is exact).
fn has_digit(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let y = x ^ (ONES * u64::from(b'0'));
    y.wrapping_sub(ONES * 10) & !y & HIGH != 0
}

fn email(s: &str) -> Value {
    Value {
        kind: ValueKind::Email,
        text: s.trim_matches('.').to_lowercase(),
    }
}

fn host(s: &str) -> Value {
    let h = s.trim_end_matches('.').to_lowercase();
    let h = h.strip_prefix("www.").map(str::to_string).unwrap_or(h);
    Value {
        kind: ValueKind::Host,
        text: h,
    }
}

fn number(digits: &str) -> Value {
    Value {
        kind: ValueKind::Number,
        text: digits.chars().filter(char::is_ascii_digit).collect(),
    }
}

/// Letters and digits only, lowercased: IBANs written with spaces or in either case are
/// the same account.
fn compact(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// `2024-05-13` or `13.05.2024`: a date, not an account.
fn looks_like_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split(['-', '.', '/']).collect();
    parts.len() == 3 && parts.iter().all(|p| (1..=4).contains(&p.trim().len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(text: &str) -> Vec<(ValueKind, String)> {
        let mut out = Vec::new();
        extract(text, 100, &mut out);
        out.into_iter().map(|v| (v.kind, v.text)).collect()
    }

    #[test]
    fn finds_each_kind_normalized() {
        let got = all(
            "Send it to Mark.X@Example.com, see https://www.Evil-Site.io/a?b=c, \
             IBAN US13 3000 0001 2121 2121 2121 2, call +1 (555) 010-9999, file /home/user/.ssh/id_rsa",
        );
        assert!(
            got.contains(&(ValueKind::Email, "mark.x@example.com".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&(ValueKind::Host, "evil-site.io".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&(ValueKind::Iban, "us13300000012121212121212".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&(ValueKind::Number, "15550109999".into())),
            "{got:?}"
        );
        assert!(
            got.contains(&(ValueKind::Path, "/home/user/.ssh/id_rsa".into())),
            "{got:?}"
        );
    }

    #[test]
    fn amounts_dates_and_short_numbers_are_not_accounts() {
        let got = all("Paid 1,250.00 on 2024-05-13 for order 4411 (qty 3).");
        assert!(got.iter().all(|(k, _)| *k != ValueKind::Number), "{got:?}");
    }

    #[test]
    fn the_same_value_written_differently_has_one_key() {
        let iban = |vs: Vec<Value>| vs.into_iter().find(|v| v.kind == ValueKind::Iban).unwrap();
        let a = iban(destination("US13 3000 0001 2121 2121 2121 2", 8));
        let b = iban(destination("us13300000012121212121212", 8));
        assert_eq!(a.key(), b.key());
        let a = destination("Mark.X@example.COM", 8);
        let b = destination("mark.x@example.com", 8);
        assert_eq!(a[0].key(), b[0].key());
    }

    #[test]
    fn a_destination_without_a_known_kind_is_a_name() {
        let got = destination("  #General ", 8);
        assert_eq!(
            got,
            vec![Value {
                kind: ValueKind::Name,
                text: "general".into()
            }]
        );
        let got = destination("https://www.my-site.com/upload", 8);
        assert_eq!(
            got,
            vec![Value {
                kind: ValueKind::Host,
                text: "my-site.com".into()
            }]
        );
    }

    #[test]
    fn the_limit_is_reported() {
        let text = (0..20).map(|i| format!("u{i}@x.io ")).collect::<String>();
        let mut out = Vec::new();
        assert!(extract(&text, 5, &mut out));
        assert_eq!(out.len(), 5);
    }

    /// Texts built from pieces of every kind, their near misses, and the bytes that end
    /// or extend a run (spaces, quotes, Unicode letters and spaces, slashes, digits).
    fn texts() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("mark.x@example.com".to_string()),
            Just("a@b".to_string()),
            Just("@@x.io".to_string()),
            Just("https://user:pw@Evil-Site.io/a?b=c".to_string()),
            Just("WWW.Example.ORG".to_string()),
            Just("xwww.a.b".to_string()),
            Just("ftp://".to_string()),
            Just("US13 3000 0001 2121 2121 2121 2".to_string()),
            Just("GB82WEST12345698765432".to_string()),
            Just("+1 (555) 010-9999".to_string()),
            Just("2024-05-13".to_string()),
            Just("1,250.00".to_string()),
            Just("/home/user/.ssh/id_rsa".to_string()),
            Just("~/x/y".to_string()),
            Just("../a/b".to_string()),
            Just("C:\\Program Files\\app".to_string()),
            Just("//".to_string()),
            Just("é/ü/ß".to_string()),
            "[a-zA-Z0-9@./:\\\\~()+%'\"=_ -]{1,12}",
        ];
        let sep = prop_oneof![
            Just(" "),
            Just(""),
            Just("\n"),
            Just("\u{a0}"),
            Just("\u{3000}"),
            Just("é"),
            Just(","),
            Just("\""),
            Just("("),
            Just("="),
            Just("\t"),
        ];
        prop::collection::vec((piece, sep), 0..24)
            .prop_map(|parts| parts.into_iter().map(|(p, s)| p + s).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn reading_runs_finds_what_reading_the_whole_text_finds(text in texts(), limit in 1usize..40) {
            let (mut runs, mut whole) = (Vec::new(), Vec::new());
            let more_runs = extract_in(&text, limit, &mut runs, Reading::Runs);
            let more_whole = extract_in(&text, limit, &mut whole, Reading::Whole);
            prop_assert_eq!(runs, whole);
            prop_assert_eq!(more_runs, more_whole);
        }
    }

    #[test]
    fn digit_runs_start_where_digits_follow_other_bytes() {
        let mut text = "a".repeat(40);
        text.push_str("12x3");
        text.push_str(&"4".repeat(40));
        assert_eq!(digit_runs(text.as_bytes()), vec![40, 43]);
        assert!(digit_runs(b"no digits here").is_empty());
        // Every byte value, alone in a word among letters and among bytes above 0x7f.
        for b in 0..=255u8 {
            for fill in [b'a', 0xff] {
                let mut w = [fill; 8];
                w[3] = b;
                assert_eq!(
                    has_digit(u64::from_le_bytes(w)),
                    b.is_ascii_digit(),
                    "{b:#x}"
                );
            }
        }
    }

    #[test]
    fn kinds_do_not_collide() {
        let a = Value {
            kind: ValueKind::Name,
            text: "x".into(),
        };
        let b = Value {
            kind: ValueKind::Host,
            text: "x".into(),
        };
        assert_ne!(a.key(), b.key());
    }
}
