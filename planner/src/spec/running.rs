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
use crate::ids::{CoreId, NodeId};
use crate::plan::{FixedKind, GuestTopology, Move, Plan, VcpuPin, VmPlan};
use crate::solve::{FixedTenant, PlanRequest, VmRequest};
use crate::tenant::{Tenant, TenantKind, TenantState, VcpuCpus};
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
    /// The spec's VM names, in spec order.
    order: Vec<String>,
}

/// The CPUs a domain keeps from the plan: every CPU its vCPUs, emulator
/// and I/O threads may run on, less the host's reserved CPUs (where
/// emulator threads are meant to be; vCPUs there are warned about).
fn taken(tenant: &Tenant, reserved: &CpuSet) -> CpuSet {
    tenant.every_cpu().difference(reserved)
}

/// Which of a domain's threads may run on every usable CPU: `vCPUs 0,1`,
/// `emulator threads`, `I/O threads 1`; empty when every thread is pinned.
fn loose_threads(tenant: &Tenant, usable: &CpuSet) -> Vec<String> {
    let mut out = Vec::new();
    let vcpus: Vec<String> = tenant
        .vcpus
        .iter()
        .filter(|v| usable.is_subset(&v.cpus))
        .map(|v| v.vcpu.to_string())
        .collect();
    if vcpus.len() == tenant.vcpus.len() && !vcpus.is_empty() {
        out.push("vCPUs".to_owned());
    } else if !vcpus.is_empty() {
        out.push(format!(
            "{} {}",
            if vcpus.len() == 1 { "vCPU" } else { "vCPUs" },
            vcpus.join(",")
        ));
    }
    if usable.is_subset(&tenant.emulator_cpus) {
        out.push("emulator threads".to_owned());
    }
    let io: Vec<String> = tenant
        .iothreads
        .iter()
        .filter(|t| usable.is_subset(&t.cpus))
        .map(|t| t.iothread.to_string())
        .collect();
    if !io.is_empty() {
        out.push(format!("I/O threads {}", io.join(",")));
    }
    out
}

/// "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
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
    ) -> Result<(PlanRequest, Vec<String>, Residents), SpecError> {
        let (mut request, mut warnings) = self.request_with(host, defined)?;
        let mut residents = Residents {
            order: self.vms.iter().map(|v| v.name.clone()).collect(),
            ..Residents::default()
        };
        let usable = request.host.usable_cpus();
        let reserved = request.reserved.clone();
        let spec_fixed: BTreeSet<&str> = self.fixed.iter().map(|(n, _, _)| n.as_str()).collect();
        // Domains that keep every CPU a VM could have: what else they share
        // goes without saying.
        let mut floating: BTreeSet<String> = BTreeSet::new();
        for t in running.domains.iter().filter(|t| t.kind == TenantKind::Vm) {
            let name = t.name.as_str();
            // The spec's own word on a domain wins: its [[fixed]] CPUs, or
            // its [[ignore]].
            if spec_fixed.contains(name) {
                continue;
            }
            if !self.plans_around(name) {
                if t.state == TenantState::Running {
                    warnings.push(format!(
                        "domain {name} runs at {} and is ignored ([[ignore]]): the plan may give its CPUs {} to a VM",
                        running.uri,
                        t.every_cpu()
                    ));
                }
                continue;
            }
            let named = self.vms.iter().find(|v| v.name == name);
            match (named, t.state) {
                (Some(_), TenantState::ShutOff) => {}
                (Some(vm), TenantState::Running) => {
                    if vm.movable {
                        residents.now.insert(name.to_owned(), t.vcpus.clone());
                        continue;
                    }
                    self.keep(
                        t,
                        &mut request,
                        &mut residents,
                        &mut warnings,
                        &usable,
                        &reserved,
                    );
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
                        warnings.push(format!(
                            "domain {name} is shut off: its config pins CPUs {cpus}, which the plan does not keep free (--count-shut-off does); it would share them if started"
                        ));
                    }
                }
            }
        }
        shared_cores(&request, &residents, &floating, &mut warnings);
        Ok((request, warnings, residents))
    }

    /// A running VM the spec names and may not move: kept as a placed VM
    /// when each vCPU runs on one CPU; planned like a new VM when it floats
    /// wholly (it has no place to keep); otherwise planned around as it
    /// runs, and said.
    fn keep(
        &self,
        t: &Tenant,
        request: &mut PlanRequest,
        residents: &mut Residents,
        warnings: &mut Vec<String>,
        usable: &CpuSet,
        reserved: &CpuSet,
    ) {
        let name = t.name.as_str();
        let Some(index) = request.vms.iter().position(|v| v.name == name) else {
            return;
        };
        let floats = !t.vcpus.is_empty() && t.vcpus.iter().all(|v| usable.is_subset(&v.cpus));
        if floats {
            residents.now.insert(name.to_owned(), t.vcpus.clone());
            warnings.push(format!(
                "{name} runs with its vCPUs not pinned: planned like a new VM (apply pins it where the plan says)"
            ));
            return;
        }
        let vm = request.vms.remove(index);
        vcpus_on_reserved(t, usable, reserved, warnings);
        let loose = loose_threads(t, usable);
        if !loose.is_empty() {
            warnings.push(format!(
                "{name} is kept where it runs, but its {} may run on every CPU, so the plan keeps off CPUs {}; pin them, or set movable = true so that the plan pins them",
                and_list(&loose),
                taken(t, reserved)
            ));
        }
        let mut cpus = taken(t, reserved);
        match kept_plan(&vm, t, &request.host, usable, reserved) {
            Some(plan) => {
                if plan.vcpus.len() != vm.vcpus as usize {
                    warnings.push(format!(
                        "{name} runs {} vCPUs and the spec asks for {}: kept as it runs (set movable = true to plan it anew; its vCPU count changes when its domain is redefined)",
                        plan.vcpus.len(),
                        vm.vcpus
                    ));
                }
                cpus = cpus.union(&plan.cpus);
                residents.kept.push((plan, vm.priority));
            }
            None => warnings.push(format!(
                "{name} runs with vCPUs pinned to several CPUs each ({}), which a plan (one CPU per vCPU) cannot keep: planned around where it runs; set movable = true to let the plan pin it",
                t.vcpus
                    .iter()
                    .map(|v| format!("vCPU {}: {}", v.vcpu, v.cpus))
                    .collect::<Vec<_>>()
                    .join(", ")
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
    warnings: &mut Vec<String>,
) -> Option<FixedTenant> {
    let name = &t.name;
    let loose = loose_threads(t, usable);
    let cpus = taken(t, reserved);
    if !loose.is_empty() {
        warnings.push(format!(
            "domain {name} runs at {uri} with its {} not pinned: they may run on every CPU, so the plan keeps off CPUs {cpus}{}; {FLOATING_FIX}",
            and_list(&loose),
            if usable.difference(reserved).is_subset(&cpus) {
                " (every CPU a VM could have)"
            } else {
                ""
            }
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
fn vcpus_on_reserved(t: &Tenant, usable: &CpuSet, reserved: &CpuSet, warnings: &mut Vec<String>) {
    let on = t
        .vcpus
        .iter()
        .filter(|v| !usable.is_subset(&v.cpus))
        .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus))
        .intersection(reserved);
    if !on.is_empty() {
        warnings.push(format!(
            "domain {} runs vCPUs on the host's reserved CPUs {on}: they share them with the host; move it off them (or reserve other CPUs with reserved_cpus)",
            t.name
        ));
    }
}

/// A running VM as a placed VM: each vCPU on the one CPU it runs on, the
/// cores of those CPUs (and of its pinned emulator and I/O threads off the
/// host's CPUs) its own. `None` when a vCPU may run on several CPUs or on
/// one the host does not have.
fn kept_plan(
    vm: &VmRequest,
    t: &Tenant,
    host: &HostTopology,
    usable: &CpuSet,
    reserved: &CpuSet,
) -> Option<VmPlan> {
    let mut pins = Vec::with_capacity(t.vcpus.len());
    let mut cores: BTreeSet<CoreId> = BTreeSet::new();
    for v in &t.vcpus {
        let mut cpus = v.cpus.iter();
        let (Some(cpu), None) = (cpus.next(), cpus.next()) else {
            return None;
        };
        cores.insert(host.pu(cpu)?.core?);
        pins.push(VcpuPin {
            vcpu: v.vcpu,
            cpu,
            role: vm.roles.of(v.vcpu),
        });
    }
    let pinned_threads = std::iter::once(&t.emulator_cpus)
        .chain(t.iothreads.iter().map(|i| &i.cpus))
        .filter(|set| !usable.is_subset(set));
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
    Some(VmPlan {
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
        threads: vm.threads.name().to_owned(),
        demand: vm.demand.clone(),
        nic: vm.nic,
        nics: if vm.nics.len() > 1 {
            vm.nics.clone()
        } else {
            Vec::new()
        },
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
    warnings: &mut Vec<String>,
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
            warnings.push(format!(
                "{a} and {b} run on the same {} {}: they go on sharing as they run; {fix}",
                if both.len() == 1 { "core" } else { "cores" },
                both.join(",")
            ));
        }
    }
}

impl Residents {
    /// Whether the plan keeps or may move any running VM.
    pub fn is_empty(&self) -> bool {
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
    }
}
