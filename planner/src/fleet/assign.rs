//! Which VM goes to which host: an integer program over hosts and their NUMA
//! nodes, with VMs that agree on everything the assignment sees (their
//! cores on each host, node policy, priority, vCPUs, allowed hosts, where
//! they run) counted as one *kind*. Its capacities are each node's free
//! cores usable by the kind (threads policy, NIC nodes), so it is the
//! single-host counting model (objectives 1–3) lifted to a fleet, plus
//! fewest moves of running VMs and fewest hosts touched. Memory counts as
//! in the single-host model: each node's free memory per page size (where
//! the source gives it) bounds the VMs there, a strict VM's memory on its
//! node, a spanning VM's split with its cores. L3 domains and the SMT
//! layout are left to each host's exact plan (`super`).

use super::index::{BinIx, KindIx, Per, VmIx};
use crate::ids::NodeId;
use crate::solve::classes;
use crate::solve::ilp::backend::{self, Model};
use crate::solve::ilp::expr::{Expr, Var};
use crate::solve::{NumaPolicy, PlanRequest, VmRequest};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// One kind of VM: VMs alike for the assignment, on the places `P` (hosts,
/// or the assignment's bins).
#[derive(Debug, Clone)]
pub struct Kind<P> {
    /// Members, in spec order.
    pub members: Vec<VmIx>,
    /// Per allowed place: which, and the cores a member needs there.
    pub hosts: Vec<(P, u32)>,
    /// Kept to one node (`numa = "strict"`).
    pub strict: bool,
    /// Priority (higher placed first).
    pub priority: i64,
    /// vCPUs of one member.
    pub vcpus: u32,
    /// The place its members run on now, when running.
    pub running_on: Option<P>,
    /// Running members may move.
    pub movable: bool,
    /// One member's memory: its page size in KiB and KiB in whole pages,
    /// when the spec (or its domain) gives it.
    pub memory: Option<(u64, u64)>,
}

/// Per node: the free cores (`free`, of its host) a VM may use there.
pub fn usable(free: &[classes::FreeCore], vm: &VmRequest) -> Capacity {
    let mut out = Capacity::new();
    for c in free {
        if classes::allowed(vm, c.node, c.threads()) {
            *out.entry(c.node).or_insert(0) += 1;
        }
    }
    out
}

/// The most common usable thread count of `free` (every host measured has
/// one).
pub fn threads(free: &[classes::FreeCore]) -> u32 {
    let mut by_threads: BTreeMap<u32, usize> = BTreeMap::new();
    for c in free {
        *by_threads.entry(c.threads()).or_default() += 1;
    }
    by_threads
        .iter()
        .max_by_key(|(t, n)| (**n, **t))
        .map_or(1, |(t, _)| *t)
}

/// Cores `vm` needs on a host whose free cores have `threads` threads.
pub fn cores_needed(threads: u32, vm: &VmRequest) -> u32 {
    classes::cores_needed(vm, threads)
}

/// One objective of the assignment, in the order they are optimised (each
/// held at its optimum while the next is). Each is a count as users count
/// it — VMs, vCPUs, cores, moves, hosts — and [`Tier::more_is_better`] says
/// which way it goes; that the solver minimises, and so takes the counts
/// users want most of negated, stays inside [`solve`] (issue 27).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Most running VMs that may not move kept on their host: before
    /// anything else (left out, they would go on running on their old pins).
    RunningKept,
    /// Most VMs placed at this priority level; levels highest first.
    Placed(i64),
    /// Most vCPUs placed.
    Vcpus,
    /// Fewest cores used.
    Cores,
    /// Fewest running (movable) VMs given another host.
    Moves,
    /// Fewest hosts with a VM of the spec.
    HostsTouched,
}

impl Tier {
    /// Whether the best value is the largest (VMs, vCPUs), not the smallest.
    pub fn more_is_better(self) -> bool {
        matches!(self, Tier::RunningKept | Tier::Placed(_) | Tier::Vcpus)
    }
}

/// Its name in `fleet.json` (`assignment`, `gap.objective`) and the text.
impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tier::RunningKept => f.write_str("running VMs kept"),
            Tier::Placed(level) => write!(f, "VMs placed at priority {level}"),
            Tier::Vcpus => f.write_str("vCPUs placed"),
            Tier::Cores => f.write_str("cores used"),
            Tier::Moves => f.write_str("moves"),
            Tier::HostsTouched => f.write_str("hosts touched"),
        }
    }
}

impl serde::Serialize for Tier {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What the assignment gives: per kind, per host, how many members.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    /// (kind, bin) → members placed there.
    pub counts: BTreeMap<(KindIx, BinIx), u32>,
    /// Every objective proven optimal.
    pub proven: bool,
    /// Each objective solved, in order, with its optimum (or, when
    /// stopped, the best value found): a count, never negative.
    pub tiers: Vec<(Tier, u64)>,
    /// The failure of the backend's process that stopped the objectives,
    /// if one did (the fleet plan says it in a warning).
    pub fault: Option<backend::SolveError>,
}

/// One host's capacity: free cores per node (all threads).
pub type Capacity = BTreeMap<Option<NodeId>, u32>;

/// The host-side inputs, per *bin* — one host, or a group of hosts alike
/// for every kind (counted together: a relaxation of each host's packing,
/// which the caller then packs host by host): its free cores per node (of
/// one host), how many hosts it holds, and per kind the usable cores per
/// node of one host.
pub struct Hosts<'a> {
    /// Per bin: free cores per node of one of its hosts.
    pub capacity: &'a Per<BinIx, Capacity>,
    /// Per bin: its hosts.
    pub hosts: &'a Per<BinIx, u32>,
    /// (kind, bin) → usable free cores per node for a member on one host.
    pub usable: &'a BTreeMap<(KindIx, BinIx), Capacity>,
    /// Per bin: the memory one of its hosts offers per (node, page size),
    /// in MiB, where known (`solve::memory::caps`, finite values only).
    pub memory: &'a Per<BinIx, MemoryCaps>,
}

/// Memory per (node, page size in KiB), in MiB.
pub type MemoryCaps = BTreeMap<(Option<NodeId>, u64), f64>;

/// A kind's memory in the model's unit, as [`Member::memory`] takes it:
/// (page size in KiB, MiB).
pub fn mib<P>(kind: &Kind<P>) -> Option<(u64, f64)> {
    kind.memory.map(|(page, kib)| (page, kib as f64 / 1024.0))
}

/// Solves the assignment lexicographically within `limit`, from a feasible
/// start (first fit) kept when the solver finds nothing better in time.
pub fn solve(kinds: &Per<KindIx, Kind<BinIx>>, hosts: &Hosts, limit: Duration) -> Assignment {
    let deadline = Instant::now() + limit;
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
        tiers.push((Tier::Moves, std::mem::take(&mut self.moves)));
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

/// What the objectives reached.
struct Solved {
    values: Option<Vec<f64>>,
    proven: bool,
    fault: Option<backend::SolveError>,
    tiers: Vec<(Tier, u64)>,
}

/// Optimises `tiers` one after the other within `deadline`, each held at
/// its optimum while the next is, from `start`; stops at the first not
/// proven.
fn lexicographic(
    m: &mut Model,
    tiers: &[(Tier, Expr)],
    start: Option<Vec<f64>>,
    deadline: Instant,
) -> Solved {
    let mut solved = Solved {
        values: start.filter(|s| m.feasible(s)),
        proven: true,
        fault: None,
        tiers: Vec::new(),
    };
    for (tier, count) in tiers {
        // The solver minimises: what users want most of, it takes negated.
        let terms = if tier.more_is_better() {
            -count.clone()
        } else {
            count.clone()
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            solved.proven = false;
            break;
        }
        let tier_started = Instant::now();
        let outcome = backend::run(m, &terms, left, solved.values.as_deref());
        tracing::debug!(
            target: "pinplan::ilp",
            "fleet: {tier}: {:.1} ms, {} variables, {} constraints, {}",
            tier_started.elapsed().as_secs_f64() * 1e3,
            m.vars(),
            m.cons(),
            match &outcome {
                Ok((_, true)) => "optimal",
                Ok((_, false)) => "stopped",
                Err(_) => "failed",
            }
        );
        match outcome {
            Ok((v, ok)) => {
                let better = solved
                    .values
                    .as_ref()
                    .is_none_or(|old| terms.value(&v) <= terms.value(old) + 1e-6);
                if better && m.feasible(&v) {
                    solved.values = Some(v);
                }
                solved.proven &= ok;
            }
            Err(e) => {
                e.keep_fault(&mut solved.fault);
                solved.proven = false;
            }
        }
        let Some(v) = &solved.values else {
            solved.proven = false;
            break;
        };
        let best = terms.value(v).round();
        solved
            .tiers
            .push((*tier, count.value(v).round().max(0.0) as u64));
        if !solved.proven {
            break;
        }
        m.le(terms, best);
    }
    solved
}

/// (kind, bin) → per node its count (strict kinds) or cores (the others).
type NodeVars = BTreeMap<(KindIx, BinIx), Vec<(Option<NodeId>, Var)>>;

/// A bin's hosts-touched count, the cores it gets, one host's cores, and
/// each kind's count there with one host's worth of it.
type Touched = (Var, Expr, u32, Vec<(Var, f64)>);

/// The variables a start sets.
struct Vars<'a> {
    on_host: &'a BTreeMap<(KindIx, BinIx), Var>,
    nodes: &'a NodeVars,
    /// Per bin touched: its count, the cores it gets, one host's cores, and
    /// each kind's count there with one host's worth of it.
    touched: &'a [Touched],
}

/// A feasible start: kinds in priority order (then spec order), each member
/// on the first of its hosts with room — a node with its cores free for a
/// strict kind, its cores anywhere on the host for the others.
fn first_fit(
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

/// Free cores per node of `request`'s host (usable by anyone).
pub fn capacity(request: &PlanRequest) -> Capacity {
    let mut out = Capacity::new();
    for c in classes::free_cores(request) {
        *out.entry(c.node).or_insert(0) += 1;
    }
    out
}

/// Whether `vm` is kept to one node for the assignment.
pub fn strict(vm: &VmRequest) -> bool {
    vm.numa == NumaPolicy::Strict
}
