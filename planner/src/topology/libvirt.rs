//! Reads a host's topology through a libvirt connection (the `virt` crate):
//! capabilities for CPUs and NUMA, node devices for PCI locality, PCIe links
//! and network interface names. Works for any URI, local or remote.

use super::assemble::RawTopology;
use super::pci::{class_name, parse_int, PciAddress, PciDevice, PcieLink};
use super::TopologyError;
use crate::ids::NodeId;
use crate::xmldoc::{self, NodeExt};
use roxmltree::Node;
use std::collections::BTreeMap;

use crate::error::{LibvirtAction, LibvirtError};
use crate::host::nodedev::{node_devices_of, NodeDevices};

/// Opens `uri` read-only and reads capabilities and PCI node devices.
pub(crate) fn connect(uri: &str) -> Result<RawTopology, TopologyError> {
    connect_with_devices(uri).map(|(raw, _)| raw)
}

/// [`connect`], also giving the node devices' XML it read (or why they
/// could not be listed), for a caller that needs more of them than the
/// topology keeps (`doctor --connect`).
pub(crate) fn connect_with_devices(
    uri: &str,
) -> Result<(RawTopology, Result<NodeDevices, LibvirtError>), TopologyError> {
    let conn = crate::libvirt::connection::open(uri, true)?;
    let caps = conn
        .capabilities()
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::Capabilities, &e))?;
    let mut raw = super::caps::parse(uri, &caps)?;
    // Free memory and free pages now, per cell (libvirt's capabilities list
    // totals only). A driver without them (test://) leaves them unknown.
    for node in &mut raw.nodes {
        let Ok(cell) = i32::try_from(node.id.0) else {
            continue;
        };
        node.memory_free_bytes = conn
            .cells_free_memory(cell, 1)
            .ok()
            .and_then(|free| free.first().copied());
        for pool in &mut node.hugepages {
            let Ok(size) = u32::try_from(pool.size_kib) else {
                continue;
            };
            pool.free = conn
                .free_pages(&[size], node.id.0, 1, 0)
                .ok()
                .and_then(|free| free.first().copied());
        }
    }

    // Node devices are optional for the topology: some drivers (test://,
    // remote hosts without the nodedev driver) have none.
    let devices = node_devices_of(uri, &conn);
    if let Ok(d) = &devices {
        raw.pci = pci_from_nodedevs(&d.pci, &d.net);
    }
    Ok((raw, devices))
}

/// Each network interface of `net_xml` by its parent device's name
/// (`pci_0000_65_00_0`): its name and its port speed in Mb/s when libvirt
/// knows it (`<link speed>`; unknown is 0 or 4294967295, i.e. -1).
pub(crate) fn interfaces_by_parent(
    net_xml: &[String],
) -> BTreeMap<String, Vec<(String, Option<u64>)>> {
    let mut by_parent: BTreeMap<String, Vec<(String, Option<u64>)>> = BTreeMap::new();
    for doc in net_xml.iter().filter_map(|t| xmldoc::parse(t).ok()) {
        let device = doc.root_element();
        let parent = device.child("parent").map(|p| p.inner_text().into_owned());
        let net = device
            .children_named("capability")
            .find(|c| c.attribute("type") == Some("net"));
        let interface = net
            .and_then(|c| c.child("interface"))
            .map(|i| i.inner_text().into_owned());
        let speed = net
            .and_then(|c| c.child("link"))
            .and_then(|l| l.attribute("speed"))
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|&s| s > 0 && s < u64::from(u32::MAX));
        if let (Some(parent), Some(interface)) = (parent, interface) {
            by_parent
                .entry(parent)
                .or_default()
                .push((interface, speed));
        }
    }
    for interfaces in by_parent.values_mut() {
        interfaces.sort();
    }
    by_parent
}

/// Builds PCI devices from node device XML (`virsh nodedev-dumpxml`), keeping
/// the classes hwloc keeps (see [`PciDevice::is_important`]) so that both
/// sources list the same devices; network interfaces are attached to their
/// parent PCI device. Unparseable documents
/// are skipped: node devices only enrich the topology.
pub(crate) fn pci_from_nodedevs(pci_xml: &[String], net_xml: &[String]) -> Vec<PciDevice> {
    let mut names = interfaces_by_parent(net_xml);
    let mut devices: Vec<PciDevice> = pci_xml
        .iter()
        .filter_map(|t| xmldoc::parse(t).ok())
        .filter_map(|doc| {
            let root = doc.root_element();
            let mut device = pci_device(root)?;
            if !device.is_important() {
                return None;
            }
            let name = root
                .child("name")
                .map(|n| n.inner_text().into_owned())
                .unwrap_or_default();
            if let Some(n) = names.remove(&name) {
                device.names = n.into_iter().map(|(name, _)| name).collect();
            }
            Some(device)
        })
        .collect();
    devices.sort_by_key(|d| d.address);
    devices
}

fn pci_device(root: Node) -> Option<PciDevice> {
    let cap = root
        .children_named("capability")
        .find(|c| c.attribute("type") == Some("pci"))?;
    let field = |name: &str| cap.child(name).and_then(|e| parse_int(&e.inner_text()));
    let address = PciAddress::from_libvirt(field)?;
    // <class> is 0xCCSSPP (class, subclass, prog-if); hwloc's class id is 0xCCSS.
    let class_id = field("class")
        .map(|c| u16::try_from(c >> 8).unwrap_or(0xffff))
        .unwrap_or(0xffff);
    let id_of = |name: &str| {
        cap.child(name)
            .and_then(|e| e.attribute("id"))
            .and_then(parse_int)
            .map(|v| format!("0x{v:04x}"))
    };
    let text_of = |name: &str| {
        cap.child(name)
            .map(|e| e.inner_text().into_owned())
            .filter(|t| !t.is_empty())
    };
    let numa_node = cap
        .child("numa")
        .and_then(|n| n.attribute("node"))
        .and_then(|n| n.trim().parse::<i64>().ok())
        .and_then(|n| u32::try_from(n).ok())
        .map(NodeId);
    let link = pcie_link(cap);
    Some(PciDevice {
        address,
        class_id: super::pci::PciClass(class_id),
        class: class_name(class_id),
        vendor_id: id_of("vendor"),
        device_id: id_of("product"),
        vendor: text_of("vendor"),
        device: text_of("product"),
        names: Vec::new(),
        numa_node,
        local_cpus: None,
        link,
    })
}

/// A node device's `<pci-express><link validity='cap|sta' speed= width=/>`
/// (under its `<capability type='pci'>`).
pub(crate) fn pcie_link(cap: Node) -> Option<PcieLink> {
    let pcie = cap.child("pci-express")?;
    let find = |validity: &str| {
        pcie.children_named("link")
            .find(|l| l.attribute("validity") == Some(validity))
    };
    let speed = |l: Option<Node>| {
        l.and_then(|l| l.attribute("speed"))
            .and_then(|s| s.trim().parse::<f64>().ok())
    };
    let width = |l: Option<Node>| {
        l.and_then(|l| l.attribute("width"))
            .and_then(|s| s.trim().parse::<u32>().ok())
    };
    let (sta, cap) = (find("sta"), find("cap"));
    (sta.is_some() || cap.is_some()).then(|| PcieLink {
        speed_gts: speed(sta),
        width: width(sta),
        max_speed_gts: speed(cap),
        max_width: width(cap),
        gbytes_per_s: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_devices_give_locality_link_and_names() {
        let pci = r#"<device>
  <name>pci_0000_42_00_0</name>
  <capability type='pci'>
    <class>0x020000</class>
    <domain>0</domain><bus>66</bus><slot>0</slot><function>0</function>
    <product id='0x101d'>MT2892 Family [ConnectX-6 Dx]</product>
    <vendor id='0x15b3'>Mellanox Technologies</vendor>
    <numa node='1'/>
    <pci-express>
      <link validity='cap' port='0' speed='16' width='16'/>
      <link validity='sta' speed='8' width='16'/>
    </pci-express>
  </capability>
</device>"#;
        let unknown_node = pci
            .replace("pci_0000_42_00_0", "pci_0000_43_00_0")
            .replace("<bus>66</bus>", "<bus>67</bus>")
            .replace("<numa node='1'/>", "<numa node='-1'/>");
        let net = "<device><name>net_ens1f0</name><parent>pci_0000_42_00_0</parent>\
                   <capability type='net'><interface>ens1f0</interface></capability></device>";
        // Unparseable (an unknown entity): skipped, not read as an empty name.
        let broken = net.replace("ens1f0</interface>", "&ens;</interface>");
        let devices = pci_from_nodedevs(&[unknown_node, pci.to_owned()], &[net.to_owned(), broken]);
        assert_eq!(devices.len(), 2);
        let d = &devices[0];
        assert_eq!(d.address.to_string(), "0000:42:00.0");
        assert_eq!(d.class_id.to_string(), "0x0200");
        assert_eq!(d.names, ["ens1f0"]);
        assert_eq!(d.numa_node, Some(NodeId(1)));
        let link = d.link.clone();
        assert_eq!(link.as_ref().and_then(|l| l.speed_gts), Some(8.0));
        assert_eq!(link.as_ref().and_then(|l| l.max_speed_gts), Some(16.0));
        assert_eq!(
            devices[1].numa_node, None,
            "numa_node -1 is unknown, not node 0"
        );
    }
}
