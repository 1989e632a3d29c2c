//! What a plan changes: the tenants as they would be under it, and every
//! thread whose CPUs it moves.

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::plan::{IothreadPin, Plan, VmPlan};
use crate::tenant::{host_tenant, IothreadCpus, MemoryTune, Tenant, TenantKind, VcpuCpus};
use serde::Serialize;

/// The threads of a VM that can be pinned, serialised as `vcpu`,
/// `emulator`, `iothread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Thread {
    /// A vCPU.
    Vcpu,
    /// The emulator threads.
    Emulator,
    /// An I/O thread.
    Iothread,
}

impl std::fmt::Display for Thread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Thread::Vcpu => "vcpu",
            Thread::Emulator => "emulator",
            Thread::Iothread => "iothread",
        })
    }
}

/// One thread a plan moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Move {
    /// The VM.
    pub vm: String,
    /// Which thread.
    pub thread: Thread,
    /// The vCPU or I/O thread number (none for the emulator).
    pub id: Option<u32>,
    /// Its CPUs now (none when the thread does not exist yet, e.g. a VM
    /// that is not defined or has fewer vCPUs).
    pub from: Option<CpuSet>,
    /// Its CPUs under the plan.
    pub to: CpuSet,
}

/// The plan's I/O threads of `vm` under the ids the domain has now (`now`'s,
/// in order, as `apply` pins them), or the plan's own numbers.
fn iothreads_on(vm: &VmPlan, now: Option<&Tenant>) -> Vec<IothreadPin> {
    now.map(|t| t.iothreads.iter().map(|i| i.iothread).collect())
        .and_then(|ids| IothreadPin::on_ids(&vm.iothreads, &ids))
        .unwrap_or_else(|| vm.iothreads.clone())
}

/// A planned VM as a tenant (its NICs and memory mode from `now`, if known).
fn planned_tenant(vm: &VmPlan, now: Option<&Tenant>) -> Tenant {
    let vcpus: Vec<VcpuCpus> = vm
        .vcpus
        .iter()
        .map(|p| VcpuCpus {
            vcpu: p.vcpu,
            cpus: std::iter::once(p.cpu).collect(),
        })
        .collect();
    let nodes: CpuSet = vm.numa_nodes.iter().map(|n| CpuId(n.0)).collect();
    Tenant {
        name: vm.name.clone(),
        kind: TenantKind::Vm,
        state: crate::tenant::TenantState::Running,
        cpus: vcpus.iter().fold(CpuSet::new(), |a, v| a.union(&v.cpus)),
        vcpus,
        emulator_cpus: vm.emulator_cpus.clone(),
        iothreads: iothreads_on(vm, now)
            .into_iter()
            .map(|t| IothreadCpus {
                iothread: t.iothread,
                cpus: t.cpus,
            })
            .collect(),
        nics: now.map(|t| t.nics.clone()).unwrap_or_default(),
        pinned: true,
        memory: (!nodes.is_empty()).then(|| MemoryTune {
            mode: "strict".to_owned(),
            nodeset: nodes.to_string(),
        }),
        // Memory moves only at a restart: the plan's placement is judged by
        // its numatune, not by where the pages are now.
        memory_resident: None,
    }
}

/// The tenants as they would be under `plan`: the plan's reserved CPUs as the
/// host, its VMs as planned, every other tenant as it is now.
pub fn planned_tenants(now: &[Tenant], plan: &Plan) -> Vec<Tenant> {
    let mut out = Vec::new();
    if !plan.host.reserved_cpus.is_empty() {
        out.push(host_tenant(&plan.host.reserved_cpus));
    }
    let find = |name: &str| {
        now.iter()
            .find(|t| t.kind == TenantKind::Vm && t.name == name)
    };
    for t in now.iter().filter(|t| t.kind == TenantKind::Vm) {
        match plan.vms.iter().find(|v| v.name == t.name) {
            Some(vm) => out.push(planned_tenant(vm, Some(t))),
            None => out.push(t.clone()),
        }
    }
    for vm in plan.vms.iter().filter(|v| find(&v.name).is_none()) {
        out.push(planned_tenant(vm, None));
    }
    for f in plan.fixed.iter().filter(|f| find(&f.name).is_none()) {
        let mut t = host_tenant(&f.cpus);
        t.name = f.name.clone();
        t.kind = TenantKind::Vm;
        out.push(t);
    }
    out
}

/// Every thread of the plan's VMs whose CPUs would change, in plan order.
pub fn moves(now: &[Tenant], plan: &Plan) -> Vec<Move> {
    let mut out = Vec::new();
    for vm in &plan.vms {
        let current = now
            .iter()
            .find(|t| t.kind == TenantKind::Vm && t.name == vm.name);
        let mut push = |thread: Thread, id: Option<u32>, from: Option<CpuSet>, to: CpuSet| {
            if from.as_ref() != Some(&to) {
                out.push(Move {
                    vm: vm.name.clone(),
                    thread,
                    id,
                    from,
                    to,
                });
            }
        };
        for pin in &vm.vcpus {
            let from = current.and_then(|t| {
                t.vcpus
                    .iter()
                    .find(|v| v.vcpu == pin.vcpu)
                    .map(|v| v.cpus.clone())
            });
            push(
                Thread::Vcpu,
                Some(pin.vcpu),
                from,
                std::iter::once(pin.cpu).collect(),
            );
        }
        push(
            Thread::Emulator,
            None,
            current.map(|t| t.emulator_cpus.clone()),
            vm.emulator_cpus.clone(),
        );
        for io in &iothreads_on(vm, current) {
            let from = current.and_then(|t| {
                t.iothreads
                    .iter()
                    .find(|i| i.iothread == io.iothread)
                    .map(|i| i.cpus.clone())
            });
            push(Thread::Iothread, Some(io.iothread), from, io.cpus.clone());
        }
    }
    out
}
