//! Per-session state: strikes, the trajectory flag, deep-rule findings, retry attempts,
//! pauses and rate-limit buckets. A concurrent map with a TTL and a bound on sessions (the
//! least recently seen are evicted first); every inner list is bounded too, so memory stays
//! bounded whatever the callers send.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use dashmap::DashMap;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::decision::{Action, RiskLevel};
use crate::deep::VerdictKind;
use crate::event::EventKind;
use crate::flow::provenance::{Provenance, Source};
use crate::policy::{RateLimit, RateScope, SessionConfig};

/// Findings kept per session (newest win): enough for an incident responder, bounded.
const MAX_FINDINGS: usize = 64;
/// Distinct (step, call) retry counters kept per session.
const MAX_RETRY_KEYS: usize = 256;
/// Pauses kept across all sessions, pending or recently resolved.
const MAX_PAUSES: usize = 10_000;
/// Tenant and global rate-limit buckets kept.
const MAX_SHARED_BUCKETS: usize = 10_000;
/// Arguments kept on a pause for the human to read.
const MAX_PAUSE_ARGS_BYTES: usize = 4096;
/// Resolved and expired pauses stay visible this long, then are swept.
const PAUSE_GRACE: Duration = Duration::from_secs(3600);
/// Expired sessions and pauses are swept once per this many events.
const SWEEP_EVERY: u64 = 1024;
/// WatchFindings subscribers that fall this far behind are told so and dropped.
const WATCH_BUFFER: usize = 1024;

/// A deep-rule verdict (or failure) about one event of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub session_id: String,
    pub step_id: String,
    pub rule_id: String,
    pub event: EventKind,
    pub tool_name: String,
    /// `None` when the rule failed (error, timeout, queue full).
    pub verdict: Option<VerdictKind>,
    pub risk_score: f64,
    pub explanation: String,
    pub guidance: String,
    /// What the verdict means under the policy that asked for it.
    pub action: Action,
    pub risk_level: RiskLevel,
    pub decision_id: String,
    /// The verdict arrived after its decision was made.
    pub late: bool,
    /// A late verdict has been applied to a later event.
    pub applied: bool,
    /// The verdict flags a prompt injection: the session's sink calls are then tainted.
    pub injection: bool,
    pub observed_at: SystemTime,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseState {
    Pending,
    Approved,
    Denied,
    Expired,
    /// Approved, and the approved call has passed.
    Used,
}

impl PauseState {
    pub fn as_str(self) -> &'static str {
        match self {
            PauseState::Pending => "pending",
            PauseState::Approved => "approved",
            PauseState::Denied => "denied",
            PauseState::Expired => "expired",
            PauseState::Used => "used",
        }
    }
}

/// A call waiting for a human, bound to the exact tool and arguments it paused.
#[derive(Debug, Clone, PartialEq)]
pub struct Pause {
    pub id: String,
    pub session_id: String,
    pub step_id: String,
    pub tool_name: String,
    pub reason: String,
    pub redacted_arguments_json: String,
    /// SHA-256 of the event kind, tool name and arguments.
    pub fingerprint: [u8; 32],
    /// The rules whose hits made the call pause: an approval lifts exactly these.
    pub cause: Vec<String>,
    state: PauseState,
    pub created_at: SystemTime,
    pub expires_at: SystemTime,
    expires: Instant,
    resolved: Option<Instant>,
    pub approver: String,
    pub note: String,
    /// The verified identity of the caller whose call paused; empty without one. That
    /// identity can never approve this pause.
    pub caller: String,
}

/// A pause as the shared store keeps it (`shared`): wall-clock times only.
#[derive(Debug, Clone)]
pub struct SharedPause {
    pub id: String,
    pub session_id: String,
    pub step_id: String,
    pub tool_name: String,
    pub reason: String,
    pub redacted_arguments_json: String,
    pub fingerprint: [u8; 32],
    pub cause: Vec<String>,
    pub state: PauseState,
    pub created_at: SystemTime,
    pub expires_at: SystemTime,
    pub resolved_at: Option<SystemTime>,
    pub approver: String,
    pub note: String,
    pub caller: String,
}

impl Pause {
    /// A pause read from the shared store, its expiry placed on this process's clock.
    pub fn from_shared(p: SharedPause) -> Pause {
        let now = SystemTime::now();
        let left = p.expires_at.duration_since(now).unwrap_or(Duration::ZERO);
        let since = |t: SystemTime| now.duration_since(t).unwrap_or(Duration::ZERO);
        let mono = Instant::now();
        Pause {
            id: p.id,
            session_id: p.session_id,
            step_id: p.step_id,
            tool_name: p.tool_name,
            reason: p.reason,
            redacted_arguments_json: p.redacted_arguments_json,
            fingerprint: p.fingerprint,
            cause: p.cause,
            state: p.state,
            created_at: p.created_at,
            expires_at: p.expires_at,
            expires: mono + left,
            resolved: p
                .resolved_at
                .map(|t| mono.checked_sub(since(t)).unwrap_or(mono)),
            approver: p.approver,
            note: p.note,
            caller: p.caller,
        }
    }

    /// The state now: a pending or approved pause past its expiry is expired.
    pub fn state(&self) -> PauseState {
        match self.state {
            PauseState::Pending | PauseState::Approved if Instant::now() >= self.expires => {
                PauseState::Expired
            }
            s => s,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PauseError {
    #[error("no pause with id `{0}`")]
    NotFound(String),
    #[error("pause `{id}` is already {}", state.as_str())]
    AlreadyResolved { id: String, state: PauseState },
}

/// A call to pause: what `SessionStore::pause` needs.
#[derive(Debug, Clone)]
pub struct NewPause<'a> {
    pub session: &'a str,
    pub step: &'a str,
    pub tool: &'a str,
    pub fingerprint: [u8; 32],
    pub reason: &'a str,
    pub redacted_arguments_json: &'a str,
    pub cause: Vec<String>,
    pub ttl: Duration,
    pub caller: &'a str,
}

/// At most `max` bytes of `s`, cut on a char boundary and marked when cut: what a pause
/// keeps for the human, bounded so 10 000 pauses stay small.
fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let kept = crate::text::head(s, max);
    format!("{kept}… ({} bytes cut)", s.len() - kept.len())
}

/// What a resubmitted call's `pause_id` amounts to.
#[derive(Debug, Clone, PartialEq)]
pub enum Redeemed {
    /// Approved for exactly this call; now used up.
    Approved(Pause),
    Denied(Pause),
    Expired(Pause),
    /// Still waiting for a human.
    Pending(Pause),
    /// Unknown id, another session, or different tool or arguments: the call is judged
    /// afresh.
    NotThisCall,
}

#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    last: Instant,
    burst: f64,
    per_second: f64,
}

impl Bucket {
    fn full(limit: &RateLimit) -> Bucket {
        Bucket {
            tokens: f64::from(limit.burst),
            last: Instant::now(),
            burst: f64::from(limit.burst),
            per_second: limit.per_minute / 60.0,
        }
    }

    /// A bucket that has refilled completely behaves exactly like a fresh one, so it can be
    /// dropped without forgiving anyone.
    fn is_full(&self, now: Instant) -> bool {
        self.tokens + now.duration_since(self.last).as_secs_f64() * self.per_second >= self.burst
    }

    fn take(&mut self, limit: &RateLimit) -> bool {
        let now = Instant::now();
        self.burst = f64::from(limit.burst);
        self.per_second = limit.per_minute / 60.0;
        let refill = now.duration_since(self.last).as_secs_f64() * self.per_second;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Per-session counters most sessions never use, allocated on first use: inline, the two
/// tables would add 96 bytes to every session in the store.
#[derive(Debug, Clone, Default)]
struct Counters {
    /// RETRY attempts by (step, call).
    retries: HashMap<(String, String), u32>,
    /// Session-scoped rate-limit buckets by limit id.
    buckets: HashMap<String, Bucket>,
}

/// One session's state.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub strikes: u32,
    pub flag_trajectory: bool,
    /// Set once the session used a high or critical tool: its prompts then wait for deep
    /// rules.
    pub used_high_risk_tool: bool,
    pub findings: VecDeque<Finding>,
    /// Where the session's values came from; allocated on the first event a pack with
    /// sinks or flows records.
    provenance: Option<Box<Provenance>>,
    counters: Option<Box<Counters>>,
    last_seen: Instant,
    pub last_seen_at: SystemTime,
    /// The verified identity of the caller that opened the session (empty without one, and
    /// for a session read from the shared store): who besides approvers may read it.
    pub caller: String,
}

impl Session {
    pub fn provenance(&self) -> Option<&Provenance> {
        self.provenance.as_deref()
    }

    /// A session as the shared store holds it, for GetSession.
    pub fn from_shared(id: &str, s: shared::SharedSession) -> Session {
        let mut out = Session::new(id);
        out.strikes = s.strikes;
        out.flag_trajectory = s.flag_trajectory;
        out.used_high_risk_tool = s.used_high_risk_tool;
        out.findings = s.findings.into();
        out.provenance = s.provenance.map(Box::new);
        out
    }

    fn new(id: &str) -> Session {
        Session {
            id: id.to_string(),
            strikes: 0,
            flag_trajectory: false,
            used_high_risk_tool: false,
            findings: VecDeque::new(),
            provenance: None,
            counters: None,
            last_seen: Instant::now(),
            last_seen_at: SystemTime::now(),
            caller: String::new(),
        }
    }
}

/// What the pipeline needs to know about a session before it decides.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub strikes: u32,
    pub used_high_risk_tool: bool,
}

pub struct SessionStore {
    sessions: DashMap<String, Session>,
    pauses: DashMap<String, Pause>,
    /// (session, call fingerprint) → the id of its newest pause.
    pause_index: DashMap<(String, [u8; 32]), String>,
    shared_buckets: DashMap<(String, String), Bucket>,
    findings: broadcast::Sender<Finding>,
    events: AtomicU64,
    evicted: AtomicU64,
    evicting: std::sync::atomic::AtomicBool,
    /// Set when replicas share session state: findings are also written there.
    mirror: std::sync::OnceLock<(std::sync::Arc<shared::Shared>, Duration)>,
}

impl Default for SessionStore {
    fn default() -> Self {
        SessionStore::new()
    }
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("sessions", &self.sessions.len())
            .field("pauses", &self.pauses.len())
            .finish()
    }
}

impl SessionStore {
    pub fn new() -> SessionStore {
        SessionStore {
            sessions: DashMap::new(),
            pauses: DashMap::new(),
            pause_index: DashMap::new(),
            shared_buckets: DashMap::new(),
            findings: broadcast::channel(WATCH_BUFFER).0,
            events: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            evicting: std::sync::atomic::AtomicBool::new(false),
            mirror: std::sync::OnceLock::new(),
        }
    }

    /// Writes findings to the shared store too, kept there for `ttl` (the session TTL).
    pub fn mirror_to(&self, shared: std::sync::Arc<shared::Shared>, ttl: Duration) {
        let _ = self.mirror.set((shared, ttl));
    }

    pub fn shared(&self) -> Option<&std::sync::Arc<shared::Shared>> {
        self.mirror.get().map(|(s, _)| s)
    }

    /// Marks the session seen (creating it, or starting it afresh when its TTL passed) and
    /// returns what the pipeline needs. Evicts the least recently seen sessions when over
    /// `max_sessions`.
    pub fn touch(&self, id: &str, caller: &str, cfg: &SessionConfig) -> Snapshot {
        let now = Instant::now();
        let snap = {
            let opened = || {
                let mut s = Session::new(id);
                s.caller = caller.to_string();
                s
            };
            let mut s = self.sessions.entry(id.to_string()).or_insert_with(opened);
            if now.duration_since(s.last_seen) > cfg.ttl {
                *s = opened();
            }
            s.last_seen = now;
            s.last_seen_at = SystemTime::now();
            Snapshot {
                strikes: s.strikes,
                used_high_risk_tool: s.used_high_risk_tool,
            }
        };
        if self.sessions.len() as u64 > cfg.max_sessions.max(1) {
            self.evict_oldest(cfg.max_sessions.max(1));
        }
        if self.events.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.sweep(cfg.ttl);
        }
        snap
    }

    /// Removes the least recently seen sessions down to 99% of `max`, so a full map does
    /// not pay a scan on every new session.
    fn evict_oldest(&self, max: u64) {
        // One caller evicts at a time; the others carry on, the map is briefly over.
        if self.evicting.swap(true, Ordering::Acquire) {
            return;
        }
        self.evict_oldest_now(max);
        self.evicting.store(false, Ordering::Release);
    }

    fn evict_oldest_now(&self, max: u64) {
        let target = (max - max / 100).max(1) as usize;
        let len = self.sessions.len();
        if len <= target {
            return;
        }
        let ages = self.sessions.iter().map(|e| (e.last_seen, e.key().clone()));
        for id in oldest(ages, len - target) {
            if self.sessions.remove(&id).is_some() {
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Drops sessions idle past their TTL and pauses resolved or expired long ago.
    pub fn sweep(&self, ttl: Duration) {
        let now = Instant::now();
        self.sessions
            .retain(|_, s| now.duration_since(s.last_seen) <= ttl);
        self.pauses.retain(|_, p| {
            // Kept for a grace period after it was settled: resolved (denied, used) or
            // expired, whichever happened.
            let settled = match p.state() {
                PauseState::Pending | PauseState::Approved => return true,
                PauseState::Expired => p.expires,
                PauseState::Denied | PauseState::Used => p.resolved.unwrap_or(p.expires),
            };
            now.duration_since(settled) < PAUSE_GRACE
        });
        self.prune_pause_index();
    }

    /// Drops index entries whose pause is gone, so the index is bounded by the pause table.
    fn prune_pause_index(&self) {
        self.pause_index
            .retain(|_, id| self.pauses.contains_key(id.as_str()));
    }

    pub fn active(&self) -> usize {
        self.sessions.len()
    }

    pub fn evicted(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    pub fn get(&self, id: &str) -> Option<Session> {
        self.sessions.get(id).map(|s| s.clone())
    }

    /// Whether this session was opened by `caller` (a verified identity).
    pub fn opened_by(&self, id: &str, caller: &str) -> bool {
        !caller.is_empty() && self.sessions.get(id).is_some_and(|s| s.caller == caller)
    }

    /// Replaces what the shared store holds for this session (read just before a decision)
    /// in the local copy the engine works on. Buckets, pauses and findings already applied
    /// stay local; late findings are added unapplied, so this decision applies them.
    pub fn hydrate(
        &self,
        id: &str,
        caller: &str,
        cfg: &SessionConfig,
        p: &shared::Pulled,
        retry_key: Option<&(String, String)>,
    ) {
        self.touch(id, caller, cfg);
        if let Some(mut s) = self.sessions.get_mut(id) {
            s.strikes = p.strikes;
            s.flag_trajectory = p.flag_trajectory;
            s.used_high_risk_tool = p.used_high_risk_tool;
            s.provenance = p.provenance.clone();
            for f in &p.late {
                if f.injection
                    && let Some(prov) = s.provenance.as_mut()
                {
                    let src = Source::new(0, f.event, &f.tool_name, &f.step_id);
                    crate::flow::record_late_injection(prov, src);
                }
                if s.findings.len() >= MAX_FINDINGS {
                    s.findings.pop_front();
                }
                s.findings.push_back(f.clone());
            }
            if let Some(k) = retry_key {
                if p.retry_count == 0 {
                    if let Some(c) = s.counters.as_mut() {
                        c.retries.remove(k);
                    }
                } else {
                    let c = s.counters.get_or_insert_with(Default::default);
                    c.retries.insert(k.clone(), p.retry_count);
                }
            }
        }
    }

    /// The retry count of one call of a step.
    pub fn retry_count(&self, id: &str, key: &(String, String)) -> u32 {
        self.sessions
            .get(id)
            .and_then(|s| s.counters.as_ref()?.retries.get(key).copied())
            .unwrap_or(0)
    }

    /// Adds strikes and flags after a decision; returns the session's strike total.
    pub fn apply_effects(
        &self,
        id: &str,
        strikes: u32,
        flag_trajectory: bool,
        used_high_risk_tool: bool,
    ) -> u32 {
        match self.sessions.get_mut(id) {
            Some(mut s) => {
                s.strikes = s.strikes.saturating_add(strikes);
                s.flag_trajectory |= flag_trajectory;
                s.used_high_risk_tool |= used_high_risk_tool;
                s.strikes
            }
            None => strikes,
        }
    }

    /// Counts one more RETRY of a call in a step; returns the attempt number (1 for the
    /// first RETRY).
    pub fn next_attempt(&self, id: &str, step: &str, call: &str) -> u32 {
        let Some(mut s) = self.sessions.get_mut(id) else {
            return 1;
        };
        let key = (step.to_string(), call.to_string());
        let retries = &mut s.counters.get_or_insert_with(Default::default).retries;
        if !retries.contains_key(&key) && retries.len() >= MAX_RETRY_KEYS {
            // Steps move forward; the counters of other steps are the ones to drop.
            retries.retain(|(st, _), _| st == step);
            if retries.len() >= MAX_RETRY_KEYS {
                // Hundreds of distinct calls retried in one step: treat the step's
                // attempts as spent rather than forget the counts.
                return u32::MAX;
            }
        }
        let n = retries.entry(key).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// Takes one token from the limit's bucket for this session or tenant; false when the
    /// bucket is empty.
    pub fn rate_allows(&self, limit: &RateLimit, session: &str, tenant: &str) -> bool {
        match limit.per {
            RateScope::Session => match self.sessions.get_mut(session) {
                Some(mut s) => s
                    .counters
                    .get_or_insert_with(Default::default)
                    .buckets
                    .entry(limit.id.clone())
                    .or_insert_with(|| Bucket::full(limit))
                    .take(limit),
                None => true,
            },
            RateScope::Tenant | RateScope::Global => {
                let key = match limit.per {
                    RateScope::Tenant => tenant.to_string(),
                    _ => String::new(),
                };
                let key = (limit.id.clone(), key);
                if !self.shared_buckets.contains_key(&key)
                    && self.shared_buckets.len() >= MAX_SHARED_BUCKETS
                {
                    self.make_bucket_room();
                }
                self.shared_buckets
                    .entry(key)
                    .or_insert_with(|| Bucket::full(limit))
                    .take(limit)
            }
        }
    }

    /// Room for a new tenant bucket: refilled buckets go first (dropping them changes
    /// nothing); if the table is still full, the least recently used tenant buckets. The
    /// global buckets (empty key) are never dropped, so tenant churn cannot reset them.
    fn make_bucket_room(&self) {
        let now = Instant::now();
        self.shared_buckets.retain(|_, b| !b.is_full(now));
        if self.shared_buckets.len() < MAX_SHARED_BUCKETS {
            return;
        }
        let ages = self
            .shared_buckets
            .iter()
            .filter(|e| !e.key().1.is_empty())
            .map(|e| (e.last, e.key().clone()));
        for key in oldest(ages, MAX_SHARED_BUCKETS / 100 + 1) {
            self.shared_buckets.remove(&key);
        }
    }

    /// Records a deep verdict and announces it to watchers. Verdicts other than a pass are
    /// kept on the session, up to `MAX_FINDINGS`, newest first out.
    pub fn record_finding(&self, mut f: Finding) {
        if let Some((shared, ttl)) = self.mirror.get() {
            // The shared store queues a late finding for the session's next event on any
            // replica; here it is kept as already applied, so it is not applied twice. A
            // pass changes nothing for other replicas and is kept here only.
            if f.verdict != Some(VerdictKind::Pass)
                && let Ok(rt) = tokio::runtime::Handle::try_current()
            {
                let (shared, ttl, stored) = (shared.clone(), *ttl, f.clone());
                rt.spawn(async move {
                    if let Err(e) = shared.record_finding(&stored, ttl).await {
                        tracing::warn!(error = %e, session = %stored.session_id, "finding not written to the session store");
                    }
                });
            }
            if f.late {
                f.applied = true;
            }
        }
        if let Some(mut s) = self.sessions.get_mut(&f.session_id) {
            if f.verdict == Some(VerdictKind::Warn) || f.verdict == Some(VerdictKind::Block) {
                s.flag_trajectory = true;
            }
            if f.injection && f.late {
                let src = Source::new(0, f.event, &f.tool_name, &f.step_id);
                if let Some(p) = s.provenance.as_mut() {
                    crate::flow::record_late_injection(p, src);
                }
            }
            // A pass is announced and logged but not kept: it changes nothing later in the
            // session, and kept it would be most of an idle session's memory (a finding and
            // its strings, about 1 KiB, on every session whose results a deep rule read).
            if f.verdict != Some(VerdictKind::Pass) {
                if s.findings.len() >= MAX_FINDINGS {
                    s.findings.pop_front();
                }
                s.findings.push_back(f.clone());
            }
        }
        // No watcher is not an error: a finding that is not a pass stays on the session.
        let _ = self.findings.send(f);
    }

    /// Runs `f` on the session's provenance record (created on first use); `None` when the
    /// session is not in the store.
    pub fn with_provenance<R>(&self, id: &str, f: impl FnOnce(&mut Provenance) -> R) -> Option<R> {
        let mut s = self.sessions.get_mut(id)?;
        Some(f(s.provenance.get_or_insert_with(Default::default)))
    }

    /// A pause by id.
    pub fn get_pause(&self, id: &str) -> Option<Pause> {
        self.pauses.get(id).map(|p| p.clone())
    }

    /// Reads the session's provenance record, if it has one.
    pub fn read_provenance<R>(&self, id: &str, f: impl FnOnce(&Provenance) -> R) -> Option<R> {
        let s = self.sessions.get(id)?;
        s.provenance.as_deref().map(f)
    }

    /// Late findings not yet applied whose action is stronger than ALLOW; marks them
    /// applied so each affects exactly one later decision.
    pub fn take_late_findings(&self, id: &str) -> Vec<Finding> {
        let Some(mut s) = self.sessions.get_mut(id) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for f in s.findings.iter_mut() {
            if f.late && !f.applied && f.action > Action::Allow {
                f.applied = true;
                out.push(f.clone());
            }
        }
        out
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Finding> {
        self.findings.subscribe()
    }

    /// The pending pause for this exact call, or a new one. Repeating a paused call before a
    /// human answers returns the same pause id, also when the repeats race.
    pub fn pause(&self, new: NewPause<'_>) -> Pause {
        let key = (new.session.to_string(), new.fingerprint);
        if self.pauses.len() >= MAX_PAUSES {
            self.sweep_pauses_for_room();
        }
        // The index entry is held while the pause is looked up and created, so two identical
        // calls at once get one pause. Only the index is locked here, never `pauses` twice.
        let mut slot = self.pause_index.entry(key).or_default();
        if let Some(p) = self.pauses.get(slot.as_str())
            && p.state() == PauseState::Pending
        {
            return p.clone();
        }
        let now = SystemTime::now();
        let p = Pause {
            id: new_pause_id(),
            session_id: new.session.to_string(),
            step_id: clip(new.step, 256),
            tool_name: clip(new.tool, 256),
            reason: clip(new.reason, 1024),
            redacted_arguments_json: clip(new.redacted_arguments_json, MAX_PAUSE_ARGS_BYTES),
            fingerprint: new.fingerprint,
            cause: new.cause,
            state: PauseState::Pending,
            created_at: now,
            expires_at: now + new.ttl,
            expires: Instant::now() + new.ttl,
            resolved: None,
            approver: String::new(),
            note: String::new(),
            caller: clip(new.caller, 512),
        };
        self.pauses.insert(p.id.clone(), p.clone());
        *slot = p.id.clone();
        p
    }

    /// Makes room when the pause table is full: expired and resolved pauses first, then the
    /// oldest pending ones (which then read as unknown, so their calls are judged afresh
    /// and paused again).
    fn sweep_pauses_for_room(&self) {
        self.pauses
            .retain(|_, p| matches!(p.state(), PauseState::Pending | PauseState::Approved));
        if self.pauses.len() >= MAX_PAUSES {
            let ages = self.pauses.iter().map(|p| (p.expires, p.key().clone()));
            for id in oldest(ages, MAX_PAUSES / 100 + 1) {
                self.pauses.remove(&id);
            }
        }
        self.prune_pause_index();
    }

    /// A human's answer. Only a pending pause can be resolved; an expired one stays expired.
    pub fn resolve(
        &self,
        id: &str,
        approve: bool,
        approver: &str,
        note: &str,
    ) -> Result<Pause, PauseError> {
        let mut p = self
            .pauses
            .get_mut(id)
            .ok_or_else(|| PauseError::NotFound(id.to_string()))?;
        let state = p.state();
        if state != PauseState::Pending {
            return Err(PauseError::AlreadyResolved {
                id: id.to_string(),
                state,
            });
        }
        p.state = if approve {
            PauseState::Approved
        } else {
            PauseState::Denied
        };
        p.resolved = Some(Instant::now());
        p.approver = clip(approver, 256);
        p.note = clip(note, 1024);
        Ok(p.clone())
    }

    /// What a resubmitted call's pause id means. An approval is used up by the call it
    /// lets through.
    pub fn redeem(&self, id: &str, session: &str, fingerprint: &[u8; 32]) -> Redeemed {
        let Some(mut p) = self.pauses.get_mut(id) else {
            return Redeemed::NotThisCall;
        };
        if p.session_id != session || &p.fingerprint != fingerprint {
            return Redeemed::NotThisCall;
        }
        match p.state() {
            PauseState::Approved => {
                p.state = PauseState::Used;
                Redeemed::Approved(p.clone())
            }
            PauseState::Pending => Redeemed::Pending(p.clone()),
            PauseState::Denied => Redeemed::Denied(p.clone()),
            PauseState::Expired => Redeemed::Expired(p.clone()),
            PauseState::Used => Redeemed::NotThisCall,
        }
    }

    /// Gives back an approval whose resubmitted call did not pass after all (another rule
    /// stopped or retried it): the human approved the call, not that outcome.
    pub fn restore_approval(&self, id: &str) {
        if let Some(mut p) = self.pauses.get_mut(id)
            && p.state == PauseState::Used
        {
            p.state = PauseState::Approved;
        }
    }

    /// Pending pauses, oldest first; with a session, every pause of that session.
    pub fn list_pauses(&self, session: Option<&str>) -> Vec<(Pause, PauseState)> {
        let mut out: Vec<(Pause, PauseState)> = self
            .pauses
            .iter()
            .filter(|p| match session {
                Some(s) => p.session_id == s,
                None => p.state() == PauseState::Pending,
            })
            .map(|p| (p.clone(), p.state()))
            .collect();
        out.sort_by(|a, b| {
            a.0.created_at
                .cmp(&b.0.created_at)
                .then(a.0.id.cmp(&b.0.id))
        });
        out
    }

    pub fn pending_pauses(&self) -> usize {
        self.pauses
            .iter()
            .filter(|p| p.state() == PauseState::Pending)
            .count()
    }
}

/// The keys of the `n` earliest instants: what to evict first. A partial selection, not a
/// full sort, since only the oldest hundredth of a table is dropped at a time.
fn oldest<K: Ord>(ages: impl Iterator<Item = (Instant, K)>, n: usize) -> Vec<K> {
    let mut ages: Vec<(Instant, K)> = ages.collect();
    if n < ages.len() {
        ages.select_nth_unstable(n);
        ages.truncate(n);
    }
    ages.into_iter().map(|(_, k)| k).collect()
}

fn new_pause_id() -> String {
    let mut b = [0u8; 12];
    // A pause id only needs to be unguessable to other callers; if the OS source fails, a
    // clock-and-counter id is still unique.
    if getrandom::fill(&mut b).is_err() {
        static N: AtomicU64 = AtomicU64::new(0);
        let t = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        b[..8].copy_from_slice(&t.to_le_bytes());
        b[8..].copy_from_slice(&(N.fetch_add(1, Ordering::Relaxed) as u32).to_le_bytes());
    }
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("pause-{hex}")
}

pub mod shared;

#[cfg(test)]
mod tests;
