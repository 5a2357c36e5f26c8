//! The flow stage: a tool call judged by where its destinations came from (read before
//! approvals, so a human's approval can lift what it paused), and every decided event
//! recorded into the session's provenance (after settle, with the event's final hits).

use super::pipeline::{Options, Runtime};
use crate::decision::{Decision, RuleHit};
use crate::event::{Event, EventKind};
use crate::flow::{self, Signals};
use crate::policy::Policy;

/// Flow hits for a tool call of a session.
pub fn check(event: &Event, policy: &Policy, rt: &Runtime, hits: &mut Vec<RuleHit>) {
    let cfg = &policy.flow;
    let sid = &event.context.session_id;
    if cfg.is_off() || sid.is_empty() || event.kind != EventKind::ToolCallStart {
        return;
    }
    let found = rt
        .sessions
        .read_provenance(sid, |p| flow::check(event, cfg, p))
        // A session with nothing recorded yet has the empty record's answer: nothing came
        // from untrusted content, but flow rules and the allow list still read the call.
        .unwrap_or_else(|| flow::check(event, cfg, &Default::default()));
    hits.extend(found);
}

/// Records a decided event into its session's provenance. Stream chunks are the model's
/// own words and a candidate set is recorded by its caller's chosen call, so neither is.
pub fn record(event: &Event, policy: &Policy, rt: &Runtime, opts: &Options, d: &Decision) {
    let cfg = &policy.flow;
    let sid = &event.context.session_id;
    if cfg.is_off()
        || sid.is_empty()
        || event.kind == EventKind::LlmStreamChunk
        || opts.candidate_of.is_some()
    {
        return;
    }
    let signals = Signals::of(&d.hits);
    rt.sessions
        .with_provenance(sid, |p| flow::record(event, cfg, p, signals));
}
