//! The one time budget of a command: a [`Deadline`] made once from
//! `--time-limit` and handed down, and every share and floor the stages
//! cut from it, named here rather than written where each is used.
//!
//! `plan` gives the whole command its limit: reading the host counts, a
//! little is kept for writing the plan out ([`Deadline::solve_budget`]), the
//! exact solver gets [`EXACT_SHARE`] of the rest and explanations what is
//! left ([`explain_budget`]), the per-class model's L3 objectives
//! [`QUALITY_SHARE`] each, and a solver that overruns its limit is given up
//! a [`grace`] later.

use std::time::{Duration, Instant};

/// The share of a plan's limit the exact solver may use when VMs may be left
/// out: the rest is kept for explaining them.
pub const EXACT_SHARE: f64 = 0.8;

/// The share of its limit each L3 objective of the per-class model gets
/// (bin packing at heart: one of them must not eat the time), at least
/// [`QUALITY_FLOOR`].
pub const QUALITY_SHARE: f64 = 0.4;
/// The least an L3 objective of the per-class model gets.
pub const QUALITY_FLOOR: Duration = Duration::from_millis(50);

/// How far past its limit a solver may run before it is given up: this
/// share of the limit, at least [`GRACE_FLOOR`] ([`grace`]).
pub const GRACE_SHARE: f64 = 0.1;
/// The least grace.
pub const GRACE_FLOOR: Duration = Duration::from_millis(50);

/// Explanations' re-solves get as long as the solve took, within these
/// bounds ([`explain_budget`]).
pub const EXPLAIN_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(100), Duration::from_secs(1));
/// The least a second solve gets when the first left VMs that run out
/// (`Residents::solve`), late as it may start.
pub const RESOLVE_LEAST: Duration = Duration::from_millis(50);
/// The most one explanation's re-solve may take.
pub const RESOLVE_MOST: Duration = Duration::from_secs(2);

/// The share of a fleet plan's time the assignment of VMs to hosts may use.
pub const FLEET_ASSIGN_SHARE: f64 = 0.5;
/// A fleet host's own plan: what it gets at least (and all a host without
/// VMs gets), and the floor under its even share of what is left.
pub const FLEET_HOST_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(50), Duration::from_millis(200));

/// What a command keeps for writing its output, and the least its solve
/// gets whatever is left ([`Deadline::solve_budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputReserve {
    /// Kept from the solve for writing the plan (or plans) out.
    pub keep: Duration,
    /// The least the solve gets, late as it may start.
    pub floor: Duration,
}

/// One host's plan: a little to write it out, 10 ms at least to solve.
pub const HOST_PLAN: OutputReserve = OutputReserve {
    keep: Duration::from_millis(20),
    floor: Duration::from_millis(10),
};

/// A fleet's plans: more to write (a directory per host), 50 ms at least.
pub const FLEET_PLAN: OutputReserve = OutputReserve {
    keep: Duration::from_millis(50),
    floor: Duration::from_millis(50),
};

/// The instant a piece of work must be done by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Deadline(Instant);

impl Deadline {
    /// `limit` from now.
    pub fn after(limit: Duration) -> Deadline {
        Deadline(Instant::now() + limit)
    }

    /// At `instant`.
    pub fn at(instant: Instant) -> Deadline {
        Deadline(instant)
    }

    /// What is left of it, zero once past.
    pub fn remaining(self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }

    /// Whether it has come.
    pub fn is_past(self) -> bool {
        Instant::now() >= self.0
    }

    /// `share` of what is left, at least `floor` (a floor may go past the
    /// deadline: a stage that must run at all gets that much).
    pub fn share(self, share: f64, floor: Duration) -> Duration {
        self.remaining().mul_f64(share).max(floor)
    }

    /// `limit` from now, or this deadline if that is sooner.
    pub fn within(self, limit: Duration) -> Deadline {
        Deadline::after(limit).min(self)
    }

    /// This deadline, or `floor` from now if that is later.
    pub fn at_least(self, floor: Duration) -> Deadline {
        Deadline::after(floor).max(self)
    }

    /// What a command's solve may take once its input is read: what is
    /// left, less what `reserve` keeps for the output, at least its floor.
    pub fn solve_budget(self, reserve: OutputReserve) -> Duration {
        self.remaining()
            .saturating_sub(reserve.keep)
            .max(reserve.floor)
    }
}

/// How long past `limit` a solver still runs before it is given up: a
/// backend that ignores its limit must not hang pinplan.
pub fn grace(limit: Duration) -> Duration {
    limit.mul_f64(GRACE_SHARE).max(GRACE_FLOOR)
}

/// The budget of the per-class model's L3 objectives, out of its `limit`.
pub fn quality_budget(limit: Duration) -> Duration {
    limit.mul_f64(QUALITY_SHARE).max(QUALITY_FLOOR)
}

/// The re-solves of explanations: as long as the solve took (`solved`),
/// within [`EXPLAIN_BOUNDS`], never past the plan's `deadline`.
pub fn explain_budget(solved: Duration, deadline: Deadline) -> Deadline {
    let (least, most) = EXPLAIN_BOUNDS;
    deadline.within(solved.clamp(least, most))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_floors() {
        for (limit, expected) in [
            (Duration::from_secs(10), Duration::from_secs(1)),
            (Duration::from_millis(100), GRACE_FLOOR),
        ] {
            assert_eq!(grace(limit), expected, "{limit:?}");
        }
        assert_eq!(
            quality_budget(Duration::from_secs(10)),
            Duration::from_secs(4)
        );
        assert_eq!(quality_budget(Duration::ZERO), QUALITY_FLOOR);
        let past = Deadline::after(Duration::ZERO);
        assert!(past.is_past());
        assert_eq!(past.remaining(), Duration::ZERO);
        assert_eq!(past.solve_budget(HOST_PLAN), HOST_PLAN.floor);
        assert_eq!(
            past.share(0.5, Duration::from_millis(7)),
            Duration::from_millis(7)
        );
        let later = Deadline::after(Duration::from_secs(60));
        assert!(later.solve_budget(FLEET_PLAN) > Duration::from_secs(59));
        assert_eq!(later.within(Duration::from_secs(3600)), later);
        assert!(explain_budget(Duration::from_secs(5), later) < later);
        assert_eq!(explain_budget(Duration::ZERO, past), past);
    }
}
