//! The cell model: objectives 6–7 where an L3 domain spans nodes (or the
//! pattern model does not apply), its start points and its stage.
//!
//! A strict VM is either whole in one cell
//! (`a[t][e]` counts them) or split over cells of its node in a split slot
//! ([`super::slots`]); the other VMs have `p[v]`, `n[v][e]` cores per cell,
//! `y[v][k]` nodes and `w[v][d]` domains touched. Partly used L3 domains are
//! counted per domain (`touched − full`).

use super::super::backend::Model;
use super::super::expr::{Expr, Var};
use super::super::groups::partly_used_groups;
use super::super::memory_rows::MemoryRows;
use super::super::tiers::Tiers;
use super::host::{Host, Vms};
use super::layout::{cores_of, Units};
use super::lexicographic::{
    fewest_or_all, lexicographic, some_domain_partly_used, Ask, Objectives,
};
use super::{loose, Held, Stats, TierRun};
use crate::ids::NodeId;
use crate::solve::classes::Domain;
use crate::solve::{NumaPolicy, Placement, PlanRequest, Tier};
use std::collections::BTreeMap;
use std::time::Instant;

/// One split slot.
pub(super) struct Slot {
    pub(super) node: Option<NodeId>,
    /// `τ`: (type index, variable).
    pub(super) tau: Vec<(usize, Var)>,
    /// `s`: (cell, variable).
    pub(super) s: Vec<(usize, Var)>,
    /// `w`: (cell, variable).
    pub(super) w: Vec<(usize, Var)>,
}

/// A VM that may span nodes: `p`, `n` per cell, `y` per node (preferred),
/// `w` per domain.
struct LooseVm {
    p: Var,
    n: Vec<(usize, Var)>,
    y: BTreeMap<Option<NodeId>, Var>,
    w: BTreeMap<Domain, Var>,
}

/// The cell model.
pub(super) struct CellModel {
    pub(super) model: Model,
    /// Strict types: `a[t]`: (cell, variable).
    a: Vec<Vec<(usize, Var)>>,
    slots: Vec<Slot>,
    /// Per VM of `Vms::loose`.
    loose: Vec<LooseVm>,
    /// Per domain: (touched, full).
    domains: BTreeMap<Domain, (Var, Var)>,
    pub(super) tiers: Tiers,
    pub(super) bounds: BTreeMap<Tier, f64>,
}

/// Writes the cell model.
pub(super) struct Builder<'a> {
    pub(super) request: &'a PlanRequest,
    pub(super) host: &'a Host,
    pub(super) vms: &'a Vms,
    pub(super) m: Model,
    /// Cores taken per cell.
    pub(super) used: BTreeMap<usize, Expr>,
    objectives: Objectives,
    /// Objective 6: L3 domains touched, summed over VMs.
    pub(super) l3: Expr,
    /// Per strict type: its VMs placed (whole in a cell, or in a slot).
    pub(super) placed_t: Vec<Expr>,
    bound_l3: f64,
    bound_nodes: f64,
}

impl CellModel {
    pub(super) fn new(request: &PlanRequest, host: &Host, vms: &Vms) -> CellModel {
        let mut b = Builder {
            request,
            host,
            vms,
            m: Model::default(),
            used: BTreeMap::new(),
            objectives: Objectives::default(),
            l3: Expr::default(),
            placed_t: vec![Expr::default(); vms.types.len()],
            bound_l3: 0.0,
            bound_nodes: 0.0,
        };
        let a: Vec<Vec<(usize, Var)>> = (0..vms.types.len()).map(|t| b.whole(t)).collect();
        let slots = b.slots();
        b.strict_objectives(&a, &slots);
        let loose: Vec<LooseVm> = vms.loose.iter().map(|&(i, c)| b.loose(i, c)).collect();
        for (&e, terms) in &b.used {
            b.m.le(terms.clone(), f64::from(host.cells[e].cap()));
        }
        b.memory(&a, &slots, &loose);
        let (domains, partial) = b.partly_used_domains();
        let Builder {
            m,
            objectives,
            l3,
            bound_l3,
            bound_nodes,
            ..
        } = b;
        let tiers = objectives.tiers(
            request,
            vec![(Tier::L3PerVm, l3), (Tier::PartialL3, partial)],
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
            loose,
            domains,
            tiers,
            bounds,
        }
    }
}

impl Builder<'_> {
    /// Memory per node and page size (see [`crate::solve::memory`]): strict
    /// VMs whole in a cell or split in a slot of their node, the others in
    /// proportion to their cores on each node.
    fn memory(&mut self, a: &[Vec<(usize, Var)>], slots: &[Slot], loose: &[LooseVm]) {
        let (host, vms) = (self.host, self.vms);
        let mut memory = MemoryRows::new(self.request);
        for (t, (members, _)) in vms.types.iter().enumerate() {
            for &(e, v) in &a[t] {
                memory.add(members[0], host.cells[e].node, 1.0, v);
            }
            for slot in slots {
                for &(_, tv) in slot.tau.iter().filter(|&&(tt, _)| tt == t) {
                    memory.add(members[0], slot.node, 1.0, tv);
                }
            }
        }
        for (&(i, c), vars) in vms.loose.iter().zip(loose) {
            for &(e, v) in &vars.n {
                memory.add(i, host.cells[e].node, 1.0 / f64::from(c.max(1)), v);
            }
        }
        memory.bound(&mut self.m);
    }

    /// `a[t][e]`: VMs of strict type t whole in cell e.
    fn whole(&mut self, t: usize) -> Vec<(usize, Var)> {
        let (host, (members, c)) = (self.host, &self.vms.types[t]);
        let c = *c;
        let vm = &self.request.vms[members[0]];
        let count = members.len() as u32;
        let mut av = Vec::new();
        for (e, cell) in host.cells.iter().enumerate() {
            if !host.allows(vm, cell.node) || c > cell.cap() {
                continue;
            }
            let v = self.m.int(f64::from(count.min(cell.cap() / c)));
            av.push((e, v));
            *self.used.entry(e).or_default() += f64::from(c) * v;
            self.placed_t[t] += v;
            self.l3 += v;
        }
        // Bound on L3 domains: 1 where a cell of an allowed node holds it.
        let holds = host
            .cells
            .iter()
            .any(|cell| host.allows(vm, cell.node) && cell.cap() >= c);
        let least = if holds {
            1
        } else {
            host.nodes
                .iter()
                .filter(|(k, _)| host.allows(vm, **k))
                .map(|(_, cells)| {
                    let caps: Vec<u32> = cells
                        .iter()
                        .map(|&e| host.cells[e].cap().min(c - 1))
                        .collect();
                    fewest_or_all(&caps, c).max(2)
                })
                .min()
                .unwrap_or(1)
        };
        self.bound_l3 += f64::from(least) * f64::from(count);
        av
    }

    /// Per strict type: at most its members placed, objectives 1–3 and the
    /// cores off a preferred NIC's node.
    fn strict_objectives(&mut self, a: &[Vec<(usize, Var)>], slots: &[Slot]) {
        let (request, host) = (self.request, self.host);
        for (t, (members, c)) in self.vms.types.iter().enumerate() {
            let vm = &request.vms[members[0]];
            let placed = &self.placed_t[t];
            if !placed.is_empty() {
                self.m.le(placed.clone(), members.len() as f64);
            }
            for &(v, _) in placed.terms() {
                self.objectives.place(vm, v, *c);
            }
            for &(e, v) in &a[t] {
                if vm.nic_remote(host.cells[e].node) {
                    self.objectives.remote += f64::from(*c) * v;
                }
            }
            for slot in slots.iter().filter(|slot| vm.nic_remote(slot.node)) {
                for &(_, tv) in slot.tau.iter().filter(|&&(tt, _)| tt == t) {
                    self.objectives.remote += f64::from(*c) * tv;
                }
            }
        }
    }

    /// VM `i` of `c` cores, which may span nodes: its cores per cell, the
    /// nodes (`numa = "preferred"`) and domains it touches.
    fn loose(&mut self, i: usize, c: u32) -> LooseVm {
        let (host, vm) = (self.host, &self.request.vms[i]);
        let places = host
            .cells
            .iter()
            .enumerate()
            .filter(|(_, cell)| host.allows(vm, cell.node))
            .map(|(e, cell)| (e, cell.node, cell.cap()));
        let (p, n) = loose::columns(
            &mut self.m,
            &mut self.objectives,
            vm,
            c,
            places,
            &mut self.used,
        );
        // Groups (nodes, domains) it touches, with cover cuts.
        let mut y = BTreeMap::new();
        if vm.numa == NumaPolicy::Preferred {
            let mut by_node: BTreeMap<Option<NodeId>, Vec<(Var, u32)>> = BTreeMap::new();
            for &(e, v, most) in &n {
                by_node
                    .entry(host.cells[e].node)
                    .or_default()
                    .push((v, most));
            }
            let (binaries, count, least) = loose::touch(&mut self.m, p, c, by_node);
            self.objectives.extra += count - p;
            self.bound_nodes += f64::from(least) - 1.0;
            y = binaries;
        }
        let mut by_domain: BTreeMap<Domain, Vec<(Var, u32)>> = BTreeMap::new();
        for &(e, v, most) in &n {
            by_domain
                .entry(host.cells[e].domain)
                .or_default()
                .push((v, most));
        }
        let (w, count, least) = loose::touch(&mut self.m, p, c, by_domain);
        self.l3 += count;
        self.bound_l3 += f64::from(least);
        LooseVm {
            p,
            n: n.into_iter().map(|(e, v, _)| (e, v)).collect(),
            y,
            w,
        }
    }

    /// Partly used L3 domains: their (touched, full) binaries and the
    /// objective that counts them.
    fn partly_used_domains(&mut self) -> (BTreeMap<Domain, (Var, Var)>, Expr) {
        let mut per_domain: BTreeMap<Domain, (Expr, u32)> = BTreeMap::new();
        for (e, cell) in self.host.cells.iter().enumerate() {
            let entry = per_domain.entry(cell.domain).or_default();
            entry.0 += self.used.get(&e).cloned().unwrap_or_default();
            entry.1 += cell.cap();
        }
        let (binaries, partial) = partly_used_groups(&mut self.m, per_domain, true);
        let domains = binaries
            .into_iter()
            .map(|(d, (touched, full, _))| (d, (touched, full)))
            .collect();
        (domains, partial)
    }
}

impl CellModel {
    /// Values for a layout (`None` when it does not map: a strict VM on two
    /// nodes, more split VMs on a node than slots).
    pub(super) fn start(&self, host: &Host, vms: &Vms, units: &Units) -> Option<Vec<f64>> {
        let mut values = self.model.zeros();
        let mut next_slot: BTreeMap<Option<NodeId>, usize> = BTreeMap::new();
        let mut used_per_domain: BTreeMap<Domain, u32> = BTreeMap::new();
        for (t, ((members, _), av)) in vms.types.iter().zip(&self.a).enumerate() {
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
                    values[v.index()] += 1.0;
                    continue;
                }
                let node = host.cells[*per_cell.keys().next()?].node;
                let k = next_slot.entry(node).or_default();
                let slot = self.slots.iter().filter(|s| s.node == node).nth(*k)?;
                *k += 1;
                let &(_, tv) = slot.tau.iter().find(|(tt, _)| *tt == t)?;
                values[tv.index()] = 1.0;
                for (&e, &c) in per_cell {
                    let &(_, sv) = slot.s.iter().find(|(ee, _)| *ee == e)?;
                    let &(_, wv) = slot.w.iter().find(|(ee, _)| *ee == e)?;
                    values[sv.index()] = f64::from(c);
                    values[wv.index()] = 1.0;
                }
            }
        }
        for (&(i, _), vars) in vms.loose.iter().zip(&self.loose) {
            let Some(per_cell) = units.get(&i) else {
                continue;
            };
            values[vars.p.index()] = 1.0;
            for (&e, &c) in per_cell {
                *used_per_domain.entry(host.cells[e].domain).or_default() += c;
                let &(_, v) = vars.n.iter().find(|(ee, _)| *ee == e)?;
                values[v.index()] = f64::from(c);
                if let Some(&y) = vars.y.get(&host.cells[e].node) {
                    values[y.index()] = 1.0;
                }
                if let Some(&w) = vars.w.get(&host.cells[e].domain) {
                    values[w.index()] = 1.0;
                }
            }
        }
        let capacity = host.domain_caps();
        for (d, &(touched, full)) in &self.domains {
            let used = used_per_domain.get(d).copied().unwrap_or(0);
            values[touched.index()] = f64::from(u8::from(used > 0));
            values[full.index()] = f64::from(u8::from(used > 0 && Some(&used) == capacity.get(d)));
        }
        Some(values)
    }

    /// Values → per-VM cell counts.
    pub(super) fn units(&self, vms: &Vms, values: &[f64]) -> Units {
        let count = |v: Var| v.count(values);
        let mut units = Units::new();
        for (t, ((members, c), av)) in vms.types.iter().zip(&self.a).enumerate() {
            let mut next = members.iter().copied();
            for &(e, v) in av {
                for i in next.by_ref().take(count(v) as usize) {
                    units.entry(i).or_default().insert(e, *c);
                }
            }
            for slot in &self.slots {
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
        for (&(i, _), vars) in vms.loose.iter().zip(&self.loose) {
            if count(vars.p) == 0 {
                continue;
            }
            let entry = units.entry(i).or_default();
            for &(e, v) in &vars.n {
                if count(v) > 0 {
                    entry.insert(e, count(v));
                }
            }
        }
        units
    }
}

/// Objectives 6–7 on the cell model, objectives 1–5 held; `laid_out` is the
/// layout of their optimum, `start_units` the starts' layouts.
pub(super) fn cells_stage(
    held: &Held,
    laid_out: &Units,
    start_units: &[Units],
    mut stats: Stats,
) -> (Placement, Stats) {
    let (request, host, vms) = (held.request, held.host, held.vms);
    let mut cm = CellModel::new(request, host, vms);
    stats.variables.1 = cm.model.vars();
    let candidates: Vec<Vec<f64>> = std::iter::once(laid_out)
        .chain(start_units)
        .filter_map(|u| cm.start(host, vms, u))
        .collect();
    let (l3_tier, partial_tier, bounds) = cm.hold(host, &held.values);
    // 6. L3 domains per VM.
    let (l3_values, l3_proven) = lexicographic(
        &mut cm.model,
        &l3_tier,
        &bounds,
        &candidates,
        held.deadline,
        Ask::optima(held.all_placed),
        &mut stats,
    );
    let l3_values = match l3_values {
        Some(v) if l3_proven && v.len() == cm.model.vars() => v,
        other => {
            let placement = match other {
                Some(v) if v.len() == cm.model.vars() => {
                    cores_of(request, host, &cm.units(vms, &v), false)
                }
                _ => cores_of(request, host, laid_out, false),
            };
            return (placement, stats);
        }
    };
    let l3_units = cm.units(vms, &l3_values);
    let Some((_, partial_terms)) = partial_tier.first() else {
        return (cores_of(request, host, &l3_units, true), stats);
    };

    // 7. Partly used L3 domains.
    let started = Instant::now();
    let best_start = seven_start(&cm, (host, vms), &l3_values, &candidates, partial_terms);
    let start_value = partial_terms.value(&best_start).round();
    let bound = bounds.get(&Tier::PartialL3).copied().unwrap_or(0.0);
    if start_value <= bound + 1e-6 {
        stats.tiers.push(TierRun {
            tier: Tier::PartialL3,
            value: start_value,
            ms: started.elapsed().as_secs_f64() * 1e3,
            proven: true,
            by_bound: true,
        });
        let units = cm.units(vms, &best_start);
        return (cores_of(request, host, &units, true), stats);
    }
    let (cell_values, cell_proven) = lexicographic(
        &mut cm.model,
        &partial_tier,
        &bounds,
        &[best_start],
        held.deadline,
        Ask::optima(held.all_placed),
        &mut stats,
    );
    let placement = match cell_values {
        Some(v) if cm.model.vars() == v.len() => {
            cores_of(request, host, &cm.units(vms, &v), cell_proven)
        }
        _ => cores_of(request, host, &l3_units, false),
    };
    (placement, stats)
}

/// Objective 7's start: the best of objective 6's answer and `candidates`
/// by `partial`. Objective 6's answer leaves the binaries of objective 7 as
/// the solver happened to set them (a full domain may read "not full"), so
/// its layout read back is a candidate too: there they are as the layout
/// has them.
fn seven_start(
    cm: &CellModel,
    (host, vms): (&Host, &Vms),
    l3_values: &[f64],
    candidates: &[Vec<f64>],
    partial: &Expr,
) -> Vec<f64> {
    let read_back = cm.start(host, vms, &cm.units(vms, l3_values));
    std::iter::once(l3_values)
        .chain(read_back.as_deref())
        .chain(candidates.iter().map(Vec::as_slice))
        .filter(|v| cm.model.feasible(v))
        .min_by(|a, b| partial.value(a).total_cmp(&partial.value(b)))
        .unwrap_or(l3_values)
        .to_vec()
}

impl CellModel {
    /// Holds objectives 1–5 at `held`; returns the tiers of objectives 6 and
    /// 7 (each empty when it has no terms) and their bounds. Cores used is
    /// fixed now: when no set of whole domains adds up to it, some domain
    /// must be partly used.
    fn hold(
        &mut self,
        host: &Host,
        held: &BTreeMap<Tier, f64>,
    ) -> (Tiers, Tiers, BTreeMap<Tier, f64>) {
        let tiers = std::mem::take(&mut self.tiers);
        for (tier, terms) in &tiers {
            if let Some(&best) = held.get(tier) {
                self.model.le(terms.clone(), best);
            }
        }
        let (l3, partial): (Tiers, Tiers) = tiers
            .into_iter()
            .filter(|(t, _)| matches!(t, Tier::L3PerVm | Tier::PartialL3))
            .partition(|(t, _)| *t == Tier::L3PerVm);
        let mut bounds = self.bounds.clone();
        if held
            .get(&Tier::Cores)
            .is_some_and(|&cores| some_domain_partly_used(host, cores))
        {
            bounds.insert(Tier::PartialL3, 1.0);
            if let Some((_, terms)) = partial.first() {
                self.model.ge(terms.clone(), 1.0);
            }
        }
        (l3, partial, bounds)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::{ThreadPolicy, VmRequest};
    use crate::topology::{load, Source};

    /// Issue 28 (`spr-snc4-100` of the benchmark stopped objective 7 at 2 on
    /// a full host, where it is 0): an answer of objective 6 whose "domain
    /// full" binaries read 0 is not objective 7's start; its layout read
    /// back, with both domains full, is. L3 domains over 2 nodes each (sub-
    /// NUMA clustering), VMs of 3, 3, 2, 2, 1, 1 cores on the 12 free.
    #[test]
    fn objective_sevens_start_reads_the_layout_back() {
        let vms: Vec<VmRequest> = [3, 3, 2, 2, 1, 1]
            .iter()
            .enumerate()
            .map(|(i, &c)| VmRequest {
                threads: ThreadPolicy::Prefer,
                ..VmRequest::new(&format!("vm{i}"), 2 * c)
            })
            .collect();
        let request = PlanRequest {
            host: load(&Source::Synthetic(
                "package:2 l3:1 numa:2 core:3 pu:2(indexes=2*12:1*2)".to_owned(),
            ))
            .unwrap(),
            reserved: crate::cpuset::CpuSet::new(),
            fixed: Vec::new(),
            vms,
            order: Default::default(),
            max_moves: None,
        };
        let host = Host::new(&request);
        let vms = Vms::new(&request, &host);
        assert!(!host.one_cell_per_domain());
        let mut cm = CellModel::new(&request, &host, &vms);
        let greedy = crate::solve::greedy::place(&request);
        let units = super::super::layout::units_of(&host, &greedy).unwrap();
        assert_eq!(units.len(), 6, "greedy places every VM");
        let mut values = cm.start(&host, &vms, &units).unwrap();
        let (_, seven, _) = cm.hold(&host, &BTreeMap::new());
        let partial = &seven[0].1;
        assert_eq!(partial.value(&values), 0.0);
        // As a solver may leave them: touched, not full.
        for &(_, full) in cm.domains.values() {
            values[full.index()] = 0.0;
        }
        assert_eq!(partial.value(&values), 2.0);
        let start = seven_start(&cm, (&host, &vms), &values, &[], partial);
        assert_eq!(partial.value(&start), 0.0);
    }
}
