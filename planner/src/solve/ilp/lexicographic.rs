//! The one lexicographic loop of every integer program, a host's models and
//! the fleet's assignment alike: the objectives ([`Tier`]) are optimised
//! one after the other, each held at its optimum while the next is. What
//! differs between models — a tier's lower bound, its share of the time, how
//! it is held — a model says through [`Rules`].

use super::backend::{run, run_below, Model, SolveError};
use super::expr::Expr;
use super::TRACE;
use crate::deadline::Deadline;
use crate::model::Tier;
use std::fmt::Display;
use std::time::{Duration, Instant};

/// What one model adds to the loop. Every method has the plain answer as
/// its default: no bound, the whole time left, the optimum held as a sum.
pub(crate) trait Rules {
    /// A lower bound of `tier`'s `terms` now that the tiers before it are
    /// held, if one is known: a start at it is optimal without a solve.
    fn bound(&self, _tier: Tier, _terms: &Expr) -> Option<f64> {
        None
    }

    /// The time `tier` may take of `left`.
    fn budget(&self, _tier: Tier, left: Duration) -> Duration {
        left
    }

    /// Holds `tier` at its optimum `best` before the next tier is solved.
    fn hold(&mut self, model: &mut Model, _tier: Tier, terms: &Expr, best: f64) {
        // Objectives are integers: hold the optimum exactly (`best + 0.5`
        // would loosen every later objective).
        model.le(terms.clone(), best);
    }

    /// Whether a backend's answer is checked against the model before it
    /// replaces the start (a stopped backend may hand back a point that
    /// breaks a row).
    fn checks_answers(&self) -> bool {
        false
    }

    /// A small model of the points near `start` for `tier` of objective
    /// `terms` (`model` with some of `start`'s choices fixed: every point of
    /// it is one of `model`'s), searched first for a better start
    /// ([`nearer`]), if the model has one for this tier.
    fn near(&self, _model: &Model, _tier: (Tier, &Expr), _start: &[f64]) -> Option<Model> {
        None
    }

    /// Whether the backend looks only for points better than the start by a
    /// whole unit, where the objective is integral ([`run_below`]): a start
    /// at the optimum is then kept, proven by a search that finds nothing
    /// better (on the tight-pool benchmark a search from scratch ran 8 s for
    /// a point at a bound the start had met), where a search from scratch
    /// may pick another point of the same value.
    fn below_start(&self) -> bool {
        false
    }

    /// Whether only a point at `tier`'s bound counts, not the tier's
    /// optimum: an explanation's re-solve asks whether every VM fits, not
    /// how many do. With CBC the search then looks only for points at the
    /// bound ([`at_the_bound`]), and proof that there is none ends the loop
    /// at the start (with no start, unproven: no point is known); another
    /// backend searches for the optimum, and one proven short of the bound
    /// ends the loop there. Either way the loop's `proven` then says the
    /// bound is out of reach, not that its point is optimal. The bound must
    /// be a whole number, as counts of VMs are.
    fn only_at_bound(&self, _tier: Tier) -> bool {
        false
    }
}

/// One tier's outcome, for traces and benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct TierRun {
    /// Which objective.
    pub tier: Tier,
    /// Its value (minimised; counts users want most of are negative).
    pub value: f64,
    /// Milliseconds spent on it.
    pub ms: f64,
    /// Proven optimal.
    pub proven: bool,
    /// Proven by a lower bound alone (no solve).
    pub by_bound: bool,
}

/// What the loop reached.
#[derive(Debug, Default)]
pub(crate) struct Solved {
    /// The last point, if any tier had one.
    pub values: Option<Vec<f64>>,
    /// Every tier solved and proven optimal; or, where only a tier's bound
    /// counts ([`Rules::only_at_bound`]), that bound proven out of reach
    /// (the loop stopped at that tier).
    pub proven: bool,
    /// The tiers solved, in order.
    pub runs: Vec<TierRun>,
    /// The first failure of the backend's process, if one stopped a tier.
    pub fault: Option<SolveError>,
    /// The tier the backend failed on with no point known at all, and why.
    pub failed: Option<(Tier, SolveError)>,
}

impl Solved {
    /// This loop's outcome followed by `next`'s, a loop over the tiers
    /// after these on the same model (started from this one's point).
    pub(crate) fn then(mut self, next: Solved) -> Solved {
        self.runs.extend(next.runs);
        if self.fault.is_none() {
            self.fault = next.fault;
        }
        // A later tier's failure with no point of its own is this loop's
        // only where this one had no point either (else its point stands,
        // unproven, as in one loop).
        if self.values.is_none() {
            self.failed = self.failed.or(next.failed);
        }
        self.proven = self.proven && next.proven;
        if next.values.is_some() {
            self.values = next.values;
        }
        self
    }
}

/// The share of a tier's time the search near its start may take.
const NEAR_SHARE: f64 = 0.125;

/// Optimises `tiers` (each minimised) in order within `deadline`, from the
/// best of `candidates` that the model accepts; stops at the first tier not
/// proven. `label` names the model in the trace.
pub(crate) fn lexicographic(
    model: &mut Model,
    tiers: &[(Tier, Expr)],
    candidates: &[Vec<f64>],
    deadline: Deadline,
    rules: &mut dyn Rules,
    label: &str,
) -> Solved {
    let mut solved = Solved {
        proven: true,
        ..Solved::default()
    };
    for (tier, terms) in tiers {
        let started = Instant::now();
        let bound = rules.bound(*tier, terms);
        let only = bound.filter(|_| rules.only_at_bound(*tier));
        let meets = |v: &[f64]| meets_bound(bound, terms, v);
        let known = solved.values.iter().chain(candidates);
        let start = best_known(model, terms, known, bound);
        // A start short of the bound (or of none) may be bettered in a
        // small model of the points near it first, with a share of the
        // tier's time.
        let budget = rules.budget(*tier, deadline.remaining());
        let budgeted = Instant::now();
        let start = match start {
            Some(s) if !meets(&s) && !budget.is_zero() && only.is_none() => {
                let near = budget.mul_f64(NEAR_SHARE);
                Some(nearer(model, rules, (*tier, terms), s, (near, label)))
            }
            start => start,
        };
        let at_bound = start.as_deref().is_some_and(meets);
        let left = budget.saturating_sub(budgeted.elapsed());
        let outcome = match (&start, only) {
            (Some(s), _) if at_bound => Ok((s.clone(), true)),
            _ if left.is_zero() => Err(None),
            (_, Some(b)) => match at_the_bound(model, terms, left, start.as_deref(), b) {
                Ok(Some(answer)) => Ok(answer),
                Ok(None) => {
                    trace(
                        label,
                        *tier,
                        (started, model),
                        format!("no point at its bound {b}"),
                    );
                    // Proven out of reach: the question is answered, at the
                    // start (with no start, no point is known).
                    solved.proven = start.is_some();
                    if start.is_some() {
                        solved.values = start;
                    }
                    return solved;
                }
                Err(e) => Err(Some(e)),
            },
            (Some(s), _) if rules.below_start() => better_than(model, terms, left, s).map_err(Some),
            _ => run(model, terms, left, start.as_deref()).map_err(Some),
        };
        let (v, proven) = match outcome {
            Ok((v, proven)) => match better_of(model, rules, terms, start, v, proven, bound) {
                Some(answer) => answer,
                // A checked answer that breaks the model, and no start: the
                // tier has no point to stand on.
                None => {
                    solved.proven = false;
                    return solved;
                }
            },
            Err(e) => {
                if let Some(e) = &e {
                    e.keep_fault(&mut solved.fault);
                }
                if start.is_none() && e.is_some() {
                    trace(label, *tier, (started, model), "no point found");
                }
                match (start, e) {
                    (Some(s), _) => (s, false),
                    (None, Some(cause)) if solved.values.is_none() => {
                        solved.failed = Some((*tier, cause));
                        solved.proven = false;
                        return solved;
                    }
                    (None, _) => {
                        solved.proven = false;
                        return solved;
                    }
                }
            }
        };
        let best = terms.value(&v).round();
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let said = if proven { "optimal" } else { "stopped at" };
        trace(label, *tier, (started, model), format!("{said} {best}"));
        solved.runs.push(TierRun {
            tier: *tier,
            value: best,
            ms,
            proven,
            by_bound: at_bound,
        });
        solved.values = Some(v);
        if !proven {
            solved.proven = false;
            return solved;
        }
        if only.is_some_and(|b| best > b + 0.5) {
            // Proven short of the bound by a whole search (a backend
            // without a cutoff): the question is answered.
            return solved;
        }
        rules.hold(model, *tier, terms, best);
    }
    solved
}

/// Whether `v` meets the tier's lower `bound` of `terms` (and so is
/// optimal), if there is one.
fn meets_bound(bound: Option<f64>, terms: &Expr, v: &[f64]) -> bool {
    bound.is_some_and(|b| terms.value(v) <= b + 1e-6)
}

/// A tier's start: the best of the points `known` that `model` accepts
/// (the tiers before hold), polished where it is short of the tier's
/// `bound` and polishing reaches it.
fn best_known<'k>(
    model: &Model,
    terms: &Expr,
    known: impl Iterator<Item = &'k Vec<f64>>,
    bound: Option<f64>,
) -> Option<Vec<f64>> {
    let meets = |v: &[f64]| meets_bound(bound, terms, v);
    let start = known
        .filter(|v| model.feasible(v))
        .min_by(|a, b| terms.value(a).total_cmp(&terms.value(b)))
        .cloned()?;
    if bound.is_none() || meets(&start) {
        return Some(start);
    }
    let polished = model.polished(&start, terms);
    Some(if meets(&polished) && model.feasible(&polished) {
        polished
    } else {
        start
    })
}

/// The trace's line of one step of `tier`: its time since `started`, the
/// model's size, and what it found.
fn trace(label: &str, tier: Tier, (started, model): (Instant, &Model), found: impl Display) {
    tracing::debug!(
        target: TRACE,
        "{label}: {tier}: {:.1} ms, {} variables, {} constraints, {found}",
        started.elapsed().as_secs_f64() * 1e3,
        model.vars(),
        model.cons(),
    );
}

/// A point of `model` at `bound` (the least `terms` can be, a whole
/// number), as [`run_below`] a value one above it: CBC prunes whatever
/// cannot reach the bound, where a search for the optimum would first find
/// and prove the best point short of it. `Ok(None)`: proof that no point
/// reaches the bound. Another backend searches for the optimum.
fn at_the_bound(
    model: &Model,
    terms: &Expr,
    left: Duration,
    start: Option<&[f64]>,
    bound: f64,
) -> Result<Option<(Vec<f64>, bool)>, SolveError> {
    run_below(model, terms, left, (start, bound.round() + 1.0))
}

/// `start`, or a better point of `model` found near it ([`Rules::near`])
/// by a search that ends within `limit`. A search of the whole model may
/// run long before it finds a point the start's neighbours hold, and its
/// cutoff is then the better point's: on part 8's `s256-off4-80` (tight
/// pools), objective 3 stopped at 96 cores after 6.6 s; 12 ms near that
/// start find 91, from which the whole model's search proves 87 in 0.6 s
/// (docs/benchmarks.md, sixteenth pass). Only a search that ends (proves
/// its point the best near the start, or that none is better) counts: a
/// point of one stopped by the clock would make the plan depend on the
/// machine's speed.
fn nearer(
    model: &Model,
    rules: &dyn Rules,
    (tier, terms): (Tier, &Expr),
    start: Vec<f64>,
    (limit, label): (Duration, &str),
) -> Vec<f64> {
    let Some(near) = rules.near(model, (tier, terms), &start) else {
        return start;
    };
    let value = terms.value(&start).round();
    let started = Instant::now();
    let found = match run_below(&near, terms, limit, (Some(&start), value)) {
        Ok(Some((v, true))) if model.feasible(&v) && terms.value(&v) < value - 0.5 => Some(v),
        _ => None,
    };
    tracing::debug!(
        target: TRACE,
        "{label}: near the start: {tier}: {:.1} ms, {} for {value}",
        started.elapsed().as_secs_f64() * 1e3,
        found.as_ref().map_or_else(
            || "none better".to_owned(),
            |v| format!("{}", terms.value(v).round())
        ),
    );
    found.unwrap_or(start)
}

/// [`run_below`] the start: nothing better proves the start optimal.
fn better_than(
    model: &Model,
    terms: &Expr,
    left: Duration,
    start: &[f64],
) -> Result<(Vec<f64>, bool), SolveError> {
    let answer = run_below(model, terms, left, (Some(start), terms.value(start)))?;
    Ok(answer.unwrap_or_else(|| (start.to_vec(), true)))
}

/// The backend's answer `v` (`proven` or not), or the start when that is
/// better (a backend stopped early may return a worse incumbent) or `v`
/// breaks the model where the rules check (`None` when it does and there is
/// no start); an answer at the lower bound is optimal, stopped or not.
fn better_of(
    model: &Model,
    rules: &dyn Rules,
    terms: &Expr,
    start: Option<Vec<f64>>,
    v: Vec<f64>,
    proven: bool,
    bound: Option<f64>,
) -> Option<(Vec<f64>, bool)> {
    let broken = rules.checks_answers() && !model.feasible(&v);
    let (v, proven) = match start {
        Some(s) if broken || terms.value(&s) < terms.value(&v) - 1e-6 => (s, false),
        None if broken => return None,
        _ => (v, proven),
    };
    let at = meets_bound(bound, terms, &v);
    Some((v, proven || at))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Ten interchangeable binaries, at most three of them: every choice of
    /// three is optimal, the most `-Σx` can be is -3.
    fn three_of_ten() -> (Model, Expr, Vec<super::super::expr::Var>) {
        let mut m = Model::default();
        let x: Vec<_> = (0..10).map(|_| m.binary()).collect();
        let sum: Expr = x.iter().copied().sum();
        m.le(sum.clone(), 3.0);
        (m, -sum, x)
    }

    fn point(m: &Model, x: &[super::super::expr::Var], ones: &[usize]) -> Vec<f64> {
        let mut v = m.zeros();
        for &k in ones {
            v[x[k].index()] = 1.0;
        }
        v
    }

    /// A start at the optimum is proven by a search that finds nothing
    /// better, and is the answer itself (a search from scratch picks its
    /// own three of the ten). CBC's cutoff only.
    #[cfg(all(feature = "cbc", not(feature = "highs")))]
    #[test]
    fn a_start_at_the_optimum_is_proven_by_finding_nothing_better() {
        let (m, goal, x) = three_of_ten();
        let start = point(&m, &x, &[7, 8, 9]);
        let answer = better_than(&m, &goal, Duration::from_secs(5), &start);
        assert_eq!(answer, Ok((start, true)));
    }

    /// A start below the optimum: the answer is better, and proven.
    #[test]
    fn a_start_below_the_optimum_gives_way_to_a_better_point() {
        let (m, goal, x) = three_of_ten();
        let start = point(&m, &x, &[9]);
        let (v, proven) = better_than(&m, &goal, Duration::from_secs(5), &start).unwrap();
        assert!(proven);
        assert_eq!(goal.value(&v), -3.0);
    }

    /// The objective's constant is not the backend's: a start of value −6
    /// (−1 and the constant −5) still gives way to the optimum −8.
    #[test]
    fn a_constant_in_the_objective_moves_no_cutoff() {
        let (m, goal, x) = three_of_ten();
        let goal = goal - 5.0;
        let start = point(&m, &x, &[9]);
        let (v, proven) = better_than(&m, &goal, Duration::from_secs(5), &start).unwrap();
        assert!(proven);
        assert_eq!(goal.value(&v), -8.0);
    }

    /// Below a start at the optimum there is no point: `None`, told apart
    /// from an answer. CBC's cutoff only.
    #[cfg(all(feature = "cbc", not(feature = "highs")))]
    #[test]
    fn a_cutoff_below_every_point_proves_there_is_none() {
        let (m, goal, _) = three_of_ten();
        let answer = run_below(&m, &goal, Duration::from_secs(5), (None, -3.0));
        assert_eq!(answer, Ok(None));
        let answer = run_below(&m, &goal, Duration::from_secs(5), (None, -2.0));
        assert_eq!(
            answer.map(|a| a.map(|(v, proven)| (goal.value(&v), proven))),
            Ok(Some((-3.0, true)))
        );
    }

    /// An objective that is not integral gets no cutoff of a whole unit: a
    /// point better by half a unit is still found.
    #[test]
    fn a_fractional_objective_is_searched_whole() {
        let mut m = Model::default();
        let (a, b) = (m.binary(), m.binary());
        m.le(a + b, 1.0);
        let goal = -(1.0 * a) - 1.5 * b;
        let start = {
            let mut v = m.zeros();
            v[a.index()] = 1.0;
            v
        };
        let (v, proven) = better_than(&m, &goal, Duration::from_secs(5), &start).unwrap();
        assert!(proven);
        assert_eq!(goal.value(&v), -1.5);
    }

    /// A start short of the tier's bound only by a needless 1 (a node
    /// marked that no core holds up) meets it once polished: the tier is
    /// proven by the bound, without a solve, on the polished point.
    #[test]
    fn a_polished_start_meets_the_bound_without_a_solve() {
        struct Floor;
        impl Rules for Floor {
            fn bound(&self, _: Tier, _: &Expr) -> Option<f64> {
                Some(0.0)
            }
        }
        let mut m = Model::default();
        let (x, y) = (m.binary(), m.binary());
        m.le(x, y);
        let tiers = [(Tier::ExtraNodes, Expr::from(y))];
        let deadline = Deadline::after(Duration::from_secs(5));
        let solved = lexicographic(&mut m, &tiers, &[vec![0.0, 1.0]], deadline, &mut Floor, "t");
        assert!(solved.proven);
        assert_eq!(solved.values, Some(vec![0.0, 0.0]));
        assert!(solved.runs.iter().all(|r| r.by_bound));
    }

    /// Rules where only a bound counts: the bound of the first tier, and a
    /// second tier of no bound after it.
    struct OnlyAt(f64);

    impl Rules for OnlyAt {
        fn bound(&self, tier: Tier, _: &Expr) -> Option<f64> {
            (tier == Tier::Placed(0)).then_some(self.0)
        }

        fn only_at_bound(&self, tier: Tier) -> bool {
            tier == Tier::Placed(0)
        }
    }

    /// Only the bound counts. Out of reach (four of ten where three fit):
    /// the loop ends proven at its start of one, and the next tier is not
    /// solved. Within reach (three; no start, which polishing would raise
    /// to the bound without a search): a point at it, and the next tier is
    /// solved.
    #[test]
    fn where_only_the_bound_counts_a_bound_out_of_reach_ends_the_loop() {
        let (mut m, goal, x) = three_of_ten();
        let start = point(&m, &x, &[9]);
        let last = Expr::from(x[0]);
        let tiers = [(Tier::Placed(0), goal.clone()), (Tier::Cores, last)];
        let deadline = || Deadline::after(Duration::from_secs(5));
        let candidates = [start.clone()];
        let out = lexicographic(
            &mut m,
            &tiers,
            &candidates,
            deadline(),
            &mut OnlyAt(-4.0),
            "t",
        );
        assert!(out.proven);
        let short = out.values.clone().unwrap();
        assert!(goal.value(&short) > -3.5, "{short:?}");
        assert!(
            out.runs.iter().all(|r| r.tier != Tier::Cores),
            "{:?}",
            out.runs
        );
        // CBC's cutoff searches only at the bound, and its proof that there
        // is no point there ends the loop at the start; another backend
        // finds the optimum short of it, which ends it too.
        if cfg!(all(feature = "cbc", not(feature = "highs"))) {
            assert_eq!(out.values, Some(start));
            assert!(out.runs.is_empty(), "{:?}", out.runs);
        }
        let (mut m, ..) = three_of_ten();
        let within = lexicographic(&mut m, &tiers, &[], deadline(), &mut OnlyAt(-3.0), "t");
        assert!(within.proven);
        let values = within.values.unwrap();
        assert_eq!(goal.value(&values), -3.0);
        // The second tier held the first at -3 and took x0 out.
        assert_eq!(values[x[0].index()], 0.0);
        assert_eq!(within.runs.len(), 2);
    }

    /// A later loop that failed with no point of its own leaves this one's
    /// point, unproven (as one loop would), not an error; with no point on
    /// either side, the failure stands.
    #[test]
    fn a_later_failure_keeps_the_earlier_point() {
        let crashed = || SolveError::SolverCrashed {
            signal: Some(6),
            status: None,
        };
        let first = || Solved {
            values: Some(vec![1.0]),
            proven: true,
            ..Solved::default()
        };
        let failed = || Solved {
            failed: Some((Tier::L3PerVm, crashed())),
            ..Solved::default()
        };
        let merged = first().then(failed());
        assert_eq!(merged.values, Some(vec![1.0]));
        assert!(!merged.proven && merged.failed.is_none());
        let none = Solved {
            proven: true,
            ..Solved::default()
        };
        assert!(none.then(failed()).failed.is_some());
    }
}
