//! What doctor reads of a sys tree beyond [`crate::host::fs`]: the PCI
//! functions (class, driver, IOMMU group, SR-IOV, PCIe link, interfaces),
//! the IOMMU groups and the ports' speeds. Every read is optional, as the
//! tree reader's are; deciding what the values mean is the checks' business.

use crate::host::fs::{link_name, Fs};
use crate::topology::{read_sysfs_link, PciAddress, PcieLink};
use std::collections::BTreeMap;
use std::path::Path;

/// One PCI function, as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PciFunction {
    /// Its address.
    pub address: PciAddress,
    /// The 24-bit class code (`0x020000` = Ethernet), when readable.
    pub class: Option<u32>,
    /// The bound driver's name (`ice`, `vfio-pci`), `None` when unbound.
    pub driver: Option<String>,
    /// Its IOMMU group, `None` when the IOMMU is off.
    pub iommu_group: Option<u32>,
    /// `numa_node` as written (-1 = unknown), when the file exists.
    pub numa_node: Option<i64>,
    /// `sriov_totalvfs`, on SR-IOV physical functions.
    pub sriov_totalvfs: Option<u32>,
    /// `sriov_numvfs`, on SR-IOV physical functions.
    pub sriov_numvfs: Option<u32>,
    /// The physical function of a virtual function.
    pub physfn: Option<PciAddress>,
    /// The PCIe link, when sysfs reports one.
    pub link: Option<PcieLink>,
    /// Network interfaces (`net/IF`, or `virtioN/net/IF` for virtio).
    pub interfaces: Vec<String>,
}

impl PciFunction {
    /// A network controller (class 0x02xxxx).
    pub fn is_network(&self) -> bool {
        self.class.is_some_and(|c| c >> 16 == 0x02)
    }

    /// A PCI-to-PCI bridge (class 0x0604xx): does not count in a VFIO group.
    pub fn is_bridge(&self) -> bool {
        self.class.is_some_and(|c| c >> 8 == 0x0604)
    }
}

/// The PCI side of a sys tree.
pub(crate) trait PciTree {
    /// Every PCI function under `sys/bus/pci/devices`, by address.
    fn pci_functions(&self) -> BTreeMap<PciAddress, PciFunction>;

    /// The IOMMU group numbers, or `None` when `sys/kernel/iommu_groups` is
    /// absent.
    fn iommu_groups(&self) -> Option<Vec<u32>>;

    /// The members of IOMMU group `group`: `sys/kernel/iommu_groups/N/devices`
    /// together with every function whose `iommu_group` link names N (a
    /// capture may hold only one of the two).
    fn iommu_group_members(
        &self,
        group: u32,
        functions: &BTreeMap<PciAddress, PciFunction>,
    ) -> Vec<PciAddress>;

    /// An IOMMU group's default domain type (`DMA`, `DMA-FQ`, `identity`).
    fn iommu_group_type(&self, group: u32, address: PciAddress) -> Option<String>;

    /// The port speed in Mb/s of the function's first interface that has
    /// one (`/sys/class/net/IF/speed`); -1 and unreadable (link down) are
    /// `None`.
    fn port_speed(&self, function: &PciFunction) -> Option<(String, u64)>;
}

impl PciTree for Fs {
    /// Every PCI function under `sys/bus/pci/devices`, by address.
    fn pci_functions(&self) -> BTreeMap<PciAddress, PciFunction> {
        let dir = self.sys("bus/pci/devices");
        self.list(&dir)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|name| {
                let address: PciAddress = name.parse().ok()?;
                Some((address, read_function(self, &dir.join(&name), address)))
            })
            .collect()
    }

    /// The IOMMU group numbers, or `None` when `sys/kernel/iommu_groups` is
    /// absent.
    fn iommu_groups(&self) -> Option<Vec<u32>> {
        let mut groups: Vec<u32> = self
            .list(&self.sys("kernel/iommu_groups"))?
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        groups.sort_unstable();
        Some(groups)
    }

    /// The members of IOMMU group `group`: `sys/kernel/iommu_groups/N/devices`
    /// together with every function whose `iommu_group` link names N (a
    /// capture may hold only one of the two).
    fn iommu_group_members(
        &self,
        group: u32,
        functions: &BTreeMap<PciAddress, PciFunction>,
    ) -> Vec<PciAddress> {
        let mut members: Vec<PciAddress> = self
            .list(&self.sys(&format!("kernel/iommu_groups/{group}/devices")))
            .unwrap_or_default()
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        members.extend(
            functions
                .values()
                .filter(|f| f.iommu_group == Some(group))
                .map(|f| f.address),
        );
        members.sort_unstable();
        members.dedup();
        members
    }

    /// An IOMMU group's default domain type (`DMA`, `DMA-FQ`, `identity`).
    fn iommu_group_type(&self, group: u32, address: PciAddress) -> Option<String> {
        self.read(&self.sys(&format!("kernel/iommu_groups/{group}/type")))
            .or_else(|| {
                self.read(&self.sys(&format!("bus/pci/devices/{address}/iommu_group/type")))
            })
    }

    /// The port speed in Mb/s of the function's first interface that has
    /// one (`/sys/class/net/IF/speed`); -1 and unreadable (link down) are
    /// `None`.
    fn port_speed(&self, function: &PciFunction) -> Option<(String, u64)> {
        function.interfaces.iter().find_map(|name| {
            let speed = self
                .read(&self.sys(&format!("class/net/{name}/speed")))
                .or_else(|| {
                    let dir = self.sys(&format!("bus/pci/devices/{}", function.address));
                    self.read(&dir.join("net").join(name).join("speed"))
                })?
                .parse::<i64>()
                .ok()
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)?;
            Some((name.clone(), speed))
        })
    }
}

fn read_function(fs: &Fs, dir: &Path, address: PciAddress) -> PciFunction {
    let number = |name: &str| fs.read(&dir.join(name)).and_then(|s| s.parse::<u32>().ok());
    let mut interfaces = fs.list(&dir.join("net")).unwrap_or_default();
    // virtio network devices keep their interface one level down.
    for sub in fs.list(dir).unwrap_or_default() {
        if sub.starts_with("virtio") {
            interfaces.extend(fs.list(&dir.join(&sub).join("net")).unwrap_or_default());
        }
    }
    interfaces.sort();
    interfaces.dedup();
    PciFunction {
        address,
        class: fs
            .read(&dir.join("class"))
            .and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok()),
        driver: link_name(&dir.join("driver")),
        iommu_group: link_name(&dir.join("iommu_group")).and_then(|n| n.parse().ok()),
        numa_node: fs.read(&dir.join("numa_node")).and_then(|s| s.parse().ok()),
        sriov_totalvfs: number("sriov_totalvfs"),
        sriov_numvfs: number("sriov_numvfs"),
        physfn: link_name(&dir.join("physfn")).and_then(|n| n.parse().ok()),
        link: read_sysfs_link(dir),
        interfaces,
    }
}

#[cfg(test)]
mod tests {
    use crate::host::fs::Fs;

    /// Issue 14, defect 6: reads under `--root` stay in the root, open
    /// regular files only, and never hang or grow without bound.
    #[test]
    fn doctor_root_is_confined_to_the_root() {
        let outside = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "root-only line\n").unwrap_or_else(|e| panic!("{e}"));
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let smt = root.path().join("sys/devices/system/cpu/smt");
        std::fs::create_dir_all(&smt).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.path().join("proc")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&secret, smt.join("control")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("/dev/zero", root.path().join("proc/cpuinfo"))
            .unwrap_or_else(|e| panic!("{e}"));
        let fifo = root.path().join("proc/cmdline");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let fs = Fs::open(root.path()).unwrap_or_else(|e| panic!("{e}"));
        let started = std::time::Instant::now();
        assert_eq!(fs.smt_control(), None, "a link out of the root was read");
        assert_eq!(fs.cpu_vendor(), None, "/dev/zero was read");
        assert_eq!(fs.cmdline(), None, "a FIFO was opened");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // Inside the root, links are fine.
        std::fs::write(smt.join("real"), "on\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(smt.join("control")).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("real", smt.join("control")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(fs.smt_control().as_deref(), Some("on"));
    }

    use crate::host::irq::interrupt_names;

    #[test]
    fn interrupt_names_follow_the_trigger_column() {
        let text = "           CPU0       CPU1       \n \
             24:          1          0  IO-APIC   5-edge      ACPI:Ged\n \
             38:          0       2775 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0\n \
             16:          0          0   IO-APIC  16-fasteoi   ehci_hcd:usb1, uhci_hcd:usb2\n \
             11:          0          0  GICv3  27 Level     arch_timer\n\
             NMI:          0          0   Non-maskable interrupts\n";
        let names = interrupt_names(text);
        for (irq, name) in [
            (24, "ACPI:Ged"),
            (38, "virtio2-input.0"),
            (16, "ehci_hcd:usb1, uhci_hcd:usb2"),
            (11, "arch_timer"),
        ] {
            assert_eq!(names.get(&irq).map(String::as_str), Some(name), "{irq}");
        }
        assert_eq!(names.len(), 4);
    }
}
