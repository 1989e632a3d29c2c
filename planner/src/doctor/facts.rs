//! What a fleet plan needs to know of a host before it sends a VM there,
//! read from the same tree `doctor` reads (a captured one, or `/`): whether
//! a passed-through NIC can be handed to VFIO (the device exists, an SR-IOV
//! PF has VFs, and one of them — or the device itself — sits in a viable
//! IOMMU group), and whether real-time vCPUs can run (the `realtime`
//! check's failure: RT group scheduling without runtime for libvirt).
//! A host reached only through its libvirt URI gives the same NIC facts from
//! its node devices ([`host_facts_libvirt`]); its real-time settings are not
//! visible that way.

use super::sysfs::PciTree as _;
use super::vfio::{passthrough, Refusal};
use super::DoctorError;
use crate::host::fs::Fs;
use crate::libvirt::NodeDevices;
use crate::topology::PciAddress;
use std::collections::BTreeMap;
use std::path::Path;

/// A host's facts for the fleet: per NIC, `Ok` or why not; real-time too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// Per NIC asked about: whether a VM can be given it here.
    pub nics: BTreeMap<PciAddress, Result<(), Refusal>>,
    /// Whether real-time (FIFO) vCPUs can start here; `None` when unknown
    /// (read through libvirt, which does not show the kernel's settings).
    pub realtime: Option<Result<(), RtThrottled>>,
}

/// The facts of the tree at `root` for `nics`.
pub fn host_facts(root: &Path, nics: &[PciAddress]) -> Result<HostFacts, DoctorError> {
    let fs = Fs::open(root)?;
    let functions = fs.pci_functions();
    let members = |group| fs.iommu_group_members(group, &functions);
    let nics = nics
        .iter()
        .map(|&nic| (nic, passthrough(&functions, &members, nic)))
        .collect();
    Ok(HostFacts {
        nics,
        realtime: Some(realtime(&fs)),
    })
}

/// The NIC facts of a host reached through its URI, from its node devices
/// (`virsh nodedev-dumpxml`: bound drivers, IOMMU groups, SR-IOV).
pub fn host_facts_libvirt(devices: &NodeDevices, nics: &[PciAddress]) -> HostFacts {
    let described = super::nodedev::pci_functions(devices);
    let members = |group| super::nodedev::group_members(&described.groups, group);
    HostFacts {
        nics: nics
            .iter()
            .map(|&nic| {
                let facts = passthrough(&described.functions, &members, nic);
                (nic, facts)
            })
            .collect(),
        realtime: None,
    }
}

/// Real-time vCPUs cannot start: RT group scheduling with a runtime other
/// than -1 (libvirt's cgroups then get none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel.sched_rt_runtime_us = {runtime_us} with RT group scheduling: real-time vCPUs cannot start")]
pub struct RtThrottled {
    /// `kernel.sched_rt_runtime_us`.
    pub runtime_us: i64,
}

/// Whether FIFO vCPUs can start: not with RT group scheduling and a
/// runtime other than -1 (libvirt's cgroups then get none).
fn realtime(fs: &Fs) -> Result<(), RtThrottled> {
    match super::cpu::rt_runtime(fs) {
        (Some(us), true) if us != -1 => Err(RtThrottled { runtime_us: us }),
        _ => Ok(()),
    }
}
