//! Tool names that impersonate others: `shеll.exec` with a Cyrillic `е`, fullwidth or
//! mathematical letters, zero-width characters and bidi overrides. Such a name reads as a
//! guarded tool to a person and to a policy written in ASCII, yet matches none of its globs.
//! `skeleton` gives the name it imitates, so deny lists still apply; `is_spoofed` says a name
//! is built to imitate one.

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization;

use crate::event::is_invisible;

/// Letters of other scripts drawn the same as an ASCII letter in common fonts (a subset of
/// Unicode's confusables for Latin: Cyrillic, Greek, Armenian and a few Latin extensions).
const CONFUSABLES: &[(char, char)] = &[
    // Cyrillic lower case.
    ('а', 'a'),
    ('е', 'e'),
    ('ё', 'e'),
    ('һ', 'h'),
    ('і', 'i'),
    ('ї', 'i'),
    ('ј', 'j'),
    ('ӏ', 'l'),
    ('о', 'o'),
    ('р', 'p'),
    ('ԛ', 'q'),
    ('г', 'r'),
    ('ѕ', 's'),
    ('у', 'y'),
    ('ԝ', 'w'),
    ('х', 'x'),
    ('с', 'c'),
    ('ԁ', 'd'),
    ('ɡ', 'g'),
    // Cyrillic upper case.
    ('А', 'A'),
    ('В', 'B'),
    ('Е', 'E'),
    ('Н', 'H'),
    ('І', 'I'),
    ('Ј', 'J'),
    ('К', 'K'),
    ('М', 'M'),
    ('О', 'O'),
    ('Р', 'P'),
    ('С', 'C'),
    ('Ѕ', 'S'),
    ('Т', 'T'),
    ('Х', 'X'),
    ('У', 'Y'),
    ('Ԛ', 'Q'),
    ('Ԝ', 'W'),
    // Greek.
    ('α', 'a'),
    ('ο', 'o'),
    ('ρ', 'p'),
    ('ν', 'v'),
    ('ι', 'i'),
    ('κ', 'k'),
    ('υ', 'u'),
    ('χ', 'x'),
    ('Α', 'A'),
    ('Β', 'B'),
    ('Ε', 'E'),
    ('Ζ', 'Z'),
    ('Η', 'H'),
    ('Ι', 'I'),
    ('Κ', 'K'),
    ('Μ', 'M'),
    ('Ν', 'N'),
    ('Ο', 'O'),
    ('Ρ', 'P'),
    ('Τ', 'T'),
    ('Υ', 'Y'),
    ('Χ', 'X'),
    // Armenian.
    ('օ', 'o'),
    ('ս', 'u'),
    ('ո', 'n'),
    ('հ', 'h'),
    // Latin letters that pass for others.
    ('ı', 'i'),
    ('ȷ', 'j'),
    ('ℓ', 'l'),
];

fn confusable(c: char) -> Option<char> {
    CONFUSABLES.iter().find(|(k, _)| *k == c).map(|(_, v)| *v)
}

/// The ASCII-looking name a tool name imitates: invisible and bidi characters removed,
/// compatibility forms folded (fullwidth, mathematical letters), and look-alike letters of
/// other scripts replaced by the Latin letter they imitate. ASCII names are returned as they
/// are, without work.
pub fn skeleton(name: &str) -> Cow<'_, str> {
    if name.is_ascii() {
        return Cow::Borrowed(name);
    }
    let folded: String = name.chars().filter(|c| !is_invisible(*c)).nfkc().collect();
    Cow::Owned(folded.chars().map(|c| confusable(c).unwrap_or(c)).collect())
}

/// True for a name built to pass for another: it holds invisible or bidi control
/// characters, or its skeleton is all ASCII while the name is not, and the name is more than
/// a word of one other script (`сахар` is a Russian word that happens to be all look-alike
/// letters; `ѕһеӏӏ.ехес` imitates a dotted tool name, `shеll` mixes in Latin letters).
pub fn is_spoofed(name: &str) -> bool {
    if name.is_ascii() {
        return false;
    }
    if name.chars().any(is_invisible) {
        return true;
    }
    let sk = skeleton(name);
    if !sk.is_ascii() {
        return false;
    }
    let folded_to_ascii = name.chars().nfkc().collect::<String>().is_ascii();
    let has_ascii = name
        .chars()
        .any(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | ':'));
    folded_to_ascii || has_ascii
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn look_alike_names_are_spoofed() {
        for name in [
            "sh\u{435}ll.exec",                                                 // Cyrillic е
            "\u{455}\u{4bb}\u{435}\u{4cf}\u{4cf}.\u{435}\u{445}\u{435}\u{441}", // all Cyrillic
            "\u{ff53}\u{ff48}\u{ff45}\u{ff4c}\u{ff4c}.exec",                    // fullwidth
            "em\u{3b1}il.send",                                                 // Greek alpha
            "shell.exec\u{202e}",                                               // bidi override
            "shell\u{200b}.exec",                                               // zero-width space
            "\u{1d42c}\u{1d421}\u{1d41e}\u{1d425}\u{1d425}.exec",               // mathematical bold
        ] {
            assert!(is_spoofed(name), "{name:?}");
        }
        assert_eq!(skeleton("sh\u{435}ll.exec"), "shell.exec");
        assert_eq!(
            skeleton("\u{ff53}\u{ff48}\u{ff45}\u{ff4c}\u{ff4c}.exec"),
            "shell.exec"
        );
        assert_eq!(skeleton("p\u{430}yments.refund_all"), "payments.refund_all");
    }

    #[test]
    fn names_in_other_scripts_are_not_spoofed() {
        for name in [
            "shell.exec",
            "\u{43f}\u{43e}\u{438}\u{441}\u{43a}.\u{444}\u{430}\u{439}\u{43b}\u{43e}\u{432}", // Russian
            "\u{3b1}\u{3bd}\u{3b1}\u{3b6}\u{3ae}\u{3c4}\u{3b7}\u{3c3}\u{3b7}", // Greek
            "maps.\u{3b1}\u{3bd}\u{3b1}\u{3b6}\u{3ae}\u{3c4}\u{3b7}\u{3c3}\u{3b7}",
            "\u{691c}\u{7d22}.\u{30a6}\u{30a7}\u{30d6}", // Japanese
            "caf\u{e9}.search",
            "\u{1f50d}.search",
            "\u{441}\u{430}\u{445}\u{430}\u{440}", // сахар: a word, all look-alike letters
            "\u{5d7}\u{5d9}\u{5e4}\u{5d5}\u{5e9}", // Hebrew
        ] {
            assert!(!is_spoofed(name), "{name:?}");
        }
    }
}
