//! Placement: turns a [`PlanRequest`] (a host, its reserved and fixed CPUs,
//! VMs with vCPU counts and policies, from [`request`]) into a [`Plan`] where
//! no physical core is shared between two tenants.
//!
//! Free cores are grouped into [`classes`] of interchangeable cores (same NUMA
//! node, L3 domain and usable threads); the exact integer programs of [`ilp`]
//! decide where every VM goes, optimising lexicographically; [`assign`] then
//! picks concrete cores and maps vCPUs to CPUs deterministically. [`greedy`] is a
//! first-fit baseline; [`explain`] says why a VM did not fit and what would make
//! it. Pure functions over in-memory values: no files, no host, no libvirt.

pub mod assign;
pub mod classes;
mod error;
pub mod explain;
pub mod greedy;
pub mod ilp;
pub(crate) mod memory;
pub mod pack;
#[cfg(test)]
mod proptests;
pub mod request;

pub use request::{
    EmulatorPolicy, FixedTenant, GuestOptions, NicAffinity, NumaPolicy, Order, PlanRequest, Roles,
    SolveOptions, SolverKind, ThreadPolicy, VmRequest,
};

use crate::deadline::{self, Deadline};
use crate::ids::{CoreId, NodeId};
use crate::model::{Warning, WarningKind};
use crate::plan::{FixedPlan, Objective, Plan, PlanHost, Status, VmPlan};
use classes::FreeCore;
pub use error::ExactError;
pub use ilp::backend;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The objectives in their order (`model/tier.rs`), named where the
/// solver's callers name them.
pub use crate::model::Tier;

/// Concrete cores for each placed VM (index into `request.vms`), before vCPUs
/// are mapped: what every solver produces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// VM index → its cores, ascending.
    pub cores: BTreeMap<usize, Vec<CoreId>>,
    /// Whether optimality was proven; for an explanation's re-solve that
    /// leaves VMs out, whether it was proven that not every VM fits.
    pub proven: bool,
    /// Why not: the backend's process failed (crashed, or could not start or
    /// answer) and the solver fell back to the best it had before, which
    /// `solve` says in a warning. `None` when it only ran out of time.
    pub fault: Option<backend::SolveError>,
}

/// Free cores: usable cores none of whose CPUs is reserved or fixed.
pub fn free_cores(request: &PlanRequest) -> Vec<FreeCore> {
    classes::free_cores(request)
}

/// Evaluates the objective of a placement (the same way for every solver, so
/// that solvers can be compared).
pub fn objective(request: &PlanRequest, placement: &Placement) -> Objective {
    let free = free_cores(request);
    let info: BTreeMap<CoreId, &FreeCore> = free.iter().map(|c| (c.core, c)).collect();
    let mut by_priority: BTreeMap<std::cmp::Reverse<i64>, u32> = BTreeMap::new();
    for vm in &request.vms {
        by_priority
            .entry(std::cmp::Reverse(vm.priority))
            .or_default();
    }
    let mut objective = Objective::default();
    let mut used_per_domain: BTreeMap<classes::Domain, u32> = BTreeMap::new();
    for (&i, cores) in &placement.cores {
        let Some(vm) = request.vms.get(i) else {
            continue;
        };
        objective.placed += 1;
        objective.vcpus_placed += vm.vcpus;
        *by_priority
            .entry(std::cmp::Reverse(vm.priority))
            .or_default() += 1;
        let nodes: BTreeSet<Option<NodeId>> = cores
            .iter()
            .filter_map(|c| info.get(c))
            .map(|c| c.node)
            .collect();
        if vm.numa == NumaPolicy::Preferred {
            objective.extra_numa_nodes += u32::try_from(nodes.len().saturating_sub(1)).unwrap_or(0);
        }
        objective.nic_remote_cores += u32::try_from(
            cores
                .iter()
                .filter_map(|c| info.get(c))
                .filter(|c| vm.nic_remote(c.node))
                .count(),
        )
        .unwrap_or(0);
        let domains: BTreeSet<classes::Domain> = cores
            .iter()
            .filter_map(|c| info.get(c))
            .map(|c| c.domain())
            .collect();
        objective.vm_l3_domains += u32::try_from(domains.len()).unwrap_or(0);
        for c in cores.iter().filter_map(|c| info.get(c)) {
            *used_per_domain.entry(c.domain()).or_default() += 1;
        }
        objective.cores_used += u32::try_from(cores.len()).unwrap_or(0);
    }
    let mut capacity: BTreeMap<classes::Domain, u32> = BTreeMap::new();
    for c in &free {
        *capacity.entry(c.domain()).or_default() += 1;
    }
    objective.partial_l3_domains = u32::try_from(
        used_per_domain
            .iter()
            .filter(|(d, used)| capacity.get(d).is_some_and(|cap| *used > &0 && *used < cap))
            .count(),
    )
    .unwrap_or(0);
    objective.placed_by_priority = by_priority.into_iter().map(|(p, n)| (p.0, n)).collect();
    objective
}

/// NUMA nodes some of whose free cores `placement` uses and some not: what
/// compaction's [`Tier::PartialNodes`] counts (a plan's [`Objective`] has
/// no field for it: a plan's order does not count it).
pub fn partial_nodes(request: &PlanRequest, placement: &Placement) -> u32 {
    let free = free_cores(request);
    let used: BTreeSet<CoreId> = placement.cores.values().flatten().copied().collect();
    let mut per_node: BTreeMap<Option<NodeId>, (u32, u32)> = BTreeMap::new();
    for c in &free {
        let (taken, all) = per_node.entry(c.node).or_default();
        *taken += u32::from(used.contains(&c.core));
        *all += 1;
    }
    let partly = per_node
        .values()
        .filter(|&&(taken, all)| taken > 0 && taken < all)
        .count();
    u32::try_from(partly).unwrap_or(u32::MAX)
}

/// The exact solver for whether every VM fits, and if so on how many
/// cores: an explanation's re-solve. The aggregated models solve only the
/// VMs placed per level (a VM's cores are its type's); the per-class model
/// solves those first, and the whole order only where every VM is placed
/// (`ilp::place`). Each level's search looks only for points that place all
/// of it (with CBC; another backend searches for the most), and the first
/// level none reaches ends the solve, proven, at a point that leaves VMs
/// out: how many fit is no part of the answer.
pub(crate) fn exact_placing(
    request: &PlanRequest,
    deadline: Deadline,
) -> Result<Placement, ExactError> {
    let progress = Progress {
        placing_only: true,
        ..Progress::default()
    };
    ilp::place(request, deadline, &progress)
}

/// The best placement a solver has found so far, shared with a watchdog,
/// and told to a [`ProgressHook`] when there is one.
#[derive(Debug, Default)]
pub struct Progress {
    best: std::sync::Mutex<Option<Placement>>,
    stage: std::sync::Mutex<&'static str>,
    hook: Option<ProgressHook>,
    /// Only whether every VM is placed matters, and if so on how many
    /// cores: an explanation's re-solve ([`exact_placing`]).
    placing_only: bool,
}

/// Where a solve is, for a progress line: the stage, and the best placement
/// found so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// What the solver works on, e.g. `objectives 1-5 on NUMA nodes`.
    pub stage: &'static str,
    /// VMs the best placement so far places.
    pub vms_placed: usize,
    /// VMs asked for.
    pub vms: usize,
}

/// Called from the solver thread whenever the stage or the best placement
/// changes (`plan` draws its progress line from it).
#[derive(Clone)]
pub struct ProgressHook(pub std::sync::Arc<dyn Fn(&Snapshot) + Send + Sync>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

impl PartialEq for ProgressHook {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Progress {
    /// A progress that tells `hook`.
    pub fn with_hook(hook: Option<ProgressHook>) -> Progress {
        Progress {
            hook,
            ..Progress::default()
        }
    }

    /// Keeps `placement` if it is better than what is kept (objectives 1–3).
    pub fn offer(&self, request: &PlanRequest, placement: &Placement) {
        // A poisoned lock only means a solver thread panicked: keep going.
        let mut best = self.best.lock().unwrap_or_else(|e| e.into_inner());
        if best.as_ref().is_none_or(|b| better(request, placement, b)) {
            *best = Some(Placement {
                cores: placement.cores.clone(),
                proven: false,
                fault: None,
            });
            drop(best);
            self.tell(request.vms.len());
        }
    }

    /// The solver moves on to `stage`.
    pub fn stage(&self, stage: &'static str, vms: usize) {
        *self.stage.lock().unwrap_or_else(|e| e.into_inner()) = stage;
        self.tell(vms);
    }

    fn tell(&self, vms: usize) {
        let Some(hook) = &self.hook else { return };
        let snapshot = Snapshot {
            stage: *self.stage.lock().unwrap_or_else(|e| e.into_inner()),
            vms_placed: self.best().map_or(0, |b| b.cores.len()),
            vms,
        };
        (hook.0)(&snapshot);
    }

    /// Whether only which VMs are placed matters.
    pub(crate) fn placing_only(&self) -> bool {
        self.placing_only
    }

    /// The best kept, unproven.
    pub fn best(&self) -> Option<Placement> {
        self.best.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// What [`exact_with_watchdog`] gives back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// The placement (the best found so far when the solver was abandoned).
    pub placement: Placement,
    /// The solver overran its limit and still runs in its thread: no other
    /// solve should start (it would compete with it for the cores).
    pub abandoned: bool,
}

/// The exact solver ([`ilp::place`]) in a worker thread, for `limit`. If it
/// overruns the limit by more than its [`deadline::grace`] the best
/// placement it published is taken and the thread abandoned: a backend
/// that ignores its time limit must not hang pinplan or break
/// `--time-limit`.
pub fn exact_with_watchdog(
    request: &PlanRequest,
    limit: Duration,
    hook: Option<ProgressHook>,
) -> Result<Watched, ExactError> {
    let deadline = Deadline::after(limit);
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = request.clone();
    let progress = std::sync::Arc::new(Progress::with_hook(hook));
    let shared = std::sync::Arc::clone(&progress);
    let worker = std::thread::Builder::new()
        .name("pinplan-ilp".to_owned())
        .spawn(move || {
            let result = ilp::place(&owned, deadline, &shared);
            // The receiver may be gone after a timeout; nothing to do then.
            let _ = tx.send(result);
        })
        .map_err(|cause| ExactError::Thread { cause })?;
    match rx.recv_timeout(limit + deadline::grace(limit)) {
        Ok(result) => {
            let _ = worker.join();
            result.map(|placement| Watched {
                placement,
                abandoned: false,
            })
        }
        Err(_) => match progress.best() {
            Some(placement) => Ok(Watched {
                placement,
                abandoned: true,
            }),
            None => Err(ExactError::Overran { limit }),
        },
    }
}

/// Whether `a` is lexicographically better than `b` on objectives 1–3.
pub(crate) fn better(request: &PlanRequest, a: &Placement, b: &Placement) -> bool {
    let key = |p: &Placement| {
        let o = objective(request, p);
        (
            o.placed_by_priority
                .iter()
                .map(|&(_, n)| n)
                .collect::<Vec<_>>(),
            o.vcpus_placed,
            std::cmp::Reverse(o.cores_used),
        )
    };
    key(a) > key(b)
}

/// Places the VMs. Never fails: what does not fit is listed as unplaced,
/// with explanations. `deadline` bounds the whole call, the explanations'
/// re-solves included.
pub fn solve(request: &PlanRequest, options: &SolveOptions, deadline: Deadline) -> Plan {
    let limit = deadline.remaining();
    let mut warnings = Vec::new();
    for vm in &request.vms {
        if vm.nic.is_some() && vm.nic_nodes.is_empty() && vm.nic_affinity != NicAffinity::Ignore {
            warnings.push(Warning::vm(
                &vm.name,
                WarningKind::Nic,
                format!(
                    "the NUMA node of NIC {} is unknown (numa_node -1 or not reported): its \
                     nic_affinity is not honoured",
                    vm.nic.map(|a| a.to_string()).unwrap_or_default()
                ),
            ));
        }
    }
    let unknown = classes::free_cores(request)
        .iter()
        .filter(|c| c.node.is_none())
        .count();
    if unknown > 0 && request.vms.iter().any(|v| v.numa == NumaPolicy::Strict) {
        warnings.push(Warning::plan(
            WarningKind::Host,
            format!(
                "{} of this host {} no known NUMA node (offline or unreported node): \
             numa = \"strict\" VMs do not use {}, other VMs may",
                if unknown == 1 {
                    "1 free core".to_owned()
                } else {
                    format!("{unknown} free cores")
                },
                if unknown == 1 { "has" } else { "have" },
                if unknown == 1 { "it" } else { "them" },
            ),
        ));
    }
    if options.solver == SolverKind::Ilp && ilp::per_class_only(request) {
        if let Some(message) = uncounted_memory_warning(request) {
            warnings.push(Warning::plan(WarningKind::Solver, message));
        }
    }
    let started = Instant::now();
    let mut resolve = true;
    let (placement, solver_name) = match options.solver {
        SolverKind::Greedy => (greedy::place(request), SolverKind::Greedy),
        SolverKind::Ilp => {
            match exact_with_watchdog(
                request,
                limit.mul_f64(deadline::EXACT_SHARE),
                options.progress.clone(),
            ) {
                Ok(w) => {
                    resolve = !w.abandoned;
                    (w.placement, SolverKind::Ilp)
                }
                Err(why) => {
                    warnings.push(Warning::plan(
                        WarningKind::Solver,
                        format!("{why}; the greedy first-fit answer is given instead"),
                    ));
                    (greedy::place(request), SolverKind::Greedy)
                }
            }
        }
    };
    // A crash of the backend is why such a plan is not proven: said instead
    // of the time limit.
    if let Some(fault) = &placement.fault {
        warnings.push(Warning::plan(WarningKind::Solver, fault.to_string()));
    } else if !placement.proven
        && options.solver == SolverKind::Ilp
        && solver_name == SolverKind::Ilp
    {
        warnings.push(Warning::plan(
            WarningKind::Solver,
            format!(
                "best found in {:.1} s, not proven optimal within the time limit ({:.1} s \
                 left for the solve)",
                started.elapsed().as_secs_f64(),
                limit.as_secs_f64()
            ),
        ));
    }
    // Explanations check the cores left free first; their re-solves get as
    // long as the solve took (0.1 to 1 s, never past the limit), so that
    // explaining 30 VMs does not take 30 solves' time. An abandoned solver
    // thread still solves: then no re-solve at all.
    let explain_deadline = if resolve {
        deadline::explain_budget(started.elapsed(), deadline)
    } else {
        Deadline::after(Duration::ZERO)
    };
    if let Some(hook) = options
        .progress
        .as_ref()
        .filter(|_| placement.cores.len() < request.vms.len())
    {
        (hook.0)(&Snapshot {
            stage: "explaining the VMs left out",
            vms_placed: placement.cores.len(),
            vms: request.vms.len(),
        });
    }
    let mut plan = build_plan(
        request,
        &placement,
        solver_name,
        options,
        warnings,
        explain_deadline,
    );
    plan.solve_seconds = Some(started.elapsed().as_secs_f64());
    plan
}

/// `cache_aware` VMs whose L3 domains could not become dies (spanned
/// unevenly, or not in runs of whole cores): the guest sees one die.
fn uneven_dies(request: &PlanRequest, vms: &[VmPlan]) -> Vec<Warning> {
    let mut out = Vec::new();
    for plan in vms.iter().filter(|p| p.guest_topology.dies == 1) {
        let Some(vm) = request.vms.iter().find(|v| v.name == plan.name) else {
            continue;
        };
        if !vm.guest.cache_aware {
            continue;
        }
        let mut per_domain: BTreeMap<crate::ids::L3Id, usize> = BTreeMap::new();
        for core in request
            .host
            .cores
            .iter()
            .filter(|c| plan.cores.contains(&c.id))
        {
            if let Some(l3) = core.l3 {
                *per_domain.entry(l3).or_default() += 1;
            }
        }
        if per_domain.len() > 1 {
            let split: Vec<String> = per_domain.values().map(ToString::to_string).collect();
            out.push(Warning::vm(
                &vm.name,
                WarningKind::Host,
                format!(
                    "cache_aware, but the {} L3 domains its cores span ({} cores) are not \
                     equal runs of its vCPUs: the guest sees one die",
                    per_domain.len(),
                    split.join(" + ")
                ),
            ));
        }
    }
    out
}

/// Turns a placement into a plan: vCPU layout, objective, explanations.
pub fn build_plan(
    request: &PlanRequest,
    placement: &Placement,
    solver_name: SolverKind,
    options: &SolveOptions,
    mut warnings: Vec<Warning>,
    deadline: Deadline,
) -> Plan {
    let emulator_host = request.reserved.clone();
    let vms: Vec<VmPlan> = request
        .vms
        .iter()
        .enumerate()
        .filter_map(|(i, vm)| {
            placement.cores.get(&i).map(|cores| {
                let mut plan = assign::layout(&request.host, vm, cores, &emulator_host);
                assign::keep_in_place(&request.host, vm, &mut plan);
                plan
            })
        })
        .collect();
    warnings.extend(uneven_dies(request, &vms));
    let unplaced: Vec<String> = request
        .vms
        .iter()
        .enumerate()
        .filter(|(i, _)| !placement.cores.contains_key(i))
        .map(|(_, vm)| vm.name.clone())
        .collect();
    let (explanations, summary) = if unplaced.is_empty() {
        (Vec::new(), None)
    } else {
        (
            explain::explain(request, placement, options, deadline),
            Some(explain::summary(request, placement)),
        )
    };
    let hugepages = crate::memory::placement::allocations(&request.host, &vms);
    let status = if !unplaced.is_empty() {
        Status::Infeasible
    } else if placement.proven {
        Status::Optimal
    } else {
        Status::Feasible
    };
    Plan {
        status,
        proven: placement.proven,
        solver: solver_name,
        backend: (solver_name == SolverKind::Ilp).then(|| backend::NAME.to_owned()),
        summary,
        solve_seconds: None,
        host: PlanHost {
            source: request.host.source.clone(),
            reserved_cpus: request.reserved.clone(),
            fingerprint: request.host.fingerprint(),
        },
        vms,
        fixed: request
            .fixed
            .iter()
            .map(|f| FixedPlan {
                name: f.name.clone(),
                cpus: f.cpus.clone(),
                kind: f.kind,
            })
            .collect(),
        moves: Vec::new(),
        unplaced,
        hugepages_boot_args: crate::memory::placement::boot_args(&hugepages, &request.host),
        hugepages,
        explanations,
        warnings,
        objective: objective(request, placement),
    }
}

/// The warning of a plan whose VMs' memory the per-class integer program
/// does not count ([`ilp::per_class::uncounted_memory`]), naming them.
fn uncounted_memory_warning(request: &PlanRequest) -> Option<String> {
    let uncounted = ilp::per_class::uncounted_memory(request);
    let names: Vec<&str> = uncounted
        .iter()
        .filter_map(|&i| request.vms.get(i))
        .map(|vm| vm.name.as_str())
        .collect();
    let (first, more) = (names.first()?, names.len() - 1);
    let vms = match more {
        0 => format!("{first}'s"),
        1 => format!("{first}'s and 1 other VM's"),
        _ => format!("{first}'s and {more} other VMs'"),
    };
    Some(if !memory::countable(request) {
        format!(
            "running VMs may move: the integer program that counts their moves does not \
             count memory yet ({vms}), so check the huge pages listed below"
        )
    } else {
        format!(
            "the free cores of this host have different thread counts: the integer program \
             for such hosts counts the memory of VMs kept to one NUMA node (numa = \"strict\") \
             or of a core count the same on every core they may take, not {vms}, so check \
             the huge pages listed below"
        )
    })
}
