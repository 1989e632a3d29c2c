//! Test oracle: the per-core binary model, kept only to check the exact models
//! on small hosts (docs/plan.md, "The model").
//!
//! One binary `a[v][k]` per (VM, free core): core k is VM v's. It shares no
//! code with the exact models beyond the list of free cores and the rule of
//! how a VM's memory splits over nodes ([`memory::split`], a rule, not
//! rows): it is written in good_lp's own expressions and
//! solved by microlp; the placement rules ([`classes::allowed`],
//! [`classes::fits_exactly`]) are written out again per core, and the
//! objective tiers are optimised in the order of docs/plan.md ("Objective"),
//! each optimum fixed before the next. Its placements are compared with the
//! ILP's through [`crate::solve::objective`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::ids::NodeId;
use crate::solve::classes::{self, Domain, FreeCore};
use crate::solve::memory::{self, Split};
use crate::solve::{
    EmulatorPolicy, NicAffinity, NumaPolicy, Order, Placement, PlanRequest, ThreadPolicy, VmRequest,
};
use good_lp::solvers::microlp::MicroLpSolution;
use good_lp::{
    constraint, variable, Constraint, Expression, IntoAffineExpression, ProblemVariables, Solution,
    SolutionStatus, SolverModel, Variable, WithTimeLimit,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Whether `vm` may have `core` at all (the per-core form of `classes::allowed`).
fn may_use(vm: &VmRequest, core: &FreeCore) -> bool {
    if vm.threads == ThreadPolicy::Require && core.pus.len() < 2 {
        return false;
    }
    if vm.numa == NumaPolicy::Strict && core.node.is_none() {
        return false;
    }
    match vm.nic_affinity {
        NicAffinity::Required if !vm.nic_nodes.is_empty() => {
            core.node.is_some_and(|n| vm.nic_nodes.contains(&n))
        }
        _ => true,
    }
}

/// The lexicographic optimum of the per-core model, as a [`Placement`].
/// Panics if it takes more than a minute.
pub(crate) fn place(request: &PlanRequest) -> Placement {
    place_within(request, Duration::from_secs(60)).expect("the oracle finishes within 60 s")
}

/// The lexicographic optimum of the per-core model, or `None` when it was not
/// proven within `limit`.
pub(crate) fn place_within(request: &PlanRequest, limit: Duration) -> Option<Placement> {
    let deadline = Instant::now() + limit;
    let mut o = Oracle::new(request);
    for vm in &request.vms {
        o.vm(vm);
    }
    o.one_tenant_per_core();
    o.memory(request);
    o.break_symmetry();
    let partial = o.partly_used(|c| c.domain());
    // Only compaction counts partly used nodes.
    let partial_nodes = if request.order == Order::Compact {
        o.partly_used(|c| c.node)
    } else {
        Expression::default()
    };
    if let Some(most) = request.max_moves {
        let moves = o.moves.clone();
        o.cons.push(constraint!(moves <= f64::from(most)));
    }
    let tiers = o.tiers(request, partial, partial_nodes);
    let solution = o.minimise(&tiers, deadline)?;
    let mut cores = BTreeMap::new();
    for (v, xs) in o.a.iter().enumerate() {
        if solution.as_ref().is_none_or(|s| s.value(o.placed[v]) < 0.5) {
            continue;
        }
        let mut mine: Vec<_> = xs
            .iter()
            .filter(|&&(_, x)| solution.as_ref().is_some_and(|s| s.value(x) > 0.5))
            .map(|&(k, _)| o.free[k].core)
            .collect();
        mine.sort();
        cores.insert(v, mine);
    }
    Some(Placement {
        cores,
        proven: true,
        fault: None,
    })
}

/// The per-core model while it is written. All variables are binary.
struct Oracle {
    free: Vec<FreeCore>,
    /// Usable threads of each free core.
    threads: Vec<u32>,
    vars: ProblemVariables,
    cons: Vec<Constraint>,
    /// `a[v]`: (index into `free`, variable).
    a: Vec<Vec<(usize, Variable)>>,
    /// `y[v]`: node → 1 when VM `v` has cores there (VMs kept to few nodes).
    y: Vec<BTreeMap<Option<NodeId>, Variable>>,
    placed: Vec<Variable>,
    /// Per free core: the VMs' variables of it.
    users: Vec<Vec<Variable>>,
    cores_used: Expression,
    extra_nodes: Expression,
    nic_remote: Expression,
    l3: Expression,
    /// Minus the running VMs placed.
    running: Expression,
    /// vCPUs of running VMs that cannot keep their CPU.
    moves: Expression,
    /// Per free core: `(VM, its vCPUs' CPUs now on the core)`.
    homes: Vec<Vec<(usize, u32)>>,
}

/// Whether `e` has no terms.
fn is_empty(e: &Expression) -> bool {
    e.linear_coefficients().next().is_none()
}

impl Oracle {
    fn new(request: &PlanRequest) -> Oracle {
        let free = classes::free_cores(request);
        let threads = free.iter().map(|c| c.pus.len() as u32).collect();
        // Written out again per core: which CPUs of it each VM runs on now.
        let homes = free
            .iter()
            .map(|c| {
                request
                    .vms
                    .iter()
                    .enumerate()
                    .filter_map(|(v, vm)| {
                        let n = vm
                            .now
                            .iter()
                            .filter(|&&(_, cpu)| c.pus.contains(cpu))
                            .count();
                        (n > 0).then_some((v, n as u32))
                    })
                    .collect()
            })
            .collect();
        Oracle {
            running: Expression::default(),
            moves: Expression::default(),
            homes,
            users: vec![Vec::new(); free.len()],
            free,
            threads,
            vars: ProblemVariables::new(),
            cons: Vec::new(),
            a: Vec::new(),
            y: Vec::new(),
            placed: Vec::new(),
            cores_used: Expression::default(),
            extra_nodes: Expression::default(),
            nic_remote: Expression::default(),
            l3: Expression::default(),
        }
    }

    fn var(&mut self) -> Variable {
        self.vars.add(variable().binary())
    }

    /// VM `vm`'s variables and rules.
    fn vm(&mut self, vm: &VmRequest) {
        let p = self.var();
        self.placed.push(p);
        let usable: Vec<usize> = (0..self.free.len())
            .filter(|&k| may_use(vm, &self.free[k]))
            .collect();
        let xs: Vec<(usize, Variable)> = usable.into_iter().map(|k| (k, self.var())).collect();
        for &(k, x) in &xs {
            self.cons.push(constraint!(x <= p));
            self.users[k].push(x);
            self.cores_used += x;
        }
        let v = self.placed.len() - 1;
        if vm.running {
            self.running -= p;
        }
        if vm.running {
            self.moves += f64::from(vm.vcpus) * p;
            for &(k, x) in &xs {
                let home = self.homes[k]
                    .iter()
                    .find(|&&(w, _)| w == v)
                    .map_or(0, |&(_, n)| n);
                let stay = match vm.threads {
                    ThreadPolicy::Isolate => home.min(1),
                    ThreadPolicy::Require | ThreadPolicy::Prefer => home.min(self.threads[k]),
                };
                self.moves -= f64::from(stay) * x;
            }
        }
        match vm.threads {
            ThreadPolicy::Isolate => self.isolate(vm, p, &xs),
            ThreadPolicy::Require | ThreadPolicy::Prefer => self.fill_threads(vm, p, &xs),
        }
        let y = if vm.numa == NumaPolicy::Spread {
            BTreeMap::new()
        } else {
            self.numa(vm, p, &xs)
        };
        self.y.push(y);
        if vm.nic_affinity == NicAffinity::Preferred && !vm.nic_nodes.is_empty() {
            for &(k, x) in &xs {
                if !self.free[k].node.is_some_and(|n| vm.nic_nodes.contains(&n)) {
                    self.nic_remote += x;
                }
            }
        }
        // Too few vCPUs for one on each node it must touch: never placed.
        if classes::too_few_vcpus_for_cells(vm) {
            self.cons.push(constraint!(p <= 0));
        }
        for &node in &vm.cell_nodes {
            let there: Expression = xs
                .iter()
                .filter(|&&(k, _)| self.free[k].node == Some(node))
                .map(|&(_, x)| x)
                .sum();
            self.cons.push(constraint!(there >= p));
        }
        let domains: BTreeSet<Domain> = xs.iter().map(|&(k, _)| self.free[k].domain()).collect();
        let u: BTreeMap<Domain, Variable> = domains.iter().map(|&d| (d, self.var())).collect();
        for &(k, x) in &xs {
            let ud = u[&self.free[k].domain()];
            self.cons.push(constraint!(x <= ud));
        }
        self.l3 += u.values().copied().sum::<Expression>();
        self.a.push(xs);
    }

    /// One vCPU per core; emulator=isolate takes one more core exactly when
    /// none of the VM's cores has an idle sibling.
    fn isolate(&mut self, vm: &VmRequest, p: Variable, xs: &[(usize, Variable)]) {
        let mut count: Expression = xs.iter().map(|&(_, x)| x).sum::<Expression>();
        count -= f64::from(vm.vcpus) * p;
        if vm.emulator == EmulatorPolicy::Isolate {
            let e = self.var();
            self.cons.push(constraint!(e <= p));
            let mut lower = e - p;
            for &(k, x) in xs {
                if self.threads[k] >= 2 {
                    self.cons.push(constraint!(e + x <= 1));
                    lower += x;
                }
            }
            self.cons.push(constraint!(lower >= 0));
            count -= e;
        }
        self.cons.push(constraint!(count == 0));
    }

    /// need ≤ total < need + (most threads of a chosen core); or, for a VM
    /// that must touch several nodes, exactly one core per such node
    /// (`one_each`), whatever they hold.
    fn fill_threads(&mut self, vm: &VmRequest, p: Variable, xs: &[(usize, Variable)]) {
        let need = f64::from(vm.pus_needed());
        let cells = f64::from(classes::cells(vm));
        let total: Expression = xs
            .iter()
            .map(|&(k, x)| f64::from(self.threads[k]) * x)
            .sum();
        self.cons.push(constraint!(total.clone() >= need * p));
        let levels: BTreeSet<u32> = xs.iter().map(|&(k, _)| self.threads[k]).collect();
        let mut upper = total - (need - 1.0) * p;
        let mut one = Expression::default() - p;
        for t in levels {
            // g: "a chosen core has t threads" (picks the bound).
            let g = self.var();
            let with_t: Expression = xs
                .iter()
                .filter(|&&(k, _)| self.threads[k] == t)
                .map(|&(_, x)| x)
                .sum();
            self.cons.push(constraint!(g <= with_t));
            one += g;
            upper -= f64::from(t) * g;
        }
        self.cons.push(constraint!(one == 0));
        if cells == 0.0 {
            self.cons.push(constraint!(upper <= 0));
            return;
        }
        // one_each: the bound above is lifted (by more than any total), and
        // the cores are as many as the nodes.
        let one_each = self.var();
        let most: f64 = xs.iter().map(|&(k, _)| f64::from(self.threads[k])).sum();
        let count: Expression = xs.iter().map(|&(_, x)| x).sum();
        let cores = xs.len() as f64;
        self.cons.push(constraint!(one_each <= p));
        self.cons.push(constraint!(upper <= most * one_each));
        self.cons
            .push(constraint!(count <= cells * p + cores * (1.0 - one_each)));
    }

    /// Strict: one node; preferred: nodes beyond the first counted.
    fn numa(
        &mut self,
        vm: &VmRequest,
        p: Variable,
        xs: &[(usize, Variable)],
    ) -> BTreeMap<Option<NodeId>, Variable> {
        let nodes: BTreeSet<Option<NodeId>> = xs.iter().map(|&(k, _)| self.free[k].node).collect();
        let y: BTreeMap<Option<NodeId>, Variable> =
            nodes.iter().map(|&n| (n, self.var())).collect();
        for &(k, x) in xs {
            let yk = y[&self.free[k].node];
            self.cons.push(constraint!(x <= yk));
        }
        let sum: Expression = y.values().copied().sum();
        if vm.numa == NumaPolicy::Strict {
            self.cons.push(constraint!(sum <= 1));
        } else {
            let extra = sum - p;
            self.cons.push(constraint!(extra.clone() >= 0));
            self.extra_nodes += extra;
        }
        y
    }

    /// Memory per node and page size, written out again per core: a strict
    /// VM puts all of it on its node; another VM of `c` cores on every core
    /// it may take puts `bytes / c` on the node of each of its cores; a VM
    /// whose core count depends on its cores (mixed thread counts) is not
    /// counted ([`memory::split`]), nor is any where running VMs may move
    /// ([`memory::countable`]). Cores of no known node take no VM's memory.
    fn memory(&mut self, request: &PlanRequest) {
        if !memory::countable(request) {
            return;
        }
        let mut per: BTreeMap<(Option<NodeId>, u64), Expression> = BTreeMap::new();
        for ((vm, xs), y) in request.vms.iter().zip(&self.a).zip(&self.y) {
            let Some(m) = vm.memory else { continue };
            let page = m.page_kib * 1024;
            let bytes = (m.bytes.div_ceil(page) * page) as f64 / 1_048_576.0;
            match memory::split(vm, xs.iter().map(|&(k, _)| self.threads[k])) {
                Split::Whole => {
                    for (&node, &yk) in y {
                        *per.entry((node, m.page_kib)).or_default() += bytes * yk;
                    }
                }
                Split::PerCore(c) => {
                    for &(k, x) in xs {
                        *per.entry((self.free[k].node, m.page_kib)).or_default() +=
                            bytes / f64::from(c) * x;
                    }
                }
                Split::Uncounted => {}
            }
        }
        for ((node, page), used) in per {
            let cap = request
                .host
                .numa_nodes
                .iter()
                .find(|n| Some(n.id) == node)
                .map_or(0.0, |n| {
                    if page <= crate::memory::NORMAL_PAGE_KIB {
                        n.memory_free_bytes
                            .or(n.memory_bytes)
                            .map_or(f64::INFINITY, |b| b as f64 / 1_048_576.0)
                    } else {
                        n.hugepages
                            .iter()
                            .find(|p| p.size_kib == page)
                            .map_or(f64::INFINITY, |p| {
                                (p.free.unwrap_or(p.total) * page) as f64 / 1024.0
                            })
                    }
                });
            if cap.is_finite() {
                self.cons.push(constraint!(used <= cap));
            }
        }
    }

    /// Every free core is one VM's at most.
    fn one_tenant_per_core(&mut self) {
        for users in &self.users {
            if !users.is_empty() {
                let sum: Expression = users.iter().copied().sum();
                self.cons.push(constraint!(sum <= 1));
            }
        }
    }

    /// Symmetry breaking, which microlp's branch and bound needs to finish in
    /// seconds: cores with the same node, domain and usable threads are
    /// interchangeable for every rule above, so among them, in core order, the
    /// owner's VM index never decreases and unused cores come last. (Any
    /// solution becomes one of these by permuting such cores.)
    fn break_symmetry(&mut self) {
        // Cores where running VMs run now differ for "vCPUs moved".
        let mut alike: BTreeMap<classes::HomeKey, Vec<usize>> = BTreeMap::new();
        for (k, c) in self.free.iter().enumerate() {
            alike
                .entry((c.node, c.domain(), self.threads[k], self.homes[k].clone()))
                .or_default()
                .push(k);
        }
        let var_of =
            |v: usize, k: usize| self.a[v].iter().find(|&&(kk, _)| kk == k).map(|&(_, x)| x);
        let mut cons = Vec::new();
        for group in alike.values() {
            for pair in group.windows(2) {
                let (first, second) = (pair[0], pair[1]);
                let mut prefix = Expression::default();
                for v in 0..self.a.len() {
                    if let (Some(x1), Some(x2)) = (var_of(v, first), var_of(v, second)) {
                        prefix += x2 - x1;
                        cons.push(constraint!(prefix.clone() <= 0));
                    }
                }
            }
        }
        self.cons.extend(cons);
    }

    /// Partially used groups of free cores (L3 domains or NUMA nodes, by
    /// `key`): touched (some core a VM's) but not full (all).
    fn partly_used<K: Ord>(&mut self, key: impl Fn(&FreeCore) -> K) -> Expression {
        let mut by_domain: BTreeMap<K, Vec<usize>> = BTreeMap::new();
        for (k, c) in self.free.iter().enumerate() {
            by_domain.entry(key(c)).or_default().push(k);
        }
        let mut partial = Expression::default();
        for cores in by_domain.values() {
            let touched = self.var();
            let full = self.var();
            let mut used = Expression::default();
            for &k in cores {
                for &x in &self.users[k] {
                    self.cons.push(constraint!(x <= touched));
                    used += x;
                }
            }
            self.cons
                .push(constraint!(cores.len() as f64 * full <= used));
            partial += touched - full;
        }
        partial
    }

    /// The objectives in their order (a plan's, or compaction's), without
    /// the empty ones.
    fn tiers(
        &mut self,
        request: &PlanRequest,
        partial: Expression,
        partial_nodes: Expression,
    ) -> Vec<Expression> {
        let mut levels: Vec<i64> = request.vms.iter().map(|v| v.priority).collect();
        levels.sort_by(|a, b| b.cmp(a));
        levels.dedup();
        let mut tiers: Vec<Expression> = levels
            .into_iter()
            .map(|level| {
                let placed = request.vms.iter().zip(&self.placed);
                placed
                    .filter(|(vm, _)| vm.priority == level)
                    .map(|(_, &p)| -1.0 * p)
                    .sum()
            })
            .collect();
        tiers.insert(0, std::mem::take(&mut self.running));
        let vcpus = request.vms.iter().zip(&self.placed);
        tiers.push(vcpus.map(|(vm, &p)| -f64::from(vm.vcpus) * p).sum());
        let moves = std::mem::take(&mut self.moves);
        let cores = std::mem::take(&mut self.cores_used);
        let quality = [
            std::mem::take(&mut self.extra_nodes),
            std::mem::take(&mut self.nic_remote),
            std::mem::take(&mut self.l3),
        ];
        if request.order == Order::Compact {
            tiers.extend([cores, partial, partial_nodes, moves]);
            tiers.extend(quality);
        } else {
            tiers.extend([moves, cores]);
            tiers.extend(quality);
            tiers.push(partial);
        }
        tiers.retain(|t| !is_empty(t));
        tiers
    }

    /// Minimises the tiers one after the other, each optimum held; the last
    /// solution (`Some(None)` when there is nothing to minimise), or `None`
    /// when optimality was not proven in time, including when microlp stops
    /// at the limit with an error instead of a solution (the proptests saw
    /// that about once in eight runs of 64 cases: it used to panic here).
    fn minimise(
        &mut self,
        tiers: &[Expression],
        deadline: Instant,
    ) -> Option<Option<MicroLpSolution>> {
        let mut last = None;
        for tier in tiers {
            let limit = deadline.saturating_duration_since(Instant::now());
            let mut model = self
                .vars
                .clone()
                .minimise(tier.clone())
                .using(good_lp::microlp)
                .with_time_limit(limit.as_secs_f64().max(0.001));
            for c in &self.cons {
                model.add_constraint(c.clone());
            }
            // The model is always feasible (placing nothing is allowed): an
            // error is microlp giving up at the time limit, an unproven case.
            let solution = model.solve().ok()?;
            if !matches!(solution.status(), SolutionStatus::Optimal) {
                return None;
            }
            let best = tier.eval_with(&solution).round();
            self.cons.push(constraint!(tier.clone() <= best));
            last = Some(solution);
        }
        Some(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpuset::CpuSet;
    use crate::ids::{CoreId, CpuId};
    use crate::solve::{
        objective, EmulatorPolicy, FixedTenant, NicAffinity, NumaPolicy, PlanRequest, ThreadPolicy,
        VmRequest,
    };
    use crate::topology::{load, Source};
    use std::time::Duration;

    fn host(desc: &str) -> crate::topology::HostTopology {
        load(&Source::Synthetic(desc.to_owned())).expect("synthetic topology")
    }

    fn cpus(list: &str) -> CpuSet {
        list.parse().expect("cpulist")
    }

    fn vm(name: &str, vcpus: u32, threads: ThreadPolicy) -> VmRequest {
        VmRequest {
            threads,
            ..VmRequest::new(name, vcpus)
        }
    }

    fn request(desc: &str, reserved: &str, vms: Vec<VmRequest>) -> PlanRequest {
        PlanRequest {
            host: host(desc),
            reserved: if reserved.is_empty() {
                CpuSet::new()
            } else {
                cpus(reserved)
            },
            fixed: Vec::new(),
            vms,
            order: Default::default(),
            max_moves: None,
        }
    }

    fn core_ids(ids: &[u32]) -> Vec<CoreId> {
        ids.iter().map(|&i| CoreId(i)).collect()
    }

    /// The oracle's placement, checked against `fits_exactly`, and the ILP's
    /// objective, which must be the same.
    fn both(req: &PlanRequest) -> (Placement, crate::plan::Objective) {
        let placement = place(req);
        let free = classes::free_cores(req);
        for (&v, cores) in &placement.cores {
            let threads: Vec<u32> = cores
                .iter()
                .map(|c| free.iter().find(|f| f.core == *c).expect("free").threads())
                .collect();
            assert!(
                classes::fits_exactly(&req.vms[v], &threads),
                "oracle gave {} cores {threads:?}",
                req.vms[v].name
            );
        }
        let ours = objective(req, &placement);
        let ilp = super::super::per_class::place(
            req,
            crate::deadline::Deadline::after(Duration::from_secs(10)),
        )
        .expect("ilp");
        assert!(ilp.proven);
        assert_eq!(objective(req, &ilp), ours, "ILP vs oracle");
        (placement, ours)
    }

    #[test]
    fn require_fills_siblings_around_a_reserved_core() {
        let req = request(
            "package:1 core:4 pu:2",
            "0",
            vec![
                vm("a", 4, ThreadPolicy::Require),
                vm("b", 2, ThreadPolicy::Require),
            ],
        );
        let (p, o) = both(&req);
        assert_eq!(o.placed, 2);
        assert_eq!(o.cores_used, 3);
        assert_eq!(p.cores.values().map(Vec::len).collect::<Vec<_>>(), [2, 1]);
        assert!(p.cores.values().flatten().all(|c| *c != CoreId(0)));
    }

    #[test]
    fn isolate_emulator_takes_an_idle_sibling_or_one_more_core() {
        let mut v = vm("a", 2, ThreadPolicy::Isolate);
        v.emulator = EmulatorPolicy::Isolate;
        // SMT on: the emulator sits on an idle sibling, 2 cores.
        let (_, o) = both(&request("package:1 core:4 pu:2", "", vec![v.clone()]));
        assert_eq!((o.placed, o.cores_used), (1, 2));
        // SMT off: a third core.
        let (_, o) = both(&request("package:1 core:4 pu:1", "", vec![v.clone()]));
        assert_eq!((o.placed, o.cores_used), (1, 3));
        // SMT off and only 2 free cores: does not fit.
        let (_, o) = both(&request("package:1 core:3 pu:1", "0", vec![v]));
        assert_eq!(o.placed, 0);
    }

    #[test]
    fn require_refuses_single_thread_cores_and_prefer_takes_them() {
        let (_, o) = both(&request(
            "package:1 core:4 pu:1",
            "",
            vec![vm("a", 2, ThreadPolicy::Require)],
        ));
        assert_eq!(o.placed, 0);
        let (_, o) = both(&request(
            "package:1 core:4 pu:1",
            "",
            vec![vm("a", 2, ThreadPolicy::Prefer)],
        ));
        assert_eq!((o.placed, o.cores_used), (1, 2));
    }

    #[test]
    fn prefer_mixes_thread_counts_and_require_does_not() {
        // Core 1 has one usable thread (CPU 3 is not allowed); core 2 is the host's.
        let mut req = request(
            "package:1 core:3 pu:2",
            "4",
            vec![vm("a", 3, ThreadPolicy::Prefer)],
        );
        for pu in &mut req.host.pus {
            if pu.cpu == CpuId(3) {
                pu.usable = false;
                pu.allowed = false;
            }
        }
        let (p, o) = both(&req);
        assert_eq!((o.placed, o.cores_used), (1, 2));
        assert_eq!(p.cores[&0], core_ids(&[0, 1]));
        req.vms[0].threads = ThreadPolicy::Require;
        let (_, o) = both(&req);
        assert_eq!(o.placed, 0);
    }

    #[test]
    fn strict_numa_refuses_what_preferred_spreads() {
        let desc = "package:1 numa:2 core:2 pu:2";
        let mut v = vm("a", 6, ThreadPolicy::Require);
        let (_, o) = both(&request(desc, "", vec![v.clone()]));
        assert_eq!(o.placed, 0);
        v.numa = NumaPolicy::Preferred;
        let (_, o) = both(&request(desc, "", vec![v.clone()]));
        assert_eq!((o.placed, o.extra_numa_nodes, o.cores_used), (1, 1, 3));
        v.numa = NumaPolicy::Spread;
        let (_, o) = both(&request(desc, "", vec![v]));
        assert_eq!((o.placed, o.extra_numa_nodes), (1, 0));
    }

    #[test]
    fn higher_priority_wins_a_contended_host() {
        let mut low = vm("low", 4, ThreadPolicy::Require);
        low.priority = 0;
        let mut high = vm("high", 6, ThreadPolicy::Require);
        high.priority = 5;
        // 4 cores, 8 CPUs: 4 + 6 > 8, and two low VMs would not matter.
        let (p, o) = both(&request("package:1 core:4 pu:2", "", vec![low, high]));
        assert_eq!(o.placed_by_priority, vec![(5, 1), (0, 0)]);
        assert_eq!(p.cores.keys().copied().collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn nic_node_required_and_preferred() {
        let desc = "package:1 numa:2 core:2 pu:2";
        let node1 = NodeId(1);
        let mut v = vm("a", 4, ThreadPolicy::Require);
        v.nic_nodes = vec![node1];
        v.nic_affinity = NicAffinity::Required;
        // Node 1 has cores 2 and 3; one is reserved: 1 core left, not enough.
        let (_, o) = both(&request(desc, "4", vec![v.clone()]));
        assert_eq!(o.placed, 0);
        let (p, _) = both(&request(desc, "", vec![v.clone()]));
        assert_eq!(p.cores[&0], core_ids(&[2, 3]));
        // Preferred: placed on node 0 rather than not at all, remote cores counted.
        v.nic_affinity = NicAffinity::Preferred;
        let (p, o) = both(&request(desc, "4", vec![v]));
        assert_eq!((o.placed, o.nic_remote_cores), (1, 2));
        assert_eq!(p.cores[&0], core_ids(&[0, 1]));
    }

    #[test]
    fn fixed_tenants_take_whole_cores_and_l3_domains_stay_whole() {
        // Two L3 domains of 2 cores; a fixed tenant on CPU 1 takes core 0.
        let mut req = request(
            "package:1 l3:2 core:2 pu:2",
            "",
            vec![vm("a", 2, ThreadPolicy::Require)],
        );
        req.fixed.push(FixedTenant {
            name: "old".to_owned(),
            cpus: cpus("1"),
            kind: crate::plan::FixedKind::Spec,
        });
        // Core 1 fills its domain (now 1 free core): no partial domain.
        let (p, o) = both(&req);
        assert_eq!(p.cores[&0], core_ids(&[1]));
        assert_eq!((o.vm_l3_domains, o.partial_l3_domains), (1, 0));
    }
}
