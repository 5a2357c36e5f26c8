//! The screen for numeric PII (phone, card, national id and IBAN patterns): finds the runs of
//! digits that such a pattern could match, so their regexes run only around those runs.
//!
//! A run is ASCII digits joined by at most two separator bytes (`415-555-0100`,
//! `4111 1111 1111 1111`). Text is classified 64 bytes at a time into bit masks (digits,
//! separators, capitals) and only the stretches of digits and separators that are long enough
//! to hold a run of the wanted size are walked byte by byte. Logs and JSON are full of short
//! numbers (dates, times, counters): they are skipped with a few mask operations per block
//! instead of a walk over every digit.

/// Bytes classified per step: one bit per byte in a `u64`.
const BLOCK: usize = 64;

/// Calls `f(start, end, digits)` for every run of ASCII digits joined by at most two
/// separator bytes, when the run holds at least `min` digits or starts right after two ASCII
/// capitals (an IBAN's country code). `start`..`end` spans the first to the last digit.
pub fn for_each_digit_run(bytes: &[u8], min: usize, mut f: impl FnMut(usize, usize, usize)) {
    // A run with `min` digits spans at least `min` bytes of digits and separators. Stretches
    // are found within two blocks, so longer minimums are screened at 64 bytes.
    let stretch = min.clamp(1, BLOCK);
    let steps = doubling_steps(stretch);
    // Bytes before this offset have been walked (or lie in a stretch that was).
    let mut walked = 0usize;
    // Digits and separators at the end of the previous block, and its capitals.
    let mut run_in = 0usize;
    let mut prev_upper = 0u64;
    let mut at = 0;
    while at < bytes.len() {
        let masks = match bytes.get(at..at + BLOCK) {
            Some(full) => classify(block_of(full)),
            None => {
                // Past the end reads as zero bytes, which are none of the three classes.
                let mut tail = [0u8; BLOCK];
                tail[..bytes.len() - at].copy_from_slice(&bytes[at..]);
                classify(&tail)
            }
        };
        let joined = masks.digit | masks.sep;
        let long_ends = stretch_ends(joined, run_in, stretch, &steps);
        // A digit right after two capitals starts an IBAN-shaped run of any length.
        let upper = wide(masks.upper, prev_upper);
        let country = (u128::from(masks.digit) << BLOCK) & (upper << 1) & (upper << 2);
        let mut candidates = long_ends | (country >> BLOCK) as u64;
        // Bits of stretches already walked are dropped as a whole.
        candidates &= !low_bits(walked.saturating_sub(at));
        while candidates != 0 {
            let bit = candidates.trailing_zeros() as usize;
            let p = at + bit;
            // Candidates come in order and walked stretches are dropped, so an end bit is
            // its stretch's first: the stretch starts `stretch` bytes back, after a byte that
            // is neither digit nor separator. An IBAN start begins its stretch.
            let lo = if long_ends >> bit & 1 == 1 {
                p + 1 - stretch
            } else {
                p
            };
            // The stretch ends at the first byte after `p` outside it: in this block, read
            // off the masks; past it (a stretch longer than the block), byte by byte.
            let outside = !joined & !low_bits(bit + 1);
            let (hi, digits) = if outside != 0 && lo >= at {
                let hi = at + outside.trailing_zeros() as usize;
                let span = low_bits(hi - at) & !low_bits(lo - at);
                (hi, (masks.digit & span).count_ones() as usize)
            } else {
                let hi = stretch_end(bytes, p + 1);
                (
                    hi,
                    bytes[lo..hi].iter().filter(|b| b.is_ascii_digit()).count(),
                )
            };
            let after_capitals = lo >= 2
                && bytes[lo].is_ascii_digit()
                && bytes[lo - 2].is_ascii_uppercase()
                && bytes[lo - 1].is_ascii_uppercase();
            if digits >= min || after_capitals {
                walk_runs(bytes, lo, hi, min, &mut f);
            }
            walked = hi;
            candidates &= !low_bits(walked - at);
        }
        // Digits and separators that run up to the block's end carry into the next one.
        run_in = if joined == u64::MAX {
            run_in.saturating_add(BLOCK)
        } else {
            joined.leading_ones() as usize
        };
        prev_upper = masks.upper;
        at += BLOCK;
    }
}

/// Bit masks of one block: bit i describes byte i.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Masks {
    digit: u64,
    sep: u64,
    upper: u64,
}

fn is_run_separator(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'-' | b'.' | b'(' | b')' | b'/')
}

fn in_stretch(b: u8) -> bool {
    b.is_ascii_digit() || is_run_separator(b)
}

fn block_of(s: &[u8]) -> &[u8; BLOCK] {
    // `s` has exactly BLOCK bytes; the fallback never runs.
    s.try_into().unwrap_or(&[0; BLOCK])
}

/// The current block's mask above the previous one's, so shifts carry across the edge.
#[inline]
fn wide(cur: u64, prev: u64) -> u128 {
    (u128::from(cur) << BLOCK) | u128::from(prev)
}

/// Bits `0..n` set (all bits from 64 on).
#[inline]
fn low_bits(n: usize) -> u64 {
    if n >= BLOCK {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Shift amounts that turn a mask into the ends of stretches of `k` (1..=64) set bits by
/// doubling: after shifts s1..si, bit p is set when bits p-(1+s1+..+si)+1..=p all are.
/// Unused steps are 0 (a no-op), so the loop below is six fixed steps.
fn doubling_steps(k: usize) -> [u32; 6] {
    let mut steps = [0; 6];
    let mut have = 1;
    for s in &mut steps {
        let step = k.saturating_sub(have).min(have);
        *s = step as u32;
        have += step;
    }
    steps
}

/// Bits of a block where a stretch of at least `k` set bits ends, counting the `run_in`
/// set bits that continue from the end of the previous block.
#[inline]
fn stretch_ends(cur: u64, run_in: usize, k: usize, steps: &[u32; 6]) -> u64 {
    let mut y = cur;
    for &s in steps {
        y &= y << s;
    }
    // Stretches that began in earlier blocks: the first `lead` bits are set, and bit p ends
    // a long enough stretch once run_in + p + 1 >= k.
    let lead = cur.trailing_ones() as usize;
    if run_in > 0 && run_in + lead >= k {
        let first = k.saturating_sub(run_in + 1);
        y |= low_bits(lead) & !low_bits(first);
    }
    y
}

/// The first byte at or after `from` that is neither a digit nor a separator.
fn stretch_end(bytes: &[u8], mut from: usize) -> usize {
    while from < bytes.len() && in_stretch(bytes[from]) {
        from += 1;
    }
    from
}

/// Walks the runs inside `lo..hi`, a stretch that starts after a byte that is neither digit
/// nor separator, so no run continues into it from before.
fn walk_runs(
    bytes: &[u8],
    lo: usize,
    hi: usize,
    min: usize,
    f: &mut impl FnMut(usize, usize, usize),
) {
    let mut i = lo;
    while i < hi {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        let mut digits = 0;
        let mut end;
        loop {
            while i < hi && bytes[i].is_ascii_digit() {
                digits += 1;
                i += 1;
            }
            end = i;
            let mut j = i;
            while j < hi && j - i < 2 && is_run_separator(bytes[j]) {
                j += 1;
            }
            if j > i && j < hi && bytes[j].is_ascii_digit() {
                i = j;
            } else {
                break;
            }
        }
        let country_code = start >= 2
            && bytes[start - 2].is_ascii_uppercase()
            && bytes[start - 1].is_ascii_uppercase();
        if digits >= min || country_code {
            f(start, end, digits);
        }
        i = end.max(start + 1);
    }
}

/// SSE2 is part of every x86-64 CPU: 16 bytes per compare.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn classify(block: &[u8; BLOCK]) -> Masks {
    use safe_arch::{
        bitand_m128i, bitor_m128i, cmp_eq_mask_i8_m128i, load_unaligned_m128i, min_u8_m128i,
        move_mask_i8_m128i, set_splat_i8_m128i, sub_i8_m128i,
    };
    let splat = |b: u8| set_splat_i8_m128i(b as i8);
    let mut m = Masks::default();
    for (k, chunk) in block.chunks_exact(16).enumerate() {
        let x = load_unaligned_m128i(chunk.try_into().unwrap_or(&[0; 16]));
        // Unsigned range checks: b - lo <= hi - lo, as min(b - lo, hi - lo) == b - lo.
        let in_range = |lo: u8, hi: u8| {
            let t = sub_i8_m128i(x, splat(lo));
            cmp_eq_mask_i8_m128i(min_u8_m128i(t, splat(hi - lo)), t)
        };
        let eq = |b: u8| cmp_eq_mask_i8_m128i(x, splat(b));
        // `(`/`)` are 0x28/0x29 and `.`/`/` are 0x2E/0x2F: one compare each with the low bit
        // cleared.
        let pair = bitand_m128i(x, splat(0xFE));
        let pair_eq = |b: u8| cmp_eq_mask_i8_m128i(pair, splat(b));
        let sep = bitor_m128i(
            bitor_m128i(eq(b' '), eq(b'\t')),
            bitor_m128i(bitor_m128i(pair_eq(b'('), pair_eq(b'.')), eq(b'-')),
        );
        let bits = |v| u64::from(move_mask_i8_m128i(v) as u16) << (16 * k);
        m.digit |= bits(in_range(b'0', b'9'));
        m.sep |= bits(sep);
        m.upper |= bits(in_range(b'A', b'Z'));
    }
    m
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
fn classify(block: &[u8; BLOCK]) -> Masks {
    classify_scalar(block)
}

#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn classify_scalar(block: &[u8; BLOCK]) -> Masks {
    let mut m = Masks::default();
    for (i, &b) in block.iter().enumerate() {
        m.digit |= u64::from(b.is_ascii_digit()) << i;
        m.sep |= u64::from(is_run_separator(b)) << i;
        m.upper |= u64::from(b.is_ascii_uppercase()) << i;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn runs(s: &[u8], min: usize) -> Vec<(usize, usize, usize)> {
        let mut v = Vec::new();
        for_each_digit_run(s, min, |a, b, d| v.push((a, b, d)));
        v
    }

    /// The unscreened walk over the whole text: what the screen must reproduce exactly.
    fn plain(s: &[u8], min: usize) -> Vec<(usize, usize, usize)> {
        let mut v = Vec::new();
        walk_runs(s, 0, s.len(), min, &mut |a, b, d| v.push((a, b, d)));
        v
    }

    #[test]
    fn digit_runs_join_short_separators() {
        assert_eq!(runs(b"call (415) 555-0100 now", 8), vec![(6, 19, 10)]);
        assert_eq!(runs(b"card 4111 1111 1111 1111.", 13), vec![(5, 24, 16)]);
        // A date is 8 digits; a version string is short runs.
        assert_eq!(runs(b"on 2026-11-21 v1.2.3", 9), vec![]);
        assert_eq!(runs(b"12 -- 34", 1), vec![(0, 2, 2), (6, 8, 2)]);
        // IBAN-shaped starts are reported even when short.
        assert_eq!(runs(b"x GB82 WEST", 9), vec![(4, 6, 2)]);
    }

    #[test]
    fn runs_across_block_edges_are_found_whole() {
        for pad in 50..70 {
            let mut t = vec![b'x'; pad];
            t.extend_from_slice(b" 4111 1111 1111 1111 and GB82 more");
            let got = runs(&t, 13);
            assert_eq!(got, plain(&t, 13), "pad {pad}");
            assert_eq!(got[0], (pad + 1, pad + 20, 16), "pad {pad}");
        }
        // A stretch longer than a block, with the run at its far end.
        let mut t = vec![b' '; 130];
        t.extend_from_slice(b"123456789");
        assert_eq!(runs(&t, 9), vec![(130, 139, 9)]);
    }

    #[test]
    fn the_simd_masks_match_the_scalar_ones() {
        let all: Vec<u8> = (0u8..=255).collect();
        for chunk in all.chunks(BLOCK) {
            let block = block_of(chunk);
            assert_eq!(classify(block), classify_scalar(block));
        }
    }

    #[test]
    fn stretch_ends_count_bits_from_the_previous_block() {
        // Four set bits at the end of the previous block and three at the start of this one.
        let ends = |cur, run_in, k| stretch_ends(cur, run_in, k, &doubling_steps(k));
        assert_eq!(ends(0b111, 4, 7), 0b100);
        assert_eq!(ends(0b111, 4, 8), 0);
        assert_eq!(ends(0b111, 100, 8), 0b111);
        assert_eq!(ends(u64::MAX, 0, 64), 1 << 63);
        assert_eq!(ends(0b1011, 0, 2), 0b10);
        for k in 1..=64 {
            assert_eq!(
                doubling_steps(k).iter().sum::<u32>() + 1,
                k as u32,
                "k = {k}"
            );
        }
    }

    proptest! {
        /// Texts drawn from digits, separators, capitals and other bytes, so runs, dates and
        /// IBAN shapes are common and cross block edges.
        #[test]
        fn the_screen_reports_what_a_plain_walk_does(
            text in proptest::collection::vec(
                prop_oneof![
                    4 => b'0'..=b'9',
                    2 => proptest::sample::select(vec![b' ', b'\t', b'-', b'.', b'(', b')', b'/']),
                    1 => b'A'..=b'Z',
                    1 => any::<u8>(),
                ],
                0..400,
            ),
            min in 1usize..80,
        ) {
            prop_assert_eq!(runs(&text, min), plain(&text, min));
        }
    }
}
