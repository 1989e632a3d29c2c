//! Reads topologies through hwloc (the `hwlocality` crate): the live host, hwloc
//! XML files and synthetic descriptions. It keeps disallowed CPUs (hwloc's
//! include-disallowed flag) and offline CPUs (in hwloc's complete cpuset but
//! without a PU object) so that they show as not usable. On the live host a
//! CPU is allowed when the host's VMs may run there (libvirt's cgroup), not
//! when pinplan's own process may, as hwloc has it. Grouping into the model
//! is [`super::assemble`]'s job.

use super::assemble::{RawGroup, RawNode, RawPu, RawTopology};
use super::pci::{class_name, read_sysfs, PciAddress, PciClass, PciDevice, PcieLink};
use super::TopologyError;
use crate::cpuset::CpuSet;
use crate::ids::{CpuId, NodeId};
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::{BuildFlags, TopologyBuilder, TypeFilter};
use hwlocality::topology::Topology;
use std::path::Path;

/// The hwloc library version we run with, e.g. `2.9.0`.
pub(crate) fn linked_version() -> String {
    let v = hwlocality::hwloc_api_version();
    format!("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff)
}

fn hwloc_error(source_name: &str, message: impl std::fmt::Display) -> TopologyError {
    TopologyError::Hwloc {
        source_name: source_name.to_owned(),
        message: message.to_string(),
    }
}

/// hwloc's own failure in words (`hwloc_topology_load failed: Invalid argument`).
fn raw_error(source_name: &str, e: &hwlocality::errors::RawHwlocError) -> TopologyError {
    let why = e
        .errno
        .map_or_else(|| "no reason given".to_owned(), |errno| errno.to_string());
    hwloc_error(source_name, format!("{} failed: {why}", e.api))
}

/// Flags and filters every hwloc read uses.
fn configure(
    builder: TopologyBuilder,
    source_name: &str,
) -> Result<TopologyBuilder, TopologyError> {
    builder
        .with_flags(BuildFlags::INCLUDE_DISALLOWED)
        .map_err(|e| hwloc_error(source_name, e))?
        .with_io_type_filter(TypeFilter::KeepImportant)
        .map_err(|e| hwloc_error(source_name, e))
}

/// The machine we run on, with PCI locality and links from sysfs.
pub(crate) fn live() -> Result<RawTopology, TopologyError> {
    let name = "host";
    let topology = configure(Topology::builder(), name)?
        .build()
        .map_err(|e| raw_error(name, &e))?;
    let mut raw = collect(&topology, name);
    // hwloc's allowed set is this process's cgroup cpuset: after `pinplan
    // isolate`, the housekeeping CPUs only. What a plan may use is what the
    // host's VMs may (issue 27). An effective cpuset never lists an offline
    // CPU, so it says nothing against one (libvirt's reader marks them
    // allowed too).
    let vm_cpus = crate::host::cgroup::vm_cpus(Path::new("/"));
    for pu in &mut raw.pus {
        pu.allowed = !pu.online || vm_cpus.as_ref().is_none_or(|set| set.contains(pu.cpu));
    }
    let sys_devices = Path::new("/sys/bus/pci/devices");
    for device in &mut raw.pci {
        read_sysfs(sys_devices, device);
    }
    let nodes = Path::new("/sys/devices/system/node");
    for node in &mut raw.nodes {
        super::memory::read_node_sysfs(nodes, node);
    }
    Ok(raw)
}

/// The most CPUs a synthetic description hwloc itself builds may have: its
/// importer is superlinear (`pu:16384` takes 80 s), so larger hosts must use
/// the syntax [`super::synthetic`] builds.
pub(crate) const SYNTHETIC_LIMIT: u64 = 4_096;

/// An hwloc synthetic description, e.g. `package:2 numa:1 core:16 pu:2(memory=…)`,
/// built by hwloc: for the syntax [`super::synthetic`] does not know.
pub(crate) fn synthetic(description: &str) -> Result<RawTopology, TopologyError> {
    let name = format!("synthetic:{description}");
    if let Some(pus) = synthetic_pus(description).filter(|&n| n > u64::from(CpuId::LIMIT)) {
        return Err(TopologyError::Empty {
            source_name: name,
            problem: format!(
                "describes {pus} CPUs; pinplan reads at most {} (libvirt's own limit)",
                CpuId::LIMIT
            ),
        });
    }
    if let Some(pus) = synthetic_pus(description).filter(|&n| n > SYNTHETIC_LIMIT) {
        return Err(TopologyError::Empty {
            source_name: name,
            problem: format!(
                "describes {pus} CPUs with syntax only hwloc reads, and hwloc takes minutes \
                 beyond {SYNTHETIC_LIMIT}; up to {} CPUs, use levels `TYPE:COUNT` \
                 (package, numa, l3, core, pu, …) with no attributes but \
                 `pu:N(indexes=S*N:…)`",
                CpuId::LIMIT
            ),
        });
    }
    let topology = configure(Topology::builder(), &name)?
        .from_synthetic(description)
        .map_err(|_| TopologyError::Hwloc {
            source_name: name.clone(),
            message: "hwloc rejected the synthetic description (example: \
                      `package:2 core:16 pu:2(indexes=2*32:1*2)`; see `man hwloc` → \
                      Synthetic topologies)"
                .to_owned(),
        })?
        .build()
        .map_err(|e| raw_error(&name, &e))?;
    Ok(collect(&topology, &name))
}

/// The number of CPUs a synthetic description makes: the product of its
/// levels' counts (`package:2 core:16 pu:2` is 64), saturating; `None` when
/// it names no count.
fn synthetic_pus(description: &str) -> Option<u64> {
    let mut product: Option<u64> = None;
    for word in description.split_whitespace() {
        // `type:N`, `type:N(attributes)`, `type:N*M` is not a level.
        let Some((_, count)) = word.split_once(':') else {
            continue;
        };
        let digits: String = count.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<u64>() {
            product = Some(product.unwrap_or(1).saturating_mul(n));
        } else if !digits.is_empty() {
            product = Some(u64::MAX);
        }
    }
    product
}

/// An hwloc XML document already checked by [`super::detect::sniff`].
pub(crate) fn xml(path: &Path, text: &str) -> Result<RawTopology, TopologyError> {
    let name = path.display().to_string();
    let topology = configure(Topology::builder(), &name)?
        .from_xml(text)
        .map_err(|_| TopologyError::Hwloc {
            source_name: name.clone(),
            message: "hwloc rejected the XML (well-formed, but not a topology hwloc can \
                      import; hwloc's own message, if any, is above)"
                .to_owned(),
        })?
        .build()
        .map_err(|e| raw_error(&name, &e))?;
    Ok(collect(&topology, &name))
}

fn to_cpuset(set: &hwlocality::cpu::cpuset::CpuSet) -> CpuSet {
    set.iter_set()
        .filter_map(|i| u32::try_from(usize::from(i)).ok())
        .filter(|&cpu| cpu < CpuId::LIMIT)
        .map(CpuId)
        .collect()
}

fn os_u32(object: &TopologyObject) -> Option<u32> {
    object.os_index().and_then(|i| u32::try_from(i).ok())
}

/// Walks a built topology into the flat form.
fn collect(topology: &Topology, source_name: &str) -> RawTopology {
    let nodes = raw_nodes(topology);
    let pus = raw_pus(topology, &nodes);
    // Packages and caches are listed even when none of their CPUs is online or
    // allowed (hwloc keeps them when they hold memory).
    let packages = topology
        .objects_with_type(ObjectType::Package)
        .map(raw_group)
        .collect();
    let l3s = topology
        .objects_with_type(ObjectType::L3Cache)
        .map(raw_group)
        .collect();

    let pci = topology
        .objects_with_type(ObjectType::PCIDevice)
        .filter_map(pci_device)
        .collect();

    let mut nodes: Vec<RawNode> = nodes.into_iter().map(|(_, raw)| raw).collect();
    for (from, to, value) in node_distances(topology) {
        if let Some(node) = nodes.iter_mut().find(|n| n.id == from) {
            node.distances.push(super::NodeDistance { node: to, value });
        }
    }
    let cpu_vendor = topology
        .objects_with_type(ObjectType::Package)
        .find_map(|p| info(p, "CPUVendor"))
        .filter(|v| !v.is_empty());

    RawTopology {
        source: source_name.to_owned(),
        pus,
        packages,
        l3s,
        nodes,
        pci,
        cpu_vendor,
    }
}

/// The NUMA nodes with every CPU each holds (online or not): OS ids (a node
/// hwloc made up has no os_index: its logical index).
fn raw_nodes(topology: &Topology) -> Vec<(CpuSet, RawNode)> {
    let mut nodes = Vec::new();
    for node in topology.objects_with_type(ObjectType::NUMANode) {
        let id = NodeId(os_u32(node).unwrap_or(u32::try_from(node.logical_index()).unwrap_or(0)));
        let cpus = node
            .complete_cpuset()
            .map(|s| to_cpuset(&s))
            .unwrap_or_default();
        let (memory_bytes, hugepages) = match node.attributes() {
            Some(ObjectAttributes::NUMANode(attr)) => (
                attr.local_memory().map(|m| m.get()),
                // hwloc lists 4 KiB pages too (the memory itself); huge pages only.
                attr.page_types()
                    .iter()
                    .filter(|p| p.size().get() > 4096)
                    .map(|p| super::PagePool {
                        size_kib: p.size().get() / 1024,
                        total: p.count(),
                        free: None,
                    })
                    .collect(),
            ),
            _ => (None, Vec::new()),
        };
        let online_cpus = node.cpuset().map(|s| to_cpuset(&s));
        nodes.push((
            cpus,
            RawNode {
                id,
                memory_bytes,
                memory_free_bytes: None,
                hugepages,
                cpus: online_cpus,
                distances: Vec::new(),
            },
        ));
    }
    nodes
}

/// Every CPU: the online ones from their PU objects, the offline ones from
/// the complete set (they have no PU object).
fn raw_pus(topology: &Topology, nodes: &[(CpuSet, RawNode)]) -> Vec<RawPu> {
    let online = to_cpuset(&topology.cpuset());
    let complete = to_cpuset(&topology.complete_cpuset());
    let allowed = to_cpuset(&topology.allowed_cpuset());
    let node_of = |cpu: CpuId| {
        nodes
            .iter()
            .find(|(cpus, _)| cpus.contains(cpu))
            .map(|(_, raw)| raw.id)
    };
    let mut pus = Vec::new();
    for pu in topology.objects_with_type(ObjectType::PU) {
        let Some(cpu) = os_u32(pu).filter(|&c| c < CpuId::LIMIT).map(CpuId) else {
            continue;
        };
        let ancestor = |kind| {
            pu.first_ancestor_with_type(kind)
                .map(TopologyObject::global_persistent_index)
        };
        pus.push(RawPu {
            cpu,
            online: online.contains(cpu),
            allowed: allowed.contains(cpu),
            core: ancestor(ObjectType::Core),
            package: ancestor(ObjectType::Package),
            node: node_of(cpu),
            l3: ancestor(ObjectType::L3Cache),
        });
    }
    for cpu in complete.difference(&online).iter() {
        pus.push(RawPu {
            cpu,
            online: false,
            allowed: allowed.contains(cpu),
            core: None,
            package: None,
            node: node_of(cpu),
            l3: None,
        });
    }
    pus
}

/// A package or cache with the CPUs it knows.
fn raw_group(object: &TopologyObject) -> RawGroup {
    RawGroup {
        key: object.global_persistent_index(),
        os_index: os_u32(object),
        size_bytes: match object.attributes() {
            Some(ObjectAttributes::Cache(attr)) => attr.size().map(|s| s.get()),
            _ => None,
        },
        known_cpus: object
            .complete_cpuset()
            .map(|s| to_cpuset(&s))
            .unwrap_or_default(),
    }
}

/// The NUMA latency matrix (ACPI SLIT, hwloc's `NUMALatency`) as (from, to,
/// value) by OS node number; nothing when hwloc has none, or it is no SLIT
/// (a local distance other than 10, a value outside libvirt's 10–255).
fn node_distances(topology: &Topology) -> Vec<(NodeId, NodeId, u32)> {
    let kind = hwlocality::object::distance::DistancesKind::MEANS_LATENCY;
    let Ok(matrices) = topology.distances_with_type(Some(kind), ObjectType::NUMANode) else {
        return Vec::new();
    };
    let Some(matrix) = matrices.first() else {
        return Vec::new();
    };
    let ids: Vec<Option<NodeId>> = matrix
        .objects()
        .map(|o| o.and_then(os_u32).map(NodeId))
        .collect();
    let mut out = Vec::new();
    for ((i, j), value) in matrix.enumerate_distances() {
        let (Some(Some(from)), Some(Some(to))) = (ids.get(i), ids.get(j)) else {
            continue;
        };
        match u32::try_from(value) {
            Ok(v) if (10..=255).contains(&v) && (from != to || v == 10) => {
                out.push((*from, *to, v));
            }
            _ => return Vec::new(),
        }
    }
    out
}

fn info(object: &TopologyObject, key: &str) -> Option<String> {
    object
        .info(key)
        .map(|v| v.to_string_lossy().trim().to_owned())
        .filter(|v| !v.is_empty())
}

fn pci_device(object: &TopologyObject) -> Option<PciDevice> {
    let Some(ObjectAttributes::PCIDevice(attr)) = object.attributes() else {
        return None;
    };
    let address = PciAddress {
        domain: u32::from(attr.domain()),
        bus: attr.bus_id(),
        device: attr.bus_device(),
        function: attr.function(),
    };
    let names = object
        .io_children()
        .filter(|c| c.object_type() == ObjectType::OSDevice)
        .filter_map(|c| c.name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    // hwloc attaches a device whose locality is unknown to an ancestor covering
    // several nodes (often the machine): then the node is unknown, not node 0.
    let locality = object.first_non_io_ancestor();
    let local_cpus = locality.and_then(|a| a.cpuset()).map(|s| to_cpuset(&s));
    let numa_node = locality
        .and_then(|a| a.nodeset())
        .filter(|set| set.weight() == Some(1))
        .and_then(|set| set.first_set())
        .and_then(|i| u32::try_from(usize::from(i)).ok())
        .map(NodeId);
    let speed = f64::from(attr.link_speed());
    let link = (speed > 0.0).then(|| PcieLink {
        speed_gts: None,
        width: None,
        max_speed_gts: None,
        max_width: None,
        // hwloc stores f32; round to what it printed (6 decimals) for stable output.
        gbytes_per_s: Some((speed * 1e6).round() / 1e6),
    });
    Some(PciDevice {
        address,
        class_id: PciClass(attr.class_id()),
        class: class_name(attr.class_id()),
        vendor_id: Some(format!("0x{:04x}", attr.vendor_id())),
        device_id: Some(format!("0x{:04x}", attr.device_id())),
        vendor: info(object, "PCIVendor"),
        device: info(object, "PCIDevice"),
        names,
        numa_node,
        local_cpus,
        link,
    })
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    /// Issue 14, defect 10: `pu:2147483648` ran until killed.
    #[test]
    fn absurd_synthetic_sizes_are_refused() {
        assert_eq!(
            synthetic_pus("package:2 core:16 pu:2(indexes=2*32:1*2)"),
            Some(64)
        );
        assert_eq!(synthetic_pus("pu:2147483648"), Some(2_147_483_648));
        assert_eq!(synthetic_pus("pu:99999999999999999999999"), Some(u64::MAX));
        let e = synthetic("package:1 pu:2147483648")
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("2147483648 CPUs") && e.contains("65536")));
        assert!(synthetic("package:2 core:4 pu:2").is_ok());
    }
}
