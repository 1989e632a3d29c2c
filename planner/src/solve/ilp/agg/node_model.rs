//! The counting node model: objectives 1–5 on hosts with big NUMA nodes, its
//! start points, and the layout of its answer in cells.
//!
//! `x[t][k]` VMs of strict type t on node k; the other VMs `p[v]`, `n[v][k]`
//! cores on node k and `y[v][k]` node used.

use super::super::backend::Model;
use super::super::expr::{Expr, Var};
use super::super::memory_rows::MemoryRows;
use super::super::tiers::{priority_levels, Tiers};
use super::host::{Host, Vms};
use super::layout::{lay_out, Units};
use super::lexicographic::{lexicographic, placing_tiers, Ask, Objectives};
use super::symmetry::{interchangeable_nodes, order_nodes};
use super::{loose, Stats};
use crate::deadline::Deadline;
use crate::ids::NodeId;
use crate::solve::{NumaPolicy, PlanRequest, Tier};
use std::collections::BTreeMap;

/// A VM that may span nodes: `p`, `n` per node, `y` per node (preferred).
struct LooseVm {
    p: Var,
    n: Vec<(Option<NodeId>, Var)>,
    y: BTreeMap<Option<NodeId>, Var>,
}

/// The node model.
struct NodeModel {
    model: Model,
    /// `x[t]`: (node, variable).
    x: Vec<Vec<(Option<NodeId>, Var)>>,
    /// Per VM of `Vms::loose`.
    loose: Vec<LooseVm>,
    tiers: Tiers,
    /// Lower bounds of tiers 2–5 when every VM is placed.
    bounds: BTreeMap<Tier, f64>,
}

/// Writes the node model.
struct Builder<'a> {
    request: &'a PlanRequest,
    host: &'a Host,
    m: Model,
    /// Cores taken per node.
    used: BTreeMap<Option<NodeId>, Expr>,
    objectives: Objectives,
    /// Lower bound of objective 4 when every VM is placed.
    least_extra: f64,
}

fn node_model(request: &PlanRequest, host: &Host, vms: &Vms) -> NodeModel {
    let mut b = Builder {
        request,
        host,
        m: Model::default(),
        used: BTreeMap::new(),
        objectives: Objectives::default(),
        least_extra: 0.0,
    };
    let x: Vec<Vec<(Option<NodeId>, Var)>> = vms
        .types
        .iter()
        .map(|(members, c)| b.strict(members, *c))
        .collect();
    let loose: Vec<LooseVm> = vms.loose.iter().map(|&(i, c)| b.loose(i, c)).collect();
    // Capacity per node.
    for (&k, terms) in &b.used {
        b.m.le(terms.clone(), f64::from(host.node_cap(k)));
    }
    // Memory per node and page size: strict VMs whole on their node, the
    // others in proportion to their cores there.
    let mut memory = MemoryRows::new(request);
    for ((members, _), xs) in vms.types.iter().zip(&x) {
        for &(k, v) in xs {
            memory.add(members[0], k, 1.0, v);
        }
    }
    for (&(i, c), vars) in vms.loose.iter().zip(&loose) {
        for &(k, v) in &vars.n {
            memory.add(i, k, 1.0 / f64::from(c.max(1)), v);
        }
    }
    memory.bound(&mut b.m);
    order_nodes(&mut b.m, &b.used, &interchangeable_nodes(request, host));
    let mut bounds: BTreeMap<Tier, f64> = [
        (
            Tier::Vcpus,
            -vms.each()
                .map(|(i, _)| f64::from(request.vms[i].vcpus))
                .sum::<f64>(),
        ),
        (Tier::Cores, vms.each().map(|(_, c)| f64::from(c)).sum()),
        (Tier::ExtraNodes, b.least_extra),
        (Tier::NicRemote, 0.0),
    ]
    .into_iter()
    .collect();
    for l in priority_levels(request) {
        let at_level = vms
            .each()
            .map(|(i, _)| f64::from(u8::from(request.vms[i].priority == l)))
            .sum::<f64>();
        bounds.insert(Tier::Placed(l), -at_level);
    }
    NodeModel {
        tiers: b.objectives.tiers(request, Vec::new()),
        model: b.m,
        x,
        loose,
        bounds,
    }
}

impl Builder<'_> {
    /// `x[t][k]` for a strict type of `c` cores per VM, on the nodes that
    /// hold one; at most its members in all.
    fn strict(&mut self, members: &[usize], c: u32) -> Vec<(Option<NodeId>, Var)> {
        let vm = &self.request.vms[members[0]];
        let count = members.len() as u32;
        let mut xs = Vec::new();
        for &k in self.host.nodes.keys() {
            let node_cap = self.host.node_cap(k);
            if !self.host.allows(vm, k) || c > node_cap {
                continue;
            }
            let v = self.m.int(f64::from(count.min(node_cap / c)));
            xs.push((k, v));
            *self.used.entry(k).or_default() += f64::from(c) * v;
            self.objectives.place(vm, v, c);
            if vm.nic_remote(k) {
                self.objectives.remote += f64::from(c) * v;
            }
        }
        if !xs.is_empty() {
            let placed: Expr = xs.iter().map(|&(_, v)| v).sum();
            self.m.le(placed, f64::from(count));
        }
        xs
    }

    /// VM `i` of `c` cores, which may span nodes.
    fn loose(&mut self, i: usize, c: u32) -> LooseVm {
        let (host, vm) = (self.host, &self.request.vms[i]);
        let places = host
            .nodes
            .keys()
            .filter(|&&k| host.allows(vm, k))
            .map(|&k| (k, k, host.node_cap(k)));
        let (p, n) = loose::columns(
            &mut self.m,
            &mut self.objectives,
            vm,
            c,
            places,
            &mut self.used,
        );
        let mut y = BTreeMap::new();
        if vm.numa == NumaPolicy::Preferred && n.len() > 1 {
            let groups = n.iter().map(|&(k, v, most)| (k, vec![(v, most)])).collect();
            let (binaries, count, least) = loose::touch(&mut self.m, p, c, groups);
            self.objectives.extra += count - p;
            self.least_extra += f64::from(least) - 1.0;
            y = binaries;
        }
        LooseVm {
            p,
            n: n.into_iter().map(|(k, v, _)| (k, v)).collect(),
            y,
        }
    }
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
    let mut values = nm.model.zeros();
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
                    values[v.index()] += 1.0;
                }
            }
        }
    }
    for (&(i, _), vars) in vms.loose.iter().zip(&nm.loose) {
        let per = node_count(i);
        if per.is_empty() {
            continue;
        }
        values[vars.p.index()] = 1.0;
        for &(k, v) in &vars.n {
            values[v.index()] = f64::from(per.get(&k).copied().unwrap_or(0));
        }
        for (k, &y) in &vars.y {
            values[y.index()] = f64::from(u8::from(per.contains_key(k)));
        }
    }
    values
}

/// Lays the node model's answer out in cells (see [`lay_out`]).
fn realise(host: &Host, vms: &Vms, nm: &NodeModel, values: &[f64]) -> Units {
    // Strict VMs per node: the first members of each type in spec order.
    let mut per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
    for ((members, c), xs) in vms.types.iter().zip(&nm.x) {
        let mut next = members.iter();
        for &(k, v) in xs {
            for &i in next.by_ref().take(v.count(values) as usize) {
                per_node.entry(k).or_default().push((i, *c));
            }
        }
    }
    // Loose VMs: their per-node amounts.
    let mut loose_per_node: BTreeMap<Option<NodeId>, Vec<(usize, u32)>> = BTreeMap::new();
    for (&(i, _), vars) in vms.loose.iter().zip(&nm.loose) {
        if vars.p.count(values) == 0 {
            continue;
        }
        for &(k, v) in &vars.n {
            let amount = v.count(values);
            if amount > 0 {
                loose_per_node.entry(k).or_default().push((i, amount));
            }
        }
    }
    lay_out(host, per_node, loose_per_node)
}

/// Objectives 1–5 on the counting node model; the layout of its answer,
/// whether proven, and `false` (objectives 6–7 are left to the next stage).
pub(super) fn counting_stage(
    request: &PlanRequest,
    host: &Host,
    vms: &Vms,
    start_units: &[Units],
    (deadline, placing_only): (Deadline, bool),
    stats: &mut Stats,
) -> (Units, bool, bool) {
    let mut nm = node_model(request, host, vms);
    stats.variables.0 = nm.model.vars();
    let symmetric = interchangeable_nodes(request, host);
    let candidates: Vec<Vec<f64>> = start_units
        .iter()
        .map(|u| node_start(host, vms, &nm, u, &symmetric))
        .collect();
    let ask = Ask::first_stage(request, vms, placing_only);
    let tiers = placing_tiers(std::mem::take(&mut nm.tiers), ask);
    let (node_values, node_proven) = lexicographic(
        &mut nm.model,
        &tiers,
        &nm.bounds,
        &candidates,
        deadline,
        ask,
        stats,
    );
    let node_values = node_values.unwrap_or_else(|| nm.model.zeros());
    (realise(host, vms, &nm, &node_values), node_proven, false)
}
