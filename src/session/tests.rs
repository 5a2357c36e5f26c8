#![allow(clippy::unwrap_used)]

use std::time::Duration;

use tokio::time::advance;

use super::*;
use crate::glob::Glob;

fn cfg(ttl_s: u64, max_sessions: u64) -> SessionConfig {
    SessionConfig {
        strike_limit: 3,
        ttl: Duration::from_secs(ttl_s),
        max_sessions,
        shared: None,
    }
}

fn limit(per: RateScope, burst: u32, per_minute: f64) -> RateLimit {
    RateLimit {
        id: "shell-limit".into(),
        tools: vec![Glob::new("shell.*")],
        per,
        burst,
        per_minute,
        action: Action::Stop,
    }
}

fn finding(session: &str, verdict: Option<VerdictKind>, action: Action, late: bool) -> Finding {
    Finding {
        session_id: session.into(),
        step_id: "1".into(),
        rule_id: "deep-rule".into(),
        event: EventKind::ToolCallStart,
        tool_name: "shell.exec".into(),
        verdict,
        risk_score: 0.9,
        explanation: "looks bad".into(),
        guidance: "do less".into(),
        action,
        risk_level: RiskLevel::High,
        decision_id: "d-1".into(),
        late,
        applied: false,
        injection: false,
        observed_at: SystemTime::now(),
    }
}

const TTL: Duration = Duration::from_secs(60);

fn fp(n: u8) -> [u8; 32] {
    [n; 32]
}

fn pause(store: &SessionStore, session: &str, fingerprint: [u8; 32]) -> Pause {
    store.pause(NewPause {
        session,
        step: "1",
        tool: "db.drop",
        fingerprint,
        reason: "needs a human",
        redacted_arguments_json: "{\"table\":\"users\"}",
        cause: vec!["approval-required".into()],
        ttl: TTL,
        caller: "",
    })
}

// ---- sessions: TTL, eviction, strikes, retry attempts ----

#[tokio::test(start_paused = true)]
async fn ttl_expiry_starts_the_session_afresh() {
    let store = SessionStore::new();
    let c = cfg(60, 100);
    store.touch("s1", "", &c);
    assert_eq!(store.apply_effects("s1", 2, true, true), 2);

    // Seen again within the TTL: the state stays, and the TTL restarts from this touch.
    advance(Duration::from_secs(59)).await;
    let snap = store.touch("s1", "", &c);
    assert_eq!(snap.strikes, 2);
    assert!(snap.used_high_risk_tool);
    advance(Duration::from_secs(59)).await;
    assert_eq!(store.touch("s1", "", &c).strikes, 2);

    // Idle past the TTL: a fresh session under the same id.
    advance(Duration::from_secs(61)).await;
    let snap = store.touch("s1", "", &c);
    assert_eq!(snap.strikes, 0);
    assert!(!snap.used_high_risk_tool);
    let s = store.get("s1").unwrap();
    assert_eq!(s.strikes, 0);
    assert!(!s.flag_trajectory);
}

#[tokio::test(start_paused = true)]
async fn max_sessions_evicts_the_least_recently_seen() {
    let store = SessionStore::new();
    let c = cfg(3600, 3);
    for id in ["a", "b", "c"] {
        store.touch(id, "", &c);
        advance(Duration::from_secs(1)).await;
    }
    // `a` is seen again, so `b` is now the least recently seen.
    store.touch("a", "", &c);
    advance(Duration::from_secs(1)).await;
    assert_eq!(store.evicted(), 0);

    store.touch("d", "", &c);
    assert_eq!(store.active(), 3);
    assert_eq!(store.evicted(), 1);
    assert!(store.get("b").is_none());
    for id in ["a", "c", "d"] {
        assert!(store.get(id).is_some(), "{id} was evicted");
    }

    advance(Duration::from_secs(1)).await;
    store.touch("e", "", &c);
    assert_eq!(store.evicted(), 2);
    assert!(store.get("c").is_none());
}

#[tokio::test]
async fn strikes_accumulate_and_flags_stick() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    store.touch("s1", "", &c);
    assert_eq!(store.apply_effects("s1", 1, false, false), 1);
    assert_eq!(store.apply_effects("s1", 2, true, false), 3);
    assert_eq!(store.apply_effects("s1", 0, false, true), 3);
    let s = store.get("s1").unwrap();
    assert_eq!(s.strikes, 3);
    assert!(
        s.flag_trajectory,
        "a flag is never cleared by a later event"
    );
    assert!(s.used_high_risk_tool);
    let snap = store.touch("s1", "", &c);
    assert_eq!(snap.strikes, 3);
    assert!(snap.used_high_risk_tool);

    // Another session is untouched; an unknown one is not created by effects.
    store.touch("s2", "", &c);
    assert_eq!(store.get("s2").unwrap().strikes, 0);
    assert_eq!(store.apply_effects("ghost", 1, true, true), 1);
    assert!(store.get("ghost").is_none());
}

#[tokio::test]
async fn next_attempt_counts_per_step_and_call() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    store.touch("s1", "", &c);
    store.touch("s2", "", &c);
    assert_eq!(store.next_attempt("s1", "step-1", "tool_call_start:a"), 1);
    assert_eq!(store.next_attempt("s1", "step-1", "tool_call_start:a"), 2);
    // Another call in the same step, and the same call in another step, count on their own.
    assert_eq!(store.next_attempt("s1", "step-1", "tool_call_start:b"), 1);
    assert_eq!(store.next_attempt("s1", "step-2", "tool_call_start:a"), 1);
    assert_eq!(store.next_attempt("s1", "step-1", "tool_call_start:a"), 3);
    // Another session has its own counters.
    assert_eq!(store.next_attempt("s2", "step-1", "tool_call_start:a"), 1);
    // Without a session there is nothing to count against.
    assert_eq!(store.next_attempt("ghost", "step-1", "x"), 1);
    assert_eq!(store.next_attempt("ghost", "step-1", "x"), 1);
}

// ---- rate limits ----

#[tokio::test(start_paused = true)]
async fn session_bucket_allows_burst_then_refills_per_minute() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    store.touch("s1", "", &c);
    store.touch("s2", "", &c);
    let l = limit(RateScope::Session, 2, 60.0);
    assert!(store.rate_allows(&l, "s1", ""));
    assert!(store.rate_allows(&l, "s1", ""));
    assert!(!store.rate_allows(&l, "s1", ""), "burst spent");
    // Another session has its own bucket.
    assert!(store.rate_allows(&l, "s2", ""));

    // 60 a minute is one a second.
    advance(Duration::from_millis(500)).await;
    assert!(
        !store.rate_allows(&l, "s1", ""),
        "half a token is not a call"
    );
    advance(Duration::from_millis(500)).await;
    assert!(store.rate_allows(&l, "s1", ""));
    assert!(!store.rate_allows(&l, "s1", ""));

    // A long quiet spell refills only up to the burst.
    advance(Duration::from_secs(600)).await;
    assert!(store.rate_allows(&l, "s1", ""));
    assert!(store.rate_allows(&l, "s1", ""));
    assert!(!store.rate_allows(&l, "s1", ""));
}

#[tokio::test(start_paused = true)]
async fn global_bucket_is_shared_across_sessions() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    for s in ["s1", "s2", "s3"] {
        store.touch(s, "", &c);
    }
    let l = limit(RateScope::Global, 2, 60.0);
    assert!(store.rate_allows(&l, "s1", "t1"));
    assert!(store.rate_allows(&l, "s2", "t2"));
    assert!(!store.rate_allows(&l, "s3", "t3"));
    advance(Duration::from_secs(1)).await;
    assert!(store.rate_allows(&l, "s3", "t3"));
    assert!(!store.rate_allows(&l, "s1", "t1"));
}

#[tokio::test(start_paused = true)]
async fn tenant_bucket_is_shared_by_the_tenants_sessions_only() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    for s in ["s1", "s2", "s3"] {
        store.touch(s, "", &c);
    }
    let l = limit(RateScope::Tenant, 2, 60.0);
    assert!(store.rate_allows(&l, "s1", "acme"));
    assert!(store.rate_allows(&l, "s2", "acme"));
    assert!(
        !store.rate_allows(&l, "s3", "acme"),
        "acme's bucket is spent"
    );
    assert!(store.rate_allows(&l, "s3", "globex"), "globex has its own");
    advance(Duration::from_secs(1)).await;
    assert!(store.rate_allows(&l, "s1", "acme"));
}

// ---- pauses ----

#[tokio::test]
async fn repeating_a_pending_call_gives_the_same_pause() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    store.touch("s1", "", &c);
    store.touch("s2", "", &c);
    let p1 = pause(&store, "s1", fp(1));
    assert!(p1.id.starts_with("pause-"));
    assert_eq!(p1.state(), PauseState::Pending);
    assert_eq!(pause(&store, "s1", fp(1)).id, p1.id);

    let other_call = pause(&store, "s1", fp(2));
    assert_ne!(other_call.id, p1.id);
    let other_session = pause(&store, "s2", fp(1));
    assert_ne!(other_session.id, p1.id);
    assert_eq!(store.pending_pauses(), 3);

    // Once answered, the same call pauses afresh.
    store.resolve(&p1.id, false, "alice", "").unwrap();
    let again = pause(&store, "s1", fp(1));
    assert_ne!(again.id, p1.id);
    assert_eq!(again.state(), PauseState::Pending);
}

#[tokio::test]
async fn approval_is_redeemed_once() {
    let store = SessionStore::new();
    store.touch("s1", "", &cfg(3600, 100));
    let p = pause(&store, "s1", fp(1));
    assert_eq!(
        store.redeem(&p.id, "s1", &fp(1)),
        Redeemed::Pending(p.clone())
    );

    let resolved = store.resolve(&p.id, true, "alice", "ok").unwrap();
    assert_eq!(resolved.state(), PauseState::Approved);
    assert_eq!(resolved.approver, "alice");
    assert_eq!(resolved.note, "ok");
    assert_eq!(store.pending_pauses(), 0);

    match store.redeem(&p.id, "s1", &fp(1)) {
        Redeemed::Approved(got) => {
            assert_eq!(got.id, p.id);
            assert_eq!(got.approver, "alice");
            assert_eq!(got.state(), PauseState::Used);
        }
        other => panic!("expected Approved, got {other:?}"),
    }
    assert_eq!(store.redeem(&p.id, "s1", &fp(1)), Redeemed::NotThisCall);
    let listed = store.list_pauses(Some("s1"));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1, PauseState::Used);
    // A used approval cannot be answered again.
    assert_eq!(
        store.resolve(&p.id, false, "bob", ""),
        Err(PauseError::AlreadyResolved {
            id: p.id.clone(),
            state: PauseState::Used
        })
    );
}

#[tokio::test]
async fn denial_is_final() {
    let store = SessionStore::new();
    store.touch("s1", "", &cfg(3600, 100));
    let p = pause(&store, "s1", fp(1));
    store.resolve(&p.id, false, "bob", "too risky").unwrap();
    for _ in 0..2 {
        match store.redeem(&p.id, "s1", &fp(1)) {
            Redeemed::Denied(got) => {
                assert_eq!(got.approver, "bob");
                assert_eq!(got.note, "too risky");
            }
            other => panic!("expected Denied, got {other:?}"),
        }
    }
    assert_eq!(
        store.resolve(&p.id, true, "alice", ""),
        Err(PauseError::AlreadyResolved {
            id: p.id.clone(),
            state: PauseState::Denied
        })
    );
    assert_eq!(
        store.resolve("pause-nope", true, "alice", ""),
        Err(PauseError::NotFound("pause-nope".into()))
    );
}

#[tokio::test(start_paused = true)]
async fn pending_pause_expires() {
    let store = SessionStore::new();
    store.touch("s1", "", &cfg(3600, 100));
    let p = pause(&store, "s1", fp(1));
    advance(TTL - Duration::from_secs(1)).await;
    assert_eq!(store.pending_pauses(), 1);

    advance(Duration::from_secs(2)).await;
    assert_eq!(store.pending_pauses(), 0);
    assert!(store.list_pauses(None).is_empty());
    let listed = store.list_pauses(Some("s1"));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].1, PauseState::Expired);
    assert_eq!(
        store.resolve(&p.id, true, "alice", ""),
        Err(PauseError::AlreadyResolved {
            id: p.id.clone(),
            state: PauseState::Expired
        })
    );
    assert!(matches!(
        store.redeem(&p.id, "s1", &fp(1)),
        Redeemed::Expired(_)
    ));
    // The same call now pauses afresh.
    assert_ne!(pause(&store, "s1", fp(1)).id, p.id);
}

#[tokio::test(start_paused = true)]
async fn unused_approval_expires_too() {
    let store = SessionStore::new();
    store.touch("s1", "", &cfg(3600, 100));
    let p = pause(&store, "s1", fp(1));
    store.resolve(&p.id, true, "alice", "").unwrap();
    advance(TTL + Duration::from_secs(1)).await;
    assert!(matches!(
        store.redeem(&p.id, "s1", &fp(1)),
        Redeemed::Expired(_)
    ));
}

#[tokio::test]
async fn redeem_is_bound_to_session_and_call() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    store.touch("s1", "", &c);
    store.touch("s2", "", &c);
    let p = pause(&store, "s1", fp(1));
    store.resolve(&p.id, true, "alice", "").unwrap();
    assert_eq!(store.redeem(&p.id, "s2", &fp(1)), Redeemed::NotThisCall);
    assert_eq!(store.redeem(&p.id, "s1", &fp(2)), Redeemed::NotThisCall);
    assert_eq!(
        store.redeem("pause-unknown", "s1", &fp(1)),
        Redeemed::NotThisCall
    );
    // Those attempts did not use the approval up.
    assert!(matches!(
        store.redeem(&p.id, "s1", &fp(1)),
        Redeemed::Approved(_)
    ));
}

#[tokio::test]
async fn list_pauses_without_session_shows_pending_only() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    store.touch("s1", "", &c);
    store.touch("s2", "", &c);
    let a = pause(&store, "s1", fp(1));
    let b = pause(&store, "s1", fp(2));
    let x = pause(&store, "s2", fp(3));
    store.resolve(&b.id, false, "bob", "").unwrap();

    let mut pending: Vec<String> = store
        .list_pauses(None)
        .into_iter()
        .map(|(p, s)| {
            assert_eq!(s, PauseState::Pending);
            p.id
        })
        .collect();
    pending.sort();
    let mut want = vec![a.id.clone(), x.id.clone()];
    want.sort();
    assert_eq!(pending, want);
    assert_eq!(store.pending_pauses(), 2);

    let s1: Vec<(String, PauseState)> = store
        .list_pauses(Some("s1"))
        .into_iter()
        .map(|(p, s)| (p.id, s))
        .collect();
    assert_eq!(s1.len(), 2);
    assert!(s1.contains(&(a.id.clone(), PauseState::Pending)));
    assert!(s1.contains(&(b.id.clone(), PauseState::Denied)));
    assert!(store.list_pauses(Some("s3")).is_empty());
}

// ---- findings ----

#[tokio::test]
async fn finding_reaches_subscriber_and_flags_on_warn_or_block() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    for s in ["pass", "fail", "warn", "block"] {
        store.touch(s, "", &c);
    }
    let mut rx = store.subscribe();

    store.record_finding(finding(
        "pass",
        Some(VerdictKind::Pass),
        Action::Allow,
        false,
    ));
    store.record_finding(finding("fail", None, Action::Allow, false));
    store.record_finding(finding(
        "warn",
        Some(VerdictKind::Warn),
        Action::Allow,
        false,
    ));
    store.record_finding(finding(
        "block",
        Some(VerdictKind::Block),
        Action::Retry,
        false,
    ));

    for want in ["pass", "fail", "warn", "block"] {
        let got = rx.recv().await.unwrap();
        assert_eq!(got.session_id, want);
        assert_eq!(got.rule_id, "deep-rule");
    }
    assert!(!store.get("pass").unwrap().flag_trajectory);
    assert!(!store.get("fail").unwrap().flag_trajectory);
    assert!(store.get("warn").unwrap().flag_trajectory);
    assert!(store.get("block").unwrap().flag_trajectory);
    assert_eq!(store.get("block").unwrap().findings.len(), 1);
    // A pass reaches watchers but is not kept on the session; every other verdict is.
    assert!(store.get("pass").unwrap().findings.is_empty());
    for kept in ["fail", "warn"] {
        assert_eq!(store.get(kept).unwrap().findings.len(), 1, "{kept}");
    }

    // A finding about an unknown session still reaches watchers.
    store.record_finding(finding(
        "ghost",
        Some(VerdictKind::Block),
        Action::Retry,
        false,
    ));
    assert_eq!(rx.recv().await.unwrap().session_id, "ghost");
    assert!(store.get("ghost").is_none());
}

#[tokio::test]
async fn findings_are_bounded_per_session_newest_kept() {
    let store = SessionStore::new();
    store.touch("s1", "", &cfg(3600, 100));
    for i in 0..100 {
        let mut f = finding("s1", Some(VerdictKind::Warn), Action::Allow, false);
        f.decision_id = format!("d-{i}");
        store.record_finding(f);
    }
    let s = store.get("s1").unwrap();
    assert_eq!(s.findings.len(), 64);
    assert_eq!(s.findings.front().unwrap().decision_id, "d-36");
    assert_eq!(s.findings.back().unwrap().decision_id, "d-99");
}

#[tokio::test]
async fn late_findings_are_taken_exactly_once() {
    let store = SessionStore::new();
    let c = cfg(3600, 100);
    store.touch("s1", "", &c);
    store.touch("s2", "", &c);
    store.record_finding(finding(
        "s1",
        Some(VerdictKind::Block),
        Action::Retry,
        false,
    ));
    store.record_finding(finding("s1", Some(VerdictKind::Warn), Action::Allow, true));
    store.record_finding(finding("s1", None, Action::Allow, true));
    let mut late = finding("s1", Some(VerdictKind::Block), Action::Retry, true);
    late.decision_id = "d-late".into();
    store.record_finding(late);
    store.record_finding(finding("s2", Some(VerdictKind::Block), Action::Stop, true));

    let taken = store.take_late_findings("s1");
    assert_eq!(taken.len(), 1, "{taken:?}");
    assert_eq!(taken[0].decision_id, "d-late");
    assert_eq!(taken[0].action, Action::Retry);
    assert!(taken[0].applied);
    assert!(store.take_late_findings("s1").is_empty());
    // Still kept on the session, marked applied.
    let s = store.get("s1").unwrap();
    assert_eq!(s.findings.len(), 4);
    assert!(
        s.findings
            .iter()
            .any(|f| f.decision_id == "d-late" && f.applied)
    );

    assert_eq!(store.take_late_findings("s2").len(), 1);
    assert!(store.take_late_findings("ghost").is_empty());
}

// ---- sweep ----

#[tokio::test(start_paused = true)]
async fn sweep_drops_idle_sessions_and_old_pauses() {
    let store = SessionStore::new();
    let c = cfg(60, 100);
    store.touch("idle", "", &c);
    let expiring = pause(&store, "idle", fp(1));
    advance(Duration::from_secs(30)).await;
    store.touch("busy", "", &c);
    let long_lived = store.pause(NewPause {
        session: "busy",
        step: "1",
        tool: "db.drop",
        fingerprint: fp(2),
        reason: "needs a human",
        redacted_arguments_json: "{}",
        cause: Vec::new(),
        ttl: Duration::from_secs(24 * 3600),
        caller: "",
    });

    advance(Duration::from_secs(31)).await;
    store.sweep(c.ttl);
    assert!(store.get("idle").is_none());
    assert!(store.get("busy").is_some());
    // Expired pauses stay visible for a grace period.
    assert_eq!(store.list_pauses(Some("idle")).len(), 1);

    advance(Duration::from_secs(3600)).await;
    store.sweep(c.ttl);
    assert!(store.list_pauses(Some("idle")).is_empty());
    assert_eq!(
        store.resolve(&expiring.id, true, "alice", ""),
        Err(PauseError::NotFound(expiring.id.clone()))
    );
    // A pending pause stays however long its session has been idle.
    assert!(store.get("busy").is_none());
    assert_eq!(store.pending_pauses(), 1);
    assert!(store.resolve(&long_lived.id, true, "alice", "").is_ok());
}

#[tokio::test(start_paused = true)]
async fn touch_sweeps_periodically() {
    let store = SessionStore::new();
    let c = cfg(60, 100_000);
    store.touch("idle", "", &c);
    advance(Duration::from_secs(61)).await;
    for _ in 0..(SWEEP_EVERY - 1) {
        store.touch("busy", "", &c);
    }
    assert!(store.get("idle").is_none());
    assert_eq!(store.active(), 1);
}
