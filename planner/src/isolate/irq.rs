//! IRQs and kernel work off the VM CPUs: every IRQ whose
//! `smp_affinity_list` allows a VM CPU is moved to the housekeeping CPUs,
//! new IRQs too (`/proc/irq/default_smp_affinity`), and the unbound
//! workqueues (`/sys/devices/virtual/workqueue/cpumask`). The kernel refuses
//! some IRQs (per-CPU and managed ones): those are listed, not errors.
//! `irqbalance`, which would move IRQs back, is checked for a ban of the VM
//! CPUs.

use super::journal::Change;
use super::Target;
use crate::cpuset::CpuSet;
use crate::host::fs::read;
use crate::host::fs::Fs;
use std::path::Path;

/// The changes for IRQs and workqueues, and notes.
pub fn plan(root: &Path, target: &Target) -> (Vec<Change>, Vec<String>) {
    let vm = &target.vm_cpus;
    let hk = &target.housekeeping;
    let mut changes = Vec::new();
    let mut notes = Vec::new();
    if let Some(irqs) = Fs::open(root).ok().and_then(|fs| fs.irqs()) {
        for irq in irqs.iter().filter(|i| i.affinity.intersects(vm)) {
            let path = root.join(format!("proc/irq/{}/smp_affinity_list", irq.number));
            let what = match &irq.name {
                Some(name) => format!("IRQ {} ({name})", irq.number),
                None => format!("IRQ {}", irq.number),
            };
            changes.push(Change::Write {
                what,
                path,
                before: irq.affinity.to_string(),
                after: hk.to_string(),
            });
        }
    }
    for (what, rel) in [
        ("default IRQ affinity", "proc/irq/default_smp_affinity"),
        (
            "unbound workqueues",
            "sys/devices/virtual/workqueue/cpumask",
        ),
    ] {
        let path = root.join(rel);
        let Some(before) = read(&path).map(|t| t.trim().to_owned()) else {
            continue;
        };
        let Some(now) = CpuSet::from_hex_mask(&before) else {
            notes.push(format!(
                "{} holds {before:?}, not a CPU mask: left alone",
                path.display()
            ));
            continue;
        };
        if now.intersects(vm) {
            changes.push(Change::Write {
                what: what.to_owned(),
                path,
                before,
                after: hk.to_hex_mask(),
            });
        }
    }
    notes.extend(irqbalance(root, vm));
    (changes, notes)
}

/// A note for each running `irqbalance` that does not ban every VM CPU
/// (`IRQBALANCE_BANNED_CPULIST`, or the older hex `IRQBALANCE_BANNED_CPUS`,
/// in its environment).
fn irqbalance(root: &Path, vm: &CpuSet) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join("proc")) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    pids.sort_unstable();
    let mut notes = Vec::new();
    for pid in pids {
        let dir = root.join(format!("proc/{pid}"));
        if read(&dir.join("comm"))
            .map(|c| c.trim().to_owned())
            .as_deref()
            != Some("irqbalance")
        {
            continue;
        }
        let environ = read(&dir.join("environ")).unwrap_or_default();
        let mut banned = CpuSet::new();
        for var in environ.split('\0') {
            if let Some(list) = var.strip_prefix("IRQBALANCE_BANNED_CPULIST=") {
                banned = banned.union(&list.parse().unwrap_or_default());
            } else if let Some(mask) = var.strip_prefix("IRQBALANCE_BANNED_CPUS=") {
                banned = banned.union(&CpuSet::from_hex_mask(mask).unwrap_or_default());
            }
        }
        let unbanned = vm.difference(&banned);
        if unbanned.is_empty() {
            notes.push(format!("irqbalance (pid {pid}) bans the VM CPUs {vm}"));
        } else {
            notes.push(format!(
                "irqbalance (pid {pid}) runs without banning CPUs {unbanned}: it will move IRQs \
                 back onto them. Set IRQBALANCE_BANNED_CPULIST={vm} in /etc/default/irqbalance \
                 (Debian, Ubuntu) or /etc/sysconfig/irqbalance (RHEL, Fedora) and restart it"
            ));
        }
    }
    notes
}
