//! The assignment as an integer program: per kind and bin a count, per
//! node its cores (or members), the capacities, the hosts touched, and the
//! objectives solved one after the other.

use super::start::{first_fit, Vars};
use super::{mib, Assignment, Capacity, Hosts, Kind, NodeVars, Tier, Touched};
use crate::deadline::Deadline;
use crate::fleet::index::{BinIx, KindIx, Per};
use crate::ids::NodeId;
use crate::solve::ilp::backend::{self, Model};
use crate::solve::ilp::expr::{Expr, Var};
use crate::solve::ilp::lexicographic::{lexicographic as one_loop, Rules};
use std::collections::BTreeMap;
use std::time::Duration;

/// Solves the assignment lexicographically within `limit`, from a feasible
/// start (first fit) kept when the solver finds nothing better in time.
pub fn solve(kinds: &Per<KindIx, Kind<BinIx>>, hosts: &Hosts, limit: Duration) -> Assignment {
    let deadline = Deadline::after(limit);
    let mut program = Program::default();
    for (k, kind) in kinds.enumerate() {
        program.add_kind(k, kind, hosts);
    }
    program.add_capacities(hosts);
    let touched = program.add_touched(hosts);
    let tiers = program.tiers(touched);
    let start = first_fit(
        kinds,
        hosts,
        &program.m,
        &Vars {
            on_host: &program.on_host,
            nodes: &program.node_vars,
            touched: &program.touch_vars,
        },
    );
    let solved = lexicographic(&mut program.m, &tiers, start, deadline);
    let mut counts = BTreeMap::new();
    if let Some(v) = &solved.values {
        for (&(k, b), &y) in &program.on_host {
            let n = y.count(v);
            if n > 0 {
                counts.insert((k, b), n);
            }
        }
    }
    Assignment {
        counts,
        proven: solved.proven,
        tiers: solved.tiers,
        fault: solved.fault,
    }
}

/// The assignment's integer program as it is built, with the counts each
/// objective is about (VMs placed per priority, running VMs kept, …) as
/// users count them.
#[derive(Default)]
struct Program {
    m: Model,
    /// (kind, bin) → its count there.
    on_host: BTreeMap<(KindIx, BinIx), Var>,
    node_vars: NodeVars,
    /// (bin, node) → the cores its VMs take there.
    used: BTreeMap<(BinIx, Option<NodeId>), Expr>,
    /// (bin, node, page size) → MiB its VMs take there.
    memory: BTreeMap<(BinIx, Option<NodeId>, u64), Expr>,
    /// Per bin: the cores its VMs take (for the hosts it touches).
    bin_cores: BTreeMap<BinIx, Expr>,
    /// Per bin: each kind's count there and one host's worth of it.
    per_touched: BTreeMap<BinIx, Vec<(Var, f64)>>,
    touch_vars: Vec<Touched>,
    placed: BTreeMap<i64, Expr>,
    kept: Expr,
    vcpus: Expr,
    cores: Expr,
    moves: Expr,
}

impl Program {
    /// Kind `k`'s count per bin it may use, its cores (or members) per node
    /// there, and its share of every objective.
    fn add_kind(&mut self, k: KindIx, kind: &Kind<BinIx>, hosts: &Hosts) {
        let count = kind.members.len() as f64;
        let mut all = Expr::default();
        for &(b, need) in &kind.hosts {
            let Some(nodes) = hosts.usable.get(&(k, b)) else {
                continue;
            };
            let fit = Fit {
                kind,
                hosts,
                b,
                need,
            };
            let n = hosts.hosts[b];
            let most_here: u32 = n * if kind.strict {
                nodes
                    .iter()
                    .map(|(node, &free)| fit.on(node, free))
                    .sum::<u32>()
            } else {
                nodes.values().sum::<u32>() / need.max(1)
            };
            if most_here == 0 {
                continue;
            }
            let y = self.m.int(count.min(f64::from(most_here)));
            self.on_host.insert((k, b), y);
            // At most one host's worth per host touched (by cores and, for a
            // strict kind, memory): a cut the bin's summed cores miss.
            self.per_touched
                .entry(b)
                .or_default()
                .push((y, f64::from(most_here / n.max(1))));
            all += y;
            if kind.strict {
                self.add_whole_members(k, &fit, nodes, y, count);
            } else {
                self.add_split_cores(k, &fit, nodes, y);
            }
            self.add_objectives(kind, b, need, y);
        }
        if !all.is_empty() {
            self.m.le(all, count);
        }
    }

    /// A strict kind's members per node of bin `fit.b`, each whole on its node.
    fn add_whole_members(
        &mut self,
        k: KindIx,
        fit: &Fit<'_>,
        nodes: &Capacity,
        y: Var,
        count: f64,
    ) {
        let n = fit.hosts.hosts[fit.b];
        let mut per_node = Expr::default();
        for (&node, &free) in nodes {
            let most = fit.on(&node, free);
            if most == 0 {
                continue;
            }
            let x = self.m.int(count.min(f64::from(n * most)));
            per_node += x;
            self.node_vars
                .entry((k, fit.b))
                .or_default()
                .push((node, x));
            *self.used.entry((fit.b, node)).or_default() += f64::from(fit.need) * x;
            if let Some((page, mib)) = mib(fit.kind) {
                *self.memory.entry((fit.b, node, page)).or_default() += mib * x;
            }
        }
        self.m.eq(per_node, y);
    }

    /// A spanning kind's cores per node of bin `fit.b`, any split, its memory
    /// following its cores node by node.
    fn add_split_cores(&mut self, k: KindIx, fit: &Fit<'_>, nodes: &Capacity, y: Var) {
        let n = fit.hosts.hosts[fit.b];
        let mut split = Expr::default();
        for (&node, &free) in nodes {
            let z = self.m.int(f64::from(n * free));
            split += z;
            self.node_vars
                .entry((k, fit.b))
                .or_default()
                .push((node, z));
            *self.used.entry((fit.b, node)).or_default() += z;
            if let Some((page, mib)) = mib(fit.kind) {
                *self.memory.entry((fit.b, node, page)).or_default() +=
                    (mib / f64::from(fit.need.max(1))) * z;
            }
        }
        self.m.eq(split, f64::from(fit.need) * y);
    }

    /// Count `y` of `kind` on bin `b` in each objective's count.
    fn add_objectives(&mut self, kind: &Kind<BinIx>, b: BinIx, need: u32, y: Var) {
        *self.bin_cores.entry(b).or_default() += f64::from(need) * y;
        *self.placed.entry(kind.priority).or_default() += y;
        self.vcpus += f64::from(kind.vcpus) * y;
        self.cores += f64::from(need) * y;
        if kind.running_on.is_some_and(|r| r != b) {
            self.moves += y;
        }
        if kind.running_on == Some(b) && !kind.movable {
            self.kept += y;
        }
    }

    /// Each bin's cores and memory per node bound the VMs there.
    fn add_capacities(&mut self, hosts: &Hosts) {
        for ((b, node), expr) in std::mem::take(&mut self.used) {
            let cap = hosts.capacity[b].get(&node).copied().unwrap_or(0);
            self.m.le(expr, f64::from(cap * hosts.hosts[b]));
        }
        for ((b, node, page), expr) in std::mem::take(&mut self.memory) {
            if let Some(&cap) = hosts.memory.get(b).and_then(|c| c.get(&(node, page))) {
                self.m.le(expr, cap * f64::from(hosts.hosts[b]));
            }
        }
    }

    /// The hosts touched in each bin: enough hosts for the cores it gets
    /// (one host: 0 or 1, linked to any VM there). Their sum.
    fn add_touched(&mut self, hosts: &Hosts) -> Expr {
        let mut touched = Expr::default();
        for (b, cores_here) in std::mem::take(&mut self.bin_cores) {
            let t = self.m.int(f64::from(hosts.hosts[b]));
            let per_host: u32 = hosts.capacity[b].values().sum::<u32>().max(1);
            self.m.le(cores_here.clone(), f64::from(per_host) * t);
            for &(y, most) in self.per_touched.get(&b).into_iter().flatten() {
                let mut e = Expr::default();
                e += y;
                e += -most * t;
                self.m.le(e, 0.0);
            }
            touched += t;
            let kinds_here = self.per_touched.get(&b).cloned().unwrap_or_default();
            self.touch_vars.push((t, cores_here, per_host, kinds_here));
        }
        touched
    }

    /// The objectives in their order, those without terms left out.
    fn tiers(&mut self, touched: Expr) -> Vec<(Tier, Expr)> {
        let mut tiers: Vec<(Tier, Expr)> =
            vec![(Tier::RunningKept, std::mem::take(&mut self.kept))];
        let placed = std::mem::take(&mut self.placed);
        tiers.extend(placed.into_iter().rev().map(|(p, e)| (Tier::Placed(p), e)));
        tiers.push((Tier::Vcpus, std::mem::take(&mut self.vcpus)));
        tiers.push((Tier::Cores, std::mem::take(&mut self.cores)));
        tiers.push((Tier::HostMoves, std::mem::take(&mut self.moves)));
        tiers.push((Tier::HostsTouched, touched));
        tiers.retain(|(_, e)| !e.is_empty());
        tiers
    }
}

/// How many members of a kind one node of a bin's host holds: by its cores,
/// and for a strict kind by its memory too (whole members per host, which a
/// bin's summed memory alone would not say).
struct Fit<'a> {
    kind: &'a Kind<BinIx>,
    hosts: &'a Hosts<'a>,
    b: BinIx,
    need: u32,
}

impl Fit<'_> {
    /// Members `node`, with `free` usable cores, holds.
    fn on(&self, node: &Option<NodeId>, free: u32) -> u32 {
        let by_cores = free / self.need.max(1);
        let by_memory = mib(self.kind)
            .and_then(|(page, mib)| {
                let cap = self.hosts.memory.get(self.b)?.get(&(*node, page))?;
                Some(
                    (cap / mib.max(1e-9) + 1e-9)
                        .floor()
                        .clamp(0.0, f64::from(u32::MAX)) as u32,
                )
            })
            .unwrap_or(u32::MAX);
        by_cores.min(by_memory)
    }
}

/// The assignment's objectives through the one loop: no bounds, the whole
/// time, each optimum held as a sum; the backend's answers are checked
/// against the program, and one that breaks a row is never taken (the
/// start stays, or the objectives stop unproven).
struct AssignRules;

impl Rules for AssignRules {
    fn checks_answers(&self) -> bool {
        true
    }
}

/// Optimises `tiers` (counts as users count them) one after the other
/// within `deadline`, each held at its optimum while the next is, from
/// `start`; stops at the first not proven. The loop minimises: the counts
/// users want most of go in negated, and come out as counts again.
fn lexicographic(
    m: &mut Model,
    tiers: &[(Tier, Expr)],
    start: Option<Vec<f64>>,
    deadline: Deadline,
) -> Solved {
    let minimised: Vec<(Tier, Expr)> = tiers
        .iter()
        .map(|(tier, count)| {
            let terms = if tier.more_is_better() {
                -count.clone()
            } else {
                count.clone()
            };
            (*tier, terms)
        })
        .collect();
    let candidates: Vec<Vec<f64>> = start.into_iter().collect();
    let solved = one_loop(
        m,
        &minimised,
        &candidates,
        deadline,
        &mut AssignRules,
        "fleet",
    );
    let values = solved.values;
    let counts = match &values {
        Some(v) => tiers
            .iter()
            .zip(&solved.runs)
            .map(|((tier, count), _)| (*tier, count.value(v).round().max(0.0) as u64))
            .collect(),
        None => Vec::new(),
    };
    Solved {
        values,
        proven: solved.proven,
        fault: solved.fault,
        tiers: counts,
    }
}

/// What the objectives reached.
struct Solved {
    values: Option<Vec<f64>>,
    proven: bool,
    fault: Option<backend::SolveError>,
    tiers: Vec<(Tier, u64)>,
}
