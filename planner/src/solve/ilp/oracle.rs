//! Test oracle: the per-core binary model that DESIGN.md keeps "only as a test
//! oracle on small hosts". One binary `a[v][k]` per (VM, free core): core k is
//! VM v's. It shares no code with [`super::per_class`] beyond the list of free cores;
//! the placement rules ([`classes::allowed`], [`classes::fits_exactly`]) are
//! written out again per core, and the objective tiers are optimised in the
//! order documented at the top of `ilp.rs`, each optimum fixed before the next.
//! Its placements are compared with the ILP's through [`crate::solve::objective`].

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::ids::NodeId;
use crate::solve::classes::{self, Domain, FreeCore};
use crate::solve::{EmulatorPolicy, NicAffinity, NumaPolicy, Placement, PlanRequest, ThreadPolicy};
use good_lp::{
    variable, Expression, ProblemVariables, Solution, SolutionStatus, SolverModel, WithTimeLimit,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// `(variable index, coefficient)` pairs.
type Lin = Vec<(usize, f64)>;

#[derive(Debug, Clone, Copy)]
enum Sense {
    Le,
    Ge,
    Eq,
}

/// All variables are binary.
#[derive(Debug, Default)]
struct Model {
    vars: usize,
    cons: Vec<(Lin, Sense, f64)>,
}

impl Model {
    fn var(&mut self) -> usize {
        self.vars += 1;
        self.vars - 1
    }

    fn con(&mut self, lin: Lin, sense: Sense, rhs: f64) {
        self.cons.push((lin, sense, rhs));
    }

    /// Minimises `objective` within `limit`; `None` when optimality was not
    /// proven in time, including when microlp stops at the limit with an
    /// error instead of a solution (the proptests saw that about once in
    /// eight runs of 64 cases: it used to panic here).
    fn minimise(&self, objective: &Lin, limit: Duration) -> Option<Vec<f64>> {
        let mut problem = ProblemVariables::new();
        let vars: Vec<good_lp::Variable> = (0..self.vars)
            .map(|_| problem.add(variable().binary()))
            .collect();
        let expr = |lin: &Lin| -> Expression {
            let mut e = Expression::from(0.0);
            for &(i, c) in lin {
                e += c * vars[i];
            }
            e
        };
        let mut model = problem
            .minimise(expr(objective))
            .using(good_lp::microlp)
            .with_time_limit(limit.as_secs_f64().max(0.001));
        for (lin, sense, rhs) in &self.cons {
            let lhs = expr(lin);
            model.add_constraint(match sense {
                Sense::Le => good_lp::constraint::leq(lhs, *rhs),
                Sense::Ge => good_lp::constraint::geq(lhs, *rhs),
                Sense::Eq => good_lp::constraint::eq(lhs, *rhs),
            });
        }
        // The model is always feasible (placing nothing is allowed): an error
        // is microlp giving up at the time limit, an unproven case.
        let solution = model.solve().ok()?;
        matches!(solution.status(), SolutionStatus::Optimal)
            .then(|| vars.iter().map(|v| solution.value(*v)).collect())
    }
}

fn value(values: &[f64], lin: &Lin) -> f64 {
    lin.iter().map(|&(i, c)| c * values[i]).sum()
}

/// Whether `vm` may have `core` at all (the per-core form of `classes::allowed`).
fn may_use(vm: &crate::solve::VmRequest, core: &FreeCore) -> bool {
    if vm.threads == ThreadPolicy::Require && core.pus.len() < 2 {
        return false;
    }
    if vm.numa == NumaPolicy::Strict && core.node.is_none() {
        return false;
    }
    match (vm.nic_affinity, vm.nic_node) {
        (NicAffinity::Required, Some(node)) => core.node == Some(node),
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
    let free = classes::free_cores(request);
    let threads: Vec<u32> = free.iter().map(|c| c.pus.len() as u32).collect();
    let mut m = Model::default();
    // a[v]: (index into `free`, variable).
    let mut a: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut placed: Vec<usize> = Vec::new();
    let mut users: Vec<Lin> = vec![Vec::new(); free.len()];
    let mut cores_used: Lin = Vec::new();
    let mut extra_nodes: Lin = Vec::new();
    let mut nic_remote: Lin = Vec::new();
    let mut l3: Lin = Vec::new();

    for vm in &request.vms {
        let p = m.var();
        placed.push(p);
        let xs: Vec<(usize, usize)> = free
            .iter()
            .enumerate()
            .filter(|(_, c)| may_use(vm, c))
            .map(|(k, _)| (k, m.var()))
            .collect();
        for &(k, x) in &xs {
            m.con(vec![(x, 1.0), (p, -1.0)], Sense::Le, 0.0);
            users[k].push((x, 1.0));
            cores_used.push((x, 1.0));
        }
        let vcpus = f64::from(vm.vcpus);
        match vm.threads {
            ThreadPolicy::Isolate => {
                // One vCPU per core; emulator=isolate takes one more core
                // exactly when none of the VM's cores has an idle sibling.
                let mut count: Lin = xs.iter().map(|&(_, x)| (x, 1.0)).collect();
                count.push((p, -vcpus));
                if vm.emulator == EmulatorPolicy::Isolate {
                    let e = m.var();
                    m.con(vec![(e, 1.0), (p, -1.0)], Sense::Le, 0.0);
                    let mut lower = vec![(e, 1.0), (p, -1.0)];
                    for &(k, x) in &xs {
                        if threads[k] >= 2 {
                            m.con(vec![(e, 1.0), (x, 1.0)], Sense::Le, 1.0);
                            lower.push((x, 1.0));
                        }
                    }
                    m.con(lower, Sense::Ge, 0.0);
                    count.push((e, -1.0));
                }
                m.con(count, Sense::Eq, 0.0);
            }
            ThreadPolicy::Require | ThreadPolicy::Prefer => {
                // need <= total < need + (most threads of a chosen core).
                let need = f64::from(vm.pus_needed());
                let total: Lin = xs
                    .iter()
                    .map(|&(k, x)| (x, f64::from(threads[k])))
                    .collect();
                let mut lower = total.clone();
                lower.push((p, -need));
                m.con(lower, Sense::Ge, 0.0);
                let levels: BTreeSet<u32> = xs.iter().map(|&(k, _)| threads[k]).collect();
                let mut upper = total;
                upper.push((p, -(need - 1.0)));
                let mut one = vec![(p, -1.0)];
                for t in levels {
                    // g: "a chosen core has t threads" (picks the bound).
                    let g = m.var();
                    let mut has: Lin = xs
                        .iter()
                        .filter(|&&(k, _)| threads[k] == t)
                        .map(|&(_, x)| (x, -1.0))
                        .collect();
                    has.push((g, 1.0));
                    m.con(has, Sense::Le, 0.0);
                    one.push((g, 1.0));
                    upper.push((g, -f64::from(t)));
                }
                m.con(one, Sense::Eq, 0.0);
                m.con(upper, Sense::Le, 0.0);
            }
        }

        if vm.numa != NumaPolicy::Spread {
            let nodes: BTreeSet<Option<NodeId>> = xs.iter().map(|&(k, _)| free[k].node).collect();
            let y: BTreeMap<Option<NodeId>, usize> = nodes.iter().map(|&n| (n, m.var())).collect();
            for &(k, x) in &xs {
                m.con(vec![(x, 1.0), (y[&free[k].node], -1.0)], Sense::Le, 0.0);
            }
            let sum: Lin = y.values().map(|&v| (v, 1.0)).collect();
            if vm.numa == NumaPolicy::Strict {
                m.con(sum, Sense::Le, 1.0);
            } else {
                let mut extra = sum;
                extra.push((p, -1.0));
                m.con(extra.clone(), Sense::Ge, 0.0);
                extra_nodes.extend(extra);
            }
        }

        if let (NicAffinity::Preferred, Some(node)) = (vm.nic_affinity, vm.nic_node) {
            nic_remote.extend(
                xs.iter()
                    .filter(|&&(k, _)| free[k].node != Some(node))
                    .map(|&(_, x)| (x, 1.0)),
            );
        }

        let domains: BTreeSet<Domain> = xs.iter().map(|&(k, _)| free[k].domain()).collect();
        let u: BTreeMap<Domain, usize> = domains.iter().map(|&d| (d, m.var())).collect();
        for &(k, x) in &xs {
            m.con(vec![(x, 1.0), (u[&free[k].domain()], -1.0)], Sense::Le, 0.0);
        }
        l3.extend(u.values().map(|&v| (v, 1.0)));
        a.push(xs);
    }

    for lin in &users {
        if !lin.is_empty() {
            m.con(lin.clone(), Sense::Le, 1.0);
        }
    }

    // Symmetry breaking, which microlp's branch and bound needs to finish in
    // seconds: cores with the same node, domain and usable threads are
    // interchangeable for every rule above, so among them, in core order, the
    // owner's VM index never decreases and unused cores come last. (Any
    // solution becomes one of these by permuting such cores.)
    let mut alike: BTreeMap<(Option<NodeId>, Domain, u32), Vec<usize>> = BTreeMap::new();
    for (k, c) in free.iter().enumerate() {
        alike
            .entry((c.node, c.domain(), threads[k]))
            .or_default()
            .push(k);
    }
    let var_of = |v: usize, k: usize| a[v].iter().find(|&&(kk, _)| kk == k).map(|&(_, x)| x);
    for group in alike.values() {
        for pair in group.windows(2) {
            let (first, second) = (pair[0], pair[1]);
            let mut prefix: Lin = Vec::new();
            for v in 0..a.len() {
                if let (Some(x1), Some(x2)) = (var_of(v, first), var_of(v, second)) {
                    prefix.push((x2, 1.0));
                    prefix.push((x1, -1.0));
                    m.con(prefix.clone(), Sense::Le, 0.0);
                }
            }
        }
    }

    // Partially used domains: touched (some core a VM's) but not full (all).
    let mut partial: Lin = Vec::new();
    let mut by_domain: BTreeMap<Domain, Vec<usize>> = BTreeMap::new();
    for (k, c) in free.iter().enumerate() {
        by_domain.entry(c.domain()).or_default().push(k);
    }
    for cores in by_domain.values() {
        let touched = m.var();
        let full = m.var();
        let mut used: Lin = Vec::new();
        for &k in cores {
            for &(x, _) in &users[k] {
                m.con(vec![(x, 1.0), (touched, -1.0)], Sense::Le, 0.0);
                used.push((x, -1.0));
            }
        }
        used.push((full, cores.len() as f64));
        m.con(used, Sense::Le, 0.0);
        partial.push((touched, 1.0));
        partial.push((full, -1.0));
    }

    let mut tiers: Vec<Lin> = Vec::new();
    let levels: BTreeSet<std::cmp::Reverse<i64>> = request
        .vms
        .iter()
        .map(|v| std::cmp::Reverse(v.priority))
        .collect();
    for level in levels {
        tiers.push(
            request
                .vms
                .iter()
                .zip(&placed)
                .filter(|(vm, _)| vm.priority == level.0)
                .map(|(_, &p)| (p, -1.0))
                .collect(),
        );
    }
    tiers.push(
        request
            .vms
            .iter()
            .zip(&placed)
            .map(|(vm, &p)| (p, -f64::from(vm.vcpus)))
            .collect(),
    );
    tiers.extend([cores_used, extra_nodes, nic_remote, l3, partial]);
    tiers.retain(|t| !t.is_empty());

    let mut values = vec![0.0; m.vars];
    for tier in &tiers {
        values = m.minimise(tier, deadline.saturating_duration_since(Instant::now()))?;
        let best = value(&values, tier).round();
        m.con(tier.clone(), Sense::Le, best);
    }

    let mut cores = BTreeMap::new();
    for (v, xs) in a.iter().enumerate() {
        if values[placed[v]] < 0.5 {
            continue;
        }
        let mut mine: Vec<_> = xs
            .iter()
            .filter(|&&(_, x)| values[x] > 0.5)
            .map(|&(k, _)| free[k].core)
            .collect();
        mine.sort();
        cores.insert(v, mine);
    }
    Some(Placement {
        cores,
        proven: true,
    })
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
        let ilp = super::super::per_class::place(req, Duration::from_secs(10)).expect("ilp");
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
        v.nic_node = Some(node1);
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
        });
        // Core 1 fills its domain (now 1 free core): no partial domain.
        let (p, o) = both(&req);
        assert_eq!(p.cores[&0], core_ids(&[1]));
        assert_eq!((o.vm_l3_domains, o.partial_l3_domains), (1, 0));
    }
}
