//! Conflicts: who shares a CPU or a physical core with whom, who overlaps
//! the host, who floats over whom, which shut-off domain would land on
//! whom when it starts, whose memory or NIC is on another node.

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::tenant::{Tenant, TenantKind, TenantState};
use crate::topology::HostTopology;
use serde::Serialize;
use std::collections::BTreeMap;

mod locality;
mod sharing;

use locality::{emulator_remote, memory_remote, nic_remote, numa_split};
pub(crate) use sharing::floating_threads;
use sharing::{emulator_overlap, floating, shared, shut_off_overlap, without_floating_vcpus};

/// How bad a conflict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Throughput collapses: fix it.
    Error,
    /// Worth a look.
    Warning,
}

/// The kinds of conflict, serialised as their names (`cpu-shared`, …);
/// ordered by name, as reports list them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConflictKind {
    /// Two tenants on SMT siblings of one physical core.
    CoreShared,
    /// Two VMs on the same CPU.
    CpuShared,
    /// A VM's emulator threads on vCPU CPUs.
    EmulatorOverlap,
    /// A VM's emulator threads only on other NUMA nodes than its vCPUs.
    EmulatorRemote,
    /// A running VM with threads that are not pinned: an error when they
    /// may run on CPUs another running tenant holds, else a warning.
    Floating,
    /// A VM on the host's own CPUs.
    HostOverlap,
    /// IRQs allowed on VM CPUs (the live host).
    IrqOnVmCpu,
    /// A VM's memory on other NUMA nodes than its vCPUs (by its numatune,
    /// or for a running guest on this host by where its pages are).
    MemoryRemote,
    /// vCPUs on another NUMA node than the VM's NIC.
    NicRemote,
    /// vCPUs across NUMA nodes under strict memory.
    NumaSplit,
    /// A shut-off domain whose config pins would put it on cores a running
    /// tenant holds when it starts.
    ShutOffOverlap,
    /// Threads of the host (no VM's QEMU) allowed on a VM's CPUs (the live
    /// host).
    StrayThreads,
}

impl ConflictKind {
    /// The name reports print.
    pub fn name(self) -> &'static str {
        match self {
            ConflictKind::CoreShared => "core-shared",
            ConflictKind::CpuShared => "cpu-shared",
            ConflictKind::EmulatorOverlap => "emulator-overlap",
            ConflictKind::EmulatorRemote => "emulator-remote",
            ConflictKind::Floating => "floating",
            ConflictKind::HostOverlap => "host-overlap",
            ConflictKind::MemoryRemote => "memory-remote",
            ConflictKind::NicRemote => "nic-remote",
            ConflictKind::NumaSplit => "numa-split",
            ConflictKind::ShutOffOverlap => "shut-off-overlap",
            ConflictKind::IrqOnVmCpu => "irq-on-vm-cpu",
            ConflictKind::StrayThreads => "stray-threads",
        }
    }
}

impl std::fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// What kind of sharing.
    pub kind: ConflictKind,
    /// Error or warning.
    pub severity: Severity,
    /// The tenants involved.
    pub tenants: Vec<String>,
    /// The CPUs involved.
    pub cpus: CpuSet,
    /// One line: why.
    pub message: String,
}

fn core_of(host: &HostTopology) -> BTreeMap<CpuId, CoreId> {
    host.pus
        .iter()
        .filter_map(|p| p.core.map(|c| (p.cpu, c)))
        .collect()
}

/// Every conflict among `tenants` on `host`, in a stable order. Only
/// running tenants conflict now; a shut-off domain's config is checked
/// against them (`shut-off-overlap`) and takes part in nothing else.
pub fn conflicts(host: &HostTopology, tenants: &[Tenant]) -> Vec<Conflict> {
    let usable = host.usable_cpus();
    let running: Vec<Tenant> = tenants
        .iter()
        .filter(|t| t.state == TenantState::Running)
        .cloned()
        .collect();
    let owners = owners(&running, &usable);
    let mut out = floating(host, &running, &owners, &usable);
    out.extend(shut_off_overlap(host, tenants, &owners, &usable));
    let tenants = without_floating_vcpus(&running, &usable);
    let tenants = tenants.as_slice();
    out.extend(shared(host, tenants));
    let vms: Vec<&Tenant> = tenants
        .iter()
        .filter(|t| t.kind == TenantKind::Vm && t.pinned)
        .collect();
    out.extend(emulator_overlap(host, &vms, &usable));
    let node_of: BTreeMap<CpuId, NodeId> = host
        .pus
        .iter()
        .filter_map(|p| p.numa_node.map(|n| (p.cpu, n)))
        .collect();
    out.extend(vms.iter().filter_map(|t| numa_split(t, &node_of)));
    out.extend(vms.iter().filter_map(|t| memory_remote(t, &node_of)));
    out.extend(vms.iter().filter_map(|t| emulator_remote(t, &node_of)));
    for t in &vms {
        out.extend(nic_remote(host, t, &node_of));
    }
    sort(&mut out);
    out
}

/// The order reports list conflicts in: errors first, then by kind and
/// tenants.
pub(crate) fn sort(conflicts: &mut [Conflict]) {
    conflicts
        .sort_by(|a, b| (a.severity, &a.kind, &a.tenants).cmp(&(b.severity, &b.kind, &b.tenants)));
}

impl Conflict {
    /// What makes a finding now and one under a plan the same finding: its
    /// kind and tenants, except that a finding about one VM that names
    /// whom it reaches (`floating`, `shut-off-overlap`) is that VM's
    /// whoever the plan puts next to it.
    pub fn identity(&self) -> (ConflictKind, &[String]) {
        let tenants = match self.kind {
            ConflictKind::Floating | ConflictKind::ShutOffOverlap => {
                self.tenants.get(..1).unwrap_or(&self.tenants)
            }
            _ => &self.tenants,
        };
        (self.kind, tenants)
    }
}

pub(crate) use crate::tenant::floats;

/// The usable CPUs a tenant holds now: the host's CPUs, a running pinned
/// VM's vCPUs' CPUs except those of vCPUs that float; none for a VM that is
/// not pinned or not running.
pub(crate) fn held_cpus(t: &Tenant, usable: &CpuSet) -> CpuSet {
    if t.state != TenantState::Running || !t.pinned {
        return CpuSet::new();
    }
    let held = match t.kind {
        TenantKind::Host => t.cpus.clone(),
        // A fixed tenant of a plan has CPUs but no vCPUs listed.
        TenantKind::Vm if t.vcpus.is_empty() && !floats(&t.cpus, usable) => t.cpus.clone(),
        TenantKind::Vm => t
            .vcpus
            .iter()
            .filter(|v| !floats(&v.cpus, usable))
            .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus)),
    };
    held.intersection(usable)
}

/// A running tenant that holds CPUs: the host, or a pinned VM by its
/// pinned vCPUs.
struct Owner<'t> {
    tenant: &'t Tenant,
    /// The usable CPUs it holds.
    cpus: CpuSet,
}

impl Owner<'_> {
    fn is(&self, t: &Tenant) -> bool {
        self.tenant.kind == t.kind && self.tenant.name == t.name
    }

    /// `vm1 (cpus 1)`, `the host (cpus 0)`.
    fn describe(&self) -> String {
        match self.tenant.kind {
            TenantKind::Host => format!("the host (cpus {})", self.cpus),
            TenantKind::Vm => format!("{} (cpus {})", self.tenant.name, self.cpus),
        }
    }
}

/// Every running tenant that holds CPUs: the VMs in tenant order, then the
/// host (as messages name them).
fn owners<'t>(running: &'t [Tenant], usable: &CpuSet) -> Vec<Owner<'t>> {
    let mut out: Vec<Owner<'t>> = running
        .iter()
        .map(|tenant| Owner {
            tenant,
            cpus: held_cpus(tenant, usable),
        })
        .filter(|o| !o.cpus.is_empty())
        .collect();
    out.sort_by_key(|o| o.tenant.kind == TenantKind::Host);
    out
}

/// `cpus` and every CPU of the physical cores they are on.
fn on_cores(host: &HostTopology, cpus: &CpuSet) -> CpuSet {
    host.cores
        .iter()
        .filter(|c| c.cpus.intersects(cpus))
        .fold(cpus.clone(), |acc, c| acc.union(&c.cpus))
}

/// Where a thread reaches other tenants: `CPUs 0-1, which a (cpus 1) and
/// the host (cpus 0) own`, or when some of `cpus` are SMT siblings of
/// theirs, `CPUs 1,5, the cores of a (cpus 1)`.
fn reached(cpus: &CpuSet, owners: &[&Owner<'_>]) -> String {
    let names: Vec<String> = owners.iter().map(|o| o.describe()).collect();
    let list = crate::text::and_list(&names);
    let owned = owners
        .iter()
        .fold(CpuSet::new(), |acc, o| acc.union(&o.cpus));
    if cpus.is_subset(&owned) {
        let verb = if owners.len() == 1 { "owns" } else { "own" };
        format!("CPUs {cpus}, which {list} {verb}")
    } else {
        format!("CPUs {cpus}, the cores of {list}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::domain::{tenant_from_domain, DomainError};
    use crate::tenant::host_tenant;
    use crate::tenant::test_host as host;

    fn domain(name: &str, pins: &[(u32, &str)], emulator: Option<&str>) -> String {
        let mut cputune = String::new();
        for (v, c) in pins {
            cputune.push_str(&format!("<vcpupin vcpu='{v}' cpuset='{c}'/>"));
        }
        if let Some(e) = emulator {
            cputune.push_str(&format!("<emulatorpin cpuset='{e}'/>"));
        }
        format!(
            "<domain type='kvm'><name>{name}</name><vcpu placement='static'>{}</vcpu><cputune>{cputune}</cputune></domain>",
            pins.len().max(1)
        )
    }

    fn kinds(c: &[Conflict]) -> Vec<(String, Vec<String>, String)> {
        c.iter()
            .map(|c| (c.kind.to_string(), c.tenants.clone(), c.cpus.to_string()))
            .collect()
    }

    /// `emulator = "with-housekeeping"`: the emulator on the housekeeping
    /// vCPU 0's whole core (CPUs 1 and 5 of the test host, siblings), the
    /// poll-mode vCPUs on other cores — no finding. The same emulator with a
    /// poll-mode vCPU on the sibling, or sharing a vCPU other than the first
    /// ones, is still an overlap.
    #[test]
    fn the_housekeeping_layout_is_not_an_emulator_overlap() -> Result<(), DomainError> {
        let h = host();
        let ok = tenant_from_domain(
            "a.xml",
            &domain("hk", &[(0, "1"), (1, "2"), (2, "6")], Some("1,5")),
            &h,
        )?;
        let found = kinds(&conflicts(&h, &[ok]));
        assert!(
            found.iter().all(|(k, _, _)| k != "emulator-overlap"),
            "{found:?}"
        );
        for (pins, emulator) in [
            // vCPU 1 (poll-mode) on 5, the emulator's core.
            (&[(0, "1"), (1, "5"), (2, "2")][..], "1"),
            // The emulator on vCPU 1's CPU, not vCPU 0's.
            (&[(0, "2"), (1, "1"), (2, "6")][..], "1,5"),
            // Every vCPU on the emulator's CPUs: nothing is kept apart.
            (&[(0, "1"), (1, "5")][..], "1,5"),
        ] {
            let t = tenant_from_domain("b.xml", &domain("bad", pins, Some(emulator)), &h)?;
            let found = kinds(&conflicts(&h, &[t]));
            assert!(
                found.iter().any(|(k, _, _)| k == "emulator-overlap"),
                "{pins:?} {emulator}: {found:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn finds_sibling_sharing_by_core_not_by_number() -> Result<(), DomainError> {
        let h = host();
        // vm1 on CPU 1, vm2 on CPU 5: CPU numbers far apart, same core (1,5).
        let a = tenant_from_domain("a.xml", &domain("vm1", &[(0, "1")], Some("0")), &h)?;
        let b = tenant_from_domain("b.xml", &domain("vm2", &[(0, "5")], Some("0")), &h)?;
        let c = tenant_from_domain("c.xml", &domain("vm3", &[(0, "2")], Some("0")), &h)?;
        let found = conflicts(
            &h,
            &[host_tenant(&"0,4".parse().unwrap_or_default()), a, b, c],
        );
        assert_eq!(
            kinds(&found),
            [(
                "core-shared".to_owned(),
                vec!["vm1".to_owned(), "vm2".to_owned()],
                "1,5".to_owned()
            )]
        );
        Ok(())
    }

    #[test]
    fn finds_cpu_sharing_host_overlap_floating_and_emulators() -> Result<(), DomainError> {
        let h = host();
        let a = tenant_from_domain(
            "a.xml",
            &domain("vm1", &[(0, "1"), (1, "5")], Some("1")),
            &h,
        )?;
        let b = tenant_from_domain(
            "b.xml",
            &domain("vm2", &[(0, "5"), (1, "0")], Some("3")),
            &h,
        )?;
        let free = tenant_from_domain(
            "f.xml",
            "<domain><name>loose</name><vcpu>2</vcpu></domain>",
            &h,
        )?;
        let found = kinds(&conflicts(
            &h,
            &[host_tenant(&"0,4".parse().unwrap_or_default()), a, b, free],
        ));
        let expect = |k: &str, t: &[&str], c: &str| {
            (
                k.to_owned(),
                t.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
                c.to_owned(),
            )
        };
        assert!(
            found.contains(&expect("cpu-shared", &["vm1", "vm2"], "5")),
            "{found:?}"
        );
        assert!(
            found.contains(&expect("host-overlap", &["host", "vm2"], "0")),
            "{found:?}"
        );
        // loose floats over the cores of all three (issue 27).
        assert!(
            found.contains(&expect(
                "floating",
                &["loose", "vm1", "vm2", "host"],
                "0-1,4-5"
            )),
            "{found:?}"
        );
        assert!(
            found.contains(&expect("emulator-overlap", &["vm1"], "1")),
            "{found:?}"
        );
        // vm1 on 1 and 5, vm2 on 5: vm1's CPU 1 is vm2's CPU 5's sibling.
        assert!(
            found.contains(&expect("core-shared", &["vm1", "vm2"], "1,5")),
            "{found:?}"
        );
        Ok(())
    }

    /// A domain with `vcpus` vCPUs, those in `pins` pinned (`(vCPU, CPUs)`),
    /// the emulator pinned when given, running or shut off.
    fn vm(
        name: &str,
        vcpus: u32,
        pins: &[(u32, &str)],
        emulator: Option<&str>,
        running: bool,
    ) -> Tenant {
        let mut cputune = String::new();
        for (v, c) in pins {
            cputune.push_str(&format!("<vcpupin vcpu='{v}' cpuset='{c}'/>"));
        }
        if let Some(e) = emulator {
            cputune.push_str(&format!("<emulatorpin cpuset='{e}'/>"));
        }
        let xml = format!(
            "<domain type='kvm'><name>{name}</name><vcpu>{vcpus}</vcpu><cputune>{cputune}</cputune></domain>"
        );
        let mut t = tenant_from_domain(&format!("{name}.xml"), &xml, &host())
            .unwrap_or_else(|e| panic!("{e}"));
        if !running {
            t.state = TenantState::ShutOff;
        }
        t
    }

    /// Issue 27: a running VM whose threads float is an error when they may
    /// run on a core another running tenant holds (a pinned VM's vCPUs, the
    /// host's CPUs when known), one finding per VM naming them; a warning
    /// when nothing is held where they may go. A shut-off domain is never
    /// `floating` nor in a conflict of now: its config on a running
    /// tenant's core is a `shut-off-overlap` warning. On the test host
    /// siblings are N and N+4.
    #[test]
    fn floating_is_an_error_beside_what_others_hold_issue_27() {
        let on = |running: bool| {
            move |name: &str, cpu: &str| vm(name, 1, &[(0, cpu)], Some(cpu), running)
        };
        let (pinned, shut) = (on(true), on(false));
        let loose = |name: &str| vm(name, 2, &[], None, true);
        // vCPU 0 on 1, vCPU 1 not pinned, the emulator on 1.
        let half = vm("half", 2, &[(0, "1")], Some("1"), true);
        // Its vCPU on 1, its emulator not pinned.
        let emu_loose = vm("emu", 1, &[(0, "1")], None, true);
        // Kind, severity, tenants, CPUs and message of each finding.
        type Found = (
            &'static str,
            Severity,
            &'static [&'static str],
            &'static str,
            &'static str,
        );
        // What is checked, the host's CPUs, the VMs, what is found.
        type Case = (&'static str, Option<&'static str>, Vec<Tenant>, Vec<Found>);
        let cases: Vec<Case> = vec![
            (
                "floating beside a pinned VM",
                None,
                vec![pinned("a", "1"), loose("b")],
                vec![(
                    "floating",
                    Severity::Error,
                    &["b", "a"],
                    "1,5",
                    "b is not pinned: it can run on CPUs 1,5, the cores of a (cpus 1); pin it \
                     (pinplan plan --connect, then apply) or stop it",
                )],
            ),
            (
                "floating over the host's CPUs and a pinned VM",
                Some("0,4"),
                vec![pinned("a", "1,5"), loose("b")],
                vec![(
                    "floating",
                    Severity::Error,
                    &["b", "a", "host"],
                    "0-1,4-5",
                    "b is not pinned: it can run on CPUs 0-1,4-5, which a (cpus 1,5) and the host \
                     (cpus 0,4) own; pin it (pinplan plan --connect, then apply) or stop it",
                )],
            ),
            (
                "floating over the host's CPUs alone",
                Some("0,4"),
                vec![loose("b")],
                vec![(
                    "floating",
                    Severity::Error,
                    &["b", "host"],
                    "0,4",
                    "b is not pinned: it can run on CPUs 0,4, which the host (cpus 0,4) owns; \
                     pin it (pinplan plan --connect, then apply) or stop it",
                )],
            ),
            (
                "two floating VMs with nothing pinned",
                None,
                vec![loose("b"), loose("c")],
                vec![
                    (
                        "floating",
                        Severity::Warning,
                        &["b"],
                        "0-7",
                        "b is not pinned: its vCPUs can run on any CPU, next to anyone",
                    ),
                    (
                        "floating",
                        Severity::Warning,
                        &["c"],
                        "0-7",
                        "c is not pinned: its vCPUs can run on any CPU, next to anyone",
                    ),
                ],
            ),
            (
                "a pinned VM's vCPU that floats",
                None,
                vec![half.clone(), pinned("c", "2")],
                vec![(
                    "floating",
                    Severity::Error,
                    &["half", "c"],
                    "2,6",
                    "half's vCPU 1 is not pinned: it can run on CPUs 2,6, the cores of c \
                     (cpus 2); pin it (pinplan plan --connect, then apply)",
                )],
            ),
            (
                "a pinned VM's vCPU that floats, alone",
                None,
                vec![half],
                vec![(
                    "floating",
                    Severity::Warning,
                    &["half"],
                    "0-7",
                    "half's vCPU 1 is not pinned: it can run on any CPU, next to anyone",
                )],
            ),
            (
                "an emulator that floats over another VM, not over the host",
                Some("0,4"),
                vec![emu_loose.clone(), pinned("c", "2")],
                vec![(
                    "floating",
                    Severity::Error,
                    &["emu", "c"],
                    "2,6",
                    "emu's emulator is not pinned: it can run on CPUs 2,6, the cores of c \
                     (cpus 2); pin it (pinplan plan --connect, then apply)",
                )],
            ),
            (
                "an emulator that floats over the host's CPUs only",
                Some("0,4"),
                vec![emu_loose],
                vec![],
            ),
            (
                "a shut-off domain not pinned in its config",
                None,
                vec![pinned("a", "1"), vm("c", 1, &[], None, false)],
                vec![(
                    "shut-off-overlap",
                    Severity::Warning,
                    &["c", "a"],
                    "1,5",
                    "c (shut off) is not pinned in its config: when it starts it can run on \
                     CPUs 1,5, the cores of a (cpus 1)",
                )],
            ),
            (
                "a shut-off domain pinned onto a running VM's CPU",
                Some("0,4"),
                vec![pinned("a", "1"), shut("c", "1")],
                vec![(
                    "shut-off-overlap",
                    Severity::Warning,
                    &["c", "a"],
                    "1",
                    "c (shut off) is pinned in its config onto CPUs 1, which a (cpus 1) owns: \
                     they would share a core when c starts",
                )],
            ),
            (
                "a shut-off domain pinned onto a running VM's sibling and the host",
                Some("0,4"),
                vec![pinned("a", "1"), shut("c", "4-5")],
                vec![(
                    "shut-off-overlap",
                    Severity::Warning,
                    &["c", "a", "host"],
                    "4-5",
                    "c (shut off) is pinned in its config onto CPUs 4-5, the cores of a (cpus 1) \
                     and the host (cpus 0,4): they would share 2 cores when c starts",
                )],
            ),
            (
                "shut-off domains on each other's CPUs, and a floating VM beside them",
                None,
                vec![shut("c", "1"), shut("d", "1"), loose("b")],
                vec![(
                    "floating",
                    Severity::Warning,
                    &["b"],
                    "0-7",
                    "b is not pinned: its vCPUs can run on any CPU, next to anyone",
                )],
            ),
        ];
        let h = host();
        for (case, host_cpus, vms, expected) in cases {
            let mut tenants: Vec<Tenant> = host_cpus
                .map(|c| host_tenant(&c.parse().unwrap_or_default()))
                .into_iter()
                .collect();
            tenants.extend(vms);
            // A VM's emulator on its own vCPU's CPU is not what is tested.
            let found: Vec<(String, Severity, Vec<String>, String, String)> =
                conflicts(&h, &tenants)
                    .into_iter()
                    .filter(|c| !(c.kind == ConflictKind::EmulatorOverlap && c.tenants.len() == 1))
                    .map(|c| {
                        (
                            c.kind.to_string(),
                            c.severity,
                            c.tenants,
                            c.cpus.to_string(),
                            c.message,
                        )
                    })
                    .collect();
            let expected: Vec<(String, Severity, Vec<String>, String, String)> = expected
                .iter()
                .map(|(kind, severity, tenants, cpus, message)| {
                    (
                        (*kind).to_owned(),
                        *severity,
                        tenants.iter().map(|t| (*t).to_owned()).collect(),
                        (*cpus).to_owned(),
                        (*message).to_owned(),
                    )
                })
                .collect();
            assert_eq!(found, expected, "{case}");
        }
    }

    /// A conflict is the same one under a plan by its kind and tenants; a
    /// floating VM's (or a shut-off domain's) by its kind and that VM,
    /// whoever the plan puts next to it.
    #[test]
    fn a_floating_vm_is_the_same_finding_whoever_it_floats_over() {
        let conflict = |kind, tenants: &[&str]| Conflict {
            kind,
            severity: Severity::Error,
            tenants: tenants.iter().map(|t| (*t).to_owned()).collect(),
            cpus: CpuSet::new(),
            message: String::new(),
        };
        for (kind, a, b, same) in [
            (
                ConflictKind::Floating,
                &["b", "a"][..],
                &["b", "a", "host"][..],
                true,
            ),
            (ConflictKind::Floating, &["b"][..], &["b", "a"][..], true),
            (
                ConflictKind::Floating,
                &["b", "a"][..],
                &["c", "a"][..],
                false,
            ),
            (
                ConflictKind::ShutOffOverlap,
                &["c", "a"][..],
                &["c", "host"][..],
                true,
            ),
            (
                ConflictKind::CpuShared,
                &["a", "b"][..],
                &["a", "c"][..],
                false,
            ),
        ] {
            assert_eq!(
                conflict(kind, a).identity() == conflict(kind, b).identity(),
                same,
                "{kind} {a:?} {b:?}"
            );
        }
    }

    #[test]
    fn memory_off_the_vcpus_nodes_is_memory_remote() -> Result<(), Box<dyn std::error::Error>> {
        use crate::ids::NodeId;
        use crate::tenant::NodeResident;
        use crate::topology::{self, Source};
        // Two nodes of 2 cores: CPUs 0-1 on node 0, 2-3 on node 1.
        let h = topology::load(&Source::Synthetic("numa:2 core:2 pu:1".into()))?;
        let on = |name: &str, numatune: &str| {
            format!(
                "<domain><name>{name}</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>\
                 <emulatorpin cpuset='0'/></cputune>{numatune}</domain>"
            )
        };
        let far = tenant_from_domain(
            "far.xml",
            &on(
                "far",
                "<numatune><memory mode='strict' nodeset='1'/></numatune>",
            ),
            &h,
        )?;
        let near = tenant_from_domain(
            "near.xml",
            &on(
                "near",
                "<numatune><memory mode='strict' nodeset='0'/></numatune>",
            ),
            &h,
        )?;
        // Read as running: 10 % off the node is QEMU's shared pages (no
        // finding), 3 GiB of 4 is one.
        let mut shared = tenant_from_domain("s.xml", &on("shared", ""), &h)?;
        shared.memory_resident = Some(vec![
            NodeResident {
                node: NodeId(0),
                kib: 900,
            },
            NodeResident {
                node: NodeId(1),
                kib: 100,
            },
        ]);
        let mut moved = tenant_from_domain(
            "m.xml",
            &on(
                "moved",
                "<numatune><memory mode='strict' nodeset='0'/></numatune>",
            ),
            &h,
        )?;
        moved.memory_resident = Some(vec![
            NodeResident {
                node: NodeId(0),
                kib: 1 << 20,
            },
            NodeResident {
                node: NodeId(1),
                kib: 3 << 20,
            },
        ]);
        let found = conflicts(&h, &[far, near, shared, moved]);
        let remote: Vec<(&str, &str)> = found
            .iter()
            .filter(|c| c.kind == ConflictKind::MemoryRemote)
            .map(|c| (c.tenants[0].as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            remote,
            [
                ("far", "far's memory is on node(s) 1 (strict), its vCPUs on 0"),
                (
                    "moved",
                    "moved's memory is resident off its vCPUs' node(s) 0: 3.0 GiB on node 1 of 4.0 GiB (75%)"
                ),
            ]
        );
        assert!(
            found.iter().all(|c| c.kind != ConflictKind::NumaSplit),
            "{found:?}"
        );
        Ok(())
    }

    #[test]
    fn an_emulator_on_another_node_is_emulator_remote() -> Result<(), Box<dyn std::error::Error>> {
        use crate::topology::{self, Source};
        let h = topology::load(&Source::Synthetic("numa:2 core:2 pu:1".into()))?;
        let vm = |name: &str, emulator: &str| {
            format!(
                "<domain><name>{name}</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='3'/>\
                 <emulatorpin cpuset='{emulator}'/></cputune></domain>"
            )
        };
        let remote = tenant_from_domain("r.xml", &vm("remote", "0"), &h)?;
        let local = tenant_from_domain("l.xml", &vm("local", "2"), &h)?;
        let both = tenant_from_domain("b.xml", &vm("both", "0,2"), &h)?;
        let found: Vec<(String, String)> = conflicts(&h, &[remote, local, both])
            .into_iter()
            .filter(|c| c.kind == ConflictKind::EmulatorRemote)
            .map(|c| (c.tenants[0].clone(), c.message))
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "remote");
        assert!(found[0].1.starts_with(
            "remote's emulator threads run on CPUs 0 of node(s) 0, its vCPUs on node(s) 1"
        ));
        Ok(())
    }
}
