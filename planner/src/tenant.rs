//! Who is pinned where: a [`Tenant`] is the host or a VM with the CPUs each
//! of its threads may run on. libvirt/ reads them from domain XML, report/
//! compares them; the host's own CPUs come from the plan or `isolcpus=`.

use crate::cpuset::CpuSet;
use crate::topology::{HostTopology, PciAddress};
use serde::Serialize;

/// Whether a thread allowed on `cpus` floats: it may run on every usable
/// CPU (no pin, or a pin to every CPU, which libvirt keeps after re-pinning
/// to all). The one rule for `report`, `plan --connect` and `apply`.
pub fn floats(cpus: &CpuSet, usable: &CpuSet) -> bool {
    usable.is_subset(cpus)
}

/// `vCPU 1`, `vCPUs 1,2`.
pub fn numbered(one: &str, many: &str, ids: &[u32]) -> String {
    let list: Vec<String> = ids.iter().map(u32::to_string).collect();
    format!(
        "{} {}",
        if ids.len() == 1 { one } else { many },
        list.join(",")
    )
}

/// A VM's threads that float ([`floats`]).
#[derive(Debug, Default)]
pub struct LooseThreads {
    /// Its vCPUs that float.
    pub vcpus: Vec<u32>,
    /// Whether its emulator threads float.
    pub emulator: bool,
    /// Its I/O threads that float.
    pub iothreads: Vec<u32>,
}

impl LooseThreads {
    /// `t`'s threads that float on a host of `usable` CPUs.
    pub fn of(t: &Tenant, usable: &CpuSet) -> LooseThreads {
        LooseThreads {
            vcpus: t
                .vcpus
                .iter()
                .filter(|v| floats(&v.cpus, usable))
                .map(|v| v.vcpu)
                .collect(),
            emulator: floats(&t.emulator_cpus, usable),
            iothreads: t
                .iothreads
                .iter()
                .filter(|i| floats(&i.cpus, usable))
                .map(|i| i.iothread)
                .collect(),
        }
    }

    /// Whether its emulator or an I/O thread floats.
    pub fn helpers(&self) -> bool {
        self.emulator || !self.iothreads.is_empty()
    }

    /// Whether none floats.
    pub fn is_empty(&self) -> bool {
        self.vcpus.is_empty() && !self.helpers()
    }

    /// `vCPU 1, emulator and I/O threads 1,2`, and whether that is more
    /// than one thread.
    pub fn named(&self) -> (String, bool) {
        let mut parts = Vec::new();
        if !self.vcpus.is_empty() {
            parts.push(numbered("vCPU", "vCPUs", &self.vcpus));
        }
        if self.emulator {
            parts.push("emulator".to_owned());
        }
        if !self.iothreads.is_empty() {
            parts.push(numbered("I/O thread", "I/O threads", &self.iothreads));
        }
        let many = self.vcpus.len() + usize::from(self.emulator) + self.iothreads.len() > 1;
        (crate::text::and_list(&parts), many)
    }
}

/// Who a tenant is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantKind {
    /// The host's own CPUs.
    Host,
    /// A VM (libvirt domain).
    Vm,
}

/// Whether a tenant's threads exist now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TenantState {
    /// Running (the host; a running domain; a domain read from a file,
    /// which says what runs).
    #[default]
    Running,
    /// A defined domain that is not running: its CPUs are its saved
    /// config's pins, taken only when it starts.
    ShutOff,
}

/// One vCPU's allowed CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VcpuCpus {
    /// Guest vCPU.
    pub vcpu: u32,
    /// Host CPUs it may run on.
    pub cpus: CpuSet,
}

/// A domain's `<numatune><memory>`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct MemoryTune {
    /// `strict`, `preferred`, `interleave` or `restrictive`.
    pub mode: String,
    /// Host NUMA nodes, e.g. `0-1`.
    pub nodeset: String,
}

/// A running guest's memory resident on one NUMA node (its QEMU
/// process's pages, from `/proc/PID/numa_maps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct NodeResident {
    /// Host NUMA node.
    pub node: crate::ids::NodeId,
    /// KiB of the guest's QEMU process on it.
    pub kib: u64,
}

/// One I/O thread's allowed CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IothreadCpus {
    /// libvirt I/O thread id (1-based).
    pub iothread: u32,
    /// Host CPUs it may run on.
    pub cpus: CpuSet,
}

/// A tenant's current pinning.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tenant {
    /// Name (`host` for the host).
    pub name: String,
    /// Host or VM.
    pub kind: TenantKind,
    /// Running, or a shut-off domain (its config's pins).
    pub state: TenantState,
    /// Each vCPU's allowed CPUs (vcpupin, else `<vcpu cpuset>`, else every CPU).
    pub vcpus: Vec<VcpuCpus>,
    /// The CPUs its vCPUs may run on, together.
    pub cpus: CpuSet,
    /// emulatorpin (else the `<vcpu cpuset>`, else every CPU).
    pub emulator_cpus: CpuSet,
    /// Each I/O thread's CPUs (iothreadpin, else the `<vcpu cpuset>`, else
    /// every CPU).
    pub iothreads: Vec<IothreadCpus>,
    /// PCI addresses of its passed-through devices (`<hostdev>`,
    /// `<interface type='hostdev'>`), e.g. `0000:65:00.2`.
    pub nics: Vec<PciAddress>,
    /// Whether any pin keeps it off some usable CPU (a VM with no pinning, or
    /// pinned to every CPU, floats).
    pub pinned: bool,
    /// `<numatune><memory mode nodeset>`, when set.
    pub memory: Option<MemoryTune>,
    /// Where a running guest's memory is now, per node (read on the local
    /// host only; `null` otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_resident: Option<Vec<NodeResident>>,
}

impl Tenant {
    /// Every CPU its threads may run on: vCPUs, emulator and I/O threads.
    pub fn every_cpu(&self) -> CpuSet {
        self.iothreads
            .iter()
            .fold(self.cpus.union(&self.emulator_cpus), |all, t| {
                all.union(&t.cpus)
            })
    }
}

/// The host as a tenant of its own CPUs.
pub fn host_tenant(cpus: &CpuSet) -> Tenant {
    Tenant {
        name: "host".to_owned(),
        kind: TenantKind::Host,
        state: TenantState::Running,
        vcpus: Vec::new(),
        cpus: cpus.clone(),
        emulator_cpus: CpuSet::new(),
        iothreads: Vec::new(),
        nics: Vec::new(),
        pinned: true,
        memory: None,
        memory_resident: None,
    }
}

/// The host's own CPUs by the kernel command line: every usable CPU not in
/// `isolcpus=`; `None` without `isolcpus=`.
pub fn host_cpus_from_cmdline(
    cmdline: &crate::cmdline::KernelCmdline,
    host: &HostTopology,
) -> Result<Option<CpuSet>, crate::cmdline::CmdlineError> {
    let usable = host.usable_cpus();
    cmdline
        .cpu_list("isolcpus", &usable)
        .transpose()
        .map(|isolated| isolated.map(|i| usable.difference(&i)))
}

/// The tests' host: one package of 4 cores whose SMT siblings are N and
/// N+4, numbered like servers (not adjacent).
#[cfg(test)]
pub(crate) fn test_host() -> HostTopology {
    use crate::topology::{self, Source};
    topology::load(&Source::Synthetic(
        "package:1 core:4 pu:2(indexes=2*4:1*2)".into(),
    ))
    .unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::test_host as host;
    use super::*;

    /// A running domain's I/O thread pins are CPUs it takes too: a fleet
    /// host plans around all three kinds of thread.
    #[test]
    fn every_cpu_is_vcpus_emulator_and_io_threads() {
        let xml = "<domain type='kvm'><name>d</name><vcpu>1</vcpu><iothreads>2</iothreads>\
                   <cputune><vcpupin vcpu='0' cpuset='1'/><emulatorpin cpuset='2'/>\
                   <iothreadpin iothread='1' cpuset='3'/><iothreadpin iothread='2' cpuset='5'/>\
                   </cputune></domain>";
        let t = crate::libvirt::domain::tenant_from_domain("d.xml", xml, &host())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.every_cpu().to_string(), "1-3,5");
    }

    #[test]
    fn the_host_keeps_what_isolcpus_leaves() {
        use crate::cmdline::KernelCmdline;
        let h = host();
        let c = KernelCmdline::parse("ro isolcpus=managed_irq,domain,1-3,5-7");
        assert_eq!(
            host_cpus_from_cmdline(&c, &h).map(|s| s.map(|s| s.to_string())),
            Ok(Some("0,4".to_owned()))
        );
        assert_eq!(
            host_cpus_from_cmdline(&KernelCmdline::parse("ro"), &h),
            Ok(None)
        );
        assert!(host_cpus_from_cmdline(&KernelCmdline::parse("isolcpus=x"), &h).is_err());
    }
}
