//! Conflicts of sharing: a VM that floats over others, a shut-off domain
//! that would land on a running tenant, two tenants on one CPU or core, a
//! VM over the host's CPUs, emulator threads on another VM's cores.

use super::{core_of, on_cores, reached, Conflict, ConflictKind, Owner, Severity};
use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId};
use crate::tenant::{floats, numbered, LooseThreads, Tenant, TenantKind, TenantState};
use crate::topology::HostTopology;
use std::collections::{BTreeMap, BTreeSet};

/// A running VM's threads that float, named (`vCPU 1 and emulator`), if
/// any: the host map and the picture draw it on every CPU where they may run.
pub(crate) fn floating_threads(t: &Tenant, usable: &CpuSet) -> Option<String> {
    let loose = LooseThreads::of(t, usable);
    (t.kind == TenantKind::Vm
        && t.state == TenantState::Running
        && (!loose.vcpus.is_empty() || loose.helpers()))
    .then(|| loose.named().0)
}

/// A pinned VM's vCPUs that float (they may run on every usable CPU) count
/// in no conflict but their VM's one `floating` finding, so that a
/// half-pinned VM is not a pile of derived cpu-shared/core-shared/
/// host-overlap errors against everyone: the tenants come back with those
/// vCPUs left out of their CPUs.
pub(super) fn without_floating_vcpus(tenants: &[Tenant], usable: &CpuSet) -> Vec<Tenant> {
    tenants
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if t.kind == TenantKind::Vm
                && t.pinned
                && t.vcpus.iter().any(|v| floats(&v.cpus, usable))
            {
                t.cpus = t
                    .vcpus
                    .iter()
                    .filter(|v| !floats(&v.cpus, usable))
                    .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus));
            }
            t
        })
        .collect()
}

/// One finding per running VM with threads that float (not pinned at all,
/// or some vCPUs, its emulator or I/O threads not pinned). An error when
/// they may run on what another running tenant holds, a physical core
/// being the unit: its floating vCPUs on a pinned VM's vCPUs or on the
/// host's CPUs, its floating emulator and I/O threads on a pinned VM's
/// vCPUs (the host's CPUs are where those belong). Otherwise a warning
/// when vCPUs float (nothing is pinned where they may go, yet), nothing
/// when only its emulator or I/O threads do.
pub(super) fn floating(
    host: &HostTopology,
    running: &[Tenant],
    owners: &[Owner<'_>],
    usable: &CpuSet,
) -> Vec<Conflict> {
    let mut out = Vec::new();
    for t in running.iter().filter(|t| t.kind == TenantKind::Vm) {
        let loose = LooseThreads::of(t, usable);
        let reaches: Vec<&Owner<'_>> = owners
            .iter()
            .filter(|o| !o.is(t))
            .filter(|o| {
                !loose.vcpus.is_empty() || (loose.helpers() && o.tenant.kind == TenantKind::Vm)
            })
            .collect();
        let cpus = reaches
            .iter()
            .fold(CpuSet::new(), |acc, o| acc.union(&on_cores(host, &o.cpus)))
            .intersection(usable);
        if !cpus.is_empty() {
            let mut tenants = vec![t.name.clone()];
            tenants.extend(reaches.iter().map(|o| o.tenant.name.clone()));
            let message = if t.pinned {
                let (threads, many) = loose.named();
                format!(
                    "{}'s {threads} {} not pinned: {} can run on {}; pin {} (pinplan plan \
                     --connect, then apply)",
                    t.name,
                    if many { "are" } else { "is" },
                    if many { "they" } else { "it" },
                    reached(&cpus, &reaches),
                    if many { "them" } else { "it" },
                )
            } else {
                format!(
                    "{} is not pinned: it can run on {}; pin it (pinplan plan --connect, then \
                     apply) or stop it",
                    t.name,
                    reached(&cpus, &reaches)
                )
            };
            out.push(Conflict {
                kind: ConflictKind::Floating,
                severity: Severity::Error,
                tenants,
                cpus,
                message,
            });
        } else if !t.pinned {
            out.push(Conflict {
                kind: ConflictKind::Floating,
                severity: Severity::Warning,
                tenants: vec![t.name.clone()],
                cpus: t.cpus.clone(),
                message: format!(
                    "{} is not pinned: its vCPUs can run on any CPU, next to anyone",
                    t.name
                ),
            });
        } else if !loose.vcpus.is_empty() {
            let many = loose.vcpus.len() > 1;
            out.push(Conflict {
                kind: ConflictKind::Floating,
                severity: Severity::Warning,
                tenants: vec![t.name.clone()],
                cpus: usable.clone(),
                message: format!(
                    "{}'s {} {} not pinned: {} can run on any CPU, next to anyone",
                    t.name,
                    numbered("vCPU", "vCPUs", &loose.vcpus),
                    if many { "are" } else { "is" },
                    if many { "they" } else { "it" },
                ),
            });
        }
    }
    out
}

/// Shut-off domains whose config would put their vCPUs on what a running
/// tenant holds (a physical core being the unit) when they start: a
/// warning each, naming them as shut off. Shut-off domains are in no other
/// finding: nothing of theirs runs now.
pub(super) fn shut_off_overlap(
    host: &HostTopology,
    tenants: &[Tenant],
    owners: &[Owner<'_>],
    usable: &CpuSet,
) -> Vec<Conflict> {
    let mut out = Vec::new();
    for t in tenants
        .iter()
        .filter(|t| t.kind == TenantKind::Vm && t.state == TenantState::ShutOff)
    {
        let config = t.cpus.intersection(usable);
        let overlaps: Vec<(&Owner<'_>, CpuSet)> = owners
            .iter()
            .map(|o| (o, config.intersection(&on_cores(host, &o.cpus))))
            .filter(|(_, on)| !on.is_empty())
            .collect();
        if overlaps.is_empty() {
            continue;
        }
        let cpus = overlaps
            .iter()
            .fold(CpuSet::new(), |acc, (_, on)| acc.union(on));
        let reaches: Vec<&Owner<'_>> = overlaps.iter().map(|(o, _)| *o).collect();
        let loose = LooseThreads::of(t, usable);
        let message = if !t.pinned {
            format!(
                "{} (shut off) is not pinned in its config: when it starts it can run on {}",
                t.name,
                reached(&cpus, &reaches)
            )
        } else if !loose.vcpus.is_empty() {
            format!(
                "{} (shut off) has {} not pinned in its config: when it starts it can run on {}",
                t.name,
                numbered("vCPU", "vCPUs", &loose.vcpus),
                reached(&cpus, &reaches)
            )
        } else {
            let cores = host.whole_cores(&cpus).len();
            format!(
                "{} (shut off) is pinned in its config onto {}: they would share {} when {} \
                 starts",
                t.name,
                reached(&cpus, &reaches),
                if cores > 1 {
                    format!("{cores} cores")
                } else {
                    "a core".to_owned()
                },
                t.name
            )
        };
        let mut names = vec![t.name.clone()];
        names.extend(reaches.iter().map(|o| o.tenant.name.clone()));
        out.push(Conflict {
            kind: ConflictKind::ShutOffOverlap,
            severity: Severity::Warning,
            tenants: names,
            cpus,
            message,
        });
    }
    out
}

/// Pairs of pinned tenants on the same CPUs (`cpu-shared`, or
/// `host-overlap` with the host) or on SMT siblings (`core-shared`).
pub(super) fn shared(host: &HostTopology, tenants: &[Tenant]) -> Vec<Conflict> {
    let mut out = Vec::new();
    let core = core_of(host);
    let pinned: Vec<&Tenant> = tenants.iter().filter(|t| t.pinned).collect();
    for (i, a) in pinned.iter().enumerate() {
        for b in pinned.iter().skip(i + 1) {
            let names = vec![a.name.clone(), b.name.clone()];
            let shared = a.cpus.intersection(&b.cpus);
            let host_pair = a.kind == TenantKind::Host || b.kind == TenantKind::Host;
            if !shared.is_empty() {
                let (kind, message) = if host_pair {
                    let vm = if a.kind == TenantKind::Host {
                        &b.name
                    } else {
                        &a.name
                    };
                    (
                        ConflictKind::HostOverlap,
                        format!("{vm} runs vCPUs on the host's CPUs {shared}"),
                    )
                } else {
                    (
                        ConflictKind::CpuShared,
                        format!(
                            "{} and {} have vCPUs on the same CPUs {shared}",
                            a.name, b.name
                        ),
                    )
                };
                out.push(Conflict {
                    kind,
                    severity: Severity::Error,
                    tenants: names.clone(),
                    cpus: shared.clone(),
                    message,
                });
            }
            // Siblings: different CPUs of one physical core.
            let cores_a: BTreeMap<CoreId, CpuSet> = group_by_core(&a.cpus, &core);
            let cores_b: BTreeMap<CoreId, CpuSet> = group_by_core(&b.cpus, &core);
            let mut sibling_cpus = CpuSet::new();
            let mut sibling_cores = BTreeSet::new();
            for (c, ca) in &cores_a {
                if let Some(cb) = cores_b.get(c) {
                    let only_a = ca.difference(cb);
                    let only_b = cb.difference(ca);
                    if !only_a.is_empty() || !only_b.is_empty() {
                        sibling_cpus = sibling_cpus.union(&ca.union(cb));
                        sibling_cores.insert(*c);
                    }
                }
            }
            if !sibling_cores.is_empty() {
                let cores: Vec<String> = sibling_cores.iter().map(|c| c.to_string()).collect();
                out.push(Conflict {
                    kind: ConflictKind::CoreShared,
                    severity: Severity::Error,
                    tenants: names,
                    cpus: sibling_cpus.clone(),
                    message: format!(
                        "{} and {} run on SMT siblings of core{} {} (CPUs {sibling_cpus}): noisy neighbours",
                        a.name,
                        b.name,
                        if cores.len() == 1 { "" } else { "s" },
                        cores.join(",")
                    ),
                });
            }
        }
    }
    out
}

/// Whether `t`'s emulator shares CPUs only with its housekeeping vCPUs, as
/// `emulator = "with-housekeeping"` lays it out: the vCPUs on its CPUs are
/// the first k (vCPU 0 …), fewer than all, each pinned within them, and no
/// other vCPU of it runs on their cores (SMT siblings included).
fn with_housekeeping(host: &HostTopology, t: &Tenant) -> bool {
    let mut on: Vec<u32> = t
        .vcpus
        .iter()
        .filter(|v| v.cpus.intersects(&t.emulator_cpus))
        .map(|v| v.vcpu)
        .collect();
    on.sort_unstable();
    let prefix = on.iter().enumerate().all(|(i, &v)| v as usize == i);
    let within = t
        .vcpus
        .iter()
        .filter(|v| on.contains(&v.vcpu))
        .all(|v| v.cpus.is_subset(&t.emulator_cpus));
    let cores = host.whole_cores(&t.emulator_cpus);
    let apart = t
        .vcpus
        .iter()
        .filter(|v| !on.contains(&v.vcpu))
        .all(|v| host.whole_cores(&v.cpus).is_disjoint(&cores));
    !on.is_empty() && on.len() < t.vcpus.len() && prefix && within && apart
}

/// Emulator threads on vCPU CPUs (their own VM's or another's); its own
/// housekeeping vCPUs' CPUs are where `with-housekeeping` puts them. An
/// emulator that floats over another VM's vCPUs is its VM's `floating`
/// finding, not this one too.
pub(super) fn emulator_overlap(
    host: &HostTopology,
    vms: &[&Tenant],
    usable: &CpuSet,
) -> Vec<Conflict> {
    let mut out = Vec::new();
    for t in vms {
        let loose = floats(&t.emulator_cpus, usable);
        for other in vms {
            let own = other.name == t.name;
            if (own && with_housekeeping(host, t)) || (!own && loose) {
                continue;
            }
            let shared = t.emulator_cpus.intersection(&other.cpus);
            if !shared.is_empty() {
                let whose = if other.name == t.name {
                    "its own".to_owned()
                } else {
                    format!("{}'s", other.name)
                };
                out.push(Conflict {
                    kind: ConflictKind::EmulatorOverlap,
                    severity: Severity::Warning,
                    tenants: if other.name == t.name {
                        vec![t.name.clone()]
                    } else {
                        vec![t.name.clone(), other.name.clone()]
                    },
                    cpus: shared.clone(),
                    message: format!(
                        "{}'s emulator threads run on {whose} vCPU CPUs {shared}",
                        t.name
                    ),
                });
            }
        }
    }
    out
}

fn group_by_core(cpus: &CpuSet, core: &BTreeMap<CpuId, CoreId>) -> BTreeMap<CoreId, CpuSet> {
    let mut out: BTreeMap<CoreId, CpuSet> = BTreeMap::new();
    for cpu in cpus.iter() {
        if let Some(c) = core.get(&cpu) {
            out.entry(*c).or_default().insert(cpu);
        }
    }
    out
}
