//! The fast scan's work budget, counted in the scanning thread's CPU time.
//!
//! Wall time is the wrong measure: a thread descheduled by a busy neighbour, or slowed by a
//! cold cache after start or reload, would run out of a wall-clock box while doing no more
//! work, and a box that runs out must never pass content nobody looked at. CPU time only
//! grows while the scan works. The budget also grows with the input: scanning is linear, so
//! a large input is given time in proportion to its size, and only work out of proportion
//! (a pathological pattern, a shape that costs far more per byte than text) runs it out.

use std::time::Duration;

use rustix::time::{ClockId, clock_gettime};

/// Fields scanned between two clock reads: reading the thread clock is a system call
/// (about 1 µs on this VM), so small events never read it.
pub const FIELDS_PER_CHECK: u32 = 256;

/// How much of the scan's work allowance one unit of input earns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Allowance {
    /// Whatever the size.
    pub base: Duration,
    /// Per MiB of field text.
    pub per_mib: Duration,
    /// Per field (JSON leaf, message): each costs a scope check and a prefilter pass.
    pub per_field: Duration,
}

impl Allowance {
    /// The most CPU time a scan of `bytes` of text in `fields` fields may take.
    pub fn for_input(&self, bytes: usize, fields: usize) -> Duration {
        let mib = bytes as f64 / (1024.0 * 1024.0);
        self.base + self.per_mib.mul_f64(mib) + self.per_field.saturating_mul(fields as u32)
    }
}

/// A running budget. `None` as the limit: unlimited (offline replays, warm-up).
#[derive(Debug)]
pub struct Budget {
    limit: Option<Duration>,
    started: Duration,
    fields_since_check: u32,
    exhausted: bool,
}

impl Budget {
    pub fn new(limit: Duration) -> Budget {
        Budget {
            limit: Some(limit),
            started: thread_cpu(),
            fields_since_check: 0,
            exhausted: false,
        }
    }

    /// The budget for a scan of `fields` fields whose longest is `longest` bytes: an input
    /// too small ever to reach a clock read (fewer fields than `FIELDS_PER_CHECK`, none
    /// longer than one scan window) is not timed at all, which saves the clock read that
    /// would start the count.
    pub fn for_scan(limit: Duration, fields: usize, longest: usize, window: usize) -> Budget {
        if fields < FIELDS_PER_CHECK as usize && longest <= window {
            Budget::unlimited()
        } else {
            Budget::new(limit)
        }
    }

    pub fn unlimited() -> Budget {
        Budget {
            limit: None,
            started: Duration::ZERO,
            fields_since_check: 0,
            exhausted: false,
        }
    }

    /// Called before each field; reads the clock every `FIELDS_PER_CHECK` fields.
    pub fn field(&mut self) -> bool {
        self.fields_since_check += 1;
        if self.fields_since_check < FIELDS_PER_CHECK {
            return !self.exhausted;
        }
        self.fields_since_check = 0;
        self.check()
    }

    /// Reads the clock now: true while the budget lasts.
    pub fn check(&mut self) -> bool {
        if let Some(limit) = self.limit
            && !self.exhausted
        {
            self.exhausted = thread_cpu().saturating_sub(self.started) > limit;
        }
        !self.exhausted
    }

    pub fn limit(&self) -> Option<Duration> {
        self.limit
    }
}

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowance_grows_with_bytes_and_fields() {
        let a = Allowance {
            base: Duration::from_millis(5),
            per_mib: Duration::from_millis(16),
            per_field: Duration::from_micros(1),
        };
        assert_eq!(a.for_input(0, 0), Duration::from_millis(5));
        assert_eq!(a.for_input(1024 * 1024, 0), Duration::from_millis(21));
        assert_eq!(a.for_input(0, 1000), Duration::from_millis(6));
    }

    #[test]
    fn a_zero_budget_runs_out_at_the_first_clock_read_and_stays_out() {
        let mut b = Budget::new(Duration::ZERO);
        // Burn a little CPU so the thread clock has moved.
        let mut x = 0u64;
        for i in 0..200_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!((0..FIELDS_PER_CHECK - 1).all(|_| b.field()));
        assert!(!b.field());
        assert!(!b.field());
        assert!(!b.check());
    }

    #[test]
    fn unlimited_never_runs_out() {
        let mut b = Budget::unlimited();
        assert!((0..10 * FIELDS_PER_CHECK).all(|_| b.field()));
        assert!(b.check());
        assert_eq!(b.limit(), None);
    }

    #[test]
    fn inputs_too_small_to_reach_a_clock_read_are_not_timed() {
        let w = 64 * 1024;
        assert_eq!(Budget::for_scan(Duration::ZERO, 10, w, w).limit(), None);
        let many = FIELDS_PER_CHECK as usize;
        assert_eq!(
            Budget::for_scan(Duration::ZERO, many, 10, w).limit(),
            Some(Duration::ZERO)
        );
        assert_eq!(
            Budget::for_scan(Duration::ZERO, 1, w + 1, w).limit(),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn waiting_does_not_count() {
        let mut b = Budget::new(Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(60));
        assert!(b.check(), "time asleep is not CPU time");
    }
}
