//! Conflicts of locality: a VM whose vCPUs, memory, emulator or NIC are
//! on different NUMA nodes.

use super::{Conflict, ConflictKind, Severity};
use crate::cpuset::CpuSet;
use crate::ids::{CpuId, NodeId};
use crate::tenant::Tenant;
use crate::topology::{HostTopology, PciAddress};
use std::collections::{BTreeMap, BTreeSet};

/// The NUMA nodes of a tenant's vCPUs, as a list for messages.
fn vcpu_nodes(t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> BTreeSet<NodeId> {
    t.cpus
        .iter()
        .filter_map(|c| node_of.get(&c).copied())
        .collect()
}

fn listed(nodes: &BTreeSet<NodeId>) -> String {
    let names: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    names.join(",")
}

/// A VM's vCPUs on several nodes under strict memory.
pub(super) fn numa_split(t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> Option<Conflict> {
    let nodes = vcpu_nodes(t, node_of);
    let strict = t.memory.as_ref().is_some_and(|m| m.mode == "strict");
    (nodes.len() > 1 && strict).then(|| Conflict {
        kind: ConflictKind::NumaSplit,
        severity: Severity::Warning,
        tenants: vec![t.name.clone()],
        cpus: t.cpus.clone(),
        message: format!(
            "{}'s vCPUs span NUMA nodes {} under strict memory",
            t.name,
            listed(&nodes)
        ),
    })
}

/// A VM whose emulator threads may run only on nodes none of its vCPUs is
/// on (a floating emulator, allowed everywhere, is not remote).
pub(super) fn emulator_remote(t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> Option<Conflict> {
    let nodes = vcpu_nodes(t, node_of);
    let emulator_nodes: BTreeSet<NodeId> = t
        .emulator_cpus
        .iter()
        .filter_map(|c| node_of.get(&c).copied())
        .collect();
    (!nodes.is_empty() && !emulator_nodes.is_empty() && emulator_nodes.is_disjoint(&nodes)).then(
        || Conflict {
            kind: ConflictKind::EmulatorRemote,
            severity: Severity::Warning,
            tenants: vec![t.name.clone()],
            cpus: t.emulator_cpus.clone(),
            message: format!(
                "{}'s emulator threads run on CPUs {} of node(s) {}, its vCPUs on node(s) {}: \
                 reserve host CPUs on each node (reserved_cores_per_node) and plan again",
                t.name,
                t.emulator_cpus,
                listed(&emulator_nodes),
                listed(&nodes)
            ),
        },
    )
}

/// The share of a running guest's memory that may sit off its vCPUs' nodes
/// before it is a finding: QEMU's own code and libraries are shared pages
/// on whichever node loaded them first.
const REMOTE_SHARE_PERCENT: u64 = 10;

/// A VM's memory away from its vCPUs: for a running guest whose pages were
/// read, more than [`REMOTE_SHARE_PERCENT`] of them on nodes none of its
/// vCPUs is on; otherwise a numatune whose nodes none of its vCPUs is on.
pub(super) fn memory_remote(t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> Option<Conflict> {
    let nodes = vcpu_nodes(t, node_of);
    if nodes.is_empty() {
        return None;
    }
    let conflict = |message: String| Conflict {
        kind: ConflictKind::MemoryRemote,
        severity: Severity::Warning,
        tenants: vec![t.name.clone()],
        cpus: t.cpus.clone(),
        message,
    };
    if let Some(resident) = &t.memory_resident {
        let total: u64 = resident.iter().map(|r| r.kib).sum();
        let remote: Vec<_> = resident
            .iter()
            .filter(|r| !nodes.contains(&r.node))
            .collect();
        let remote_kib: u64 = remote.iter().map(|r| r.kib).sum();
        if total == 0
            || remote_kib.saturating_mul(100) <= total.saturating_mul(REMOTE_SHARE_PERCENT)
        {
            return None;
        }
        let on: Vec<String> = remote
            .iter()
            .map(|r| {
                format!(
                    "{} on node {}",
                    crate::memory::human(r.kib.saturating_mul(1024)),
                    r.node
                )
            })
            .collect();
        return Some(conflict(format!(
            "{}'s memory is resident off its vCPUs' node(s) {}: {} of {} ({}%)",
            t.name,
            listed(&nodes),
            on.join(", "),
            crate::memory::human(total.saturating_mul(1024)),
            remote_kib.saturating_mul(100) / total
        )));
    }
    let tune = t.memory.as_ref()?;
    let memory_nodes: BTreeSet<NodeId> = tune
        .nodeset
        .parse::<CpuSet>()
        .map(|s| s.iter().map(|c| NodeId(c.0)).collect())
        .unwrap_or_default();
    (!memory_nodes.is_empty() && memory_nodes.is_disjoint(&nodes)).then(|| {
        conflict(format!(
            "{}'s memory is on node(s) {} ({}), its vCPUs on {}",
            t.name,
            tune.nodeset,
            tune.mode,
            listed(&nodes)
        ))
    })
}

/// A VM's vCPUs on another NUMA node than each of its NICs.
pub(super) fn nic_remote(
    host: &HostTopology,
    t: &Tenant,
    node_of: &BTreeMap<CpuId, NodeId>,
) -> Vec<Conflict> {
    let mut out = Vec::new();
    for nic in &t.nics {
        let Some(nic_node) = nic_node(host, nic) else {
            continue;
        };
        let remote: CpuSet = t
            .cpus
            .iter()
            .filter(|c| node_of.get(c).is_some_and(|n| *n != nic_node))
            .collect();
        if !remote.is_empty() {
            out.push(Conflict {
                    kind: ConflictKind::NicRemote,
                    severity: Severity::Warning,
                    tenants: vec![t.name.clone()],
                    cpus: remote.clone(),
                    message: format!(
                        "{}'s vCPUs on CPUs {remote} are on another NUMA node than its NIC {nic} (node {nic_node})",
                        t.name
                    ),
                });
        }
    }
    out
}

/// The NUMA node of a PCI device: its own, else that of another function of
/// the same physical device (a VF's PF often is the only function a
/// topology lists).
fn nic_node(host: &HostTopology, wanted: &PciAddress) -> Option<NodeId> {
    let same_slot = |a: &PciAddress| {
        a.domain == wanted.domain && a.bus == wanted.bus && a.device == wanted.device
    };
    host.pci
        .iter()
        .find(|d| d.address == *wanted)
        .and_then(|d| d.numa_node)
        .or_else(|| {
            host.pci
                .iter()
                .filter(|d| same_slot(&d.address))
                .find_map(|d| d.numa_node)
        })
}
