//! The safety properties every plan must have, whatever the solver: no CPU or
//! core shared between tenants, whole cores that fit the VM exactly, vCPUs,
//! NUMA, NIC and emulator placement as the VM asks.

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::plan::{Plan, Status, VmPlan};
use crate::solve::classes;
use crate::solve::{EmulatorPolicy, NumaPolicy, PlanRequest, ThreadPolicy, VmRequest};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::collections::{BTreeMap, BTreeSet};

/// The safety properties every plan must have, whatever the solver.
pub(super) fn check_plan(req: &PlanRequest, plan: &Plan) -> Result<(), TestCaseError> {
    prop_assert_eq!(plan.vms.len() + plan.unplaced.len(), req.vms.len());
    let expected_status = if !plan.unplaced.is_empty() {
        vec![Status::Infeasible]
    } else {
        vec![Status::Optimal, Status::Feasible]
    };
    prop_assert!(expected_status.contains(&plan.status), "{:?}", plan.status);
    prop_assert_eq!(&plan.host.reserved_cpus, &req.reserved);
    let mut owners = Owners::new(req)?;
    let mut seen = BTreeSet::new();
    let mut last_index = None;
    for vm_plan in &plan.vms {
        let index = req
            .vms
            .iter()
            .position(|v| v.name == vm_plan.name)
            .ok_or_else(|| TestCaseError::fail(format!("unknown VM {}", vm_plan.name)))?;
        prop_assert!(last_index < Some(index), "VMs out of spec order");
        last_index = Some(index);
        prop_assert!(seen.insert(index));
        let vm = &req.vms[index];
        prop_assert!(!plan.unplaced.contains(&vm.name));
        let cores = owners.take(req, vm, vm_plan)?;
        check_vcpus(req, vm, vm_plan, &cores)?;
        check_numa(vm, vm_plan, &cores)?;
        check_emulator(req, vm, vm_plan, &cores)?;
    }
    for name in &plan.unplaced {
        prop_assert!(req.vms.iter().any(|v| &v.name == name));
    }
    Ok(())
}

/// Who holds each CPU and core: the host, fixed tenants, then the VMs.
struct Owners {
    cpu: BTreeMap<CpuId, String>,
    /// The host's and the fixed tenants' CPUs.
    outside: CpuSet,
    core: BTreeMap<CoreId, String>,
}

/// What a VM's cores are: usable threads of each, its CPUs, its nodes.
struct VmCores {
    threads: Vec<u32>,
    cpus: CpuSet,
    nodes: BTreeSet<Option<NodeId>>,
}

impl Owners {
    fn new(req: &PlanRequest) -> Result<Owners, TestCaseError> {
        let mut cpu: BTreeMap<CpuId, String> = BTreeMap::new();
        for c in req.reserved.iter() {
            cpu.insert(c, "host".to_owned());
        }
        for f in &req.fixed {
            for c in f.cpus.iter() {
                prop_assert!(cpu.insert(c, f.name.clone()).is_none(), "bad input");
            }
        }
        let outside: CpuSet = cpu.keys().copied().collect();
        Ok(Owners {
            cpu,
            outside,
            core: BTreeMap::new(),
        })
    }

    /// Gives `vm` its planned cores: whole cores, no one else's, that fit it
    /// exactly.
    fn take(
        &mut self,
        req: &PlanRequest,
        vm: &VmRequest,
        vm_plan: &VmPlan,
    ) -> Result<VmCores, TestCaseError> {
        let (host, name) = (&req.host, vm.name.as_str());
        let usable = host.usable_cpus();
        prop_assert!(!vm_plan.cores.is_empty(), "{name}: no cores");
        let mut threads = Vec::new();
        let mut cpus = CpuSet::new();
        let mut nodes = BTreeSet::new();
        for &id in &vm_plan.cores {
            let core = host
                .core(id)
                .ok_or_else(|| TestCaseError::fail(format!("{name}: no core {id}")))?;
            if let Some(other) = self.core.insert(id, name.to_owned()) {
                return Err(TestCaseError::fail(format!(
                    "core {id} given to {other} and {name}"
                )));
            }
            prop_assert!(
                !core.cpus.intersects(&self.outside),
                "{}: core {} ({}) shares CPUs with the host or a fixed tenant",
                name,
                id,
                core.cpus
            );
            let mine = core.cpus.intersection(&usable);
            prop_assert!(!mine.is_empty(), "{}: core {} has no usable CPU", name, id);
            threads.push(u32::try_from(mine.len()).unwrap());
            cpus = cpus.union(&mine);
            nodes.insert(core.numa_node);
        }
        prop_assert_eq!(&vm_plan.cpus, &cpus, "{}: cpus", name);
        for cpu in cpus.iter() {
            prop_assert!(
                self.cpu.insert(cpu, name.to_owned()).is_none(),
                "{}: CPU {} already taken",
                name,
                cpu
            );
        }
        prop_assert!(
            classes::fits_exactly(vm, &threads),
            "{}: cores with {:?} threads do not fit {:?}",
            name,
            threads,
            vm
        );
        Ok(VmCores {
            threads,
            cpus,
            nodes,
        })
    }
}

/// vCPUs: numbered, one CPU each, on the VM's cores, by its thread policy.
fn check_vcpus(
    req: &PlanRequest,
    vm: &VmRequest,
    vm_plan: &VmPlan,
    cores: &VmCores,
) -> Result<(), TestCaseError> {
    let name = vm.name.as_str();
    prop_assert_eq!(
        vm_plan.vcpus.len(),
        vm.vcpus as usize,
        "{}: vCPU count",
        name
    );
    let pinned: CpuSet = vm_plan.vcpus.iter().map(|p| p.cpu).collect();
    prop_assert_eq!(pinned.len(), vm_plan.vcpus.len(), "{}: a CPU twice", name);
    prop_assert!(pinned.is_subset(&cores.cpus), "{}: pin off its cores", name);
    for (i, pin) in vm_plan.vcpus.iter().enumerate() {
        prop_assert_eq!(pin.vcpu as usize, i, "{}: vCPU numbering", name);
    }
    let cores_of_pins: BTreeSet<CoreId> = vm_plan
        .vcpus
        .iter()
        .filter_map(|p| req.host.pu(p.cpu).and_then(|pu| pu.core))
        .collect();
    // Several required NICs: a vCPU on each of their nodes.
    for &node in &vm.cell_nodes {
        prop_assert!(
            vm_plan
                .vcpus
                .iter()
                .any(|p| req.host.pu(p.cpu).and_then(|pu| pu.numa_node) == Some(node)),
            "{}: no vCPU on node {} of its NICs",
            name,
            node
        );
    }
    if vm.threads == ThreadPolicy::Isolate {
        prop_assert_eq!(
            cores_of_pins.len(),
            vm_plan.vcpus.len(),
            "{}: isolate shares a core between vCPUs",
            name
        );
    }
    if vm.threads == ThreadPolicy::Require {
        prop_assert!(
            cores.threads.iter().all(|&t| t >= 2),
            "{}: require on 1 thread",
            name
        );
    }
    Ok(())
}

/// NUMA nodes as the plan lists them, the NUMA policy and a required NIC node.
fn check_numa(vm: &VmRequest, vm_plan: &VmPlan, cores: &VmCores) -> Result<(), TestCaseError> {
    let (name, nodes) = (vm.name.as_str(), &cores.nodes);
    let plan_nodes: BTreeSet<Option<NodeId>> =
        vm_plan.numa_nodes.iter().copied().map(Some).collect();
    prop_assert_eq!(
        plan_nodes.len(),
        nodes.iter().filter(|n| n.is_some()).count(),
        "{}: numa_nodes",
        name
    );
    if vm.numa == NumaPolicy::Strict {
        prop_assert_eq!(nodes.len(), 1, "{}: strict on {:?}", name, nodes);
    }
    if let Some(allowed) = vm.required_nodes() {
        prop_assert!(
            nodes
                .iter()
                .all(|n| n.is_some_and(|n| allowed.contains(&n))),
            "{}: NIC nodes {:?} required, got {:?}",
            name,
            allowed,
            nodes
        );
    }
    for &node in &vm.cell_nodes {
        prop_assert!(
            nodes.contains(&Some(node)),
            "{}: must have cores on node {}, got {:?}",
            name,
            node,
            nodes
        );
    }
    Ok(())
}

/// Emulator and I/O threads: on the host's CPUs, or on one CPU of the VM's
/// own that no vCPU has.
fn check_emulator(
    req: &PlanRequest,
    vm: &VmRequest,
    vm_plan: &VmPlan,
    cores: &VmCores,
) -> Result<(), TestCaseError> {
    let name = vm.name.as_str();
    match vm.emulator {
        EmulatorPolicy::Host => {
            // The reserved CPUs on the VM's nodes, else all of them.
            let nodes: std::collections::BTreeSet<_> = vm_plan.numa_nodes.iter().collect();
            let local: CpuSet = req
                .reserved
                .iter()
                .filter(|&c| {
                    req.host
                        .pu(c)
                        .and_then(|p| p.numa_node)
                        .is_some_and(|n| nodes.contains(&n))
                })
                .collect();
            let want = if local.is_empty() {
                req.reserved.clone()
            } else {
                local
            };
            prop_assert_eq!(&vm_plan.emulator_cpus, &want, "{}: emulator", name);
        }
        EmulatorPolicy::Isolate => {
            let pinned: CpuSet = vm_plan.vcpus.iter().map(|p| p.cpu).collect();
            prop_assert_eq!(vm_plan.emulator_cpus.len(), 1, "{}: emulator", name);
            prop_assert!(vm_plan.emulator_cpus.is_subset(&cores.cpus));
            prop_assert!(
                !vm_plan.emulator_cpus.intersects(&pinned),
                "{}: emulator on a vCPU's CPU",
                name
            );
        }
        EmulatorPolicy::WithHousekeeping => {
            // On the cores of the housekeeping vCPUs, and on no other
            // vCPU's CPU.
            let others: CpuSet = vm_plan
                .vcpus
                .iter()
                .filter(|p| p.vcpu >= vm.roles.housekeeping)
                .map(|p| p.cpu)
                .collect();
            prop_assert!(vm_plan.emulator_cpus.is_subset(&cores.cpus));
            prop_assert!(
                !vm_plan.emulator_cpus.intersects(&others),
                "{}: emulator",
                name
            );
        }
    }
    prop_assert_eq!(vm_plan.iothreads.len(), vm.iothreads as usize);
    for io in &vm_plan.iothreads {
        prop_assert_eq!(&io.cpus, &vm_plan.emulator_cpus);
    }
    Ok(())
}
