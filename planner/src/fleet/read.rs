//! Reading a fleet's hosts: each host's topology (a captured file, or
//! through its libvirt URI with the domains running there) and `doctor`'s
//! facts from its `doctor_root` (or, without one, the NIC facts from its
//! node devices through its URI), several hosts at a time, each within a
//! time limit.

use super::HostInput;
use crate::doctor::DoctorError;
use crate::error::LibvirtError;
use crate::libvirt::domain::DomainError;
use crate::spec::FleetSpec;
use crate::topology::{self, PciAddress, Source, TopologyError};
use std::time::Duration;

/// Why a host of the fleet could not be read (its line in the fleet plan
/// says it; the other hosts are planned without it).
#[derive(Debug, thiserror::Error)]
pub enum HostReadError {
    /// It did not answer in time.
    #[error("no answer within {seconds:.0} s")]
    Timeout {
        /// The time limit, in seconds.
        seconds: f64,
    },
    /// Its topology could not be read.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// Its domains could not be listed through its URI.
    #[error(transparent)]
    Libvirt(#[from] LibvirtError),
    /// A domain running there could not be read.
    #[error(transparent)]
    Domain(#[from] DomainError),
}

/// Why `doctor`'s facts of a host could not be read: its VMs with a NIC
/// or real-time vCPUs cannot go there.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    /// Its `doctor_root` could not be read.
    #[error("its doctor_root could not be read: {0}")]
    Root(#[source] DoctorError),
    /// Its node devices could not be read through libvirt. (The message
    /// says the cause whole, its hint too, as the host's refusals have
    /// always said it.)
    #[error("its PCI devices could not be read through libvirt ({}), so no NIC can be checked for VFIO there: give it a doctor_root", crate::error::one_line(.0))]
    Devices(LibvirtError),
}

/// Reads every host of `spec`, `concurrency` at a time, each within
/// `timeout`; `done(k, n)` is told after each. A host that fails or takes
/// too long is an `Err` naming why; the others are read regardless.
pub fn read_hosts(
    spec: &FleetSpec,
    concurrency: usize,
    timeout: Duration,
    done: &(dyn Fn(usize, usize) + Sync),
) -> Vec<Result<HostInput, HostReadError>> {
    // Only VMs with a NIC ask anything of a host's facts: found once, not
    // once per host.
    let with_nics: Vec<&crate::spec::FleetVm> = spec
        .vms
        .iter()
        .filter(|v| !v.nics.is_empty() || !v.nic_names.is_empty())
        .collect();
    super::pool::each(
        spec.hosts.len(),
        concurrency,
        |h| {
            let host = &spec.hosts[h];
            // The NICs its VMs would pass through there.
            let mut nics: Vec<PciAddress> = with_nics
                .iter()
                .filter_map(|v| spec.nics_on(v, host).ok())
                .flatten()
                .collect();
            nics.sort();
            nics.dedup();
            let source = host.source.clone();
            let connect = host.connect.clone();
            let root = host.doctor_root.clone();
            super::pool::within(timeout, move || {
                read_one(&source, connect.as_deref(), root.as_deref(), &nics)
            })
            .unwrap_or(Err(HostReadError::Timeout {
                seconds: timeout.as_secs_f64(),
            }))
        },
        done,
    )
}

/// One host: its topology, the domains running there (through a
/// connection), and its facts.
fn read_one(
    source: &Source,
    connect: Option<&str>,
    doctor_root: Option<&std::path::Path>,
    nics: &[PciAddress],
) -> Result<HostInput, HostReadError> {
    // A host read through its own URI gives its node devices on the same
    // connection.
    let (topology, devices) = match (source, connect) {
        (Source::Libvirt(uri), Some(c))
            if uri == c && doctor_root.is_none() && !nics.is_empty() =>
        {
            let (topology, devices) = topology::load_libvirt(uri)?;
            (topology, Some(devices))
        }
        _ => (topology::load(source)?, None),
    };
    let mut running = Vec::new();
    if let Some(uri) = connect {
        let domains = crate::libvirt::all_domain_xml(uri)?;
        for (name, xml, active) in domains {
            if !active {
                continue;
            }
            let tenant = crate::libvirt::domain::tenant_from_domain(
                &format!("{uri} domain {name}"),
                &xml,
                &topology,
            )?;
            running.push(tenant);
        }
    }
    // doctor's facts from its tree; else, for a host reached through its
    // URI with VMs that want a NIC, from its node devices.
    let facts = match (doctor_root, connect) {
        (Some(root), _) => Some(crate::doctor::host_facts(root, nics).map_err(FactsError::Root)),
        (None, Some(uri)) if !nics.is_empty() => {
            let devices = devices.unwrap_or_else(|| crate::libvirt::node_devices(uri));
            Some(
                devices
                    .map(|d| crate::doctor::host_facts_libvirt(&d, nics))
                    .map_err(FactsError::Devices),
            )
        }
        _ => None,
    };
    Ok(HostInput {
        topology,
        running,
        facts,
    })
}
