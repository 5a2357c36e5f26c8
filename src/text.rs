//! Small text helpers shared by every part that bounds what it keeps or sends.

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

#[cfg(test)]
mod tests {
    use super::head;

    #[test]
    fn head_cuts_on_a_char_boundary() {
        assert_eq!(head("abc", 5), "abc");
        assert_eq!(head("abc", 2), "ab");
        // `é` is two bytes: cutting inside it backs off to before it.
        assert_eq!(head("aé", 2), "a");
        assert_eq!(head("", 0), "");
    }
}
