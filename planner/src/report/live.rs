//! What the live host adds to a report: host threads that may run on a VM's
//! CPUs — no running VM's QEMU threads, no per-CPU kernel threads
//! (`stray-threads`),
//! and IRQs allowed on VM CPUs (`irq-on-vm-cpu`) — what `pinplan isolate`
//! removes, checked where it runs.

use super::{Conflict, ConflictKind, Report, Severity};
use crate::cpuset::CpuSet;
use crate::host::threads::{stray_threads, StrayThread};
use crate::ids::CpuId;
use crate::report::conflicts::held_cpus;
use crate::tenant::{TenantKind, TenantState};
use crate::topology::HostTopology;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// An IRQ allowed on VM CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IrqOnVmCpu {
    /// Its number.
    pub irq: u32,
    /// Its name from `/proc/interrupts`.
    pub name: Option<String>,
    /// Its `smp_affinity_list`.
    pub affinity: CpuSet,
}

/// What the live host showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiveHost {
    /// How many stray threads there are.
    pub stray_threads_total: usize,
    /// The busiest of them (at most the `top` asked for).
    pub stray_threads: Vec<StrayThread>,
    /// Every IRQ allowed on VM CPUs.
    pub irqs_on_vm_cpus: Vec<IrqOnVmCpu>,
}

/// How many threads a finding's message names.
const IN_MESSAGE: usize = 5;

impl Report {
    /// Scans the host under `root` (`/`) for threads and IRQs on the CPUs
    /// the running pinned VMs' vCPUs hold, adds a finding for each kind
    /// found, and keeps the `top` busiest threads. Every thread of a
    /// running VM's QEMU process is the VM's, never a stray host thread:
    /// one that may run on another VM's CPUs is its VM's `floating` or
    /// `emulator-overlap` finding.
    pub fn add_live_host(&mut self, host: &HostTopology, root: &Path, top: usize) {
        let usable = host.usable_cpus();
        let mut owners: BTreeMap<CpuId, BTreeSet<String>> = BTreeMap::new();
        let mut vm_pids = BTreeSet::new();
        for t in self
            .tenants
            .iter()
            .filter(|t| t.kind == TenantKind::Vm && t.state == TenantState::Running)
        {
            for cpu in held_cpus(t, &usable).iter() {
                owners.entry(cpu).or_default().insert(t.name.clone());
            }
            if let Some(pid) = crate::libvirt::resident::qemu_pid(root, &t.name) {
                vm_pids.insert(pid);
            }
        }
        let vm_cpus: CpuSet = owners.keys().copied().collect();
        let stray = stray_threads(root, &vm_cpus, &vm_pids);
        let irqs: Vec<IrqOnVmCpu> = crate::host::fs::Fs::open(root)
            .ok()
            .and_then(|fs| fs.irqs())
            .unwrap_or_default()
            .into_iter()
            .filter(|i| i.affinity.intersects(&vm_cpus))
            .map(|i| IrqOnVmCpu {
                irq: i.number,
                name: i.name,
                affinity: i.affinity,
            })
            .collect();
        let vms_on = |cpus: &CpuSet| -> Vec<String> {
            let names: BTreeSet<String> = cpus
                .iter()
                .filter_map(|c| owners.get(&c))
                .flatten()
                .cloned()
                .collect();
            names.into_iter().collect()
        };
        if !stray.is_empty() {
            let cpus = stray
                .iter()
                .fold(CpuSet::new(), |a, t| a.union(&t.on_vm_cpus));
            let named: Vec<String> = stray
                .iter()
                .take(IN_MESSAGE)
                .map(|t| format!("{} {} ({})", t.tid, t.name, t.affinity))
                .collect();
            self.conflicts.push(Conflict {
                kind: ConflictKind::StrayThreads,
                severity: Severity::Warning,
                tenants: vms_on(&cpus),
                cpus: cpus.clone(),
                message: format!(
                    "{} threads that are neither the VMs' nor per-CPU kernel threads may run on \
                     VM CPUs {cpus}; the busiest: {} (pinplan isolate keeps the host off them)",
                    stray.len(),
                    named.join(", ")
                ),
            });
        }
        if !irqs.is_empty() {
            let cpus = irqs.iter().fold(CpuSet::new(), |a, i| {
                a.union(&i.affinity.intersection(&vm_cpus))
            });
            let named: Vec<String> = irqs
                .iter()
                .take(IN_MESSAGE)
                .map(|i| match &i.name {
                    Some(n) => format!("{} ({n})", i.irq),
                    None => i.irq.to_string(),
                })
                .collect();
            let more = irqs.len().saturating_sub(named.len());
            self.conflicts.push(Conflict {
                kind: ConflictKind::IrqOnVmCpu,
                severity: Severity::Warning,
                tenants: vms_on(&cpus),
                cpus: cpus.clone(),
                message: format!(
                    "{} IRQs may run on VM CPUs {cpus}: {}{}",
                    irqs.len(),
                    named.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
            });
        }
        super::conflicts::sort(&mut self.conflicts);
        self.live = Some(LiveHost {
            stray_threads_total: stray.len(),
            stray_threads: stray.into_iter().take(top).collect(),
            irqs_on_vm_cpus: irqs,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::domain::tenant_from_domain;
    use crate::tenant::host_tenant;
    use crate::topology::{self, Source};

    /// Writes one thread `tid` of process `pid` under `root`'s `proc`: its
    /// name, affinity and `stat` flags.
    fn thread(root: &Path, pid: u32, tid: u32, name: &str, affinity: &str, flags: u64) {
        let task = root.join(format!("proc/{pid}/task/{tid}"));
        let dir = root.join(format!("proc/{tid}"));
        for d in [&task, &dir] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{e}"));
        }
        let write = |file: &str, text: String| {
            std::fs::write(dir.join(file), text).unwrap_or_else(|e| panic!("{e}"));
        };
        write("comm", format!("{name}\n"));
        write(
            "stat",
            format!("{tid} ({name}) S 1 1 1 0 -1 {flags} 0 0 0 0 {tid} 0 0 0 20 0 1 0 100\n"),
        );
        write(
            "status",
            format!("Name:\t{name}\nCpus_allowed_list:\t{affinity}\n"),
        );
    }

    /// Issue 27: every thread of a running VM's QEMU process is the VM's,
    /// never a stray host thread — not the floating VM's, which may run on
    /// the pinned one's CPU (that is its `floating` error), nor the pinned
    /// VM's own unpinned worker.
    #[test]
    fn a_vms_threads_are_never_stray_host_threads_issue_27() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path();
        let host = topology::load(&Source::Synthetic("package:1 core:2 pu:1".into()))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(root.join("run/libvirt/qemu")).unwrap_or_else(|e| panic!("{e}"));
        for (name, pid) in [("a", 100), ("b", 200)] {
            std::fs::write(
                root.join(format!("run/libvirt/qemu/{name}.pid")),
                format!("{pid}"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            std::fs::create_dir_all(root.join(format!("proc/{pid}")))
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(
                root.join(format!("proc/{pid}/cmdline")),
                format!("/usr/bin/qemu-system-x86_64\0-name\0guest={name},debug-threads=on\0"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
        // a: vCPU on 1, emulator on 0, a worker thread that may run anywhere.
        thread(root, 100, 100, "qemu-system-x86", "0", 0);
        thread(root, 100, 101, "CPU 0/KVM", "1", 0);
        thread(root, 100, 102, "worker", "0-1", 0);
        // b: not pinned at all.
        thread(root, 200, 200, "qemu-system-x86", "0-1", 0);
        thread(root, 200, 201, "CPU 0/KVM", "0-1", 0);
        // The host: a busy process, and a per-CPU kernel thread.
        thread(root, 300, 300, "busy", "0-1", 0);
        thread(root, 400, 400, "ksoftirqd/1", "1", 0x0020_0000);
        let vm =
            |xml: &str| tenant_from_domain("x.xml", xml, &host).unwrap_or_else(|e| panic!("{e}"));
        let tenants = vec![
            host_tenant(&"0".parse().unwrap_or_default()),
            vm(
                "<domain><name>a</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>\
                <emulatorpin cpuset='0'/></cputune></domain>",
            ),
            vm("<domain><name>b</name><vcpu>1</vcpu></domain>"),
        ];
        let mut report = Report::new(&host, tenants, None);
        report.add_live_host(&host, root, 10);
        let live = report
            .live
            .clone()
            .unwrap_or_else(|| panic!("no live part"));
        let strays: Vec<(u32, &str)> = live
            .stray_threads
            .iter()
            .map(|t| (t.tid, t.name.as_str()))
            .collect();
        assert_eq!(strays, [(300, "busy")]);
        let found: Vec<(ConflictKind, Severity, Vec<String>)> = report
            .conflicts
            .iter()
            .map(|c| (c.kind, c.severity, c.tenants.clone()))
            .collect();
        assert_eq!(
            found,
            [
                (
                    ConflictKind::Floating,
                    Severity::Error,
                    vec!["b".to_owned(), "a".to_owned(), "host".to_owned()]
                ),
                (
                    ConflictKind::StrayThreads,
                    Severity::Warning,
                    vec!["a".to_owned()]
                ),
            ]
        );
    }
}
