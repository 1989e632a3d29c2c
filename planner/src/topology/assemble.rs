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
    /// Key and OS number of the package.
    pub package: Option<(u64, Option<u32>)>,
    pub node: Option<NodeId>,
    /// Key and size in bytes of the L3 cache.
    pub l3: Option<(u64, Option<u64>)>,
}

/// A NUMA node as a reader saw it (its CPUs come from the PUs).
#[derive(Debug, Clone)]
pub(crate) struct RawNode {
    pub id: NodeId,
    pub memory_bytes: Option<u64>,
}

/// Everything a reader found, before ids are assigned.
#[derive(Debug, Clone, Default)]
pub(crate) struct RawTopology {
    pub source: String,
    pub pus: Vec<RawPu>,
    pub nodes: Vec<RawNode>,
    pub pci: Vec<PciDevice>,
}

/// Groups CPUs by key and numbers the groups in order of their lowest CPU.
struct Groups<K: Ord, V> {
    by_key: BTreeMap<K, (CpuSet, V)>,
}

impl<K: Ord + Clone, V: Clone> Groups<K, V> {
    fn new() -> Self {
        Groups {
            by_key: BTreeMap::new(),
        }
    }

    fn add(&mut self, key: K, cpu: CpuId, extra: V) {
        self.by_key
            .entry(key)
            .or_insert_with(|| (CpuSet::new(), extra))
            .0
            .insert(cpu);
    }

    /// `(key, cpus, extra)` in order of lowest CPU; the position is the dense id.
    fn numbered(self) -> Vec<(K, CpuSet, V)> {
        let mut groups: Vec<(K, CpuSet, V)> = self
            .by_key
            .into_iter()
            .map(|(k, (cpus, v))| (k, cpus, v))
            .collect();
        groups.sort_by_key(|(_, cpus, _)| cpus.first());
        groups
    }
}

fn dense(position: usize) -> u32 {
    // Positions count CPUs' groups, and there are fewer than CpuId::LIMIT CPUs.
    u32::try_from(position).unwrap_or(u32::MAX)
}

impl RawTopology {
    /// Builds the model. Fails only when no CPU is online or a CPU is listed twice.
    pub fn assemble(mut self) -> Result<HostTopology, TopologyError> {
        self.pus.sort_by_key(|p| p.cpu);
        if let Some(pair) = self.pus.windows(2).find(|w| w[0].cpu == w[1].cpu) {
            return Err(TopologyError::Empty {
                source_name: self.source,
                problem: format!(
                    "CPU {} is listed twice: the source is inconsistent",
                    pair[0].cpu
                ),
            });
        }
        if !self.pus.iter().any(|p| p.online) {
            return Err(TopologyError::Empty {
                source_name: self.source,
                problem: "the topology has no online CPU (nothing to plan on)".to_owned(),
            });
        }

        // Cores: an online CPU without a core key is a core of its own.
        let mut cores = Groups::new();
        let mut packages = Groups::new();
        let mut l3s = Groups::new();
        for pu in self.pus.iter().filter(|p| p.online) {
            let core_key = match pu.core {
                Some(key) => (0u8, key),
                None => (1u8, u64::from(pu.cpu.0)),
            };
            cores.add(core_key, pu.cpu, ());
            if let Some((key, os)) = pu.package {
                packages.add(key, pu.cpu, os);
            }
            if let Some((key, size)) = pu.l3 {
                l3s.add(key, pu.cpu, size);
            }
        }

        let packages: Vec<Package> = packages
            .numbered()
            .into_iter()
            .enumerate()
            .map(|(i, (_, cpus, os_index))| Package {
                id: PackageId(dense(i)),
                os_index,
                cpus,
            })
            .collect();
        let l3_domains: Vec<L3Domain> = l3s
            .numbered()
            .into_iter()
            .enumerate()
            .map(|(i, (_, cpus, size_bytes))| L3Domain {
                id: L3Id(dense(i)),
                cpus,
                size_bytes,
            })
            .collect();

        let by_cpu: BTreeMap<CpuId, &RawPu> = self.pus.iter().map(|p| (p.cpu, p)).collect();
        let package_of = |cpu: CpuId| packages.iter().find(|p| p.cpus.contains(cpu)).map(|p| p.id);
        let l3_of = |cpu: CpuId| {
            l3_domains
                .iter()
                .find(|d| d.cpus.contains(cpu))
                .map(|d| d.id)
        };
        let node_of = |cpu: CpuId| by_cpu.get(&cpu).and_then(|p| p.node);

        let cores: Vec<Core> = cores
            .numbered()
            .into_iter()
            .enumerate()
            .map(|(i, (_, cpus, ()))| {
                let first = cpus.first().unwrap_or(CpuId(0));
                Core {
                    id: CoreId(dense(i)),
                    package: package_of(first),
                    numa_node: node_of(first),
                    l3: l3_of(first),
                    cpus,
                }
            })
            .collect();

        let mut core_of: BTreeMap<CpuId, CoreId> = BTreeMap::new();
        for core in &cores {
            for cpu in core.cpus.iter() {
                core_of.insert(cpu, core.id);
            }
        }
        let pus: Vec<Pu> = self
            .pus
            .iter()
            .map(|p| Pu {
                cpu: p.cpu,
                core: core_of.get(&p.cpu).copied(),
                usable: p.online && p.allowed,
                online: p.online,
                allowed: p.allowed,
                numa_node: p.node,
            })
            .collect();

        // Nodes: those the reader listed plus any a CPU names; keep those with
        // CPUs or memory.
        let mut nodes: BTreeMap<NodeId, NumaNode> = BTreeMap::new();
        for raw in &self.nodes {
            let node = nodes.entry(raw.id).or_insert_with(|| NumaNode {
                id: raw.id,
                cpus: CpuSet::new(),
                memory_bytes: None,
            });
            node.memory_bytes = node.memory_bytes.or(raw.memory_bytes);
        }
        for pu in self.pus.iter().filter(|p| p.online) {
            if let Some(id) = pu.node {
                nodes
                    .entry(id)
                    .or_insert_with(|| NumaNode {
                        id,
                        cpus: CpuSet::new(),
                        memory_bytes: None,
                    })
                    .cpus
                    .insert(pu.cpu);
            }
        }
        let numa_nodes = nodes
            .into_values()
            .filter(|n| !n.cpus.is_empty() || n.memory_bytes.is_some_and(|m| m > 0))
            .collect();

        let mut pci = self.pci;
        pci.sort_by_key(|d| d.address);

        Ok(HostTopology {
            source: self.source,
            packages,
            numa_nodes,
            l3_domains,
            cores,
            pus,
            pci,
        })
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
            package: Some((package, Some(package as u32 * 10))),
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
        assert_eq!(host.packages.len(), 2);
        assert_eq!(host.packages[0].cpus.to_string(), "0,2,4,6");
        assert_eq!(host.packages[0].os_index, Some(10));
        assert_eq!(host.cores[1].package, Some(PackageId(1)));
        assert_eq!(host.numa_nodes[1].cpus.to_string(), "1,3,5,7");
        let offline = host.pu(CpuId(8));
        assert_eq!(offline.map(|p| (p.usable, p.core)), Some((false, None)));
        assert_eq!(host.usable_cpus().to_string(), "0-7");
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
