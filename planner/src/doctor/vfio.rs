//! Whether VFIO can take a device: which other endpoints of its IOMMU group
//! stand in the way, and whether a NIC (or one of its SR-IOV VFs) can be
//! passed through — the rule both `vfio-group-viable` and a fleet plan's
//! host facts apply.

use super::sysfs::PciFunction;
use crate::topology::PciAddress;
use std::collections::BTreeMap;
use std::fmt;

/// A driver VFIO can own a device through (`vfio-pci` and its vendor
/// variants such as `mlx5_vfio_pci`).
pub(super) fn is_vfio(driver: &str) -> bool {
    driver == "vfio-pci" || driver.ends_with("vfio-pci") || driver.ends_with("vfio_pci")
}

/// The other endpoints of IOMMU group `group` than `device` (bridges do not
/// count): how many VFIO may take with it (on vfio-pci or pci-stub, or
/// unbound), and those it may not, with their drivers.
pub(super) fn group_members(
    members: &[PciAddress],
    functions: &BTreeMap<PciAddress, PciFunction>,
    device: PciAddress,
) -> (usize, Vec<(PciAddress, String)>) {
    let mut fine = 0usize;
    let mut offending = Vec::new();
    for &member in members {
        let Some(other) = functions.get(&member) else {
            continue;
        };
        if member == device || other.is_bridge() {
            continue;
        }
        match other.driver.as_deref() {
            Some(d) if !is_vfio(d) && d != "pci-stub" => offending.push((member, d.to_owned())),
            _ => fine += 1,
        }
    }
    (fine, offending)
}

/// Why a NIC cannot be passed through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The host has no such PCI device.
    #[error("no PCI device {nic} on this host")]
    NoDevice {
        /// The NIC asked for.
        nic: PciAddress,
    },
    /// An SR-IOV PF with no VF enabled.
    #[error("{nic} has no SR-IOV VFs enabled ({enabled} of {total}): echo N > /sys/bus/pci/devices/{nic}/sriov_numvfs")]
    NoVfs {
        /// The PF.
        nic: PciAddress,
        /// VFs enabled.
        enabled: u32,
        /// VFs it supports.
        total: u32,
    },
    /// No candidate (the device, or its VFs) sits in a viable group.
    #[error("vfio: {}: {}; QEMU would refuse to start the VM (\"group is not viable\")", what(*nic, *of_vfs), join(problems))]
    NotViable {
        /// The NIC asked for.
        nic: PciAddress,
        /// Whether the candidates were its VFs.
        of_vfs: bool,
        /// Why each candidate cannot be taken.
        problems: Vec<GroupProblem>,
    },
}

/// Why one candidate's IOMMU group cannot be taken whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupProblem {
    /// The IOMMU is off.
    NoGroup(PciAddress),
    /// Other endpoints of its group are bound to other drivers.
    Bound {
        /// The candidate.
        address: PciAddress,
        /// Its group.
        group: u32,
        /// The endpoints in the way, with their drivers.
        offending: Vec<(PciAddress, String)>,
    },
}

impl fmt::Display for GroupProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupProblem::NoGroup(address) => {
                write!(f, "{address} has no IOMMU group (the IOMMU is off)")
            }
            GroupProblem::Bound {
                address,
                group,
                offending,
            } => {
                let bound: Vec<String> = offending
                    .iter()
                    .map(|(a, d)| format!("{a} is bound to {d}"))
                    .collect();
                write!(
                    f,
                    "{address}'s IOMMU group {group} is not viable ({})",
                    bound.join(", ")
                )
            }
        }
    }
}

fn what(nic: PciAddress, of_vfs: bool) -> String {
    if of_vfs {
        format!("no VF of {nic} can be passed through")
    } else {
        format!("{nic} cannot be passed through")
    }
}

fn join(problems: &[GroupProblem]) -> String {
    let texts: Vec<String> = problems.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

/// Whether `nic` (or one of its VFs) can be passed through: `members`
/// gives an IOMMU group's endpoints.
pub(crate) fn passthrough(
    functions: &BTreeMap<PciAddress, PciFunction>,
    members: &dyn Fn(u32) -> Vec<PciAddress>,
    nic: PciAddress,
) -> Result<(), Refusal> {
    let Some(device) = functions.get(&nic) else {
        return Err(Refusal::NoDevice { nic });
    };
    let vfs: Vec<&PciFunction> = functions
        .values()
        .filter(|f| f.physfn == Some(nic))
        .collect();
    let candidates: Vec<&PciFunction> = match (device.sriov_totalvfs, device.sriov_numvfs) {
        (Some(total), numvfs) if total > 0 && vfs.is_empty() => {
            return Err(Refusal::NoVfs {
                nic,
                enabled: numvfs.unwrap_or(0),
                total,
            });
        }
        _ if !vfs.is_empty() => vfs,
        _ => vec![device],
    };
    let mut problems = Vec::new();
    for candidate in &candidates {
        let Some(group) = candidate.iommu_group else {
            problems.push(GroupProblem::NoGroup(candidate.address));
            continue;
        };
        let (_, offending) = group_members(&members(group), functions, candidate.address);
        if offending.is_empty() {
            return Ok(());
        }
        problems.push(GroupProblem::Bound {
            address: candidate.address,
            group,
            offending,
        });
    }
    Err(Refusal::NotViable {
        nic,
        of_vfs: candidates.iter().any(|c| c.address != nic),
        problems,
    })
}
