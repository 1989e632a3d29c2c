//! PCI functions as libvirt's node devices describe them (`virsh
//! nodedev-dumpxml`), for a host reached only through its URI: the bound
//! driver, the IOMMU group and its members, SR-IOV (`virt_functions`,
//! `phys_function`), the NUMA node, the PCIe link and the network
//! interfaces with their port speeds — what `doctor` reads from sysfs, in
//! the shape its checks take. A document that does not parse or is not a
//! PCI device is skipped: a remote host's answer is not trusted to be
//! complete.

use super::sysfs::PciFunction;
use crate::libvirt::NodeDevices;
use crate::topology::{pci_parse_int as parse_int, PciAddress};
use crate::xmldoc::{self, NodeExt as _};
use roxmltree::Node;
use std::collections::{BTreeMap, BTreeSet};

/// What a host's node devices say, as `doctor` takes it.
#[derive(Debug, Default)]
pub(crate) struct Described {
    /// The PCI functions by address.
    pub functions: BTreeMap<PciAddress, PciFunction>,
    /// Each IOMMU group's members: each device in it, and those its
    /// `<iommuGroup>` lists.
    pub groups: BTreeMap<u32, BTreeSet<PciAddress>>,
    /// Port speeds in Mb/s by interface name, where libvirt knows them.
    pub speeds: BTreeMap<String, u64>,
}

/// The PCI functions, IOMMU groups and port speeds of `devices`.
pub(crate) fn pci_functions(devices: &NodeDevices) -> Described {
    let mut interfaces = crate::topology::interfaces_by_parent(&devices.net);
    let speeds = interfaces
        .values()
        .flatten()
        .filter_map(|(name, speed)| Some((name.clone(), (*speed)?)))
        .collect();
    let mut functions = BTreeMap::new();
    let mut groups: BTreeMap<u32, BTreeSet<PciAddress>> = BTreeMap::new();
    let mut listed: Vec<(PciAddress, PciAddress)> = Vec::new();
    for doc in devices.pci.iter().filter_map(|t| xmldoc::parse(t).ok()) {
        let root = doc.root_element();
        let Some(cap) = capability(root, "pci") else {
            continue;
        };
        let field = |name: &str| cap.child(name).and_then(|e| parse_int(&e.inner_text()));
        let Some(address) = PciAddress::from_libvirt(field) else {
            continue;
        };
        let vfs: Vec<PciAddress> = capability(cap, "virt_functions")
            .map(|c| c.children_named("address").filter_map(address_of).collect())
            .unwrap_or_default();
        let group = cap.child("iommuGroup");
        let iommu_group = group
            .and_then(|g| g.attribute("number"))
            .and_then(|n| n.trim().parse::<u32>().ok());
        if let (Some(number), Some(g)) = (iommu_group, group) {
            let members = groups.entry(number).or_default();
            members.insert(address);
            members.extend(g.children_named("address").filter_map(address_of));
        }
        let names = root
            .child("name")
            .and_then(|n| interfaces.remove(n.inner_text().as_ref()))
            .map(|i| i.into_iter().map(|(name, _)| name).collect())
            .unwrap_or_default();
        let function = function(root, cap, address, iommu_group, vfs.len(), names);
        listed.extend(vfs.iter().map(|&vf| (vf, address)));
        functions.insert(address, function);
    }
    // A VF its PF lists belongs to it, whether or not it says so itself.
    for (vf, pf) in listed {
        if let Some(f) = functions.get_mut(&vf) {
            f.physfn.get_or_insert(pf);
        }
    }
    Described {
        functions,
        groups,
        speeds,
    }
}

/// The PCI function at `address` that the node device `root` (its `pci`
/// capability `cap`) describes, in IOMMU group `iommu_group`, with `vfs`
/// virtual functions listed and these network `interfaces`.
fn function(
    root: Node<'_, '_>,
    cap: Node<'_, '_>,
    address: PciAddress,
    iommu_group: Option<u32>,
    vfs: usize,
    interfaces: Vec<String>,
) -> PciFunction {
    let field = |name: &str| cap.child(name).and_then(|e| parse_int(&e.inner_text()));
    let sub = |kind: &str| capability(cap, kind);
    PciFunction {
        address,
        class: field("class").and_then(|c| u32::try_from(c).ok()),
        driver: root
            .child("driver")
            .and_then(|d| d.child("name"))
            .map(|n| n.inner_text().into_owned())
            .filter(|n| !n.is_empty()),
        iommu_group,
        // libvirt leaves <numa> out when the kernel says -1 (unknown).
        numa_node: Some(
            cap.child("numa")
                .and_then(|n| n.attribute("node"))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(-1),
        ),
        sriov_totalvfs: sub("virt_functions")
            .and_then(|c| c.attribute("maxCount"))
            .and_then(|n| n.trim().parse().ok()),
        sriov_numvfs: sub("virt_functions").map(|_| u32::try_from(vfs).unwrap_or(u32::MAX)),
        physfn: sub("phys_function")
            .and_then(|c| c.child("address"))
            .and_then(address_of),
        link: crate::topology::pcie_link(cap),
        interfaces,
    }
}

/// The `<capability type='KIND'>` child of `node`.
fn capability<'a, 'input>(node: Node<'a, 'input>, kind: &str) -> Option<Node<'a, 'input>> {
    node.children_named("capability")
        .find(|c| c.attribute("type") == Some(kind))
}

/// `<address domain='0x0000' bus='0x65' slot='0x00' function='0x1'/>`.
fn address_of(node: Node<'_, '_>) -> Option<PciAddress> {
    PciAddress::from_libvirt(|name| node.attribute(name).and_then(parse_int))
}

/// The members of IOMMU group `group` as [`pci_functions`] gathered them
/// (every device in a group is one of its members).
pub(crate) fn group_members(
    groups: &BTreeMap<u32, BTreeSet<PciAddress>>,
    group: u32,
) -> Vec<PciAddress> {
    groups
        .get(&group)
        .map(|m| m.iter().copied().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/libvirt-nodedev")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn addr(text: &str) -> PciAddress {
        text.parse().unwrap()
    }

    /// PCI documents only, no network interfaces.
    fn pci(docs: &[String]) -> NodeDevices {
        NodeDevices {
            pci: docs.to_vec(),
            net: Vec::new(),
        }
    }

    /// A PCI function's network interfaces are the net devices whose parent
    /// it is, each with the port speed libvirt gives (`<link speed>`); an
    /// unknown speed (4294967295, as this machine's libvirt says for a
    /// virtio NIC) or a missing one is no speed.
    #[test]
    fn interfaces_and_port_speeds_come_from_the_net_devices() {
        let net = |name: &str, parent: &str, link: &str| {
            format!(
                "<device><name>net_{name}</name><parent>{parent}</parent>\
                 <capability type='net'><interface>{name}</interface>{link}\
                 <capability type='80203'/></capability></device>"
            )
        };
        let devices = NodeDevices {
            // Its <name> is pci_0000_42_00_0.
            pci: vec![fixture("pci_0000_42_00_0_vpd.xml")],
            net: vec![
                net(
                    "ens1f0",
                    "pci_0000_42_00_0",
                    "<link speed='25000' state='up'/>",
                ),
                net(
                    "ens1f9",
                    "pci_0000_42_00_0",
                    "<link speed='4294967295' state='down'/>",
                ),
                net(
                    "eth7",
                    "pci_0000_00_03_0",
                    "<link speed='1000' state='up'/>",
                ),
                net("eno1", "pci_0000_42_00_0", ""),
            ],
        };
        let d = pci_functions(&devices);
        assert_eq!(
            d.functions[&addr("0000:42:00.0")].interfaces,
            ["eno1", "ens1f0", "ens1f9"]
        );
        assert_eq!(
            d.speeds,
            BTreeMap::from([("ens1f0".to_owned(), 25000), ("eth7".to_owned(), 1000)])
        );
    }

    /// libvirt's own node-device fixtures, against what the collection's
    /// index (PROVENANCE-INDEX.md, section 6) says of each by hand.
    #[test]
    fn libvirt_node_devices_read_as_sysfs_would() {
        let docs: Vec<String> = [
            "pci_0000_02_10_7_sriov.xml",
            "pci_0000_42_00_0_vpd.xml",
            "pci_8086_10c9_sriov_pf.xml",
            "pci_0000_02_10_7_sriov_vfs.xml",
            "net_00_13_02_b9_f9_d3.xml",
        ]
        .iter()
        .map(|n| fixture(n))
        .collect();
        // One document at a time: several describe the same 02:10.7.
        let one = |i: usize| {
            let d = pci_functions(&pci(&docs[i..=i]));
            (d.functions, d.groups)
        };
        let (f, groups) = one(0);
        let vf = &f[&addr("0000:02:10.7")];
        assert_eq!(vf.physfn, Some(addr("0000:02:00.1")));
        assert_eq!((vf.iommu_group, vf.numa_node), (Some(31), Some(0)));
        assert_eq!(groups[&31], BTreeSet::from([addr("0000:02:10.7")]));
        let link = vf.link.clone().unwrap();
        assert_eq!((link.max_speed_gts, link.max_width), (Some(2.5), Some(4)));
        assert_eq!((link.speed_gts, link.width), (None, Some(0)));
        assert_eq!(vf.class, Some(0xff_ffff));

        let (f, _) = one(1);
        let dpu = &f[&addr("0000:42:00.0")];
        assert!(dpu.is_network());
        assert_eq!((dpu.sriov_totalvfs, dpu.sriov_numvfs), (Some(16), Some(0)));
        assert_eq!(dpu.iommu_group, Some(65));
        let link = dpu.link.clone().unwrap();
        assert_eq!(
            (
                link.max_speed_gts,
                link.max_width,
                link.speed_gts,
                link.width
            ),
            (Some(16.0), Some(8), Some(8.0), Some(8))
        );

        let (_, groups) = one(2);
        assert_eq!(
            groups[&12],
            BTreeSet::from([addr("0000:02:00.0"), addr("0000:02:00.1")])
        );

        let (f, _) = one(3);
        let pf = &f[&addr("0000:02:10.7")];
        assert_eq!((pf.sriov_numvfs, pf.sriov_totalvfs), (Some(4), None));

        // A network interface is not a PCI device; nothing breaks the rest.
        let d = pci_functions(&pci(&[docs[4].clone(), "<device".to_owned()]));
        assert!(d.functions.is_empty() && d.groups.is_empty());
    }

    /// The lab's B1 and JY as libvirt would describe them: the same
    /// verdicts as from their doctor trees (tests/fixtures/fleet).
    #[test]
    fn the_lab_hosts_read_through_libvirt_as_from_their_trees() {
        let device = |a: &str, driver: &str, extra: &str, group: u32, members: &[&str]| {
            let p = addr(a);
            let members: String = members
                .iter()
                .map(|m| {
                    let m = addr(m);
                    format!(
                        "<address domain='0x{:04x}' bus='0x{:02x}' slot='0x{:02x}' function='0x{:x}'/>",
                        m.domain, m.bus, m.device, m.function
                    )
                })
                .collect();
            let driver = if driver.is_empty() {
                String::new()
            } else {
                format!("<driver><name>{driver}</name></driver>")
            };
            format!(
                "<device><name>pci_x</name>{driver}<capability type='pci'><class>0x020000</class>\
                 <domain>{}</domain><bus>{}</bus><slot>{}</slot><function>{}</function>{extra}\
                 <iommuGroup number='{group}'>{members}</iommuGroup><numa node='0'/></capability></device>",
                p.domain, p.bus, p.device, p.function
            )
        };
        let vfs = "<capability type='virt_functions' maxCount='8'>\
                   <address domain='0x0000' bus='0x65' slot='0x00' function='0x1'/>\
                   <address domain='0x0000' bus='0x65' slot='0x00' function='0x2'/></capability>";
        let pf_of = "<capability type='phys_function'>\
                     <address domain='0x0000' bus='0x65' slot='0x00' function='0x0'/></capability>";
        let b1 = vec![
            device("0000:65:00.0", "mlx5_core", vfs, 40, &["0000:65:00.0"]),
            device("0000:65:00.1", "", pf_of, 41, &["0000:65:00.1"]),
            device("0000:65:00.2", "", pf_of, 42, &["0000:65:00.2"]),
        ];
        let all = ["0000:65:00.0", "0000:65:00.1", "0000:65:00.2"];
        let jy = vec![
            device("0000:65:00.0", "mlx4_core", vfs, 1, &all),
            device("0000:65:00.1", "", pf_of, 1, &all),
            device("0000:65:00.2", "", pf_of, 1, &all),
        ];
        let nic = [addr("0000:65:00.0")];
        let tree = |h: &str| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/fleet")
                .join(h)
        };
        for (docs, host) in [(b1, "b1"), (jy, "jy")] {
            let through_libvirt = super::super::facts::host_facts_libvirt(&pci(&docs), &nic);
            let from_tree = super::super::host_facts(&tree(host), &nic).unwrap();
            assert_eq!(through_libvirt.nics, from_tree.nics, "{host}");
            assert_eq!(
                through_libvirt.nics[&nic[0]].is_ok(),
                host == "b1",
                "{host}"
            );
            assert_eq!(through_libvirt.realtime, None);
        }
        let jy_says = super::super::facts::host_facts_libvirt(
            &pci(&[
                device("0000:65:00.0", "mlx4_core", vfs, 1, &all),
                device("0000:65:00.1", "", pf_of, 1, &all),
            ]),
            &nic,
        );
        assert!(
            jy_says.nics[&nic[0]]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains(
                "0000:65:00.1's IOMMU group 1 is not viable (0000:65:00.0 is bound to mlx4_core)"
            ),
            "{jy_says:?}"
        );
    }
}
