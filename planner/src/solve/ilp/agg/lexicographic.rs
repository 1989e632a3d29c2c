//! Solving a model's objectives one after the other, each held at its
//! optimum: the terms a model collects for them ([`Objectives`]), the
//! sequence itself, and the lower bounds that end a tier without a solve.

use super::super::backend::Model;
use super::super::expr::{Expr, Var};
pub(super) use super::super::groups::fewest_or_all;
use super::super::groups::subset_sum;
use super::super::lexicographic::{lexicographic as one_loop, Rules};
use super::super::tiers::{in_order, Tiers};
use super::super::TRACE;
use super::full_host;
use super::host::{Host, Vms};
use super::Stats;
use crate::deadline::Deadline;
use crate::solve::classes::Domain;
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

/// `tiers`, or where `ask` is `placing_only` (a re-solve that asks whether
/// every VM fits) only the VMs placed per priority level.
pub(super) fn placing_tiers(tiers: Tiers, ask: Ask) -> Tiers {
    if !ask.placing_only {
        return tiers;
    }
    tiers.into_iter().filter(|(t, _)| t.places_vms()).collect()
}

/// What the aggregated models add to the one loop: the bounds of
/// [`stage2_bounds`] and the placed levels', and whether every VM is placed
/// (the bounds of tiers 2–6 hold only then).
struct AggRules<'b> {
    bounds: &'b BTreeMap<Tier, f64>,
    all_placed: bool,
    placing_only: bool,
}

impl Rules for AggRules<'_> {
    fn bound(&self, tier: Tier, _terms: &Expr) -> Option<f64> {
        // Bounds of tiers 2–6 hold when every VM is placed; those of 5 and 7
        // (0, or 1 when no set of whole domains has the cores used) always.
        // Placed: every VM of the level (a variable may count several VMs).
        match tier {
            Tier::Placed(_) | Tier::NicRemote | Tier::PartialL3 => self.bounds.get(&tier).copied(),
            _ if self.all_placed => self.bounds.get(&tier).copied(),
            _ => None,
        }
    }

    fn hold(&mut self, model: &mut Model, tier: Tier, terms: &Expr, best: f64) {
        if let Tier::Placed(_) = tier {
            if self.bounds.get(&tier).is_none_or(|&b| best > b + 0.5) {
                self.all_placed = false;
            }
        }
        model.le(terms.clone(), best);
    }

    fn below_start(&self) -> bool {
        // The first-fit starts often meet an optimum the backend then took
        // seconds to find again (docs/benchmarks.md, seventh pass).
        true
    }

    fn only_at_bound(&self, tier: Tier) -> bool {
        // An explanation's re-solve: whether every VM of the level fits.
        self.placing_only && tier.places_vms()
    }
}

/// What one loop of the aggregated models is asked, beside its tiers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Ask {
    /// Every VM is placed (the second stage, after the first placed them
    /// all) or has a column to be (the first): the bounds of tiers 2–6 hold
    /// while every level is placed whole.
    pub(super) every_vm_placed: bool,
    /// Only whether every VM of each level fits ([`placing_tiers`]; an
    /// explanation's re-solve): a level's search looks only for points
    /// with all of it placed ([`Rules::only_at_bound`]).
    pub(super) placing_only: bool,
}

impl Ask {
    /// Each tier's optimum.
    pub(super) fn optima(every_vm_placed: bool) -> Ask {
        Ask {
            every_vm_placed,
            placing_only: false,
        }
    }

    /// The first stage's (objectives 1–5 on nodes): every VM placed is
    /// every VM having a column.
    pub(super) fn first_stage(request: &PlanRequest, vms: &Vms, placing_only: bool) -> Ask {
        Ask {
            every_vm_placed: vms.placeable() == request.vms.len(),
            placing_only,
        }
    }
}

/// Runs the tiers of one model in order through the one loop
/// ([`super::super::lexicographic`]). Returns the last values and whether
/// every tier was proven; adds the tier runs (and a fault of the backend,
/// if one stopped it) to `stats`.
pub(super) fn lexicographic(
    model: &mut Model,
    tiers: &Tiers,
    bounds: &BTreeMap<Tier, f64>,
    candidates: &[Vec<f64>],
    deadline: Deadline,
    ask: Ask,
    stats: &mut Stats,
) -> (Option<Vec<f64>>, bool) {
    let mut rules = AggRules {
        bounds,
        all_placed: ask.every_vm_placed,
        placing_only: ask.placing_only,
    };
    let solved = one_loop(model, tiers, candidates, deadline, &mut rules, "agg");
    stats.tiers.extend(solved.runs);
    if stats.fault.is_none() {
        stats.fault = solved.fault;
    }
    (solved.values, solved.proven)
}

/// Lower bounds of objectives 6 (when every VM is placed: each VM's fewest
/// domains, and on a full host the parts its VMs and domains can form,
/// [`full_host`]) and 7 (1 when no set of whole domains holds the cores
/// used).
pub(super) fn stage2_bounds(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    held: &BTreeMap<Tier, f64>,
    all_placed: bool,
) -> BTreeMap<Tier, f64> {
    let mut bounds = BTreeMap::new();
    if all_placed {
        let fewest = least_domains(request, host, vms, held);
        let sizes: Vec<u32> = vms.each().map(|(_, c)| c).collect();
        let caps: Vec<u32> = host.domain_caps().into_values().collect();
        let full = full_host::least_domains(&sizes, &caps).map_or(0.0, f64::from);
        bounds.insert(Tier::L3PerVm, fewest.max(full));
    }
    let partial = held
        .get(&Tier::Cores)
        .is_some_and(|&cores| some_domain_partly_used(host, cores));
    bounds.insert(Tier::PartialL3, f64::from(u8::from(partial)));
    bounds
}

/// Objective 6's least value with every VM placed: each VM's fewest
/// domains, summed.
fn least_domains(request: &PlanRequest, host: &Host, vms: &Vms, held: &BTreeMap<Tier, f64>) -> f64 {
    let fewest_of = |vm: &VmRequest, c: u32| -> u32 {
        host.nodes
            .keys()
            .filter(|&&k| host.allows(vm, k))
            .map(|&k| host.fewest_cells(k, c))
            .min()
            .unwrap_or(1)
    };
    // Where objective 4 has a VM over nodes, a `preferred` VM may be
    // that VM: its pieces may touch fewer domains than it would on any
    // one node (6 + 6 over two nodes of domains of 6, 1, 1 and 1 free
    // cores: 2 domains, against 4 on either node alone).
    let may_span = held.get(&Tier::ExtraNodes).is_some_and(|&e| e >= 0.5);
    let mut total = 0.0;
    for (i, c) in vms.each() {
        let vm = &request.vms[i];
        // A VM that may span nodes can join cells of several nodes, and
        // the cells of one domain over several nodes (sub-NUMA
        // clustering: one L3 over the nodes of a package) count once.
        let spanning =
            vm.numa == NumaPolicy::Spread || (vm.numa == NumaPolicy::Preferred && may_span);
        let fewest = if spanning {
            let mut caps: BTreeMap<Domain, u32> = BTreeMap::new();
            for cell in host.cells.iter().filter(|e| host.allows(vm, e.node)) {
                *caps.entry(cell.domain).or_default() += cell.cap();
            }
            fewest_or_all(&caps.into_values().collect::<Vec<_>>(), c)
        } else {
            fewest_of(vm, c)
        };
        total += f64::from(fewest);
    }
    total
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
            Tier::L3PerVm
            | Tier::PartialL3
            | Tier::PartialNodes
            | Tier::RunningPlaced
            | Tier::VcpusMoved => return true,
            // A fleet's objectives: no host model has them.
            Tier::RunningKept | Tier::HostMoves | Tier::HostsTouched => return true,
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

/// Whether the placed tiers in `stats` place every VM of `request`: each
/// level's last run counts (a model that gave up after its runs, such as
/// the node pattern model with no layout, leaves them before the next
/// model's; summed, they counted some VMs twice — found in review).
pub(super) fn placed_everything(stats: &Stats, request: &PlanRequest) -> bool {
    let last: BTreeMap<Tier, f64> = stats
        .tiers
        .iter()
        .filter(|r| matches!(r.tier, Tier::Placed(_)))
        .map(|r| (r.tier, r.value))
        .collect();
    let placed: f64 = last.values().map(|v| -v).sum();
    placed.round() as usize == request.vms.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solve::ilp::agg::TierRun;

    /// Found in review: a model that gave up after its placing runs (the
    /// node pattern model with no layout) leaves them before the next
    /// model's. One VM placed of two, told twice, is not every VM placed.
    #[test]
    fn each_level_counts_once() {
        let run = |value: f64| TierRun {
            tier: Tier::Placed(0),
            value,
            ms: 0.0,
            proven: true,
            by_bound: false,
        };
        let request = PlanRequest {
            host: crate::topology::load(&crate::topology::Source::Synthetic(
                "package:1 numa:1 l3:1 core:2 pu:1".to_owned(),
            ))
            .unwrap_or_else(|e| panic!("{e}")),
            reserved: Default::default(),
            fixed: Vec::new(),
            vms: vec![VmRequest::new("a", 2), VmRequest::new("b", 2)],
            order: Default::default(),
            max_moves: None,
        };
        let mut stats = Stats {
            tiers: vec![run(-1.0), run(-1.0)],
            ..Default::default()
        };
        assert!(!placed_everything(&stats, &request));
        stats.tiers.push(run(-2.0));
        assert!(placed_everything(&stats, &request));
    }
}
