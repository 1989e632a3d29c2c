//! Property tests of the solvers on random synthetic hosts: every plan from
//! the ILP and from greedy is safe (no CPU or core shared between tenants,
//! policies honoured), the ILP places at least what greedy places per
//! priority level, and on small hosts the ILP reaches the same objective as
//! the per-core oracle ([`super::ilp::oracle`]).
//!
//! Hosts are hwloc synthetic descriptions (1–4 packages, 1–8 NUMA nodes, L3
//! below or above the nodes or absent, SMT 1/2/4) with random PU and node
//! numbering; then random CPUs are made unusable (mixed thread counts),
//! reserved for the host, or given to one of two fixed tenants.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compact;
mod domains;
mod fills;
mod moves;
mod regressions;
mod safety;

use super::ilp::oracle;
use super::{
    build_plan, objective, EmulatorPolicy, FixedTenant, NicAffinity, NumaPolicy, PlanRequest,
    SolveOptions, SolverKind, ThreadPolicy, VmRequest,
};
use crate::cpuset::CpuSet;
use crate::ids::NodeId;
use crate::plan::Plan;
use crate::topology::{load, Source};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use safety::check_plan;
use std::collections::BTreeSet;
use std::time::Duration;

/// Upper bound on PUs of a generated host (48 cores x 4 threads would be more,
/// but core counts are capped per case below).
const MAX_PUS: usize = 192;

/// What a CPU becomes after the host is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Free,
    Reserved,
    FixedA,
    FixedB,
    Unusable,
}

#[derive(Debug, Clone)]
struct HostSpec {
    packages: u32,
    nodes_per_package: u32,
    /// 0: no L3 level; 1: one L3 per package above its nodes; n >= 2: n - 1 L3s per node.
    l3: u32,
    cores_per_group: u32,
    smt: u32,
    pu_keys: Vec<u32>,
    node_keys: Vec<u32>,
    tags: Vec<Tag>,
}

impl HostSpec {
    fn groups(&self) -> u32 {
        let per_node = if self.l3 >= 2 { self.l3 - 1 } else { 1 };
        self.packages * self.nodes_per_package * per_node
    }

    fn description(&self) -> String {
        let nodes = self.packages * self.nodes_per_package;
        let pus = (self.groups() * self.cores_per_group * self.smt) as usize;
        let node_perm = permutation(&self.node_keys, nodes as usize);
        let pu_perm = permutation(&self.pu_keys, pus);
        let join = |p: Vec<usize>| {
            p.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let numa = format!(
            "numa:{}(indexes={})",
            self.nodes_per_package,
            join(node_perm)
        );
        let levels = match self.l3 {
            0 => numa,
            1 => format!("l3:1 {numa}"),
            n => format!("{numa} l3:{}", n - 1),
        };
        format!(
            "package:{} {levels} core:{} pu:{}(indexes={})",
            self.packages,
            self.cores_per_group,
            self.smt,
            join(pu_perm)
        )
    }
}

/// The permutation of `0..n` that sorts `keys[..n]` (ties by position).
fn permutation(keys: &[u32], n: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..n).collect();
    idx.sort_by_key(|&i| (keys.get(i).copied().unwrap_or(0), i));
    idx
}

fn host_spec(max_cores: u32) -> impl Strategy<Value = HostSpec> {
    (
        1u32..=4,
        1u32..=8,
        0u32..=3,
        1u32..=6,
        prop_oneof![Just(1u32), Just(2), Just(4)],
        prop::collection::vec(any::<u32>(), MAX_PUS),
        prop::collection::vec(any::<u32>(), 8),
        prop::collection::vec(
            prop_oneof![
                24 => Just(Tag::Free),
                2 => Just(Tag::Reserved),
                1 => Just(Tag::FixedA),
                1 => Just(Tag::FixedB),
                2 => Just(Tag::Unusable),
            ],
            MAX_PUS,
        ),
    )
        .prop_map(
            move |(packages, nodes, l3, cores, smt, pu_keys, node_keys, tags)| {
                let mut spec = HostSpec {
                    packages,
                    nodes_per_package: nodes.min(8 / packages).max(1),
                    l3,
                    cores_per_group: 1,
                    smt,
                    pu_keys,
                    node_keys,
                    tags,
                };
                spec.cores_per_group = cores.min(max_cores / spec.groups()).max(1);
                spec
            },
        )
        .prop_filter("too many cores", move |s| {
            s.groups() * s.cores_per_group <= max_cores
        })
}

#[derive(Debug, Clone)]
struct VmSpec {
    vcpus: u32,
    threads: ThreadPolicy,
    emulator: EmulatorPolicy,
    numa: NumaPolicy,
    nic_affinity: NicAffinity,
    /// Picks the NIC's node among the host's nodes; `None`: unknown.
    nic_node: Option<usize>,
    /// A second NIC's node, likewise (several NICs).
    second_nic: Option<usize>,
    iothreads: u32,
    priority: i64,
}

fn vm_spec(max_vcpus: u32) -> impl Strategy<Value = VmSpec> {
    (
        1..=max_vcpus,
        prop_oneof![
            Just(ThreadPolicy::Isolate),
            Just(ThreadPolicy::Require),
            Just(ThreadPolicy::Prefer)
        ],
        prop_oneof![Just(EmulatorPolicy::Host), Just(EmulatorPolicy::Isolate)],
        prop_oneof![
            Just(NumaPolicy::Strict),
            Just(NumaPolicy::Preferred),
            Just(NumaPolicy::Spread)
        ],
        prop_oneof![
            Just(NicAffinity::Required),
            Just(NicAffinity::Preferred),
            Just(NicAffinity::Ignore)
        ],
        prop::option::weighted(0.85, 0usize..8),
        prop::option::weighted(0.2, 0usize..8),
        0u32..=2,
        0i64..=2,
    )
        .prop_map(
            |(
                vcpus,
                threads,
                emulator,
                numa,
                nic_affinity,
                nic_node,
                second_nic,
                iothreads,
                priority,
            )| {
                VmSpec {
                    vcpus,
                    threads,
                    emulator,
                    numa,
                    nic_affinity,
                    nic_node,
                    second_nic,
                    iothreads,
                    priority,
                }
            },
        )
}

/// The request a host and VM spec describe.
fn request(host: &HostSpec, vms: &[VmSpec]) -> PlanRequest {
    let desc = host.description();
    let mut topology = load(&Source::Synthetic(desc.clone()))
        .unwrap_or_else(|e| panic!("synthetic {desc:?}: {e}"));
    let mut reserved = CpuSet::new();
    let mut fixed_a = CpuSet::new();
    let mut fixed_b = CpuSet::new();
    for pu in &mut topology.pus {
        match host
            .tags
            .get(pu.cpu.0 as usize)
            .copied()
            .unwrap_or(Tag::Free)
        {
            Tag::Free => {}
            Tag::Reserved => {
                reserved.insert(pu.cpu);
            }
            Tag::FixedA => {
                fixed_a.insert(pu.cpu);
            }
            Tag::FixedB => {
                fixed_b.insert(pu.cpu);
            }
            Tag::Unusable => {
                pu.usable = false;
                pu.allowed = false;
            }
        }
    }
    let fixed = [("fixed-a", fixed_a), ("fixed-b", fixed_b)]
        .into_iter()
        .filter(|(_, cpus)| !cpus.is_empty())
        .map(|(name, cpus)| FixedTenant {
            name: name.to_owned(),
            cpus,
            kind: crate::plan::FixedKind::Spec,
        })
        .collect();
    let nodes: Vec<NodeId> = topology
        .numa_nodes
        .iter()
        .filter(|n| !n.cpus.is_empty())
        .map(|n| n.id)
        .collect();
    let vms = vms
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let pick =
                |k: Option<usize>| k.and_then(|k| nodes.get(k % nodes.len().max(1)).copied());
            let nic_nodes: Vec<NodeId> = [pick(s.nic_node), pick(s.second_nic)]
                .into_iter()
                .flatten()
                .collect::<BTreeSet<NodeId>>()
                .into_iter()
                .collect();
            // Several required NICs of a VM that may span nodes: it must
            // touch each NIC's node (the spec's rule).
            let cell_nodes = if s.nic_affinity == NicAffinity::Required
                && s.numa != NumaPolicy::Strict
                && nic_nodes.len() > 1
            {
                nic_nodes.clone()
            } else {
                Vec::new()
            };
            VmRequest {
                threads: s.threads,
                emulator: s.emulator,
                numa: s.numa,
                nic_affinity: s.nic_affinity,
                nic_nodes,
                cell_nodes,
                iothreads: s.iothreads,
                priority: s.priority,
                ..VmRequest::new(&format!("vm{i}"), s.vcpus)
            }
        })
        .collect();
    PlanRequest {
        host: topology,
        reserved,
        fixed,
        vms,
        order: Default::default(),
        max_moves: None,
    }
}

/// VMs placed per priority level, highest first.
fn by_level(plan: &Plan) -> Vec<u32> {
    plan.objective
        .placed_by_priority
        .iter()
        .map(|&(_, n)| n)
        .collect()
}

fn options(solver: SolverKind) -> SolveOptions {
    SolveOptions {
        solver,
        explain: false,
        progress: None,
    }
}

/// Per ILP solve in the property tests (debug builds are slow; a case that
/// needs more is only checked for safety).
const TIME_LIMIT: Duration = Duration::from_secs(2);

/// [`TIME_LIMIT`] from now.
fn by_limit() -> crate::deadline::Deadline {
    crate::deadline::Deadline::after(TIME_LIMIT)
}

/// For the whole lexicographic sequence of the oracle.
const ORACLE_LIMIT: Duration = Duration::from_secs(4);

/// Safety of both solvers' plans, and ILP >= greedy when the ILP proved its
/// plan optimal. Returns the ILP's plan, or `None` when it stopped at the time
/// limit (a documented outcome: the plan is then only feasible).
fn check_solvers(req: &PlanRequest) -> Result<Option<Plan>, TestCaseError> {
    let ilp = crate::solve::solve(req, &options(SolverKind::Ilp), by_limit());
    prop_assert_eq!(ilp.solver, SolverKind::Ilp, "{:?}", ilp.warnings);
    check_plan(req, &ilp)?;
    let greedy = crate::solve::solve(req, &options(SolverKind::Greedy), by_limit());
    check_plan(req, &greedy)?;
    if !ilp.warnings.is_empty() {
        return Ok(None);
    }
    prop_assert!(
        by_level(&ilp) >= by_level(&greedy),
        "greedy places more: ILP {:?}, greedy {:?}",
        ilp.objective.placed_by_priority,
        greedy.objective.placed_by_priority
    );
    Ok(Some(ilp))
}

/// The oracle's `placement` as a plan (its pins laid out as the solver's).
fn laid_out(req: &PlanRequest, placement: &super::Placement) -> Plan {
    build_plan(
        req,
        placement,
        SolverKind::Ilp,
        &options(SolverKind::Ilp),
        Vec::new(),
        crate::deadline::Deadline::after(std::time::Duration::ZERO),
    )
}

/// `cases` cases, no failure files, a short shrink.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 32,
        ..ProptestConfig::default()
    }
}

/// Each VM of `groups` as many times as it says (identical VMs are one type
/// of the aggregated model).
fn repeated(groups: &[(VmSpec, usize)]) -> Vec<VmSpec> {
    groups
        .iter()
        .flat_map(|(vm, n)| std::iter::repeat_n(vm.clone(), *n))
        .collect()
}

proptest! {
    #![proptest_config(config(64))]

    /// Hosts of at most 10 cores: safety, ILP ≥ greedy, and ILP = oracle.
    /// Some VMs come in identical pairs (one type of the aggregated model).
    #[test]
    fn small_hosts_match_the_oracle(
        host in host_spec(10),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 1..=4),
    ) {
        let vms: Vec<VmSpec> = repeated(&groups).into_iter().take(6).collect();
        let req = request(&host, &vms);
        let Some(ilp) = check_solvers(&req)? else {
            return Ok(());
        };
        // The oracle's branch and bound has heavy tails on symmetric hosts:
        // cases it cannot prove in time are only checked for safety.
        let Some(placement) = oracle::place_within(&req, ORACLE_LIMIT) else {
            return Ok(());
        };
        // The oracle's plan is only compared by its objective.
        let plan = laid_out(&req, &placement);
        check_plan(&req, &plan)?;
        let expected = objective(&req, &placement);
        prop_assert_eq!(
            &ilp.objective,
            &expected,
            "ILP vs oracle on {}: ILP {:?}, oracle {:?}",
            host.description(),
            ilp.vms.iter().map(|v| (&v.name, &v.cores)).collect::<Vec<_>>(),
            placement.cores
        );
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// The explanations' shortcut: where the free cores are fewer than the
    /// VMs ask for, each on its fewest cores (`explain::asked_cores`), no
    /// placement holds them all, so a fix is refused without a re-solve.
    /// Wherever the per-core oracle places every VM, they asked for no more
    /// than the free cores.
    #[test]
    fn what_the_vms_ask_for_bounds_the_oracle(
        host in host_spec(10),
        vms in prop::collection::vec(vm_spec(6), 1..=6),
    ) {
        let req = request(&host, &vms);
        let free = super::classes::free_cores(&req);
        let asked = super::explain::asked_cores(&req.vms, &free);
        let Some(placement) = oracle::place_within(&req, ORACLE_LIMIT) else {
            return Ok(());
        };
        if placement.cores.len() == req.vms.len() {
            prop_assert!(
                usize::try_from(asked).is_ok_and(|a| a <= free.len()),
                "{} cores asked, {} free, yet the oracle places all on {}: {:?}",
                asked,
                free.len(),
                host.description(),
                placement.cores
            );
        }
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// The explanations' second shortcut (`explain::refused_by_the_plan`):
    /// a VM that a proven plan leaves out does not fit beside every VM the
    /// plan places, so a fix that turns a VM into it is refused without a
    /// re-solve. The per-core oracle, asked to place those VMs and a copy
    /// of each question (all at priority 0, as the re-solve asks), never
    /// places them all.
    #[test]
    fn a_vm_a_proven_plan_leaves_out_fits_nowhere_beside_the_placed(
        host in host_spec(10),
        vms in prop::collection::vec(vm_spec(6), 1..=6),
    ) {
        let req = request(&host, &vms);
        let Ok(placement) = super::ilp::place(&req, by_limit(), &super::Progress::default())
        else {
            return Ok(());
        };
        let placed: Vec<VmRequest> = placement
            .cores
            .keys()
            .map(|&i| VmRequest {
                priority: 0,
                ..req.vms[i].clone()
            })
            .collect();
        for question in super::explain::refused_by_the_plan(&req, &placement) {
            let mut vms = placed.clone();
            vms.push(VmRequest {
                name: "question".to_owned(),
                ..question
            });
            let trial = PlanRequest {
                vms,
                ..req.clone()
            };
            let Some(oracle) = oracle::place_within(&trial, ORACLE_LIMIT) else {
                continue;
            };
            prop_assert!(
                oracle.cores.len() < trial.vms.len(),
                "the plan leaves out {:?} on {}, yet the oracle places it beside the placed: {:?}",
                trial.vms.last(),
                host.description(),
                oracle.cores
            );
        }
    }
}

proptest! {
    #![proptest_config(config(32))]

    /// Hosts of up to 32 cores: safety and ILP ≥ greedy.
    #[test]
    fn larger_hosts_are_safe(
        host in host_spec(32),
        vms in prop::collection::vec(vm_spec(12), 1..=8),
    ) {
        let req = request(&host, &vms);
        check_solvers(&req)?;
    }
}

proptest! {
    #![proptest_config(config(96))]

    /// Issue 12: on hosts where the aggregated model applies, its objective
    /// equals the per-class model's wherever both prove their answer. VMs
    /// come in groups of identical ones (what the aggregated model counts as
    /// one type).
    #[test]
    fn aggregated_model_equals_per_class_model(
        host in host_spec(16),
        groups in prop::collection::vec((vm_spec(8), 1..=4usize), 1..=5),
    ) {
        let vms = repeated(&groups);
        let req = request(&host, &vms);
        prop_assume!(super::ilp::agg::supported(&req));
        let within = || crate::deadline::Deadline::after(TIME_LIMIT);
        let (agg, _) = super::ilp::agg::place(&req, within(), &super::Progress::default());
        let old = super::ilp::per_class::place(&req, within()).unwrap();
        prop_assume!(agg.proven && old.proven);
        prop_assert_eq!(
            objective(&req, &agg),
            objective(&req, &old),
            "aggregated vs per-class on {}: {:?} vs {:?}",
            host.description(),
            agg.cores,
            old.cores
        );
    }
}

/// Node `i`'s 2 MiB pool gets `pools[i]` free pages; VM `j` with
/// `pages[j] = Some(n)` needs `n` of them and becomes strict (the rule the
/// model and the oracle share exactly).
fn with_memory(mut req: PlanRequest, pools: &[u64], pages: &[Option<u64>]) -> PlanRequest {
    for (node, &free) in req.host.numa_nodes.iter_mut().zip(pools.iter().cycle()) {
        node.hugepages = vec![crate::topology::PagePool {
            size_kib: 2048,
            total: free,
            free: Some(free),
        }];
    }
    for (vm, n) in req.vms.iter_mut().zip(pages) {
        if let Some(n) = n {
            vm.memory = Some(crate::memory::VmMemory {
                bytes: n * 2048 * 1024,
                page_kib: 2048,
            });
            vm.numa = NumaPolicy::Strict;
            // Kept to one node: no nodes to touch (as the spec makes it).
            vm.cell_nodes.clear();
        }
    }
    req
}

/// Pages each node's VMs take from its 2 MiB pool, against its free pages.
fn memory_holds(req: &PlanRequest, plan: &Plan) -> Result<(), TestCaseError> {
    let mut used: std::collections::BTreeMap<NodeId, u64> = std::collections::BTreeMap::new();
    for vm in &plan.vms {
        let Some(m) = vm.memory else { continue };
        for (node, bytes) in crate::memory::placement::per_node(vm, &m) {
            *used.entry(node).or_default() += bytes / (2048 * 1024);
        }
    }
    for (node, pages) in used {
        let free = req
            .host
            .numa_nodes
            .iter()
            .find(|n| n.id == node)
            .and_then(|n| n.hugepages.first())
            .and_then(|p| p.free)
            .unwrap_or(0);
        prop_assert!(
            pages <= free,
            "node {node}: {pages} pages used, {free} free"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(48))]

    /// Issue 16: with memory, on hosts of one thread count (where the
    /// aggregated model counts it), plans never take more pages than a node
    /// has, and the ILP's objective equals the per-core oracle's.
    #[test]
    fn memory_matches_the_oracle(
        host in host_spec(8),
        groups in prop::collection::vec((vm_spec(4), 1..=2usize), 1..=3),
        pools in prop::collection::vec(0u64..=6, 1..=4),
        pages in prop::collection::vec(prop::option::weighted(0.7, 1u64..=4), 6),
    ) {
        let vms: Vec<VmSpec> = repeated(&groups).into_iter().take(5).collect();
        let req = with_memory(request(&host, &vms), &pools, &pages);
        prop_assume!(super::ilp::agg::supported(&req));
        let Some(ilp) = check_solvers(&req)? else {
            return Ok(());
        };
        memory_holds(&req, &ilp)?;
        let greedy = crate::solve::solve(&req, &options(SolverKind::Greedy), by_limit());
        memory_holds(&req, &greedy)?;
        agrees_with_the_oracle(&req, &ilp, &host.description())?;
    }
}

/// The per-core oracle's objective on `req` (where it finishes in time)
/// equals the ILP plan's, on the host `described`.
fn agrees_with_the_oracle(
    req: &PlanRequest,
    ilp: &Plan,
    described: &str,
) -> Result<(), TestCaseError> {
    let Some(placement) = oracle::place_within(req, ORACLE_LIMIT) else {
        return Ok(());
    };
    let expected = objective(req, &placement);
    prop_assert_eq!(
        &ilp.objective,
        &expected,
        "ILP vs oracle with memory on {}: ILP {:?}, oracle {:?}",
        described,
        ilp.vms
            .iter()
            .map(|v| (&v.name, &v.cores))
            .collect::<Vec<_>>(),
        placement.cores
    );
    Ok(())
}

/// [`with_memory`], but VM `j` keeps its NUMA policy: a VM over several
/// nodes puts its memory on them in proportion to its cores there.
fn with_split_memory(mut req: PlanRequest, pools: &[u64], pages: &[Option<u64>]) -> PlanRequest {
    let policies: Vec<NumaPolicy> = req.vms.iter().map(|v| v.numa).collect();
    let cells: Vec<_> = req.vms.iter().map(|v| v.cell_nodes.clone()).collect();
    req = with_memory(req, pools, pages);
    for ((vm, numa), cell_nodes) in req.vms.iter_mut().zip(policies).zip(cells) {
        vm.numa = numa;
        if numa != NumaPolicy::Strict {
            vm.cell_nodes = cell_nodes;
        }
    }
    req
}

proptest! {
    #![proptest_config(config(48))]

    /// Issue 28: memory counted in the node pattern model's flows, with VMs
    /// that may be split over nodes (their pieces take fractions of their
    /// memory): the ILP's objective equals the per-core oracle's, whose
    /// rule per core is the same.
    #[test]
    fn split_memory_matches_the_oracle(
        host in host_spec(8),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 1..=3),
        pools in prop::collection::vec(0u64..=8, 1..=4),
        pages in prop::collection::vec(prop::option::weighted(0.8, 1u64..=6), 6),
    ) {
        let vms: Vec<VmSpec> = repeated(&groups).into_iter().take(5).collect();
        let req = with_split_memory(request(&host, &vms), &pools, &pages);
        prop_assume!(super::ilp::agg::supported(&req));
        let Some(ilp) = check_solvers(&req)? else {
            return Ok(());
        };
        agrees_with_the_oracle(&req, &ilp, &host.description())?;
    }
}

proptest! {
    #![proptest_config(config(48))]

    /// Issue 28: memory on hosts of mixed thread counts, where the per-class
    /// model counts it (strict VMs whole on their node; others per core
    /// where their core count is the same on every core they may take):
    /// the ILP's objective equals the per-core oracle's, and plans of
    /// strict VMs never take more pages than a node has.
    #[test]
    fn mixed_hosts_count_memory_like_the_oracle(
        host in host_spec(8),
        groups in prop::collection::vec((vm_spec(4), 1..=2usize), 1..=3),
        pools in prop::collection::vec(0u64..=6, 1..=4),
        pages in prop::collection::vec(prop::option::weighted(0.8, 1u64..=4), 6),
        split in any::<bool>(),
    ) {
        let vms: Vec<VmSpec> = repeated(&groups).into_iter().take(5).collect();
        let base = request(&host, &vms);
        let req = if split {
            with_split_memory(base, &pools, &pages)
        } else {
            with_memory(base, &pools, &pages)
        };
        prop_assume!(!super::ilp::agg::supported(&req));
        let Some(ilp) = check_solvers(&req)? else {
            return Ok(());
        };
        if !split {
            memory_holds(&req, &ilp)?;
        }
        agrees_with_the_oracle(&req, &ilp, &host.description())?;
    }
}

proptest! {
    #![proptest_config(config(64))]

    /// Issue 28: on a host of mixed thread counts, the aggregated model's
    /// proven optimum (every free core at the most threads) is a
    /// relaxation: lexicographically no worse than the per-core oracle's
    /// optimum of the host itself. The per-class model takes its values as
    /// lower bounds (`per_class::place_bounded`), so a relaxation above the
    /// optimum would prove a worse plan. The aggregated model's placement
    /// on the cores of the most threads alone, a start, is a safe plan of
    /// the host, so no better than the oracle's.
    #[test]
    fn the_relaxation_is_below_the_oracle(
        host in host_spec(10),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 1..=4),
        pools in prop::collection::vec(0u64..=6, 1..=4),
        pages in prop::collection::vec(prop::option::weighted(0.5, 1u64..=4), 6),
    ) {
        let vms: Vec<VmSpec> = repeated(&groups).into_iter().take(6).collect();
        let req = with_split_memory(request(&host, &vms), &pools, &pages);
        prop_assume!(super::ilp::relaxable(&req));
        let far = crate::deadline::Deadline::after(Duration::from_secs(30));
        let Some(relaxed) = super::ilp::agg::relaxed(&req, far) else {
            return Ok(());
        };
        let Some(placement) = oracle::place_within(&req, ORACLE_LIMIT) else {
            return Ok(());
        };
        let (bound, optimum) = (objective(&req, &relaxed), objective(&req, &placement));
        if let Some(start) = super::ilp::agg::on_most_threads(&req, far) {
            check_plan(&req, &laid_out(&req, &start))?;
            let value = objective(&req, &start);
            prop_assert!(
                value.in_order() >= optimum.in_order(),
                "a start {:?} better than the oracle {:?}: {:?}",
                value.in_order(),
                optimum.in_order(),
                start.cores
            );
        }
        prop_assert!(
            bound.in_order() <= optimum.in_order(),
            "relaxation {:?} above the oracle {:?} on {}: {:?} vs {:?}",
            bound.in_order(),
            optimum.in_order(),
            host.description(),
            relaxed.cores,
            placement.cores
        );
    }
}

proptest! {
    #![proptest_config(config(256))]

    /// Issue 28: on a host of mixed thread counts where every VM sits in
    /// its fewest L3 domains at the optimum, objective 7 is the pattern
    /// model's of `per_class::fewest_domains` (the per-class model takes it
    /// as a bound), huge pages counted per node as the per-class model
    /// counts them: where the per-core oracle's optimum places every VM,
    /// each on its fewest cores and domains, the pattern model's plan, held
    /// to the oracle's extra NUMA nodes and cores off the NICs' nodes, has
    /// the oracle's objective, every one; elsewhere any plan it
    /// proves is a safe plan no better than the oracle's. Where the oracle
    /// places every VM on its fewest cores, its L3 domains over VMs are at
    /// least the model's bound. The whole solve agrees with the oracle too.
    #[test]
    fn fewest_domains_per_vm_match_the_oracle(
        host in host_spec(10),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 1..=2),
        isolate in any::<bool>(),
        pools in prop::collection::vec(0u64..=6, 1..=4),
        pages in prop::collection::vec(prop::option::weighted(0.5, 1u64..=4), 6),
        memory in any::<bool>(),
    ) {
        // Half the cases without isolated threads: VMs of one vCPU per
        // core need more domains, where the model declines more often.
        let vms: Vec<VmSpec> = repeated(&groups)
            .into_iter()
            .take(3)
            .map(|mut vm| {
                if !isolate && vm.threads == ThreadPolicy::Isolate {
                    vm.threads = ThreadPolicy::Prefer;
                }
                vm
            })
            .collect();
        // Half the cases with huge pages on some VMs, whose memory goes
        // with their cores (the tight pools bind).
        let base = request(&host, &vms);
        let req = if memory {
            with_split_memory(base, &pools, &pages)
        } else {
            base
        };
        prop_assume!(!super::ilp::agg::supported(&req));
        let Some(placement) = oracle::place_within(&req, ORACLE_LIMIT) else {
            return Ok(());
        };
        let optimum = objective(&req, &placement);
        let held = (optimum.extra_numa_nodes, f64::from(optimum.nic_remote_cores));
        // Where the model declines (a VM over three domains or more, say),
        // only the whole solve is checked.
        let Some((fewest, domains, found)) =
            super::ilp::per_class::fewest_domains_for_tests(&req, held)
        else {
            if let Some(ilp) = check_solvers(&req)? {
                agrees_with_the_oracle(&req, &ilp, &host.description())?;
            }
            return Ok(());
        };
        let n = u32::try_from(req.vms.len()).unwrap_or(u32::MAX);
        let fewest_cores = optimum.placed == n && f64::from(optimum.cores_used) == fewest;
        // Objective 6's bound (every VM placed on its fewest cores).
        let oracle = (&placement, &optimum);
        pattern_model_agrees(&req, &host.description(), oracle, (domains, found), fewest_cores)?;
        if let Some(ilp) = check_solvers(&req)? {
            agrees_with_the_oracle(&req, &ilp, &host.description())?;
        }
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// Issue 28: the pattern model of `per_class::fewest_domains` where the
    /// optimum leaves VMs out (tight pools, more VMs than cores), asked at
    /// the per-core oracle's optima of objectives 1–5. Where it has a bound
    /// of objective 6 there, every plan at those optima puts each VM it
    /// places on its fewest cores, so the oracle's L3 domains over VMs are
    /// at least the bound; where they are at it, the model's proven plan has
    /// the oracle's objective, every one; elsewhere any plan it proves is a
    /// safe plan no better than the oracle's. The whole solve agrees with
    /// the oracle too.
    #[test]
    fn fewest_domains_with_vms_left_out_match_the_oracle(
        host in host_spec(8),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 2..=4),
        pools in prop::collection::vec(0u64..=4, 1..=4),
        pages in prop::collection::vec(prop::option::weighted(0.7, 1u64..=4), 6),
    ) {
        let vms = two_thread_vms(&groups, 5, None);
        let req = with_split_memory(request(&host, &vms), &pools, &pages);
        at_the_oracles_optima(&req, &host.description())?;
    }
}

proptest! {
    #![proptest_config(config(96))]

    /// Issue 28: the pattern model of `per_class::fewest_domains` where
    /// `preferred` VMs may lie over two NUMA nodes (pools of a few pages,
    /// each node's too small for some VM), asked at the per-core oracle's
    /// optima of objectives 1–5, its extra nodes included: its splits across
    /// two nodes, at most as many as the extra nodes, make up the oracle's
    /// plan where it is at the bound, as in
    /// `fewest_domains_with_vms_left_out_match_the_oracle`. The whole solve
    /// agrees with the oracle too.
    #[test]
    fn fewest_domains_across_nodes_match_the_oracle(
        host in host_spec(8).prop_map(over_nodes),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 1..=3),
        pools in prop::collection::vec(1u64..=4, 1..=4),
        pages in prop::collection::vec(1u64..=6, 4),
    ) {
        let vms = two_thread_vms(&groups, 4, Some(NumaPolicy::Preferred));
        let pages: Vec<Option<u64>> = pages.into_iter().map(Some).collect();
        let mut req = with_split_memory(request(&host, &vms), &pools, &pages);
        for vm in &mut req.vms {
            vm.cell_nodes.clear();
        }
        at_the_oracles_optima(&req, &host.description())?;
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// Issue 28: the pattern model of `per_class::fewest_domains` where a
    /// plan at the optima may give a VM more cores than its fewest (two-
    /// thread cores too few for every `prefer` VM, which then takes cores
    /// of one thread): L3 domains of 3–6 cores, some siblings offline, VMs
    /// of 1–6 vCPUs that `prefer` or `require` two threads. Asked at the
    /// per-core oracle's optima, with its VMs on up to as many cores more
    /// as the held cores allow, it has the oracle's plan where that is at
    /// the bound, as in `fewest_domains_with_vms_left_out_match_the_oracle`.
    #[test]
    fn fewest_domains_with_more_cores_match_the_oracle(
        nodes in 1u32..=2,
        cores in 3u32..=6,
        pu_keys in prop::collection::vec(any::<u32>(), MAX_PUS),
        offline in prop::collection::vec(prop::bool::weighted(0.3), MAX_PUS),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 1..=3),
    ) {
        let host = HostSpec {
            packages: 1,
            nodes_per_package: nodes,
            l3: 2,
            cores_per_group: cores,
            smt: 2,
            pu_keys,
            node_keys: vec![0; 8],
            tags: offline
                .iter()
                .map(|&off| if off { Tag::Unusable } else { Tag::Free })
                .collect(),
        };
        let mut vms = two_thread_vms(&groups, 4, Some(NumaPolicy::Strict));
        for vm in &mut vms {
            vm.nic_affinity = NicAffinity::Ignore;
        }
        at_the_oracles_optima(&request(&host, &vms), &host.description())?;
    }
}

proptest! {
    #![proptest_config(config(128))]

    /// Issue 28: an explanation's re-solve (`exact_placing`) answers
    /// whether every VM fits as the whole solve does, wherever both are
    /// proven, huge pages included. It looks only for points with every VM
    /// of a level placed, and stops at the first level none reaches. On a
    /// host of mixed thread counts (the VMs placed per level first, without
    /// the relaxation and its start; the whole solve where every VM is
    /// placed) a yes also reaches the whole solve's objective, every tier.
    #[test]
    fn a_re_solve_answers_as_the_whole_solve(
        host in host_spec(8),
        groups in prop::collection::vec((vm_spec(6), 1..=2usize), 1..=4),
        pools in prop::collection::vec(0u64..=6, 1..=4),
        pages in prop::collection::vec(prop::option::weighted(0.5, 1u64..=4), 6),
    ) {
        let vms: Vec<VmSpec> = repeated(&groups).into_iter().take(4).collect();
        let req = with_split_memory(request(&host, &vms), &pools, &pages);
        let whole = super::ilp::place(&req, by_limit(), &super::Progress::default());
        let placing = super::exact_placing(&req, by_limit());
        let (Ok(whole), Ok(placing)) = (whole, placing) else {
            return Ok(());
        };
        // The re-solve is the easier question: never left unproven where
        // the whole solve is proven (this fails where every no is lost).
        prop_assert!(placing.proven || !whole.proven,
            "{}: the re-solve stopped unproven at {:?}", host.description(), placing.cores);
        if whole.proven {
            let every_vm = whole.cores.len() == req.vms.len();
            prop_assert_eq!(every_vm, placing.cores.len() == req.vms.len(),
                "{}: {:?} vs {:?}", host.description(), whole.cores, placing.cores);
            if every_vm && super::ilp::per_class_only(&req) {
                prop_assert_eq!(objective(&req, &whole), objective(&req, &placing),
                    "{}: {:?} vs {:?}", host.description(), whole.cores, placing.cores);
            }
        }
    }
}

/// The VMs of `groups`, at most `most`, those that isolate their threads
/// preferring two instead (VMs of one vCPU per core need more domains,
/// where the pattern model declines more often), each of `numa` if given.
fn two_thread_vms(
    groups: &[(VmSpec, usize)],
    most: usize,
    numa: Option<NumaPolicy>,
) -> Vec<VmSpec> {
    repeated(groups)
        .into_iter()
        .take(most)
        .map(|mut vm| {
            if vm.threads == ThreadPolicy::Isolate {
                vm.threads = ThreadPolicy::Prefer;
            }
            vm.numa = numa.unwrap_or(vm.numa);
            vm
        })
        .collect()
}

/// On a host of mixed thread counts, the pattern model of
/// `per_class::fewest_domains` at the per-core oracle's optima of
/// objectives 1–5 where it has a bound there ([`pattern_model_agrees`]),
/// and the whole solve, against the oracle.
fn at_the_oracles_optima(req: &PlanRequest, host: &str) -> Result<(), TestCaseError> {
    prop_assume!(!super::ilp::agg::supported(req));
    let Some(placement) = oracle::place_within(req, ORACLE_LIMIT) else {
        return Ok(());
    };
    let optimum = objective(req, &placement);
    if let Some((Some(domains), found)) =
        super::ilp::per_class::fewest_domains_at_for_tests(req, &optimum)
    {
        let oracle = (&placement, &optimum);
        pattern_model_agrees(req, host, oracle, (domains, found), true)?;
    }
    if let Some(ilp) = check_solvers(req)? {
        agrees_with_the_oracle(req, &ilp, host)?;
    }
    Ok(())
}

/// `host` with L3 domains inside its nodes, and two nodes or more: one
/// node becomes two of half its cores per L3 domain, at least one (at
/// most 2 × 2 domains × 1 core, or as many cores as before or fewer:
/// within the strategy's 8).
fn over_nodes(mut host: HostSpec) -> HostSpec {
    // No L3 level, or one over the nodes: one L3 domain per node instead
    // (as many domains).
    host.l3 = host.l3.max(2);
    if host.packages * host.nodes_per_package < 2 {
        host.nodes_per_package = 2;
        host.cores_per_group = (host.cores_per_group / 2).max(1);
    }
    host
}

/// The pattern model of `per_class::fewest_domains` (its bound of
/// objective 6 and its plan at it, `model`) against the per-core oracle's
/// plan and optimum. Where `holds` (every plan at the oracle's optima puts
/// each VM it places on its fewest cores), the oracle's L3 domains over VMs
/// are at least the bound, and where they are at it, the model has a proven
/// plan with the oracle's objective, every tier; any other plan it proves
/// is safe and no better than the oracle's.
fn pattern_model_agrees(
    req: &PlanRequest,
    host: &str,
    (placement, optimum): (&super::Placement, &crate::plan::Objective),
    (domains, found): (u32, Option<super::Placement>),
    holds: bool,
) -> Result<(), TestCaseError> {
    prop_assert!(
        !holds || optimum.vm_l3_domains >= domains,
        "{}: {} L3 domains over VMs below the bound {}: {:?}",
        host,
        optimum.vm_l3_domains,
        domains,
        placement.cores
    );
    let at_bound = holds && optimum.vm_l3_domains == domains;
    match found.filter(|p| p.proven) {
        Some(p) => {
            check_plan(req, &laid_out(req, &p))?;
            let value = objective(req, &p);
            if at_bound {
                prop_assert_eq!(
                    &value,
                    optimum,
                    "{}: {:?} vs the oracle's {:?}",
                    host,
                    p.cores,
                    placement.cores
                );
            } else {
                prop_assert!(
                    value.in_order() >= optimum.in_order(),
                    "{}: {:?} better than the oracle's {:?}",
                    host,
                    p.cores,
                    placement.cores
                );
            }
        }
        None => prop_assert!(
            !at_bound,
            "{}: no plan where the oracle's {:?} is one",
            host,
            placement.cores
        ),
    }
    Ok(())
}

/// Found by `memory_matches_the_oracle`: nodes alike in cores but not in
/// pages were ordered as interchangeable, which cut off the placement of
/// both VMs (3 and 2 pages; pools of 1 and 4 pages on alternate nodes).
#[test]
fn nodes_with_other_pools_are_not_interchangeable() {
    let host = HostSpec {
        packages: 2,
        nodes_per_package: 3,
        l3: 0,
        cores_per_group: 1,
        smt: 2,
        pu_keys: vec![0; MAX_PUS],
        node_keys: vec![0; 8],
        tags: vec![Tag::Free; MAX_PUS],
    };
    let spec = VmSpec {
        vcpus: 1,
        threads: ThreadPolicy::Require,
        emulator: EmulatorPolicy::Host,
        numa: NumaPolicy::Strict,
        nic_affinity: NicAffinity::Ignore,
        nic_node: Some(0),
        second_nic: None,
        iothreads: 2,
        priority: 1,
    };
    let req = with_memory(
        request(&host, &[spec.clone(), spec]),
        &[1, 4],
        &[Some(3), Some(2)],
    );
    let ilp = crate::solve::solve(&req, &options(SolverKind::Ilp), by_limit());
    assert_eq!(ilp.vms.len(), 2, "{:?}", ilp.vms);
    assert!(ilp.proven);
    memory_holds(&req, &ilp).unwrap_or_else(|e| panic!("{e}"));
}
