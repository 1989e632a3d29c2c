//! `pinplan doctor`: checks that a host's kernel and PCI set-up let
//! packet-processing VMs reach line rate — IOMMU, VFIO groups, SR-IOV, PCIe
//! links, NIC locality, SMT, CPU isolation and IRQ affinity — from sysfs and
//! procfs under a root directory (`/`, or a captured tree), optionally
//! against a [`Plan`].
//!
//! Every check yields [`Check`]s with a [`Status`]; a file that is absent
//! makes a check [`Status::Skip`] with the reason, never an error. Only bad
//! input (a root without `sys/` and `proc/`, a NIC that is not there) is a
//! [`DoctorError`]. Argument parsing and printing are the CLI's business.
//!
//! ```
//! use pinplan::doctor::{self, DoctorOptions, Status};
//! let root = std::env::temp_dir().join(format!("pinplan-doctor-doc-{}", std::process::id()));
//! std::fs::create_dir_all(root.join("proc"))?;
//! std::fs::write(root.join("proc/cmdline"), "ro quiet\n")?;
//! let report = doctor::run(&DoctorOptions {
//!     root: root.clone(),
//!     plan: None,
//!     plan_path: None,
//!     force: false,
//!     nics: vec![],
//! })?;
//! // Without sys/ the sysfs checks skip; without a plan the plan checks do.
//! assert!(report.checks.iter().all(|c| c.status == Status::Skip));
//! assert!(!report.has_failures());
//! # std::fs::remove_dir_all(&root)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod cpu;
mod facts;
mod iommu;
mod memory;
mod nic;
mod nodedev;
mod vfio;

pub use facts::{host_facts, host_facts_libvirt, HostFacts, RtThrottled};
pub use vfio::{GroupProblem, Refusal};
pub(crate) mod sysfs;
#[cfg(test)]
pub(crate) mod testroot;

use crate::cmdline::KernelCmdline;
use crate::host::fs::{Fs, FsError};
use crate::plan::Plan;
use crate::topology::PciAddress;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use sysfs::{PciFunction, PciTree as _};

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to fix.
    Pass,
    /// Likely to cost throughput or to surprise; the plan can still run.
    Warn,
    /// Will break the plan or measurably cut throughput.
    Fail,
    /// Could not run (no plan, a file absent); the message says why.
    Skip,
}

impl Status {
    /// `PASS`, `WARN`, `FAIL`, `SKIP`, as the text table prints it.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "SKIP",
        }
    }
}

/// Which check; the order of the variants is the order of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckId {
    /// IOMMU groups exist.
    IommuEnabled,
    /// Each NIC's IOMMU domain type (strict `DMA` costs throughput).
    IommuDmaMode,
    /// Every other endpoint in a VFIO device's IOMMU group is VFIO-safe.
    VfioGroupViable,
    /// SR-IOV VFs enabled on the PFs the plan uses.
    SriovVfs,
    /// PCIe link running at its capability.
    PcieLink,
    /// The NIC's NUMA node is known.
    NicNuma,
    /// SMT is on when the plan needs sibling threads.
    Smt,
    /// VM CPUs isolated from the scheduler, ticks and RCU; host CPUs not.
    Isolation,
    /// No IRQ may run on a VM's CPUs.
    IrqAffinity,
    /// The huge pages the plan's VMs need are free on their nodes.
    Hugepages,
    /// The kernel can run the plan's real-time (FIFO) vCPUs.
    Realtime,
}

impl CheckId {
    /// The id as printed (`pcie-link`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckId::IommuEnabled => "iommu-enabled",
            CheckId::IommuDmaMode => "iommu-dma-mode",
            CheckId::VfioGroupViable => "vfio-group-viable",
            CheckId::SriovVfs => "sriov-vfs",
            CheckId::PcieLink => "pcie-link",
            CheckId::NicNuma => "nic-numa",
            CheckId::Smt => "smt",
            CheckId::Isolation => "isolation",
            CheckId::IrqAffinity => "irq-affinity",
            CheckId::Hugepages => "hugepages",
            CheckId::Realtime => "realtime",
        }
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Which check.
    pub id: CheckId,
    /// Its verdict.
    pub status: Status,
    /// What it is about: `host`, a PCI address, a VM name, `irqs`.
    pub subject: String,
    /// What was found, with the numbers.
    pub message: String,
    /// How to fix it (`null` in JSON when there is nothing to fix).
    pub hint: Option<String>,
}

impl Check {
    fn new(
        id: CheckId,
        status: Status,
        subject: impl Into<String>,
        message: impl Into<String>,
    ) -> Check {
        Check {
            id,
            status,
            subject: subject.into(),
            message: message.into(),
            hint: None,
        }
    }

    fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }
}

/// Every finding, in check order, then by subject as each check lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    /// The findings.
    pub checks: Vec<Check>,
}

/// What to check.
#[derive(Debug, Clone, PartialEq)]
pub struct DoctorOptions {
    /// The directory holding `sys/` and `proc/` (`/` for this machine).
    pub root: PathBuf,
    /// The plan to check the host against, if any.
    pub plan: Option<Plan>,
    /// Its file, for messages.
    pub plan_path: Option<PathBuf>,
    /// Check against the plan even when it was made for another host
    /// topology (`--force`; CPUs and nodes it uses must still exist).
    pub force: bool,
    /// NICs to check besides the plan's (`--nic`).
    pub nics: Vec<PciAddress>,
}

/// Input the doctor cannot work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DoctorError {
    /// The root holds neither `sys/` nor `proc/`.
    #[error("{} has neither sys/ nor proc/", root.display())]
    NoSysOrProc {
        /// The root given.
        root: PathBuf,
    },
    /// A NIC named by `--nic` or the plan is not a PCI device under the root.
    #[error("{address} ({origin}) is not a PCI device {place}")]
    NicNotFound {
        /// The address.
        address: PciAddress,
        /// Who named it: `--nic`, or `the plan's VM vm1`.
        origin: String,
        /// Where it was looked for: `under ROOT/sys/bus/pci/devices`, or
        /// `among the PCI node devices of URI`.
        place: String,
        /// The network devices that are there.
        network: Vec<PciAddress>,
    },
    /// The plan was made for another host ([`crate::plan::PlanError`]'s
    /// message and hint).
    #[error("{message}")]
    Plan {
        /// What is wrong.
        message: String,
        /// What to do.
        hint: Option<String>,
    },
    /// A host reached through libvirt could not be read (the error's
    /// message and hint).
    #[error("{message}")]
    Libvirt {
        /// What is wrong.
        message: String,
        /// What to do.
        hint: Option<String>,
    },
}

impl From<FsError> for DoctorError {
    fn from(e: FsError) -> DoctorError {
        match e {
            FsError::NoSysOrProc { root } => DoctorError::NoSysOrProc { root },
        }
    }
}

impl crate::error::Diagnostic for DoctorError {
    fn hint(&self) -> Option<String> {
        match self {
            DoctorError::NoSysOrProc { .. } => Some(
                "--root takes the directory that holds sys/ and proc/: / for this machine, or an unpacked capture (hwloc-gather-topology, a ghw snapshot)"
                    .to_owned(),
            ),
            DoctorError::NicNotFound { network, .. } if network.is_empty() => Some(
                "that root has no network PCI device; `lspci -D` lists the addresses of the machine it came from".to_owned(),
            ),
            DoctorError::NicNotFound { network, .. } => Some(format!(
                "network devices there: {}",
                network.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            )),
            DoctorError::Plan { hint, .. } | DoctorError::Libvirt { hint, .. } => hint.clone(),
        }
    }
}

/// A NIC under examination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Nic {
    address: PciAddress,
    /// Named with `--nic` or by the plan (not merely discovered).
    named: bool,
    /// Plan VMs naming it, in plan order.
    vms: Vec<String>,
}

/// Where the checks read a host.
pub(crate) enum View {
    /// A sys/ + proc/ tree (`--root`).
    Tree(Fs),
    /// libvirt's view of a host reached through its URI: its PCI and network
    /// node devices and its topology. The kernel's settings (command line,
    /// IRQs, cgroups, huge page pools, RT throttling) are not in it.
    Libvirt {
        /// The URI.
        uri: String,
        /// Each IOMMU group's members as the node devices list them.
        groups: BTreeMap<u32, std::collections::BTreeSet<PciAddress>>,
        /// Port speeds in Mb/s by interface name, where libvirt knows them.
        speeds: BTreeMap<String, u64>,
        /// NUMA nodes in its topology.
        nodes: usize,
        /// Its CPU vendor, when known.
        vendor: Option<String>,
    },
}

/// Everything the checks look at.
pub(crate) struct Host<'a> {
    view: View,
    functions: BTreeMap<PciAddress, PciFunction>,
    nics: Vec<Nic>,
    cmdline: Option<KernelCmdline>,
    plan: Option<&'a Plan>,
    /// The plan's file as given (`--plan FILE`), for the commands hints print.
    plan_path: Option<&'a std::path::Path>,
}

impl Host<'_> {
    /// The plan as a hint's command names it: the file given, as typed, or
    /// `PLAN.json` when the plan came without one.
    fn plan_arg(&self) -> String {
        self.plan_path
            .map_or_else(|| "PLAN.json".to_owned(), |p| p.display().to_string())
    }

    fn function(&self, address: PciAddress) -> Option<&PciFunction> {
        self.functions.get(&address)
    }

    /// Whether PCI devices can be seen at all (a tree without sys/ has none).
    fn has_sys(&self) -> bool {
        match &self.view {
            View::Tree(fs) => fs.has_sys(),
            View::Libvirt { .. } => true,
        }
    }

    /// The IOMMU group numbers; `None` when there is nowhere to see them.
    fn iommu_groups(&self) -> Option<Vec<u32>> {
        match &self.view {
            View::Tree(fs) => fs.iommu_groups(),
            View::Libvirt { groups, .. } => Some(groups.keys().copied().collect()),
        }
    }

    /// Where the IOMMU groups are read, for messages.
    fn groups_place(&self) -> String {
        match &self.view {
            View::Tree(_) => "/sys/kernel/iommu_groups".to_owned(),
            View::Libvirt { uri, .. } => format!("the PCI node devices of {uri}"),
        }
    }

    /// The members of IOMMU group `group`.
    fn group_members(&self, group: u32) -> Vec<PciAddress> {
        match &self.view {
            View::Tree(fs) => fs.iommu_group_members(group, &self.functions),
            View::Libvirt { groups, .. } => nodedev::group_members(groups, group),
        }
    }

    /// The CPU vendor (`GenuineIntel`).
    fn cpu_vendor(&self) -> Option<String> {
        match &self.view {
            View::Tree(fs) => fs.cpu_vendor(),
            View::Libvirt { vendor, .. } => vendor.clone(),
        }
    }

    /// How many NUMA nodes the host has.
    fn numa_nodes(&self) -> Option<usize> {
        match &self.view {
            View::Tree(fs) => fs.numa_nodes(),
            View::Libvirt { nodes, .. } => Some(*nodes),
        }
    }

    /// A NIC port's name and speed in Mb/s: its first interface whose speed
    /// is known.
    fn port_speed(&self, function: &PciFunction) -> Option<(String, u64)> {
        match &self.view {
            View::Tree(fs) => fs.port_speed(function),
            View::Libvirt { speeds, .. } => function
                .interfaces
                .iter()
                .find_map(|name| Some((name.clone(), *speeds.get(name)?))),
        }
    }

    /// The NICs with their sysfs view, or a single skip when there are none.
    fn nic_functions(&self, id: CheckId) -> Result<Vec<(&Nic, &PciFunction)>, Check> {
        let nics: Vec<(&Nic, &PciFunction)> = self
            .nics
            .iter()
            .filter_map(|n| Some((n, self.function(n.address)?)))
            .collect();
        if nics.is_empty() {
            let why = if self.has_sys() {
                "no network PCI device (class 0x02) under sys/bus/pci/devices, and none named with --nic or in the plan"
            } else {
                "no sys/ under the root"
            };
            return Err(Check::new(id, Status::Skip, "nics", why));
        }
        Ok(nics)
    }

    /// One check per NIC, `check(nic, its sysfs view, subject)`, or a
    /// single skip when there are none.
    fn per_nic(
        &self,
        id: CheckId,
        check: impl Fn(&Nic, &PciFunction, String) -> Check,
    ) -> Vec<Check> {
        match self.nic_functions(id) {
            Ok(nics) => nics
                .into_iter()
                .map(|(nic, f)| check(nic, f, nic.address.to_string()))
                .collect(),
            Err(skip) => vec![skip],
        }
    }
}

/// Runs every check.
pub fn run(options: &DoctorOptions) -> Result<Report, DoctorError> {
    let fs = Fs::open(&options.root)?;
    if let Some(plan) = &options.plan {
        check_plan_host(&fs, options, plan)?;
    }
    let functions = fs.pci_functions();
    let place = format!(
        "under {}",
        options.root.join("sys/bus/pci/devices").display()
    );
    let nics = select_nics(&place, &functions, options)?;
    let cmdline = fs.cmdline().map(|text| KernelCmdline::parse(&text));
    let host = Host {
        view: View::Tree(fs),
        functions,
        nics,
        cmdline,
        plan: options.plan.as_ref(),
        plan_path: options.plan_path.as_deref(),
    };
    Ok(checks(&host))
}

/// Runs the checks libvirt lets one make of the host at `uri` (reached
/// through its own transport, e.g. `qemu+ssh://`): IOMMU groups, VFIO group
/// viability, SR-IOV VFs, PCIe links and NIC locality from its PCI node
/// devices; the checks of the kernel's settings are skipped, saying so.
/// `options.root` is not used.
pub fn run_libvirt(uri: &str, options: &DoctorOptions) -> Result<Report, DoctorError> {
    let failed = |e: &dyn crate::error::Diagnostic| DoctorError::Libvirt {
        message: e.to_string(),
        hint: e.hint(),
    };
    let (topology, devices) = crate::topology::load_libvirt(uri).map_err(|e| failed(&e))?;
    if let Some(plan) = &options.plan {
        let path = options
            .plan_path
            .clone()
            .unwrap_or_else(|| PathBuf::from("the plan"));
        plan.check_host(&path, &topology, options.force)
            .map_err(|e| DoctorError::Plan {
                message: e.to_string(),
                hint: crate::error::Diagnostic::hint(&e),
            })?;
    }
    let devices = devices.map_err(|e| failed(&e))?;
    let nodedev::Described {
        functions,
        groups,
        speeds,
    } = nodedev::pci_functions(&devices);
    let place = format!("among the PCI node devices of {uri}");
    let nics = select_nics(&place, &functions, options)?;
    let host = Host {
        view: View::Libvirt {
            uri: uri.to_owned(),
            groups,
            speeds,
            nodes: topology.numa_nodes.len(),
            vendor: topology.cpu_vendor.clone(),
        },
        functions,
        nics,
        cmdline: None,
        plan: options.plan.as_ref(),
        plan_path: options.plan_path.as_deref(),
    };
    Ok(checks(&host))
}

/// Every check of `host`, in id order.
fn checks(host: &Host<'_>) -> Report {
    let mut checks = Vec::new();
    checks.push(iommu::enabled(host));
    checks.extend(iommu::group_viable(host));
    checks.extend(nic::sriov_vfs(host));
    checks.extend(nic::pcie_link(host));
    checks.extend(nic::numa(host));
    match &host.view {
        View::Tree(fs) => {
            checks.extend(iommu::dma_mode(host, fs));
            checks.push(cpu::smt(host, fs));
            checks.extend(cpu::isolation(host, fs));
            checks.push(cpu::irq_affinity(host, fs));
            checks.extend(memory::hugepages(host, fs));
            checks.extend(cpu::realtime(host, fs));
        }
        View::Libvirt { uri, .. } => {
            for id in [
                CheckId::IommuDmaMode,
                CheckId::Smt,
                CheckId::Isolation,
                CheckId::IrqAffinity,
                CheckId::Hugepages,
                CheckId::Realtime,
            ] {
                checks.push(
                    Check::new(
                        id,
                        Status::Skip,
                        "host",
                        format!("not visible through libvirt ({uri}): this check reads the kernel's settings in sysfs and procfs"),
                    )
                    .hint("give the host a doctor_root (a capture of its /sys and /proc), or run `pinplan doctor` on it"),
                );
            }
        }
    }
    // Each check lists its subjects in a fixed order; keep checks in id order.
    checks.sort_by_key(|c| c.id);
    Report { checks }
}

/// Refuses a plan made for another host: on this machine (`--root /`) by its
/// fingerprint against the live topology (unless `force`); under any root,
/// when it uses CPUs or NUMA nodes the root's sysfs does not list.
fn check_plan_host(fs: &Fs, options: &DoctorOptions, plan: &Plan) -> Result<(), DoctorError> {
    let refused = |e: crate::plan::PlanError| DoctorError::Plan {
        message: e.to_string(),
        hint: crate::error::Diagnostic::hint(&e),
    };
    let path = options
        .plan_path
        .clone()
        .unwrap_or_else(|| PathBuf::from("the plan"));
    let this_machine = options
        .root
        .canonicalize()
        .is_ok_and(|r| r == std::path::Path::new("/"));
    if this_machine {
        if let Ok(host) = crate::topology::load(&crate::topology::Source::LiveHost) {
            plan.check_host(&path, &host, options.force)
                .map_err(refused)?;
        }
    }
    let (Some(cpus), Some(nodes)) = (fs.present_cpus(), fs.node_ids()) else {
        return Ok(());
    };
    let name = options.root.display().to_string();
    plan.check_exist(&path, &name, &cpus, &nodes)
        .map_err(refused)
}

/// The NICs to examine: those named with `--nic` and by the plan's VMs;
/// when none is named, every network function that is not an SR-IOV VF.
fn select_nics(
    place: &str,
    functions: &BTreeMap<PciAddress, PciFunction>,
    options: &DoctorOptions,
) -> Result<Vec<Nic>, DoctorError> {
    let mut named: BTreeMap<PciAddress, Nic> = BTreeMap::new();
    let mut origins: Vec<(PciAddress, String)> = options
        .nics
        .iter()
        .map(|a| (*a, "--nic".to_owned()))
        .collect();
    if let Some(plan) = &options.plan {
        origins.extend(plan.vms.iter().flat_map(|vm| {
            let nics = if vm.nics.is_empty() {
                vm.nic.into_iter().collect()
            } else {
                vm.nics.clone()
            };
            nics.into_iter()
                .map(|nic| (nic, format!("the plan's VM {}", vm.name)))
        }));
    }
    for (address, origin) in origins {
        if !functions.contains_key(&address) {
            return Err(DoctorError::NicNotFound {
                address,
                origin,
                place: place.to_owned(),
                network: functions
                    .values()
                    .filter(|f| f.is_network())
                    .map(|f| f.address)
                    .collect(),
            });
        }
        let nic = named.entry(address).or_insert_with(|| Nic {
            address,
            named: true,
            vms: Vec::new(),
        });
        if let Some(vm) = origin.strip_prefix("the plan's VM ") {
            nic.vms.push(vm.to_owned());
        }
    }
    if named.is_empty() {
        return Ok(functions
            .values()
            .filter(|f| f.is_network() && f.physfn.is_none())
            .map(|f| Nic {
                address: f.address,
                named: false,
                vms: Vec::new(),
            })
            .collect());
    }
    Ok(named.into_values().collect())
}

impl Report {
    /// Whether any check failed (exit status 1).
    pub fn has_failures(&self) -> bool {
        self.checks.iter().any(|c| c.status == Status::Fail)
    }

    /// `{"checks": [{"id", "status", "subject", "message", "hint"}]}`.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A table: status, check, subject, message, with each hint on the line
    /// below its message; then a count per status.
    pub fn to_text(&self) -> String {
        let id_width = self
            .checks
            .iter()
            .map(|c| c.id.as_str().len())
            .max()
            .unwrap_or(0)
            .max("check".len());
        let subject_width = self
            .checks
            .iter()
            .map(|c| c.subject.len())
            .max()
            .unwrap_or(0)
            .max("subject".len());
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "{:<6} {:<id_width$} {:<subject_width$} message / hint",
            "status", "check", "subject"
        );
        let indent = " ".repeat(6 + 1 + id_width + 1 + subject_width + 1);
        for c in &self.checks {
            let _ = writeln!(
                out,
                "{:<6} {:<id_width$} {:<subject_width$} {}",
                c.status.label(),
                c.id.as_str(),
                c.subject,
                c.message
            );
            if let Some(hint) = &c.hint {
                let _ = writeln!(out, "{indent}hint: {hint}");
            }
        }
        let count = |s: Status| self.checks.iter().filter(|c| c.status == s).count();
        let _ = writeln!(
            out,
            "\n{} pass, {} warn, {} fail, {} skip",
            count(Status::Pass),
            count(Status::Warn),
            count(Status::Fail),
            count(Status::Skip)
        );
        out
    }
}

/// `key=value` (or a bare `key`) for each of `keys` on the command line, in
/// the order given.
fn shown(cmdline: &KernelCmdline, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .filter(|key| cmdline.has(key))
        .map(|key| match cmdline.get(key) {
            Some(value) => format!("{key}={value}"),
            None => (*key).to_owned(),
        })
        .collect()
}

/// A rate in Gb/s from Mb/s, without needless decimals (`100`, `2.5`).
fn gbps_from_mbps(mbps: u64) -> String {
    let gbps = mbps as f64 / 1000.0;
    if mbps.is_multiple_of(1000) {
        format!("{gbps:.0}")
    } else {
        format!("{gbps}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Diagnostic as _;

    #[test]
    fn ids_and_statuses_print_as_documented() {
        let check =
            Check::new(CheckId::PcieLink, Status::Fail, "0000:65:00.0", "slow").hint("reseat");
        let report = Report {
            checks: vec![check, Check::new(CheckId::Smt, Status::Pass, "host", "on")],
        };
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap_or_default();
        assert_eq!(json["checks"][0]["id"], "pcie-link");
        assert_eq!(json["checks"][0]["status"], "fail");
        assert_eq!(json["checks"][0]["hint"], "reseat");
        assert_eq!(json["checks"][1]["hint"], serde_json::Value::Null);
        for id in [
            CheckId::IommuEnabled,
            CheckId::VfioGroupViable,
            CheckId::IrqAffinity,
        ] {
            assert_eq!(
                serde_json::to_value(id).unwrap_or_default(),
                serde_json::Value::String(id.as_str().to_owned())
            );
        }
        let text = report.to_text();
        assert!(text.contains("FAIL   pcie-link"), "{text}");
        assert!(text.contains("hint: reseat"), "{text}");
        assert!(text.ends_with("1 pass, 0 warn, 1 fail, 0 skip\n"), "{text}");
        assert!(report.has_failures());
    }

    #[test]
    fn bad_roots_and_absent_nics_are_errors() {
        use super::testroot::{plan, TestRoot, Vm};
        let empty =
            std::env::temp_dir().join(format!("pinplan-doctor-unit-{}-empty", std::process::id()));
        let _ = std::fs::create_dir_all(&empty);
        let options =
            |root: &std::path::Path, plan: Option<Plan>, nics: Vec<PciAddress>| DoctorOptions {
                root: root.to_path_buf(),
                plan,
                plan_path: None,
                force: false,
                nics,
            };
        assert_eq!(
            run(&options(&empty, None, vec![])),
            Err(DoctorError::NoSysOrProc {
                root: empty.clone()
            })
        );
        let _ = std::fs::remove_dir_all(&empty);

        let root = TestRoot::new("absent-nic");
        root.device("0000:65:00.0", "0x020000");
        root.device("0000:00:1f.2", "0x010601");
        let absent: PciAddress = "0000:66:00.0".parse().unwrap_or_else(|e| panic!("{e}"));
        let error = run(&options(&root.path, None, vec![absent]));
        let expected = DoctorError::NicNotFound {
            address: absent,
            origin: "--nic".to_owned(),
            place: format!("under {}", root.path.join("sys/bus/pci/devices").display()),
            network: vec!["0000:65:00.0".parse().unwrap_or_else(|e| panic!("{e}"))],
        };
        assert_eq!(error, Err(expected.clone()));
        assert_eq!(
            expected.hint().as_deref(),
            Some("network devices there: 0000:65:00.0")
        );

        let the_plan = plan("0", &[Vm::on_nic("vm1", "1", "0000:66:00.0")]);
        match run(&options(&root.path, Some(the_plan), vec![])) {
            Err(DoctorError::NicNotFound { origin, .. }) => assert_eq!(origin, "the plan's VM vm1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn named_nics_replace_discovery_and_output_order_is_fixed() {
        use super::testroot::{plan, TestRoot, Vm};
        let root = TestRoot::new("order");
        for address in ["0000:b1:00.0", "0000:65:00.1", "0000:65:00.0"] {
            root.device(address, "0x020000").attr("numa_node", "0");
        }
        let ids = |report: &Report| -> Vec<(CheckId, String)> {
            report
                .checks
                .iter()
                .map(|c| (c.id, c.subject.clone()))
                .collect()
        };
        let all = root.run(None, &[]);
        let numa: Vec<String> = all
            .checks
            .iter()
            .filter(|c| c.id == CheckId::NicNuma)
            .map(|c| c.subject.clone())
            .collect();
        assert_eq!(numa, ["0000:65:00.0", "0000:65:00.1", "0000:b1:00.0"]);
        let mut sorted = ids(&all);
        sorted.sort_by_key(|(id, _)| *id);
        assert_eq!(ids(&all), sorted);
        assert_eq!(all, root.run(None, &[]), "same input, same report");

        // --nic and the plan's NICs together, and only those.
        let the_plan = plan("0", &[Vm::on_nic("vm1", "1", "0000:65:00.1")]);
        let named = root.run(Some(the_plan), &["0000:b1:00.0"]);
        let numa: Vec<String> = named
            .checks
            .iter()
            .filter(|c| c.id == CheckId::NicNuma)
            .map(|c| c.subject.clone())
            .collect();
        assert_eq!(numa, ["0000:65:00.1", "0000:b1:00.0"]);
    }

    #[test]
    fn rates_print_without_needless_decimals() {
        for (mbps, text) in [(1000, "1"), (100_000, "100"), (2500, "2.5"), (25_000, "25")] {
            assert_eq!(gbps_from_mbps(mbps), text);
        }
    }
}
