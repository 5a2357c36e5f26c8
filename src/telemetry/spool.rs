//! How a decision reaches the decision-log thread: each recording thread appends records
//! to its own spool, and the writer thread swaps each spool that holds records for an
//! empty one.
//!
//! Handing memory to another thread has a price paid on the sending one: every allocation
//! the receiver frees comes back cold, and the sender's allocator must collect it from
//! the receiver first. Measured on the benchmark machine (2026-11-22): boxes of 64 bytes
//! handed over at 0, 1, 5, 10 and 20 per call added 0.05, 0.2, 0.5, 0.85 and 1.3 µs, and
//! the short strings and the arguments text crossing as two allocations through a channel
//! cost about 0.1 µs per call more than copying the same bytes into a buffer the threads
//! pass back and forth. So a record copies its short strings, and its arguments text and
//! output when they are small, into its spool's text; the spool's buffers go to the writer
//! and come back emptied, and nothing is allocated per record in the common case.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::Instant;

use serde_json::Value;

use crate::decision::{Action, Decision};
use crate::event::Event;
use crate::policy::Policy;
use crate::telemetry::per_thread::{Mine, PerThread};
use crate::telemetry::trace::PendingSpan;

/// Records waiting for the writer, shared out among the recording threads; past a
/// thread's share its records are dropped and counted.
pub(super) const QUEUE: usize = 8192;
/// Bytes of text waiting for the writer (about 8192 records of 8 KiB), shared out the same
/// way.
const TEXT_LIMIT: usize = 64 << 20;
/// A thread's share never goes below this many records (and 8 KiB per record), however
/// many threads record.
const MIN_SHARE: usize = 256;
/// Capacity a spool keeps when emptied.
const KEEP_TEXT: usize = 1 << 20;
const KEEP_RECORDS: usize = 1024;
/// Arguments texts and outputs up to this size are copied into the spool; larger ones
/// cross as the string they are, since copying them would cost more than a cold
/// allocation.
const INLINE_MAX: usize = 4096;

/// One thread's records for one log, with the text they point into.
pub(super) struct Spool {
    pub(super) text: String,
    pub(super) records: Vec<Record>,
    /// Bytes of texts too large to copy, carried by the records as their own strings.
    carried: usize,
    /// This spool's share of `QUEUE` and of `TEXT_LIMIT`, so that all threads together
    /// hold about one queue's worth however many there are.
    share: Share,
}

#[derive(Clone, Copy)]
struct Share {
    records: usize,
    bytes: usize,
}

impl Share {
    fn of(threads: usize) -> Share {
        let threads = threads.max(1);
        Share {
            records: (QUEUE / threads).max(MIN_SHARE),
            bytes: (TEXT_LIMIT / threads).max(MIN_SHARE * 8192),
        }
    }
}

impl Default for Spool {
    fn default() -> Spool {
        Spool {
            text: String::new(),
            records: Vec::new(),
            carried: 0,
            share: Share::of(1),
        }
    }
}

impl Spool {
    /// Appends one record; false when the spool is full (the record is dropped).
    fn push(
        &mut self,
        event: Event,
        d: Decision,
        policy: Arc<Policy>,
        at: Instant,
        span: Option<PendingSpan>,
    ) -> bool {
        if self.records.len() >= self.share.records
            || self.text.len() + self.carried > self.share.bytes
        {
            return false;
        }
        let record = Record::new(&mut self.text, event, d, policy, at, span);
        self.carried += record.carried_bytes();
        self.records.push(record);
        true
    }

    /// Empties the spool for reuse. Buffers grown by a burst are given back rather than
    /// kept for the life of the process; a steady stream of a hundred thousand decisions
    /// a second of 1 KiB calls fills about 100 records and 110 KiB per millisecond nap.
    pub(super) fn clear(&mut self) {
        self.text.clear();
        self.records.clear();
        self.carried = 0;
        if self.text.capacity() > KEEP_TEXT {
            self.text.shrink_to(KEEP_TEXT);
        }
        if self.records.capacity() > KEEP_RECORDS {
            self.records.shrink_to(KEEP_RECORDS);
        }
    }
}

/// A text of a record: copied into the spool's text, or carried as its own string.
enum Carried {
    Inline,
    Owned(String),
}

/// What the writer thread needs to build one line and one span; building them there
/// keeps serialization and hashing off the caller's path.
pub(super) struct Record {
    head: Head,
    /// When the decision was made (the call's end).
    at: Instant,
    /// Where the record's copied text starts in its spool's text, and where each of
    /// `FIELDS` ends: session, step, tenant, tool, decision id, trace id, arguments text,
    /// output.
    start: u32,
    ends: [u32; FIELDS],
    /// `arguments_json` as received (`None` when the caller sent no text for a tree).
    arguments_text: Option<Carried>,
    output: Carried,
    policy: Arc<Policy>,
    /// Messages, plan, chunk, an argument tree without its text, and the decision's hits,
    /// redactions and redacted texts; `None` when all are empty.
    rest: Option<Box<Rest>>,
    /// The decision's span, built on the writer thread rather than the request's.
    span: Option<PendingSpan>,
}

const FIELDS: usize = 9;

#[derive(Clone, Copy)]
struct Head {
    kind: crate::event::EventKind,
    is_error: bool,
    action: Action,
    status: crate::decision::Status,
    enforced: bool,
    shadow_action: Option<Action>,
    effects: crate::decision::Effects,
    latency_us: u64,
    rules_evaluated: u32,
    deep_awaited: u32,
    deep_pending: u32,
}

#[derive(Default)]
struct Rest {
    arguments: Option<Value>,
    messages: Vec<crate::event::Message>,
    plan: Vec<crate::event::PlannedAction>,
    chunk: String,
    hits: Vec<crate::decision::RuleHit>,
    redactions: Vec<crate::decision::RedactionSpan>,
    redacted_output: Option<String>,
    redacted_arguments_json: Option<String>,
    redacted_messages: Vec<crate::event::Message>,
    redacted_chunk: Option<String>,
    redacted_plan: Vec<(String, String)>,
}

/// Appends `s` to `text` unless it is too big to copy, then it is carried as itself.
fn carry(text: &mut String, s: String) -> Carried {
    if s.len() <= INLINE_MAX {
        text.push_str(&s);
        Carried::Inline
    } else {
        Carried::Owned(s)
    }
}

/// An offset into a spool's text; the text never reaches 4 GiB (`Share::bytes` is checked
/// before each record, and one record adds at most its short strings and 8 KiB).
fn offset(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

impl Record {
    /// Bytes of the texts this record carries as their own strings.
    fn carried_bytes(&self) -> usize {
        let len = |c: &Carried| match c {
            Carried::Inline => 0,
            Carried::Owned(s) => s.len(),
        };
        self.arguments_text.as_ref().map_or(0, len) + len(&self.output)
    }

    /// Readies a record for the writer thread, appending its text to `text`; runs on the
    /// caller's thread, and everything of `event` and `decision` that does not cross is
    /// freed here.
    fn new(
        text: &mut String,
        mut event: Event,
        mut d: Decision,
        policy: Arc<Policy>,
        at: Instant,
        span: Option<PendingSpan>,
    ) -> Record {
        let start = offset(text);
        let mut ends = [0; FIELDS];
        let short = [
            &event.context.session_id,
            &event.context.step_id,
            &event.context.tenant,
            &event.tool_name,
            &d.decision_id,
            &d.trace_id,
        ];
        for (i, s) in short.into_iter().enumerate() {
            text.push_str(s);
            ends[i] = offset(text);
        }
        let arguments_text = match (&event.arguments, event.arguments_text.take()) {
            // The writer reads the text as received and builds no tree.
            (Some(_), Some(t)) => {
                event.arguments = None;
                Some(carry(text, t))
            }
            _ => None,
        };
        ends[6] = offset(text);
        let output = carry(text, std::mem::take(&mut event.output));
        ends[7] = offset(text);
        text.push_str(&event.context.caller);
        ends[8] = offset(text);
        let head = Head {
            kind: event.kind,
            is_error: event.is_error,
            action: d.action,
            status: d.status,
            enforced: d.enforced,
            shadow_action: d.shadow_action,
            effects: d.effects,
            latency_us: d.latency_us,
            rules_evaluated: d.rules_evaluated,
            deep_awaited: d.deep_awaited,
            deep_pending: d.deep_pending,
        };
        // Most calls have none of the rare parts; they are looked at in place, and a `Rest`
        // is built only when one is there.
        let rare = event.arguments.is_some()
            || !event.messages.is_empty()
            || !event.plan.is_empty()
            || !event.chunk.is_empty()
            || !d.hits.is_empty()
            || !d.redactions.is_empty()
            || d.redacted_output.is_some()
            || d.redacted_arguments_json.is_some()
            || !d.redacted_messages.is_empty()
            || d.redacted_chunk.is_some()
            || !d.redacted_plan.is_empty();
        let rest = rare.then(|| {
            Box::new(Rest {
                arguments: event.arguments.take(),
                messages: std::mem::take(&mut event.messages),
                plan: std::mem::take(&mut event.plan),
                chunk: std::mem::take(&mut event.chunk),
                hits: std::mem::take(&mut d.hits),
                redactions: std::mem::take(&mut d.redactions),
                redacted_output: d.redacted_output.take(),
                redacted_arguments_json: d.redacted_arguments_json.take(),
                redacted_messages: std::mem::take(&mut d.redacted_messages),
                redacted_chunk: d.redacted_chunk.take(),
                redacted_plan: std::mem::take(&mut d.redacted_plan),
            })
        });
        Record {
            head,
            at,
            start,
            ends,
            arguments_text,
            output,
            policy,
            rest,
            span,
        }
    }

    /// The event and decision again, as far as the line and the span read them, from the
    /// record and the text of the spool it was queued in; runs on the writer thread.
    pub(super) fn unpack(self, text: &str) -> Unpacked {
        let mut from = self.start as usize;
        let mut field = |i: usize| {
            let end = self.ends[i] as usize;
            let s = text.get(from..end).unwrap_or_default();
            from = end;
            s
        };
        let h = self.head;
        let rest = self.rest.map(|r| *r).unwrap_or_default();
        let mut event = Event::new(
            h.kind,
            crate::event::Context {
                session_id: field(0).to_string(),
                step_id: field(1).to_string(),
                tenant: field(2).to_string(),
                ..crate::event::Context::default()
            },
        );
        event.tool_name = field(3).to_string();
        let decision_id = field(4).to_string();
        let trace_id = field(5).to_string();
        let inline_arguments = field(6);
        let inline_output = field(7);
        event.context.caller = field(8).to_string();
        let d = Decision {
            action: h.action,
            status: h.status,
            hits: rest.hits,
            redactions: rest.redactions,
            redacted_output: rest.redacted_output,
            redacted_arguments_json: rest.redacted_arguments_json,
            redacted_messages: rest.redacted_messages,
            redacted_chunk: rest.redacted_chunk,
            redacted_plan: rest.redacted_plan,
            retry: None,
            stop: None,
            pause: None,
            risk: None,
            effects: h.effects,
            enforced: h.enforced,
            shadow_action: h.shadow_action,
            decision_id,
            // A decision names the version of the policy that made it.
            policy_version: self.policy.version_tag.clone(),
            latency_us: h.latency_us,
            rules_evaluated: h.rules_evaluated,
            deep_awaited: h.deep_awaited,
            deep_pending: h.deep_pending,
            trace_id,
            caller: String::new(),
        };
        event.is_error = h.is_error;
        // When the text crossed, the line reads it and the tree stays unbuilt.
        event.arguments = rest.arguments;
        event.arguments_text = self.arguments_text.map(|c| match c {
            Carried::Inline => inline_arguments.to_string(),
            Carried::Owned(s) => s,
        });
        event.output = match self.output {
            Carried::Inline => inline_output.to_string(),
            Carried::Owned(s) => s,
        };
        event.messages = rest.messages;
        event.plan = rest.plan;
        event.chunk = rest.chunk;
        (event, d, self.policy, self.at, self.span)
    }
}

/// A record as the writer reads it: event, decision, policy, when it was made, its span.
pub(super) type Unpacked = (Event, Decision, Arc<Policy>, Instant, Option<PendingSpan>);

fn lock(spool: &Mutex<Spool>) -> MutexGuard<'_, Spool> {
    // A panic while holding the lock leaves a spool whose records are whole: go on.
    spool.lock().unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// This thread's spool of each live log.
    static SPOOLS: Mine<Mutex<Spool>> = const { RefCell::new(Vec::new()) };
}

/// Every thread's spool of one log, and how the writer sleeps and is woken.
pub(super) struct Spools {
    all: PerThread<Mutex<Spool>>,
    /// Set by the writer just before it parks; a recording thread that sees it wakes the
    /// writer. Read on every record, written twice per idle period.
    asleep: AtomicBool,
    /// Set when the log closes, or when the writer thread has ended: the writer drains
    /// everything once more and stops, and records are refused from then on.
    pub(super) closed: AtomicBool,
    /// The writer thread, to unpark; set before any record can be pushed.
    pub(super) writer: OnceLock<Thread>,
}

impl Spools {
    pub(super) fn new() -> Spools {
        Spools {
            all: PerThread::new(&SPOOLS),
            asleep: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            writer: OnceLock::new(),
        }
    }

    /// Closes the log: the writer drains what is queued and stops (`write_loop`).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake();
    }

    fn wake(&self) {
        if let Some(w) = self.writer.get() {
            w.unpark();
        }
    }

    /// Queues one record on this thread's spool, waking the writer if it sleeps. Returns
    /// whether it was queued.
    pub(super) fn push(
        &self,
        event: Event,
        d: Decision,
        policy: Arc<Policy>,
        at: Instant,
        span: Option<PendingSpan>,
    ) -> bool {
        // Nothing would write them: refuse (and so count) them rather than keep them.
        if self.closed.load(Ordering::Relaxed) {
            return false;
        }
        // A thread past its thread-locals' teardown has no spool: its record is dropped
        // and counted like one that found its spool full.
        let make = |threads| {
            Mutex::new(Spool {
                share: Share::of(threads),
                ..Spool::default()
            })
        };
        let queued = self
            .all
            .with(make, |spool| lock(spool).push(event, d, policy, at, span))
            .unwrap_or(false);
        // Ordered after the push by the spool's lock; see `park_unless_queued`.
        if queued && self.asleep.load(Ordering::SeqCst) {
            self.wake();
        }
        queued
    }

    /// Hands each spool that has records to `each`, swapped for `spare` (emptied between
    /// spools, so buffers circulate instead of being allocated again). Returns whether
    /// there was any record.
    pub(super) fn drain(&self, spare: &mut Spool, mut each: impl FnMut(&mut Spool)) -> bool {
        let spools = {
            let mut all = self.all.all();
            // A spool only this list holds belongs to a thread that has ended; once
            // empty, it is forgotten.
            all.retain(|s| Arc::strong_count(s) > 1 || !lock(s).records.is_empty());
            all.clone()
        };
        // Each spare goes to a thread with the share the current thread count gives.
        let share = Share::of(spools.len());
        let mut any = false;
        for spool in &spools {
            {
                let mut s = lock(spool);
                if s.records.is_empty() {
                    continue;
                }
                spare.share = share;
                std::mem::swap(&mut *s, spare);
            }
            any = true;
            each(spare);
            spare.clear();
        }
        any
    }

    /// Parks the writer thread unless a record is waiting or the log is closing. A
    /// recording thread pushes under its spool's lock and then reads `asleep`; this sets
    /// `asleep` and then looks at every spool under its lock, so either this sees the
    /// record or that thread sees `asleep` and unparks the writer (an unpark before the
    /// park makes the park return at once).
    pub(super) fn park_unless_queued(&self) {
        self.asleep.store(true, Ordering::SeqCst);
        let waiting = self.all.all().iter().any(|s| !lock(s).records.is_empty());
        if !waiting && !self.closed.load(Ordering::SeqCst) {
            std::thread::park();
        }
        self.asleep.store(false, Ordering::SeqCst);
    }
}

/// A record queued and unpacked again, as the writer sees it (for tests).
#[cfg(test)]
pub(super) fn crossed(
    event: Event,
    d: Decision,
    policy: Arc<Policy>,
    span: Option<PendingSpan>,
) -> Unpacked {
    let mut spool = Spool::default();
    // A spool holds its text before the record's: offsets must not start at 0.
    spool.text.push_str("earlier record");
    assert!(spool.push(event, d, policy, Instant::now(), span));
    let record = spool.records.pop().unwrap();
    record.unpack(&spool.text)
}

/// Asserts that `seen` holds `each` ids `"{t}-{i}"` from each of `threads` threads, each
/// thread's in the order it made them (for tests).
#[cfg(test)]
pub(super) fn assert_each_thread_in_order(seen: &[String], threads: usize, each: usize) {
    assert_eq!(seen.len(), threads * each);
    for t in 0..threads {
        let prefix = format!("{t}-");
        let mine: Vec<&String> = seen.iter().filter(|s| s.starts_with(&prefix)).collect();
        let expected: Vec<String> = (0..each).map(|i| format!("{t}-{i}")).collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{CallMeta, evaluate};
    use crate::event::{Context, EventKind};
    use crate::policy::default_policy;

    fn call(arguments_len: usize) -> Event {
        let mut e = Event::new(
            EventKind::ToolCallStart,
            Context {
                session_id: "s1".into(),
                step_id: "7".into(),
                tenant: "acme".into(),
                ..Context::default()
            },
        );
        e.tool_name = "files.write".into();
        let text =
            serde_json::json!({"path": "a.txt", "body": "x".repeat(arguments_len)}).to_string();
        e.arguments = serde_json::from_str(&text).unwrap();
        e.arguments_text = Some(text);
        e.output = "o".repeat(arguments_len);
        e
    }

    /// Small and large texts both come back as they went in, and only the small ones
    /// are copied into the spool.
    #[test]
    fn texts_cross_copied_when_small_and_moved_when_large() {
        let p = Arc::new(default_policy(None).unwrap());
        for len in [0, 100, INLINE_MAX + 1] {
            let e = call(len);
            let (text, output) = (e.arguments_text.clone(), e.output.clone());
            let d = evaluate(&e, &p, &CallMeta::default());
            let mut spool = Spool::default();
            assert!(spool.push(e, d, p.clone(), Instant::now(), None));
            let copied = spool.text.len();
            let (e2, d2, _, _, _) = spool.records.pop().unwrap().unpack(&spool.text);
            assert_eq!(e2.arguments_text, text);
            assert_eq!(e2.output, output);
            assert!(e2.arguments.is_none(), "the tree stays behind");
            assert_eq!(
                (e2.context.session_id.as_str(), e2.context.tenant.as_str()),
                ("s1", "acme")
            );
            assert!(!d2.decision_id.is_empty());
            assert!(copied <= 2 * INLINE_MAX, "len {len}: {copied} bytes copied");
            assert_eq!(
                copied > 2 * len,
                len <= INLINE_MAX,
                "len {len}: {copied} bytes"
            );
        }
    }

    #[test]
    fn a_full_spool_refuses_records() {
        let p = Arc::new(default_policy(None).unwrap());
        let e = call(10);
        let d = evaluate(&e, &p, &CallMeta::default());
        let mut spool = Spool::default();
        for _ in 0..QUEUE {
            assert!(spool.push(e.clone(), d.clone(), p.clone(), Instant::now(), None));
        }
        assert!(!spool.push(e, d, p, Instant::now(), None));
        assert_eq!(spool.records.len(), QUEUE);
    }

    /// All threads together hold about one queue, and a thread's share counts the large
    /// texts it carries as well as the ones it copied.
    #[test]
    fn threads_share_the_bound() {
        assert_eq!(Share::of(1).records, QUEUE);
        assert_eq!(Share::of(4).records * 4, QUEUE);
        assert_eq!(Share::of(4).bytes * 4, TEXT_LIMIT);
        assert_eq!(
            Share::of(1000).records,
            MIN_SHARE,
            "a floor for many threads"
        );
        let p = Arc::new(default_policy(None).unwrap());
        let e = call(INLINE_MAX + 1);
        let d = evaluate(&e, &p, &CallMeta::default());
        let mut spool = Spool {
            share: Share {
                records: QUEUE,
                bytes: 10 * (2 * INLINE_MAX + 100),
            },
            ..Spool::default()
        };
        let mut n = 0;
        while spool.push(e.clone(), d.clone(), p.clone(), Instant::now(), None) {
            n += 1;
            assert!(n <= 11, "the carried texts are counted");
        }
        assert!(n >= 10, "{n}");
        spool.clear();
        assert!(
            spool.push(e, d, p, Instant::now(), None),
            "room again once drained"
        );
    }

    /// Records pushed from several threads are all drained, each thread's in order, and a
    /// spool whose thread has ended is forgotten once drained.
    #[test]
    fn drain_takes_every_thread_records_in_order() {
        let p = Arc::new(default_policy(None).unwrap());
        let spools = Arc::new(Spools::new());
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let (spools, p) = (spools.clone(), p.clone());
                std::thread::spawn(move || {
                    for i in 0..100 {
                        let mut e = call(10);
                        e.context.step_id = format!("{t}-{i}");
                        let d = evaluate(&e, &p, &CallMeta::default());
                        assert!(spools.push(e, d, p.clone(), Instant::now(), None));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut seen: Vec<String> = Vec::new();
        let mut spare = Spool::default();
        assert!(spools.drain(&mut spare, |s| {
            let text = std::mem::take(&mut s.text);
            for r in s.records.drain(..) {
                seen.push(r.unpack(&text).0.context.step_id);
            }
        }));
        assert_each_thread_in_order(&seen, 3, 100);
        assert!(!spools.drain(&mut spare, |_| ()), "nothing left");
        assert!(
            spools.all.all().is_empty(),
            "the ended threads' spools are forgotten"
        );
    }
}
