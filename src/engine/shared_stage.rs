//! Shared session state around one decision (`sessions.backend: redis`): the round trip
//! before it (`pull`, then the local copy is brought up to date) and, when the decision
//! changed its session, the write after it (`commit`), pipelined behind it on the same
//! connection rather than waited for. With Redis unreachable the decision goes
//! on with this replica's own view and a `session_store_unavailable` hit, which STOPs the
//! tiers the pack names in `sessions.fail_closed_tiers`.

use std::future::Future;
use std::sync::Arc;

use super::pipeline::{Runtime, would_be};
use super::session_gate::{call_key, fingerprint};
use crate::decision::reserved::SESSION_STORE_UNAVAILABLE_RULE;
use crate::decision::{Action, Decision, RiskLevel, RuleHit};
use crate::event::{Event, EventKind};
use crate::policy::Policy;
use crate::session::Redeemed;
use crate::session::shared::{Commit, PullRequest, Pulled, Shared};

/// What the shared store said before the decision.
#[derive(Debug, Clone)]
pub enum SharedCall {
    Pulled(Box<Pulled>),
    /// Redis did not answer: the hit the decision carries.
    Unavailable(RuleHit),
}

impl SharedCall {
    pub fn pulled(&self) -> Option<&Pulled> {
        match self {
            SharedCall::Pulled(p) => Some(p),
            SharedCall::Unavailable(_) => None,
        }
    }
}

/// The retry counter a call of a step uses, as the local store keys it.
fn retry_key(event: &Event) -> (String, String) {
    (event.context.step_id.clone(), call_key(event))
}

fn retry_field((step, call): &(String, String)) -> String {
    format!("{step}\0{call}")
}

/// Reads the session from the shared store into the local one and takes the call's
/// rate-limit tokens there. `None` when there is nothing to share (no store, or a call with
/// no session and no shared rate limit).
pub async fn pull(
    shared: &Shared,
    rt: &Runtime,
    event: &Event,
    policy: &Policy,
    take_tokens: bool,
) -> Option<Arc<SharedCall>> {
    let sid = event.context.session_id.as_str();
    let limits: Vec<_> = if take_tokens && event.kind == EventKind::ToolCallStart {
        policy
            .rate_limits
            .iter()
            .filter(|l| l.applies(&event.tool_name))
            .filter(|l| !sid.is_empty() || l.per != crate::policy::RateScope::Session)
            .collect()
    } else {
        Vec::new()
    };
    if sid.is_empty() && limits.is_empty() {
        return None;
    }
    let key = retry_key(event);
    let redeem = (event.kind == EventKind::ToolCallStart && !event.pause_id.is_empty())
        .then(|| (event.pause_id.as_str(), fingerprint(event)));
    let flow_on = !policy.flow.is_off();
    let req = PullRequest {
        session: sid,
        tenant: &event.context.tenant,
        ttl: policy.sessions.ttl,
        want_provenance: flow_on,
        // The flow stage records every event of a decided call (not a candidate's).
        count_event: flow_on && take_tokens,
        retry_key: (!sid.is_empty() && event.kind == EventKind::ToolCallStart)
            .then(|| retry_field(&key)),
        redeem,
        limits,
    };
    let call = match shared.pull(&req).await {
        Ok(p) => {
            rt.recorder.session_store(true);
            if !sid.is_empty() {
                rt.sessions
                    .hydrate(sid, &event.context.caller, &policy.sessions, &p, Some(&key));
            }
            SharedCall::Pulled(Box::new(p))
        }
        Err(e) => {
            rt.recorder.session_store(false);
            tracing::warn!(error = %e, "session store unavailable: deciding on this replica's view");
            SharedCall::Unavailable(unavailable_hit(shared, event, policy))
        }
    };
    Some(Arc::new(call))
}

/// The hit a decision carries while Redis cannot be reached: a STOP for the tiers the pack
/// fails closed, an ALLOW that says so for the rest.
fn unavailable_hit(shared: &Shared, event: &Event, policy: &Policy) -> RuleHit {
    let tier = policy.tiers.of_event(event);
    let closed = tier.is_some_and(|t| shared.fail_closed_tiers.contains(&t));
    let (action, reason) = if closed {
        (
            Action::Stop,
            format!(
                "the shared session store cannot be reached, and calls in the {} tier fail closed",
                tier.map_or("", RiskLevel::as_str)
            ),
        )
    } else {
        (
            Action::Allow,
            "the shared session store cannot be reached: decided on this replica's view of the session".to_string(),
        )
    };
    RuleHit::new(
        SESSION_STORE_UNAVAILABLE_RULE,
        action,
        tier.unwrap_or(RiskLevel::Medium),
        reason,
    )
    .tagged("session")
}

/// Writes what a candidate set changed in its session: strikes and flags only (a set takes
/// no token, registers no pause and counts its retry through its own decision).
pub async fn commit_session(
    shared: &Arc<Shared>,
    rt: &Runtime,
    sid: &str,
    policy: &Policy,
    call: &SharedCall,
) {
    let (Some(before), Some(after)) = (call.pulled(), rt.sessions.get(sid)) else {
        return;
    };
    let c = Commit {
        session: sid.to_string(),
        ttl: policy.sessions.ttl,
        strikes: after.strikes.saturating_sub(before.strikes),
        flag_trajectory: after.flag_trajectory && !before.flag_trajectory,
        ..Commit::default()
    };
    if c.is_empty() {
        return;
    }
    pipelined(shared, rt, c);
}

/// Adds one stream chunk's strikes and flag to its session in the shared store.
pub fn commit_effects(
    shared: &Arc<Shared>,
    rt: &Runtime,
    sid: &str,
    policy: &Policy,
    strikes: u32,
    flag_trajectory: bool,
) {
    let c = Commit {
        session: sid.to_string(),
        ttl: policy.sessions.ttl,
        strikes,
        flag_trajectory,
        ..Commit::default()
    };
    if !c.is_empty() {
        pipelined(shared, rt, c);
    }
}

/// Sends a write without waiting for its reply: polled once here, so the command is queued
/// on the store's one connection before the decision's answer leaves (the caller's next call
/// is read after it, on this replica or, a network hop later, on another), then finished in
/// a task of its own. A failure is logged and counted, as an awaited one would be: the
/// decision it followed stands either way.
fn pipelined(shared: &Arc<Shared>, rt: &Runtime, c: Commit) {
    let (shared, recorder) = (shared.clone(), rt.recorder.clone());
    let mut write = Box::pin(async move {
        match shared.commit(&c).await {
            Ok(_) => recorder.session_store(true),
            Err(e) => {
                recorder.session_store(false);
                tracing::warn!(error = %e, session = %c.session, "session changes not written to the session store");
            }
        }
    });
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    if write.as_mut().poll(&mut cx).is_pending() {
        tokio::spawn(write);
    }
}

/// Writes what the decision changed in its session; a pause registered here takes the id
/// the shared store gives it (an identical call paused on another replica keeps one pause).
pub async fn commit(
    shared: &Arc<Shared>,
    rt: &Runtime,
    event: &Event,
    policy: &Policy,
    call: &SharedCall,
    d: &mut Decision,
) {
    let Some(before) = call.pulled() else {
        return;
    };
    let sid = event.context.session_id.as_str();
    if sid.is_empty() {
        return;
    }
    let Some(after) = rt.sessions.get(sid) else {
        return;
    };
    let key = retry_key(event);
    let count = rt.sessions.retry_count(sid, &key);
    // Written back only when it changed: an event that only counted itself (the shared
    // store counted it already) costs no second round trip.
    let provenance = after
        .provenance()
        .and_then(|p| postcard::to_allocvec(p).ok())
        .filter(|bytes| *bytes != before.provenance_bytes);
    let restore = match &before.redeemed {
        Some(Redeemed::Approved(p)) if !matches!(would_be(d), Action::Allow | Action::Redact) => {
            Some(p.id.as_str())
        }
        _ => None,
    };
    let pause = d
        .pause
        .as_ref()
        .filter(|p| !p.pause_id.is_empty())
        .and_then(|p| rt.sessions.get_pause(&p.pause_id));
    let c = Commit {
        session: sid.to_string(),
        ttl: policy.sessions.ttl,
        strikes: after.strikes.saturating_sub(before.strikes),
        flag_trajectory: after.flag_trajectory && !before.flag_trajectory,
        used_high_risk_tool: after.used_high_risk_tool && !before.used_high_risk_tool,
        provenance,
        retry: (count > before.retry_count).then(|| (retry_field(&key), count)),
        restore_approval: restore.map(str::to_string),
        pause,
    };
    if c.is_empty() {
        return;
    }
    // A paused call waits for a human anyway; its write is awaited, because the shared store
    // may answer with the id of the same call's pause from another replica.
    if c.pause.is_none() {
        pipelined(shared, rt, c);
        return;
    }
    match shared.commit(&c).await {
        Ok(Some(id)) => {
            if let Some(spec) = d.pause.as_mut() {
                spec.pause_id = id;
            }
            rt.recorder.session_store(true);
        }
        Ok(None) => rt.recorder.session_store(true),
        Err(e) => {
            rt.recorder.session_store(false);
            tracing::warn!(error = %e, session = %sid, "session changes not written to the session store");
        }
    }
}
