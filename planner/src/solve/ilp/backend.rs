//! The MIP backend behind every integer program pinplan solves, and the small
//! backend-neutral model the programs are written in.
//!
//! Backend (chosen at build time, by the `pinplan` library crate's features): HiGHS
//! with `highs`, else CBC with `cbc` (the default: Debian's
//! `coinor-libcbc-dev`, linked as a system library), else microlp, a pure-Rust
//! fallback that proves small models only. [`NAME`] says which one this build
//! has; `pinplan --version` and every plan name it.
//!
//! CBC is not thread-safe: the `singlethread-cbc` feature of good_lp serialises
//! its calls, so one solve runs at a time in a process. Its log is switched
//! off (it would print on stdout, where pinplan prints JSON).

use super::expr::{Expr, Var};
#[cfg(any(feature = "highs", not(feature = "cbc")))]
use good_lp::WithInitialSolution;
#[cfg(not(any(feature = "highs", feature = "cbc")))]
use good_lp::WithTimeLimit;
use good_lp::{Expression, ProblemVariables, Solution, SolutionStatus, SolverModel};
use std::time::Duration;

/// The backend this build solves with.
#[cfg(feature = "highs")]
pub const NAME: &str = "highs";
/// The backend this build solves with.
#[cfg(all(feature = "cbc", not(feature = "highs")))]
pub const NAME: &str = "cbc";
/// The backend this build solves with.
#[cfg(not(any(feature = "highs", feature = "cbc")))]
pub const NAME: &str = "microlp";

/// `pinplan --version`: the version and the backend.
#[cfg(feature = "highs")]
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (MIP backend: HiGHS)");
/// `pinplan --version`: the version and the backend.
#[cfg(all(feature = "cbc", not(feature = "highs")))]
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (MIP backend: CBC)");
/// `pinplan --version`: the version and the backend.
#[cfg(not(any(feature = "highs", feature = "cbc")))]
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (MIP backend: microlp)");

/// The sense of a constraint.
#[derive(Debug, Clone, Copy)]
enum Op {
    Le,
    Ge,
    Eq,
}

/// A variable's definition: integer or not, and its bounds.
#[derive(Debug, Clone)]
struct Column {
    integer: bool,
    min: f64,
    max: f64,
}

/// `terms op rhs`.
#[derive(Debug, Clone)]
struct Row {
    terms: Vec<(Var, f64)>,
    op: Op,
    rhs: f64,
}

/// A backend-neutral model: rebuilt into good_lp for every solve, with its
/// variables and constraints in the order they were added (the backend's
/// search, and so which optimum it returns, depends on that order).
#[derive(Debug, Clone, Default)]
pub(crate) struct Model {
    columns: Vec<Column>,
    rows: Vec<Row>,
}

impl Model {
    /// A new integer variable in `0..=max`.
    pub(crate) fn int(&mut self, max: f64) -> Var {
        self.columns.push(Column {
            integer: true,
            min: 0.0,
            max,
        });
        Var::new(self.columns.len() - 1)
    }

    /// A new 0/1 variable.
    pub(crate) fn binary(&mut self) -> Var {
        self.int(1.0)
    }

    /// How many variables it has.
    /// The upper bound of `v`.
    pub(crate) fn upper(&self, v: Var) -> f64 {
        self.columns.get(v.index()).map_or(0.0, |c| c.max)
    }

    pub(crate) fn vars(&self) -> usize {
        self.columns.len()
    }

    /// How many constraints it has.
    pub(crate) fn cons(&self) -> usize {
        self.rows.len()
    }

    /// The point with every variable 0.
    pub(crate) fn zeros(&self) -> Vec<f64> {
        vec![0.0; self.columns.len()]
    }

    /// `lhs ≤ rhs`.
    pub(crate) fn le(&mut self, lhs: impl Into<Expr>, rhs: impl Into<Expr>) {
        self.add(lhs.into(), Op::Le, rhs.into());
    }

    /// `lhs ≥ rhs`.
    pub(crate) fn ge(&mut self, lhs: impl Into<Expr>, rhs: impl Into<Expr>) {
        self.add(lhs.into(), Op::Ge, rhs.into());
    }

    /// `lhs = rhs`.
    pub(crate) fn eq(&mut self, lhs: impl Into<Expr>, rhs: impl Into<Expr>) {
        self.add(lhs.into(), Op::Eq, rhs.into());
    }

    /// `lhs − rhs`'s terms against the constants' difference.
    fn add(&mut self, lhs: Expr, op: Op, rhs: Expr) {
        let bound = rhs.constant() - lhs.constant();
        let mut terms = lhs.terms().to_vec();
        terms.extend(rhs.terms().iter().map(|&(v, c)| (v, -c)));
        self.rows.push(Row {
            terms,
            op,
            rhs: bound,
        });
    }

    /// Whether `values` satisfy every constraint and bound.
    pub(crate) fn feasible(&self, values: &[f64]) -> bool {
        const EPS: f64 = 1e-6;
        values.len() == self.columns.len()
            && self
                .columns
                .iter()
                .zip(values)
                .all(|(v, &x)| x >= v.min - EPS && x <= v.max + EPS)
            && self.rows.iter().all(|c| {
                let lhs = value_of(values, &c.terms);
                match c.op {
                    Op::Le => lhs <= c.rhs + EPS,
                    Op::Ge => lhs >= c.rhs - EPS,
                    Op::Eq => (lhs - c.rhs).abs() <= EPS,
                }
            })
    }
}

/// The value of `terms` at `values`.
fn value_of(values: &[f64], terms: &[(Var, f64)]) -> f64 {
    terms
        .iter()
        .map(|&(v, c)| c * values.get(v.index()).copied().unwrap_or(0.0))
        .sum()
}

fn expression(vars: &[good_lp::Variable], terms: &[(Var, f64)]) -> Expression {
    let mut e = Expression::from(0.0);
    for &(v, coef) in terms {
        if let Some(var) = vars.get(v.index()) {
            e += coef * *var;
        }
    }
    e
}

/// Solves `model` minimising `objective` within `time_limit`; returns the
/// values (integer variables rounded) and whether the backend proved them
/// optimal. `start` is a known feasible point.
pub(crate) fn run(
    model: &Model,
    objective: &Expr,
    time_limit: Duration,
    start: Option<&[f64]>,
) -> Result<(Vec<f64>, bool), String> {
    let mut problem = ProblemVariables::new();
    let vars: Vec<good_lp::Variable> = model
        .columns
        .iter()
        .map(|v| {
            let def = good_lp::variable().min(v.min).max(v.max);
            problem.add(if v.integer { def.integer() } else { def })
        })
        .collect();
    let goal = expression(&vars, objective.terms());
    let seconds = time_limit.as_secs_f64().max(0.001);
    #[cfg(feature = "highs")]
    let mut solver = {
        use good_lp::WithTimeLimit;
        problem
            .minimise(goal)
            .using(good_lp::highs)
            .set_option("mip_heuristic_run_rens", false)
            .with_time_limit(seconds)
    };
    #[cfg(all(feature = "cbc", not(feature = "highs")))]
    let mut solver = {
        let mut s = problem.minimise(goal).using(good_lp::coin_cbc);
        s.set_parameter("log", "0");
        s.set_parameter("slog", "0");
        // good_lp's with_time_limit rounds up to whole seconds; CBC takes
        // fractions, which a 1 s command limit needs.
        s.set_parameter("sec", &format!("{seconds:.3}"));
        // Chosen by measurement on the benchmarks (docs/benchmarks.md):
        // Gomory and two-step MIR cuts at every node find the packings that
        // meet the partly-used-domain bound (CBC's defaults left one of the
        // 40 seeded CLI specs unproven after 8 s, 26.6 s for all 40; with
        // these, all proven in 13.3 s); strong branching on 10 variables
        // proved the last seeded instance with NIC locality (9 s unproven →
        // 4.6 s) and the worst random scenario (4.3 s → 2.9 s).
        s.set_parameter("gomoryCuts", "forceOn");
        s.set_parameter("twoMirCuts", "forceOn");
        s.set_parameter("strongBranching", "10");
        // PINPLAN_CBC_PARAMS=key=value,…: more CBC parameters, for
        // experiments (docs/plan.md).
        if let Ok(extra) = std::env::var("PINPLAN_CBC_PARAMS") {
            for pair in extra.split(',') {
                if let Some((key, value)) = pair.split_once('=') {
                    s.set_parameter(key, value);
                }
            }
        }
        s
    };
    #[cfg(not(any(feature = "highs", feature = "cbc")))]
    let mut solver = problem
        .minimise(goal)
        .using(good_lp::microlp)
        .with_time_limit(seconds);
    // CBC 2.10's C interface takes the start as the LP's column solution, not
    // as a MIP start, and then may hand back a fractional point as "optimal"
    // (seen on a one-variable model): CBC gets no start; the callers keep the
    // better of the start and the answer.
    #[cfg(any(feature = "highs", not(feature = "cbc")))]
    if let Some(start) = start {
        solver = solver.with_initial_solution(vars.iter().zip(start).map(|(v, x)| (*v, x.round())));
    }
    #[cfg(all(feature = "cbc", not(feature = "highs")))]
    let _ = start;
    for c in &model.rows {
        let lhs = expression(&vars, &c.terms);
        let constraint = match c.op {
            Op::Le => good_lp::constraint::leq(lhs, c.rhs),
            Op::Ge => good_lp::constraint::geq(lhs, c.rhs),
            Op::Eq => good_lp::constraint::eq(lhs, c.rhs),
        };
        solver.add_constraint(constraint);
    }
    let started = std::time::Instant::now();
    let solution = solver.solve().map_err(|e| e.to_string())?;
    // A solve that used up its time limit is not called proven, whatever the
    // status says: CBC stopped by the clock inside its root node can report a
    // finished search (secondary status unset), which good_lp reads as
    // optimal. Seen as a rare property-test failure on a loaded machine.
    let proven = matches!(solution.status(), SolutionStatus::Optimal)
        && started.elapsed().as_secs_f64() < seconds;
    let values: Vec<f64> = model
        .columns
        .iter()
        .zip(&vars)
        .map(|(def, v)| {
            let x = solution.value(*v);
            if def.integer {
                x.round()
            } else {
                x
            }
        })
        .collect();
    // A backend's answer within its tolerances may still break a constraint
    // once rounded (CBC once returned a point one VM over capacity): such a
    // point is never used.
    if !model.feasible(&values) {
        if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
            for c in &model.rows {
                let lhs = value_of(&values, &c.terms);
                eprintln!("con {:?} {:?} {} lhs={lhs}", c.terms, c.op, c.rhs);
            }
            let raw: Vec<f64> = vars.iter().map(|v| solution.value(*v)).collect();
            eprintln!("raw {raw:?} status {:?}", solution.status());
        }
        return Err("the solver returned a point that breaks the model once rounded".to_owned());
    }
    Ok((values, proven))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A start point must never turn the answer fractional (CBC 2.10 did).
    #[test]
    fn integer_answers_with_and_without_a_start() {
        for start in [None, Some(vec![0.0])] {
            let mut m = Model::default();
            let x = m.int(5.0);
            m.le(2.0 * x, 1.0);
            let answer = run(&m, &-x, Duration::from_secs(5), start.as_deref());
            assert_eq!(answer, Ok((vec![0.0], true)), "start {start:?}");
        }
    }
}
