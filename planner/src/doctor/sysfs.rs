//! Reading a Linux host's sysfs and procfs under a root directory (`/`, or
//! an unpacked capture holding `sys/` and `proc/`, as hwloc's
//! `HWLOC_FSROOT`). Every read is optional: a file that is absent or
//! unreadable is `None`, never an error, so that checks can say what they
//! could not see. Deciding what the values mean is the checks' business.
//!
//! Symbolic links (`driver`, `iommu_group`, `physfn`) are read with
//! `read_link` and only their last component is used: captures keep the
//! links but not always the directories they point to, and an absolute
//! link would leave the root.

use super::DoctorError;
use crate::cpuset::CpuSet;
use crate::topology::{read_sysfs_link, PciAddress, PcieLink};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A filesystem root holding `sys/` and/or `proc/`.
#[derive(Debug, Clone)]
pub(crate) struct Fs {
    root: PathBuf,
    /// `root` with every link resolved: no read leaves it.
    real_root: PathBuf,
    has_sys: bool,
}

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

/// One interrupt line from `/proc/irq/N` and `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Irq {
    /// `N`.
    pub number: u32,
    /// `smp_affinity_list`.
    pub affinity: CpuSet,
    /// Its action name(s) from `/proc/interrupts` (`eth0-rx-0`), when listed.
    pub name: Option<String>,
}

impl Fs {
    /// Opens `root`; it must hold `sys/` or `proc/` (or both).
    pub fn open(root: &Path) -> Result<Fs, DoctorError> {
        let has_sys = root.join("sys").is_dir();
        let has_proc = root.join("proc").is_dir();
        if !has_sys && !has_proc {
            return Err(DoctorError::NoSysOrProc {
                root: root.to_path_buf(),
            });
        }
        Ok(Fs {
            root: root.to_path_buf(),
            real_root: root.canonicalize().unwrap_or_else(|_| root.to_path_buf()),
            has_sys,
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// tuned's isolated CPUs when its active profile is `cpu-partitioning`
    /// (`etc/tuned/active_profile`, `isolated_cores=` in
    /// `etc/tuned/cpu-partitioning-variables.conf`); `None` otherwise, or
    /// when the value is not a plain CPU list.
    pub fn tuned_isolated(&self) -> Option<CpuSet> {
        let profile = self.read(&self.root.join("etc/tuned/active_profile"))?;
        if !profile.split_whitespace().any(|p| p == "cpu-partitioning") {
            return None;
        }
        let vars = self.read(&self.root.join("etc/tuned/cpu-partitioning-variables.conf"))?;
        vars.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find_map(|l| l.trim().strip_prefix("isolated_cores="))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Whether `sys/` exists under the root.
    pub fn has_sys(&self) -> bool {
        self.has_sys
    }

    /// `ROOT/sys/REL`.
    pub fn sys(&self, rel: &str) -> PathBuf {
        self.root.join("sys").join(rel)
    }

    /// `ROOT/proc/REL`.
    pub fn proc(&self, rel: &str) -> PathBuf {
        self.root.join("proc").join(rel)
    }

    /// Every PCI function under `sys/bus/pci/devices`, by address.
    pub fn pci_functions(&self) -> BTreeMap<PciAddress, PciFunction> {
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
    pub fn iommu_groups(&self) -> Option<Vec<u32>> {
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
    pub fn iommu_group_members(
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
    pub fn iommu_group_type(&self, group: u32, address: PciAddress) -> Option<String> {
        self.read(&self.sys(&format!("kernel/iommu_groups/{group}/type")))
            .or_else(|| {
                self.read(&self.sys(&format!("bus/pci/devices/{address}/iommu_group/type")))
            })
    }

    /// The port speed in Mb/s of the function's first interface that has
    /// one (`/sys/class/net/IF/speed`); -1 and unreadable (link down) are
    /// `None`.
    pub fn port_speed(&self, function: &PciFunction) -> Option<(String, u64)> {
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

    /// `sys/devices/system/cpu/smt/control` (`on`, `off`, `forceoff`,
    /// `notsupported`, `notimplemented`).
    pub fn smt_control(&self) -> Option<String> {
        self.read(&self.sys("devices/system/cpu/smt/control"))
    }

    /// The number of NUMA nodes (`sys/devices/system/node/nodeN`).
    pub fn numa_nodes(&self) -> Option<usize> {
        let names = self.list(&self.sys("devices/system/node"))?;
        Some(
            names
                .iter()
                .filter(|n| {
                    n.strip_prefix("node")
                        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
                })
                .count(),
        )
    }

    /// The NUMA node ids (`sys/devices/system/node/nodeN`).
    pub fn node_ids(&self) -> Option<std::collections::BTreeSet<crate::ids::NodeId>> {
        let names = self.list(&self.sys("devices/system/node"))?;
        Some(
            names
                .iter()
                .filter_map(|n| n.strip_prefix("node")?.parse().ok())
                .map(crate::ids::NodeId)
                .collect(),
        )
    }

    /// Node `node`'s huge page pools: (size in KiB, pages, free pages), from
    /// `sys/devices/system/node/nodeN/hugepages/hugepages-SIZEkB/`.
    pub fn hugepage_pools(&self, node: crate::ids::NodeId) -> Vec<(u64, u64, u64)> {
        let dir = self.sys(&format!("devices/system/node/node{node}/hugepages"));
        let Some(names) = self.list(&dir) else {
            return Vec::new();
        };
        let mut pools: Vec<(u64, u64, u64)> = names
            .iter()
            .filter_map(|name| {
                let size: u64 = name
                    .strip_prefix("hugepages-")?
                    .strip_suffix("kB")?
                    .parse()
                    .ok()?;
                let count = |file: &str| -> Option<u64> {
                    self.read(&dir.join(name).join(file))?.parse().ok()
                };
                Some((size, count("nr_hugepages")?, count("free_hugepages")?))
            })
            .collect();
        pools.sort_unstable();
        pools
    }

    /// Whether `/proc/cpuinfo` lists the CPU flag `flag` (`pdpe1gb`).
    pub fn cpu_flag(&self, flag: &str) -> Option<bool> {
        let text = self.read_raw(&self.proc("cpuinfo"))?;
        let flags = text.lines().find(|l| l.starts_with("flags"))?;
        Some(flags.split_whitespace().any(|f| f == flag))
    }

    /// The transparent huge page setting, e.g. `always [madvise] never`.
    pub fn transparent_hugepages(&self) -> Option<String> {
        self.read(&self.sys("kernel/mm/transparent_hugepage/enabled"))
    }

    /// The CPUs present, online or not (`sys/devices/system/cpu/present`).
    pub fn present_cpus(&self) -> Option<CpuSet> {
        self.read(&self.sys("devices/system/cpu/present"))?
            .parse()
            .ok()
    }

    /// The online CPUs (`sys/devices/system/cpu/online`).
    pub fn online_cpus(&self) -> Option<CpuSet> {
        self.read(&self.sys("devices/system/cpu/online"))?
            .parse()
            .ok()
    }

    /// The first `vendor_id` of `/proc/cpuinfo` (`GenuineIntel`,
    /// `AuthenticAMD`, `HygonGenuine`).
    pub fn cpu_vendor(&self) -> Option<String> {
        let text = self.read_raw(&self.proc("cpuinfo"))?;
        text.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "vendor_id").then(|| value.trim().to_owned())
        })
    }

    /// A file under the root as trimmed text (`proc/sys/kernel/…`).
    pub fn text(&self, rel: &str) -> Option<String> {
        self.read(&self.root.join(rel))
    }

    /// `/proc/cmdline`.
    pub fn cmdline(&self) -> Option<String> {
        self.read(&self.proc("cmdline"))
    }

    /// Every numbered `/proc/irq/N` with a readable `smp_affinity_list`, by
    /// number, named from `/proc/interrupts`; `None` when `/proc/irq` is
    /// absent.
    pub fn irqs(&self) -> Option<Vec<Irq>> {
        let dir = self.proc("irq");
        let names = self
            .read_raw(&self.proc("interrupts"))
            .map(|text| interrupt_names(&text))
            .unwrap_or_default();
        let mut irqs: Vec<Irq> = self
            .list(&dir)?
            .iter()
            .filter_map(|n| n.parse::<u32>().ok())
            .filter_map(|number| {
                let affinity = self
                    .read(&dir.join(number.to_string()).join("smp_affinity_list"))?
                    .parse()
                    .ok()?;
                Some(Irq {
                    number,
                    affinity,
                    name: names.get(&number).cloned(),
                })
            })
            .collect();
        irqs.sort_by_key(|irq| irq.number);
        Some(irqs)
    }
}

/// At most this much of a file is read: a link to `/dev/zero` in a capture
/// must not grow without bound.
pub(crate) const MAX_READ: u64 = 16 << 20;

impl Fs {
    /// Where `path` really is, when that is inside the root.
    fn inside(&self, path: &Path) -> Option<PathBuf> {
        let real = path.canonicalize().ok()?;
        real.starts_with(&self.real_root).then_some(real)
    }

    /// A regular file's whole text, when it is inside the root (no link out
    /// of it), at most [`MAX_READ`] bytes, and UTF-8; else `None`. FIFOs and
    /// devices are never opened.
    fn read_raw(&self, path: &Path) -> Option<String> {
        use std::io::Read as _;
        let real = self.inside(path)?;
        if !std::fs::metadata(&real).ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        std::fs::File::open(&real)
            .ok()?
            .take(MAX_READ + 1)
            .read_to_string(&mut text)
            .ok()?;
        (text.len() as u64 <= MAX_READ).then_some(text)
    }

    /// [`Fs::read_raw`], trimmed.
    fn read(&self, path: &Path) -> Option<String> {
        self.read_raw(path).map(|s| s.trim().to_owned())
    }

    /// A directory's entry names, sorted, when it is inside the root.
    fn list(&self, dir: &Path) -> Option<Vec<String>> {
        let real = self.inside(dir)?;
        let mut names: Vec<String> = std::fs::read_dir(real)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Some(names)
    }
}

/// The last component of a symbolic link's target.
fn link_name(path: &Path) -> Option<String> {
    let target = std::fs::read_link(path).ok()?;
    target.file_name().map(|n| n.to_string_lossy().into_owned())
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

/// IRQ number → action names, from `/proc/interrupts`: the columns after the
/// per-CPU counts are the chip, the hardware IRQ with its trigger
/// (`5-edge`, `16-fasteoi`, or `27 Level`) and then the names.
fn interrupt_names(text: &str) -> BTreeMap<u32, String> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    lines
        .filter_map(|line| {
            let (number, rest) = line.trim_start().split_once(':')?;
            let number: u32 = number.trim().parse().ok()?;
            let fields: Vec<&str> = rest.split_whitespace().skip(cpus).collect();
            let trigger = fields.iter().rposition(|f| {
                let numbered = f
                    .split_once('-')
                    .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                numbered || f.eq_ignore_ascii_case("edge") || f.eq_ignore_ascii_case("level")
            });
            let name = match trigger {
                Some(i) => fields.get(i + 1..).map(|n| n.join(" ")),
                None => fields.last().map(|n| (*n).to_owned()),
            }
            .filter(|n| !n.is_empty())?;
            Some((number, name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Fs;

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

    use super::interrupt_names;

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
