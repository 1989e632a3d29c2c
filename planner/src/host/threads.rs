//! What runs on VM CPUs that should not: every thread on the live host whose
//! CPU affinity includes a VM CPU and that belongs to no running VM (its
//! QEMU process: where a VM's own threads may run is `report`'s `floating`
//! and `emulator-overlap`, which `isolate` does not change) nor is a
//! per-CPU kernel thread (`kworker/1:0`, `ksoftirqd/1`, `migration/1`:
//! bound to one CPU by the kernel) nor a kernel thread whose affinity the
//! kernel keeps (`PF_NO_SETAFFINITY`, e.g. workqueue rescuers
//! `kworker/R-…`). These are `report`'s `stray-threads`; IRQs still allowed
//! on VM CPUs are its `irq-on-vm-cpu`.

use super::task::task;
use crate::cpuset::CpuSet;
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::Path;

/// One thread that may run on a VM's CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StrayThread {
    /// Thread id (as `taskset -pc` takes it).
    pub tid: u32,
    /// Its process.
    pub pid: u32,
    /// Its name (`comm`).
    pub name: String,
    /// The CPUs it may run on.
    pub affinity: CpuSet,
    /// The VM CPUs among them.
    pub on_vm_cpus: CpuSet,
    /// Whether it is a kernel thread.
    pub kernel: bool,
    /// CPU time it has used, in clock ticks (the busiest are listed first).
    pub ticks: u64,
}

/// The numbered entries of a `/proc`-like directory, sorted.
fn numbered(dir: &Path) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    out.sort_unstable();
    out
}

/// Every stray thread on the host under `root`: threads that may run on
/// one of `vm_cpus` and are not a thread of one of `vm_pids` (the running
/// VMs' QEMU processes: a VM's own thread is never the host's, wherever it
/// may run). Sorted busiest first, then by thread id.
pub fn stray_threads(root: &Path, vm_cpus: &CpuSet, vm_pids: &BTreeSet<u32>) -> Vec<StrayThread> {
    let proc = root.join("proc");
    let mut out = Vec::new();
    for pid in numbered(&proc) {
        if vm_pids.contains(&pid) {
            continue;
        }
        for tid in numbered(&proc.join(format!("{pid}/task"))) {
            // `/proc/TID` is every thread's, listed or not.
            let t = task(root, tid);
            let Some(affinity) = t.affinity.clone() else {
                continue;
            };
            let on_vm_cpus = affinity.intersection(vm_cpus);
            if on_vm_cpus.is_empty() {
                continue;
            }
            // A per-CPU kernel thread is bound to its one CPU; one the kernel
            // bars from affinity changes (PF_NO_SETAFFINITY: workqueue
            // rescuers, IRQ threads) is placed by the kernel, not by anyone
            // who reads this.
            if t.kernel && (affinity.len() == 1 || t.bound) {
                continue;
            }
            out.push(StrayThread {
                tid,
                pid,
                name: t.name,
                affinity,
                on_vm_cpus,
                kernel: t.kernel,
                ticks: t.ticks,
            });
        }
    }
    out.sort_by(|a, b| b.ticks.cmp(&a.ticks).then(a.tid.cmp(&b.tid)));
    out
}
