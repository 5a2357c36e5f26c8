//! One session's provenance: which values arrived in untrusted content (and from which
//! event), which the user gave, and whether private data, untrusted content or an
//! injection signal has been seen. Every part is bounded; a part that fills up says so, and
//! the flow stage then treats what it can no longer tell apart as untrusted.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use super::values::{ValueKey, ValueKind};
use crate::event::EventKind;

/// Sources (events that brought untrusted values) remembered by name.
pub const MAX_SOURCES: usize = 32;
/// Tool names and step ids are kept this long at most.
const MAX_NAME_BYTES: usize = 96;

/// An event that brought untrusted content into the session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Source {
    /// The session's event number (1 for its first event).
    pub seq: u32,
    pub event: EventKind,
    // Boxed: a record holds up to `MAX_SOURCES` of these per session, and a box is 8 bytes
    // smaller than a string's capacity-carrying header.
    pub tool: Box<str>,
    pub step: Box<str>,
}

impl Source {
    pub fn new(seq: u32, event: EventKind, tool: &str, step: &str) -> Source {
        Source {
            seq,
            event,
            tool: crate::text::head(tool, MAX_NAME_BYTES).into(),
            step: crate::text::head(step, MAX_NAME_BYTES).into(),
        }
    }

    /// `the tool_call_result of `web.fetch` (step `s3`, event 4)`.
    pub fn describe(&self) -> String {
        let what = if self.tool.is_empty() {
            format!("the {}", self.event.as_str())
        } else {
            format!("the {} of `{}`", self.event.as_str(), self.tool)
        };
        if self.seq == 0 {
            // A late verdict: the event's number in the session is not known here.
            if self.step.is_empty() {
                what
            } else {
                format!("{what} (step `{}`)", self.step)
            }
        } else if self.step.is_empty() {
            format!("{what} (event {})", self.seq)
        } else {
            format!("{what} (step `{}`, event {})", self.step, self.seq)
        }
    }
}

/// Where a value stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// The user gave it (task goal, user message).
    Trusted,
    /// It arrived only in untrusted content; the source when still remembered.
    Untrusted(Option<Source>),
    /// Never seen, while the record is complete.
    Unseen,
    /// Never seen, but untrusted values were dropped for room: it may have been one.
    Unknown,
}

/// Value keys are already keyed hashes (SipHash under a key drawn at start-up), so the
/// tables use them as they are: no second hash, and no per-table random state (16 bytes on
/// each of a session's three tables).
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyHash(u64);

impl Hasher for KeyHash {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    // Only `ValueKey`s (u64) are hashed with it; other input is folded in all the same.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
}

type KeyMap<V> = HashMap<ValueKey, V, BuildHasherDefault<KeyHash>>;
type KeySet = HashSet<ValueKey, BuildHasherDefault<KeyHash>>;

/// The per-session record. Serializable so replicas can share it (`session::shared`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    /// Events of the session seen so far. Not in the shared record: the shared store counts
    /// events itself, so a record that only counted one more event is not written again.
    #[serde(skip)]
    pub seq: u32,
    #[serde(serialize_with = "sorted_map")]
    untrusted: KeyMap<(u32, ValueKind)>,
    #[serde(serialize_with = "sorted_set")]
    trusted: KeySet,
    /// Words of user messages, kept apart so a chatty user cannot crowd out the addresses
    /// and accounts they gave.
    #[serde(serialize_with = "sorted_set")]
    trusted_words: KeySet,
    /// Set when an untrusted value was not recorded for room.
    untrusted_overflow: bool,
    sources: VecDeque<Source>,
    /// The last time each signal was seen.
    pub untrusted_seen: Option<Source>,
    pub private_read: Option<Source>,
    pub injection: Option<Source>,
    /// Per pack flow rule (by index): the last event its `from` matched.
    flow_marks: Vec<Option<Source>>,
    /// A hash of the task goal last read for trusted values, so an unchanged goal is not
    /// read again on every event.
    goal_hash: u64,
}

/// Tables written in key order: the same record always makes the same bytes, so the shared
/// store can tell an unchanged record from a changed one.
fn sorted_map<S: serde::Serializer>(m: &KeyMap<(u32, ValueKind)>, s: S) -> Result<S::Ok, S::Error> {
    let sorted: std::collections::BTreeMap<_, _> = m.iter().collect();
    serde::Serialize::serialize(&sorted, s)
}

fn sorted_set<S: serde::Serializer>(set: &KeySet, s: S) -> Result<S::Ok, S::Error> {
    let mut v: Vec<_> = set.iter().collect();
    v.sort_unstable();
    serde::Serialize::serialize(&v, s)
}

impl Provenance {
    /// Counts one more event and returns its number.
    pub fn next_event(&mut self) -> u32 {
        self.seq = self.seq.saturating_add(1);
        self.seq
    }

    /// True when `goal_hash` differs from the goal already read (and remembers it).
    pub fn goal_changed(&mut self, goal_hash: u64) -> bool {
        let changed = self.goal_hash != goal_hash;
        self.goal_hash = goal_hash;
        changed
    }

    pub fn add_trusted(&mut self, key: ValueKey, cap: usize) {
        // A full trusted set only costs the user a question: later values stay untrusted
        // or unseen, never trusted by mistake.
        if self.trusted.len() < cap {
            self.trusted.insert(key);
        }
    }

    /// Records untrusted values from one source.
    pub fn add_untrusted(
        &mut self,
        source: Source,
        keys: &[(ValueKey, ValueKind)],
        truncated: bool,
        cap: usize,
    ) {
        self.untrusted_overflow |= truncated;
        for &(k, kind) in keys {
            if self.untrusted.len() >= cap && !self.untrusted.contains_key(&k) {
                self.untrusted_overflow = true;
                break;
            }
            self.untrusted.insert(k, (source.seq, kind));
        }
        if self.sources.len() >= MAX_SOURCES {
            self.sources.pop_front();
        }
        self.untrusted_seen = Some(source.clone());
        // Most sessions see a source or two: grow one at a time while the ring is small
        // instead of to the usual first step of four.
        if self.sources.len() == self.sources.capacity() && self.sources.len() < 4 {
            self.sources.reserve_exact(1);
        }
        self.sources.push_back(source);
    }

    pub fn add_trusted_word(&mut self, key: ValueKey, cap: usize) {
        if self.trusted_words.len() < cap {
            self.trusted_words.insert(key);
        }
    }

    pub fn standing(&self, key: ValueKey) -> Standing {
        if self.trusted.contains(&key) || self.trusted_words.contains(&key) {
            return Standing::Trusted;
        }
        if let Some((seq, _)) = self.untrusted.get(&key) {
            let src = self.sources.iter().find(|s| s.seq == *seq).cloned();
            return Standing::Untrusted(src);
        }
        if self.untrusted_overflow {
            Standing::Unknown
        } else {
            Standing::Unseen
        }
    }

    pub fn mark_flow(&mut self, rule: usize, rules: usize, source: Source) {
        if self.flow_marks.len() < rules {
            self.flow_marks.resize(rules, None);
        }
        if let Some(m) = self.flow_marks.get_mut(rule) {
            *m = Some(source);
        }
    }

    pub fn flow_mark(&self, rule: usize) -> Option<&Source> {
        self.flow_marks.get(rule).and_then(Option::as_ref)
    }

    pub fn untrusted_values(&self) -> usize {
        self.untrusted.len()
    }

    pub fn trusted_values(&self) -> usize {
        self.trusted.len() + self.trusted_words.len()
    }

    /// Some untrusted value could not be kept.
    pub fn incomplete(&self) -> bool {
        self.untrusted_overflow
    }

    /// Heap bytes held, for the memory figure in the docs: table slots at their capacity,
    /// plus the names kept.
    pub fn heap_bytes(&self) -> usize {
        let names = |s: &Source| s.tool.len() + s.step.len();
        let signals = [&self.untrusted_seen, &self.private_read, &self.injection]
            .into_iter()
            .flatten()
            .map(names)
            .sum::<usize>();
        // hashbrown: one control byte per slot plus the entry.
        self.untrusted.capacity() * (1 + std::mem::size_of::<(ValueKey, (u32, ValueKind))>())
            + (self.trusted.capacity() + self.trusted_words.capacity())
                * (1 + std::mem::size_of::<ValueKey>())
            + self.sources.capacity() * std::mem::size_of::<Source>()
            + self.sources.iter().map(names).sum::<usize>()
            + self.flow_marks.capacity() * std::mem::size_of::<Option<Source>>()
            + self.flow_marks.iter().flatten().map(names).sum::<usize>()
            + signals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(seq: u32) -> Source {
        Source::new(seq, EventKind::ToolCallResult, "web.fetch", "s1")
    }

    #[test]
    fn trusted_wins_over_untrusted() {
        let mut p = Provenance::default();
        p.add_untrusted(src(1), &[(7, ValueKind::Email)], false, 10);
        assert!(matches!(p.standing(7), Standing::Untrusted(Some(_))));
        p.add_trusted(7, 10);
        assert_eq!(p.standing(7), Standing::Trusted);
        assert_eq!(p.standing(8), Standing::Unseen);
    }

    #[test]
    fn a_full_record_turns_unseen_into_unknown() {
        let mut p = Provenance::default();
        let keys: Vec<_> = (0..5).map(|k| (k, ValueKind::Email)).collect();
        p.add_untrusted(src(1), &keys, false, 3);
        assert_eq!(p.standing(99), Standing::Unknown);
        // What was recorded is still known by source.
        assert!(matches!(p.standing(0), Standing::Untrusted(Some(s)) if s.seq == 1));
    }

    #[test]
    fn forgotten_sources_still_leave_the_value_untrusted() {
        let mut p = Provenance::default();
        p.add_untrusted(src(1), &[(1, ValueKind::Host)], false, 100);
        for i in 2..(MAX_SOURCES as u32 + 5) {
            p.add_untrusted(src(i), &[], false, 100);
        }
        assert_eq!(p.standing(1), Standing::Untrusted(None));
    }
}
