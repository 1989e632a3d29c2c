//! What one side of the picture (now, or with the plan) says about each CPU:
//! the tenants on it (vCPUs, or only emulator and I/O threads) and the
//! conflicts outlined on it, worked out once from a report in [`Paint::new`]
//! for every drawing step.

use super::cast::Cast;
use super::layout::cell_width;
use super::palette::HOST_GREY;
use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::report::conflicts::{floating_threads, floats};
use crate::report::{ConflictKind, Report, Severity};
use crate::tenant::{Tenant, TenantState};
use crate::topology::HostTopology;
use std::collections::BTreeMap;

/// What sits on one CPU: a tenant's vCPUs, or only its emulator or I/O
/// threads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Occupant {
    pub(super) tenant: usize,
    pub(super) emulator_only: bool,
}

/// A VM's emulator and I/O threads, where they are pinned apart from
/// "anywhere" (`tenant_from_domain` gives an unpinned thread every usable
/// CPU: hatching the whole host with it would hide everything else).
#[derive(Debug, Clone, Default)]
pub(super) struct Helpers {
    pub(super) emulator: Option<CpuSet>,
    pub(super) iothreads: Vec<(u32, CpuSet)>,
}

impl Helpers {
    /// `t`'s emulator and I/O threads that are pinned, and not to every CPU
    /// in `usable`.
    pub(super) fn of(t: &Tenant, usable: &CpuSet) -> Helpers {
        let pinned = |cpus: &CpuSet| {
            t.pinned && t.state == TenantState::Running && !cpus.is_empty() && !floats(cpus, usable)
        };
        Helpers {
            emulator: Some(t.emulator_cpus.clone()).filter(pinned),
            iothreads: t
                .iothreads
                .iter()
                .filter(|io| pinned(&io.cpus))
                .map(|io| (io.iothread, io.cpus.clone()))
                .collect(),
        }
    }

    /// Each pinned thread with its CPUs: `emulator`, `iothread N`.
    pub(super) fn threads(&self) -> Vec<(String, &CpuSet)> {
        let mut out: Vec<(String, &CpuSet)> = Vec::new();
        if let Some(cpus) = &self.emulator {
            out.push(("emulator".to_owned(), cpus));
        }
        for (id, cpus) in &self.iothreads {
            out.push((format!("iothread {id}"), cpus));
        }
        out
    }

    /// Every CPU a pinned thread may run on.
    pub(super) fn cpus(&self) -> CpuSet {
        self.threads()
            .iter()
            .fold(CpuSet::new(), |acc, (_, cpus)| acc.union(cpus))
    }
}

/// Per CPU, per tenant (by index).
type PerTenant<T> = BTreeMap<CpuId, BTreeMap<usize, Vec<T>>>;

/// Everything a drawing step needs to know about tenants and conflicts.
pub(super) struct Paint<'a> {
    pub(super) host: &'a HostTopology,
    pub(super) report: &'a Report,
    /// Each tenant's index in the picture's cast, by index in
    /// `report.tenants`.
    pub(super) cast_index: Vec<usize>,
    /// Colour of each tenant, by index in `report.tenants`.
    pub(super) colours: Vec<&'static str>,
    /// Each tenant's pinned emulator and I/O threads.
    pub(super) helpers: Vec<Helpers>,
    /// Per CPU: who sits there, vCPU occupants first.
    pub(super) occupants: BTreeMap<CpuId, Vec<Occupant>>,
    /// Per CPU, per tenant: the vCPUs that may run there.
    pub(super) vcpus_on: PerTenant<u32>,
    /// Per CPU, per tenant: the emulator and I/O threads that may run there.
    pub(super) helpers_on: PerTenant<String>,
    /// Per CPU: the running VMs whose threads that are not pinned may run
    /// there (by index), with those threads named (`vCPU 1 and emulator`).
    pub(super) floating_on: BTreeMap<CpuId, Vec<(usize, String)>>,
    /// Per CPU: the conflicts drawn on it (by index), and the worst severity.
    pub(super) conflicts_on: BTreeMap<CpuId, Vec<usize>>,
    pub(super) worst: BTreeMap<CpuId, Severity>,
    /// Conflicts that cover every CPU (a `floating` warning): listed, not
    /// outlined.
    pub(super) everywhere: Vec<bool>,
    /// Width of a CPU cell.
    pub(super) cell_w: i64,
    /// What the ids of CPU cells start with (`cpu-N` after it).
    pub(super) id_prefix: &'static str,
}

impl<'a> Paint<'a> {
    /// Works out tenants' colours (from `cast`, which holds every tenant of
    /// `report`) and threads, occupants and conflict marks of every CPU of
    /// `host`; CPU cells get ids `{id_prefix}cpu-N`.
    pub(super) fn new(
        host: &'a HostTopology,
        report: &'a Report,
        cast: &Cast,
        id_prefix: &'static str,
    ) -> Paint<'a> {
        let usable = host.usable_cpus();
        let helpers: Vec<Helpers> = report
            .tenants
            .iter()
            .map(|t| Helpers::of(t, &usable))
            .collect();
        let (occupants, vcpus_on, helpers_on) = occupancy(&report.tenants, &helpers, &usable);
        let floating_on = floating_on(&report.tenants, &usable);
        let everywhere = everywhere(report);
        let (conflicts_on, worst) = conflict_marks(report, &everywhere);
        // Every tenant is in the cast; one that were not would take the
        // first member's pattern and the host's grey, never panic.
        let cast_index: Vec<usize> = report
            .tenants
            .iter()
            .map(|t| cast.index(t).unwrap_or(0))
            .collect();
        let colours = report
            .tenants
            .iter()
            .map(|t| {
                cast.index(t)
                    .and_then(|i| cast.members.get(i))
                    .map_or(HOST_GREY, |m| m.colour)
            })
            .collect();
        Paint {
            host,
            report,
            cast_index,
            colours,
            helpers,
            occupants,
            vcpus_on,
            helpers_on,
            floating_on,
            conflicts_on,
            worst,
            everywhere,
            cell_w: cell_width(host),
            id_prefix,
        }
    }

    /// The tenant that is cast member `member` on this side, with its
    /// pinned threads, if it is on this side.
    pub(super) fn tenant(&self, member: usize) -> Option<(&'a Tenant, &Helpers)> {
        let i = self.cast_index.iter().position(|c| *c == member)?;
        Some((self.report.tenants.get(i)?, self.helpers.get(i)?))
    }

    /// Whether conflict `i` covers every CPU, so it is listed, not outlined.
    pub(super) fn unoutlined(&self, i: usize) -> bool {
        self.everywhere.get(i).copied().unwrap_or(false)
    }

    /// The running VMs (by index) whose threads that float may run on
    /// `cpu`, with those threads named, except those with pinned threads
    /// there already.
    pub(super) fn floating_here(&self, cpu: CpuId) -> Vec<&(usize, String)> {
        let occupants = self.occupants.get(&cpu).map_or(&[][..], Vec::as_slice);
        self.floating_on
            .get(&cpu)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter(|(i, _)| !occupants.iter().any(|o| o.tenant == *i))
            .collect()
    }

    /// How many conflicts are errors (the others are warnings).
    pub(super) fn errors(&self) -> usize {
        self.report
            .conflicts
            .iter()
            .filter(|c| c.severity == Severity::Error)
            .count()
    }
}

/// Who sits on each CPU (vCPU occupants first, then emulator-only ones, each
/// in tenant order), and which of each pinned tenant's pinned vCPUs and
/// helper threads may run there. Unpinned tenants, shut-off domains and
/// vCPUs that float sit nowhere ([`floating_on`] draws where they may run).
fn occupancy(
    tenants: &[Tenant],
    helpers: &[Helpers],
    usable: &CpuSet,
) -> (
    BTreeMap<CpuId, Vec<Occupant>>,
    PerTenant<u32>,
    PerTenant<String>,
) {
    let mut occupants: BTreeMap<CpuId, Vec<Occupant>> = BTreeMap::new();
    let mut vcpus_on = PerTenant::new();
    let mut helpers_on = PerTenant::new();
    for (i, (t, h)) in tenants.iter().zip(helpers).enumerate() {
        if !t.pinned || t.state != TenantState::Running {
            continue;
        }
        let held: Vec<_> = t
            .vcpus
            .iter()
            .filter(|v| !floats(&v.cpus, usable))
            .collect();
        // The host, and a plan's fixed tenants, have CPUs but no vCPUs.
        let cpus = if t.vcpus.is_empty() {
            t.cpus.clone()
        } else {
            held.iter().fold(CpuSet::new(), |a, v| a.union(&v.cpus))
        };
        let helpers_only = h.cpus().difference(&cpus);
        for (cpus, emulator_only) in [(&cpus, false), (&helpers_only, true)] {
            for cpu in cpus.iter() {
                occupants.entry(cpu).or_default().push(Occupant {
                    tenant: i,
                    emulator_only,
                });
            }
        }
        for (thread, cpus) in h.threads() {
            note(&mut helpers_on, cpus, i, || thread.clone());
        }
        for v in held {
            note(&mut vcpus_on, &v.cpus, i, || v.vcpu);
        }
    }
    for list in occupants.values_mut() {
        list.sort_by_key(|o| (o.emulator_only, o.tenant));
    }
    (occupants, vcpus_on, helpers_on)
}

/// Per usable CPU, the running VMs with threads that float (every one of
/// them may run on it), in tenant order, each with those threads named.
fn floating_on(tenants: &[Tenant], usable: &CpuSet) -> BTreeMap<CpuId, Vec<(usize, String)>> {
    let mut out: BTreeMap<CpuId, Vec<(usize, String)>> = BTreeMap::new();
    for (i, t) in tenants.iter().enumerate() {
        if let Some(threads) = floating_threads(t, usable) {
            for cpu in usable.iter() {
                out.entry(cpu).or_default().push((i, threads.clone()));
            }
        }
    }
    out
}

/// Notes `what` of tenant `i` on each of `cpus`.
fn note<T>(on: &mut PerTenant<T>, cpus: &CpuSet, i: usize, what: impl Fn() -> T) {
    for cpu in cpus.iter() {
        on.entry(cpu)
            .or_default()
            .entry(i)
            .or_default()
            .push(what());
    }
}

/// Per conflict, whether it covers every CPU (a `floating` warning: threads
/// that may run anywhere, over no one's CPUs), so that it is listed but not
/// outlined.
fn everywhere(report: &Report) -> Vec<bool> {
    report
        .conflicts
        .iter()
        .map(|c| c.kind == ConflictKind::Floating && c.severity == Severity::Warning)
        .collect()
}

/// Per CPU, the conflicts outlined on it (by index, none of those that are
/// `everywhere`) and the worst severity among them.
fn conflict_marks(
    report: &Report,
    everywhere: &[bool],
) -> (BTreeMap<CpuId, Vec<usize>>, BTreeMap<CpuId, Severity>) {
    let mut conflicts_on: BTreeMap<CpuId, Vec<usize>> = BTreeMap::new();
    let mut worst: BTreeMap<CpuId, Severity> = BTreeMap::new();
    for (i, c) in report.conflicts.iter().enumerate() {
        if everywhere.get(i).copied().unwrap_or(false) {
            continue;
        }
        for cpu in c.cpus.iter() {
            conflicts_on.entry(cpu).or_default().push(i);
            let w = worst.entry(cpu).or_insert(c.severity);
            // Error sorts before Warning.
            *w = (*w).min(c.severity);
        }
    }
    (conflicts_on, worst)
}
