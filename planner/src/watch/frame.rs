//! What every decision of the watcher stands on, the same until SIGHUP:
//! the host's URI, the spec, the topology, the reserved CPUs and the
//! settings. The event loop and the thread that answers the admission hook
//! share one [`Frame`] (an `Arc`), so the rules of who holds which core
//! live here once, for both. Nothing here calls libvirt.

use super::decide::{plan_on, Moment, On, Snapshot};
use super::WatchError;
use crate::cpuset::CpuSet;
use crate::ids::CoreId;
use crate::plan::Plan;
use crate::spec::{DomainRequest, Spec};
use crate::tenant::TenantState;
use crate::topology::HostTopology;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The watcher's settled ground: read at its start and on SIGHUP.
pub(super) struct Frame {
    /// The host's libvirt URI.
    pub(super) uri: String,
    /// The spec (or the empty one of [`Spec::without_file`]).
    pub(super) spec: Spec,
    /// The host's topology.
    pub(super) host: HostTopology,
    /// The host's reserved CPUs: emulator threads of many VMs may share them.
    pub(super) reserved: CpuSet,
    /// Decide and say, change nothing.
    pub(super) dry_run: bool,
    /// With `dry_run`: answer the hook as without it (the bench).
    pub(super) refuse_in_dry_run: bool,
    /// Each solve's time limit.
    pub(super) time_limit: Duration,
}

impl Frame {
    /// A domain's request is valid as the frame's spec reads it (its
    /// tables and `[defaults]`); a domain the spec's `[[vm]]` names is the
    /// spec's, whatever its metadata says.
    pub(super) fn check_request(&self, r: &DomainRequest) -> Result<(), crate::spec::SpecError> {
        if self.spec.names(&r.domain) {
            return Ok(());
        }
        self.spec.with_domains(std::slice::from_ref(r)).map(|_| ())
    }

    /// Whether `domain` is pinplan's to place: a valid request, or a
    /// `[[vm]]` of the spec.
    pub(super) fn ours(&self, snap: &Snapshot, domain: &str) -> bool {
        snap.requests.iter().any(|r| r.domain == domain) || self.spec.names(domain)
    }

    /// The plan for `domain` at `moment` ([`plan_on`]), with the domain's
    /// XML given for its memory (`None`: none). No libvirt call.
    pub(super) fn plan_with(
        &self,
        snap: &Snapshot,
        domain: &str,
        moment: Moment,
        xml: Option<String>,
    ) -> Result<Plan, WatchError> {
        let mut defined = BTreeMap::new();
        if let Some(xml) = xml {
            defined.insert(
                domain.to_owned(),
                (format!("{} domain {domain}", self.uri), xml),
            );
        }
        plan_on(&self.on(snap), domain, moment, &defined)
    }

    /// What a plan is made on: this frame's spec and host, as `snap` read it.
    pub(super) fn on<'a>(&'a self, snap: &'a Snapshot) -> On<'a> {
        On {
            spec: &self.spec,
            requests: &snap.requests,
            tenants: &snap.tenants,
            host: &self.host,
            uri: &self.uri,
            limit: self.time_limit,
        }
    }

    /// The cores each running tenant other than `domain` holds.
    pub(super) fn held_cores(&self, snap: &Snapshot, domain: &str) -> BTreeMap<CoreId, String> {
        let mut held = BTreeMap::new();
        for t in snap
            .tenants
            .iter()
            .filter(|t| t.state == TenantState::Running && t.name != domain)
        {
            for core in self.held_by(t) {
                held.entry(core).or_insert_with(|| t.name.clone());
            }
        }
        held
    }

    /// The cores a tenant holds: its vCPUs' and I/O threads' wherever they
    /// are, its emulator's but on the host's reserved CPUs (where the
    /// emulator threads of many VMs are meant to be together).
    pub(super) fn held_by(&self, t: &crate::tenant::Tenant) -> BTreeSet<CoreId> {
        let emulator = t.emulator_cpus.difference(&self.reserved);
        self.cores(&vcpu_and_io_cpus(t).union(&emulator))
    }

    /// The cores `cpus` touch.
    pub(super) fn cores(&self, cpus: &CpuSet) -> BTreeSet<CoreId> {
        cpus.iter()
            .filter_map(|c| self.host.pu(c).and_then(|p| p.core))
            .collect()
    }

    /// The first core `t` would hold that another running tenant holds,
    /// and its name.
    /// A domain pinplan places (`ours`) also clashes with the host when its
    /// vCPUs or I/O threads touch the host's reserved CPUs (only emulators
    /// may join the host there); a domain that is not pinplan's is never
    /// moved, and is refused only where it meets another tenant.
    pub(super) fn clash(
        &self,
        snap: &Snapshot,
        t: &crate::tenant::Tenant,
        ours: bool,
    ) -> Option<(CoreId, String)> {
        let held = self.held_cores(snap, &t.name);
        let tenant = self
            .held_by(t)
            .into_iter()
            .find_map(|c| held.get(&c).map(|n| (c, n.clone())));
        let on_host = vcpu_and_io_cpus(t).intersection(&self.reserved);
        let host = self.cores(&on_host).into_iter().next().filter(|_| ours);
        tenant.or_else(|| host.map(|core| (core, HOST.to_owned())))
    }
}

/// Who holds the host's reserved CPUs, in a clash.
pub(super) const HOST: &str = "the host";

/// The CPUs a tenant's vCPUs and I/O threads may run on (not its emulator's).
pub(super) fn vcpu_and_io_cpus(t: &crate::tenant::Tenant) -> CpuSet {
    t.iothreads
        .iter()
        .fold(t.cpus.clone(), |all, io| all.union(&io.cpus))
}
