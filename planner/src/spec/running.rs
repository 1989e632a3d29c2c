//! A spec on a host that already runs domains (`plan --connect URI`,
//! `[host] connect`): what the plan does with each of them. A domain the
//! spec does not name is a tenant planned around on every CPU its threads
//! may run on (a floating one on all of them, said by name); a running VM
//! the spec names stays where it runs unless it is `movable`; a shut-off
//! domain's config pins count only when asked. The solver never sees the
//! difference: kept VMs and other domains reach it as fixed tenants, and
//! [`Residents::finish`] puts the kept VMs back into the plan as placed,
//! with the moves of the VMs it re-pins.

use super::{Spec, SpecError};
use crate::cpuset::CpuSet;
use crate::deadline::Deadline;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::model::request::{FixedTenant, PlanRequest, VmRequest};
use crate::model::{Message, Warning, WarningKind};
use crate::plan::{FixedKind, GuestTopology, Move, Plan, VcpuPin, VmPlan};
use crate::tenant::{floats, LooseThreads, Tenant, TenantKind, TenantState, VcpuCpus};
use crate::topology::HostTopology;
use std::collections::{BTreeMap, BTreeSet};

/// The domains of the host a spec is planned on, as read through its URI.
#[derive(Debug, Clone, Copy)]
pub struct Running<'a> {
    /// The URI they were read through (for messages).
    pub uri: &'a str,
    /// Every domain there, running and shut off.
    pub domains: &'a [Tenant],
    /// Whether shut-off domains' config pins are planned around too.
    pub count_shut_off: bool,
}

/// What the plan keeps of the running domains the spec names, to finish
/// the solver's plan with ([`Residents::finish`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Residents {
    /// Running VMs kept where they run, as placed VMs, with their priority.
    kept: Vec<(VmPlan, i64)>,
    /// The running VMs the plan may re-pin, with their vCPUs' CPUs now.
    now: BTreeMap<String, Vec<VcpuCpus>>,
    /// The same VMs' CPUs now, as a tenant planned around would take them:
    /// what the plan keeps off when one of them cannot be placed.
    held: BTreeMap<String, CpuSet>,
    /// The same VMs' NUMA nodes now (of their pinned vCPUs), and whether
    /// their memory is bound there strictly (`numatune` strict).
    nodes: BTreeMap<String, (BTreeSet<NodeId>, bool)>,
    /// The spec's VM names, in spec order.
    order: Vec<String>,
}

/// The CPUs a domain keeps from the plan: every CPU its vCPUs, emulator
/// and I/O threads may run on, less the host's reserved CPUs (where
/// emulator threads are meant to be; vCPUs there are warned about).
fn taken(tenant: &Tenant, reserved: &CpuSet) -> CpuSet {
    tenant.every_cpu().difference(reserved)
}

/// The fix for a domain that floats over the CPUs the plan needs.
const FLOATING_FIX: &str = "pin it, name it in the spec, or list it under [[ignore]]";

impl Spec {
    /// [`Spec::request_with`] on a host that runs `running.domains`: the
    /// request plans around every domain the spec does not name (or
    /// `[[ignore]]`s), keeps the running VMs it names where they run unless
    /// they are `movable`, and says what it did in the warnings. The
    /// [`Residents`] finish the solver's plan.
    pub fn request_running(
        &self,
        host: HostTopology,
        defined: &BTreeMap<String, (String, String)>,
        running: &Running<'_>,
    ) -> Result<(PlanRequest, Vec<Warning>, Residents), SpecError> {
        let (mut request, mut warnings) = self.request_with(host, defined)?;
        let mut residents = Residents {
            order: self.vms.iter().map(|v| v.name.clone()).collect(),
            ..Residents::default()
        };
        let usable = request.host.usable_cpus();
        let reserved = request.reserved.clone();
        // Domains that keep every CPU a VM could have: what else they share
        // goes without saying.
        let mut floating: BTreeSet<String> = BTreeSet::new();
        for t in running.domains.iter().filter(|t| t.kind == TenantKind::Vm) {
            let name = t.name.as_str();
            // The spec's own word on a domain wins: its [[fixed]] CPUs, or
            // its [[ignore]].
            if self.fixes(name) {
                continue;
            }
            if self.ignores(name) {
                if t.state == TenantState::Running {
                    warnings.push(Warning::plan(
                        WarningKind::Running,
                        format!(
                            "domain {name} runs at {} and is ignored ([[ignore]]): the plan may give its CPUs {} to a VM",
                            running.uri,
                            t.every_cpu()
                        ),
                    ));
                }
                continue;
            }
            let named = self.vms.iter().find(|v| v.name == name);
            match (named, t.state) {
                (Some(_), TenantState::ShutOff) => {}
                (Some(vm), TenantState::Running) => {
                    residents.resident(t, vm.movable, &mut request, &mut warnings);
                }
                (None, TenantState::Running) => {
                    if let Some(fixed) =
                        plan_around(t, running.uri, &usable, &reserved, &mut warnings)
                    {
                        if usable.difference(&reserved).is_subset(&fixed.cpus) {
                            floating.insert(name.to_owned());
                        }
                        request.fixed.push(fixed);
                    }
                }
                (None, TenantState::ShutOff) => {
                    if !t.pinned {
                        continue;
                    }
                    let cpus = taken(t, &reserved);
                    if running.count_shut_off {
                        if !cpus.is_empty() {
                            request.fixed.push(FixedTenant {
                                name: name.to_owned(),
                                cpus,
                                kind: FixedKind::ShutOff,
                            });
                        }
                    } else if !cpus.is_empty() {
                        warnings.push(Warning::plan(
                            WarningKind::Running,
                            format!(
                                "domain {name} is shut off: its config pins CPUs {cpus}, which the plan does not keep free (--count-shut-off does); it would share them if started"
                            ),
                        ));
                    }
                }
            }
        }
        shared_cores(&request, &residents, &floating, &mut warnings);
        warnings.extend(self.no_domain(running));
        Ok((request, warnings, residents))
    }

    /// A warning for each VM of the spec that no domain at the URI has
    /// (a typo is planned as a new VM, and `apply` refuses it), with the
    /// closest domain the spec does not name.
    fn no_domain(&self, running: &Running<'_>) -> Vec<Warning> {
        let domains: Vec<&str> = running
            .domains
            .iter()
            .filter(|t| t.kind == TenantKind::Vm)
            .map(|t| t.name.as_str())
            .collect();
        let unnamed = || {
            domains
                .iter()
                .copied()
                .filter(|d| !self.vms.iter().any(|v| v.name == *d))
        };
        self.vms
            .iter()
            .filter(|vm| !domains.contains(&vm.name.as_str()))
            .map(|vm| {
                let guess = crate::text::closest(&vm.name, unnamed())
                    .map(|d| format!(" (did you mean {d}?)"))
                    .unwrap_or_default();
                Warning::about(
                    &vm.name,
                    WarningKind::Running,
                    Message::new().text("vm ").vm(&vm.name).text(format!(
                        ": no domain of that name at {}{guess}: it is planned as a new VM; apply \
                         will refuse it",
                        running.uri
                    )),
                )
            })
            .collect()
    }
}

/// A warning whose sentence starts with running VM `name` (`text` follows).
fn running_vm(name: &str, text: impl Into<String>) -> Warning {
    Warning::about(
        name,
        WarningKind::Running,
        Message::new().vm(name).text(text),
    )
}

impl Residents {
    /// The running VMs of `request` (by name, among `domains`) as
    /// [`Residents::resident`] takes them, `movable(name)` saying which may
    /// move: a fleet host's plan, for the VMs the assignment gave it that
    /// run there. `order` is the VMs' order in the plan.
    pub fn on_host(
        request: &mut PlanRequest,
        domains: &[Tenant],
        movable: &dyn Fn(&str) -> bool,
        order: Vec<String>,
        warnings: &mut Vec<Warning>,
    ) -> Residents {
        let mut residents = Residents {
            order,
            ..Residents::default()
        };
        for t in domains
            .iter()
            .filter(|t| t.kind == TenantKind::Vm && t.state == TenantState::Running)
        {
            if request.vms.iter().any(|v| v.name == t.name) {
                residents.resident(t, movable(&t.name), request, warnings);
            }
        }
        residents
    }

    /// A running VM the plan places (`t`, of `request.vms`): a `movable`
    /// one is planned with its moves counted; else it is kept as a placed
    /// VM when each vCPU runs on one CPU, planned like a new VM when it
    /// floats wholly (it has no place to keep), otherwise planned around as
    /// it runs, and said.
    pub fn resident(
        &mut self,
        t: &Tenant,
        movable: bool,
        request: &mut PlanRequest,
        warnings: &mut Vec<Warning>,
    ) {
        let usable = &request.host.usable_cpus();
        let reserved = &request.reserved.clone();
        let residents = self;
        let name = t.name.as_str();
        // Planned anew: where it runs now is what its moves are counted
        // from, and what the plan keeps off should it be left out.
        let anew = |residents: &mut Residents, request: &mut PlanRequest| {
            residents.now.insert(name.to_owned(), t.vcpus.clone());
            residents.held.insert(name.to_owned(), taken(t, reserved));
            mark_running(request, t, usable);
        };
        if movable {
            anew(residents, request);
            let nodes: BTreeSet<NodeId> = t
                .vcpus
                .iter()
                .filter(|v| !floats(&v.cpus, usable))
                .flat_map(|v| v.cpus.iter())
                .filter_map(|cpu| request.host.pu(cpu).and_then(|p| p.numa_node))
                .collect();
            let strict = t.memory.as_ref().is_some_and(|m| m.mode == "strict");
            residents.nodes.insert(name.to_owned(), (nodes, strict));
            return;
        }
        let Some(index) = request.vms.iter().position(|v| v.name == name) else {
            return;
        };
        let wholly_floating =
            !t.vcpus.is_empty() && t.vcpus.iter().all(|v| floats(&v.cpus, usable));
        if wholly_floating {
            anew(residents, request);
            warnings.push(running_vm(
                name,
                " runs with its vCPUs not pinned: planned like a new VM (apply pins it where the plan says)",
            ));
            return;
        }
        let vm = request.vms.remove(index);
        vcpus_on_reserved(t, usable, reserved, warnings);
        let loose = LooseThreads::of(t, usable);
        if !loose.is_empty() {
            let (named, many) = loose.named();
            warnings.push(running_vm(
                name,
                format!(
                    " is kept where it runs, but its {named} may run on every CPU, so the plan keeps off CPUs {cpus}; pin {them}, or set movable = true so that the plan pins {them}",
                    cpus = taken(t, reserved),
                    them = if many { "them" } else { "it" },
                ),
            ));
        }
        let mut cpus = taken(t, reserved);
        match kept_plan(&vm, t, &request.host, usable, reserved) {
            Ok(plan) => {
                if plan.vcpus.len() != vm.vcpus as usize {
                    warnings.push(running_vm(
                        name,
                        format!(
                            " runs {} vCPUs and the spec asks for {}: kept as it runs (set movable = true to plan it anew; its vCPU count changes when its domain is redefined)",
                            plan.vcpus.len(),
                            vm.vcpus
                        ),
                    ));
                }
                cpus = cpus.union(&plan.cpus);
                residents.kept.push((plan, vm.priority));
            }
            Err(why) => warnings.push(running_vm(
                name,
                format!(
                    " runs with {why}, which a plan (each vCPU on one CPU of this host) cannot keep: planned around where it runs; set movable = true to let the plan pin it"
                ),
            )),
        }
        if !cpus.is_empty() {
            request.fixed.push(FixedTenant {
                name: name.to_owned(),
                cpus,
                kind: FixedKind::Running,
            });
        }
    }
}

/// A running VM the plan may re-pin: placed before any priority level, and
/// where its vCPUs' order may follow their CPUs (one thread per core in the
/// guest, no roles: [`crate::solve::assign::can_keep_in_place`]), the ones
/// pinned to one CPU each are moved as few as can be.
fn mark_running(request: &mut PlanRequest, t: &Tenant, usable: &CpuSet) {
    let threads: BTreeSet<usize> = request
        .host
        .cores
        .iter()
        .map(|c| c.cpus.intersection(usable).len())
        .filter(|&n| n > 0)
        .collect();
    let host = &request.host;
    let Some(vm) = request.vms.iter_mut().find(|v| v.name == t.name) else {
        return;
    };
    vm.running = true;
    // The guest's threads per core the layout will give it: one for
    // isolate or a host of one thread per core; pairs on a host of two
    // threads per core everywhere (else it is not known before placing).
    let guest_threads = match (vm.threads, threads.iter().max()) {
        (crate::model::ThreadPolicy::Isolate, _) | (_, None | Some(1)) => 1,
        (_, Some(2)) if threads.len() == 1 => 2,
        _ => return,
    };
    if !crate::solve::assign::can_keep_in_place(vm, guest_threads) {
        return;
    }
    let mut seen = CpuSet::new();
    let single: BTreeMap<u32, crate::ids::CpuId> = t
        .vcpus
        .iter()
        .filter(|v| v.vcpu < vm.vcpus && v.cpus.len() == 1)
        .filter_map(|v| {
            let cpu = v.cpus.first()?;
            seen.insert(cpu).then_some((v.vcpu, cpu))
        })
        .collect();
    let core = |cpu: crate::ids::CpuId| host.pu(cpu).and_then(|p| p.core);
    vm.now = single
        .iter()
        .filter(|&(&vcpu, &cpu)| {
            // In pairs, a vCPU can only stay with its partner on the
            // sibling of its core.
            guest_threads == 1
                || single
                    .get(&(vcpu ^ 1))
                    .is_some_and(|&other| core(other).is_some() && core(other) == core(cpu))
        })
        .map(|(&vcpu, &cpu)| (vcpu, cpu))
        .collect();
}

/// A running domain the spec does not name, as a tenant to plan around on
/// every CPU its threads may run on (less the host's reserved CPUs), with a
/// warning naming it when some of its threads float, or when its vCPUs are
/// on the host's CPUs; `None` when it keeps no CPU a VM could have. The one
/// rule for one host and for each host of a fleet.
pub fn plan_around(
    t: &Tenant,
    uri: &str,
    usable: &CpuSet,
    reserved: &CpuSet,
    warnings: &mut Vec<Warning>,
) -> Option<FixedTenant> {
    let name = &t.name;
    let loose = LooseThreads::of(t, usable);
    let cpus = taken(t, reserved);
    if !loose.is_empty() {
        let (named, many) = loose.named();
        warnings.push(Warning::plan(
            WarningKind::Running,
            format!(
                "domain {name} runs at {uri} with its {named} not pinned: {} may run on every CPU, so the plan keeps off CPUs {cpus}{}; {FLOATING_FIX}",
                if many { "they" } else { "it" },
                if usable.difference(reserved).is_subset(&cpus) {
                    " (every CPU a VM could have)"
                } else {
                    ""
                }
            ),
        ));
    }
    vcpus_on_reserved(t, usable, reserved, warnings);
    (!cpus.is_empty()).then(|| FixedTenant {
        name: name.clone(),
        cpus,
        kind: FixedKind::Running,
    })
}

/// A warning when a domain's pinned vCPUs run on the host's reserved CPUs
/// (the plan cannot fix that without moving it; floating vCPUs are warned
/// about as such).
fn vcpus_on_reserved(t: &Tenant, usable: &CpuSet, reserved: &CpuSet, warnings: &mut Vec<Warning>) {
    let on = t
        .vcpus
        .iter()
        .filter(|v| !floats(&v.cpus, usable))
        .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus))
        .intersection(reserved);
    if !on.is_empty() {
        warnings.push(Warning::plan(
            WarningKind::Running,
            format!(
                "domain {} runs vCPUs on the host's reserved CPUs {on}: they share them with the host; move it off them (or reserve other CPUs with reserved_cpus)",
                t.name
            ),
        ));
    }
}

/// Why a running VM cannot be kept where it runs, worded to follow
/// "runs with".
#[derive(Debug, thiserror::Error)]
enum NotKeepable {
    /// vCPUs that may run on several CPUs each (`vCPU 0: 2-3, …`).
    #[error("vCPUs pinned to several CPUs each ({0})")]
    Floating(String),
    /// A vCPU with an empty pin.
    #[error("vCPU {0} pinned to no CPU")]
    Unpinned(u32),
    /// A vCPU on a CPU the host lacks or has offline.
    #[error("vCPU {vcpu} on CPU {cpu}, which {host} does not have online")]
    Offline { vcpu: u32, cpu: CpuId, host: String },
}

/// A running VM as a placed VM: each vCPU on the one CPU it runs on, the
/// cores of those CPUs (and of its pinned emulator and I/O threads off the
/// host's CPUs) its own. `Err` says why not: a vCPU that may run on several
/// CPUs, or on one the host does not have (or has offline).
fn kept_plan(
    vm: &VmRequest,
    t: &Tenant,
    host: &HostTopology,
    usable: &CpuSet,
    reserved: &CpuSet,
) -> Result<VmPlan, NotKeepable> {
    let mut pins = Vec::with_capacity(t.vcpus.len());
    let mut cores: BTreeSet<CoreId> = BTreeSet::new();
    let sets: Vec<String> = t
        .vcpus
        .iter()
        .filter(|v| v.cpus.len() != 1)
        .map(|v| format!("vCPU {}: {}", v.vcpu, v.cpus))
        .collect();
    if !sets.is_empty() {
        return Err(NotKeepable::Floating(sets.join(", ")));
    }
    for v in &t.vcpus {
        let Some(cpu) = v.cpus.first() else {
            return Err(NotKeepable::Unpinned(v.vcpu));
        };
        let core = host
            .pu(cpu)
            .and_then(|p| p.core)
            .ok_or_else(|| NotKeepable::Offline {
                vcpu: v.vcpu,
                cpu,
                host: host.source.clone(),
            })?;
        cores.insert(core);
        pins.push(VcpuPin {
            vcpu: v.vcpu,
            cpu,
            role: vm.roles.of(v.vcpu),
        });
    }
    let pinned_threads = std::iter::once(&t.emulator_cpus)
        .chain(t.iothreads.iter().map(|i| &i.cpus))
        .filter(|set| !floats(set, usable));
    for set in pinned_threads {
        for cpu in set.difference(reserved).iter() {
            if let Some(core) = host.pu(cpu).and_then(|p| p.core) {
                cores.insert(core);
            }
        }
    }
    let mut cpus = CpuSet::new();
    let mut nodes: BTreeSet<NodeId> = BTreeSet::new();
    for core in cores.iter().filter_map(|&c| host.core(c)) {
        cpus = cpus.union(&core.cpus.intersection(usable));
        nodes.extend(core.numa_node);
    }
    let count = u32::try_from(pins.len()).unwrap_or(u32::MAX);
    Ok(VmPlan {
        name: t.name.clone(),
        vcpus: pins,
        cores: cores.into_iter().collect(),
        cpus,
        emulator_cpus: t.emulator_cpus.clone(),
        iothreads: t
            .iothreads
            .iter()
            .map(|i| crate::plan::IothreadPin {
                iothread: i.iothread,
                cpus: i.cpus.clone(),
            })
            .collect(),
        numa_nodes: nodes.into_iter().collect(),
        guest_cells: Vec::new(),
        guest_topology: GuestTopology::new(count, 1),
        threads: vm.threads,
        demand: vm.demand.clone(),
        nic: vm.nic,
        nics: vm.plan_nics(),
        memory: None,
        realtime_vcpus: None,
        kept: true,
    })
}

/// Running domains (kept VMs among them) that share a physical core as they
/// run: the plan keeps them so, and says so.
fn shared_cores(
    request: &PlanRequest,
    residents: &Residents,
    floating: &BTreeSet<String>,
    warnings: &mut Vec<Warning>,
) {
    let host = &request.host;
    let cores_of = |cpus: &CpuSet| -> BTreeSet<CoreId> {
        cpus.iter()
            .filter_map(|cpu| host.pu(cpu).and_then(|p| p.core))
            .collect()
    };
    let running: Vec<(&str, BTreeSet<CoreId>)> = request
        .fixed
        .iter()
        .filter(|f| f.kind == FixedKind::Running && !floating.contains(&f.name))
        .map(|f| (f.name.as_str(), cores_of(&f.cpus)))
        .collect();
    for (i, (a, cores_a)) in running.iter().enumerate() {
        for (b, cores_b) in running.iter().skip(i + 1) {
            let both: Vec<String> = cores_a
                .intersection(cores_b)
                .map(ToString::to_string)
                .collect();
            if both.is_empty() {
                continue;
            }
            let kept = |n: &str| residents.kept.iter().any(|(k, _)| k.name == n);
            let fix = if kept(a) || kept(b) {
                "set movable = true on the one the spec names so that the plan separates them"
            } else {
                "pin one of them elsewhere"
            };
            warnings.push(Warning::plan(
                WarningKind::Running,
                Message::new().vm(*a).text(" and ").vm(*b).text(format!(
                    " run on the same {} {}: they go on sharing as they run; {fix}",
                    if both.len() == 1 { "core" } else { "cores" },
                    both.join(",")
                )),
            ));
        }
    }
}

impl Residents {
    /// Solves `request` and finishes the plan ([`Residents::finish`]). A
    /// running VM the plan may move that it cannot place goes on running
    /// where it runs: then it is planned around there (every CPU its
    /// threads may run on) and the rest solved again within what is left
    /// of the time limit, so that no VM is given a core it runs on.
    pub fn solve(
        &self,
        request: &PlanRequest,
        options: &crate::solve::SolveOptions,
        deadline: Deadline,
    ) -> Plan {
        let first = crate::solve::solve(request, options, deadline);
        let left: Vec<(String, CpuSet)> = first
            .unplaced
            .iter()
            .filter_map(|n| self.held.get(n).map(|cpus| (n.clone(), cpus.clone())))
            .collect();
        let mut plan = if left.is_empty() {
            first
        } else {
            let mut again = request.clone();
            let mut notes = Vec::new();
            for (name, cpus) in &left {
                again.vms.retain(|v| &v.name != name);
                notes.push(running_vm(
                    name,
                    format!(
                        " runs here and could not be placed: it goes on running where it runs, and the plan keeps off CPUs {cpus}; free cores for it (or lower its vcpus), or stop it"
                    ),
                ));
                if !cpus.is_empty() {
                    again.fixed.push(FixedTenant {
                        name: name.clone(),
                        cpus: cpus.clone(),
                        kind: FixedKind::Running,
                    });
                }
            }
            let again_by = deadline.at_least(crate::deadline::RESOLVE_LEAST);
            let mut plan = crate::solve::solve(&again, options, again_by);
            plan.warnings.extend(notes);
            for (name, _) in &left {
                plan.unplaced.push(name.clone());
                plan.explanations
                    .extend(first.explanations.iter().filter(|e| &e.vm == name).cloned());
            }
            plan.status = crate::plan::Status::Infeasible;
            if plan.summary.is_none() {
                plan.summary.clone_from(&first.summary);
            }
            plan
        };
        self.finish(&mut plan);
        plan
    }

    /// Whether the plan keeps or may move any running VM.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.kept.is_empty() && self.now.is_empty()
    }

    /// The solver's plan with the kept VMs placed (in spec order, counted
    /// in the objective) instead of listed as fixed tenants, and the moves
    /// of the running VMs it re-pins.
    pub fn finish(&self, plan: &mut Plan) {
        let kept: BTreeSet<&str> = self.kept.iter().map(|(k, _)| k.name.as_str()).collect();
        plan.fixed.retain(|f| !kept.contains(f.name.as_str()));
        for (vm, priority) in &self.kept {
            let priority = *priority;
            let objective = &mut plan.objective;
            objective.placed += 1;
            let vcpus = u32::try_from(vm.vcpus.len()).unwrap_or(u32::MAX);
            objective.vcpus_placed = objective.vcpus_placed.saturating_add(vcpus);
            let cores = u32::try_from(vm.cores.len()).unwrap_or(u32::MAX);
            objective.cores_used = objective.cores_used.saturating_add(cores);
            match objective
                .placed_by_priority
                .iter_mut()
                .find(|(p, _)| *p == priority)
            {
                Some((_, n)) => *n += 1,
                None => {
                    objective.placed_by_priority.push((priority, 1));
                    objective
                        .placed_by_priority
                        .sort_by_key(|&(p, _)| std::cmp::Reverse(p));
                }
            }
            plan.vms.push(vm.clone());
        }
        let position: BTreeMap<&str, usize> = self
            .order
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect();
        plan.vms
            .sort_by_key(|v| position.get(v.name.as_str()).copied().unwrap_or(usize::MAX));
        plan.moves = plan
            .vms
            .iter()
            .filter(|vm| !vm.kept)
            .filter_map(|vm| self.now.get(&vm.name).map(|now| (vm, now)))
            .flat_map(|(vm, now)| {
                vm.vcpus.iter().filter_map(|pin| {
                    let from = now.iter().find(|v| v.vcpu == pin.vcpu)?;
                    let to: CpuSet = std::iter::once(pin.cpu).collect();
                    (from.cpus != to).then(|| Move {
                        vm: vm.name.clone(),
                        vcpu: pin.vcpu,
                        from: from.cpus.clone(),
                        to: pin.cpu,
                    })
                })
            })
            .collect();
        plan.objective.vcpus_moved = u32::try_from(plan.moves.len()).unwrap_or(u32::MAX);
        // A move to other NUMA nodes leaves the guest's memory where it is.
        let mut notes = Vec::new();
        for vm in plan.vms.iter().filter(|v| !v.kept) {
            let Some((was, strict)) = self.nodes.get(&vm.name) else {
                continue;
            };
            let to: BTreeSet<NodeId> = vm.numa_nodes.iter().copied().collect();
            if was.is_empty() || *was == to {
                continue;
            }
            let list = |nodes: &BTreeSet<NodeId>| {
                nodes
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            };
            notes.push(running_vm(&vm.name, format!(
                " moves from NUMA node(s) {} to {}: pinplan does not move a running guest's memory, so it stays on {} until the guest restarts{}",
                list(was),
                list(&to),
                list(was),
                if *strict {
                    " — and its memory is bound there strictly (numatune strict), so its vCPUs reach all of it remotely; set movable = false to keep it where it runs"
                } else {
                    " (its vCPUs reach it remotely meanwhile)"
                }
            )));
        }
        plan.warnings.extend(notes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::domain::tenant_from_domain;
    use crate::solve::{solve, SolveOptions};

    /// Ten seconds from now: a test solve's deadline.
    fn ten_seconds() -> Deadline {
        Deadline::after(std::time::Duration::from_secs(10))
    }

    /// The tests' host: 4 cores, siblings N and N+4; the spec reserves
    /// core 0 (CPUs 0,4).
    fn host() -> HostTopology {
        crate::tenant::test_host()
    }

    fn spec(vms: &str) -> Spec {
        let text = format!("[host]\nreserved_cores = 1\n{vms}");
        Spec::parse(std::path::Path::new("spec.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A domain: `pins` as `<cputune>` lines, shut off or running.
    fn domain(name: &str, vcpus: u32, cputune: &str, state: TenantState) -> Tenant {
        let xml = format!(
            "<domain><name>{name}</name><vcpu>{vcpus}</vcpu><cputune>{cputune}</cputune></domain>"
        );
        let mut t = tenant_from_domain(&format!("{name}.xml"), &xml, &host())
            .unwrap_or_else(|e| panic!("{e}"));
        t.state = state;
        t
    }

    const RUNNING: TenantState = TenantState::Running;
    const OFF: TenantState = TenantState::ShutOff;

    /// The request on `host()` at `test:///x`; the warnings but those about
    /// the spec's new VMs (no domain of their name, see
    /// [`a_spec_vm_no_domain_has_is_named_with_the_closest_domain`]).
    fn on_host(
        spec: &Spec,
        domains: &[Tenant],
        count_shut_off: bool,
    ) -> (PlanRequest, Vec<Warning>, Residents) {
        let (request, mut warnings, residents) = on_host_all(spec, domains, count_shut_off);
        warnings.retain(|w| !w.to_string().contains(": no domain of that name at "));
        (request, warnings, residents)
    }

    fn on_host_all(
        spec: &Spec,
        domains: &[Tenant],
        count_shut_off: bool,
    ) -> (PlanRequest, Vec<Warning>, Residents) {
        spec.request_running(
            host(),
            &BTreeMap::new(),
            &Running {
                uri: "test:///x",
                domains,
                count_shut_off,
            },
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A spec VM whose name no domain has is planned as a new VM, with a
    /// warning that names the closest domain the spec does not name itself
    /// (`trial-c` is `trial-x`'s; `trial-a`, named in the spec, is never
    /// suggested); a name far from every domain gets no guess.
    #[test]
    fn a_spec_vm_no_domain_has_is_named_with_the_closest_domain() {
        let s = spec(
            "[[vm]]\nname = \"trial-x\"\nvcpus = 1\n[[vm]]\nname = \"trial-a\"\nvcpus = 1\n\
             [[vm]]\nname = \"database\"\nvcpus = 1\n",
        );
        let domains = [domain("trial-a", 1, "", OFF), domain("trial-c", 1, "", OFF)];
        let (request, warnings, _) = on_host_all(&s, &domains, false);
        assert_eq!(request.vms.len(), 3);
        let texts: Vec<String> = warnings.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "vm trial-x: no domain of that name at test:///x (did you mean trial-c?): it is \
                 planned as a new VM; apply will refuse it",
                "vm database: no domain of that name at test:///x: it is planned as a new VM; \
                 apply will refuse it",
            ]
        );
        assert_eq!(warnings[0].vm.as_deref(), Some("trial-x"));
    }

    fn fixed(request: &PlanRequest) -> Vec<(String, String, FixedKind)> {
        request
            .fixed
            .iter()
            .map(|f| (f.name.clone(), f.cpus.to_string(), f.kind))
            .collect()
    }

    /// What each kind of domain the spec does not name becomes: its
    /// threads' CPUs less the host's (emulator threads there are meant to
    /// be), a floating one every CPU a VM could have and a warning naming
    /// it with the fix, a shut-off one nothing unless counted.
    #[test]
    fn domains_the_spec_does_not_name_are_planned_around() {
        let s = spec("[[vm]]\nname = \"new\"\nvcpus = 1\n");
        let pinned = "<vcpupin vcpu='0' cpuset='1'/><emulatorpin cpuset='0'/>";
        let io = "<vcpupin vcpu='0' cpuset='1'/><emulatorpin cpuset='2'/>";
        for (domains, count, want, warning) in [
            (vec![domain("a", 1, pinned, RUNNING)], false, vec![("a", "1", FixedKind::Running)], None),
            // The emulator off the host's CPUs takes its core too.
            (vec![domain("a", 1, io, RUNNING)], false, vec![("a", "1-2", FixedKind::Running)], None),
            (
                vec![domain("b", 1, "", RUNNING)],
                false,
                vec![("b", "1-3,5-7", FixedKind::Running)],
                Some("domain b runs at test:///x with its vCPU 0 and emulator not pinned: they may run on every CPU, so the plan keeps off CPUs 1-3,5-7 (every CPU a VM could have); pin it, name it in the spec, or list it under [[ignore]]"),
            ),
            // Pinned vCPUs, floating emulator: still floats.
            (
                vec![domain("e", 1, "<vcpupin vcpu='0' cpuset='1'/>", RUNNING)],
                false,
                vec![("e", "1-3,5-7", FixedKind::Running)],
                Some("domain e runs at test:///x with its emulator not pinned: it may run"),
            ),
            (
                vec![domain("c", 1, "<vcpupin vcpu='0' cpuset='2'/>", OFF)],
                false,
                vec![],
                Some("domain c is shut off: its config pins CPUs 1-3,5-7, which the plan does not keep free (--count-shut-off does); it would share them if started"),
            ),
            (
                vec![domain("c", 1, "<vcpupin vcpu='0' cpuset='2'/><emulatorpin cpuset='0'/>", OFF)],
                true,
                vec![("c", "2", FixedKind::ShutOff)],
                None,
            ),
            // A shut-off domain without pins takes nothing when counted.
            (vec![domain("d", 1, "", OFF)], true, vec![], None),
        ] {
            let (request, warnings, residents) = on_host(&s, &domains, count);
            let got = fixed(&request);
            let want: Vec<(String, String, FixedKind)> = want
                .into_iter()
                .map(|(n, c, k)| (n.to_owned(), c.to_owned(), k))
                .collect();
            assert_eq!(got, want, "{domains:?}");
            match warning {
                Some(w) => assert!(warnings.iter().any(|x| x.to_string().starts_with(w)), "{w:?} not in {warnings:?}"),
                None => assert!(warnings.is_empty(), "{warnings:?}"),
            }
            assert!(residents.is_empty());
            assert_eq!(request.vms.len(), 1);
        }
    }

    /// `[[ignore]]` and a spec's `[[fixed]]` of the same name win over what
    /// runs.
    #[test]
    fn ignored_and_fixed_domains_take_what_the_spec_says() {
        let s = spec(
            "[[vm]]\nname = \"new\"\nvcpus = 1\n[[ignore]]\nname = \"b\"\n[[fixed]]\nname = \"a\"\ncpus = \"3\"\n",
        );
        let domains = [
            domain(
                "a",
                1,
                "<vcpupin vcpu='0' cpuset='1'/><emulatorpin cpuset='0'/>",
                RUNNING,
            ),
            domain("b", 1, "", RUNNING),
        ];
        let (request, warnings, _) = on_host(&s, &domains, false);
        assert_eq!(
            fixed(&request),
            vec![("a".to_owned(), "3".to_owned(), FixedKind::Spec)]
        );
        assert_eq!(
            warnings,
            vec!["domain b runs at test:///x and is ignored ([[ignore]]): the plan may give its CPUs 0-7 to a VM"]
        );
    }

    /// A running VM the spec names stays where it runs, wherever the spec
    /// lists it, and is placed in the plan (kept, counted, in spec order);
    /// the new VMs get the other cores; a movable one is planned and its
    /// moves listed.
    #[test]
    fn named_running_vms_are_kept_unless_movable() {
        let a =
            "<vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='5'/><emulatorpin cpuset='0'/>";
        for movable in [false, true] {
            let s = spec(&format!(
                "[[vm]]\nname = \"c\"\nvcpus = 2\n[[vm]]\nname = \"d\"\nvcpus = 2\n\
                 [[vm]]\nname = \"a\"\nvcpus = 2\nmovable = {movable}\n"
            ));
            let (request, warnings, residents) = on_host(&s, &[domain("a", 2, a, RUNNING)], false);
            assert!(warnings.is_empty(), "{warnings:?}");
            let mut plan = solve(&request, &SolveOptions::default(), ten_seconds());
            residents.finish(&mut plan);
            let names: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(names, ["c", "d", "a"], "{plan:?}");
            assert!(plan.unplaced.is_empty());
            assert!(plan.fixed.is_empty(), "{:?}", plan.fixed);
            assert_eq!(plan.objective.placed, 3);
            assert_eq!(plan.objective.vcpus_placed, 6);
            assert_eq!(plan.objective.placed_by_priority, vec![(0, 3)]);
            let vm_a = &plan.vms[2];
            assert_eq!(vm_a.kept, !movable);
            if !movable {
                let pins: Vec<(u32, u32)> = vm_a.vcpus.iter().map(|p| (p.vcpu, p.cpu.0)).collect();
                assert_eq!(pins, [(0, 1), (1, 5)]);
                assert_eq!(vm_a.cpus.to_string(), "1,5");
                assert_eq!(vm_a.emulator_cpus.to_string(), "0");
                assert!(plan.moves.is_empty());
            }
            // Never two VMs on one core.
            let mut seen = BTreeSet::new();
            for vm in &plan.vms {
                for core in &vm.cores {
                    assert!(seen.insert(*core), "core {core} twice: {plan:?}");
                }
            }
            // The moves are exactly the vCPUs whose CPU changed.
            let moved: Vec<(u32, u32)> = plan.moves.iter().map(|m| (m.vcpu, m.to.0)).collect();
            let changed: Vec<(u32, u32)> = vm_a
                .vcpus
                .iter()
                .filter(|p| (p.vcpu, p.cpu.0) != (0, 1) && (p.vcpu, p.cpu.0) != (1, 5))
                .map(|p| (p.vcpu, p.cpu.0))
                .collect();
            assert_eq!(moved, changed);
        }
    }

    /// What cannot be kept as a placement is said: a VM floating wholly is
    /// planned like a new one (and its moves listed); one pinned to sets of
    /// CPUs is planned around; a kept VM whose vCPU count differs from the
    /// spec's is named.
    #[test]
    fn running_vms_that_cannot_be_kept_as_placed_say_why() {
        let s = spec("[[vm]]\nname = \"a\"\nvcpus = 1\n");
        let (request, warnings, residents) = on_host(&s, &[domain("a", 1, "", RUNNING)], false);
        assert_eq!(request.vms.len(), 1);
        assert!(request.fixed.is_empty());
        assert_eq!(
            warnings,
            ["a runs with its vCPUs not pinned: planned like a new VM (apply pins it where the plan says)"]
        );
        let mut plan = solve(&request, &SolveOptions::default(), ten_seconds());
        residents.finish(&mut plan);
        assert_eq!(plan.moves.len(), 1, "{plan:?}");
        assert_eq!(plan.moves[0].from.to_string(), "0-7");

        let sets = "<vcpupin vcpu='0' cpuset='1-2'/><emulatorpin cpuset='0'/>";
        let (request, warnings, _) = on_host(&s, &[domain("a", 1, sets, RUNNING)], false);
        assert!(request.vms.is_empty());
        assert_eq!(
            fixed(&request),
            [("a".to_owned(), "1-2".to_owned(), FixedKind::Running)]
        );
        assert!(
            warnings[0]
                .to_string()
                .starts_with("a runs with vCPUs pinned to several CPUs each (vCPU 0: 1-2)"),
            "{warnings:?}"
        );

        let two =
            "<vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='2'/><emulatorpin cpuset='0'/>";
        let (_, warnings, _) = on_host(&s, &[domain("a", 2, two, RUNNING)], false);
        assert_eq!(
            warnings,
            ["a runs 2 vCPUs and the spec asks for 1: kept as it runs (set movable = true to plan it anew; its vCPU count changes when its domain is redefined)"]
        );
    }

    /// A running VM the plan may move but cannot place goes on running
    /// where it runs: no VM gets its cores, and the plan says so.
    #[test]
    fn a_movable_vm_left_out_keeps_its_cores_from_others() {
        let s = spec(
            "[[vm]]\nname = \"n\"\nvcpus = 1\nthreads = \"isolate\"\n\
             [[vm]]\nname = \"a\"\nvcpus = 8\nthreads = \"isolate\"\nmovable = true\n",
        );
        let a =
            "<vcpupin vcpu='0' cpuset='1'/><vcpupin vcpu='1' cpuset='2'/><emulatorpin cpuset='0'/>";
        let (request, _, residents) = on_host(&s, &[domain("a", 2, a, RUNNING)], false);
        for solver in [
            crate::solve::SolverKind::Ilp,
            crate::solve::SolverKind::Greedy,
        ] {
            let options = SolveOptions {
                solver,
                ..SolveOptions::default()
            };
            let plan = residents.solve(&request, &options, ten_seconds());
            assert_eq!(plan.unplaced, ["a"], "{plan:?}");
            let n = plan
                .vms
                .iter()
                .find(|v| v.name == "n")
                .unwrap_or_else(|| panic!("{plan:?}"));
            assert_eq!(n.cores, [CoreId(3)], "{plan:?}");
            assert!(
                plan.warnings.iter().any(|w| w.to_string().starts_with(
                    "a runs here and could not be placed: it goes on running where it runs, and the plan keeps off CPUs 1-2"
                )),
                "{:?}",
                plan.warnings
            );
            assert_eq!(plan.fixed.len(), 1);
        }
    }

    /// A movable VM the plan moves to another NUMA node is told that its
    /// memory stays behind, more sharply when it is bound there strictly.
    #[test]
    fn a_move_across_numa_nodes_says_where_the_memory_stays() {
        let host = crate::topology::load(&crate::topology::Source::Synthetic(
            "package:1 numa:2 core:2 pu:1".into(),
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let s = spec("[[vm]]\nname = \"a\"\nvcpus = 2\nthreads = \"isolate\"\nmovable = true\n");
        for (numatune, strict) in [
            ("", false),
            (
                "<numatune><memory mode='strict' nodeset='0'/></numatune>",
                true,
            ),
        ] {
            let xml = format!(
                "<domain><name>a</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>\
                 <emulatorpin cpuset='0'/></cputune>{numatune}</domain>"
            );
            let t = tenant_from_domain("a.xml", &xml, &host).unwrap_or_else(|e| panic!("{e}"));
            let (request, _, residents) = s
                .request_running(
                    host.clone(),
                    &BTreeMap::new(),
                    &Running {
                        uri: "u",
                        domains: &[t],
                        count_shut_off: false,
                    },
                )
                .unwrap_or_else(|e| panic!("{e}"));
            let plan = residents.solve(&request, &SolveOptions::default(), ten_seconds());
            assert_eq!(plan.vms[0].numa_nodes, [NodeId(1)], "{plan:?}");
            let note = plan
                .warnings
                .iter()
                .find(|w| w.to_string().starts_with("a moves from NUMA node(s) 0 to 1: pinplan does not move a running guest's memory, so it stays on 0 until the guest restarts"))
                .unwrap_or_else(|| panic!("{:?}", plan.warnings));
            assert_eq!(
                note.to_string().contains("numatune strict"),
                strict,
                "{note}"
            );
        }
    }

    /// Running domains that share a core as they run are named; vCPUs on
    /// the host's CPUs too.
    #[test]
    fn sharing_as_they_run_is_said() {
        let s = spec("[[vm]]\nname = \"a\"\nvcpus = 1\n");
        let domains = [
            domain(
                "a",
                1,
                "<vcpupin vcpu='0' cpuset='1'/><emulatorpin cpuset='0'/>",
                RUNNING,
            ),
            domain(
                "x",
                1,
                "<vcpupin vcpu='0' cpuset='5'/><emulatorpin cpuset='0'/>",
                RUNNING,
            ),
            domain(
                "y",
                1,
                "<vcpupin vcpu='0' cpuset='4'/><emulatorpin cpuset='0'/>",
                RUNNING,
            ),
        ];
        let (_, warnings, _) = on_host(&s, &domains, false);
        assert_eq!(
            warnings,
            [
                "domain y runs vCPUs on the host's reserved CPUs 4: they share them with the host; move it off them (or reserve other CPUs with reserved_cpus)",
                "a and x run on the same core 1: they go on sharing as they run; set movable = true on the one the spec names so that the plan separates them",
            ]
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        /// One domain of the host: its vCPUs' pins (`None`: floating),
        /// its emulator's (`None`: floating; `Some(None)`: the host's
        /// CPU 0), running or shut off, named in the spec (and movable).
        #[derive(Debug, Clone)]
        struct Dom {
            vcpus: Vec<Option<u32>>,
            emulator: Option<Option<u32>>,
            running: bool,
            named: Option<bool>,
        }

        fn dom(cpus: u32) -> impl Strategy<Value = Dom> {
            (
                prop::collection::vec(prop::option::weighted(0.85, 1..cpus), 1..=3),
                prop::option::weighted(0.85, prop::option::weighted(0.3, 1..cpus)),
                prop::bool::weighted(0.8),
                prop::option::of(any::<bool>()),
            )
                .prop_map(|(vcpus, emulator, running, named)| Dom {
                    vcpus,
                    emulator,
                    running,
                    named,
                })
        }

        fn case() -> impl Strategy<Value = (u32, u32, Vec<Dom>, Vec<u32>)> {
            (3u32..=6, 1u32..=2).prop_flat_map(|(cores, threads)| {
                let cpus = cores * threads;
                (
                    Just(cores),
                    Just(threads),
                    prop::collection::vec(dom(cpus), 0..=3),
                    prop::collection::vec(1u32..=3, 0..=3),
                )
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

            /// Whatever runs: no VM the plan places (but the kept ones) gets
            /// a core any thread of a running domain the spec does not name
            /// may run on (the host's reserved CPUs aside), kept VMs are
            /// placed exactly as they run, no core goes to two VMs, VMs are
            /// in spec order, and the moves are exactly the vCPUs of named
            /// running VMs whose CPU changes.
            #[test]
            fn plans_never_take_a_running_domains_core((cores, threads, doms, new) in case()) {
                let desc = if threads == 2 {
                    format!("package:1 core:{cores} pu:2(indexes=2*{cores}:1*2)")
                } else {
                    format!("package:1 core:{cores} pu:1")
                };
                let host = crate::topology::load(&crate::topology::Source::Synthetic(desc.clone()))
                    .unwrap_or_else(|e| panic!("{e}"));
                let mut text = format!(
                    "[host]\nsource = \"synthetic:{desc}\"\nreserved_cores = 1\n[defaults]\nthreads = \"isolate\"\n"
                );
                let mut domains = Vec::new();
                for (i, d) in doms.iter().enumerate() {
                    let name = format!("d{i}");
                    let mut tune = String::new();
                    for (v, pin) in d.vcpus.iter().enumerate() {
                        if let Some(cpu) = pin {
                            tune.push_str(&format!("<vcpupin vcpu='{v}' cpuset='{cpu}'/>"));
                        }
                    }
                    match d.emulator {
                        Some(Some(cpu)) => tune.push_str(&format!("<emulatorpin cpuset='{cpu}'/>")),
                        Some(None) => tune.push_str("<emulatorpin cpuset='0'/>"),
                        None => {}
                    }
                    let xml = format!(
                        "<domain><name>{name}</name><vcpu>{}</vcpu><cputune>{tune}</cputune></domain>",
                        d.vcpus.len()
                    );
                    let mut t = tenant_from_domain("d.xml", &xml, &host).unwrap_or_else(|e| panic!("{e}"));
                    if !d.running {
                        t.state = TenantState::ShutOff;
                    }
                    domains.push(t);
                    if let Some(movable) = d.named {
                        text.push_str(&format!(
                            "[[vm]]\nname = \"{name}\"\nvcpus = {}\nmovable = {movable}\n",
                            d.vcpus.len()
                        ));
                    }
                }
                for (i, vcpus) in new.iter().enumerate() {
                    text.push_str(&format!("[[vm]]\nname = \"n{i}\"\nvcpus = {vcpus}\n"));
                }
                let spec = Spec::parse(std::path::Path::new("p.toml"), &text)
                    .unwrap_or_else(|e| panic!("{e}\n{text}"));
                let (request, _, residents) = spec
                    .request_running(
                        host.clone(),
                        &BTreeMap::new(),
                        &Running { uri: "u", domains: &domains, count_shut_off: false },
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                let mut plan = solve(&request, &SolveOptions::default(), ten_seconds());
                residents.finish(&mut plan);

                let reserved = request.reserved.clone();
                let core_of = |cpu: crate::ids::CpuId| host.pu(cpu).and_then(|p| p.core);
                // The cores of the running domains the spec does not name,
                // from their threads' CPUs, computed here on their own.
                let mut theirs: BTreeSet<CoreId> = BTreeSet::new();
                for (d, t) in doms.iter().zip(&domains) {
                    if d.named.is_some() || !d.running {
                        continue;
                    }
                    let mut all: CpuSet = t.vcpus.iter().fold(t.emulator_cpus.clone(), |a, v| a.union(&v.cpus));
                    all = all.difference(&reserved);
                    theirs.extend(all.iter().filter_map(core_of));
                }
                let mut given: BTreeMap<CoreId, bool> = BTreeMap::new();
                let order: Vec<String> = text
                    .lines()
                    .filter_map(|l| l.strip_prefix("name = \""))
                    .map(|l| l.trim_end_matches('"').to_owned())
                    .collect();
                let mut last = None;
                for vm in &plan.vms {
                    let at = order.iter().position(|n| *n == vm.name);
                    prop_assert!(at > last, "out of spec order: {:?}", plan.vms);
                    last = at;
                    for core in &vm.cores {
                        // Kept VMs that share a core as they run go on
                        // sharing (said in a warning); nobody else shares.
                        let first = given.insert(*core, vm.kept);
                        prop_assert!(
                            first.is_none_or(|kept| kept && vm.kept),
                            "core {} given twice", core
                        );
                        if !vm.kept {
                            prop_assert!(!theirs.contains(core), "{} got core {} of a running domain", vm.name, core);
                        }
                    }
                    let i: Option<usize> = vm.name.strip_prefix('d').and_then(|n| n.parse().ok());
                    let now = i.map(|i| (&doms[i], &domains[i]));
                    if vm.kept {
                        let (d, t) = now.ok_or_else(|| TestCaseError::fail("kept a new VM"))?;
                        prop_assert!(d.running && d.named == Some(false));
                        for (pin, v) in vm.vcpus.iter().zip(&t.vcpus) {
                            prop_assert_eq!(std::iter::once(pin.cpu).collect::<CpuSet>(), v.cpus.clone());
                        }
                    }
                }
                let want: Vec<(String, u32)> = plan
                    .vms
                    .iter()
                    .filter(|vm| !vm.kept)
                    .filter_map(|vm| {
                        let i: usize = vm.name.strip_prefix('d')?.parse().ok()?;
                        doms[i].running.then_some((vm, &domains[i]))
                    })
                    .flat_map(|(vm, t)| {
                        vm.vcpus.iter().filter(move |p| {
                            t.vcpus.iter().any(|v| v.vcpu == p.vcpu && v.cpus != std::iter::once(p.cpu).collect::<CpuSet>())
                        })
                        .map(move |p| (vm.name.clone(), p.vcpu))
                    })
                    .collect();
                let got: Vec<(String, u32)> = plan.moves.iter().map(|m| (m.vm.clone(), m.vcpu)).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
