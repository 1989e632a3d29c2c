//! The aggregated placement model: the default exact solver on hosts whose
//! free cores all have the same number of usable threads (every host measured
//! so far; others use the per-class model of [`super::per_class`]).
//!
//! With one thread count, a VM needs the same number of cores wherever it
//! goes, and cores of one NUMA node and one L3 domain (a *cell*) are
//! interchangeable. Two models, solved one after the other:
//!
//! 1. **Node model** (objectives 1–5). VMs with `numa = "strict"` that agree
//!    on everything that matters to placement (vCPUs, policies, NIC node,
//!    priority) form one *type*; `x[t][k]` counts the VMs of type t on node k.
//!    Other VMs keep their own variables: `p[v]` placed, `n[v][k]` cores on
//!    node k, `y[v][k]` node used (`numa = "preferred"`). Capacity per node.
//! 2. **Cell model** (objectives 6–7, with 1–5 held at their optima). A strict
//!    VM is either whole in one cell (`a[t][e]` counts them) or split over
//!    several cells of its node; split VMs sit in *split slots* per node, each
//!    taking one VM of one type (`τ`) and its cores per cell (`s`), touching
//!    cells `w`. A node with E cells needs at most E − 1 slots: if split VMs
//!    formed a cycle over cells, moving one core at a time around it keeps
//!    every cell's use and every earlier objective and ends with a VM touching
//!    one cell less, so some optimum has a forest of split VMs. Partly used L3
//!    domains are counted per domain (`touched − full`).
//!
//! Every objective is an integer and is held exactly at its optimum. The
//! node model's answer is turned into concrete cores by a packing that needs
//! no more slots than the cell model has, which is also the answer when the
//! time runs out during objectives 6–7.

use super::backend::{run, value_of, Model, Op, Terms};
use super::per_class::subset_sum;
use crate::solve::classes::{self, Domain, FreeCore};
use crate::solve::{EmulatorPolicy, NumaPolicy, Placement, PlanRequest, ThreadPolicy, Tier, VmRequest};
use crate::ids::{CoreId, NodeId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One tier's outcome, for traces and benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct TierRun {
    /// Which objective.
    pub tier: Tier,
    /// Its value (minimised; placed counts are negative).
    pub value: f64,
    /// Milliseconds spent on it.
    pub ms: f64,
    /// Proven optimal.
    pub proven: bool,
    /// Proven by a lower bound alone (no solve).
    pub by_bound: bool,
}

/// What the aggregated solver did, for benchmarks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Variables of the node model and of the cell model.
    pub variables: (usize, usize),
    /// Per objective, in order.
    pub tiers: Vec<TierRun>,
}

/// Whether this model applies: every free core has the same usable threads.
pub fn supported(request: &PlanRequest) -> bool {
    let free = classes::free_cores(request);
    let threads: BTreeSet<u32> = free.iter().map(FreeCore::threads).collect();
    threads.len() <= 1
}

/// Cores one VM needs on cores of `threads` usable threads, if it may use them.
fn cores_per_vm(vm: &VmRequest, threads: u32) -> Option<u32> {
    let unplaceable = vm.vcpus == 0 || (vm.threads == ThreadPolicy::Require && threads < 2);
    (!unplaceable).then(|| classes::cores_needed(vm, threads))
}

/// A NUMA node and L3 domain: interchangeable free cores.
#[derive(Debug, Clone)]
struct Cell {
    node: Option<NodeId>,
    domain: Domain,
    cores: Vec<CoreId>,
}

impl Cell {
    fn cap(&self) -> u32 {
        u32::try_from(self.cores.len()).unwrap_or(u32::MAX)
    }
}

/// The host as the models see it.
struct Host {
    cells: Vec<Cell>,
    /// Node → its cells (indices into `cells`).
    nodes: BTreeMap<Option<NodeId>, Vec<usize>>,
    threads: u32,
}

impl Host {
    fn new(request: &PlanRequest) -> Host {
        let free = classes::free_cores(request);
        let threads = free.iter().map(FreeCore::threads).max().unwrap_or(1);
        let mut by_cell: BTreeMap<(Option<NodeId>, Domain), Vec<CoreId>> = BTreeMap::new();
        for c in &free {
            by_cell
                .entry((c.node, c.domain()))
                .or_default()
                .push(c.core);
        }
        let cells: Vec<Cell> = by_cell
            .into_iter()
            .map(|((node, domain), mut cores)| {
                cores.sort();
                Cell {
                    node,
                    domain,
                    cores,
                }
            })
            .collect();
        let mut nodes: BTreeMap<Option<NodeId>, Vec<usize>> = BTreeMap::new();
        for (e, cell) in cells.iter().enumerate() {
            nodes.entry(cell.node).or_default().push(e);
        }
        Host {
            cells,
            nodes,
            threads,
        }
    }

    fn node_cap(&self, node: Option<NodeId>) -> u32 {
        self.nodes
            .get(&node)
            .map_or(0, |cells| cells.iter().map(|&e| self.cells[e].cap()).sum())
    }
}

/// VMs, grouped: strict VMs by type, the others one by one.
struct Vms {
    /// Strict types: member VM indices (spec order) and cores per VM.
    types: Vec<(Vec<usize>, u32)>,
    /// Other VMs: index and cores.
    loose: Vec<(usize, u32)>,
}

fn group(request: &PlanRequest, host: &Host) -> Vms {
    type Key = (u32, &'static str, bool, Option<NodeId>, Option<NodeId>, i64);
    let mut types: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    let mut loose = Vec::new();
    for (i, vm) in request.vms.iter().enumerate() {
        let Some(cores) = cores_per_vm(vm, host.threads) else {
            continue;
        };
        if vm.numa == NumaPolicy::Strict {
            let key = (
                vm.vcpus,
                vm.threads.name(),
                vm.emulator == EmulatorPolicy::Isolate,
                vm.required_node(),
                vm.preferred_node(),
                vm.priority,
            );
            types.entry(key).or_default().push(i);
        } else {
            loose.push((i, cores));
        }
    }
    let mut types: Vec<(Vec<usize>, u32)> = types
        .into_values()
        .filter_map(|members| {
            let first = *members.first()?;
            let cores = cores_per_vm(&request.vms[first], host.threads)?;
            Some((members, cores))
        })
        .collect();
    // Spec order of the first member: deterministic and readable in traces.
    types.sort_by_key(|(members, _)| members.first().copied());
    Vms { types, loose }
}

fn allowed(vm: &VmRequest, node: Option<NodeId>, threads: u32) -> bool {
    classes::allowed(vm, node, threads)
}

/// Nodes that no VM can tell apart: the same free cores per cell, and no VM
/// whose NIC is on one of them. Their contents can be swapped in any layout,
/// so the models may order them by cores used (symmetry breaking).
fn interchangeable_nodes(request: &PlanRequest, host: &Host) -> Vec<Vec<Option<NodeId>>> {
    let named: BTreeSet<NodeId> = request.vms.iter().filter_map(|v| v.nic_node).collect();
    let mut by_shape: BTreeMap<Vec<u32>, Vec<Option<NodeId>>> = BTreeMap::new();
    for (&k, cells) in &host.nodes {
        let Some(node) = k else { continue };
        if named.contains(&node) {
            continue;
        }
        let mut shape: Vec<u32> = cells.iter().map(|&e| host.cells[e].cap()).collect();
        shape.sort();
        by_shape.entry(shape).or_default().push(k);
    }
    by_shape
        .into_values()
        .filter(|nodes| nodes.len() > 1)
        .collect()
}

/// `used(a) ≥ used(b)` for consecutive interchangeable nodes.
fn order_nodes(
    m: &mut Model,
    used: &BTreeMap<Option<NodeId>, Terms>,
    groups: &[Vec<Option<NodeId>>],
) {
    for nodes in groups {
        for pair in nodes.windows(2) {
            let (Some(a), Some(b)) = (used.get(&pair[0]), used.get(&pair[1])) else {
                continue;
            };
            let mut terms = a.clone();
            terms.extend(b.iter().map(|&(v, c)| (v, -c)));
            m.con(terms, Op::Ge, 0.0);
        }
    }
}

/// The fewest groups of `caps` that hold `demand`.
fn fewest(caps: &[u32], demand: u32) -> u32 {
    let mut caps = caps.to_vec();
    caps.sort_by(|a, b| b.cmp(a));
    let mut held = 0;
    for (i, c) in caps.iter().enumerate() {
        held += c;
        if held >= demand {
            return u32::try_from(i + 1).unwrap_or(u32::MAX);
        }
    }
    u32::try_from(caps.len().max(1)).unwrap_or(u32::MAX)
}

/// Objective terms of one model, by tier.
type Tiers = Vec<(Tier, Terms)>;

/// The objectives in their order: VMs placed per priority level (highest
/// first, from `level`), then `rest`; objectives without terms left out.
fn in_order(request: &PlanRequest, mut level: BTreeMap<i64, Terms>, rest: Tiers) -> Tiers {
    let mut tiers: Tiers = priority_levels(request)
        .into_iter()
        .map(|l| (Tier::Placed(l), level.remove(&l).unwrap_or_default()))
        .collect();
    tiers.extend(rest);
    tiers.retain(|(_, t)| !t.is_empty());
    tiers
}

fn priority_levels(request: &PlanRequest) -> Vec<i64> {
    let levels: BTreeSet<std::cmp::Reverse<i64>> = request
        .vms
        .iter()
        .map(|v| std::cmp::Reverse(v.priority))
        .collect();
    levels.into_iter().map(|l| l.0).collect()
}

/// The node model.
struct NodeModel {
    model: Model,
    /// `x[t]`: (node, variable).
    x: Vec<Vec<(Option<NodeId>, usize)>>,
    /// Per loose VM: p, n per node, y per node.
    p: Vec<usize>,
    n: Vec<Vec<(Option<NodeId>, usize)>>,
    y: Vec<BTreeMap<Option<NodeId>, usize>>,
    tiers: Tiers,
    /// Lower bounds of tiers 2–5 when every VM is placed.
    bounds: BTreeMap<Tier, f64>,
}

fn node_model(request: &PlanRequest, host: &Host, vms: &Vms) -> NodeModel {
    let mut m = Model::default();
    let nodes: Vec<Option<NodeId>> = host.nodes.keys().copied().collect();
    let mut cap: BTreeMap<Option<NodeId>, Terms> = BTreeMap::new();
    let mut level: BTreeMap<i64, Terms> = BTreeMap::new();
    let (mut vcpus, mut cores, mut extra, mut remote) =
        (Terms::new(), Terms::new(), Terms::new(), Terms::new());
    let mut bounds_nodes = 0.0;
    let mut x = Vec::new();
    for (members, c) in &vms.types {
        let vm = &request.vms[members[0]];
        let count = members.len() as u32;
        let mut xs = Vec::new();
        for &k in &nodes {
            let node_cap = host.node_cap(k);
            if !allowed(vm, k, host.threads) || *c > node_cap {
                continue;
            }
            let v = m.int(f64::from(count.min(node_cap / c)));
            xs.push((k, v));
            cap.entry(k).or_default().push((v, f64::from(*c)));
            level.entry(vm.priority).or_default().push((v, -1.0));
            vcpus.push((v, -f64::from(vm.vcpus)));
            cores.push((v, f64::from(*c)));
            if vm.preferred_node().is_some_and(|nic| Some(nic) != k) {
                remote.push((v, f64::from(*c)));
            }
        }
        if !xs.is_empty() {
            m.con(
                xs.iter().map(|&(_, v)| (v, 1.0)).collect(),
                Op::Le,
                f64::from(count),
            );
        }
        x.push(xs);
    }
    let (mut p_vars, mut n_vars, mut y_vars) = (Vec::new(), Vec::new(), Vec::new());
    for &(i, c) in &vms.loose {
        let vm = &request.vms[i];
        let p = m.binary();
        let mut ns = Vec::new();
        let mut ys = BTreeMap::new();
        for &k in &nodes {
            if !allowed(vm, k, host.threads) {
                continue;
            }
            let most = c.min(host.node_cap(k));
            if most == 0 {
                continue;
            }
            let v = m.int(f64::from(most));
            ns.push((k, v));
            cap.entry(k).or_default().push((v, 1.0));
            if vm.preferred_node().is_some_and(|nic| Some(nic) != k) {
                remote.push((v, 1.0));
            }
        }
        let held: u32 = ns.iter().map(|&(k, _)| c.min(host.node_cap(k))).sum();
        if held < c {
            // It fits nowhere: never placed.
            m.con(vec![(p, 1.0)], Op::Le, 0.0);
        }
        let mut sum: Terms = ns.iter().map(|&(_, v)| (v, 1.0)).collect();
        sum.push((p, -f64::from(c)));
        m.con(sum, Op::Eq, 0.0);
        level.entry(vm.priority).or_default().push((p, -1.0));
        vcpus.push((p, -f64::from(vm.vcpus)));
        cores.push((p, f64::from(c)));
        if vm.numa == NumaPolicy::Preferred && ns.len() > 1 {
            let caps: Vec<u32> = ns.iter().map(|&(k, _)| c.min(host.node_cap(k))).collect();
            let least = fewest(&caps, c);
            let mut cover = Terms::new();
            let mut count = Terms::new();
            for (&(k, v), &most) in ns.iter().zip(&caps) {
                let yk = m.binary();
                m.con(vec![(v, 1.0), (yk, -f64::from(most))], Op::Le, 0.0);
                cover.push((yk, f64::from(most)));
                count.push((yk, 1.0));
                ys.insert(k, yk);
            }
            cover.push((p, -f64::from(c)));
            m.con(cover, Op::Ge, 0.0);
            let mut rounded = count.clone();
            rounded.push((p, -f64::from(least)));
            m.con(rounded, Op::Ge, 0.0);
            count.push((p, -1.0));
            extra.extend(count);
            bounds_nodes += f64::from(least) - 1.0;
        }
        p_vars.push(p);
        n_vars.push(ns);
        y_vars.push(ys);
    }
    for (&k, terms) in &cap {
        m.con(terms.clone(), Op::Le, f64::from(host.node_cap(k)));
    }
    order_nodes(&mut m, &cap, &interchangeable_nodes(request, host));
    let tiers = in_order(
        request,
        level,
        vec![
            (Tier::Vcpus, vcpus),
            (Tier::Cores, cores),
            (Tier::ExtraNodes, extra),
            (Tier::NicRemote, remote),
        ],
    );
    let all = |f: &dyn Fn(usize, u32) -> f64| -> f64 {
        vms.types
            .iter()
            .flat_map(|(members, c)| members.iter().map(move |&i| (i, *c)))
            .chain(vms.loose.iter().copied())
            .map(|(i, c)| f(i, c))
            .sum()
    };
    let mut bounds: BTreeMap<Tier, f64> = [
        (Tier::Vcpus, -all(&|i, _| f64::from(request.vms[i].vcpus))),
        (Tier::Cores, all(&|_, c| f64::from(c))),
        (Tier::ExtraNodes, bounds_nodes),
        (Tier::NicRemote, 0.0),
    ]
    .into_iter()
    .collect();
    for l in priority_levels(request) {
        let at_level = all(&|i, _| f64::from(u8::from(request.vms[i].priority == l)));
        bounds.insert(Tier::Placed(l), -at_level);
    }
    NodeModel {
        model: m,
        x,
        p: p_vars,
        n: n_vars,
        y: y_vars,
        tiers,
        bounds,
    }
}

/// Where each placed VM's cores come from: cell → count.
type Units = BTreeMap<usize, BTreeMap<usize, u32>>;

/// Turns a placement into cell counts per VM (`None` for a core the cells do
/// not know).
fn units_of(host: &Host, placement: &Placement) -> Option<Units> {
    let mut cell_of: BTreeMap<CoreId, usize> = BTreeMap::new();
    for (e, cell) in host.cells.iter().enumerate() {
        for &core in &cell.cores {
            cell_of.insert(core, e);
        }
    }
    let mut units = Units::new();
    for (&i, cores) in &placement.cores {
        let entry = units.entry(i).or_default();
        for core in cores {
            *entry.entry(*cell_of.get(core)?).or_default() += 1;
        }
    }
    Some(units)
}

/// Node model values for a layout. Interchangeable nodes are relabelled so
/// that their cores used do not increase along each group (the order the
/// model imposes).
fn node_start(
    host: &Host,
    vms: &Vms,
    nm: &NodeModel,
    units: &Units,
    symmetric: &[Vec<Option<NodeId>>],
) -> Vec<f64> {
    let mut values = vec![0.0; nm.model.vars.len()];
    let mut used: BTreeMap<Option<NodeId>, u32> = BTreeMap::new();
    for cells in units.values() {
        for (&e, &c) in cells {
            *used.entry(host.cells[e].node).or_default() += c;
        }
    }
    let mut relabel: BTreeMap<Option<NodeId>, Option<NodeId>> = BTreeMap::new();
    for group in symmetric {
        let mut by_use = group.clone();
        by_use.sort_by_key(|k| std::cmp::Reverse(used.get(k).copied().unwrap_or(0)));
        for (from, to) in by_use.into_iter().zip(group) {
            relabel.insert(from, *to);
        }
    }
    let node_count = |i: usize| -> BTreeMap<Option<NodeId>, u32> {
        let mut per = BTreeMap::new();
        for (&e, &c) in units.get(&i).into_iter().flatten() {
            let node = host.cells[e].node;
            *per.entry(relabel.get(&node).copied().unwrap_or(node))
                .or_default() += c;
        }
        per
    };
    for ((members, _), xs) in vms.types.iter().zip(&nm.x) {
        for &i in members {
            let per = node_count(i);
            if per.len() == 1 {
                let node = per.keys().next().copied().flatten();
                if let Some(&(_, v)) = xs.iter().find(|(k, _)| *k == node) {
                    values[v] += 1.0;
                }
            }
        }
    }
    for (j, &(i, _)) in vms.loose.iter().enumerate() {
        let per = node_count(i);
        if per.is_empty() {
            continue;
        }
        values[nm.p[j]] = 1.0;
        for &(k, v) in &nm.n[j] {
            values[v] = f64::from(per.get(&k).copied().unwrap_or(0));
        }
        for (k, &y) in &nm.y[j] {
            values[y] = f64::from(u8::from(per.contains_key(k)));
        }
    }
    values
}

/// Lays the node model's answer out in cells: per node, VMs largest first,
/// each whole in the fullest cell that holds it (best fit), the rest split;
/// if that splits more VMs than the cell model has slots, a plain sequential
/// fill (at most one split per cell boundary) instead.
fn realise(host: &Host, vms: &Vms, nm: &NodeModel, values: &[f64]) -> Units {
    // Strict VMs per node: the first members of each type in spec order.
    let mut per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
    for ((members, c), xs) in vms.types.iter().zip(&nm.x) {
        let mut next = members.iter();
        for &(k, v) in xs {
            let count = values.get(v).copied().unwrap_or(0.0).round().max(0.0) as usize;
            for &i in next.by_ref().take(count) {
                per_node.entry(k).or_default().push((i, *c));
            }
        }
    }
    // Loose VMs: their per-node amounts.
    let mut loose_per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
    for (j, &(i, _)) in vms.loose.iter().enumerate() {
        if values.get(nm.p[j]).copied().unwrap_or(0.0) < 0.5 {
            continue;
        }
        for &(k, v) in &nm.n[j] {
            let amount = values.get(v).copied().unwrap_or(0.0).round().max(0.0) as u32;
            if amount > 0 {
                loose_per_node.entry(k).or_default().push((i, amount));
            }
        }
    }
    lay_out(host, per_node, loose_per_node)
}

/// Per-node loads → cells: strict VMs `(vm, cores)` and pieces of the other
/// VMs `(vm, cores)` on each node.
fn lay_out(
    host: &Host,
    mut per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>>,
    mut loose_per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>>,
) -> Units {
    let mut units = Units::new();
    for (&k, cells) in &host.nodes {
        let strict = per_node.remove(&k).unwrap_or_default();
        let loose = loose_per_node.remove(&k).unwrap_or_default();
        let slots = cells.len().saturating_sub(1);
        let fitted = best_fit(host, cells, &strict, &loose).filter(|(_, splits)| *splits <= slots);
        let layout = match fitted {
            Some((layout, _)) => layout,
            None => sequential(host, cells, &strict, &loose),
        };
        for (i, per_cell) in layout {
            let entry = units.entry(i).or_default();
            for (e, c) in per_cell {
                *entry.entry(e).or_default() += c;
            }
        }
    }
    units
}

/// VM kinds for the pattern models: the strict types (kept to one node),
/// then the other VMs grouped by what placement sees of them (a kind of these
/// is kept to one node when `one_node` says so of its VMs).
fn kinds_of(
    request: &PlanRequest,
    vms: &Vms,
    one_node: impl Fn(&VmRequest) -> bool,
) -> Vec<(Vec<usize>, u32, bool)> {
    let mut kinds: Vec<(Vec<usize>, u32, bool)> = vms
        .types
        .iter()
        .map(|(m, c)| (m.clone(), *c, true))
        .collect();
    let mut loose: BTreeMap<LooseKey, (Vec<usize>, u32, bool)> = BTreeMap::new();
    for &(i, c) in &vms.loose {
        let vm = &request.vms[i];
        let key = (
            vm.vcpus,
            vm.threads.name(),
            vm.emulator == EmulatorPolicy::Isolate,
            vm.numa == NumaPolicy::Preferred,
            vm.required_node(),
            vm.preferred_node(),
            vm.priority,
        );
        loose
            .entry(key)
            .or_insert((Vec::new(), c, one_node(vm)))
            .0
            .push(i);
    }
    let mut loose: Vec<(Vec<usize>, u32, bool)> = loose.into_values().collect();
    loose.sort_by_key(|(members, _, _)| members.first().copied());
    kinds.extend(loose);
    kinds
}

/// One arc-flow graph per group (`(bins, free cores)`), its arcs of each
/// piece size tied to the kinds' pieces of that size in the group (`rho`).
fn add_flows(
    m: &mut Model,
    groups: &[(u32, u32)],
    sizes_of_group: &[BTreeSet<u32>],
    rho: &[BTreeMap<(usize, u32), usize>],
) -> Vec<super::arcflow::Flow> {
    let mut flows = Vec::new();
    for (g, &(bins, cap)) in groups.iter().enumerate() {
        let flow = super::arcflow::Flow::add(m, bins, cap, &sizes_of_group[g]);
        for &p in &sizes_of_group[g] {
            let mut link = flow.pieces(p);
            for rh in rho {
                if let Some(&r) = rh.get(&(g, p)) {
                    link.push((r, -1.0));
                }
            }
            m.con(link, Op::Eq, 0.0);
        }
        flows.push(flow);
    }
    flows
}

/// Nodes of at most this many free cores are packed by [`node_patterns`].
const SMALL_NODE: u32 = 32;

/// Objectives 1–5 on a pattern and arc-flow model over NUMA nodes (the node
/// model's counts per node have a weak LP on hosts of many small nodes: the
/// 24-node fixture left "vCPUs placed" unproven after 7 s). Nodes of the same
/// free cores form one arc-flow group (a node some VM's NIC is on is a group
/// of its own); a strict VM is one piece, another VM any partition of its
/// cores into pieces on distinct nodes (extra NUMA nodes = pieces − 1 for
/// `numa = "preferred"`). Pieces of one VM that the flow puts on one node are
/// merged by the layout, which only lowers objective 4, so the model's
/// optima are layouts'. `None` when it would be too big (VMs of many cores
/// that may span nodes); the counting node model is used then.
fn node_patterns(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    deadline: Instant,
    stats: &mut Stats,
) -> Option<(Units, bool, bool)> {
    use super::arcflow::partitions;
    // Big nodes are few bins that take many VMs each: there the counting
    // model's LP is tight and this one's graphs (one vertex per free core)
    // only cost time. Small nodes are where bin packing bites.
    if host.nodes.keys().any(|&k| host.node_cap(k) > SMALL_NODE) {
        return None;
    }
    let named: BTreeSet<Option<NodeId>> = request
        .vms
        .iter()
        .filter_map(|v| v.nic_node.map(Some))
        .collect();
    // Groups of nodes: (key, free cores) → nodes; a NIC's node or the node
    // of unknown id alone.
    let mut by_group: BTreeMap<(Scope, u32), Vec<Option<NodeId>>> = BTreeMap::new();
    for &k in host.nodes.keys() {
        let own = (named.contains(&k) || k.is_none()).then_some(k);
        by_group.entry((own, host.node_cap(k))).or_default().push(k);
    }
    let groups: Vec<NodeGroup> = by_group
        .into_iter()
        .filter(|((_, cap), _)| *cap > 0)
        .collect();
    // Kinds: strict types (one piece), the others any partition over nodes.
    let kinds = kinds_of(request, vms, |_| false);
    let mut m = Model::default();
    let mut sigma: Vec<Vec<(Vec<u32>, usize)>> = Vec::new();
    let mut rho: Vec<BTreeMap<(usize, u32), usize>> = Vec::new();
    let mut sizes_of_group: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); groups.len()];
    let mut level: BTreeMap<i64, Terms> = BTreeMap::new();
    let (mut vcpus, mut cores, mut extra, mut remote, mut pieces) = (
        Terms::new(),
        Terms::new(),
        Terms::new(),
        Terms::new(),
        Terms::new(),
    );
    let mut bounds: BTreeMap<Tier, f64> = BTreeMap::new();
    let (mut all_vcpus, mut all_cores, mut least_extra, mut least_pieces) = (0.0, 0.0, 0.0, 0.0);
    let mut patterns_total = 0usize;
    for (members, c, strict) in &kinds {
        let vm = &request.vms[members[0]];
        let count = members.len() as f64;
        *bounds.entry(Tier::Placed(vm.priority)).or_default() -= count;
        all_vcpus += f64::from(vm.vcpus) * count;
        all_cores += f64::from(*c) * count;
        let usable: Vec<usize> = (0..groups.len())
            .filter(|&g| groups[g].1.iter().all(|&k| allowed(vm, k, host.threads)))
            .collect();
        let largest = usable.iter().map(|&g| groups[g].0 .1).max().unwrap_or(0);
        let nodes: u32 = usable
            .iter()
            .map(|&g| u32::try_from(groups[g].1.len()).unwrap_or(0))
            .sum();
        let patterns: Vec<Vec<u32>> = if *strict {
            if *c <= largest {
                vec![vec![*c]]
            } else {
                Vec::new()
            }
        } else {
            partitions(*c, largest.min(*c), nodes.min(*c))
        };
        let caps: Vec<u32> = usable
            .iter()
            .flat_map(|&g| std::iter::repeat_n(groups[g].0 .1, groups[g].1.len()))
            .collect();
        let least = if *strict {
            1.0
        } else {
            f64::from(fewest(&caps, *c))
        };
        least_pieces += least * count;
        if !*strict && vm.numa == NumaPolicy::Preferred {
            least_extra += (least - 1.0) * count;
        }
        patterns_total += patterns.len();
        if patterns_total > 20_000 {
            return None;
        }
        let mut sig = Vec::new();
        let mut per_size: BTreeMap<u32, Terms> = BTreeMap::new();
        let mut counted = Terms::new();
        for pattern in patterns {
            let v = m.int(count);
            counted.push((v, 1.0));
            level.entry(vm.priority).or_default().push((v, -1.0));
            vcpus.push((v, -f64::from(vm.vcpus)));
            cores.push((v, f64::from(*c)));
            pieces.push((v, pattern.len() as f64));
            if !*strict && vm.numa == NumaPolicy::Preferred && pattern.len() > 1 {
                extra.push((v, pattern.len() as f64 - 1.0));
            }
            for &p in &pattern {
                let entry = per_size.entry(p).or_default();
                match entry.iter_mut().find(|(var, _)| *var == v) {
                    Some(term) => term.1 += 1.0,
                    None => entry.push((v, 1.0)),
                }
            }
            sig.push((pattern, v));
        }
        if !counted.is_empty() {
            m.con(counted, Op::Le, count);
        }
        let mut rh = BTreeMap::new();
        for (p, from_patterns) in per_size {
            let mut link: Terms = from_patterns.iter().map(|&(v, k)| (v, -k)).collect();
            for &g in &usable {
                if p > groups[g].0 .1 {
                    continue;
                }
                let r = m.int(f64::from(*c) * count);
                rh.insert((g, p), r);
                link.push((r, 1.0));
                sizes_of_group[g].insert(p);
                if let Some(nic) = vm.preferred_node() {
                    if !groups[g].1.contains(&Some(nic)) {
                        remote.push((r, f64::from(p)));
                    }
                }
            }
            m.con(link, Op::Eq, 0.0);
        }
        sigma.push(sig);
        rho.push(rh);
    }
    let bins: Vec<(u32, u32)> = groups
        .iter()
        .map(|(key, nodes)| (u32::try_from(nodes.len()).unwrap_or(u32::MAX), key.1))
        .collect();
    let flows = add_flows(&mut m, &bins, &sizes_of_group, &rho);
    bounds.insert(Tier::Vcpus, -all_vcpus);
    bounds.insert(Tier::Cores, all_cores);
    bounds.insert(Tier::ExtraNodes, least_extra);
    bounds.insert(Tier::NicRemote, 0.0);
    let tiers = in_order(
        request,
        level,
        vec![
            (Tier::Vcpus, vcpus),
            (Tier::Cores, cores),
            (Tier::ExtraNodes, extra),
            (Tier::NicRemote, remote),
        ],
    );
    stats.variables.0 = m.vars.len();
    let every = kinds.iter().map(|(mm, _, _)| mm.len()).sum::<usize>() == request.vms.len();
    let (values, mut proven) = lexicographic(
        &mut m,
        &tiers,
        &bounds,
        &[],
        deadline,
        every,
        &mut stats.tiers,
    );
    let mut values = values?;
    // Where every node is one L3 domain (or L3 is unknown), pieces are the
    // domains a VM touches and partly used nodes are partly used domains:
    // objectives 6–7 on this model too.
    let one_domain_per_node = {
        let domains: BTreeSet<Domain> = host.cells.iter().map(|c| c.domain).collect();
        domains.len() == host.cells.len() && host.nodes.values().all(|cells| cells.len() == 1)
    };
    let complete = proven && one_domain_per_node;
    if complete {
        let held: BTreeMap<Tier, f64> = stats.tiers.iter().map(|r| (r.tier, r.value)).collect();
        let all_placed = placed_everything(stats, request);
        let mut more = stage2_bounds(request, host, vms, &held, all_placed);
        if all_placed {
            more.insert(Tier::L3PerVm, least_pieces);
        }
        let partial: Terms = flows.iter().flat_map(|f| f.partial()).collect();
        let rest: Tiers = vec![(Tier::L3PerVm, pieces), (Tier::PartialL3, partial)];
        let (v, p) = lexicographic(
            &mut m,
            &rest,
            &more,
            std::slice::from_ref(&values),
            deadline,
            all_placed,
            &mut stats.tiers,
        );
        if let Some(v) = v {
            values = v;
        }
        proven = p;
    }
    let count = |v: usize| values.get(v).copied().unwrap_or(0.0).round().max(0.0) as u32;

    // Flows → nodes → pieces per kind → VMs → per-node loads.
    let mut pool: Vec<BTreeMap<u32, Vec<Option<NodeId>>>> = vec![BTreeMap::new(); kinds.len()];
    for (g, (_, nodes)) in groups.iter().enumerate() {
        let mut positions: BTreeMap<u32, Vec<Option<NodeId>>> = BTreeMap::new();
        for (&k, pattern) in nodes.iter().zip(flows[g].patterns(&values)) {
            for p in pattern {
                positions.entry(p).or_default().push(k);
            }
        }
        for (p, nodes_of_size) in positions {
            let mut next = nodes_of_size.into_iter();
            for (t, rh) in rho.iter().enumerate() {
                let Some(&r) = rh.get(&(g, p)) else { continue };
                for _ in 0..count(r) {
                    pool[t].entry(p).or_default().push(next.next()?);
                }
            }
        }
    }
    let mut per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
    let mut loose_per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
    for (t, sig) in sigma.iter().enumerate() {
        let mut members = kinds[t].0.iter().copied();
        for (pattern, v) in sig {
            for _ in 0..count(*v) {
                let i = members.next()?;
                let mut mine: BTreeMap<Option<NodeId>, u32> = BTreeMap::new();
                for &p in pattern {
                    let nodes = pool[t].get_mut(&p)?;
                    let at = nodes
                        .iter()
                        .rposition(|k| !mine.contains_key(k))
                        .unwrap_or(nodes.len().checked_sub(1)?);
                    *mine.entry(nodes.remove(at)).or_default() += p;
                }
                let target = if kinds[t].2 {
                    &mut per_node
                } else {
                    &mut loose_per_node
                };
                for (k, amount) in mine {
                    target.entry(k).or_default().push((i, amount));
                }
            }
        }
    }
    Some((lay_out(host, per_node, loose_per_node), proven, complete))
}

type Layout = Vec<(usize, Vec<(usize, u32)>)>;

/// Best fit decreasing; `None` when something does not fit at all. Returns
/// the layout and how many strict VMs it split.
fn best_fit(
    host: &Host,
    cells: &[usize],
    strict: &[(usize, u32)],
    loose: &[(usize, u32)],
) -> Option<(Layout, usize)> {
    let mut left: BTreeMap<usize, u32> = cells.iter().map(|&e| (e, host.cells[e].cap())).collect();
    let mut layout = Layout::new();
    let mut items: Vec<(usize, u32, bool)> = strict
        .iter()
        .map(|&(i, c)| (i, c, true))
        .chain(loose.iter().map(|&(i, c)| (i, c, false)))
        .collect();
    items.sort_by_key(|&(i, c, _)| (std::cmp::Reverse(c), i));
    let mut splits = 0;
    for (i, c, is_strict) in items {
        let whole = left
            .iter()
            .filter(|(_, &l)| l >= c)
            .min_by_key(|(&e, &l)| (l, e))
            .map(|(&e, _)| e);
        if let Some(e) = whole {
            *left.get_mut(&e)? -= c;
            layout.push((i, vec![(e, c)]));
            continue;
        }
        // Split: the emptiest cells first (fewest pieces).
        let mut order: Vec<(usize, u32)> = left.iter().map(|(&e, &l)| (e, l)).collect();
        order.sort_by_key(|&(e, l)| (std::cmp::Reverse(l), e));
        let mut need = c;
        let mut pieces = Vec::new();
        for (e, l) in order {
            if need == 0 {
                break;
            }
            let take = l.min(need);
            if take > 0 {
                pieces.push((e, take));
                *left.get_mut(&e)? -= take;
                need -= take;
            }
        }
        if need > 0 {
            return None;
        }
        if is_strict && pieces.len() > 1 {
            splits += 1;
        }
        layout.push((i, pieces));
    }
    Some((layout, splits))
}

/// Fills the cells in order: at most one VM split per cell boundary.
fn sequential(
    host: &Host,
    cells: &[usize],
    strict: &[(usize, u32)],
    loose: &[(usize, u32)],
) -> Layout {
    let mut layout = Layout::new();
    let mut cursor = cells.iter().map(|&e| (e, host.cells[e].cap())).peekable();
    let mut current: Option<(usize, u32)> = cursor.next();
    for &(i, c) in loose.iter().chain(strict) {
        let mut need = c;
        let mut pieces = Vec::new();
        while need > 0 {
            let Some((e, l)) = current.as_mut() else {
                break;
            };
            let take = (*l).min(need);
            if take > 0 {
                pieces.push((*e, take));
                *l -= take;
                need -= take;
            }
            if *l == 0 {
                current = cursor.next();
            }
        }
        layout.push((i, pieces));
    }
    layout
}

/// The cell model.
struct CellModel {
    model: Model,
    /// Strict types: `a[t]`: (cell, variable).
    a: Vec<Vec<(usize, usize)>>,
    /// Split slots: node, `τ` per type (type index, variable), `s`/`w` per cell.
    slots: Vec<Slot>,
    /// Loose VMs: p, n per cell, y per node, w per domain.
    p: Vec<usize>,
    n: Vec<Vec<(usize, usize)>>,
    y: Vec<BTreeMap<Option<NodeId>, usize>>,
    w: Vec<BTreeMap<Domain, usize>>,
    /// Per domain: (touched, full).
    domains: BTreeMap<Domain, (usize, usize)>,
    tiers: Tiers,
    bounds: BTreeMap<Tier, f64>,
}

struct Slot {
    node: Option<NodeId>,
    tau: Vec<(usize, usize)>,
    s: Vec<(usize, usize)>,
    w: Vec<(usize, usize)>,
}

fn cell_model(request: &PlanRequest, host: &Host, vms: &Vms) -> CellModel {
    let mut m = Model::default();
    let mut cap: BTreeMap<usize, Terms> = BTreeMap::new();
    let mut level: BTreeMap<i64, Terms> = BTreeMap::new();
    let (mut vcpus, mut cores, mut extra, mut remote, mut l3) = (
        Terms::new(),
        Terms::new(),
        Terms::new(),
        Terms::new(),
        Terms::new(),
    );
    let mut bound_l3 = 0.0;
    let mut bound_nodes = 0.0;
    // Placed count per type, as terms (whole VMs + slots).
    let mut placed_t: Vec<Terms> = vec![Terms::new(); vms.types.len()];
    let mut a = Vec::new();
    for (t, (members, c)) in vms.types.iter().enumerate() {
        let vm = &request.vms[members[0]];
        let count = members.len() as u32;
        let mut av = Vec::new();
        for (e, cell) in host.cells.iter().enumerate() {
            if !allowed(vm, cell.node, host.threads) || *c > cell.cap() {
                continue;
            }
            let v = m.int(f64::from(count.min(cell.cap() / c)));
            av.push((e, v));
            cap.entry(e).or_default().push((v, f64::from(*c)));
            placed_t[t].push((v, 1.0));
            l3.push((v, 1.0));
        }
        a.push(av);
        // Bound on L3 domains: 1 where a cell of an allowed node holds it.
        let holds = host
            .cells
            .iter()
            .any(|cell| allowed(vm, cell.node, host.threads) && cell.cap() >= *c);
        let least = if holds {
            1
        } else {
            host.nodes
                .iter()
                .filter(|(k, _)| allowed(vm, **k, host.threads))
                .map(|(_, cells)| {
                    let caps: Vec<u32> = cells
                        .iter()
                        .map(|&e| host.cells[e].cap().min(c - 1))
                        .collect();
                    fewest(&caps, *c).max(2)
                })
                .min()
                .unwrap_or(1)
        };
        bound_l3 += f64::from(least) * f64::from(count);
    }
    // Split slots per node.
    let mut slots = Vec::new();
    for (&k, cells) in &host.nodes {
        let node_cap = host.node_cap(k);
        let types: Vec<usize> = vms
            .types
            .iter()
            .enumerate()
            .filter(|(_, (members, c))| {
                *c >= 2 && *c <= node_cap && allowed(&request.vms[members[0]], k, host.threads)
            })
            .map(|(t, _)| t)
            .collect();
        let vms_here: usize = types.iter().map(|&t| vms.types[t].0.len()).sum();
        let count = cells.len().saturating_sub(1).min(vms_here);
        let biggest = types.iter().map(|&t| vms.types[t].1).max().unwrap_or(0);
        let mut previous: Option<Terms> = None;
        for _ in 0..count {
            let tau: Vec<(usize, usize)> = types.iter().map(|&t| (t, m.binary())).collect();
            let used: Terms = tau.iter().map(|&(_, v)| (v, 1.0)).collect();
            m.con(used.clone(), Op::Le, 1.0);
            let mut s = Vec::new();
            let mut w = Vec::new();
            let mut total: Terms = Vec::new();
            let mut touched: Terms = Vec::new();
            for &e in cells {
                let most = host.cells[e].cap().min(biggest.saturating_sub(1));
                if most == 0 {
                    continue;
                }
                let sv = m.int(f64::from(most));
                let wv = m.binary();
                // A piece is smaller than its VM (a VM whole in one cell is
                // counted by `a`), and only where the slot touches.
                let mut piece: Terms = vec![(sv, 1.0)];
                for &(t, tv) in &tau {
                    let c = vms.types[t].1;
                    piece.push((tv, -f64::from(host.cells[e].cap().min(c - 1))));
                }
                m.con(piece, Op::Le, 0.0);
                m.con(vec![(sv, 1.0), (wv, -f64::from(most))], Op::Le, 0.0);
                let mut only_used = vec![(wv, 1.0)];
                only_used.extend(used.iter().map(|&(v, _)| (v, -1.0)));
                m.con(only_used, Op::Le, 0.0);
                cap.entry(e).or_default().push((sv, 1.0));
                total.push((sv, 1.0));
                touched.push((wv, 1.0));
                s.push((e, sv));
                w.push((e, wv));
                l3.push((wv, 1.0));
            }
            let mut demand = total;
            for &(t, tv) in &tau {
                demand.push((tv, -f64::from(vms.types[t].1)));
                placed_t[t].push((tv, 1.0));
            }
            m.con(demand, Op::Eq, 0.0);
            // It touches at least as many cells as its pieces need (2 or more).
            let mut least = touched;
            for &(t, tv) in &tau {
                let c = vms.types[t].1;
                let caps: Vec<u32> = cells
                    .iter()
                    .map(|&e| host.cells[e].cap().min(c - 1))
                    .collect();
                least.push((tv, -f64::from(fewest(&caps, c).max(2))));
            }
            m.con(least, Op::Ge, 0.0);
            // Used slots first.
            if let Some(prev) = &previous {
                let mut order = prev.clone();
                order.extend(used.iter().map(|&(v, _)| (v, -1.0)));
                m.con(order, Op::Ge, 0.0);
            }
            previous = Some(used);
            slots.push(Slot { node: k, tau, s, w });
        }
    }
    for (t, (members, c)) in vms.types.iter().enumerate() {
        let vm = &request.vms[members[0]];
        if !placed_t[t].is_empty() {
            m.con(placed_t[t].clone(), Op::Le, members.len() as f64);
        }
        for &(v, _) in &placed_t[t] {
            level.entry(vm.priority).or_default().push((v, -1.0));
            vcpus.push((v, -f64::from(vm.vcpus)));
            cores.push((v, f64::from(*c)));
        }
        if let Some(nic) = vm.preferred_node() {
            for &(e, v) in &a[t] {
                if host.cells[e].node != Some(nic) {
                    remote.push((v, f64::from(*c)));
                }
            }
            for slot in &slots {
                if slot.node != Some(nic) {
                    for &(tt, tv) in &slot.tau {
                        if tt == t {
                            remote.push((tv, f64::from(*c)));
                        }
                    }
                }
            }
        }
    }
    let (mut p_vars, mut n_vars, mut y_vars, mut w_vars) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for &(i, c) in &vms.loose {
        let vm = &request.vms[i];
        let p = m.binary();
        let mut ns = Vec::new();
        for (e, cell) in host.cells.iter().enumerate() {
            if !allowed(vm, cell.node, host.threads) {
                continue;
            }
            let most = c.min(cell.cap());
            if most == 0 {
                continue;
            }
            let v = m.int(f64::from(most));
            ns.push((e, v));
            cap.entry(e).or_default().push((v, 1.0));
            if vm
                .preferred_node()
                .is_some_and(|nic| Some(nic) != cell.node)
            {
                remote.push((v, 1.0));
            }
        }
        let held: u32 = ns.iter().map(|&(e, _)| c.min(host.cells[e].cap())).sum();
        if held < c {
            m.con(vec![(p, 1.0)], Op::Le, 0.0);
        }
        let mut sum: Terms = ns.iter().map(|&(_, v)| (v, 1.0)).collect();
        sum.push((p, -f64::from(c)));
        m.con(sum, Op::Eq, 0.0);
        level.entry(vm.priority).or_default().push((p, -1.0));
        vcpus.push((p, -f64::from(vm.vcpus)));
        cores.push((p, f64::from(c)));
        // Groups (nodes, domains) it touches, with cover cuts.
        let group = |key_of: &dyn Fn(usize) -> Option<u64>, m: &mut Model| {
            let mut groups: BTreeMap<u64, (u32, Vec<(usize, u32)>)> = BTreeMap::new();
            for &(e, v) in &ns {
                if let Some(key) = key_of(e) {
                    let most = c.min(host.cells[e].cap());
                    let entry = groups.entry(key).or_default();
                    entry.0 += most;
                    entry.1.push((v, most));
                }
            }
            let caps: Vec<u32> = groups.values().map(|g| g.0.min(c)).collect();
            let least = fewest(&caps, c);
            let mut cover = Terms::new();
            let mut count = Terms::new();
            let mut out = BTreeMap::new();
            for (key, (held, members)) in groups {
                let g = m.binary();
                let most = f64::from(held.min(c));
                for (v, at_most) in members {
                    m.con(vec![(v, 1.0), (g, -f64::from(at_most))], Op::Le, 0.0);
                }
                cover.push((g, most));
                count.push((g, 1.0));
                out.insert(key, g);
            }
            cover.push((p, -f64::from(c)));
            m.con(cover, Op::Ge, 0.0);
            let mut rounded = count.clone();
            rounded.push((p, -f64::from(least)));
            m.con(rounded, Op::Ge, 0.0);
            (out, count, least)
        };
        let node_keys: Vec<Option<NodeId>> = host.nodes.keys().copied().collect();
        let node_index = |e: usize| {
            node_keys
                .iter()
                .position(|k| *k == host.cells[e].node)
                .map(|x| x as u64)
        };
        let mut ys = BTreeMap::new();
        if vm.numa == NumaPolicy::Preferred {
            let (groups, mut count, least) = group(&node_index, &mut m);
            for (key, g) in groups {
                if let Some(k) = node_keys.get(key as usize) {
                    ys.insert(*k, g);
                }
            }
            count.push((p, -1.0));
            extra.extend(count);
            bound_nodes += f64::from(least) - 1.0;
        }
        let domain_keys: Vec<Domain> = host
            .cells
            .iter()
            .map(|c| c.domain)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let domain_index = |e: usize| {
            domain_keys
                .iter()
                .position(|d| *d == host.cells[e].domain)
                .map(|x| x as u64)
        };
        let (groups, count, least) = group(&domain_index, &mut m);
        let mut ws = BTreeMap::new();
        for (key, g) in groups {
            if let Some(d) = domain_keys.get(key as usize) {
                ws.insert(*d, g);
            }
        }
        l3.extend(count);
        bound_l3 += f64::from(least);
        p_vars.push(p);
        n_vars.push(ns);
        y_vars.push(ys);
        w_vars.push(ws);
    }
    for (&e, terms) in &cap {
        m.con(terms.clone(), Op::Le, f64::from(host.cells[e].cap()));
    }
    // Partly used L3 domains.
    let mut per_domain: BTreeMap<Domain, (Terms, u32)> = BTreeMap::new();
    for (e, cell) in host.cells.iter().enumerate() {
        let entry = per_domain.entry(cell.domain).or_default();
        entry.0.extend(cap.get(&e).cloned().unwrap_or_default());
        entry.1 += cell.cap();
    }
    let mut partial = Terms::new();
    let mut domains = BTreeMap::new();
    for (d, (used, capacity)) in per_domain {
        if used.is_empty() {
            continue;
        }
        let c = f64::from(capacity);
        let touched = m.binary();
        let full = m.binary();
        let mut t = used.clone();
        t.push((touched, -c));
        m.con(t, Op::Le, 0.0);
        let mut f: Terms = used.iter().map(|&(v, k)| (v, -k)).collect();
        f.push((full, c));
        m.con(f, Op::Le, 0.0);
        m.con(vec![(full, 1.0), (touched, -1.0)], Op::Le, 0.0);
        partial.push((touched, 1.0));
        partial.push((full, -1.0));
        domains.insert(d, (touched, full));
    }
    let tiers = in_order(
        request,
        level,
        vec![
            (Tier::Vcpus, vcpus),
            (Tier::Cores, cores),
            (Tier::ExtraNodes, extra),
            (Tier::NicRemote, remote),
            (Tier::L3PerVm, l3),
            (Tier::PartialL3, partial),
        ],
    );
    let bounds = [
        (Tier::L3PerVm, bound_l3),
        (Tier::PartialL3, 0.0),
        (Tier::ExtraNodes, bound_nodes),
    ]
    .into_iter()
    .collect();
    CellModel {
        model: m,
        a,
        slots,
        p: p_vars,
        n: n_vars,
        y: y_vars,
        w: w_vars,
        domains,
        tiers,
        bounds,
    }
}

/// Cell model values for a layout (`None` when it does not map: a strict VM
/// on two nodes, more split VMs on a node than slots).
fn cell_start(host: &Host, vms: &Vms, cm: &CellModel, units: &Units) -> Option<Vec<f64>> {
    let mut values = vec![0.0; cm.model.vars.len()];
    let mut next_slot: BTreeMap<Option<NodeId>, usize> = BTreeMap::new();
    let mut used_per_domain: BTreeMap<Domain, u32> = BTreeMap::new();
    for (t, ((members, _), av)) in vms.types.iter().zip(&cm.a).enumerate() {
        for i in members {
            let Some(per_cell) = units.get(i) else {
                continue;
            };
            for (&e, &c) in per_cell {
                *used_per_domain.entry(host.cells[e].domain).or_default() += c;
            }
            if per_cell.len() == 1 {
                let e = *per_cell.keys().next()?;
                let &(_, v) = av.iter().find(|(ee, _)| *ee == e)?;
                values[v] += 1.0;
                continue;
            }
            let node = host.cells[*per_cell.keys().next()?].node;
            let k = next_slot.entry(node).or_default();
            let slot = cm.slots.iter().filter(|s| s.node == node).nth(*k)?;
            *k += 1;
            let &(_, tv) = slot.tau.iter().find(|(tt, _)| *tt == t)?;
            values[tv] = 1.0;
            for (&e, &c) in per_cell {
                let &(_, sv) = slot.s.iter().find(|(ee, _)| *ee == e)?;
                let &(_, wv) = slot.w.iter().find(|(ee, _)| *ee == e)?;
                values[sv] = f64::from(c);
                values[wv] = 1.0;
            }
        }
    }
    for (j, &(i, _)) in vms.loose.iter().enumerate() {
        let Some(per_cell) = units.get(&i) else {
            continue;
        };
        values[cm.p[j]] = 1.0;
        for (&e, &c) in per_cell {
            *used_per_domain.entry(host.cells[e].domain).or_default() += c;
            let &(_, v) = cm.n[j].iter().find(|(ee, _)| *ee == e)?;
            values[v] = f64::from(c);
            if let Some(&y) = cm.y[j].get(&host.cells[e].node) {
                values[y] = 1.0;
            }
            if let Some(&w) = cm.w[j].get(&host.cells[e].domain) {
                values[w] = 1.0;
            }
        }
    }
    let mut capacity: BTreeMap<Domain, u32> = BTreeMap::new();
    for cell in &host.cells {
        *capacity.entry(cell.domain).or_default() += cell.cap();
    }
    for (d, &(touched, full)) in &cm.domains {
        let used = used_per_domain.get(d).copied().unwrap_or(0);
        values[touched] = f64::from(u8::from(used > 0));
        values[full] = f64::from(u8::from(used > 0 && Some(&used) == capacity.get(d)));
    }
    Some(values)
}

/// Cell model values → per-VM cell counts.
fn cell_units(vms: &Vms, cm: &CellModel, values: &[f64]) -> Units {
    let count = |v: usize| values.get(v).copied().unwrap_or(0.0).round().max(0.0) as u32;
    let mut units = Units::new();
    for (t, ((members, c), av)) in vms.types.iter().zip(&cm.a).enumerate() {
        let mut next = members.iter().copied();
        for &(e, v) in av {
            for i in next.by_ref().take(count(v) as usize) {
                units.entry(i).or_default().insert(e, *c);
            }
        }
        for slot in &cm.slots {
            if slot.tau.iter().any(|&(tt, tv)| tt == t && count(tv) == 1) {
                if let Some(i) = next.next() {
                    let entry = units.entry(i).or_default();
                    for &(e, sv) in &slot.s {
                        if count(sv) > 0 {
                            entry.insert(e, count(sv));
                        }
                    }
                }
            }
        }
    }
    for (j, &(i, _)) in vms.loose.iter().enumerate() {
        if count(cm.p[j]) == 0 {
            continue;
        }
        let entry = units.entry(i).or_default();
        for &(e, v) in &cm.n[j] {
            if count(v) > 0 {
                entry.insert(e, count(v));
            }
        }
    }
    units
}

/// Per-VM cell counts → concrete cores: VMs by priority, then spec order,
/// take the lowest free cores of each cell.
fn cores_of(request: &PlanRequest, host: &Host, units: &Units, proven: bool) -> Placement {
    let mut next = vec![0usize; host.cells.len()];
    let mut order: Vec<usize> = units.keys().copied().collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.vms[i].priority), i));
    let mut cores = BTreeMap::new();
    for i in order {
        let mut mine = Vec::new();
        for (&e, &c) in &units[&i] {
            let cell = &host.cells[e];
            let end = (next[e] + c as usize).min(cell.cores.len());
            mine.extend_from_slice(&cell.cores[next[e]..end]);
            next[e] = end;
        }
        mine.sort();
        cores.insert(i, mine);
    }
    Placement { cores, proven }
}

/// Runs the tiers of one model in order, each held at its optimum. Returns
/// the last values, whether every tier was proven, and the tier runs.
#[allow(clippy::too_many_arguments)]
fn lexicographic(
    model: &mut Model,
    tiers: &Tiers,
    bounds: &BTreeMap<Tier, f64>,
    candidates: &[Vec<f64>],
    deadline: Instant,
    every_vm_placed: bool,
    stats: &mut Vec<TierRun>,
) -> (Option<Vec<f64>>, bool) {
    let mut values: Option<Vec<f64>> = None;
    let mut all_placed = every_vm_placed;
    for (tier, terms) in tiers {
        let started = Instant::now();
        let start = values
            .iter()
            .chain(candidates)
            .filter(|v| model.feasible(v))
            .min_by(|a, b| value_of(a, terms).total_cmp(&value_of(b, terms)))
            .cloned();
        // Bounds of tiers 2–6 hold when every VM is placed; those of 5 and 7
        // (0, or 1 when no set of whole domains has the cores used) always.
        // Placed: every VM of the level (a variable may count several VMs).
        let bound = match tier {
            Tier::Placed(_) | Tier::NicRemote | Tier::PartialL3 => bounds.get(tier).copied(),
            _ if all_placed => bounds.get(tier).copied(),
            _ => None,
        };
        let at_bound =
            matches!((&start, bound), (Some(v), Some(b)) if value_of(v, terms) <= b + 1e-6);
        let left = deadline.saturating_duration_since(Instant::now());
        let outcome = if at_bound {
            start.clone().map(|v| (v, true)).ok_or_else(String::new)
        } else if left.is_zero() {
            Err("out of time".to_owned())
        } else {
            run(model, terms, left, start.as_deref())
        };
        let (v, proven) = match outcome {
            Ok((v, proven)) => {
                // Never worse than the start (a backend stopped early may
                // return a worse incumbent).
                let (v, proven) = match &start {
                    Some(s) if value_of(s, terms) < value_of(&v, terms) - 1e-6 => {
                        (s.clone(), false)
                    }
                    _ => (v, proven),
                };
                // An answer at a lower bound is optimal, stopped or not.
                let at = bound.is_some_and(|b| value_of(&v, terms) <= b + 1e-6);
                (v, proven || at)
            }
            Err(_) => match start {
                Some(s) => (s, false),
                None => return (values, false),
            },
        };
        let best = value_of(&v, terms).round();
        stats.push(TierRun {
            tier: *tier,
            value: best,
            ms: started.elapsed().as_secs_f64() * 1e3,
            proven,
            by_bound: at_bound,
        });
        if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
            eprintln!(
                "agg: {tier}: {:.1} ms, {} variables, {} constraints, {} {best}",
                started.elapsed().as_secs_f64() * 1e3,
                model.vars.len(),
                model.cons.len(),
                if proven { "optimal" } else { "stopped at" }
            );
        }
        values = Some(v);
        if !proven {
            return (values, false);
        }
        if let Tier::Placed(_) = tier {
            if bounds.get(tier).is_none_or(|&b| best > b + 0.5) {
                all_placed = false;
            }
        }
        model.con(terms.clone(), Op::Le, best);
    }
    (values, true)
}

/// Solves lexicographically within `time_limit`.
pub fn place(request: &PlanRequest, time_limit: Duration) -> Result<Placement, String> {
    place_with_stats(request, time_limit).map(|(p, _)| p)
}

/// [`place`], with what it did.
pub fn place_with_stats(
    request: &PlanRequest,
    time_limit: Duration,
) -> Result<(Placement, Stats), String> {
    place_with_progress(request, time_limit, &crate::solve::Progress::default())
}

/// [`place_with_stats`], publishing the best placement known so far in
/// `progress` (for a watchdog that cannot wait any longer).
pub fn place_with_progress(
    request: &PlanRequest,
    time_limit: Duration,
    progress: &crate::solve::Progress,
) -> Result<(Placement, Stats), String> {
    let deadline = Instant::now() + time_limit;
    let host = Host::new(request);
    let vms = group(request, &host);
    let mut stats = Stats::default();
    let starts: Vec<Placement> = vec![
        crate::solve::greedy::place(request),
        crate::solve::pack::place(request),
    ];
    for s in &starts {
        progress.offer(request, s);
    }
    let start_units: Vec<Units> = starts.iter().filter_map(|p| units_of(&host, p)).collect();

    // 1. Objectives 1–5 on nodes: patterns and arc flow, else counts.
    let (laid_out, proven, complete) =
        match node_patterns(request, &host, &vms, deadline, &mut stats) {
            Some(outcome) => outcome,
            None => counting_stage(request, &host, &vms, &start_units, deadline, &mut stats),
        };
    progress.offer(request, &cores_of(request, &host, &laid_out, false));
    if complete {
        return Ok((cores_of(request, &host, &laid_out, proven), stats));
    }
    if !proven {
        // Stopped early: the best of the starts and this, objective by objective.
        let best = progress
            .best()
            .unwrap_or_else(|| cores_of(request, &host, &laid_out, false));
        return Ok((best, stats));
    }
    stage2(
        request,
        &host,
        &vms,
        laid_out,
        &starts,
        &start_units,
        deadline,
        stats,
    )
}

/// Objectives 1–5 on the counting node model; the layout of its answer,
/// whether proven, and `false` (objectives 6–7 are left to [`stage2`]).
fn counting_stage(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    start_units: &[Units],
    deadline: Instant,
    stats: &mut Stats,
) -> (Units, bool, bool) {
    let mut nm = node_model(request, host, vms);
    stats.variables.0 = nm.model.vars.len();
    let symmetric = interchangeable_nodes(request, host);
    let candidates: Vec<Vec<f64>> = start_units
        .iter()
        .map(|u| node_start(host, vms, &nm, u, &symmetric))
        .collect();
    let tiers = std::mem::take(&mut nm.tiers);
    let placeable = vms.types.iter().map(|(m, _)| m.len()).sum::<usize>() + vms.loose.len();
    let (node_values, node_proven) = lexicographic(
        &mut nm.model,
        &tiers,
        &nm.bounds,
        &candidates,
        deadline,
        placeable == request.vms.len(),
        &mut stats.tiers,
    );
    let node_values = node_values.unwrap_or_else(|| vec![0.0; nm.model.vars.len()]);
    (realise(host, vms, &nm, &node_values), node_proven, false)
}

/// Objectives 6–7, with 1–5 held at the values in `stats`; `laid_out` is the
/// layout of the optimum of 1–5.
#[allow(clippy::too_many_arguments)]
fn stage2(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    laid_out: Units,
    starts: &[Placement],
    start_units: &[Units],
    deadline: Instant,
    mut stats: Stats,
) -> Result<(Placement, Stats), String> {
    let held: BTreeMap<Tier, f64> = stats.tiers.iter().map(|r| (r.tier, r.value)).collect();
    let all_placed = placed_everything(&stats, request);

    // 2. Objectives 6–7 by patterns and arc flow, where each L3 domain is one
    // cell (else, or when that model is too big, on the cell model).
    let domains: BTreeSet<Domain> = host.cells.iter().map(|c| c.domain).collect();
    if domains.len() == host.cells.len() {
        let placed = -held
            .iter()
            .filter(|(t, _)| matches!(t, Tier::Placed(_)))
            .map(|(_, v)| v)
            .sum::<f64>();
        let start_pieces = pieces_of(&laid_out);
        let most_parts = u32::try_from((start_pieces - placed + 1.0).max(1.0) as u64).unwrap_or(1);
        if let Some(pm) = pattern_model(request, host, vms, &held, most_parts) {
            stats.variables.1 = pm.model.vars.len();
            if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
                eprintln!(
                    "agg: pattern model: {} variables, {} constraints, at most {most_parts} \
                     pieces per VM, {} cells",
                    pm.model.vars.len(),
                    pm.model.cons.len(),
                    host.cells.len()
                );
            }
            let bounds = stage2_bounds(request, host, vms, &held, all_placed);
            // The best start that holds objectives 1–5: the node model's
            // layout, or greedy's or the packing's when as good.
            let mut start = laid_out.clone();
            for p in starts {
                let Some(u) = units_of(host, p) else {
                    continue;
                };
                let better_start = (pieces_of(&u), partial_of(host, &u))
                    < (pieces_of(&start), partial_of(host, &start));
                if better_start && holds(request, p, &held) {
                    start = u;
                }
            }
            let placement =
                patterns_stage(request, host, pm, &start, &bounds, deadline, &mut stats);
            return Ok((placement, stats));
        }
    }
    cells_stage(
        request,
        host,
        vms,
        &held,
        &laid_out,
        start_units,
        all_placed,
        deadline,
        stats,
    )
}

/// Lower bounds of objectives 6 (when every VM is placed: each VM's fewest
/// domains) and 7 (1 when no set of whole domains holds the cores used).
fn stage2_bounds(
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
                .iter()
                .filter(|(k, _)| allowed(vm, **k, host.threads))
                .map(|(_, cells)| {
                    let caps: Vec<u32> = cells.iter().map(|&e| host.cells[e].cap()).collect();
                    if caps.iter().any(|&cap| cap >= c) {
                        1
                    } else {
                        fewest(&caps, c)
                    }
                })
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
                fewest(&caps, c)
            } else {
                fewest_of(vm, c)
            });
        }
        bounds.insert(Tier::L3PerVm, total);
    }
    let mut partial = 0.0;
    if let Some(&cores) = held.get(&Tier::Cores) {
        let mut capacity: BTreeMap<Domain, u32> = BTreeMap::new();
        for cell in &host.cells {
            *capacity.entry(cell.domain).or_default() += cell.cap();
        }
        let caps: Vec<u32> = capacity.values().copied().collect();
        if !subset_sum(&caps, cores.max(0.0) as u32) {
            partial = 1.0;
        }
    }
    bounds.insert(Tier::PartialL3, partial);
    bounds
}

/// Whether `placement` reaches the held optima of objectives 1–5.
fn holds(request: &PlanRequest, placement: &Placement, held: &BTreeMap<Tier, f64>) -> bool {
    let o = crate::solve::objective(request, placement);
    let by_level: BTreeMap<i64, u32> = o.placed_by_priority.iter().copied().collect();
    held.iter().all(|(tier, &value)| {
        let got = match tier {
            Tier::Placed(l) => -f64::from(by_level.get(l).copied().unwrap_or(0)),
            Tier::Vcpus => -f64::from(o.vcpus_placed),
            Tier::Cores => f64::from(o.cores_used),
            Tier::ExtraNodes => f64::from(o.extra_numa_nodes),
            Tier::NicRemote => f64::from(o.nic_remote_cores),
            Tier::L3PerVm | Tier::PartialL3 => return true,
        };
        got <= value + 1e-6
    })
}

/// L3 domains touched, summed over VMs (one cell per domain).
fn pieces_of(units: &Units) -> f64 {
    units.values().map(|cells| cells.len() as f64).sum()
}

/// Partly used domains of a layout.
fn partial_of(host: &Host, units: &Units) -> f64 {
    let mut used: BTreeMap<Domain, u32> = BTreeMap::new();
    let mut capacity: BTreeMap<Domain, u32> = BTreeMap::new();
    for cell in &host.cells {
        *capacity.entry(cell.domain).or_default() += cell.cap();
    }
    for cells in units.values() {
        for (&e, &c) in cells {
            *used.entry(host.cells[e].domain).or_default() += c;
        }
    }
    used.iter()
        .filter(|(d, &u)| u > 0 && capacity.get(d).is_some_and(|&cap| u < cap))
        .count() as f64
}

/// Objectives 6 then 7 on the pattern model; `start` is a layout that holds
/// objectives 1–5 (the node model's, laid out). Never returns worse than it.
fn patterns_stage(
    request: &PlanRequest,
    host: &Host,
    mut pm: PatternModel,
    start: &Units,
    bounds: &BTreeMap<Tier, f64>,
    deadline: Instant,
    stats: &mut Stats,
) -> Placement {
    let mut best = start.clone();
    for tier in [Tier::L3PerVm, Tier::PartialL3] {
        let started = Instant::now();
        let (terms, start_value) = match tier {
            Tier::L3PerVm => (pm.pieces.clone(), pieces_of(&best)),
            _ => (pm.partial.clone(), partial_of(host, &best)),
        };
        let at_bound = bounds.get(&tier).is_some_and(|&b| start_value <= b + 1e-6);
        let left = deadline.saturating_duration_since(Instant::now());
        let mut outcome = (start_value, at_bound);
        if let Some(&b) = bounds.get(&tier).filter(|&&b| b > 0.0) {
            // A valid cut: the backend need not find the bound itself.
            pm.model.con(terms.clone(), Op::Ge, b);
        }
        if !at_bound && !left.is_zero() {
            if let Ok((values, proven)) = run(&pm.model, &terms, left, None) {
                let value = value_of(&values, &terms).round();
                if let Some(units) = pm.layout(&values) {
                    // The layout may merge pieces: count what it is.
                    let real = match tier {
                        Tier::L3PerVm => pieces_of(&units),
                        _ => partial_of(host, &units),
                    };
                    if real <= start_value + 1e-6
                        && (tier != Tier::PartialL3 || pieces_of(&units) <= pieces_of(&best) + 1e-6)
                    {
                        best = units;
                        // Optimal if proven so, or if at the lower bound.
                        let at = bounds.get(&tier).is_some_and(|&b| real <= b + 1e-6);
                        outcome = (real, (proven && real <= value + 1e-6) || at);
                    }
                }
            }
        }
        let (value, proven) = outcome;
        stats.tiers.push(TierRun {
            tier,
            value,
            ms: started.elapsed().as_secs_f64() * 1e3,
            proven,
            by_bound: at_bound,
        });
        trace_tier(tier, started, proven, value);
        if !proven {
            return cores_of(request, host, &best, false);
        }
        pm.model.con(terms, Op::Le, value);
    }
    cores_of(request, host, &best, true)
}

/// Objectives 6–7 on the cell model, objectives 1–5 held.
#[allow(clippy::too_many_arguments)]
fn cells_stage(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    held: &BTreeMap<Tier, f64>,
    laid_out: &Units,
    start_units: &[Units],
    all_placed: bool,
    deadline: Instant,
    mut stats: Stats,
) -> Result<(Placement, Stats), String> {
    // Objectives 6–7 on cells, 1–5 held.
    let mut cm = cell_model(request, host, vms);
    stats.variables.1 = cm.model.vars.len();
    let mut candidates: Vec<Vec<f64>> = Vec::new();
    if let Some(v) = cell_start(host, vms, &cm, laid_out) {
        candidates.push(v);
    }
    for u in start_units {
        if let Some(v) = cell_start(host, vms, &cm, u) {
            candidates.push(v);
        }
    }
    let tiers = std::mem::take(&mut cm.tiers);
    for (tier, terms) in &tiers {
        if let Some(&best) = held.get(tier) {
            cm.model.con(terms.clone(), Op::Le, best);
        }
    }
    let rest: Tiers = tiers
        .into_iter()
        .filter(|(t, _)| matches!(t, Tier::L3PerVm | Tier::PartialL3))
        .collect();
    // Cores used is fixed now: when no set of whole domains adds up to it,
    // some domain must be partly used.
    let mut bounds = cm.bounds.clone();
    if let Some(&cores) = held.get(&Tier::Cores) {
        let mut capacity: BTreeMap<Domain, u32> = BTreeMap::new();
        for cell in &host.cells {
            *capacity.entry(cell.domain).or_default() += cell.cap();
        }
        let caps: Vec<u32> = capacity.values().copied().collect();
        if !subset_sum(&caps, cores.max(0.0) as u32) {
            bounds.insert(Tier::PartialL3, 1.0);
            if let Some((_, partial)) = rest.iter().find(|(t, _)| *t == Tier::PartialL3) {
                cm.model.con(partial.clone(), Op::Ge, 1.0);
            }
        }
    }
    // 6. L3 domains per VM.
    let l3_tier: Tiers = rest
        .iter()
        .filter(|(t, _)| *t == Tier::L3PerVm)
        .cloned()
        .collect();
    let partial_tier: Tiers = rest
        .iter()
        .filter(|(t, _)| *t == Tier::PartialL3)
        .cloned()
        .collect();
    let mut cell_stats = Vec::new();
    let (l3_values, l3_proven) = lexicographic(
        &mut cm.model,
        &l3_tier,
        &bounds,
        &candidates,
        deadline,
        all_placed,
        &mut cell_stats,
    );
    let l3_values = match l3_values {
        Some(v) if l3_proven && v.len() == cm.model.vars.len() => v,
        other => {
            stats.tiers.extend(cell_stats);
            let placement = match other {
                Some(v) if v.len() == cm.model.vars.len() => {
                    cores_of(request, host, &cell_units(vms, &cm, &v), false)
                }
                _ => cores_of(request, host, laid_out, false),
            };
            return Ok((placement, stats));
        }
    };
    stats.tiers.extend(cell_stats);
    let l3_units = cell_units(vms, &cm, &l3_values);
    let Some((_, partial_terms)) = partial_tier.first() else {
        return Ok((cores_of(request, host, &l3_units, true), stats));
    };

    // 7. Partly used L3 domains.
    let started = Instant::now();
    let best_start = std::iter::once(&l3_values)
        .chain(candidates.iter())
        .filter(|v| cm.model.feasible(v))
        .min_by(|a, b| value_of(a, partial_terms).total_cmp(&value_of(b, partial_terms)))
        .cloned()
        .unwrap_or_else(|| l3_values.clone());
    let start_value = value_of(&best_start, partial_terms).round();
    let bound = bounds.get(&Tier::PartialL3).copied().unwrap_or(0.0);
    if start_value <= bound + 1e-6 {
        stats.tiers.push(TierRun {
            tier: Tier::PartialL3,
            value: start_value,
            ms: started.elapsed().as_secs_f64() * 1e3,
            proven: true,
            by_bound: true,
        });
        let units = cell_units(vms, &cm, &best_start);
        return Ok((cores_of(request, host, &units, true), stats));
    }
    let mut cell_stats = Vec::new();
    let (cell_values, cell_proven) = lexicographic(
        &mut cm.model,
        &partial_tier,
        &bounds,
        &[best_start],
        deadline,
        all_placed,
        &mut cell_stats,
    );
    stats.tiers.extend(cell_stats);
    let placement = match cell_values {
        Some(v) if cm.model.vars.len() == v.len() => {
            cores_of(request, host, &cell_units(vms, &cm, &v), cell_proven)
        }
        _ => cores_of(request, host, &l3_units, false),
    };
    Ok((placement, stats))
}

fn trace_tier(tier: Tier, started: Instant, proven: bool, value: f64) {
    if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
        eprintln!(
            "agg: {tier} (arc flow): {:.1} ms, {} {value}",
            started.elapsed().as_secs_f64() * 1e3,
            if proven { "optimal" } else { "stopped at" }
        );
    }
}

fn placed_everything(stats: &Stats, request: &PlanRequest) -> bool {
    let placed: f64 = stats
        .tiers
        .iter()
        .filter(|r| matches!(r.tier, Tier::Placed(_)))
        .map(|r| -r.value)
        .sum();
    placed as usize == request.vms.len()
}

/// What the models see of a VM that may span nodes: vCPUs, thread policy,
/// emulator isolated, `numa = "preferred"` (or kept to one node), required
/// node, preferred NIC node, priority.
type LooseKey = (
    u32,
    &'static str,
    bool,
    bool,
    Option<NodeId>,
    Option<NodeId>,
    i64,
);

/// Nodes of one arc-flow group: (a NIC's node alone, free cores) and the nodes.
type NodeGroup = ((Scope, u32), Vec<Option<NodeId>>);

/// Where a kind's patterns live: `Some(node)` for VMs kept to one node,
/// `None` for VMs that may span nodes.
type Scope = Option<Option<NodeId>>;
/// A group of like cells: (node, free cores) and the cells.
type CellGroup = ((Option<NodeId>, u32), Vec<usize>);
/// A pattern's count variable: scope, piece sizes, `σ`.
type PatternVar = (Scope, Vec<u32>, usize);

/// The pattern model of objectives 6–7 (see [`pattern_model`]).
struct PatternModel {
    model: Model,
    /// Kinds: members (spec order), cores per VM, kept to one node.
    kinds: Vec<(Vec<usize>, u32, bool)>,
    /// Groups of cells: (node, free cores) and their cells.
    groups: Vec<CellGroup>,
    /// Per kind: (node for kinds kept to one, pattern, `σ`).
    sigma: Vec<Vec<PatternVar>>,
    /// Per kind: (group, piece size) → `ρ`.
    rho: Vec<BTreeMap<(usize, u32), usize>>,
    flows: Vec<super::arcflow::Flow>,
    /// Objective 6: pieces (L3 domains touched), summed.
    pieces: Terms,
    /// Objective 7: partly used cells.
    partial: Terms,
}

/// Objectives 6–7 on a pattern and arc-flow model, objectives 1–5 held.
///
/// VMs that agree on everything placement sees form *kinds* (the strict types,
/// and the other VMs grouped alike). A VM is laid out by a *pattern*: a
/// partition of its cores into pieces, one piece per cell it touches (a VM
/// whole in one cell has the one-piece pattern). `σ` counts the VMs of a kind
/// (on a node, for VMs kept to one node) with each pattern; `ρ` the pieces of
/// each size a group of cells gets; each group is an [`arcflow::Flow`].
///
/// Exact: every layout is one of these (pieces = L3 domains touched, with one
/// cell per domain); conversely, pieces of one VM that a flow puts in one cell
/// are merged by [`PatternModel::layout`], which only lowers objective 6 —
/// so the model's optimum is a layout's. Patterns have at most `most_parts`
/// pieces: with a known layout of L pieces for P placed VMs, no better layout
/// gives a VM more than L − P + 1. `None` when the model does not apply
/// (preferred VMs over several nodes) or would be too big (then the cell model
/// is used).
fn pattern_model(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    held: &BTreeMap<Tier, f64>,
    most_parts: u32,
) -> Option<PatternModel> {
    use super::arcflow::partitions;
    // Preferred VMs over several nodes: only where each node is one cell,
    // so that a VM's pieces are its nodes and extra nodes = pieces − 1.
    let spanning = held.get(&Tier::ExtraNodes).copied().unwrap_or(0.0) > 0.5;
    if spanning && host.nodes.values().any(|cells| cells.len() != 1) {
        return None;
    }
    // Kinds kept to one node: strict, and preferred unless spanning.
    let kinds = kinds_of(request, vms, |vm| {
        vm.numa == NumaPolicy::Preferred && !spanning
    });

    // Groups: cells of one node with the same free cores.
    let mut by_group: BTreeMap<(Option<NodeId>, u32), Vec<usize>> = BTreeMap::new();
    for (e, cell) in host.cells.iter().enumerate() {
        by_group.entry((cell.node, cell.cap())).or_default().push(e);
    }
    let groups: Vec<CellGroup> = by_group.into_iter().collect();

    let mut m = Model::default();
    // Per kind: σ as (scope node or None for any, pattern, variable); ρ per (group, size).
    let mut sigma: Vec<Vec<PatternVar>> = Vec::new();
    let mut rho: Vec<BTreeMap<(usize, u32), usize>> = Vec::new();
    let mut sizes_of_group: Vec<BTreeSet<u32>> = vec![BTreeSet::new(); groups.len()];
    let mut level: BTreeMap<i64, Terms> = BTreeMap::new();
    let (mut vcpus, mut cores, mut remote, mut pieces, mut extra) = (
        Terms::new(),
        Terms::new(),
        Terms::new(),
        Terms::new(),
        Terms::new(),
    );
    for (members, c, one_node) in &kinds {
        let vm = &request.vms[members[0]];
        let usable: Vec<usize> = (0..groups.len())
            .filter(|&g| allowed(vm, groups[g].0 .0, host.threads))
            .collect();
        let scopes: Vec<Scope> = if *one_node {
            usable
                .iter()
                .map(|&g| Some(groups[g].0 .0))
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        } else {
            vec![None]
        };
        let mut sig = Vec::new();
        let mut count = Terms::new();
        let mut rh = BTreeMap::new();
        for scope in scopes {
            let in_scope: Vec<usize> = usable
                .iter()
                .copied()
                .filter(|&g| scope.is_none_or(|k| groups[g].0 .0 == k))
                .collect();
            let largest = in_scope.iter().map(|&g| groups[g].0 .1).max().unwrap_or(0);
            let room: u32 = in_scope
                .iter()
                .map(|&g| groups[g].0 .1 * u32::try_from(groups[g].1.len()).unwrap_or(0))
                .sum();
            if largest == 0 || room < *c {
                continue;
            }
            let patterns = partitions(*c, largest.min(*c), most_parts);
            if sigma.iter().map(Vec::len).sum::<usize>() + patterns.len() > 20_000 {
                return None;
            }
            let mut per_size: BTreeMap<u32, Terms> = BTreeMap::new();
            for pattern in patterns {
                let v = m.int(members.len() as f64);
                count.push((v, 1.0));
                level.entry(vm.priority).or_default().push((v, -1.0));
                vcpus.push((v, -f64::from(vm.vcpus)));
                cores.push((v, f64::from(*c)));
                pieces.push((v, pattern.len() as f64));
                if spanning && vm.numa == NumaPolicy::Preferred && pattern.len() > 1 {
                    extra.push((v, pattern.len() as f64 - 1.0));
                }
                for &p in &pattern {
                    let entry = per_size.entry(p).or_default();
                    match entry.iter_mut().find(|(var, _)| *var == v) {
                        Some(term) => term.1 += 1.0,
                        None => entry.push((v, 1.0)),
                    }
                }
                sig.push((scope, pattern, v));
            }
            // Pieces of each size in the scope's groups = those of its patterns.
            for (p, from_patterns) in per_size {
                let mut link: Terms = from_patterns.iter().map(|&(v, k)| (v, -k)).collect();
                for &g in &in_scope {
                    if p > groups[g].0 .1 {
                        continue;
                    }
                    let r = *rh
                        .entry((g, p))
                        .or_insert_with(|| m.int(f64::from(*c) * members.len() as f64));
                    link.push((r, 1.0));
                    sizes_of_group[g].insert(p);
                    if vm
                        .preferred_node()
                        .is_some_and(|nic| groups[g].0 .0 != Some(nic))
                    {
                        remote.push((r, f64::from(p)));
                    }
                }
                m.con(link, Op::Eq, 0.0);
            }
        }
        if !count.is_empty() {
            m.con(count, Op::Le, members.len() as f64);
        }
        sigma.push(sig);
        rho.push(rh);
    }
    let bins: Vec<(u32, u32)> = groups
        .iter()
        .map(|(key, cells)| (u32::try_from(cells.len()).unwrap_or(u32::MAX), key.1))
        .collect();
    let flows = add_flows(&mut m, &bins, &sizes_of_group, &rho);
    let objective: Terms = flows.iter().flat_map(|f| f.partial()).collect();
    let mut used: BTreeMap<Option<NodeId>, Terms> = BTreeMap::new();
    for (((node, _), _), flow) in groups.iter().zip(&flows) {
        used.entry(*node).or_default().extend(flow.cores());
    }
    order_nodes(&mut m, &used, &interchangeable_nodes(request, host));
    // Objectives 1–6 held.
    for l in priority_levels(request) {
        if let Some(&value) = held.get(&Tier::Placed(l)) {
            m.con(level.remove(&l).unwrap_or_default(), Op::Le, value);
        }
    }
    let pieces_l3 = pieces.clone();
    for (tier, terms) in [
        (Tier::Vcpus, vcpus),
        (Tier::Cores, cores),
        (Tier::NicRemote, remote),
        (Tier::L3PerVm, pieces),
        (Tier::ExtraNodes, extra),
    ] {
        if let Some(&value) = held.get(&tier) {
            m.con(terms, Op::Le, value);
        }
    }
    Some(PatternModel {
        model: m,
        kinds,
        groups,
        sigma,
        rho,
        flows,
        pieces: pieces_l3,
        partial: objective,
    })
}

impl PatternModel {
    /// The layout at `values`: flows → cells → pieces per kind → VMs.
    fn layout(&self, values: &[f64]) -> Option<Units> {
        let (kinds, groups, sigma, rho, flows) = (
            &self.kinds,
            &self.groups,
            &self.sigma,
            &self.rho,
            &self.flows,
        );
        let count = |v: usize| values.get(v).copied().unwrap_or(0.0).round().max(0.0) as u32;
        // Flows → cells → pieces per kind → VMs.
        let mut pool: Vec<BTreeMap<(Scope, u32), Vec<usize>>> = vec![BTreeMap::new(); kinds.len()];
        for (g, ((node, _), cells)) in groups.iter().enumerate() {
            let mut positions: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
            for (&e, pattern) in cells.iter().zip(flows[g].patterns(values)) {
                for p in pattern {
                    positions.entry(p).or_default().push(e);
                }
            }
            for (p, cells_of_size) in positions {
                let mut next = cells_of_size.into_iter();
                for (t, rh) in rho.iter().enumerate() {
                    let Some(&r) = rh.get(&(g, p)) else { continue };
                    let scope = if kinds[t].2 { Some(*node) } else { None };
                    for _ in 0..count(r) {
                        pool[t].entry((scope, p)).or_default().push(next.next()?);
                    }
                }
            }
        }
        let mut units = Units::new();
        for (t, sig) in sigma.iter().enumerate() {
            let mut members = kinds[t].0.iter().copied();
            for (scope, pattern, v) in sig {
                for _ in 0..count(*v) {
                    let i = members.next()?;
                    let entry = units.entry(i).or_default();
                    for &p in pattern {
                        let cells = pool[t].get_mut(&(*scope, p))?;
                        // A cell of its own first (one always exists at the optimum).
                        let at = cells
                            .iter()
                            .rposition(|e| !entry.contains_key(e))
                            .unwrap_or(cells.len().checked_sub(1)?);
                        let e = cells.remove(at);
                        *entry.entry(e).or_default() += p;
                    }
                }
            }
        }
        Some(units)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::topology::{load, Source};

    fn request(desc: &str, vms: Vec<VmRequest>) -> PlanRequest {
        PlanRequest {
            host: load(&Source::Synthetic(desc.to_owned())).unwrap(),
            reserved: crate::cpuset::CpuSet::new(),
            fixed: Vec::new(),
            vms,
        }
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
        let placement = place(&req, Duration::from_secs(10)).unwrap();
        assert!(placement.proven);
        let placed: BTreeSet<usize> = placement.cores.keys().copied().collect();
        assert_eq!(placed, BTreeSet::from([1, 2, 3]));
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
        let (placement, stats) = place_with_stats(&req, Duration::from_secs(10)).unwrap();
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
