//! Small text helpers shared across the crate: bounded prefixes, lowercase hex ids, the
//! runs of text a pattern can match in, a screen for a few words.

use std::ops::Range;

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn head(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The maximal runs of `bytes` for which `inside` holds that contain an anchor, widened by
/// `lead` bytes on the left, in order and disjoint: where a pattern whose matches hold only
/// such bytes (and an anchor) can match, so it need not read the rest. Runs end only at
/// ASCII bytes, so they fall on character boundaries.
pub fn runs_around(
    bytes: &[u8],
    anchors: &mut dyn Iterator<Item = usize>,
    inside: fn(u8) -> bool,
    lead: usize,
) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut covered = 0;
    for a in anchors {
        if a < covered {
            continue;
        }
        let mut lo = a;
        while lo > 0 && inside(bytes[lo - 1]) {
            lo -= 1;
        }
        // INVARIANT: `inside` must take all non-ASCII bytes or none; then a run stops at an
        // ASCII byte, and the lead byte is ASCII.
        let lo = lo.saturating_sub(lead);
        let mut hi = a + 1;
        while hi < bytes.len() && inside(bytes[hi]) {
            hi += 1;
        }
        covered = hi;
        match out.last_mut() {
            Some(last) if lo <= last.end => last.end = hi,
            _ => out.push(lo..hi),
        }
    }
    out
}

/// Bytes a URL can hold: anything but ASCII whitespace (a superset, so a run of them holds
/// every match).
pub fn is_url_byte(b: u8) -> bool {
    !b.is_ascii_whitespace()
}

/// Bytes a file path can hold besides the delimiter before it: word characters (any
/// non-ASCII byte, as `\w` reads Unicode), the punctuation of Unix and Windows paths and
/// globs, and the space a Windows path may contain. Both path patterns (flow values, risk
/// resources) hold only these, so a run of them around a slash holds every match.
pub fn is_path_byte(b: u8) -> bool {
    !b.is_ascii()
        || b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'_' | b'.' | b'@' | b'%' | b'+' | b'-' | b'*' | b'/' | b'~' | b'\\' | b':' | b' '
        )
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex from a table: a trace id is written on every traced call, and the
/// formatting machinery behind `to_string` costs several times more. The digits are
/// written into a buffer of the final size and become a `String` once: pushing them one
/// at a time took about 450 instructions for a trace id.
pub fn lower_hex(bytes: &[u8]) -> String {
    let mut hex = vec![0; bytes.len() * 2];
    hex_digits(bytes, &mut hex);
    // Every byte is an ASCII hex digit, so the conversion never fails.
    String::from_utf8(hex).unwrap_or_default()
}

/// The two hex digits of every byte value: one load per byte instead of two lookups and
/// two shifts.
const HEX_PAIRS: [[u8; 2]; 256] = {
    let mut t = [[0; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [HEX[i >> 4], HEX[i & 15]];
        i += 1;
    }
    t
};

/// Two lowercase hex digits per byte of `bytes` into `out`, as far as `out` reaches.
pub fn hex_digits(bytes: &[u8], out: &mut [u8]) {
    for (pair, &b) in out.chunks_exact_mut(2).zip(bytes) {
        pair.copy_from_slice(&HEX_PAIRS[usize::from(b)]);
    }
}

/// Decodes base64, standard or URL-safe alphabet, without padding, up to the first byte
/// outside the alphabet. Returns the bytes and how many input bytes were read, so a caller
/// can take a prefix (a blob inside text) or insist on the whole run.
pub fn decode_base64_prefix(run: &[u8]) -> (Vec<u8>, usize) {
    let mut out = Vec::with_capacity(run.len() / 4 * 3 + 2);
    let (mut acc, mut bits) = (0u32, 0u32);
    for (i, &b) in run.iter().enumerate() {
        let value = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return (out, i),
        };
        acc = (acc << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    (out, run.len())
}

/// Whether `b` holds an ASCII capital. Read 64 bytes at a time without an early exit inside
/// a block, so the compiler can use SIMD: the byte loop with an exit at the first capital
/// cost more than the searches it decides on, on text that has none.
pub fn has_ascii_uppercase(b: &[u8]) -> bool {
    b.chunks(64).any(|block| {
        block
            .iter()
            .fold(false, |up, c| up | c.is_ascii_uppercase())
    })
}

/// Whether any of a few words occurs in a text: a screen to run before a search that starts
/// at those words. An automaton walks its table a byte at a time (about 2 ns a byte
/// here, whatever the words); the SIMD searcher reads a kilobyte of ordinary text in about a
/// tenth of that time, so text without the words pays little.
pub struct AnyWord {
    simd: Option<aho_corasick::packed::Searcher>,
    automaton: Option<aho_corasick::AhoCorasick>,
}

impl AnyWord {
    pub fn new(words: &[&str]) -> AnyWord {
        AnyWord::with(words, true)
    }

    /// `simd: false` builds the automaton, as on a CPU without a SIMD searcher.
    fn with(words: &[&str], simd: bool) -> AnyWord {
        let simd = if simd {
            aho_corasick::packed::Searcher::new(words.iter().copied())
        } else {
            None
        };
        // Only where the CPU has no SIMD searcher.
        let automaton = match simd {
            Some(_) => None,
            None => aho_corasick::AhoCorasick::new(words).ok(),
        };
        AnyWord { simd, automaton }
    }

    /// True also when neither searcher could be built: the caller then runs its own search.
    pub fn in_text(&self, b: &[u8]) -> bool {
        match (&self.simd, &self.automaton) {
            (Some(s), _) => s.find(b).is_some(),
            (None, Some(a)) => a.is_match(b),
            (None, None) => true,
        }
    }

    /// As `in_text`, with ASCII case ignored (the words are lowercase).
    pub fn in_text_any_case(&self, b: &[u8]) -> bool {
        if has_ascii_uppercase(b) {
            self.in_text(&b.to_ascii_lowercase())
        } else {
            self.in_text(b)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AnyWord, head};

    #[test]
    fn head_cuts_on_a_char_boundary() {
        assert_eq!(head("abc", 5), "abc");
        assert_eq!(head("abc", 2), "ab");
        // `é` is two bytes: cutting inside it backs off to before it.
        assert_eq!(head("aé", 2), "a");
        assert_eq!(head("", 0), "");
    }

    #[test]
    fn a_word_is_found_in_any_case_and_anywhere_by_either_searcher() {
        let words = ["drop", "delete", "select"];
        for simd in [true, false] {
            let w = AnyWord::with(&words, simd);
            for yes in ["drop", "x DROP TABLE t", "sElEcT 1", "-- then delete"] {
                assert!(w.in_text_any_case(yes.as_bytes()), "{yes} ({simd})");
            }
            assert!(!w.in_text(b"DROP TABLE t"), "in_text is case-sensitive");
            for no in ["", "dro", "cargo test --package billing", "DR0P"] {
                assert!(!w.in_text_any_case(no.as_bytes()), "{no} ({simd})");
            }
        }
    }
}
