//! Guarding streamed text (model output, or a tool's output streamed through the gRPC
//! proxy): text is released chunk by chunk, with a short tail held back so a secret split
//! across chunks is still seen whole before any of it leaves.

use crate::decision::RuleHit;
use crate::decision::{Action, Decision, RedactionSpan, apply_spans};
use crate::engine::{CallMeta, evaluate_with};
use crate::event::{Context, Event, EventKind};
use crate::policy::Policy;

/// Bytes kept back after each chunk. Longer than the fixed-length secrets the catalog knows
/// (tokens and keys are under 200 bytes); a match still growing at the end of the buffer
/// (an unterminated PEM block) holds everything from its start.
pub const HOLD_BACK: usize = 256;
/// Most text ever held: past this, the buffer is released with its redactions applied even
/// if a match is still open, so a stream cannot make the guard buffer without bound.
pub const MAX_HELD: usize = 64 * 1024;

pub struct StreamGuard {
    context: Context,
    /// `llm_stream_chunk` (the text is the event's `chunk`) or `tool_call_result` (its
    /// `output`, with the tool's name), so a tool's streamed output meets the result rules.
    kind: EventKind,
    tool_name: String,
    held: String,
    /// Bytes of the stream already released (offsets of released redactions are absolute).
    released: usize,
    stopped: bool,
}

/// What one chunk produced.
#[derive(Debug)]
pub struct StreamStep {
    pub decision: Decision,
    pub released_text: String,
    pub held_bytes: usize,
}

impl StreamGuard {
    pub fn new(context: Context) -> StreamGuard {
        StreamGuard {
            context,
            kind: EventKind::LlmStreamChunk,
            tool_name: String::new(),
            held: String::new(),
            released: 0,
            stopped: false,
        }
    }

    /// A guard for a tool's streamed output: each step is judged as a `tool_call_result`.
    pub fn tool_result(context: Context, tool_name: String) -> StreamGuard {
        StreamGuard {
            kind: EventKind::ToolCallResult,
            tool_name,
            ..StreamGuard::new(context)
        }
    }

    /// An event of this stream's kind carrying `text`.
    fn event(&self, text: String) -> Event {
        let mut e = Event::new(self.kind, self.context.clone());
        if self.kind == EventKind::ToolCallResult {
            e.tool_name = self.tool_name.clone();
            e.output = text;
        } else {
            e.chunk = text;
        }
        e
    }

    /// The step as an event for telemetry: only the released (already redacted) text, never
    /// the held tail, which may hold the start of a secret not yet recognised.
    pub fn released_event(&self, step: &StreamStep) -> Event {
        self.event(step.released_text.clone())
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Adds a chunk and returns what may be forwarded now. On `final` everything is released.
    /// `extra` is a hit the session already holds for this chunk (its strike limit); a STOP
    /// among the hits releases nothing, now or later.
    pub fn push(
        &mut self,
        chunk: &str,
        final_chunk: bool,
        policy: &Policy,
        meta: &CallMeta,
        extra: Option<RuleHit>,
    ) -> StreamStep {
        self.held.push_str(chunk);
        let held = std::mem::take(&mut self.held);
        let event = self.event(held);
        let mut decision = evaluate_with(&event, policy, meta, extra);
        let (text, path) = match self.kind {
            EventKind::ToolCallResult => (event.output, "output"),
            _ => (event.chunk, "chunk"),
        };
        // Only the streamed text is released; a span on another field (the tool's name)
        // has nothing to apply to here.
        decision.redactions.retain(|s| s.field_path == path);
        decision.redacted_output = None;

        if decision.action == Action::Stop && decision.enforced {
            // Nothing more leaves once the stream is stopped.
            self.stopped = true;
            self.released += text.len();
            decision.redactions.clear();
            decision.redacted_chunk = None;
            return StreamStep {
                decision,
                released_text: String::new(),
                held_bytes: 0,
            };
        }

        let mut cut = if final_chunk || text.len() > MAX_HELD {
            text.len()
        } else {
            floor_boundary(&text, text.len().saturating_sub(HOLD_BACK))
        };
        if !(final_chunk || text.len() > MAX_HELD) {
            // A match that reaches past the cut may still be growing: hold it whole.
            for s in &decision.redactions {
                if s.end > cut {
                    cut = cut.min(s.start);
                }
            }
        }
        let (released_spans, _): (Vec<&RedactionSpan>, Vec<&RedactionSpan>) =
            decision.redactions.iter().partition(|s| s.end <= cut);
        let released_text = apply_spans(&text[..cut], &released_spans);
        let base = self.released;
        decision.redactions = released_spans
            .into_iter()
            .map(|s| RedactionSpan {
                start: s.start + base,
                end: s.end + base,
                ..s.clone()
            })
            .collect();
        decision.redacted_chunk = None;
        self.released += cut;
        self.held = text[cut..].to_string();
        StreamStep {
            decision,
            released_text,
            held_bytes: self.held.len(),
        }
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::default_policy;

    #[test]
    fn secret_split_across_chunks_never_leaves() {
        let mut policy = default_policy(None).unwrap();
        policy.sync.limited = false;
        let mut g = StreamGuard::new(Context::default());
        let key = "AKIAIOSFODNN7EXAMPLE";
        let pieces = [
            "Here is the key: AKIAIOSF",
            "ODNN7EXAMPLE and more text ",
            "that follows.",
        ];
        let mut out = String::new();
        for (i, p) in pieces.iter().enumerate() {
            let step = g.push(
                p,
                i == pieces.len() - 1,
                &policy,
                &CallMeta::default(),
                None,
            );
            out.push_str(&step.released_text);
        }
        assert!(!out.contains(key), "{out}");
        assert!(!out.contains("AKIAIOSF"), "{out}");
        assert!(out.starts_with("Here is the key: [REDACTED"), "{out}");
        assert!(out.ends_with("and more text that follows."), "{out}");
    }

    #[test]
    fn long_benign_stream_is_released_with_bounded_hold() {
        let mut policy = default_policy(None).unwrap();
        policy.sync.limited = false;
        let mut g = StreamGuard::new(Context::default());
        let mut out = String::new();
        let chunk = "The quick brown fox jumps over the lazy dog. ";
        for _ in 0..100 {
            let step = g.push(chunk, false, &policy, &CallMeta::default(), None);
            assert!(step.held_bytes <= HOLD_BACK + chunk.len());
            out.push_str(&step.released_text);
        }
        out.push_str(
            &g.push("", true, &policy, &CallMeta::default(), None)
                .released_text,
        );
        assert_eq!(out, chunk.repeat(100));
    }
}
