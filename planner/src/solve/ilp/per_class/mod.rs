//! The per-class integer program, for hosts whose free cores differ in usable
//! threads (hybrid cores, an offline sibling), and its lexicographic solve.
//!
//! How many cores of each class every VM gets; then the lowest free cores of
//! each class (docs/plan.md, "The model"). Variables: `n[v][c]` whole cores of class c for VM v; `placed[v]`;
//! `y[v][k]` when v must stay on one NUMA node; `u[v][d]` L3 domains a VM
//! touches; `z[v]` the emulator on an idle sibling; `touched[d]`/`full[d]` per
//! domain. Objectives are optimised one after the other, each optimum becoming
//! a constraint for the next (docs/plan.md, "Objective"): sequential solves
//! keep every objective integral and small, instead of one objective with huge
//! weights. Every solve gets what is left of the time limit.

mod program;

use super::backend::{run, SolveError};
use super::expr::Expr;
use super::groups::subset_sum;
use super::TRACE;
use crate::deadline::Deadline;
use crate::ids::CoreId;
use crate::solve::classes::Domain;
use crate::solve::ExactError;
use crate::solve::{Placement, PlanRequest, Tier};
use program::{build, Program};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The variable values of a concrete placement (a feasible start point).
fn start_from(request: &PlanRequest, program: &Program, placement: &Placement) -> Vec<f64> {
    let mut values = program.model.zeros();
    let mut class_of: BTreeMap<CoreId, usize> = BTreeMap::new();
    for (c, class) in program.classes.iter().enumerate() {
        for &core in &class.cores {
            class_of.insert(core, c);
        }
    }
    let mut used_per_domain: BTreeMap<Domain, u32> = BTreeMap::new();
    for (&i, cores) in &placement.cores {
        let Some(Some(vars)) = program.vms.get(i) else {
            continue;
        };
        values[vars.placed.index()] = 1.0;
        let mut per_class: BTreeMap<usize, f64> = BTreeMap::new();
        for core in cores {
            if let Some(&c) = class_of.get(core) {
                *per_class.entry(c).or_default() += 1.0;
                let class = &program.classes[c];
                *used_per_domain.entry(class.domain).or_default() += 1;
                if let Some(&y) = vars.y.get(&class.node) {
                    values[y.index()] = 1.0;
                }
                if let Some(&u) = vars.u.get(&class.domain) {
                    values[u.index()] = 1.0;
                }
            }
        }
        for &(c, var) in &vars.n {
            values[var.index()] = per_class.get(&c).copied().unwrap_or(0.0);
        }
        if let (Some(z), Some(vm)) = (vars.z, request.vms.get(i)) {
            let taken = cores.len() as f64;
            values[z.index()] = (f64::from(vm.vcpus) + 1.0 - taken).clamp(0.0, 1.0);
        }
    }
    for (d, &(touched, full, cap)) in &program.domains {
        let used = used_per_domain.get(d).copied().unwrap_or(0);
        values[touched.index()] = f64::from(u8::from(used > 0));
        values[full.index()] = f64::from(u8::from(used == cap));
    }
    values
}

/// Where the tiers stand while they are solved one after the other.
struct Search {
    /// The last tier's answer.
    values: Option<Vec<f64>>,
    /// Whether every priority level so far was placed whole (then every VM's
    /// placed variable is 1 and the tiers' lower bounds hold).
    all_fixed: bool,
}

/// Solves lexicographically by `deadline`. A placement not proven because
/// the backend's process failed carries that fault.
pub fn place(request: &PlanRequest, deadline: Deadline) -> Result<Placement, ExactError> {
    let limit = deadline.remaining();
    let mut program = build(request);
    // Greedy first fit gives the first tier a feasible start: the ILP then
    // never places fewer VMs than greedy, even when stopped early.
    // A domain-aware packing is a second candidate: it usually reaches the
    // L3 objectives' bounds, which lets branch and bound stop at once.
    let candidates: Vec<Vec<f64>> = [
        crate::solve::greedy::place(request),
        crate::solve::pack::place(request),
    ]
    .iter()
    .map(|p| start_from(request, &program, p))
    .collect();
    let tiers = std::mem::take(&mut program.tiers);
    let mut search = Search {
        values: tiers.is_empty().then(|| program.model.zeros()),
        all_fixed: true,
    };
    let mut proven = true;
    let mut fault = None;
    for (tier, terms) in &tiers {
        // The quality objectives (L3 domains) are bin packing at heart; they
        // get a share of the time, so that one of them cannot eat it all.
        let quality = matches!(tier, Tier::L3PerVm | Tier::PartialL3);
        let budget = if quality {
            crate::deadline::quality_budget(limit)
        } else {
            limit
        };
        let left = deadline.remaining().min(budget);
        if left.is_zero() {
            proven = false;
            break;
        }
        match solve_tier(&program, &candidates, &search, *tier, terms, left) {
            Ok((v, optimal)) => {
                let best = terms.value(&v).round();
                search.values = Some(v);
                if !optimal {
                    proven = false;
                    break;
                }
                hold(&mut program, &mut search, *tier, terms, best);
            }
            Err(cause) if search.values.is_none() => {
                return Err(ExactError::Tier { tier: *tier, cause })
            }
            Err(e) => {
                e.keep_fault(&mut fault);
                proven = false;
                break;
            }
        }
    }
    let values = search.values.ok_or(ExactError::NoSolution)?;
    let mut placement = assign_counts(request, &program, &values, proven);
    placement.fault = fault;
    Ok(placement)
}

/// One tier: from the best feasible point known for it, which is the answer
/// when it meets the tier's lower bound; else the backend's answer.
fn solve_tier(
    program: &Program,
    candidates: &[Vec<f64>],
    search: &Search,
    tier: Tier,
    terms: &Expr,
    left: Duration,
) -> Result<(Vec<f64>, bool), SolveError> {
    let started = Instant::now();
    let start = search
        .values
        .iter()
        .chain(candidates.iter())
        .filter(|v| program.model.feasible(v))
        .min_by(|a, b| terms.value(a).total_cmp(&terms.value(b)))
        .cloned();
    let bound = if let Tier::Placed(_) | Tier::Running = tier {
        Some(-(terms.len() as f64))
    } else if search.all_fixed {
        program.bounds.get(&tier).copied()
    } else {
        None
    };
    let at_bound = match (&start, bound) {
        (Some(v), Some(b)) => terms.value(v) <= b + 1e-6,
        _ => false,
    };
    let outcome = match (&start, at_bound) {
        (Some(v), true) => Ok((v.clone(), true)),
        _ => run(&program.model, terms, left, start.as_deref()),
    };
    tracing::debug!(
        target: TRACE,
        "ilp: {tier}: {:.1} ms, {} variables, {} constraints, {}",
        started.elapsed().as_secs_f64() * 1e3,
        program.model.vars(),
        program.model.cons(),
        match &outcome {
            Ok((v, true)) => format!("optimal {}", terms.value(v)),
            Ok((v, false)) => format!("stopped at {}", terms.value(v)),
            Err(e) => format!("failed: {e}"),
        }
    );
    outcome
}

/// Holds a solved tier at its optimum `best`: later tiers may not make it
/// worse.
fn hold(program: &mut Program, search: &mut Search, tier: Tier, terms: &Expr, best: f64) {
    // A priority level placed whole is fixed outright (a sum alone leaves
    // the relaxation free to place VMs fractionally); otherwise the sum is
    // kept, so that later objectives may still choose which VMs of the
    // level to leave out.
    let whole =
        terms.terms().iter().all(|&(_, c)| c == -1.0) && best <= -(terms.len() as f64) + 0.5;
    let level = matches!(tier, Tier::Placed(_) | Tier::Running);
    if level && !whole {
        search.all_fixed = false;
    }
    if level && whole {
        for &(var, _) in terms.terms() {
            program.model.ge(var, 1.0);
        }
    } else {
        // Objectives are integers: hold the optimum exactly (`best + 0.5`
        // would loosen every later objective).
        program.model.le(terms.clone(), best);
    }
    // Cores used is now fixed: when no set of whole domains adds up to it,
    // some domain must be partly used.
    if tier == Tier::Cores && !program.domains.is_empty() {
        let caps: Vec<u32> = program.domains.values().map(|&(_, _, c)| c).collect();
        if !subset_sum(&caps, best.max(0.0) as u32) {
            let partial: Expr = program.domains.values().map(|&(t, f, _)| t - f).sum();
            program.model.ge(partial, 1.0);
            program.bounds.insert(Tier::PartialL3, 1.0);
        }
    }
}

/// Counts → concrete cores: VMs by priority (then spec order) take the lowest
/// free cores of each class.
fn assign_counts(
    request: &PlanRequest,
    program: &Program,
    values: &[f64],
    proven: bool,
) -> Placement {
    let mut next: Vec<usize> = vec![0; program.classes.len()];
    let mut order: Vec<usize> = (0..request.vms.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.vms[i].priority), i));
    let mut cores: BTreeMap<usize, Vec<CoreId>> = BTreeMap::new();
    for i in order {
        let Some(Some(vars)) = program.vms.get(i) else {
            continue;
        };
        if values.get(vars.placed.index()).copied().unwrap_or(0.0) < 0.5 {
            continue;
        }
        let mut mine = Vec::new();
        for &(c, var) in &vars.n {
            let count = var.count(values) as usize;
            let class = &program.classes[c];
            let start = next[c];
            let end = (start + count).min(class.cores.len());
            mine.extend_from_slice(&class.cores[start..end]);
            next[c] = end;
        }
        mine.sort();
        cores.insert(i, mine);
    }
    Placement {
        cores,
        proven,
        fault: None,
    }
}
