//! Session state shared by replicas through Redis (`sessions.backend: redis`).
//!
//! The engine keeps working on this process's `SessionStore`. Around each decision the front
//! door makes one round trip before it (`pull`: the session's strikes, flags, provenance,
//! late findings and retry count are read into the local store, rate-limit tokens are taken
//! and a resubmitted pause is redeemed, all in one script, so each is atomic across
//! replicas) and, only when the decision changed the session, a write after it (`commit`:
//! strikes added, flags set, provenance written, a pause registered, in one script), which
//! the engine pipelines rather than waits for, except when it registers a pause.
//! Pauses live in Redis alone, so any replica can list and resolve them.
//!
//! Keys (`P` is `sessions.key_prefix`): `P:s:SID` (hash: strikes, flag, hr), `P:s:SID:prov`,
//! `P:s:SID:retry`, `P:s:SID:late`, `P:s:SID:findings`, `P:s:SID:pauses`, `P:p:ID` (a pause),
//! `P:pi:SID:FP` (a call's pending pause), `P:pending` (pending pauses by expiry) and
//! `P:rl:LIMIT:KEY` (token buckets). Every key expires: session keys with the session TTL,
//! pauses an hour after they expire, buckets once they would be full again.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::aio::ConnectionManager;
use redis::{Script, Value as RValue};
use serde::{Deserialize, Serialize};
use tokio::sync::OnceCell;

use super::{Finding, Pause, PauseError, PauseState, Redeemed};
use crate::decision::{Action, RiskLevel, VerdictKind};
use crate::event::EventKind;
use crate::flow::provenance::Provenance;
use crate::policy::{RateLimit, RateScope, SharedSessions};

/// Findings kept per session, as in memory.
const MAX_FINDINGS: usize = 64;
/// Pauses listed at most per call.
const MAX_LISTED: isize = 1000;

#[derive(Debug, thiserror::Error)]
pub enum SharedError {
    #[error("session store: {0}")]
    Redis(String),
    #[error("session store: no answer within {0:?}")]
    Timeout(Duration),
    #[error("session store: not connected yet")]
    NotConnected,
    #[error("session store: unexpected reply: {0}")]
    Reply(String),
}

impl From<redis::RedisError> for SharedError {
    fn from(e: redis::RedisError) -> Self {
        // The error's text names the command and the server's reason, never a value.
        SharedError::Redis(e.to_string())
    }
}

/// The shared store: one multiplexed connection (reconnected with backoff by the redis
/// crate), every command bounded by `timeout`.
pub struct Shared {
    client: redis::Client,
    conn: OnceCell<ConnectionManager>,
    prefix: String,
    pub timeout: Duration,
    pub fail_closed_tiers: Vec<RiskLevel>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may carry a password.
        f.debug_struct("Shared")
            .field("prefix", &self.prefix)
            .finish()
    }
}

/// What one decision needs from the shared store before it decides.
#[derive(Debug, Default)]
pub struct PullRequest<'a> {
    pub session: &'a str,
    pub tenant: &'a str,
    pub ttl: Duration,
    pub want_provenance: bool,
    /// This decision records an event in the provenance record: the shared event count
    /// goes up by one.
    pub count_event: bool,
    /// `step\0call` of a tool call, whose retry count is read.
    pub retry_key: Option<String>,
    /// A resubmitted call: its pause id and call fingerprint.
    pub redeem: Option<(&'a str, [u8; 32])>,
    /// The rate limits that apply to this call; one token is taken from each.
    pub limits: Vec<&'a RateLimit>,
}

/// What the shared store said, for the local store and the pipeline.
#[derive(Debug, Default, Clone)]
pub struct Pulled {
    pub strikes: u32,
    pub flag_trajectory: bool,
    pub used_high_risk_tool: bool,
    pub provenance: Option<Box<Provenance>>,
    /// The record's bytes as read, so an unchanged record is not written back.
    pub provenance_bytes: Vec<u8>,
    /// Late findings not yet applied, taken: this decision applies them.
    pub late: Vec<Finding>,
    pub retry_count: u32,
    pub redeemed: Option<Redeemed>,
    /// Per limit id: whether a token was taken.
    pub rate: Vec<(String, bool)>,
}

impl Pulled {
    pub fn rate_allows(&self, id: &str) -> Option<bool> {
        self.rate.iter().find(|(l, _)| l == id).map(|(_, ok)| *ok)
    }
}

/// What a decision changed in its session, written after it.
#[derive(Debug, Default)]
pub struct Commit {
    pub session: String,
    pub ttl: Duration,
    pub strikes: u32,
    pub flag_trajectory: bool,
    pub used_high_risk_tool: bool,
    pub provenance: Option<Vec<u8>>,
    pub retry: Option<(String, u32)>,
    /// An approval whose call did not pass after all: given back.
    pub restore_approval: Option<String>,
    /// A call that paused: registered (or the call's pending pause found).
    pub pause: Option<Pause>,
}

impl Commit {
    pub fn is_empty(&self) -> bool {
        self.strikes == 0
            && !self.flag_trajectory
            && !self.used_high_risk_tool
            && self.provenance.is_none()
            && self.retry.is_none()
            && self.restore_approval.is_none()
            && self.pause.is_none()
    }
}

/// A session as the shared store holds it (GetSession).
#[derive(Debug, Default)]
pub struct SharedSession {
    pub strikes: u32,
    pub flag_trajectory: bool,
    pub used_high_risk_tool: bool,
    pub findings: Vec<Finding>,
    pub provenance: Option<Provenance>,
}

/// A finding as stored: the fields of `Finding` that carry meaning after the fact.
#[derive(Debug, Serialize, Deserialize)]
struct StoredFinding {
    session_id: String,
    step_id: String,
    rule_id: String,
    event: EventKind,
    tool_name: String,
    verdict: Option<VerdictKind>,
    risk_score: f64,
    explanation: String,
    guidance: String,
    action: Action,
    risk_level: RiskLevel,
    decision_id: String,
    late: bool,
    injection: bool,
    observed_ms: u64,
}

impl StoredFinding {
    fn of(f: &Finding) -> StoredFinding {
        StoredFinding {
            session_id: f.session_id.clone(),
            step_id: f.step_id.clone(),
            rule_id: f.rule_id.clone(),
            event: f.event,
            tool_name: f.tool_name.clone(),
            verdict: f.verdict,
            risk_score: f.risk_score,
            explanation: f.explanation.clone(),
            guidance: f.guidance.clone(),
            action: f.action,
            risk_level: f.risk_level,
            decision_id: f.decision_id.clone(),
            late: f.late,
            injection: f.injection,
            observed_ms: unix_ms(f.observed_at),
        }
    }

    fn finding(self) -> Finding {
        Finding {
            session_id: self.session_id,
            step_id: self.step_id,
            rule_id: self.rule_id,
            event: self.event,
            tool_name: self.tool_name,
            verdict: self.verdict,
            risk_score: self.risk_score,
            explanation: self.explanation,
            guidance: self.guidance,
            action: self.action,
            risk_level: self.risk_level,
            decision_id: self.decision_id,
            late: self.late,
            applied: false,
            injection: self.injection,
            observed_at: UNIX_EPOCH + Duration::from_millis(self.observed_ms),
        }
    }
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

// The scripts read the server's clock (`TIME`), so replicas whose clocks differ still agree
// on buckets and expiries.

/// KEYS: session, prov, late, retry, pause, then one bucket per limit.
/// ARGV: ttl_ms, want_prov, retry_field, session id, fingerprint, then burst and
/// tokens-per-ms per limit.
const PULL: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local s = {}
local prov = false
local late = {}
local retry = 0
-- A call with no session (only tenant or global buckets) touches no session key.
if ARGV[4] ~= '' then
  redis.call('HINCRBY', KEYS[1], 'strikes', 0)
  if ARGV[2] == '2' then redis.call('HINCRBY', KEYS[1], 'seq', 1) end
  s = redis.call('HMGET', KEYS[1], 'strikes', 'flag', 'hr', 'seq')
  for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ttl) end
  if ARGV[2] ~= '0' then prov = redis.call('GET', KEYS[2]) end
  late = redis.call('LRANGE', KEYS[3], 0, -1)
  if #late > 0 then redis.call('DEL', KEYS[3]) end
  if ARGV[3] ~= '' then retry = tonumber(redis.call('HGET', KEYS[4], ARGV[3]) or '0') end
end
local pause = {}
if ARGV[5] ~= '' then
  local p = redis.call('HGETALL', KEYS[5])
  local h = {}
  for i = 1, #p, 2 do h[p[i]] = p[i + 1] end
  if ARGV[4] ~= '' and h.session == ARGV[4] and h.fp == ARGV[5] then
    local state = h.state
    if (state == 'pending' or state == 'approved') and now >= tonumber(h.expires_ms) then
      state = 'expired'
    end
    if state == 'approved' then
      redis.call('HSET', KEYS[5], 'state', 'used')
    end
    pause = p
    table.insert(pause, 'seen_state')
    table.insert(pause, state)
  end
end
local rate = {}
for i = 6, #KEYS do
  local burst = tonumber(ARGV[6 + (i - 6) * 2])
  local per_ms = tonumber(ARGV[7 + (i - 6) * 2])
  local b = redis.call('HMGET', KEYS[i], 'tokens', 'ts')
  local tokens = tonumber(b[1]) or burst
  local ts = tonumber(b[2]) or now
  tokens = math.min(burst, tokens + math.max(0, now - ts) * per_ms)
  local ok = 0
  if tokens >= 1 then tokens = tokens - 1; ok = 1 end
  redis.call('HSET', KEYS[i], 'tokens', tostring(tokens), 'ts', tostring(now))
  local full_in = 60000
  if per_ms > 0 then full_in = math.ceil((burst - tokens) / per_ms) + 1000 end
  redis.call('PEXPIRE', KEYS[i], full_in)
  table.insert(rate, ok)
end
return {s[1] or '0', s[2] or '0', s[3] or '0', prov, late, retry, pause, rate, s[4] or '0'}
"#;

/// KEYS: session, prov, retry, restore pause, new pause, pause index, pending, session pauses.
/// ARGV: ttl_ms, strikes, flag, hr, prov, retry field, retry count, restore id, then for a
/// new pause the pause key prefix and its fields as name/value pairs (`ttl_ms` and `id`
/// among them).
const COMMIT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
if ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[1], 'strikes', ARGV[2]) end
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'flag', '1') end
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'hr', '1') end
redis.call('PEXPIRE', KEYS[1], ttl)
if ARGV[5] ~= '' then redis.call('SET', KEYS[2], ARGV[5], 'PX', ttl) end
if ARGV[6] ~= '' then
  local cur = tonumber(redis.call('HGET', KEYS[3], ARGV[6]) or '0')
  -- At most 256 counters per session, as in memory; past it a new call's count stays here.
  local room = cur > 0 or redis.call('HLEN', KEYS[3]) < 256
  if room and tonumber(ARGV[7]) > cur then redis.call('HSET', KEYS[3], ARGV[6], ARGV[7]) end
  redis.call('PEXPIRE', KEYS[3], ttl)
end
if ARGV[8] ~= '' and redis.call('HGET', KEYS[4], 'state') == 'used' then
  redis.call('HSET', KEYS[4], 'state', 'approved')
end
if #ARGV > 9 then
  -- The same call paused on another replica a moment ago: one pause, one id.
  local existing = redis.call('GET', KEYS[6])
  if existing then
    local st = redis.call('HMGET', ARGV[9] .. existing, 'state', 'expires_ms')
    if st[1] == 'pending' and now < tonumber(st[2]) then return existing end
  end
  local fields = {}
  local expires = 0
  local id = ''
  for i = 10, #ARGV, 2 do
    table.insert(fields, ARGV[i]); table.insert(fields, ARGV[i + 1])
    if ARGV[i] == 'ttl_ms' then expires = now + tonumber(ARGV[i + 1]) end
    if ARGV[i] == 'id' then id = ARGV[i + 1] end
  end
  table.insert(fields, 'created_ms'); table.insert(fields, tostring(now))
  table.insert(fields, 'expires_ms'); table.insert(fields, tostring(expires))
  table.insert(fields, 'state'); table.insert(fields, 'pending')
  redis.call('HSET', KEYS[5], unpack(fields))
  redis.call('PEXPIREAT', KEYS[5], expires + 3600000)
  redis.call('SET', KEYS[6], id, 'PXAT', expires)
  -- Pending pauses by expiry: the expired ones go, and at most 10,000 stay listed.
  redis.call('ZREMRANGEBYSCORE', KEYS[7], '-inf', now)
  redis.call('ZADD', KEYS[7], expires, id)
  local over = redis.call('ZCARD', KEYS[7]) - 10000
  if over > 0 then redis.call('ZPOPMIN', KEYS[7], over) end
  redis.call('SADD', KEYS[8], id)
  redis.call('PEXPIRE', KEYS[8], math.max(ttl, expires - now + 3600000))
  return id
end
return ''
"#;

/// KEYS: pause, pending. ARGV: approve, approver, note.
const RESOLVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h = redis.call('HMGET', KEYS[1], 'state', 'expires_ms')
if not h[1] then return {'missing'} end
local state = h[1]
if (state == 'pending' or state == 'approved') and now >= tonumber(h[2]) then state = 'expired' end
if state ~= 'pending' then return {'settled', state} end
local new = 'denied'
if ARGV[1] == '1' then new = 'approved' end
redis.call('HSET', KEYS[1], 'state', new, 'approver', ARGV[2], 'note', ARGV[3], 'resolved_ms', tostring(now))
redis.call('ZREM', KEYS[2], ARGV[4])
return {'ok', new}
"#;

/// KEYS: findings, late, session. ARGV: ttl_ms, finding JSON, late ('1'), flag ('1').
const FINDING: &str = r#"
local ttl = tonumber(ARGV[1])
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('LTRIM', KEYS[1], -64, -1)
redis.call('PEXPIRE', KEYS[1], ttl)
if ARGV[3] == '1' then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('LTRIM', KEYS[2], -64, -1)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('HSET', KEYS[3], 'flag', '1')
end
return 1
"#;

struct Scripts {
    pull: Script,
    commit: Script,
    resolve: Script,
    finding: Script,
}

fn scripts() -> &'static Scripts {
    static S: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    S.get_or_init(|| Scripts {
        pull: Script::new(PULL),
        commit: Script::new(COMMIT),
        resolve: Script::new(RESOLVE),
        finding: Script::new(FINDING),
    })
}

fn hex(b: &[u8]) -> String {
    crate::text::lower_hex(b)
}

impl Shared {
    /// Opens the store. The URL is checked here; the connection is made by `connect`, so a
    /// Redis that is down at start-up does not stop the server (the fail mode applies until
    /// it answers).
    pub fn new(url: &str, cfg: &SharedSessions) -> Result<Shared, SharedError> {
        let client = redis::Client::open(url)
            .map_err(|_| SharedError::Redis("not a Redis URL (redis://HOST:PORT/DB)".into()))?;
        // Replicas must hash flow values alike, and keep doing so when the Redis password or
        // host changes: the key comes from a secret they share, or else from the key prefix.
        let secret = match &cfg.hash_key_env {
            Some(env) => std::env::var(env).map_err(|_| {
                SharedError::Redis(format!(
                    "sessions.hash_key_env names `{env}`, which is not set"
                ))
            })?,
            None => format!("prefix:{}", cfg.key_prefix),
        };
        crate::flow::values::share_hash_key(secret.as_bytes());
        Ok(Shared {
            client,
            conn: OnceCell::new(),
            prefix: cfg.key_prefix.clone(),
            timeout: cfg.timeout,
            fail_closed_tiers: cfg.fail_closed_tiers.clone(),
        })
    }

    /// Connects, retrying with backoff until it succeeds or `stop` resolves. Later failures
    /// are reconnected by the connection manager itself.
    pub async fn connect(self: Arc<Self>, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut backoff = Duration::from_millis(100);
        loop {
            let cfg = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(self.timeout.max(Duration::from_millis(500))))
                .set_response_timeout(Some(self.timeout))
                .set_number_of_retries(2)
                .set_max_delay(Duration::from_secs(2));
            match redis::aio::ConnectionManager::new_with_config(self.client.clone(), cfg).await {
                Ok(c) => {
                    let _ = self.conn.set(c);
                    tracing::info!("session store connected");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "session store unreachable");
                }
            }
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    fn conn(&self) -> Result<ConnectionManager, SharedError> {
        self.conn.get().cloned().ok_or(SharedError::NotConnected)
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut k = self.prefix.clone();
        for p in parts {
            k.push(':');
            k.push_str(p);
        }
        k
    }

    async fn bounded<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, redis::RedisError>>,
    ) -> Result<T, SharedError> {
        match tokio::time::timeout(self.timeout, f).await {
            Ok(r) => Ok(r?),
            Err(_) => Err(SharedError::Timeout(self.timeout)),
        }
    }

    /// The one round trip before a decision.
    pub async fn pull(&self, r: &PullRequest<'_>) -> Result<Pulled, SharedError> {
        let mut conn = self.conn()?;
        let sid = r.session;
        let pause_key = match r.redeem {
            Some((id, _)) => self.key(&["p", id]),
            None => self.key(&["p", ""]),
        };
        let mut inv = scripts().pull.prepare_invoke();
        inv.key(self.key(&["s", sid]))
            .key(self.key(&["s", sid, "prov"]))
            .key(self.key(&["s", sid, "late"]))
            .key(self.key(&["s", sid, "retry"]))
            .key(pause_key);
        inv.arg(ms(r.ttl))
            .arg(match (r.want_provenance, r.count_event) {
                (false, _) => "0",
                (true, false) => "1",
                (true, true) => "2",
            })
            .arg(r.retry_key.as_deref().unwrap_or(""))
            .arg(sid)
            .arg(r.redeem.map(|(_, fp)| hex(&fp)).unwrap_or_default());
        for l in &r.limits {
            let scope = match l.per {
                RateScope::Session => format!("s:{sid}"),
                RateScope::Tenant => format!("t:{}", r.tenant),
                RateScope::Global => "g".to_string(),
            };
            inv.key(self.key(&["rl", &l.id, &scope]));
            inv.arg(f64::from(l.burst)).arg(l.per_minute / 60_000.0);
        }
        let reply: RValue = self.bounded(inv.invoke_async(&mut conn)).await?;
        let RValue::Array(parts) = reply else {
            return Err(SharedError::Reply("pull".into()));
        };
        let get = |i: usize| parts.get(i).cloned().unwrap_or(RValue::Nil);
        let mut out = Pulled {
            strikes: int(&get(0)) as u32,
            flag_trajectory: int(&get(1)) == 1,
            used_high_risk_tool: int(&get(2)) == 1,
            retry_count: int(&get(5)) as u32,
            ..Pulled::default()
        };
        if let RValue::BulkString(bytes) = get(3) {
            // A record this version cannot read is dropped, not trusted: the session then
            // starts a new record.
            if let Ok(mut p) = postcard::from_bytes::<Provenance>(&bytes) {
                // The events before this one: the flow stage counts this one.
                let seq = int(&get(8)) as u32;
                p.seq = if r.count_event {
                    seq.saturating_sub(1)
                } else {
                    seq
                };
                out.provenance = Some(Box::new(p));
                out.provenance_bytes = bytes;
            }
        }
        if let RValue::Array(items) = get(4) {
            for it in items {
                if let Some(t) = text(&it)
                    && let Ok(f) = serde_json::from_str::<StoredFinding>(&t)
                {
                    out.late.push(f.finding());
                }
            }
        }
        if let RValue::Array(fields) = get(6)
            && !fields.is_empty()
        {
            let h = pairs(&fields);
            let state = h
                .iter()
                .find(|(k, _)| k == "seen_state")
                .map(|(_, v)| v.as_str())
                .unwrap_or("");
            let p = pause_of(&h);
            out.redeemed = Some(match (state, p) {
                ("approved", Some(p)) => Redeemed::Approved(p),
                ("denied", Some(p)) => Redeemed::Denied(p),
                ("expired", Some(p)) => Redeemed::Expired(p),
                ("pending", Some(p)) => Redeemed::Pending(p),
                _ => Redeemed::NotThisCall,
            });
        } else if r.redeem.is_some() {
            out.redeemed = Some(Redeemed::NotThisCall);
        }
        if let RValue::Array(oks) = get(7) {
            for (l, ok) in r.limits.iter().zip(oks) {
                out.rate.push((l.id.clone(), int(&ok) == 1));
            }
        }
        Ok(out)
    }

    /// The round trip after a decision that changed its session. Returns the id of the
    /// call's pending pause when one was registered (an identical call paused on another
    /// replica keeps its id).
    pub async fn commit(&self, c: &Commit) -> Result<Option<String>, SharedError> {
        let mut conn = self.conn()?;
        let sid = c.session.as_str();
        let mut inv = scripts().commit.prepare_invoke();
        let restore = c.restore_approval.as_deref().unwrap_or("");
        let (pause_key, index_key) = match &c.pause {
            Some(p) => (
                self.key(&["p", &p.id]),
                self.key(&["pi", sid, &hex(&p.fingerprint)]),
            ),
            None => (self.key(&["p", ""]), self.key(&["pi", sid, ""])),
        };
        inv.key(self.key(&["s", sid]))
            .key(self.key(&["s", sid, "prov"]))
            .key(self.key(&["s", sid, "retry"]))
            .key(self.key(&["p", restore]))
            .key(pause_key)
            .key(index_key)
            .key(self.key(&["pending"]))
            .key(self.key(&["s", sid, "pauses"]));
        let (retry_field, retry_count) = c.retry.clone().unwrap_or_default();
        inv.arg(ms(c.ttl))
            .arg(c.strikes)
            .arg(if c.flag_trajectory { "1" } else { "0" })
            .arg(if c.used_high_risk_tool { "1" } else { "0" })
            .arg(c.provenance.as_deref().unwrap_or(b""))
            .arg(retry_field)
            .arg(retry_count)
            .arg(restore);
        if let Some(p) = &c.pause {
            inv.arg(self.key(&["p", ""]));
            let ttl = p
                .expires_at
                .duration_since(p.created_at)
                .unwrap_or_default();
            for (k, v) in [
                ("session", p.session_id.clone()),
                ("step", p.step_id.clone()),
                ("tool", p.tool_name.clone()),
                ("reason", p.reason.clone()),
                ("args", p.redacted_arguments_json.clone()),
                ("fp", hex(&p.fingerprint)),
                ("cause", serde_json::to_string(&p.cause).unwrap_or_default()),
                ("ttl_ms", ms(ttl).to_string()),
                ("caller", p.caller.clone()),
                ("id", p.id.clone()),
            ] {
                inv.arg(k).arg(v);
            }
        }
        let reply: RValue = self.bounded(inv.invoke_async(&mut conn)).await?;
        Ok(text(&reply).filter(|id| !id.is_empty()))
    }

    /// A human's answer, from any replica.
    pub async fn resolve(
        &self,
        id: &str,
        approve: bool,
        approver: &str,
        note: &str,
    ) -> Result<Result<Pause, PauseError>, SharedError> {
        let mut conn = self.conn()?;
        let mut inv = scripts().resolve.prepare_invoke();
        inv.key(self.key(&["p", id])).key(self.key(&["pending"]));
        inv.arg(if approve { "1" } else { "0" })
            .arg(super::clip(approver, 256))
            .arg(super::clip(note, 1024))
            .arg(id);
        let reply: RValue = self.bounded(inv.invoke_async(&mut conn)).await?;
        let RValue::Array(parts) = reply else {
            return Err(SharedError::Reply("resolve".into()));
        };
        match parts.first().and_then(text).as_deref() {
            Some("missing") => Ok(Err(PauseError::NotFound(id.to_string()))),
            Some("settled") => {
                let state = parts.get(1).and_then(text).unwrap_or_default();
                Ok(Err(PauseError::AlreadyResolved {
                    id: id.to_string(),
                    state: state_of(&state),
                }))
            }
            Some("ok") => match self.pause(id).await? {
                Some(p) => Ok(Ok(p)),
                None => Ok(Err(PauseError::NotFound(id.to_string()))),
            },
            _ => Err(SharedError::Reply("resolve".into())),
        }
    }

    /// One pause by id; `None` when the store has no such pause.
    pub async fn pause(&self, id: &str) -> Result<Option<Pause>, SharedError> {
        let mut conn = self.conn()?;
        let fields: Vec<RValue> = self
            .bounded(
                redis::cmd("HGETALL")
                    .arg(self.key(&["p", id]))
                    .query_async(&mut conn),
            )
            .await?;
        Ok(pause_of(&pairs(&fields)))
    }

    /// Pending pauses, oldest first; with a session, every pause of that session.
    pub async fn list_pauses(
        &self,
        session: Option<&str>,
    ) -> Result<Vec<(Pause, PauseState)>, SharedError> {
        let mut conn = self.conn()?;
        let ids: Vec<String> = match session {
            Some(s) => {
                self.bounded(
                    redis::cmd("SMEMBERS")
                        .arg(self.key(&["s", s, "pauses"]))
                        .query_async(&mut conn),
                )
                .await?
            }
            None => {
                self.bounded(
                    redis::cmd("ZRANGE")
                        .arg(self.key(&["pending"]))
                        .arg(0)
                        .arg(MAX_LISTED - 1)
                        .query_async(&mut conn),
                )
                .await?
            }
        };
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("HGETALL").arg(self.key(&["p", id]));
        }
        let all: Vec<Vec<RValue>> = self.bounded(pipe.query_async(&mut conn)).await?;
        let mut out: Vec<(Pause, PauseState)> = all
            .iter()
            .filter_map(|f| pause_of(&pairs(f)))
            .map(|p| {
                let s = p.state();
                (p, s)
            })
            .filter(|(_, s)| session.is_some() || *s == PauseState::Pending)
            .collect();
        out.sort_by(|a, b| {
            a.0.created_at
                .cmp(&b.0.created_at)
                .then(a.0.id.cmp(&b.0.id))
        });
        Ok(out)
    }

    /// Pending pauses across replicas (for the gauge).
    pub async fn pending_pauses(&self) -> Result<usize, SharedError> {
        let mut conn = self.conn()?;
        let n: usize = self
            .bounded(
                redis::cmd("ZCARD")
                    .arg(self.key(&["pending"]))
                    .query_async(&mut conn),
            )
            .await?;
        Ok(n)
    }

    /// A deep verdict about one of the session's events: kept with the session and, when
    /// it came late and asks for more than ALLOW, queued for the session's next event on
    /// whichever replica serves it.
    pub async fn record_finding(&self, f: &Finding, ttl: Duration) -> Result<(), SharedError> {
        let mut conn = self.conn()?;
        let json = serde_json::to_string(&StoredFinding::of(f))
            .map_err(|e| SharedError::Reply(e.to_string()))?;
        let sid = &f.session_id;
        let mut inv = scripts().finding.prepare_invoke();
        inv.key(self.key(&["s", sid, "findings"]))
            .key(self.key(&["s", sid, "late"]))
            .key(self.key(&["s", sid]));
        let flag = matches!(f.verdict, Some(VerdictKind::Warn | VerdictKind::Block));
        inv.arg(ms(ttl))
            .arg(json)
            .arg(if f.late && f.action > Action::Allow {
                "1"
            } else {
                "0"
            })
            .arg(if flag { "1" } else { "0" });
        let _: RValue = self.bounded(inv.invoke_async(&mut conn)).await?;
        Ok(())
    }

    /// The session as the shared store holds it; `None` when it has no state there.
    pub async fn session(&self, sid: &str) -> Result<Option<SharedSession>, SharedError> {
        let mut conn = self.conn()?;
        let mut pipe = redis::pipe();
        pipe.cmd("HMGET")
            .arg(self.key(&["s", sid]))
            .arg("strikes")
            .arg("flag")
            .arg("hr")
            .arg("seq");
        pipe.cmd("LRANGE")
            .arg(self.key(&["s", sid, "findings"]))
            .arg(-(MAX_FINDINGS as isize))
            .arg(-1);
        pipe.cmd("GET").arg(self.key(&["s", sid, "prov"]));
        let (head, findings, prov): (Vec<Option<u64>>, Vec<String>, Option<Vec<u8>>) =
            self.bounded(pipe.query_async(&mut conn)).await?;
        let Some(strikes) = head.first().copied().flatten() else {
            return Ok(None);
        };
        Ok(Some(SharedSession {
            strikes: strikes as u32,
            flag_trajectory: head.get(1).copied().flatten() == Some(1),
            used_high_risk_tool: head.get(2).copied().flatten() == Some(1),
            findings: findings
                .iter()
                .filter_map(|t| serde_json::from_str::<StoredFinding>(t).ok())
                .map(StoredFinding::finding)
                .collect(),
            provenance: prov
                .and_then(|p| postcard::from_bytes::<Provenance>(&p).ok())
                .map(|mut p| {
                    p.seq = head.get(3).copied().flatten().unwrap_or(0) as u32;
                    p
                }),
        }))
    }
}

fn text(v: &RValue) -> Option<String> {
    match v {
        RValue::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        RValue::SimpleString(s) => Some(s.clone()),
        RValue::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

fn int(v: &RValue) -> i64 {
    match v {
        RValue::Int(i) => *i,
        other => text(other).and_then(|t| t.parse().ok()).unwrap_or(0),
    }
}

fn pairs(fields: &[RValue]) -> Vec<(String, String)> {
    fields
        .chunks(2)
        .filter_map(|c| Some((text(c.first()?)?, text(c.get(1)?)?)))
        .collect()
}

fn state_of(s: &str) -> PauseState {
    match s {
        "approved" => PauseState::Approved,
        "denied" => PauseState::Denied,
        "expired" => PauseState::Expired,
        "used" => PauseState::Used,
        _ => PauseState::Pending,
    }
}

/// A pause from its hash; `None` when a field is missing or malformed.
fn pause_of(h: &[(String, String)]) -> Option<Pause> {
    let get = |k: &str| h.iter().find(|(f, _)| f == k).map(|(_, v)| v.as_str());
    let num = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
    let mut fp = [0u8; 32];
    let fp_hex = get("fp")?;
    if fp_hex.len() != 64 {
        return None;
    }
    for (i, b) in fp.iter_mut().enumerate() {
        *b = u8::from_str_radix(fp_hex.get(i * 2..i * 2 + 2)?, 16).ok()?;
    }
    Some(Pause::from_shared(super::SharedPause {
        id: get("id")?.to_string(),
        session_id: get("session")?.to_string(),
        step_id: get("step").unwrap_or("").to_string(),
        tool_name: get("tool").unwrap_or("").to_string(),
        reason: get("reason").unwrap_or("").to_string(),
        redacted_arguments_json: get("args").unwrap_or("").to_string(),
        fingerprint: fp,
        cause: get("cause")
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default(),
        state: state_of(get("state")?),
        created_at: UNIX_EPOCH + Duration::from_millis(num("created_ms")?),
        expires_at: UNIX_EPOCH + Duration::from_millis(num("expires_ms")?),
        resolved_at: num("resolved_ms").map(|m| UNIX_EPOCH + Duration::from_millis(m)),
        approver: get("approver").unwrap_or("").to_string(),
        note: get("note").unwrap_or("").to_string(),
        caller: get("caller").unwrap_or("").to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provenance_record_reads_back_and_makes_the_same_bytes() {
        use crate::flow::provenance::Source;
        use crate::flow::values::ValueKind;
        let mut p = Provenance::default();
        p.seq = 7;
        let src = Source::new(3, EventKind::ToolCallResult, "email.read", "s1");
        let keys: Vec<_> = (0..200u64).map(|k| (k * 7919, ValueKind::Email)).collect();
        p.add_untrusted(src, &keys, false, 512);
        for k in 0..50u64 {
            p.add_trusted(k * 31, 512);
        }
        let bytes = postcard::to_allocvec(&p).unwrap();
        let back: Provenance = postcard::from_bytes(&bytes).unwrap();
        // A table read back iterates in another order; the bytes must not change.
        assert_eq!(postcard::to_allocvec(&back).unwrap(), bytes);
        assert_eq!(back.untrusted_values(), 200);
        assert_eq!(back.trusted_values(), 50);
        assert_eq!(back.seq, 0, "the event count is the shared store's");
    }

    #[test]
    fn a_pause_reads_back_from_its_hash() {
        let h: Vec<(String, String)> = [
            ("id", "pause-1"),
            ("session", "s1"),
            ("fp", &"ab".repeat(32)),
            ("state", "approved"),
            ("created_ms", "1000"),
            ("expires_ms", "99999999999999"),
            ("cause", "[\"pii\"]"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let p = pause_of(&h).unwrap();
        assert_eq!(p.id, "pause-1");
        assert_eq!(p.fingerprint, [0xab; 32]);
        assert_eq!(p.cause, vec!["pii".to_string()]);
        assert_eq!(p.state(), PauseState::Approved);
        let mut bad = h.clone();
        bad.retain(|(k, _)| k != "fp");
        assert!(pause_of(&bad).is_none());
    }
}
