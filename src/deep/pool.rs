//! The deep-rule queue: a bounded channel served by a fixed number of workers, plus the
//! verdict cache. Submitting never waits: a full queue is answered at once, so the fast path
//! cannot be slowed by deep rules. Memory is bounded twice: by `queue_capacity` jobs, and by
//! a byte budget on the event text they hold (`queue_bytes`, each event counted once), so
//! the worst case is the budget, not `queue_capacity × MAX_INPUT_BYTES`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::{mpsc, oneshot};

use super::{DeepError, DeepInput, DeepRule, Verdict};

/// What the pool reports: its queue depth and each job's outcome. Implemented by whoever
/// counts them (the metrics), so the pool knows no metrics registry.
pub trait PoolObserver: Send + Sync {
    fn queue_depth(&self, depth: i64);
    fn job(&self, rule: &str, outcome: &str);
}

/// The most text one job carries. Every built-in rule reads less than this (the verifier
/// 32 KiB, the classifier 64 KiB, the heuristics 256 KiB), so nothing they use is lost.
pub const MAX_INPUT_BYTES: usize = 256 * 1024;
/// Verdicts remembered for replay, by (policy version, rule, content).
const CACHE_ENTRIES: usize = 4096;

pub type JobResult = Result<Verdict, DeepError>;

/// Called with the result when the decision that asked for it has stopped waiting.
pub type LateSink = Box<dyn FnOnce(JobResult) + Send>;

/// Called when a job ends, with its outcome (`ok`, `timeout`, `error`) and when it started
/// running: the job's trace span.
pub type FinishHook = Box<dyn FnOnce(&'static str, SystemTime) + Send>;

struct Job {
    rule: Arc<dyn DeepRule>,
    input: Arc<DeepInput>,
    cache_key: [u8; 32],
    reply: oneshot::Sender<JobResult>,
    late: LateSink,
    finished: Option<FinishHook>,
}

/// How a submission went.
pub enum Submitted {
    /// The same rule judged the same content under the same policy before.
    Cached(Verdict),
    /// Queued; the receiver yields the result. Close it before dropping it so a result
    /// that lands later goes to the late sink.
    Queued(oneshot::Receiver<JobResult>),
    /// The queue is full: nothing was queued.
    Full,
}

/// Bytes of the queue's budget held by one input; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    bytes: usize,
    held: Arc<AtomicUsize>,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// Where an input keeps its charge. A copy of an input is a new input: it starts uncharged.
#[derive(Debug, Default)]
pub struct ChargeSlot(std::sync::OnceLock<Charge>);

impl Clone for ChargeSlot {
    fn clone(&self) -> Self {
        ChargeSlot::default()
    }
}

pub struct DeepPool {
    tx: mpsc::Sender<Job>,
    depth: Arc<AtomicI64>,
    /// Bytes of event text held by queued and running jobs' inputs.
    held: Arc<AtomicUsize>,
    max_bytes: usize,
    cache: Arc<Mutex<VerdictCache>>,
    observer: Option<Arc<dyn PoolObserver>>,
    capacity: usize,
    workers: usize,
    /// Load time of the policy this pool was sized for.
    sized_for: SystemTime,
}

impl std::fmt::Debug for DeepPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeepPool")
            .field("workers", &self.workers)
            .field("capacity", &self.capacity)
            .field("depth", &self.depth())
            .finish()
    }
}

impl DeepPool {
    /// Starts `workers` worker tasks on the current tokio runtime.
    /// `sized_for` is the load time of the policy whose settings these are.
    pub fn start(
        workers: usize,
        capacity: usize,
        max_bytes: usize,
        sized_for: SystemTime,
        observer: Option<Arc<dyn PoolObserver>>,
    ) -> Arc<DeepPool> {
        let workers = workers.max(1);
        let capacity = capacity.max(1);
        let (tx, rx) = mpsc::channel::<Job>(capacity);
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let depth = Arc::new(AtomicI64::new(0));
        let cache = Arc::new(Mutex::new(VerdictCache::default()));
        for _ in 0..workers {
            tokio::spawn(worker(
                rx.clone(),
                depth.clone(),
                cache.clone(),
                observer.clone(),
            ));
        }
        Arc::new(DeepPool {
            tx,
            depth,
            held: Arc::new(AtomicUsize::new(0)),
            max_bytes: max_bytes.max(1),
            cache,
            observer,
            capacity,
            workers,
            sized_for,
        })
    }

    pub fn sized_for(&self) -> SystemTime {
        self.sized_for
    }

    /// Jobs waiting for a worker.
    pub fn depth(&self) -> i64 {
        self.depth.load(Ordering::Relaxed)
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Bytes of event text the queued and running jobs hold now.
    pub fn held_bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Queues one job without waiting. `cache_key` must cover the policy version, the rule
    /// and everything in `input`.
    pub fn submit(
        &self,
        rule: Arc<dyn DeepRule>,
        input: Arc<DeepInput>,
        cache_key: [u8; 32],
        late: LateSink,
        finished: Option<FinishHook>,
    ) -> Submitted {
        if let Some(v) = self.cached(&cache_key) {
            self.count(rule.id(), "cached");
            return Submitted::Cached(v);
        }
        if input.charge.0.get().is_none() {
            let bytes = input.bytes();
            let before = self.held.fetch_add(bytes, Ordering::Relaxed);
            let charge = Charge {
                bytes,
                held: self.held.clone(),
            };
            if before + bytes > self.max_bytes {
                // Given back at once (dropped): the job is refused as a full queue is.
                drop(charge);
                self.count(rule.id(), "queue_full");
                return Submitted::Full;
            }
            // Another job of the same event may have charged it a moment ago: then this
            // charge is dropped and its bytes given back.
            let _ = input.charge.0.set(charge);
        }
        let (reply, rx) = oneshot::channel();
        let id = rule.id().to_string();
        let job = Job {
            rule,
            input,
            cache_key,
            reply,
            late,
            finished,
        };
        // Counted before the send so a worker that takes the job at once never sees the
        // depth go below zero.
        self.depth.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(job) {
            Ok(()) => {
                self.publish_depth();
                Submitted::Queued(rx)
            }
            Err(_) => {
                self.depth.fetch_sub(1, Ordering::Relaxed);
                self.count(&id, "queue_full");
                Submitted::Full
            }
        }
    }

    /// Runs a local rule on the calling thread when it answers there (`check_inline`),
    /// with the same cache, counts and span as a pooled job. `None`: submit it instead
    /// (`finished` is then left in place).
    pub fn inline(
        &self,
        rule: &Arc<dyn DeepRule>,
        input: &DeepInput,
        cache_key: [u8; 32],
        finished: &mut Option<FinishHook>,
    ) -> Option<JobResult> {
        if let Some(v) = self.cached(&cache_key) {
            self.count(rule.id(), "cached");
            return Some(Ok(v));
        }
        let started = SystemTime::now();
        let result = rule.check_inline(input)?;
        Some(finish_job(
            &self.cache,
            self.observer.as_ref(),
            rule.id(),
            cache_key,
            result,
            finished.take(),
            started,
        ))
    }

    fn cached(&self, key: &[u8; 32]) -> Option<Verdict> {
        self.cache.lock().ok()?.get(key)
    }

    fn count(&self, rule: &str, outcome: &str) {
        if let Some(m) = &self.observer {
            m.job(rule, outcome);
        }
    }

    fn publish_depth(&self) {
        if let Some(m) = &self.observer {
            m.queue_depth(self.depth());
        }
    }
}

/// What every finished job does, pooled or inline: its verdict's text is bounded, its
/// outcome counted, its span ended, and a verdict cached.
fn finish_job(
    cache: &Mutex<VerdictCache>,
    observer: Option<&Arc<dyn PoolObserver>>,
    rule: &str,
    cache_key: [u8; 32],
    result: JobResult,
    finished: Option<FinishHook>,
    started: SystemTime,
) -> JobResult {
    let result = result.map(bounded);
    let outcome = match &result {
        Ok(_) => "ok",
        Err(DeepError::Timeout(_)) => "timeout",
        Err(_) => "error",
    };
    if let Some(m) = observer {
        m.job(rule, outcome);
    }
    if let Some(f) = finished {
        f(outcome, started);
    }
    if let Ok(v) = &result
        && let Ok(mut c) = cache.lock()
    {
        c.put(cache_key, v.clone());
    }
    result
}

async fn worker(
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Job>>>,
    depth: Arc<AtomicI64>,
    cache: Arc<Mutex<VerdictCache>>,
    observer: Option<Arc<dyn PoolObserver>>,
) {
    loop {
        // The lock is held only while waiting for the next job, never while running one.
        let job = {
            let mut rx = rx.lock().await;
            rx.recv().await
        };
        let Some(job) = job else {
            return;
        };
        let d = depth.fetch_sub(1, Ordering::Relaxed) - 1;
        if let Some(m) = &observer {
            m.queue_depth(d);
        }
        let started = SystemTime::now();
        let result = run(job.rule.clone(), job.input.clone()).await;
        let result = finish_job(
            &cache,
            observer.as_ref(),
            job.rule.id(),
            job.cache_key,
            result,
            job.finished,
            started,
        );
        // A closed receiver means the decision stopped waiting: the verdict is not lost, it
        // goes to the session as a late finding.
        if let Err(result) = job.reply.send(result) {
            (job.late)(result);
        }
    }
}

/// Runs one check in its own task, so a rule that panics fails its job instead of killing
/// the worker, and one that overruns its budget is cancelled.
async fn run(rule: Arc<dyn DeepRule>, input: Arc<DeepInput>) -> JobResult {
    let budget = rule.budget();
    let mut task = tokio::spawn(async move { rule.check(input).await });
    match tokio::time::timeout(budget, &mut task).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(DeepError::Transport(format!("rule failed: {e}"))),
        Err(_) => {
            task.abort();
            Err(DeepError::Timeout(budget))
        }
    }
}

/// Longest explanation or guidance kept from a rule: verdicts are cached and kept on
/// sessions, and a model's reply can be long.
const MAX_VERDICT_TEXT: usize = 2048;
/// Most tags and policy ids kept from a rule, and the longest of each.
const MAX_VERDICT_LABELS: usize = 16;
const MAX_LABEL_BYTES: usize = 128;

/// The verdict with its free text bounded, so the cache and the sessions stay small
/// whatever a rule returns.
fn bounded(mut v: Verdict) -> Verdict {
    let cut = |s: &mut String, max: usize| {
        let keep = crate::text::head(s, max).len();
        s.truncate(keep);
    };
    cut(&mut v.explanation, MAX_VERDICT_TEXT);
    cut(&mut v.optimization_guidance, MAX_VERDICT_TEXT);
    for list in [&mut v.policy_tags, &mut v.violated_policy_ids] {
        list.truncate(MAX_VERDICT_LABELS);
        for l in list.iter_mut() {
            cut(l, MAX_LABEL_BYTES);
        }
    }
    v
}

/// First in, first out: replays of recent events hit; old content ages out.
#[derive(Default)]
struct VerdictCache {
    map: HashMap<[u8; 32], Verdict>,
    order: VecDeque<[u8; 32]>,
}

impl VerdictCache {
    fn get(&self, key: &[u8; 32]) -> Option<Verdict> {
        self.map.get(key).cloned()
    }

    fn put(&mut self, key: [u8; 32], v: Verdict) {
        if self.map.insert(key, v).is_none() {
            self.order.push_back(key);
            if self.order.len() > CACHE_ENTRIES
                && let Some(old) = self.order.pop_front()
            {
                self.map.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deep::VerdictKind;

    /// Waits on a gate the test opens: jobs stay running or queued until then.
    #[derive(Debug)]
    struct Gated(Arc<tokio::sync::Notify>, &'static str);

    #[async_trait::async_trait]
    impl DeepRule for Gated {
        fn id(&self) -> &str {
            self.1
        }
        fn budget(&self) -> std::time::Duration {
            std::time::Duration::from_secs(60)
        }
        async fn check(&self, _input: Arc<DeepInput>) -> JobResult {
            self.0.notified().await;
            Ok(Verdict {
                verdict: VerdictKind::Pass,
                risk_score: 0.0,
                explanation: String::new(),
                optimization_guidance: String::new(),
                violated_policy_ids: Vec::new(),
                policy_tags: Vec::new(),
            })
        }
    }

    fn big(n: u8) -> Arc<DeepInput> {
        Arc::new(DeepInput {
            event: crate::event::EventKind::ToolCallResult,
            tool_name: "t".into(),
            task_goal: String::new(),
            text: char::from(b'a' + n).to_string().repeat(MAX_INPUT_BYTES - 1),
            content_at: 0,
            has_lookalike_marks: false,
            charge: Default::default(),
        })
    }

    #[tokio::test]
    async fn the_queue_holds_at_most_its_byte_budget_and_one_event_is_charged_once() {
        let gate = Arc::new(tokio::sync::Notify::new());
        // Room for 1024 jobs, but bytes for four inputs of the largest size.
        let pool = DeepPool::start(1, 1024, 4 * MAX_INPUT_BYTES, SystemTime::now(), None);
        let a: Arc<dyn DeepRule> = Arc::new(Gated(gate.clone(), "a"));
        let b: Arc<dyn DeepRule> = Arc::new(Gated(gate.clone(), "b"));
        let submit = |rule: &Arc<dyn DeepRule>, input: &Arc<DeepInput>, key: u8| {
            pool.submit(
                rule.clone(),
                input.clone(),
                [key; 32],
                Box::new(|_| {}),
                None,
            )
        };
        let mut inputs = Vec::new();
        let mut waiting = Vec::new();
        let mut refused = 0;
        for n in 0..10u8 {
            let input = big(n);
            // Two rules read each event: the second job costs no bytes.
            for (i, rule) in [&a, &b].into_iter().enumerate() {
                match submit(rule, &input, n * 2 + i as u8) {
                    Submitted::Queued(rx) => waiting.push(rx),
                    Submitted::Full => refused += 1,
                    Submitted::Cached(_) => panic!("nothing is cached yet"),
                }
            }
            inputs.push(input);
        }
        assert_eq!(waiting.len(), 8, "four events, both rules each");
        assert_eq!(refused, 12);
        assert!(pool.held_bytes() <= 4 * MAX_INPUT_BYTES);
        // Every job ends and every input is let go: the budget is whole again.
        drop(inputs);
        for rx in waiting {
            gate.notify_one();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), rx).await;
            gate.notify_waiters();
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pool.held_bytes() != 0 {
            assert!(std::time::Instant::now() < deadline, "bytes not given back");
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn verdict_text_is_bounded() {
        let v = bounded(Verdict {
            verdict: VerdictKind::Block,
            risk_score: 0.9,
            explanation: "é".repeat(5000),
            optimization_guidance: "g".repeat(10),
            violated_policy_ids: vec!["p".repeat(500); 40],
            policy_tags: vec!["t".into()],
        });
        assert!(v.explanation.len() <= MAX_VERDICT_TEXT);
        assert_eq!(v.optimization_guidance, "g".repeat(10));
        assert_eq!(v.violated_policy_ids.len(), MAX_VERDICT_LABELS);
        assert!(
            v.violated_policy_ids
                .iter()
                .all(|p| p.len() == MAX_LABEL_BYTES)
        );
    }
}
