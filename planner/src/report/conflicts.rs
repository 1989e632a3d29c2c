//! Conflicts: who shares a CPU or a physical core with whom, who overlaps
//! the host, who floats, whose memory or NIC is on another node.

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::tenant::{Tenant, TenantKind};
use crate::topology::{HostTopology, PciAddress};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// How bad a conflict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Throughput collapses: fix it.
    Error,
    /// Worth a look.
    Warning,
}

/// The kinds of conflict, serialised as their names (`cpu-shared`, …);
/// ordered by name, as reports list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// Two tenants on SMT siblings of one physical core.
    CoreShared,
    /// Two VMs on the same CPU.
    CpuShared,
    /// A VM's emulator threads on vCPU CPUs.
    EmulatorOverlap,
    /// A VM's emulator threads only on other NUMA nodes than its vCPUs.
    EmulatorRemote,
    /// A VM not pinned at all.
    Floating,
    /// A VM on the host's own CPUs.
    HostOverlap,
    /// IRQs allowed on VM CPUs (the live host).
    IrqOnVmCpu,
    /// A VM's memory on other NUMA nodes than its vCPUs (by its numatune,
    /// or for a running guest on this host by where its pages are).
    MemoryRemote,
    /// vCPUs on another NUMA node than the VM's NIC.
    NicRemote,
    /// vCPUs across NUMA nodes under strict memory.
    NumaSplit,
    /// Threads of the host, or of another VM, allowed on a VM's CPUs (the
    /// live host).
    StrayThreads,
}

impl ConflictKind {
    /// The name reports print.
    pub fn name(self) -> &'static str {
        match self {
            ConflictKind::CoreShared => "core-shared",
            ConflictKind::CpuShared => "cpu-shared",
            ConflictKind::EmulatorOverlap => "emulator-overlap",
            ConflictKind::EmulatorRemote => "emulator-remote",
            ConflictKind::Floating => "floating",
            ConflictKind::HostOverlap => "host-overlap",
            ConflictKind::MemoryRemote => "memory-remote",
            ConflictKind::NicRemote => "nic-remote",
            ConflictKind::NumaSplit => "numa-split",
            ConflictKind::IrqOnVmCpu => "irq-on-vm-cpu",
            ConflictKind::StrayThreads => "stray-threads",
        }
    }
}

impl std::fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// What kind of sharing.
    pub kind: ConflictKind,
    /// Error or warning.
    pub severity: Severity,
    /// The tenants involved.
    pub tenants: Vec<String>,
    /// The CPUs involved.
    pub cpus: CpuSet,
    /// One line: why.
    pub message: String,
}

fn core_of(host: &HostTopology) -> BTreeMap<CpuId, CoreId> {
    host.pus
        .iter()
        .filter_map(|p| p.core.map(|c| (p.cpu, c)))
        .collect()
}

/// Every conflict among `tenants` on `host`, in a stable order.
pub fn conflicts(host: &HostTopology, tenants: &[Tenant]) -> Vec<Conflict> {
    let mut out = floating(tenants);
    let (tenants, partly) = without_floating_vcpus(host, tenants);
    out.extend(partly);
    let tenants = tenants.as_slice();
    out.extend(shared(host, tenants));
    let vms: Vec<&Tenant> = tenants
        .iter()
        .filter(|t| t.kind == TenantKind::Vm && t.pinned)
        .collect();
    out.extend(emulator_overlap(host, &vms));
    let node_of: BTreeMap<CpuId, NodeId> = host
        .pus
        .iter()
        .filter_map(|p| p.numa_node.map(|n| (p.cpu, n)))
        .collect();
    out.extend(vms.iter().filter_map(|t| numa_split(t, &node_of)));
    out.extend(vms.iter().filter_map(|t| memory_remote(t, &node_of)));
    out.extend(vms.iter().filter_map(|t| emulator_remote(t, &node_of)));
    for t in &vms {
        out.extend(nic_remote(host, t, &node_of));
    }
    sort(&mut out);
    out
}

/// The order reports list conflicts in: errors first, then by kind and
/// tenants.
pub(crate) fn sort(conflicts: &mut [Conflict]) {
    conflicts
        .sort_by(|a, b| (a.severity, &a.kind, &a.tenants).cmp(&(b.severity, &b.kind, &b.tenants)));
}

/// A pinned VM's vCPUs that are not pinned (they may run on every usable
/// CPU) are one `floating` finding each VM, not a pile of derived
/// cpu-shared/core-shared/host-overlap errors against everyone: the tenants
/// come back with those vCPUs left out of their CPUs, and the findings.
fn without_floating_vcpus(host: &HostTopology, tenants: &[Tenant]) -> (Vec<Tenant>, Vec<Conflict>) {
    let all = host.usable_cpus();
    let mut findings = Vec::new();
    let adjusted = tenants
        .iter()
        .map(|t| {
            if t.kind != TenantKind::Vm || !t.pinned {
                return t.clone();
            }
            let (loose, held): (Vec<_>, Vec<_>) =
                t.vcpus.iter().partition(|v| all.is_subset(&v.cpus));
            if loose.is_empty() {
                return t.clone();
            }
            let ids: Vec<String> = loose.iter().map(|v| v.vcpu.to_string()).collect();
            findings.push(Conflict {
                kind: ConflictKind::Floating,
                severity: Severity::Warning,
                tenants: vec![t.name.clone()],
                cpus: all.clone(),
                message: format!(
                    "{}'s {} {} {} not pinned: {} can run on any CPU, next to anyone",
                    t.name,
                    if ids.len() == 1 { "vCPU" } else { "vCPUs" },
                    ids.join(","),
                    if ids.len() == 1 { "is" } else { "are" },
                    if ids.len() == 1 { "it" } else { "they" },
                ),
            });
            let mut t = t.clone();
            t.cpus = held.iter().fold(CpuSet::new(), |acc, v| acc.union(&v.cpus));
            t
        })
        .collect();
    (adjusted, findings)
}

/// Tenants that are not pinned at all.
fn floating(tenants: &[Tenant]) -> Vec<Conflict> {
    let mut out = Vec::new();
    for t in tenants.iter().filter(|t| !t.pinned) {
        out.push(Conflict {
            kind: ConflictKind::Floating,
            severity: Severity::Warning,
            tenants: vec![t.name.clone()],
            cpus: t.cpus.clone(),
            message: format!(
                "{} is not pinned: its vCPUs can run on any CPU, next to anyone",
                t.name
            ),
        });
    }
    out
}

/// Pairs of pinned tenants on the same CPUs (`cpu-shared`, or
/// `host-overlap` with the host) or on SMT siblings (`core-shared`).
fn shared(host: &HostTopology, tenants: &[Tenant]) -> Vec<Conflict> {
    let mut out = Vec::new();
    let core = core_of(host);
    let pinned: Vec<&Tenant> = tenants.iter().filter(|t| t.pinned).collect();
    for (i, a) in pinned.iter().enumerate() {
        for b in pinned.iter().skip(i + 1) {
            let names = vec![a.name.clone(), b.name.clone()];
            let shared = a.cpus.intersection(&b.cpus);
            let host_pair = a.kind == TenantKind::Host || b.kind == TenantKind::Host;
            if !shared.is_empty() {
                let (kind, message) = if host_pair {
                    let vm = if a.kind == TenantKind::Host {
                        &b.name
                    } else {
                        &a.name
                    };
                    (
                        ConflictKind::HostOverlap,
                        format!("{vm} runs vCPUs on the host's CPUs {shared}"),
                    )
                } else {
                    (
                        ConflictKind::CpuShared,
                        format!(
                            "{} and {} have vCPUs on the same CPUs {shared}",
                            a.name, b.name
                        ),
                    )
                };
                out.push(Conflict {
                    kind,
                    severity: Severity::Error,
                    tenants: names.clone(),
                    cpus: shared.clone(),
                    message,
                });
            }
            // Siblings: different CPUs of one physical core.
            let cores_a: BTreeMap<CoreId, CpuSet> = group_by_core(&a.cpus, &core);
            let cores_b: BTreeMap<CoreId, CpuSet> = group_by_core(&b.cpus, &core);
            let mut sibling_cpus = CpuSet::new();
            let mut sibling_cores = BTreeSet::new();
            for (c, ca) in &cores_a {
                if let Some(cb) = cores_b.get(c) {
                    let only_a = ca.difference(cb);
                    let only_b = cb.difference(ca);
                    if !only_a.is_empty() || !only_b.is_empty() {
                        sibling_cpus = sibling_cpus.union(&ca.union(cb));
                        sibling_cores.insert(*c);
                    }
                }
            }
            if !sibling_cores.is_empty() {
                let cores: Vec<String> = sibling_cores.iter().map(|c| c.to_string()).collect();
                out.push(Conflict {
                    kind: ConflictKind::CoreShared,
                    severity: Severity::Error,
                    tenants: names,
                    cpus: sibling_cpus.clone(),
                    message: format!(
                        "{} and {} run on SMT siblings of core{} {} (CPUs {sibling_cpus}): noisy neighbours",
                        a.name,
                        b.name,
                        if cores.len() == 1 { "" } else { "s" },
                        cores.join(",")
                    ),
                });
            }
        }
    }
    out
}

/// Whether `t`'s emulator shares CPUs only with its housekeeping vCPUs, as
/// `emulator = "with-housekeeping"` lays it out: the vCPUs on its CPUs are
/// the first k (vCPU 0 …), fewer than all, each pinned within them, and no
/// other vCPU of it runs on their cores (SMT siblings included).
fn with_housekeeping(host: &HostTopology, t: &Tenant) -> bool {
    let mut on: Vec<u32> = t
        .vcpus
        .iter()
        .filter(|v| v.cpus.intersects(&t.emulator_cpus))
        .map(|v| v.vcpu)
        .collect();
    on.sort_unstable();
    let prefix = on.iter().enumerate().all(|(i, &v)| v as usize == i);
    let within = t
        .vcpus
        .iter()
        .filter(|v| on.contains(&v.vcpu))
        .all(|v| v.cpus.is_subset(&t.emulator_cpus));
    let cores = host.whole_cores(&t.emulator_cpus);
    let apart = t
        .vcpus
        .iter()
        .filter(|v| !on.contains(&v.vcpu))
        .all(|v| host.whole_cores(&v.cpus).is_disjoint(&cores));
    !on.is_empty() && on.len() < t.vcpus.len() && prefix && within && apart
}

/// Emulator threads on vCPU CPUs (their own VM's or another's); its own
/// housekeeping vCPUs' CPUs are where `with-housekeeping` puts them.
fn emulator_overlap(host: &HostTopology, vms: &[&Tenant]) -> Vec<Conflict> {
    let mut out = Vec::new();
    for t in vms {
        for other in vms {
            if other.name == t.name && with_housekeeping(host, t) {
                continue;
            }
            let shared = t.emulator_cpus.intersection(&other.cpus);
            if !shared.is_empty() {
                let whose = if other.name == t.name {
                    "its own".to_owned()
                } else {
                    format!("{}'s", other.name)
                };
                out.push(Conflict {
                    kind: ConflictKind::EmulatorOverlap,
                    severity: Severity::Warning,
                    tenants: if other.name == t.name {
                        vec![t.name.clone()]
                    } else {
                        vec![t.name.clone(), other.name.clone()]
                    },
                    cpus: shared.clone(),
                    message: format!(
                        "{}'s emulator threads run on {whose} vCPU CPUs {shared}",
                        t.name
                    ),
                });
            }
        }
    }
    out
}

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
fn numa_split(t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> Option<Conflict> {
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
fn emulator_remote(t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> Option<Conflict> {
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
fn memory_remote(t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> Option<Conflict> {
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
fn nic_remote(host: &HostTopology, t: &Tenant, node_of: &BTreeMap<CpuId, NodeId>) -> Vec<Conflict> {
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

fn group_by_core(cpus: &CpuSet, core: &BTreeMap<CpuId, CoreId>) -> BTreeMap<CoreId, CpuSet> {
    let mut out: BTreeMap<CoreId, CpuSet> = BTreeMap::new();
    for cpu in cpus.iter() {
        if let Some(c) = core.get(&cpu) {
            out.entry(*c).or_default().insert(cpu);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::domain::{tenant_from_domain, DomainError};
    use crate::tenant::host_tenant;
    use crate::tenant::test_host as host;

    fn domain(name: &str, pins: &[(u32, &str)], emulator: Option<&str>) -> String {
        let mut cputune = String::new();
        for (v, c) in pins {
            cputune.push_str(&format!("<vcpupin vcpu='{v}' cpuset='{c}'/>"));
        }
        if let Some(e) = emulator {
            cputune.push_str(&format!("<emulatorpin cpuset='{e}'/>"));
        }
        format!(
            "<domain type='kvm'><name>{name}</name><vcpu placement='static'>{}</vcpu><cputune>{cputune}</cputune></domain>",
            pins.len().max(1)
        )
    }

    fn kinds(c: &[Conflict]) -> Vec<(String, Vec<String>, String)> {
        c.iter()
            .map(|c| (c.kind.to_string(), c.tenants.clone(), c.cpus.to_string()))
            .collect()
    }

    /// `emulator = "with-housekeeping"`: the emulator on the housekeeping
    /// vCPU 0's whole core (CPUs 1 and 5 of the test host, siblings), the
    /// poll-mode vCPUs on other cores — no finding. The same emulator with a
    /// poll-mode vCPU on the sibling, or sharing a vCPU other than the first
    /// ones, is still an overlap.
    #[test]
    fn the_housekeeping_layout_is_not_an_emulator_overlap() -> Result<(), DomainError> {
        let h = host();
        let ok = tenant_from_domain(
            "a.xml",
            &domain("hk", &[(0, "1"), (1, "2"), (2, "6")], Some("1,5")),
            &h,
        )?;
        let found = kinds(&conflicts(&h, &[ok]));
        assert!(
            found.iter().all(|(k, _, _)| k != "emulator-overlap"),
            "{found:?}"
        );
        for (pins, emulator) in [
            // vCPU 1 (poll-mode) on 5, the emulator's core.
            (&[(0, "1"), (1, "5"), (2, "2")][..], "1"),
            // The emulator on vCPU 1's CPU, not vCPU 0's.
            (&[(0, "2"), (1, "1"), (2, "6")][..], "1,5"),
            // Every vCPU on the emulator's CPUs: nothing is kept apart.
            (&[(0, "1"), (1, "5")][..], "1,5"),
        ] {
            let t = tenant_from_domain("b.xml", &domain("bad", pins, Some(emulator)), &h)?;
            let found = kinds(&conflicts(&h, &[t]));
            assert!(
                found.iter().any(|(k, _, _)| k == "emulator-overlap"),
                "{pins:?} {emulator}: {found:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn finds_sibling_sharing_by_core_not_by_number() -> Result<(), DomainError> {
        let h = host();
        // vm1 on CPU 1, vm2 on CPU 5: CPU numbers far apart, same core (1,5).
        let a = tenant_from_domain("a.xml", &domain("vm1", &[(0, "1")], Some("0")), &h)?;
        let b = tenant_from_domain("b.xml", &domain("vm2", &[(0, "5")], Some("0")), &h)?;
        let c = tenant_from_domain("c.xml", &domain("vm3", &[(0, "2")], Some("0")), &h)?;
        let found = conflicts(
            &h,
            &[host_tenant(&"0,4".parse().unwrap_or_default()), a, b, c],
        );
        assert_eq!(
            kinds(&found),
            [(
                "core-shared".to_owned(),
                vec!["vm1".to_owned(), "vm2".to_owned()],
                "1,5".to_owned()
            )]
        );
        Ok(())
    }

    #[test]
    fn finds_cpu_sharing_host_overlap_floating_and_emulators() -> Result<(), DomainError> {
        let h = host();
        let a = tenant_from_domain(
            "a.xml",
            &domain("vm1", &[(0, "1"), (1, "5")], Some("1")),
            &h,
        )?;
        let b = tenant_from_domain(
            "b.xml",
            &domain("vm2", &[(0, "5"), (1, "0")], Some("3")),
            &h,
        )?;
        let free = tenant_from_domain(
            "f.xml",
            "<domain><name>loose</name><vcpu>2</vcpu></domain>",
            &h,
        )?;
        let found = kinds(&conflicts(
            &h,
            &[host_tenant(&"0,4".parse().unwrap_or_default()), a, b, free],
        ));
        let expect = |k: &str, t: &[&str], c: &str| {
            (
                k.to_owned(),
                t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
                c.to_owned(),
            )
        };
        assert!(
            found.contains(&expect("cpu-shared", &["vm1", "vm2"], "5")),
            "{found:?}"
        );
        assert!(
            found.contains(&expect("host-overlap", &["host", "vm2"], "0")),
            "{found:?}"
        );
        assert!(
            found.contains(&expect("floating", &["loose"], "0-7")),
            "{found:?}"
        );
        assert!(
            found.contains(&expect("emulator-overlap", &["vm1"], "1")),
            "{found:?}"
        );
        // vm1 on 1 and 5, vm2 on 5: vm1's CPU 1 is vm2's CPU 5's sibling.
        assert!(
            found.contains(&expect("core-shared", &["vm1", "vm2"], "1,5")),
            "{found:?}"
        );
        Ok(())
    }

    #[test]
    fn memory_off_the_vcpus_nodes_is_memory_remote() -> Result<(), Box<dyn std::error::Error>> {
        use crate::ids::NodeId;
        use crate::tenant::NodeResident;
        use crate::topology::{self, Source};
        // Two nodes of 2 cores: CPUs 0-1 on node 0, 2-3 on node 1.
        let h = topology::load(&Source::Synthetic("numa:2 core:2 pu:1".into()))?;
        let on = |name: &str, numatune: &str| {
            format!(
                "<domain><name>{name}</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>\
                 <emulatorpin cpuset='0'/></cputune>{numatune}</domain>"
            )
        };
        let far = tenant_from_domain(
            "far.xml",
            &on(
                "far",
                "<numatune><memory mode='strict' nodeset='1'/></numatune>",
            ),
            &h,
        )?;
        let near = tenant_from_domain(
            "near.xml",
            &on(
                "near",
                "<numatune><memory mode='strict' nodeset='0'/></numatune>",
            ),
            &h,
        )?;
        // Read as running: 10 % off the node is QEMU's shared pages (no
        // finding), 3 GiB of 4 is one.
        let mut shared = tenant_from_domain("s.xml", &on("shared", ""), &h)?;
        shared.memory_resident = Some(vec![
            NodeResident {
                node: NodeId(0),
                kib: 900,
            },
            NodeResident {
                node: NodeId(1),
                kib: 100,
            },
        ]);
        let mut moved = tenant_from_domain(
            "m.xml",
            &on(
                "moved",
                "<numatune><memory mode='strict' nodeset='0'/></numatune>",
            ),
            &h,
        )?;
        moved.memory_resident = Some(vec![
            NodeResident {
                node: NodeId(0),
                kib: 1 << 20,
            },
            NodeResident {
                node: NodeId(1),
                kib: 3 << 20,
            },
        ]);
        let found = conflicts(&h, &[far, near, shared, moved]);
        let remote: Vec<(&str, &str)> = found
            .iter()
            .filter(|c| c.kind == ConflictKind::MemoryRemote)
            .map(|c| (c.tenants[0].as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            remote,
            [
                ("far", "far's memory is on node(s) 1 (strict), its vCPUs on 0"),
                (
                    "moved",
                    "moved's memory is resident off its vCPUs' node(s) 0: 3.0 GiB on node 1 of 4.0 GiB (75%)"
                ),
            ]
        );
        assert!(
            found.iter().all(|c| c.kind != ConflictKind::NumaSplit),
            "{found:?}"
        );
        Ok(())
    }

    #[test]
    fn an_emulator_on_another_node_is_emulator_remote() -> Result<(), Box<dyn std::error::Error>> {
        use crate::topology::{self, Source};
        let h = topology::load(&Source::Synthetic("numa:2 core:2 pu:1".into()))?;
        let vm = |name: &str, emulator: &str| {
            format!(
                "<domain><name>{name}</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='3'/>\
                 <emulatorpin cpuset='{emulator}'/></cputune></domain>"
            )
        };
        let remote = tenant_from_domain("r.xml", &vm("remote", "0"), &h)?;
        let local = tenant_from_domain("l.xml", &vm("local", "2"), &h)?;
        let both = tenant_from_domain("b.xml", &vm("both", "0,2"), &h)?;
        let found: Vec<(String, String)> = conflicts(&h, &[remote, local, both])
            .into_iter()
            .filter(|c| c.kind == ConflictKind::EmulatorRemote)
            .map(|c| (c.tenants[0].clone(), c.message))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "remote");
        assert!(found[0].1.starts_with(
            "remote's emulator threads run on CPUs 0 of node(s) 0, its vCPUs on node(s) 1"
        ));
        Ok(())
    }
}
