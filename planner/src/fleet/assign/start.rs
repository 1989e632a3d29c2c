//! A feasible start for the assignment (first fit), and the one placement
//! rule it shares with the packing of a bin's VMs onto its hosts.

use super::{mib, Capacity, Hosts, Kind, MemoryCaps, NodeVars, Touched};
use crate::fleet::index::{BinIx, KindIx, Per};
use crate::ids::NodeId;
use crate::solve::ilp::backend::Model;
use crate::solve::ilp::expr::Var;
use std::collections::BTreeMap;

/// The variables a start sets.
pub(super) struct Vars<'a> {
    pub on_host: &'a BTreeMap<(KindIx, BinIx), Var>,
    pub nodes: &'a NodeVars,
    /// Per bin touched: its count, the cores it gets, one host's cores, and
    /// each kind's count there with one host's worth of it.
    pub touched: &'a [Touched],
}

/// A feasible start: kinds in priority order (then spec order), each member
/// on the first of its hosts with room — a node with its cores free for a
/// strict kind, its cores anywhere on the host for the others.
pub(super) fn first_fit(
    kinds: &Per<KindIx, Kind<BinIx>>,
    hosts: &Hosts,
    m: &Model,
    vars: &Vars,
) -> Option<Vec<f64>> {
    let mut start = Start {
        values: m.zeros(),
        // Whole bins: n hosts' worth of each node.
        left: hosts
            .capacity
            .iter()
            .zip(hosts.hosts)
            .map(|(c, &n)| c.iter().map(|(&k, &v)| (k, v * n)).collect())
            .collect(),
        mem_left: hosts
            .memory
            .iter()
            .zip(hosts.hosts)
            .map(|(c, &n)| c.iter().map(|(&k, &v)| (k, v * f64::from(n))).collect())
            .collect(),
    };
    let mut order: Vec<KindIx> = kinds.ids().collect();
    order.sort_by_key(|&k| {
        let kept = kinds[k].running_on.is_some() && !kinds[k].movable;
        (
            !kept,
            std::cmp::Reverse(kinds[k].priority),
            kinds[k].members.first().copied(),
        )
    });
    for k in order {
        for _ in &kinds[k].members {
            if !start.place(k, &kinds[k], hosts, m, vars) {
                break;
            }
        }
    }
    let values = &mut start.values;
    for (t, cores, per_host, kinds_here) in vars.touched {
        // Enough hosts for the cores, and for each kind's members.
        let by_kind = kinds_here
            .iter()
            .map(|(y, most)| (values[y.index()] / most.max(1.0)).ceil())
            .fold(0.0, f64::max);
        values[t.index()] = (cores.value(values) / f64::from(*per_host))
            .ceil()
            .max(by_kind)
            .min(m.upper(*t));
    }
    m.feasible(&start.values).then_some(start.values)
}

/// A start as first fit builds it: the variables' values, and what is left
/// of each bin.
struct Start {
    values: Vec<f64>,
    left: Per<BinIx, Capacity>,
    mem_left: Per<BinIx, MemoryCaps>,
}

impl Start {
    /// One member of kind `k` on the first of its bins with room; whether
    /// one had room.
    fn place(
        &mut self,
        k: KindIx,
        kind: &Kind<BinIx>,
        hosts: &Hosts,
        m: &Model,
        vars: &Vars,
    ) -> bool {
        for &(b, need) in &kind.hosts {
            let (Some(&y), Some(nodes)) = (vars.on_host.get(&(k, b)), vars.nodes.get(&(k, b)))
            else {
                continue;
            };
            let values = &mut self.values;
            if values[y.index()] + 1.0 > m.upper(y) {
                continue;
            }
            let member = Member {
                usable: &hosts.usable[&(k, b)],
                hosts: hosts.hosts[b],
                need,
                strict: kind.strict,
                memory: mib(kind),
            };
            // A strict member's node must also have a count left.
            let count_left = |node: &Option<NodeId>| {
                nodes
                    .iter()
                    .any(|(n, x)| n == node && values[x.index()] + 1.0 <= m.upper(*x))
            };
            let Some(split) = member.fit(&self.left[b], &self.mem_left[b], &count_left) else {
                continue;
            };
            member.take(&mut self.left[b], &mut self.mem_left[b], &split);
            for (node, cores) in split {
                if let Some(&(_, var)) = nodes.iter().find(|(n, _)| *n == node) {
                    values[var.index()] += if kind.strict { 1.0 } else { f64::from(cores) };
                }
            }
            values[y.index()] += 1.0;
            return true;
        }
        false
    }
}

/// One VM to place in what is left of a host (or a bin of `hosts` hosts
/// alike): the one placement rule of the assignment's start and of the
/// packing of a bin's VMs onto its hosts.
pub struct Member<'a> {
    /// Its usable free cores per node on one host.
    pub usable: &'a Capacity,
    /// Hosts counted together (1 for one host).
    pub hosts: u32,
    /// Cores it needs.
    pub need: u32,
    /// Whole on one node.
    pub strict: bool,
    /// Its memory: page size in KiB, MiB.
    pub memory: Option<(u64, f64)>,
}

impl Member<'_> {
    fn room(&self, left: &Capacity, node: &Option<NodeId>) -> u32 {
        left.get(node)
            .copied()
            .unwrap_or(0)
            .min(self.hosts * self.usable.get(node).copied().unwrap_or(0))
    }

    /// Whether `share` MiB fit on `node` (a pool not listed is unbounded).
    fn memory_fits(&self, left: &MemoryCaps, node: &Option<NodeId>, share: f64) -> bool {
        self.memory
            .is_none_or(|(page, _)| left.get(&(*node, page)).is_none_or(|l| share <= *l + 1e-6))
    }

    /// MiB it takes per core.
    fn per_core(&self) -> f64 {
        self.memory
            .map_or(0.0, |(_, mib)| mib / f64::from(self.need.max(1)))
    }

    /// Where it fits first in `left` (cores) and `memory` (MiB): per node the
    /// cores it takes — all on the first node with room (and `node_ok`) when
    /// strict, else node after node — or `None`.
    pub fn fit(
        &self,
        left: &Capacity,
        memory: &MemoryCaps,
        node_ok: &dyn Fn(&Option<NodeId>) -> bool,
    ) -> Option<Vec<(Option<NodeId>, u32)>> {
        if self.strict {
            let whole = self.memory.map_or(0.0, |(_, mib)| mib);
            return self
                .usable
                .keys()
                .find(|n| {
                    self.room(left, n) >= self.need
                        && node_ok(n)
                        && self.memory_fits(memory, n, whole)
                })
                .map(|&n| vec![(n, self.need)]);
        }
        let mut rest = self.need;
        let mut split = Vec::new();
        for node in self.usable.keys() {
            let t = rest.min(self.room(left, node));
            if t > 0 {
                split.push((*node, t));
            }
            rest -= t;
        }
        let per_core = self.per_core();
        (rest == 0
            && split
                .iter()
                .all(|(n, t)| self.memory_fits(memory, n, per_core * f64::from(*t))))
        .then_some(split)
    }

    /// Takes `split` (from [`Member::fit`]) out of `left` and `memory`.
    pub fn take(
        &self,
        left: &mut Capacity,
        memory: &mut MemoryCaps,
        split: &[(Option<NodeId>, u32)],
    ) {
        let per_core = self.per_core();
        for &(node, cores) in split {
            *left.entry(node).or_insert(0) -= cores;
            if let Some((page, _)) = self.memory {
                if let Some(l) = memory.get_mut(&(node, page)) {
                    *l -= per_core * f64::from(cores);
                }
            }
        }
    }
}
