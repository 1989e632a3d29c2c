//! The MIP backend behind every integer program pinplan solves, and the small
//! backend-neutral model the programs are written in.
//!
//! Backend (chosen at build time, by the `pinplan` library crate's features): HiGHS
//! with `highs`, else CBC with `cbc` (the default: Debian's
//! `coinor-libcbc-dev`, linked as a system library), else microlp, a pure-Rust
//! fallback that proves small models only. [`NAME`] says which one this build
//! has; `pinplan --version` and every plan name it.
//!
//! Every solve runs in a child process (`ilp/child.rs`), a worker each
//! solving thread forks once and keeps: the parent sends the model as bytes
//! (`ilp/wire.rs`), the worker builds the backend's problem from it, solves,
//! and sends the values back. CBC 2.10 aborts now and then (a failed
//! assertion in its cut generators) and a backend may overrun its time
//! limit: either ends the worker, never pinplan, and comes back as a
//! [`SolveError`]; callers fall back to the best point they know. CBC is not
//! thread-safe (the `singlethread-cbc` feature of good_lp serialises its
//! calls), but each worker is a process of its own: threads solving at once
//! do not wait for each other. Its log is switched off, and the worker's
//! stdout is its stderr: pinplan prints JSON on stdout.

use super::child::{Exit, Outcome, Service};
use super::expr::{Expr, Var};
pub(crate) use super::model::Model;
pub use super::model::Refusal;
use super::model::{value_of, Op, Raw, Row};
use super::settings::Settings;
pub use super::settings::{configure, Fault, FaultPlan, SolverSettings};
use super::wire;
use super::TRACE;
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

fn expression(vars: &[good_lp::Variable], terms: &[(Var, f64)]) -> Expression {
    let mut e = Expression::from(0.0);
    for &(v, coef) in terms {
        if let Some(var) = vars.get(v.index()) {
            e += coef * *var;
        }
    }
    e
}

/// Why a solve gave no answer. [`SolveError::is_fault`] tells the failures of
/// the backend's process, which a plan reports, from a search that found
/// nothing in its time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SolveError {
    /// The backend's process died: by `signal`, or exiting with `status`
    /// (101: a panic).
    #[error(
        "the MIP backend ({NAME}) {}: this plan is the best placement found before the \
         crash (first fit at worst) and is not proven optimal; run pinplan again, try \
         another --time-limit, or report the bug with the spec",
        died(*signal, *status)
    )]
    SolverCrashed {
        /// The signal that ended it.
        signal: Option<i32>,
        /// Its exit status, when no signal ended it.
        status: Option<i32>,
    },
    /// The backend's process ended without a whole answer.
    #[error(
        "the MIP backend's process ({NAME}) ended without a whole answer: this plan is \
         the best placement found before (first fit at worst) and is not proven optimal; \
         report the bug with the spec"
    )]
    Garbled,
    /// No process could be started for the backend. The OS error is in the
    /// message, not a source: the message becomes a plan warning whole.
    #[error(
        "cannot start a process for the MIP backend ({NAME}): {call}: {}: this plan is \
         the best placement found before (first fit at worst) and is not proven optimal; \
         check the limits on processes and memory",
        std::io::Error::from_raw_os_error(*errno)
    )]
    Spawn {
        /// The system call that failed.
        call: &'static str,
        /// Its `errno`.
        errno: i32,
    },
    /// The backend overran its time limit by more than the grace and was
    /// killed (a backend that ignores its limit must not hang pinplan).
    #[error(
        "the MIP backend ({NAME}) overran its time limit of {:.3} s and was stopped",
        limit.as_secs_f64()
    )]
    TimedOut {
        /// The limit it was given.
        limit: Duration,
    },
    /// The backend stopped without an answer (infeasible, or out of time).
    #[error("the MIP backend ({NAME}) gave no answer: {0}")]
    Backend(Refusal),
    /// The backend's answer breaks the model once integers are rounded.
    #[error("the MIP backend ({NAME}) returned a point that breaks the model once rounded")]
    Unsound,
}

impl SolveError {
    /// Whether the backend's process failed (crashed, or could not start or
    /// answer), rather than its search: when that costs a plan its proof, the
    /// plan says so in a warning. A time-out is not one: the plan already
    /// says it is not proven within its time limit.
    pub fn is_fault(&self) -> bool {
        matches!(
            self,
            SolveError::SolverCrashed { .. } | SolveError::Garbled | SolveError::Spawn { .. }
        )
    }

    /// Keeps in `first` the first fault a caller meets (a placement carries
    /// one at most: the solve stops trying to prove after it).
    pub(crate) fn keep_fault(&self, first: &mut Option<SolveError>) {
        if self.is_fault() && first.is_none() {
            *first = Some(self.clone());
        }
    }
}

/// `died with signal 6 (SIGABRT)`, `exited with status 101`.
fn died(signal: Option<i32>, status: Option<i32>) -> String {
    match (signal, status) {
        (Some(n), _) => match signal_name(n) {
            Some(name) => format!("died with signal {n} ({name})"),
            None => format!("died with signal {n}"),
        },
        (None, Some(code)) => format!("exited with status {code}"),
        (None, None) => "died".to_owned(),
    }
}

/// The name of the signals a crashing backend is seen to die by.
fn signal_name(signal: i32) -> Option<&'static str> {
    [
        (libc::SIGABRT, "SIGABRT"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGFPE, "SIGFPE"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
    ]
    .into_iter()
    .find(|&(n, _)| n == signal)
    .map(|(_, name)| name)
}

/// Solves `model` minimising `objective` within `time_limit`; returns the
/// values (integer variables rounded) and whether the backend proved them
/// optimal. `start` is a known feasible point.
///
/// The backend runs in this thread's worker process ([`super::child`]): a
/// crash there is [`SolveError::SolverCrashed`], and a backend still at work
/// a grace after its limit (a tenth, at least 50 ms) is killed
/// ([`SolveError::TimedOut`]).
pub(crate) fn run(
    model: &Model,
    objective: &Expr,
    time_limit: Duration,
    start: Option<&[f64]>,
) -> Result<(Vec<f64>, bool), SolveError> {
    run_with(model, objective, time_limit, start, &Settings::next())
}

/// [`run`] for points better than a start of value `start_value` by a whole
/// unit, where the objective is integral ([`Model::integral`]): CBC gets its
/// cutoff (the search prunes what cannot beat the start; the relaxation is
/// not changed), and `Ok(None)` says it proved there is no such point. Else
/// (an objective not integral, another backend) it searches as [`run`] does,
/// from `start` if there is one.
pub(crate) fn run_below(
    model: &Model,
    objective: &Expr,
    time_limit: Duration,
    (start, start_value): (Option<&[f64]>, f64),
) -> Result<Option<(Vec<f64>, bool)>, SolveError> {
    let cbc = cfg!(all(feature = "cbc", not(feature = "highs")));
    if !cbc || !model.integral(objective) {
        return run(model, objective, time_limit, start).map(Some);
    }
    // The backend sees the terms, not the constant.
    let cutoff = (start_value - objective.constant()).round() - 0.5;
    let mut settings = Settings::next();
    // Last, so that no `PINPLAN_CBC_PARAMS` cutoff stands in for it.
    settings
        .cbc_params
        .push(("cutoff".to_owned(), format!("{cutoff}")));
    match run_with(model, objective, time_limit, None, &settings) {
        Err(SolveError::Backend(Refusal::Infeasible)) => Ok(None),
        answer => answer.map(Some),
    }
}

/// [`run`] with `settings` read already.
fn run_with(
    model: &Model,
    objective: &Expr,
    time_limit: Duration,
    start: Option<&[f64]>,
    settings: &Settings,
) -> Result<(Vec<f64>, bool), SolveError> {
    let grace = time_limit.mul_f64(0.1).max(Duration::from_millis(50));
    let deadline = std::time::Instant::now() + time_limit + grace;
    let request = wire::encode_request(model, objective.terms(), time_limit, start, settings);
    let outcome = super::child::ask(deadline, SOLVER, &request);
    let raw = match outcome {
        Ok(Outcome::Answered(answer)) => match wire::decode_answer(&answer, model.columns.len()) {
            Some(raw) => raw.map_err(SolveError::Backend),
            None => Err(SolveError::Garbled),
        },
        Ok(Outcome::Died(Exit::Signal(signal))) => Err(SolveError::SolverCrashed {
            signal: Some(signal),
            status: None,
        }),
        // A worker leaves with 0 only when its socket is closed.
        Ok(Outcome::Died(Exit::Status(0))) => Err(SolveError::Garbled),
        Ok(Outcome::Died(Exit::Status(status))) => Err(SolveError::SolverCrashed {
            signal: None,
            status: Some(status),
        }),
        Ok(Outcome::Killed) => Err(SolveError::TimedOut { limit: time_limit }),
        Err(e) => Err(SolveError::Spawn {
            call: e.call,
            errno: e.error.raw_os_error().unwrap_or(0),
        }),
    };
    let raw = raw.inspect_err(|e| tracing::debug!(target: TRACE, "backend: {e}"))?;
    checked(model, raw)
}

/// [`run`] in this process, for measuring what the worker process costs.
#[cfg(test)]
pub(crate) fn run_in_process(
    model: &Model,
    objective: &Expr,
    time_limit: Duration,
    start: Option<&[f64]>,
) -> Result<(Vec<f64>, bool), SolveError> {
    let settings = Settings::default();
    let raw = solve_here(model, objective.terms(), time_limit, start, &settings)
        .map_err(SolveError::Backend)?;
    checked(model, raw)
}

/// The answer with its integer variables rounded, if it still satisfies the
/// model.
fn checked(model: &Model, raw: Raw) -> Result<(Vec<f64>, bool), SolveError> {
    let values: Vec<f64> = model
        .columns
        .iter()
        .zip(&raw.values)
        .map(|(def, &x)| if def.integer { x.round() } else { x })
        .collect();
    // A backend's answer within its tolerances may still break a constraint
    // once rounded (CBC once returned a point one VM over capacity): such a
    // point is never used.
    if !model.feasible(&values) {
        if tracing::enabled!(target: TRACE, tracing::Level::DEBUG) {
            for c in &model.rows {
                let lhs = value_of(&values, &c.terms);
                tracing::debug!(target: TRACE, "con {:?} {:?} {} lhs={lhs}", c.terms, c.op, c.rhs);
            }
            tracing::debug!(target: TRACE, "raw {:?} proven {}", raw.values, raw.proven);
        }
        return Err(SolveError::Unsound);
    }
    Ok((values, raw.proven))
}

/// The solver's service: a worker's answer to each request.
const SOLVER: Service = Service {
    name: "solver",
    handler: solve_request,
};

/// Solves the request in `bytes` (in the worker) and returns the answer's
/// bytes; a request it cannot read is answered as unreadable, which the
/// parent tells as [`SolveError::Garbled`] (a fault, never a search that
/// found nothing).
fn solve_request(bytes: &[u8]) -> Vec<u8> {
    let Some(r) = wire::decode_request(bytes) else {
        return wire::UNREADABLE.to_vec();
    };
    let raw = solve_here(
        &r.model,
        &r.objective,
        r.time_limit,
        r.start.as_deref(),
        &r.settings,
    );
    wire::encode_answer(&raw)
}

/// The backend's variables for `model`'s columns, in their order.
fn variables(model: &Model) -> (ProblemVariables, Vec<good_lp::Variable>) {
    let mut problem = ProblemVariables::new();
    let vars = model
        .columns
        .iter()
        .map(|v| {
            let def = good_lp::variable().min(v.min).max(v.max);
            problem.add(if v.integer { def.integer() } else { def })
        })
        .collect();
    (problem, vars)
}

/// The backend's constraint for `row`.
fn constraint(vars: &[good_lp::Variable], row: &Row) -> good_lp::Constraint {
    let lhs = expression(vars, &row.terms);
    match row.op {
        Op::Le => good_lp::constraint::leq(lhs, row.rhs),
        Op::Ge => good_lp::constraint::geq(lhs, row.rhs),
        Op::Eq => good_lp::constraint::eq(lhs, row.rhs),
    }
}

/// Builds the backend's problem from `model` and solves it, in this
/// process (the worker's, but for measurements).
fn solve_here(
    model: &Model,
    objective: &[(Var, f64)],
    time_limit: Duration,
    start: Option<&[f64]>,
    settings: &Settings,
) -> Result<Raw, Refusal> {
    let (problem, vars) = variables(model);
    let goal = expression(&vars, objective);
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
        // Ten passes of the feasibility pump, not thirty: on the big
        // pattern models of the tight-pool benchmark the later passes ran
        // for seconds before the root and found nothing (24n8c2t-130's
        // second level: 2 s of passes, then its point at the root). Part 4
        // 38 → 39 of 40 proven with 5, 10, 15 or 20 passes alike
        // (docs/benchmarks.md, seventeenth pass).
        s.set_parameter("passFeasibilityPump", "10");
        for (key, value) in &settings.cbc_params {
            s.set_parameter(key, value);
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
        solver.add_constraint(constraint(&vars, c));
    }
    #[cfg(any(test, feature = "fault-injection"))]
    if let Some(fault) = settings.fault {
        fault.strike();
    }
    #[cfg(not(any(test, feature = "fault-injection")))]
    let _ = settings.fault;
    let started = std::time::Instant::now();
    // Infeasible is believed only before the time limit, for the same
    // reason as optimal below.
    let solution = solver.solve().map_err(|e| match e {
        good_lp::ResolutionError::Infeasible if started.elapsed().as_secs_f64() < seconds => {
            Refusal::Infeasible
        }
        e => Refusal::Other(e.to_string()),
    })?;
    // A solve that used up its time limit is not called proven, whatever the
    // status says: CBC stopped by the clock inside its root node can report a
    // finished search (secondary status unset), which good_lp reads as
    // optimal. Seen as a rare property-test failure on a loaded machine.
    let proven = matches!(solution.status(), SolutionStatus::Optimal)
        && started.elapsed().as_secs_f64() < seconds;
    Ok(Raw {
        values: vars.iter().map(|v| solution.value(*v)).collect(),
        proven,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

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

    /// A small knapsack: 3a + 4b + 5c ≤ 10, a, b, c ≤ 2, most value.
    fn knapsack() -> (Model, Expr) {
        let mut m = Model::default();
        let (a, b, c) = (m.int(2.0), m.int(2.0), m.int(2.0));
        m.le(3.0 * a + 4.0 * b + 5.0 * c, 10.0);
        (m, -(4.0 * a + 5.0 * b + 7.0 * c))
    }

    /// The worker answers what this process does.
    #[test]
    fn the_child_answers_as_this_process_does() {
        let (m, goal) = knapsack();
        let limit = Duration::from_secs(5);
        let here = run_in_process(&m, &goal, limit, None);
        assert_eq!(run(&m, &goal, limit, None), here);
        // 10 = 3 + 3 + 4 (value 13) or 5 + 5 (14): c = 2.
        assert_eq!(here, Ok((vec![0.0, 0.0, 2.0], true)));
    }

    fn with_fault(fault: Fault) -> Settings {
        Settings {
            fault: Some(fault),
            ..Settings::default()
        }
    }

    /// This thread's children, zombies included (none once a solve is back).
    fn children() -> String {
        std::fs::read_to_string("/proc/thread-self/children").unwrap_or_default()
    }

    /// A worker that aborts (as CBC's failed assertions do) or is killed is
    /// a crash with its signal, and a fault the plan reports; it is reaped,
    /// and the next solve gets a new worker that answers.
    #[test]
    fn a_dying_child_is_a_crash_with_its_signal() {
        let (m, goal) = knapsack();
        for (fault, signal) in [(Fault::Abort, libc::SIGABRT), (Fault::Kill, libc::SIGKILL)] {
            let answer = run_with(&m, &goal, Duration::from_secs(5), None, &with_fault(fault));
            let crashed = SolveError::SolverCrashed {
                signal: Some(signal),
                status: None,
            };
            assert_eq!(answer, Err(crashed.clone()));
            assert!(crashed.is_fault());
            assert_eq!(children(), "", "{fault:?} left a zombie");
        }
        let answer = run(&m, &goal, Duration::from_secs(5), None);
        assert_eq!(answer, Ok((vec![0.0, 0.0, 2.0], true)));
        assert_ne!(children(), "", "no worker kept");
        let text = SolveError::SolverCrashed {
            signal: Some(libc::SIGABRT),
            status: None,
        }
        .to_string();
        assert!(
            text.starts_with(&format!(
                "the MIP backend ({NAME}) died with signal 6 (SIGABRT): this plan is the best"
            )),
            "{text}"
        );
    }

    /// A child that hangs is killed at its deadline (the limit and a grace
    /// of 50 ms) and reaped: a time-out, not a fault.
    #[test]
    fn a_hung_child_is_killed_at_its_deadline() {
        let (m, goal) = knapsack();
        let limit = Duration::from_millis(200);
        let started = Instant::now();
        let answer = run_with(&m, &goal, limit, None, &with_fault(Fault::Hang));
        let took = started.elapsed();
        assert_eq!(answer, Err(SolveError::TimedOut { limit }));
        assert!(!SolveError::TimedOut { limit }.is_fault());
        assert!(took >= Duration::from_millis(250), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(children(), "", "the hung child is left");
    }

    /// What a solve in the worker costs: `cargo test --release -p pinplan
    /// --lib -- --ignored --nocapture solve_overhead` (docs/benchmarks.md).
    #[test]
    #[ignore = "a measurement: run it on a release build"]
    fn solve_overhead() {
        const SOLVES: usize = 500;
        let (m, goal) = knapsack();
        let limit = Duration::from_secs(5);
        // Median and 90th percentile, in ms.
        let times = |solve: &dyn Fn() -> bool| {
            let mut ms: Vec<f64> = (0..SOLVES)
                .map(|_| {
                    let started = Instant::now();
                    assert!(solve());
                    started.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            ms.sort_by(f64::total_cmp);
            (ms[SOLVES / 2], ms[SOLVES * 9 / 10])
        };
        let here = times(&|| run_in_process(&m, &goal, limit, None).is_ok());
        let worker = times(&|| run(&m, &goal, limit, None).is_ok());
        fn nothing(_: &[u8]) -> Vec<u8> {
            Vec::new()
        }
        let empty = times(&|| {
            let deadline = Instant::now() + limit;
            let service = Service {
                name: "nothing",
                handler: nothing,
            };
            super::super::child::ask(deadline, service, &[]).is_ok()
        });
        // The wire alone, for a model the size of a big plan's: 20,000
        // variables, 5,000 rows of 20 terms.
        let mut big = Model::default();
        let vars: Vec<Var> = (0..20_000).map(|_| big.int(8.0)).collect();
        for (i, row) in vars.chunks(4).enumerate().take(5_000) {
            let e = row
                .iter()
                .chain(&vars[(i * 16) % 19_980..][..16])
                .fold(Expr::default(), |e, &v| e + 1.0 * v);
            big.le(e, 7.0);
        }
        let settings = Settings::default();
        let wire = times(&|| {
            let bytes = wire::encode_request(&big, goal.terms(), limit, None, &settings);
            wire::decode_request(&bytes).is_some()
        });
        let size = wire::encode_request(&big, goal.terms(), limit, None, &settings).len();
        println!("{SOLVES} solves of a 3-variable knapsack, median and p90:");
        println!("in this process   {:.3} ms  {:.3} ms", here.0, here.1);
        println!("in the worker     {:.3} ms  {:.3} ms", worker.0, worker.1);
        println!(
            "difference        {:.3} ms  {:.3} ms",
            worker.0 - here.0,
            worker.1 - here.1
        );
        println!("an empty request  {:.3} ms  {:.3} ms", empty.0, empty.1);
        println!(
            "a 20,000-variable model to bytes and back ({} KiB): {:.3} ms  {:.3} ms",
            size / 1024,
            wire.0,
            wire.1
        );
    }
}
