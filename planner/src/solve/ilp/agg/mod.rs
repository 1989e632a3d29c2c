//! The aggregated placement model: the default exact solver on hosts whose
//! free cores all have the same number of usable threads (every host measured
//! so far; others use the per-class model of [`super::per_class`]).
//!
//! With one thread count, a VM needs the same number of cores wherever it
//! goes, and cores of one NUMA node and one L3 domain (a *cell*, `host`) are
//! interchangeable. Two stages, solved one after the other:
//!
//! 1. **Objectives 1–5 over NUMA nodes.** On hosts of small nodes, a pattern
//!    and arc-flow model over nodes (`node_patterns`; it does 6–7 too where
//!    every node is one L3 domain; memory, where it binds, is a second
//!    resource of its flows, `memory_axis`); else the counting node model
//!    (`node_model`): VMs with `numa = "strict"` that agree on everything
//!    that matters to placement (vCPUs, policies, NIC node, priority) form one
//!    *type*, counted per node; other VMs keep their own variables (`loose`).
//! 2. **Objectives 6–7 over cells**, with 1–5 held at their optima: a pattern
//!    and arc-flow model over the cells of each node (`cell_patterns`) where
//!    every L3 domain is one cell; else the cell model (`cells`), where
//!    strict VMs split over cells sit in split slots (`slots`).
//!
//! Every objective is an integer and is held exactly at its optimum
//! (`lexicographic`). Stage 1's answer is turned into concrete cores by a
//! packing (`layout`) that needs no more slots than the cell model has,
//! which is also the answer when the time runs out during objectives 6–7.

mod cell_patterns;
mod cells;
mod components;
mod fills;
mod full_host;
mod host;
mod layout;
mod lexicographic;
mod loose;
mod memory_axis;
mod node_model;
mod node_patterns;
mod patterns;
mod slots;
mod symmetry;

use super::backend::SolveError;
use super::TRACE;
use crate::deadline::Deadline;
use crate::solve::classes::{self, FreeCore};
use crate::solve::{Placement, PlanRequest, Progress, Tier};
use cell_patterns::{at_fewest, patterns_stage, Layouts, PatternModel};
use host::{Host, Vms};
use layout::{cores_of, partial_of, pieces_of, units_of, Units};
use lexicographic::{holds, placed_everything, stage2_bounds};
use std::collections::{BTreeMap, BTreeSet};

pub use super::lexicographic::TierRun;

/// What the aggregated solver did, for benchmarks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Variables of the node model and of the cell model.
    pub variables: (usize, usize),
    /// Per objective, in order.
    pub tiers: Vec<TierRun>,
    /// The first failure of the backend's process, if one stopped a tier.
    pub fault: Option<SolveError>,
    /// Objectives 6–7 were ended by the search over what each node holds.
    pub searched: bool,
}

/// The search over what each node holds alone, from no start (for tests):
/// objectives 1–5 held at `held`; with `floor`, it stops at the models'
/// lower bounds of objectives 6–7 (every VM placed), else at none. `None`
/// where it declines or stops; else its optimum of objectives 6–7, `None`
/// inside when it found no layout.
#[cfg(test)]
pub(crate) fn search_alone(
    request: &PlanRequest,
    held: &BTreeMap<Tier, f64>,
    floor: bool,
) -> Option<Option<(u32, u32)>> {
    let host = Host::new(request);
    let vms = Vms::new(request, &host);
    let far = Deadline::after(std::time::Duration::from_secs(30));
    let none = (u32::MAX, u32::MAX);
    let bounds = bounds_for_tests(request, held);
    let bound = |tier| bounds.get(&tier).map_or(0, |&b: &f64| b.max(0.0) as u32);
    let floor = if floor {
        (bound(Tier::L3PerVm), bound(Tier::PartialL3))
    } else {
        (0, 0)
    };
    match fills::search(request, (&host, &vms), held, (none, floor), far)? {
        fills::Found::Optimum(value, units) => Some(units.map(|_| value)),
        fills::Found::Stopped(_) => None,
    }
}

/// The lower bounds of objectives 6–7 with objectives 1–5 at `held` and
/// every VM placed (for tests).
#[cfg(test)]
pub(crate) fn bounds_for_tests(
    request: &PlanRequest,
    held: &BTreeMap<Tier, f64>,
) -> BTreeMap<Tier, f64> {
    let host = Host::new(request);
    let vms = Vms::new(request, &host);
    stage2_bounds(request, &host, &vms, held, true)
}

/// Whether this model applies: every free core has the same usable threads.
pub fn supported(request: &PlanRequest) -> bool {
    let free = classes::free_cores(request);
    let threads: BTreeSet<u32> = free.iter().map(FreeCore::threads).collect();
    threads.len() <= 1
}

/// Solves lexicographically by `deadline`, publishing the best placement
/// known so far in `progress` (for a watchdog that cannot wait any longer),
/// and says what it did. A placement not proven because the backend's
/// process failed carries that fault.
pub fn place(request: &PlanRequest, deadline: Deadline, progress: &Progress) -> (Placement, Stats) {
    let (mut placement, stats) = stages(request, first_fit(request), deadline, progress);
    if !placement.proven {
        placement.fault.clone_from(&stats.fault);
    }
    (placement, stats)
}

/// The starts: greedy first fit and the domain-aware packing.
fn first_fit(request: &PlanRequest) -> Vec<Placement> {
    vec![
        crate::solve::greedy::place(request),
        crate::solve::pack::place(request),
    ]
}

/// The relaxation of a host of mixed thread counts: this model on it, which
/// counts every free core at the host's most usable threads (`Host`), so
/// that each VM needs its fewest cores wherever it goes. Every placement of
/// the host, with the cores a VM has beyond its fewest dropped, is one of
/// the relaxation's and no worse in the lexicographic order (fewer cores is
/// better at objective 3, before anything those cores could change), so the
/// relaxation's optimum bounds the host's objective by objective while the
/// objectives before agree (the per-class model's bounds).
///
/// Holds where this model counts what the host's model does (the face of
/// `ilp` decides: `relaxable`). The relaxation's proven optimum, else
/// `None`. Its cores may break a VM's threads on the host (a VM of an even
/// count of vCPUs on a core of one thread): the caller lays them out again.
pub(crate) fn relaxed(request: &PlanRequest, deadline: Deadline) -> Option<Placement> {
    let host = Host::new(request);
    // Only starts that are points of the relaxation: each VM on its fewest
    // cores at the most threads.
    let fewest = |i: usize, cores: &Vec<crate::ids::CoreId>| {
        let vm = request.vms.get(i);
        vm.and_then(|vm| host::cores_per_vm(vm, host.threads)) == u32::try_from(cores.len()).ok()
    };
    let starts = first_fit(request)
        .into_iter()
        .filter(|p| p.cores.iter().all(|(&i, cores)| fewest(i, cores)))
        .collect();
    let (placement, _) = stages(request, starts, deadline, &Progress::default());
    placement.proven.then_some(placement)
}

/// This model on the host's cores of the most usable threads alone (the
/// others left out, as if not free): a placement of the host itself, every
/// VM on cores of the most threads, for the per-class model to start from
/// where the relaxation ([`relaxed`]) puts VMs on cores of fewer threads
/// that no VM can spare. `None` where no core has fewer threads.
pub(crate) fn on_most_threads(request: &PlanRequest, deadline: Deadline) -> Option<Placement> {
    let free = classes::free_cores(request);
    let most = free.iter().map(FreeCore::threads).max()?;
    let fewer: crate::cpuset::CpuSet = free
        .iter()
        .filter(|c| c.threads() < most)
        .flat_map(|c| c.pus.iter())
        .collect();
    if fewer.is_empty() {
        return None;
    }
    let mut restricted = request.clone();
    for pu in &mut restricted.host.pus {
        if fewer.contains(pu.cpu) {
            pu.usable = false;
        }
    }
    let (placement, _) = stages(
        &restricted,
        first_fit(&restricted),
        deadline,
        &Progress::default(),
    );
    Some(placement)
}

/// Both stages, one after the other, from `starts`.
fn stages(
    request: &PlanRequest,
    starts: Vec<Placement>,
    deadline: Deadline,
    progress: &Progress,
) -> (Placement, Stats) {
    let host = Host::new(request);
    let vms = Vms::new(request, &host);
    let mut stats = Stats::default();
    progress.stage("first-fit starts", request.vms.len());
    for s in &starts {
        progress.offer(request, s);
    }
    progress.stage(
        "objectives 1-5 (VMs, vCPUs, cores, nodes, NIC) on NUMA nodes",
        request.vms.len(),
    );
    let start_units: Vec<Units> = starts.iter().filter_map(|p| units_of(&host, p)).collect();

    // 1. Objectives 1–5 on nodes: patterns and arc flow, else counts.
    let (laid_out, proven, complete) = match node_patterns::node_patterns(
        request,
        (&host, &vms),
        &start_units,
        deadline,
        progress.placing_only(),
        &mut stats,
    ) {
        Some(outcome) => outcome,
        None => node_model::counting_stage(
            request,
            &host,
            &vms,
            &start_units,
            (deadline, progress.placing_only()),
            &mut stats,
        ),
    };
    progress.offer(request, &cores_of(request, &host, &laid_out, false));
    if complete || (proven && progress.placing_only()) {
        return (cores_of(request, &host, &laid_out, proven), stats);
    }
    if !proven {
        // Stopped early: the best of the starts and this, objective by
        // objective, with the VMs it leaves out placed first-fit where they
        // still fit (a run stopped at "VMs placed" holds only what it had).
        let best = progress
            .best()
            .unwrap_or_else(|| cores_of(request, &host, &laid_out, false));
        let filled = crate::solve::greedy::fill(request, best);
        // The watchdog, should it stop waiting, takes this too.
        progress.offer(request, &filled);
        return (filled, stats);
    }
    progress.stage(
        "objectives 6-7 (L3 domains) within each node",
        request.vms.len(),
    );
    let held = Held {
        request,
        host: &host,
        vms: &vms,
        values: stats.tiers.iter().map(|r| (r.tier, r.value)).collect(),
        all_placed: placed_everything(&stats, request),
        deadline,
    };
    let fallback = laid_out.clone();
    let (placement, stats) = held.stage2(laid_out, &starts, &start_units, stats);
    if !keeps_nodes(request, &placement) {
        // A stage-2 answer (seen once, from the cell model stopped by the
        // clock) that takes a VM off the nodes it must keep to is never
        // used: objectives 1–5's layout is, unproven.
        tracing::debug!(target: TRACE, "agg: objectives 6-7 broke a VM's nodes: objectives 1-5's layout instead");
        return (cores_of(request, &host, &fallback, false), stats);
    }
    (placement, stats)
}

/// Objectives 6–7 at `value` as the search ended them, for the stats.
fn searched_runs(value: fills::Value, started: std::time::Instant) -> [TierRun; 2] {
    let ms = started.elapsed().as_secs_f64() * 1e3;
    tracing::debug!(
        target: TRACE,
        "agg: L3 domains per VM and partially used (search over the nodes' contents): {ms:.1} ms, optimal {value:?}"
    );
    [
        (Tier::L3PerVm, value.0, ms),
        (Tier::PartialL3, value.1, 0.0),
    ]
    .map(|(tier, v, ms)| TierRun {
        tier,
        value: f64::from(v),
        ms,
        proven: true,
        by_bound: false,
    })
}

/// Whether every VM of `placement` keeps to its nodes: one with `numa =
/// "strict"`, its required NICs' nodes only, and each node it must touch.
fn keeps_nodes(request: &PlanRequest, placement: &Placement) -> bool {
    let node_of: BTreeMap<crate::ids::CoreId, Option<crate::ids::NodeId>> = request
        .host
        .cores
        .iter()
        .map(|c| (c.id, c.numa_node))
        .collect();
    placement.cores.iter().all(|(&i, cores)| {
        let Some(vm) = request.vms.get(i) else {
            return false;
        };
        let nodes: BTreeSet<Option<crate::ids::NodeId>> = cores
            .iter()
            .map(|c| node_of.get(c).copied().flatten())
            .collect();
        let strict = vm.numa != crate::solve::NumaPolicy::Strict || nodes.len() <= 1;
        let required = vm.required_nodes().is_none_or(|allowed| {
            nodes
                .iter()
                .all(|n| n.is_some_and(|n| allowed.contains(&n)))
        });
        let touched = vm.cell_nodes.iter().all(|n| nodes.contains(&Some(*n)));
        strict && required && touched
    })
}

/// Where objectives 6–7 start: objectives 1–5 solved, held at their optima.
struct Held<'a> {
    request: &'a PlanRequest,
    host: &'a Host,
    vms: &'a Vms,
    /// The optima of objectives 1–5.
    values: BTreeMap<Tier, f64>,
    /// Whether every VM is placed.
    all_placed: bool,
    deadline: Deadline,
}

impl Held<'_> {
    /// Objectives 6–7; `laid_out` is the layout of the optimum of 1–5.
    fn stage2(
        &self,
        laid_out: Units,
        starts: &[Placement],
        start_units: &[Units],
        mut stats: Stats,
    ) -> (Placement, Stats) {
        let (request, host, vms) = (self.request, self.host, self.vms);
        // 2. Objectives 6–7 by patterns and arc flow, where each L3 domain is
        // one cell (else, or when no pattern model can decide, on the cell
        // model). Objective 6 on the model of every layout; then, where every
        // VM touches its fewest domains, objective 7 on the compact layouts,
        // which hold an optimum then (`whole_and_rest`). Where the model of
        // every layout is too big (VMs of many cores over small domains),
        // both on the compact layouts, optimal at the lower bounds.
        let mut laid_out = laid_out;
        if host.one_cell_per_domain() {
            let placed = -self
                .values
                .iter()
                .filter(|(t, _)| matches!(t, Tier::Placed(_)))
                .map(|(_, v)| v)
                .sum::<f64>();
            let mut bounds = stage2_bounds(request, host, vms, &self.values, self.all_placed);
            let mut start = self.best_start(laid_out.clone(), starts);
            // The search over what each node holds, where it applies, ends
            // both objectives or gives a bound and a start.
            if let Some(placement) = self.searched(&mut start, &mut bounds, &mut stats) {
                return (placement, stats);
            }
            // With a known layout of L pieces for P placed VMs, no better
            // layout gives a VM more than L − P + 1.
            let most_parts =
                u32::try_from((pieces_of(&start) - placed + 1.0).max(1.0) as u64).unwrap_or(1);
            let model = |layouts: Layouts| {
                let pm = PatternModel::new(request, host, vms, &self.values, most_parts, layouts)?;
                if tracing::enabled!(target: TRACE, tracing::Level::DEBUG) {
                    let (variables, constraints) = pm.size();
                    tracing::debug!(
                        target: TRACE,
                        "agg: pattern model ({layouts:?} layouts): {variables} variables, \
                         {constraints} constraints, at most {most_parts} pieces per VM, {} cells",
                        host.cells.len()
                    );
                }
                Some(pm)
            };
            let stage = |pm: &mut PatternModel,
                         start: &Units,
                         tiers: &[Tier],
                         fewest: bool,
                         stats: &mut Stats| {
                patterns_stage(
                    (request, host),
                    pm,
                    (start, tiers, fewest),
                    &bounds,
                    self.deadline,
                    stats,
                )
            };
            if let Some(mut every) = model(Layouts::Every) {
                stats.variables.1 = every.size().0;
                let six = stage(&mut every, &start, &[Tier::L3PerVm], false, &mut stats);
                let Some(units) = units_of(host, &six).filter(|_| six.proven) else {
                    return (six, stats);
                };
                let value = pieces_of(&units);
                if at_fewest(request, host, &units) {
                    if let Some(mut compact) = model(Layouts::Compact) {
                        compact.hold_pieces(value);
                        let seven =
                            stage(&mut compact, &units, &[Tier::PartialL3], true, &mut stats);
                        if seven.proven || self.deadline.is_past() {
                            return (seven, stats);
                        }
                    }
                }
                every.hold_pieces(value);
                let seven = stage(&mut every, &units, &[Tier::PartialL3], false, &mut stats);
                return (seven, stats);
            }
            if let Some(mut compact) = model(Layouts::Compact) {
                stats.variables.1 = compact.size().0;
                let tiers = [Tier::L3PerVm, Tier::PartialL3];
                let placement = stage(&mut compact, &start, &tiers, false, &mut stats);
                if placement.proven || self.deadline.is_past() {
                    return (placement, stats);
                }
                if let Some(better) = units_of(host, &placement) {
                    laid_out = better;
                }
            } else {
                laid_out = start;
            }
        }
        cells::cells_stage(self, &laid_out, start_units, stats)
    }

    /// Objectives 6–7 by the search over what each node holds
    /// ([`fills`]), where it applies: the placement when it ends them;
    /// else its optimum as objective 6's bound, or a better `start`.
    fn searched(
        &self,
        start: &mut Units,
        bounds: &mut BTreeMap<Tier, f64>,
        stats: &mut Stats,
    ) -> Option<Placement> {
        let started = std::time::Instant::now();
        let value_of = |units: &Units| -> fills::Value {
            let whole = |x: f64| u32::try_from(x.round() as u64).unwrap_or(u32::MAX);
            (whole(pieces_of(units)), whole(partial_of(self.host, units)))
        };
        // A start at the bounds is optimal already: the models say so at once.
        let bound = |tier| bounds.get(&tier).map_or(0, |&b: &f64| b.max(0.0) as u32);
        let floor = (bound(Tier::L3PerVm), bound(Tier::PartialL3));
        if value_of(start) <= floor {
            return None;
        }
        // A quarter of the time: where it stops, the models get the rest.
        let deadline = self.deadline.within(
            self.deadline
                .share(0.25, std::time::Duration::from_millis(50)),
        );
        let found = fills::search(
            self.request,
            (self.host, self.vms),
            &self.values,
            (value_of(start), floor),
            deadline,
        )?;
        match found {
            fills::Found::Optimum(value, better) => {
                let units = better.unwrap_or_else(|| start.clone());
                if let Some(placement) = self.usable(&units, true) {
                    if value_of(&units) == value {
                        stats.searched = true;
                        stats.tiers.extend(searched_runs(value, started));
                        return Some(placement);
                    }
                }
                // Its layout breaks a rule it does not keep (objective 5 off
                // its optimum 0): the models decide. Its optimum is a lower
                // bound then, but as a cut it slowed CBC (0x5eed002a of the
                // 100 random scenarios: 0.7 s proven became 8 s unproven).
                tracing::debug!(target: TRACE, "agg: the search's layout breaks objectives 1-5: the models decide");
            }
            fills::Found::Stopped(Some(units)) => {
                if self.usable(&units, false).is_some() && value_of(&units) < value_of(start) {
                    *start = units;
                }
            }
            fills::Found::Stopped(None) => {}
        }
        None
    }

    /// `units` as a placement, if it holds objectives 1–5 and keeps every
    /// VM's cores and nodes.
    fn usable(&self, units: &Units, proven: bool) -> Option<Placement> {
        let whole = self.vms.each().all(|(i, c)| {
            units
                .get(&i)
                .is_some_and(|cells| cells.values().sum::<u32>() == c)
        });
        let placement = cores_of(self.request, self.host, units, proven);
        // `cores_of` stops at the end of a cell: every VM has its cores.
        let given = self.vms.each().all(|(i, c)| {
            placement
                .cores
                .get(&i)
                .is_some_and(|cores| cores.len() == c as usize)
        });
        (whole
            && given
            && units.len() == self.vms.placeable()
            && holds(self.request, &placement, &self.values)
            && keeps_nodes(self.request, &placement))
        .then_some(placement)
    }

    /// The best start that holds objectives 1–5: the node model's layout,
    /// or greedy's or the packing's when as good.
    fn best_start(&self, laid_out: Units, starts: &[Placement]) -> Units {
        let host = self.host;
        let mut start = laid_out;
        for p in starts {
            let Some(u) = units_of(host, p) else {
                continue;
            };
            let better_start = (pieces_of(&u), partial_of(host, &u))
                < (pieces_of(&start), partial_of(host, &start));
            if better_start && holds(self.request, p, &self.values) {
                start = u;
            }
        }
        start
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::{ThreadPolicy, VmRequest};
    use std::time::Duration;

    fn request(desc: &str, vms: Vec<VmRequest>) -> PlanRequest {
        PlanRequest::on_synthetic(desc, vms)
    }

    fn vm(name: &str, vcpus: u32) -> VmRequest {
        VmRequest {
            threads: ThreadPolicy::Prefer,
            ..VmRequest::new(name, vcpus)
        }
    }

    /// A level's bound is its number of VMs, not of variables: one variable
    /// counts every VM of a type. Greedy places the 6-core VM and one 2-core
    /// VM; three 2-core VMs is one more.
    #[test]
    fn identical_vms_count_as_many_not_as_one_variable() {
        let req = request(
            "package:1 core:8 pu:1",
            vec![vm("big", 6), vm("a", 2), vm("b", 2), vm("c", 2)],
        );
        assert_eq!(crate::solve::greedy::place(&req).cores.len(), 2);
        let (placement, _) = place(
            &req,
            Deadline::after(Duration::from_secs(10)),
            &Progress::default(),
        );
        assert!(placement.proven);
        let placed: BTreeSet<usize> = placement.cores.keys().copied().collect();
        assert_eq!(placed, BTreeSet::from([1, 2, 3]));
    }

    /// The guard on stage 2's answers: a strict VM over two nodes is caught,
    /// the same VM on one node passes.
    #[test]
    fn a_strict_vm_over_two_nodes_is_caught() {
        let req = request("package:1 numa:2 core:2 pu:1", vec![vm("a", 2)]);
        let by_node = |n: u32| -> Vec<crate::ids::CoreId> {
            req.host
                .cores
                .iter()
                .filter(|c| c.numa_node == Some(crate::ids::NodeId(n)))
                .map(|c| c.id)
                .collect()
        };
        let (zero, one) = (by_node(0), by_node(1));
        let placement = |cores: Vec<crate::ids::CoreId>| Placement {
            cores: BTreeMap::from([(0, cores)]),
            ..Placement::default()
        };
        assert!(keeps_nodes(&req, &placement(zero.clone())));
        assert!(!keeps_nodes(&req, &placement(vec![zero[0], one[0]])));
    }

    /// A VM larger than any L3 domain is split over the fewest domains of its
    /// node; the pattern model and the cell model agree.
    #[test]
    fn a_vm_larger_than_a_domain_touches_the_fewest_domains() {
        // 2 nodes × 3 L3 × 4 cores, 1 thread: a 10-core VM needs 3 domains.
        let req = request(
            "package:1 numa:2 l3:3 core:4 pu:1",
            vec![vm("big", 10), vm("small", 2)],
        );
        let (placement, stats) = place(
            &req,
            Deadline::after(Duration::from_secs(10)),
            &Progress::default(),
        );
        assert!(placement.proven, "{stats:?}");
        let o = crate::solve::objective(&req, &placement);
        assert_eq!(o.placed, 2);
        // big: 3 domains; small: 1 (the big VM's leftover domain or another).
        assert_eq!(o.vm_l3_domains, 4);
        // 12 cores used of 24: big's three domains hold 12 with small in the
        // third → no partial domain.
        assert_eq!(o.partial_l3_domains, 0);
    }
}
