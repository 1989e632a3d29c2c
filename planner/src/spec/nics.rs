//! A VM's NICs on a concrete host: each looked up, its node, and what the
//! solver keeps to (`nic_affinity`: required, socket, preferred, ignore).

use super::schema::NicLocality;
use super::{Spec, SpecError, VmSpec};
use crate::ids::NodeId;
use crate::model::{NicAffinity, NumaPolicy};
use crate::model::{Warning, WarningKind};
use crate::topology::{HostTopology, PciAddress};
use std::collections::BTreeSet;

/// A VM's NICs as the solver sees them.
#[derive(Debug, Default)]
pub(super) struct Nics {
    pub(super) nics: Vec<PciAddress>,
    pub(super) nodes: Vec<NodeId>,
    pub(super) affinity: NicAffinity,
    pub(super) cells: Vec<NodeId>,
}

/// The nodes of the package (socket) `node`'s cores are on; `node` alone
/// when the topology gives it no cores.
fn package_nodes(host: &HostTopology, node: NodeId) -> BTreeSet<NodeId> {
    let packages: BTreeSet<_> = host
        .cores
        .iter()
        .filter(|c| c.numa_node == Some(node))
        .filter_map(|c| c.package)
        .collect();
    let mut nodes: BTreeSet<NodeId> = host
        .cores
        .iter()
        .filter(|c| c.package.is_some_and(|p| packages.contains(&p)))
        .filter_map(|c| c.numa_node)
        .collect();
    nodes.insert(node);
    nodes
}

/// "node 1", "nodes 0, 1".
fn nodes_text(nodes: &BTreeSet<NodeId>) -> String {
    let ids: Vec<String> = nodes.iter().map(ToString::to_string).collect();
    match ids.len() {
        1 => format!("node {}", ids[0]),
        _ => format!("nodes {}", ids.join(", ")),
    }
}

impl Spec {
    /// The VM's NICs on this host and what the solver keeps to: a NIC the
    /// host does not list is an error when `required` or `socket`, a warning
    /// when `preferred`. Required NICs on several nodes keep a VM that may
    /// span nodes to those nodes, with vCPUs on each (a guest cell per NIC
    /// node); a `numa = "strict"` VM can only have them on one node.
    pub(super) fn nic(
        &self,
        vm: &VmSpec,
        host: &HostTopology,
        warnings: &mut Vec<Warning>,
    ) -> Result<Nics, SpecError> {
        let mut out = Nics {
            nics: vm.nics.iter().map(|&(a, _, _)| a).collect(),
            ..Nics::default()
        };
        // Per required (or socket) NIC: the nodes it allows, and its own node.
        let mut required: Vec<(PciAddress, BTreeSet<NodeId>, Option<NodeId>, usize)> = Vec::new();
        let mut preferred: BTreeSet<NodeId> = BTreeSet::new();
        for &(address, affinity, line) in &vm.nics {
            let device = host.pci.iter().find(|d| d.address == address);
            let Some(device) = device else {
                if matches!(affinity, NicLocality::Required | NicLocality::Socket) {
                    return Err(self.missing_nic(vm, host, address, affinity, line));
                }
                if affinity == NicLocality::Preferred {
                    warnings.push(Warning::vm(
                        &vm.name,
                        WarningKind::Nic,
                        format!(
                            "NIC {address} is not on {}: its locality is unknown",
                            host.source
                        ),
                    ));
                }
                continue;
            };
            let Some(node) = device.numa_node else {
                continue;
            };
            match affinity {
                NicLocality::Required => {
                    required.push((address, [node].into(), Some(node), line));
                }
                NicLocality::Socket => {
                    required.push((address, package_nodes(host, node), None, line));
                }
                NicLocality::Preferred => {
                    preferred.insert(node);
                }
                NicLocality::Ignore => {}
            }
        }
        out.affinity = affinity_of(vm);
        if required.is_empty() {
            out.nodes = preferred.into_iter().collect();
            return Ok(out);
        }
        let allowed: BTreeSet<NodeId> = if vm.numa == NumaPolicy::Strict {
            let mut sets = required.iter().map(|(_, set, _, _)| set.clone());
            let first = sets.next().unwrap_or_default();
            let common: BTreeSet<NodeId> = sets.fold(first, |acc, set| &acc & &set);
            if common.is_empty() {
                return Err(self.split_nics(vm, &required));
            }
            common
        } else {
            required
                .iter()
                .flat_map(|(_, set, _, _)| set.iter().copied())
                .collect()
        };
        if vm.numa != NumaPolicy::Strict {
            let cells: BTreeSet<NodeId> =
                required.iter().filter_map(|(_, _, own, _)| *own).collect();
            if cells.len() > 1 {
                out.cells = cells.into_iter().collect();
            }
        }
        warnings.extend(preferred_off(vm, host, &allowed));
        out.nodes = allowed.into_iter().collect();
        Ok(out)
    }

    /// A `required`/`socket` NIC the host does not list.
    pub(super) fn missing_nic(
        &self,
        vm: &VmSpec,
        host: &HostTopology,
        address: PciAddress,
        affinity: NicLocality,
        line: usize,
    ) -> SpecError {
        let word = if affinity == NicLocality::Socket {
            "socket"
        } else {
            "required"
        };
        let mut e = self.error(
            line,
            "vm.nic",
            format!(
                "{}: NIC {address} is not on {} and its affinity is \"{word}\"",
                vm.name, host.source
            ),
        );
        let nics: Vec<String> = host
            .pci
            .iter()
            .filter(|d| d.is_network())
            .map(|d| d.address.to_string())
            .collect();
        e.hint = Some(if nics.is_empty() {
            "this topology lists no network devices; use a source with PCI devices (the live host, `lstopo --of xml`, or --connect), or nic_affinity = \"preferred\"".to_owned()
        } else {
            format!("network devices on the host: {}", nics.join(", "))
        });
        e
    }

    /// Required NICs no one node (or package) holds, for a strict VM.
    pub(super) fn split_nics(
        &self,
        vm: &VmSpec,
        required: &[(PciAddress, BTreeSet<NodeId>, Option<NodeId>, usize)],
    ) -> SpecError {
        let listed: Vec<String> = required
            .iter()
            .map(|(a, set, _, _)| format!("{a} on {}", nodes_text(set)))
            .collect();
        let line = required.get(1).map_or(vm.line, |r| r.3);
        let mut e = self.error(
            line,
            "vm.nics",
            format!(
                "{}: its required NICs are on different NUMA nodes ({}), but numa = \"strict\" keeps it on one node",
                vm.name,
                listed.join(", ")
            ),
        );
        e.hint = Some(
            "give it numa = \"spread\" (a guest cell on each NIC's node), or affinity = \"preferred\" (or \"socket\") for all but one NIC".to_owned(),
        );
        e
    }
}

/// The affinity the solver keeps `vm` to: its strongest NIC's.
fn affinity_of(vm: &VmSpec) -> NicAffinity {
    let strongest = vm.nics.iter().map(|&(_, a, _)| a).min_by_key(|a| match a {
        NicLocality::Required | NicLocality::Socket => 0,
        NicLocality::Preferred => 1,
        NicLocality::Ignore => 2,
    });
    match strongest {
        Some(NicLocality::Required | NicLocality::Socket) => NicAffinity::Required,
        Some(NicLocality::Preferred) => NicAffinity::Preferred,
        _ => NicAffinity::Ignore,
    }
}

/// A warning when `vm`'s preferred NICs are off the nodes its required
/// NICs keep it to (`allowed`).
fn preferred_off(vm: &VmSpec, host: &HostTopology, allowed: &BTreeSet<NodeId>) -> Option<Warning> {
    let off: Vec<String> = vm
        .nics
        .iter()
        .filter(|&&(_, a, _)| a == NicLocality::Preferred)
        .filter_map(|&(address, _, _)| {
            let node = host.pci.iter().find(|d| d.address == address)?.numa_node?;
            (!allowed.contains(&node)).then(|| format!("{address} (node {node})"))
        })
        .collect();
    (!off.is_empty()).then(|| {
        Warning::vm(
            &vm.name,
            WarningKind::Nic,
            format!(
                "preferred NIC {} is off the node(s) its required NICs keep it to ({}): its packets cross the socket interconnect",
                off.join(", "),
                nodes_text(allowed)
            ),
        )
    })
}
