//! CPU checks against the plan: SMT when the plan needs sibling threads
//! (`smt`), VM CPUs isolated and host CPUs not (`isolation`), and no IRQ
//! allowed on a VM's CPUs (`irq-affinity`).

use super::{Check, CheckId, Host, Status};
use crate::cmdline::KernelCmdline;
use crate::cpuset::CpuSet;
use crate::host::fs::Fs;
use crate::plan::{Plan, VmPlan};
use std::collections::BTreeMap;

/// Whether a VM's placement needs both threads of its cores.
fn needs_siblings(vm: &VmPlan) -> bool {
    vm.threads == crate::solve::ThreadPolicy::Require || vm.guest_topology.threads >= 2
}

/// Every CPU a VM of the plan owns.
fn vm_cpus(plan: &Plan) -> CpuSet {
    plan.vms
        .iter()
        .fold(CpuSet::new(), |all, vm| all.union(&vm.cpus))
}

fn no_plan(id: CheckId, subject: &str, what: &str) -> Check {
    Check::new(
        id,
        Status::Skip,
        subject,
        format!("needs a plan (--plan PLAN.json) to know {what}"),
    )
}

/// `smt`: `/sys/devices/system/cpu/smt/control`; off while a VM of the plan
/// needs sibling threads fails.
pub(super) fn smt(host: &Host<'_>, fs: &Fs) -> Check {
    let id = CheckId::Smt;
    let Some(control) = fs.smt_control() else {
        return Check::new(
            id,
            Status::Skip,
            "host",
            "no /sys/devices/system/cpu/smt/control (an older kernel, or not x86)",
        );
    };
    let off = matches!(
        control.as_str(),
        "off" | "forceoff" | "notsupported" | "notimplemented"
    );
    let state = if off {
        format!("SMT is off (smt/control: {control})")
    } else {
        format!("SMT is on (smt/control: {control})")
    };
    let Some(plan) = host.plan else {
        return Check::new(
            id,
            Status::Pass,
            "host",
            format!("{state}; no plan given to say whether VMs need sibling threads"),
        );
    };
    let needing: Vec<String> = plan
        .vms
        .iter()
        .filter(|vm| needs_siblings(vm))
        .map(|vm| {
            format!(
                "{} (threads = {}, guest threads = {})",
                vm.name, vm.threads, vm.guest_topology.threads
            )
        })
        .collect();
    if !off && needing.is_empty() {
        return Check::new(id, Status::Pass, "host", state);
    }
    if !off {
        return Check::new(
            id,
            Status::Pass,
            "host",
            format!(
                "{state}; the plan puts vCPUs on sibling threads: {}",
                needing.join(", ")
            ),
        );
    }
    if needing.is_empty() {
        return Check::new(
            id,
            Status::Pass,
            "host",
            format!("{state}; no VM of the plan needs sibling threads"),
        );
    }
    let hint = match control.as_str() {
        "off" => "echo on > /sys/devices/system/cpu/smt/control (and remove nosmt from the kernel command line), or plan again on this host with threads = \"isolate\"",
        "forceoff" => "remove nosmt=force from the kernel command line and reboot, or plan again on this host with threads = \"isolate\"",
        _ => "enable Hyper-Threading/SMT in the firmware setup, or plan again on this host with threads = \"isolate\"",
    };
    Check::new(
        id,
        Status::Fail,
        "host",
        format!(
            "{state}, but the plan puts vCPUs on sibling threads: {}",
            needing.join(", ")
        ),
    )
    .hint(hint)
}

/// `isolation`: each VM's CPUs against `isolcpus=`, `nohz_full=` and
/// `rcu_nocbs=` (which `nohz_full` implies); the host's reserved CPUs must
/// not be in `isolcpus=` or `nohz_full=`.
pub(super) fn isolation(host: &Host<'_>, fs: &Fs) -> Vec<Check> {
    let id = CheckId::Isolation;
    let Some(plan) = host.plan else {
        return vec![no_plan(id, "vms", "which CPUs the VMs get")];
    };
    let Some(cmdline) = &host.cmdline else {
        return vec![Check::new(
            id,
            Status::Skip,
            "host",
            "no /proc/cmdline to read isolcpus=, nohz_full= and rcu_nocbs= from",
        )];
    };
    // `all` and `N` in a list mean the host's CPUs.
    let online = fs.online_cpus().unwrap_or_default();
    let mut kernel = Isolated::read(cmdline, &online);
    kernel.cgroups = crate::host::cgroup::host_confinement(fs.root(), &online);
    kernel.tuned = fs.tuned_isolated();
    let reserved = &plan.host.reserved_cpus;
    let all_vm = vm_cpus(plan);
    let mut checks = vec![kernel.host_check(reserved)];
    checks.extend(
        plan.vms
            .iter()
            .map(|vm| kernel.vm_check(vm, &all_vm, reserved, &host.plan_arg())),
    );
    checks
}

/// The CPUs the kernel command line isolates, read once for every subject
/// of `isolation`.
struct Isolated {
    isolcpus: CpuSet,
    nohz_full: CpuSet,
    /// `rcu_nocbs=` as given.
    rcu_given: CpuSet,
    /// `rcu_nocbs=` with what `nohz_full=` implies.
    rcu_nocbs: CpuSet,
    /// isolcpus's leading flags (`domain,managed_irq,2-5`), kept in the fix.
    iso_flags: Vec<String>,
    /// ` (cannot read …: taken as empty)` when a list is malformed.
    unreadable: String,
    /// Where the host's cgroups confine it, and how (runtime isolation:
    /// `pinplan isolate`, systemd `AllowedCPUs`, a cpuset of one's own).
    cgroups: Option<(CpuSet, String)>,
    /// tuned's `isolated_cores=` under the cpu-partitioning profile.
    tuned: Option<CpuSet>,
}

impl Isolated {
    fn read(cmdline: &KernelCmdline, online: &CpuSet) -> Isolated {
        let mut bad: Vec<String> = Vec::new();
        let mut param = |key: &str| -> CpuSet {
            match cmdline.cpu_list(key, online) {
                None => CpuSet::new(),
                Some(Ok(cpus)) => cpus,
                Some(Err(e)) => {
                    bad.push(format!("{}={}", e.param, e.value));
                    CpuSet::new()
                }
            }
        };
        let isolcpus = param("isolcpus");
        let nohz_full = param("nohz_full");
        let rcu_given = param("rcu_nocbs");
        let iso_flags: Vec<String> = cmdline
            .get("isolcpus")
            .unwrap_or("")
            .split(',')
            .take_while(|item| {
                *item != "all"
                    && !item.is_empty()
                    && item.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
            })
            .map(str::to_owned)
            .collect();
        let rcu_nocbs = rcu_given.union(&nohz_full);
        let unreadable = if bad.is_empty() {
            String::new()
        } else {
            format!(" (cannot read {}: taken as empty)", bad.join(" "))
        };
        Isolated {
            isolcpus,
            nohz_full,
            rcu_given,
            rcu_nocbs,
            iso_flags,
            unreadable,
            cgroups: None,
            tuned: None,
        }
    }

    /// The host's reserved CPUs must not be isolated.
    fn host_check(&self, reserved: &CpuSet) -> Check {
        let id = CheckId::Isolation;
        let unreadable = &self.unreadable;
        let host_isolated = reserved.intersection(&self.isolcpus.union(&self.nohz_full));
        if reserved.is_empty() {
            return Check::new(
                id,
                Status::Pass,
                "host",
                "the plan reserves no CPUs for the host",
            );
        }
        if host_isolated.is_empty() {
            return Check::new(
                id,
                Status::Pass,
                "host",
                format!("the host's CPUs {reserved} are not isolated{unreadable}"),
            );
        }
        let mut fixed = Vec::new();
        for (key, set) in [("isolcpus", &self.isolcpus), ("nohz_full", &self.nohz_full)] {
            if set.intersects(reserved) {
                let rest = set.difference(reserved);
                fixed.push(if rest.is_empty() {
                    format!("drop {key}=")
                } else if key == "isolcpus" {
                    format!("{key}={}", with_flags(&self.iso_flags, &rest))
                } else {
                    format!("{key}={rest}")
                });
            }
        }
        Check::new(
            id,
            Status::Fail,
            "host",
            format!(
                "the host's reserved CPUs {host_isolated} are isolated (isolcpus=/nohz_full=): the host's own work and the emulator threads pinned there lose load balancing and housekeeping{unreadable}"
            ),
        )
        .hint(format!(
            "on the kernel command line: {}",
            fixed.join(" ")
        ))
    }

    /// A VM's CPUs must be in all three lists; the fix is one line for the
    /// whole plan (`all_vm`), the host's CPUs left out.
    fn vm_check(&self, vm: &VmPlan, all_vm: &CpuSet, reserved: &CpuSet, plan_arg: &str) -> Check {
        let id = CheckId::Isolation;
        let unreadable = &self.unreadable;
        let missing: Vec<(&str, CpuSet)> = [
            ("isolcpus", &self.isolcpus),
            ("nohz_full", &self.nohz_full),
            ("rcu_nocbs", &self.rcu_nocbs),
        ]
        .into_iter()
        .map(|(key, set)| (key, vm.cpus.difference(set)))
        .filter(|(_, m)| !m.is_empty())
        .collect();
        if missing.is_empty() {
            return Check::new(
                id,
                Status::Pass,
                vm.name.clone(),
                format!(
                    "CPUs {} are in isolcpus=, nohz_full= and rcu_nocbs={unreadable}",
                    vm.cpus
                ),
            );
        }
        // Kept from the host another way: cgroups at runtime, or tuned.
        let mut ways = Vec::new();
        if let Some((allowed, how)) = &self.cgroups {
            if !allowed.intersects(&vm.cpus) {
                ways.push(format!("cgroups ({how})"));
            }
        }
        if let Some(tuned) = self.tuned.as_ref().filter(|t| vm.cpus.is_subset(t)) {
            ways.push(format!("tuned's cpu-partitioning (isolated_cores={tuned})"));
        }
        if !ways.is_empty() {
            let ticks = if vm.cpus.is_subset(&self.nohz_full) {
                String::new()
            } else {
                format!(
                    "; the timer tick still runs on {} (nohz_full= is a boot option)",
                    vm.cpus.difference(&self.nohz_full)
                )
            };
            return Check::new(
                id,
                Status::Pass,
                vm.name.clone(),
                format!(
                    "CPUs {} are kept from the host by {}{ticks}{unreadable}",
                    vm.cpus,
                    ways.join(" and ")
                ),
            );
        }
        let lacks: Vec<String> = missing
            .iter()
            .map(|(key, m)| format!("{key}= lacks {m}"))
            .collect();
        // One line for the whole plan: the parameter's CPUs plus every VM's.
        let add: Vec<String> = missing
            .iter()
            .map(|(key, _)| match *key {
                "isolcpus" => {
                    let flags = if self.iso_flags.is_empty() {
                        vec!["managed_irq".to_owned(), "domain".to_owned()]
                    } else {
                        self.iso_flags.clone()
                    };
                    format!(
                        "isolcpus={}",
                        with_flags(&flags, &self.isolcpus.union(all_vm).difference(reserved))
                    )
                }
                "nohz_full" => format!(
                    "nohz_full={}",
                    self.nohz_full.union(all_vm).difference(reserved)
                ),
                _ => format!(
                    "rcu_nocbs={}",
                    self.rcu_given.union(all_vm).difference(reserved)
                ),
            })
            .collect();
        Check::new(
            id,
            Status::Warn,
            vm.name.clone(),
            format!(
                "CPUs {} are not all isolated: {}; the scheduler, timer ticks and RCU callbacks can interrupt the poll-mode threads{unreadable}",
                vm.cpus,
                lacks.join(", ")
            ),
        )
        .hint(format!(
            "now, without a reboot: pinplan isolate --plan {plan_arg}; or at boot, add to the \
             kernel command line (replacing any existing value): {}",
            add.join(" ")
        ))
    }
}

fn with_flags(flags: &[String], cpus: &CpuSet) -> String {
    let mut items = flags.to_vec();
    items.push(cpus.to_string());
    items.join(",")
}

/// The fields of a `pinplan isolate` journal that say which writes the
/// kernel refused (the rest of the journal is isolate's business).
#[derive(serde::Deserialize)]
struct IsolateRecord {
    changes: Vec<RecordedChange>,
}

#[derive(serde::Deserialize)]
struct RecordedChange {
    #[serde(default)]
    path: Option<std::path::PathBuf>,
    status: String,
    #[serde(default)]
    reason: Option<String>,
}

impl crate::host::journal::Body for IsolateRecord {
    const TOOL: crate::host::journal::Tool = crate::host::journal::Tool::Isolate;
}

/// The IRQs whose `smp_affinity_list` write the kernel refused to the
/// isolation in effect (`ROOT/run/pinplan/active` names its journal), with
/// the kernel's reason: moving them again is refused again. Empty when no
/// isolation is in effect or its journal cannot be read.
fn refused_irqs(fs: &Fs) -> BTreeMap<u32, String> {
    let Some(journal) = fs.text("run/pinplan/active") else {
        return BTreeMap::new();
    };
    let Ok(record) =
        crate::host::journal::read::<IsolateRecord>(std::path::Path::new(journal.trim()))
    else {
        return BTreeMap::new();
    };
    record
        .body
        .changes
        .into_iter()
        .filter(|c| c.status == "refused")
        .filter_map(|c| {
            let path = c.path?;
            let mut parts = path.iter().rev();
            let (file, number, irq) = (parts.next()?, parts.next()?, parts.next()?);
            let number = number.to_str()?.parse().ok()?;
            (file == "smp_affinity_list" && irq == "irq").then(|| {
                let reason = c.reason.unwrap_or_else(|| "refused".to_owned());
                (number, reason)
            })
        })
        .collect()
}

/// `irq-affinity`: IRQs whose `smp_affinity_list` includes a VM's CPU.
pub(super) fn irq_affinity(host: &Host<'_>, fs: &Fs) -> Check {
    let id = CheckId::IrqAffinity;
    let Some(plan) = host.plan else {
        return no_plan(id, "irqs", "which CPUs must stay free of IRQs");
    };
    let Some(irqs) = fs.irqs() else {
        return Check::new(
            id,
            Status::Skip,
            "irqs",
            "no /proc/irq to read IRQ affinity from",
        );
    };
    let vm = vm_cpus(plan);
    if vm.is_empty() {
        return Check::new(id, Status::Pass, "irqs", "the plan places no VM");
    }
    let hits: Vec<_> = irqs
        .iter()
        .filter(|irq| irq.affinity.intersects(&vm))
        .collect();
    if hits.is_empty() {
        return Check::new(
            id,
            Status::Pass,
            "irqs",
            format!("none of {} IRQs may run on the VMs' CPUs {vm}", irqs.len()),
        );
    }
    let host_cpus = if plan.host.reserved_cpus.is_empty() {
        fs.online_cpus()
            .map(|online| online.difference(&vm))
            .filter(|c| !c.is_empty())
            .map_or_else(|| "HOSTCPUS".to_owned(), |c| c.to_string())
    } else {
        plan.host.reserved_cpus.to_string()
    };
    let listed: Vec<String> = hits
        .iter()
        .map(|irq| match &irq.name {
            Some(name) => format!("{} ({name}) on {}", irq.number, irq.affinity),
            None => format!("{} on {}", irq.number, irq.affinity),
        })
        .collect();
    let refused = refused_irqs(fs);
    let numbers: Vec<String> = hits
        .iter()
        .filter(|irq| !refused.contains_key(&irq.number))
        .map(|irq| irq.number.to_string())
        .collect();
    let commands = if numbers.is_empty() {
        String::new()
    } else if numbers.len() <= 8 {
        numbers
            .iter()
            .map(|n| format!("echo {host_cpus} > /proc/irq/{n}/smp_affinity_list"))
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        format!(
            "for n in {}; do echo {host_cpus} > /proc/irq/$n/smp_affinity_list; done",
            numbers.join(" ")
        )
    };
    Check::new(
        id,
        Status::Warn,
        "irqs",
        format!(
            "{} of {} IRQs may run on the VMs' CPUs {vm}: {}",
            hits.len(),
            irqs.len(),
            // A line that fits: the first few, then how many more.
            if listed.len() > 6 {
                format!("{} and {} more", listed[..6].join(", "), listed.len() - 6)
            } else {
                listed.join(", ")
            }
        ),
    )
    .hint(irq_hint(&commands, &hits, &refused, &vm))
}

/// The fix: the writes to make, then the IRQs the kernel refused to move
/// (never a write it refused again), kept off the VM CPUs at boot instead.
fn irq_hint(
    commands: &str,
    hits: &[&crate::host::irq::Irq],
    refused: &BTreeMap<u32, String>,
    vm: &CpuSet,
) -> String {
    let cannot: Vec<String> = hits
        .iter()
        .filter_map(|irq| {
            let reason = refused.get(&irq.number)?;
            Some(match &irq.name {
                Some(name) => format!("{} ({name}): {reason}", irq.number),
                None => format!("{}: {reason}", irq.number),
            })
        })
        .collect();
    let mut parts = Vec::new();
    if !commands.is_empty() {
        parts.push(format!(
            "{commands} (stop irqbalance or set IRQBALANCE_BANNED_CPULIST={vm} so that it does not move them back; managed IRQs refuse the write: isolcpus=managed_irq keeps them off)"
        ));
    }
    if !cannot.is_empty() {
        let (irqs, they) = if cannot.len() == 1 {
            ("IRQ", "it")
        } else {
            ("IRQs", "they")
        };
        parts.push(format!(
            "the kernel refused pinplan isolate's write to {irqs} {}, so {they} cannot be moved (managed and per-CPU IRQs refuse it): at boot, isolcpus=managed_irq,domain,{vm} on the kernel command line keeps managed IRQs off the VM CPUs",
            cannot.join(", ")
        ));
    }
    parts.join("; ")
}

/// `kernel.sched_rt_runtime_us` (`None`: no such file, or not a number),
/// and whether RT group scheduling is on (`cpu.rt_runtime_us` exists): with
/// it and a runtime other than -1, libvirt's cgroups get no RT runtime.
pub(super) fn rt_runtime(fs: &Fs) -> (Option<i64>, bool) {
    let runtime = fs
        .text("proc/sys/kernel/sched_rt_runtime_us")
        .and_then(|t| t.parse().ok());
    let group_sched = fs.text("sys/fs/cgroup/cpu/cpu.rt_runtime_us").is_some();
    (runtime, group_sched)
}

/// `realtime`: with real-time vCPUs in the plan, whether the kernel lets
/// libvirt give them SCHED_FIFO and keeps them running: RT throttling off
/// (`kernel.sched_rt_runtime_us = -1`; with RT group scheduling a cgroup
/// without RT runtime refuses FIFO outright, which libvirt's do), and a
/// PREEMPT_RT kernel or `nohz_full=` on their CPUs.
pub(super) fn realtime(host: &Host<'_>, fs: &Fs) -> Vec<Check> {
    let Some(plan) = host.plan else {
        return Vec::new();
    };
    let rt: Vec<&VmPlan> = plan
        .vms
        .iter()
        .filter(|v| v.realtime_vcpus.is_some())
        .collect();
    if rt.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = rt.iter().map(|v| v.name.as_str()).collect();
    let mut checks = vec![throttling(fs, &names)];
    let version = fs.text("proc/sys/kernel/version").unwrap_or_default();
    let preempt_rt =
        fs.text("sys/kernel/realtime").as_deref() == Some("1") || version.contains("PREEMPT_RT");
    let online = fs.online_cpus().unwrap_or_default();
    let nohz = host
        .cmdline
        .as_ref()
        .and_then(|c| c.cpu_list("nohz_full", &online))
        .and_then(Result::ok)
        .unwrap_or_default();
    checks.extend(rt.into_iter().map(|vm| tick(vm, preempt_rt, &nohz)));
    checks
}

/// Whether RT throttling lets the FIFO vCPUs of `names` start and run.
fn throttling(fs: &Fs, names: &[&str]) -> Check {
    let id = CheckId::Realtime;
    let period = fs
        .text("proc/sys/kernel/sched_rt_period_us")
        .and_then(|p| p.parse::<i64>().ok())
        .unwrap_or(1_000_000);
    let (runtime, group_sched) = rt_runtime(fs);
    match runtime {
        Some(-1) => Check::new(
            id,
            Status::Pass,
            "throttling",
            "kernel.sched_rt_runtime_us = -1: FIFO vCPUs are not throttled",
        ),
        Some(us) => {
            let stopped_ms = (period - us).max(0) / 1000;
            let fix = "sysctl -w kernel.sched_rt_runtime_us=-1 (and kernel.sched_rt_runtime_us = -1 in /etc/sysctl.d/ for the next boot)";
            let check = if group_sched {
                Check::new(
                    id,
                    Status::Fail,
                    "throttling",
                    format!(
                        "kernel.sched_rt_runtime_us = {us} with RT group scheduling (cpu.rt_runtime_us): libvirt's cgroups get no RT runtime, so starting {} fails with \"Cannot set scheduler parameters: Operation not permitted\"",
                        names.join(", ")
                    ),
                )
            } else {
                Check::new(
                    id,
                    Status::Warn,
                    "throttling",
                    format!(
                        "kernel.sched_rt_runtime_us = {us} of {period}: the FIFO vCPUs of {} are stopped {stopped_ms} ms of every {} ms",
                        names.join(", "),
                        period / 1000
                    ),
                )
            };
            check.hint(fix)
        }
        _ => Check::new(
            id,
            Status::Skip,
            "throttling",
            "no proc/sys/kernel/sched_rt_runtime_us to read",
        ),
    }
}

/// Whether the timer tick leaves `vm`'s real-time vCPUs alone: a
/// PREEMPT_RT kernel, or their CPUs in `nohz_full=`.
fn tick(vm: &VmPlan, preempt_rt: bool, nohz: &CpuSet) -> Check {
    let id = CheckId::Realtime;
    let cpus: CpuSet = vm
        .vcpus
        .iter()
        .filter(|p| {
            vm.realtime_vcpus
                .as_ref()
                .is_some_and(|r| r.contains(crate::ids::CpuId(p.vcpu)))
        })
        .map(|p| p.cpu)
        .collect();
    let ticking = cpus.difference(nohz);
    if preempt_rt {
        Check::new(id, Status::Pass, vm.name.clone(), "a PREEMPT_RT kernel")
    } else if ticking.is_empty() {
        Check::new(
            id,
            Status::Pass,
            vm.name.clone(),
            format!("its real-time vCPUs' CPUs {cpus} are in nohz_full="),
        )
    } else {
        Check::new(
            id,
            Status::Warn,
            vm.name.clone(),
            format!(
                "neither a PREEMPT_RT kernel nor nohz_full= on CPUs {ticking} of its real-time vCPUs: the timer tick interrupts them (about 1,000 times a second at HZ=1000)"
            ),
        )
        .hint(format!(
            "boot a PREEMPT_RT kernel (linux-image-rt-amd64, kernel-rt), or add nohz_full={} (pinplan isolate --emit kernel-args)",
            nohz.union(&cpus)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testroot::{find, plan, TestRoot, Vm};
    use super::super::{CheckId, Status};

    #[test]
    fn smt_off_fails_only_when_the_plan_needs_siblings() {
        let require = plan("0,4", &[Vm::new("vm1", "1-3,5-7", "require", 2)]);
        let isolate = plan("0,4", &[Vm::new("vm1", "1-3", "isolate", 1)]);
        for (control, plan, status, hint) in [
            (
                "off",
                Some(require.clone()),
                Status::Fail,
                Some("echo on > /sys/devices/system/cpu/smt/control"),
            ),
            (
                "forceoff",
                Some(require.clone()),
                Status::Fail,
                Some("remove nosmt=force"),
            ),
            (
                "notsupported",
                Some(require.clone()),
                Status::Fail,
                Some("firmware"),
            ),
            ("off", Some(isolate.clone()), Status::Pass, None),
            ("on", Some(require.clone()), Status::Pass, None),
            ("off", None, Status::Pass, None),
        ] {
            let root = TestRoot::new(&format!("smt-{control}-{status:?}-{}", plan.is_some()));
            root.file(
                "sys/devices/system/cpu/smt/control",
                &format!("{control}\n"),
            );
            let c = root.check(plan, CheckId::Smt, "host");
            assert_eq!(c.status, status, "{control}: {}", c.message);
            assert!(
                c.message.contains(&format!("smt/control: {control}")),
                "{}",
                c.message
            );
            if status == Status::Fail {
                assert!(
                    c.message
                        .contains("vm1 (threads = require, guest threads = 2)"),
                    "{}",
                    c.message
                );
            }
            match hint {
                Some(h) => assert!(c.hint.unwrap_or_default().contains(h), "{control}"),
                None => assert_eq!(c.hint, None),
            }
        }
        // Guest threads = 2 alone (threads = "prefer") also needs siblings.
        let root = TestRoot::new("smt-prefer");
        root.file("sys/devices/system/cpu/smt/control", "off\n");
        let prefer = plan("0", &[Vm::new("vm1", "2-3", "prefer", 2)]);
        assert_eq!(
            root.check(Some(prefer), CheckId::Smt, "host").status,
            Status::Fail
        );
        let absent = TestRoot::new("smt-absent");
        assert_eq!(
            absent.check(None, CheckId::Smt, "host").status,
            Status::Skip
        );
    }

    #[test]
    fn isolation_against_isolcpus_with_flags() {
        let the_plan = plan(
            "0-1",
            &[
                Vm::new("vm1", "2-5", "isolate", 1),
                Vm::new("vm2", "6-7", "isolate", 1),
            ],
        );
        let root = TestRoot::new("isolation");
        root.file(
            "proc/cmdline",
            "ro isolcpus=domain,managed_irq,2-5 nohz_full=2-5 rcu_nocbs=2-5 quiet\n",
        );
        let report = root.run(Some(the_plan.clone()), &[]);
        assert_eq!(
            find(&report, CheckId::Isolation, "host").status,
            Status::Pass
        );
        let c = find(&report, CheckId::Isolation, "vm1");
        assert_eq!(c.status, Status::Pass, "{}", c.message);
        let c = find(&report, CheckId::Isolation, "vm2");
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.message
                .contains("isolcpus= lacks 6-7, nohz_full= lacks 6-7, rcu_nocbs= lacks 6-7"),
            "{}",
            c.message
        );
        assert_eq!(
            c.hint.as_deref(),
            Some("now, without a reboot: pinplan isolate --plan PLAN.json; or at boot, add to the kernel command line (replacing any existing value): isolcpus=domain,managed_irq,2-7 nohz_full=2-7 rcu_nocbs=2-7")
        );

        // Nothing isolated: the suggested isolcpus keeps managed IRQs off too;
        // nohz_full implies rcu_nocbs.
        let root = TestRoot::new("isolation-none");
        root.file("proc/cmdline", "ro nohz_full=2-7\n");
        let c = root.check(Some(the_plan.clone()), CheckId::Isolation, "vm1");
        assert_eq!(c.status, Status::Warn);
        assert!(!c.message.contains("rcu_nocbs="), "{}", c.message);
        assert!(c
            .hint
            .unwrap_or_default()
            .ends_with(": isolcpus=managed_irq,domain,2-7"));

        // The host's reserved CPUs isolated: fail.
        let root = TestRoot::new("isolation-host");
        root.file("proc/cmdline", "isolcpus=0-7 nohz_full=1-7 rcu_nocbs=0-7\n");
        let report = root.run(Some(the_plan.clone()), &[]);
        let c = find(&report, CheckId::Isolation, "host");
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.message.contains("reserved CPUs 0-1 are isolated"),
            "{}",
            c.message
        );
        assert_eq!(
            c.hint.as_deref(),
            Some("on the kernel command line: isolcpus=2-7 nohz_full=2-7")
        );
        assert_eq!(
            find(&report, CheckId::Isolation, "vm1").status,
            Status::Pass
        );

        // Without a plan, or without a command line: skip.
        assert_eq!(
            root.check(None, CheckId::Isolation, "vms").status,
            Status::Skip
        );
        let bare = TestRoot::new("isolation-bare");
        assert_eq!(
            bare.check(Some(the_plan), CheckId::Isolation, "host")
                .status,
            Status::Skip
        );
    }

    #[test]
    fn an_irq_allowed_on_a_vm_cpu_warns_with_the_command_to_move_it() {
        let the_plan = plan("0-1", &[Vm::new("vm1", "2-3", "isolate", 1)]);
        let root = TestRoot::new("irq");
        root.file(
            "proc/interrupts",
            "            CPU0       CPU1       CPU2       CPU3\n  24:          1          0          0          0  IO-APIC   5-edge      ACPI:Ged\n  42:          0          9          7          0  PCI-MSIX-0000:65:00.0   1-edge      mlx5_comp0@pci:0000:65:00.0\n",
        );
        root.file("proc/irq/24/smp_affinity_list", "0-1\n");
        root.file("proc/irq/42/smp_affinity_list", "0-3\n");
        root.file("proc/irq/default_smp_affinity", "f\n");
        let c = root.check(Some(the_plan.clone()), CheckId::IrqAffinity, "irqs");
        assert_eq!(c.status, Status::Warn);
        assert_eq!(
            c.message,
            "1 of 2 IRQs may run on the VMs' CPUs 2-3: 42 (mlx5_comp0@pci:0000:65:00.0) on 0-3"
        );
        assert!(c
            .hint
            .unwrap_or_default()
            .starts_with("echo 0-1 > /proc/irq/42/smp_affinity_list (stop irqbalance"));

        root.file("proc/irq/42/smp_affinity_list", "1\n");
        let c = root.check(Some(the_plan.clone()), CheckId::IrqAffinity, "irqs");
        assert_eq!(
            (c.status, c.message.as_str()),
            (Status::Pass, "none of 2 IRQs may run on the VMs' CPUs 2-3")
        );

        // Many IRQs: one loop; no reserved CPUs: the online ones the VMs do not own.
        let open = plan("", &[Vm::new("vm1", "2-3", "isolate", 1)]);
        root.file("sys/devices/system/cpu/online", "0-3\n");
        for n in 100..110 {
            root.file(&format!("proc/irq/{n}/smp_affinity_list"), "0-3\n");
        }
        let c = root.check(Some(open), CheckId::IrqAffinity, "irqs");
        assert_eq!(c.status, Status::Warn);
        assert!(c.hint.unwrap_or_default().starts_with(
            "for n in 100 101 102 103 104 105 106 107 108 109; do echo 0-1 > /proc/irq/$n/smp_affinity_list; done"
        ));
        assert_eq!(
            root.check(None, CheckId::IrqAffinity, "irqs").status,
            Status::Skip
        );
    }
}
