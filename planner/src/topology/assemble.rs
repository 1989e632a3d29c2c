//! The one step every reader shares: a flat list of CPUs with the keys of their
//! core, package, NUMA node and L3 domain becomes a [`HostTopology`] with dense,
//! source-independent ids (cores, packages and L3 domains numbered in order of
//! their lowest CPU). Readers decide what the keys mean; this module only groups.

use super::{Core, HostTopology, L3Domain, NumaNode, Package, PciDevice, Pu, TopologyError};
use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId, L3Id, NodeId, PackageId};
use std::collections::BTreeMap;

/// One CPU as a reader saw it. Keys are opaque to this module: two CPUs with
/// the same `core` key are SMT siblings, and so on.
#[derive(Debug, Clone)]
pub(crate) struct RawPu {
    pub cpu: CpuId,
    pub online: bool,
    pub allowed: bool,
    /// `None` for an online CPU means "a core of its own".
    pub core: Option<u64>,
    /// Key of the package in [`RawTopology::packages`].
    pub package: Option<u64>,
    pub node: Option<NodeId>,
    /// Key of the L3 cache in [`RawTopology::l3s`].
    pub l3: Option<u64>,
}

/// A package or cache as a reader saw it. Readers list them so that one
/// without an online CPU (all its CPUs offline or outside our cgroup) is kept.
#[derive(Debug, Clone)]
pub(crate) struct RawGroup {
    pub key: u64,
    /// The OS's own number, when there is one.
    pub os_index: Option<u32>,
    /// Size in bytes (caches).
    pub size_bytes: Option<u64>,
    /// Every CPU the reader knows in the group, online or not; used to order
    /// groups that have no online CPU.
    pub known_cpus: CpuSet,
}

/// A NUMA node as a reader saw it.
#[derive(Debug, Clone)]
pub(crate) struct RawNode {
    pub id: NodeId,
    pub memory_bytes: Option<u64>,
    /// Free memory now, when known.
    pub memory_free_bytes: Option<u64>,
    /// Huge page pools, by size.
    pub hugepages: Vec<super::PagePool>,
    /// The node's CPUs when the reader knows them as a set (hwloc); two nodes
    /// can share CPUs (memory-only halves of a Cluster-on-Die socket). `None`:
    /// the CPUs whose `node` is this one.
    pub cpus: Option<CpuSet>,
    /// Its distances to the nodes, when the source has them.
    pub distances: Vec<super::NodeDistance>,
}

/// Everything a reader found, before ids are assigned.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawTopology {
    /// Where it was read from, as the plan's `host.source` says it.
    pub source: String,
    /// Every logical CPU the source lists, online or not.
    pub pus: Vec<RawPu>,
    /// The packages (sockets) with their CPUs.
    pub packages: Vec<RawGroup>,
    /// The L3 cache domains with their CPUs.
    pub l3s: Vec<RawGroup>,
    /// The NUMA nodes with their CPUs, memory and distances.
    pub nodes: Vec<RawNode>,
    /// The PCI devices the source lists.
    pub pci: Vec<PciDevice>,
    /// The CPU vendor string, when the source has one.
    pub cpu_vendor: Option<String>,
}

/// A group with its online CPUs, ready to be numbered.
struct Numbered {
    online: CpuSet,
    group: RawGroup,
}

/// Numbers groups densely: those with online CPUs in order of their lowest
/// one, then the others in order of their lowest known CPU, then by key.
fn number_groups(
    listed: &[RawGroup],
    pus: &[RawPu],
    key_of: impl Fn(&RawPu) -> Option<u64>,
) -> Vec<Numbered> {
    let mut groups: BTreeMap<u64, Numbered> = listed
        .iter()
        .map(|g| {
            (
                g.key,
                Numbered {
                    online: CpuSet::new(),
                    group: g.clone(),
                },
            )
        })
        .collect();
    for pu in pus {
        let Some(key) = key_of(pu) else { continue };
        let entry = groups.entry(key).or_insert_with(|| Numbered {
            online: CpuSet::new(),
            group: RawGroup {
                key,
                os_index: None,
                size_bytes: None,
                known_cpus: CpuSet::new(),
            },
        });
        entry.group.known_cpus.insert(pu.cpu);
        if pu.online {
            entry.online.insert(pu.cpu);
        }
    }
    let mut groups: Vec<Numbered> = groups.into_values().collect();
    groups.sort_by_key(|g| {
        (
            g.online.first().is_none(),
            g.online.first().or(g.group.known_cpus.first()),
            g.group.key,
        )
    });
    groups
}

fn dense(position: usize) -> u32 {
    // Positions count CPUs' groups, and there are fewer than CpuId::LIMIT CPUs.
    u32::try_from(position).unwrap_or(u32::MAX)
}

impl RawTopology {
    /// Builds the model. Fails only when no CPU is online or a CPU is listed twice.
    pub fn assemble(mut self) -> Result<HostTopology, TopologyError> {
        self.pus.sort_by_key(|p| p.cpu);
        self.check_cpus()?;
        let packages = self.packages();
        let l3_domains = self.l3_domains();
        let cores = self.cores(&packages, &l3_domains);
        let pus = self.numbered_pus(&cores);
        let numa_nodes = self.numa_nodes();
        let mut pci = self.pci;
        pci.sort_by_key(|d| d.address);
        // On a one-node host every device is local to that node, whatever
        // sysfs says (`numa_node` is -1 there on many machines, while hwloc
        // XML of the same host says node 0): the same NIC gets the same node
        // from every source, and NIC locality is trivially met.
        if let [only] = numa_nodes.as_slice() {
            for device in &mut pci {
                device.numa_node.get_or_insert(only.id);
            }
        }

        Ok(HostTopology {
            source: self.source,
            packages,
            numa_nodes,
            l3_domains,
            cores,
            pus,
            pci,
            cpu_vendor: self.cpu_vendor,
        })
    }

    /// Each CPU once (`pus` sorted), and at least one online.
    fn check_cpus(&self) -> Result<(), TopologyError> {
        if let Some(pair) = self.pus.windows(2).find(|w| w[0].cpu == w[1].cpu) {
            return Err(TopologyError::Empty {
                source_name: self.source.clone(),
                problem: format!(
                    "CPU {} is listed twice: the source is inconsistent",
                    pair[0].cpu
                ),
            });
        }
        if !self.pus.iter().any(|p| p.online) {
            return Err(TopologyError::Empty {
                source_name: self.source.clone(),
                problem: "the topology has no online CPU (nothing to plan on)".to_owned(),
            });
        }
        Ok(())
    }

    fn packages(&self) -> Vec<Package> {
        number_groups(&self.packages, &self.pus, |p| p.package)
            .into_iter()
            .enumerate()
            .map(|(i, g)| Package {
                id: PackageId(dense(i)),
                os_index: g.group.os_index,
                cpus: g.online,
            })
            .collect()
    }

    fn l3_domains(&self) -> Vec<L3Domain> {
        number_groups(&self.l3s, &self.pus, |p| p.l3)
            .into_iter()
            .enumerate()
            .map(|(i, g)| L3Domain {
                id: L3Id(dense(i)),
                cpus: g.online,
                size_bytes: g.group.size_bytes,
            })
            .collect()
    }

    /// Cores: an online CPU without a core key is a core of its own. Each
    /// takes its package, node and L3 domain from its first CPU.
    fn cores(&self, packages: &[Package], l3_domains: &[L3Domain]) -> Vec<Core> {
        let mut cores: BTreeMap<(u8, u64), CpuSet> = BTreeMap::new();
        for pu in self.pus.iter().filter(|p| p.online) {
            let key = match pu.core {
                Some(key) => (0u8, key),
                None => (1u8, u64::from(pu.cpu.0)),
            };
            cores.entry(key).or_default().insert(pu.cpu);
        }
        let mut cores: Vec<CpuSet> = cores.into_values().collect();
        cores.sort_by_key(CpuSet::first);

        let by_cpu: BTreeMap<CpuId, &RawPu> = self.pus.iter().map(|p| (p.cpu, p)).collect();
        let package_of = |cpu: CpuId| packages.iter().find(|p| p.cpus.contains(cpu)).map(|p| p.id);
        let l3_of = |cpu: CpuId| {
            l3_domains
                .iter()
                .find(|d| d.cpus.contains(cpu))
                .map(|d| d.id)
        };
        let node_of = |cpu: CpuId| by_cpu.get(&cpu).and_then(|p| p.node);

        cores
            .into_iter()
            .enumerate()
            .map(|(i, cpus)| {
                let first = cpus.first().unwrap_or(CpuId(0));
                Core {
                    id: CoreId(dense(i)),
                    package: package_of(first),
                    numa_node: node_of(first),
                    l3: l3_of(first),
                    cpus,
                }
            })
            .collect()
    }

    /// Every CPU with the id of its core.
    fn numbered_pus(&self, cores: &[Core]) -> Vec<Pu> {
        let mut core_of: BTreeMap<CpuId, CoreId> = BTreeMap::new();
        for core in cores {
            for cpu in core.cpus.iter() {
                core_of.insert(cpu, core.id);
            }
        }
        self.pus
            .iter()
            .map(|p| Pu {
                cpu: p.cpu,
                core: core_of.get(&p.cpu).copied(),
                usable: p.online && p.allowed,
                online: p.online,
                allowed: p.allowed,
                numa_node: p.node,
            })
            .collect()
    }

    /// Nodes: those the reader listed plus any a CPU names; keep those with
    /// CPUs or memory.
    fn numa_nodes(&self) -> Vec<NumaNode> {
        let mut nodes: BTreeMap<NodeId, NumaNode> = BTreeMap::new();
        let online = self
            .pus
            .iter()
            .filter(|p| p.online)
            .map(|p| p.cpu)
            .collect::<CpuSet>();
        for raw in &self.nodes {
            let node = nodes.entry(raw.id).or_insert_with(|| NumaNode {
                id: raw.id,
                cpus: CpuSet::new(),
                memory_bytes: None,
                memory_free_bytes: None,
                hugepages: Vec::new(),
                distances: Vec::new(),
            });
            node.memory_bytes = node.memory_bytes.or(raw.memory_bytes);
            if node.distances.is_empty() {
                node.distances.clone_from(&raw.distances);
                node.distances.sort_by_key(|d| d.node);
                node.distances.dedup_by_key(|d| d.node);
            }
            node.memory_free_bytes = node.memory_free_bytes.or(raw.memory_free_bytes);
            if node.hugepages.is_empty() {
                node.hugepages.clone_from(&raw.hugepages);
                node.hugepages.sort_by_key(|p| p.size_kib);
            }
            if let Some(cpus) = &raw.cpus {
                node.cpus = node.cpus.union(&cpus.intersection(&online));
            }
        }
        let listed: std::collections::BTreeSet<NodeId> = self
            .nodes
            .iter()
            .filter(|n| n.cpus.is_some())
            .map(|n| n.id)
            .collect();
        for pu in self.pus.iter().filter(|p| p.online) {
            if let Some(id) = pu.node.filter(|id| !listed.contains(id)) {
                nodes
                    .entry(id)
                    .or_insert_with(|| NumaNode {
                        id,
                        cpus: CpuSet::new(),
                        memory_bytes: None,
                        memory_free_bytes: None,
                        hugepages: Vec::new(),
                        distances: Vec::new(),
                    })
                    .cpus
                    .insert(pu.cpu);
            }
        }
        nodes
            .into_values()
            .filter(|n| !n.cpus.is_empty() || n.memory_bytes.is_some_and(|m| m > 0))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pu(cpu: u32, core: u64, package: u64, node: u32) -> RawPu {
        RawPu {
            cpu: CpuId(cpu),
            online: true,
            allowed: true,
            core: Some(core),
            package: Some(package),
            node: Some(NodeId(node)),
            l3: None,
        }
    }

    #[test]
    fn numbers_cores_and_packages_by_lowest_cpu() -> Result<(), TopologyError> {
        // Two packages interleaved by CPU number, siblings N and N+4; keys are
        // deliberately in the opposite order of the CPUs.
        let mut raw = RawTopology {
            source: "test".into(),
            packages: (0..3)
                .map(|key| RawGroup {
                    key,
                    os_index: Some(key as u32 * 10),
                    size_bytes: None,
                    known_cpus: CpuSet::new(),
                })
                .collect(),
            ..Default::default()
        };
        for cpu in 0..8u32 {
            let core = 100 - u64::from(cpu % 4);
            raw.pus.push(pu(cpu, core, u64::from(1 - cpu % 2), cpu % 2));
        }
        raw.pus.push(RawPu {
            cpu: CpuId(8),
            online: false,
            allowed: true,
            core: None,
            package: None,
            node: Some(NodeId(0)),
            l3: None,
        });
        let host = raw.assemble()?;
        let cores: Vec<String> = host.cores.iter().map(|c| c.cpus.to_string()).collect();
        assert_eq!(cores, ["0,4", "1,5", "2,6", "3,7"]);
        // Package key 2 has no CPU at all: kept, numbered last.
        assert_eq!(host.packages.len(), 3);
        assert_eq!(host.packages[0].cpus.to_string(), "0,2,4,6");
        assert_eq!(host.packages[0].os_index, Some(10));
        assert_eq!(host.packages[2].os_index, Some(20));
        assert!(host.packages[2].cpus.is_empty());
        assert_eq!(host.cores[1].package, Some(PackageId(1)));
        assert_eq!(host.numa_nodes[1].cpus.to_string(), "1,3,5,7");
        let offline = host.pu(CpuId(8));
        assert_eq!(offline.map(|p| (p.usable, p.core)), Some((false, None)));
        assert_eq!(host.usable_cpus().to_string(), "0-7");
        Ok(())
    }

    /// Issue 15, item 14: a NIC with `numa_node` -1 on a one-node host is on
    /// that node (as hwloc XML of the same host says); on two nodes it stays
    /// unknown.
    #[test]
    fn a_one_node_hosts_devices_are_on_its_node() -> Result<(), TopologyError> {
        let nic = |address: &str| PciDevice {
            address: address.parse().unwrap_or_else(|e| panic!("{e}")),
            class_id: crate::topology::pci::PciClass(0x0200),
            class: "Ethernet controller".into(),
            vendor_id: None,
            device_id: None,
            vendor: None,
            device: None,
            names: Vec::new(),
            numa_node: None,
            local_cpus: None,
            link: None,
        };
        let raw = |nodes: u32| RawTopology {
            source: "test".into(),
            pus: (0..4)
                .map(|cpu| pu(cpu, u64::from(cpu), 0, cpu % nodes))
                .collect(),
            pci: vec![nic("0000:00:03.0")],
            ..Default::default()
        };
        let one = raw(1).assemble()?;
        assert_eq!(one.pci[0].numa_node, Some(NodeId(0)));
        let two = raw(2).assemble()?;
        assert_eq!(two.pci[0].numa_node, None);
        Ok(())
    }

    #[test]
    fn refuses_a_topology_without_online_cpus() {
        let raw = RawTopology {
            source: "caps.xml".into(),
            ..Default::default()
        };
        let err = raw.assemble().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("caps.xml: the topology has no online CPU (nothing to plan on)")
        );
    }
}
