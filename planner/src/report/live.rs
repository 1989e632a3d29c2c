//! What the live host adds to a report: threads that may run on a VM's CPUs
//! and are neither that VM's nor per-CPU kernel threads (`stray-threads`),
//! and IRQs allowed on VM CPUs (`irq-on-vm-cpu`) — what `pinplan isolate`
//! removes, checked where it runs.

use super::{Conflict, ConflictKind, Report, Severity};
use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::isolate::threads::{stray_threads, StrayThread};
use crate::tenant::TenantKind;
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
    /// Scans the host under `root` (`/`) for threads and IRQs on the pinned
    /// VMs' CPUs, adds a finding for each kind found, and keeps the `top`
    /// busiest threads.
    pub fn add_live_host(&mut self, root: &Path, top: usize) {
        let mut owners: BTreeMap<CpuId, BTreeSet<String>> = BTreeMap::new();
        let mut pids = BTreeMap::new();
        for t in self
            .tenants
            .iter()
            .filter(|t| t.kind == TenantKind::Vm && t.pinned)
        {
            for cpu in t.cpus.iter() {
                owners.entry(cpu).or_default().insert(t.name.clone());
            }
            if let Some(pid) = crate::libvirt::resident::qemu_pid(root, &t.name) {
                pids.insert(t.name.clone(), pid);
            }
        }
        let vm_cpus: CpuSet = owners.keys().copied().collect();
        let stray = stray_threads(root, &owners, &pids);
        let irqs: Vec<IrqOnVmCpu> = crate::doctor::sysfs::Fs::open(root)
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
