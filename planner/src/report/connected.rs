//! The report of a host read through a libvirt URI, as `report --connect
//! URI` and `report --fleet` make it: the topology and every domain through
//! the connection, checked against a plan when given, with the pins that
//! wait for a restart and, on this machine's system libvirtd, the stray
//! threads and IRQs on VM CPUs.

use super::Report;
use crate::cpuset::CpuSet;
use crate::libvirt::tenants::{self, Domains, TenantsError};
use crate::plan::{Plan, PlanError};
use crate::topology::{self, HostTopology, Source, TopologyError};
use std::path::Path;

crate::error::transparent_error! {
    /// Why a connected host could not be reported on.
    pub enum ConnectedError {
        /// Its topology could not be read.
        Topology(TopologyError),
        /// The plan is another host's.
        Plan(PlanError),
        /// Its domains could not be read.
        Tenants(TenantsError),
        /// A domain is pinned to CPUs the host does not have.
        Pins(Box<super::ForeignPins>),
    }
}

/// What the report of a connected host is asked for.
pub struct Connected<'a> {
    /// The libvirt URI.
    pub uri: &'a str,
    /// A plan to compare with, and its file.
    pub plan: Option<(&'a Path, &'a Plan)>,
    /// Compare with a plan made for another topology anyway.
    pub force: bool,
    /// The host's own CPUs, when given.
    pub host_cpus: Option<&'a CpuSet>,
    /// How many stray threads to list (this machine's system libvirtd).
    pub top: usize,
}

/// The host's topology and its report.
pub fn report(asked: &Connected<'_>) -> Result<(HostTopology, Report), ConnectedError> {
    let host = topology::load(&Source::Libvirt(asked.uri.to_owned()))?;
    if let Some((path, plan)) = asked.plan {
        plan.check_host(path, &host, asked.force)?;
    }
    let plan = asked.plan.map(|(_, p)| p);
    let live = crate::libvirt::is_local_uri(asked.uri);
    let host_cpus = tenants::host_cpus(&host, asked.host_cpus, plan, live)?;
    let tenants = tenants::tenants(&host, host_cpus.as_ref(), Domains::Connect(asked.uri))?;
    super::check_pins(&host, &tenants)?;
    let mut result = Report::new(&host, tenants, plan);
    result
        .notes
        .extend(tenants::pending_pins(asked.uri, &host)?);
    if crate::libvirt::is_local_system_uri(asked.uri) {
        result.add_live_host(&host, Path::new("/"), asked.top);
    }
    Ok((host, result))
}
