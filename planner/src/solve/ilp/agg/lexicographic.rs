//! Solving a model's objectives one after the other, each held at its
//! optimum: the terms a model collects for them ([`Objectives`]), the
//! sequence itself, and the lower bounds that end a tier without a solve.

use super::super::backend::{run, Model};
use super::super::expr::{Expr, Var};
pub(super) use super::super::groups::fewest_or_all;
use super::super::groups::subset_sum;
use super::super::tiers::{in_order, Tiers};
use super::super::TRACE;
use super::host::{Cell, Host, Vms};
use super::{Stats, TierRun};
use crate::deadline::Deadline;
use crate::solve::{NumaPolicy, Placement, PlanRequest, Tier, VmRequest};
use std::collections::BTreeMap;
use std::time::Instant;

/// The terms of objectives 1–5 that a model collects while it is written.
#[derive(Debug, Default)]
pub(super) struct Objectives {
    /// Per priority level: minus the VMs placed.
    pub(super) placed: BTreeMap<i64, Expr>,
    /// Minus the vCPUs placed.
    pub(super) vcpus: Expr,
    pub(super) cores: Expr,
    pub(super) extra: Expr,
    pub(super) remote: Expr,
}

impl Objectives {
    /// `v` counts VMs like `vm` placed, of `cores` cores each.
    pub(super) fn place(&mut self, vm: &VmRequest, v: Var, cores: u32) {
        *self.placed.entry(vm.priority).or_default() -= v;
        self.vcpus -= f64::from(vm.vcpus) * v;
        self.cores += f64::from(cores) * v;
    }

    /// Objectives 1–5 in their order, then `more`.
    pub(super) fn tiers(self, request: &PlanRequest, more: Tiers) -> Tiers {
        let mut rest = vec![
            (Tier::Vcpus, self.vcpus),
            (Tier::Cores, self.cores),
            (Tier::ExtraNodes, self.extra),
            (Tier::NicRemote, self.remote),
        ];
        rest.extend(more);
        in_order(request, self.placed, rest)
    }
}

/// `tiers`, or with `placing_only` (a re-solve that asks which VMs fit) only
/// the VMs placed per priority level.
pub(super) fn placing_tiers(tiers: Tiers, placing_only: bool) -> Tiers {
    if !placing_only {
        return tiers;
    }
    tiers
        .into_iter()
        .filter(|(t, _)| matches!(t, Tier::Placed(_)))
        .collect()
}

/// Runs the tiers of one model in order, each held at its optimum. Returns
/// the last values and whether every tier was proven; adds the tier runs
/// (and a fault of the backend, if one stopped it) to `stats`.
pub(super) fn lexicographic(
    model: &mut Model,
    tiers: &Tiers,
    bounds: &BTreeMap<Tier, f64>,
    candidates: &[Vec<f64>],
    deadline: Deadline,
    every_vm_placed: bool,
    stats: &mut Stats,
) -> (Option<Vec<f64>>, bool) {
    let mut values: Option<Vec<f64>> = None;
    let mut all_placed = every_vm_placed;
    for (tier, terms) in tiers {
        let started = Instant::now();
        let start = values
            .iter()
            .chain(candidates)
            .filter(|v| model.feasible(v))
            .min_by(|a, b| terms.value(a).total_cmp(&terms.value(b)))
            .cloned();
        // Bounds of tiers 2–6 hold when every VM is placed; those of 5 and 7
        // (0, or 1 when no set of whole domains has the cores used) always.
        // Placed: every VM of the level (a variable may count several VMs).
        let bound = match tier {
            Tier::Placed(_) | Tier::NicRemote | Tier::PartialL3 => bounds.get(tier).copied(),
            _ if all_placed => bounds.get(tier).copied(),
            _ => None,
        };
        let at_bound = matches!((&start, bound), (Some(v), Some(b)) if terms.value(v) <= b + 1e-6);
        let left = deadline.remaining();
        let outcome = match &start {
            Some(s) if at_bound => Some((s.clone(), true)),
            _ if left.is_zero() => None,
            _ => run(model, terms, left, start.as_deref())
                .inspect_err(|e| e.keep_fault(&mut stats.fault))
                .ok(),
        };
        let (v, proven) = match outcome {
            Some((v, proven)) => {
                // Never worse than the start (a backend stopped early may
                // return a worse incumbent).
                let (v, proven) = match &start {
                    Some(s) if terms.value(s) < terms.value(&v) - 1e-6 => (s.clone(), false),
                    _ => (v, proven),
                };
                // An answer at a lower bound is optimal, stopped or not.
                let at = bound.is_some_and(|b| terms.value(&v) <= b + 1e-6);
                (v, proven || at)
            }
            None => match start {
                Some(s) => (s, false),
                None => return (values, false),
            },
        };
        let best = terms.value(&v).round();
        stats.tiers.push(TierRun {
            tier: *tier,
            value: best,
            ms: started.elapsed().as_secs_f64() * 1e3,
            proven,
            by_bound: at_bound,
        });
        tracing::debug!(
            target: TRACE,
            "agg: {tier}: {:.1} ms, {} variables, {} constraints, {} {best}",
            started.elapsed().as_secs_f64() * 1e3,
            model.vars(),
            model.cons(),
            if proven { "optimal" } else { "stopped at" }
        );
        values = Some(v);
        if !proven {
            return (values, false);
        }
        if let Tier::Placed(_) = tier {
            if bounds.get(tier).is_none_or(|&b| best > b + 0.5) {
                all_placed = false;
            }
        }
        model.le(terms.clone(), best);
    }
    (values, true)
}

/// Lower bounds of objectives 6 (when every VM is placed: each VM's fewest
/// domains) and 7 (1 when no set of whole domains holds the cores used).
pub(super) fn stage2_bounds(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    held: &BTreeMap<Tier, f64>,
    all_placed: bool,
) -> BTreeMap<Tier, f64> {
    let mut bounds = BTreeMap::new();
    if all_placed {
        let fewest_of = |vm: &VmRequest, c: u32| -> u32 {
            host.nodes
                .keys()
                .filter(|&&k| host.allows(vm, k))
                .map(|&k| host.fewest_cells(k, c))
                .min()
                .unwrap_or(1)
        };
        let mut total = 0.0;
        for (members, c) in &vms.types {
            total += f64::from(fewest_of(&request.vms[members[0]], *c)) * members.len() as f64;
        }
        for &(i, c) in &vms.loose {
            let vm = &request.vms[i];
            // A VM that may span nodes can join cells of several nodes.
            total += f64::from(if vm.numa == NumaPolicy::Spread {
                let caps: Vec<u32> = host.cells.iter().map(Cell::cap).collect();
                fewest_or_all(&caps, c)
            } else {
                fewest_of(vm, c)
            });
        }
        bounds.insert(Tier::L3PerVm, total);
    }
    let partial = held
        .get(&Tier::Cores)
        .is_some_and(|&cores| some_domain_partly_used(host, cores));
    bounds.insert(Tier::PartialL3, f64::from(u8::from(partial)));
    bounds
}

/// Whether no set of whole L3 domains has exactly `cores` free cores: then
/// some domain is partly used.
pub(super) fn some_domain_partly_used(host: &Host, cores: f64) -> bool {
    let caps: Vec<u32> = host.domain_caps().into_values().collect();
    !subset_sum(&caps, cores.max(0.0) as u32)
}

/// Whether `placement` reaches the held optima of objectives 1–5.
pub(super) fn holds(
    request: &PlanRequest,
    placement: &Placement,
    held: &BTreeMap<Tier, f64>,
) -> bool {
    let o = crate::solve::objective(request, placement);
    let by_level: BTreeMap<i64, u32> = o.placed_by_priority.iter().copied().collect();
    held.iter().all(|(tier, &value)| {
        let got = match tier {
            Tier::Placed(l) => -f64::from(by_level.get(l).copied().unwrap_or(0)),
            Tier::Vcpus => -f64::from(o.vcpus_placed),
            Tier::Cores => f64::from(o.cores_used),
            Tier::ExtraNodes => f64::from(o.extra_numa_nodes),
            Tier::NicRemote => f64::from(o.nic_remote_cores),
            // The aggregated models have no running VMs (ilp::place gives
            // those to the per-class model).
            Tier::L3PerVm | Tier::PartialL3 | Tier::Running | Tier::Moves => return true,
        };
        got <= value + 1e-6
    })
}

/// Traces a tier of the pattern model (`PINPLAN_ILP_TRACE`).
pub(super) fn trace_tier(tier: Tier, started: Instant, proven: bool, value: f64) {
    tracing::debug!(
        target: TRACE,
        "agg: {tier} (arc flow): {:.1} ms, {} {value}",
        started.elapsed().as_secs_f64() * 1e3,
        if proven { "optimal" } else { "stopped at" }
    );
}

/// Whether the placed tiers in `stats` place every VM of `request`.
pub(super) fn placed_everything(stats: &Stats, request: &PlanRequest) -> bool {
    let placed: f64 = stats
        .tiers
        .iter()
        .filter(|r| matches!(r.tier, Tier::Placed(_)))
        .map(|r| -r.value)
        .sum();
    placed as usize == request.vms.len()
}
