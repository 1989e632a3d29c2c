//! The text form of a [`Report`]: summary, conflict table, host map, and
//! with a plan its moves and effect.

use super::conflicts::{floating_threads, floats};
use super::{Conflict, ConflictKind, Report, Severity};
use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::tenant::{Tenant, TenantKind, TenantState, VcpuCpus};
use crate::topology::HostTopology;

impl Report {
    /// A summary line, the conflict table, the host map (in ANSI colour when
    /// `colour`), and with a plan its moves and effect.
    pub fn to_text(&self, host: &HostTopology, colour: bool) -> String {
        let shut_off: Vec<&Tenant> = self
            .tenants
            .iter()
            .filter(|t| t.state == TenantState::ShutOff)
            .collect();
        let mut out = self.summary(shut_off.len());
        if !self.conflicts.is_empty() {
            out.push('\n');
            out.push_str(&conflict_table(&self.conflicts));
        }
        out.push_str(&format!(
            "\nhost map (tenant/vCPU, emu = emulator only, ~ = may run there, not pinned; ! error, ? warning; - free; x not usable):\n{}",
            self.host_map(host, colour)
        ));
        if !shut_off.is_empty() {
            out.push_str(&shut_off_line(&shut_off));
        }
        self.push_stray_threads(&mut out);
        for note in self.notes.iter().filter(|n| *n != super::HOST_CPUS_UNKNOWN) {
            out.push_str(&format!("note: {note}\n"));
        }
        self.push_plan(&mut out);
        out
    }

    /// The first lines: tenants, errors and warnings counted, the host's CPUs.
    fn summary(&self, shut_off: usize) -> String {
        let errors = self
            .conflicts
            .iter()
            .filter(|c| c.severity == Severity::Error)
            .count();
        let warnings = self.conflicts.len() - errors;
        let mut out = format!(
            "{} tenant{}{}, {errors} error{}, {warnings} warning{}\n",
            self.tenants.len(),
            if self.tenants.len() == 1 { "" } else { "s" },
            if shut_off == 0 {
                String::new()
            } else {
                format!(" ({shut_off} shut off)")
            },
            if errors == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" }
        );
        match &self.host_cpus {
            Some(cpus) => out.push_str(&format!("host CPUs: {cpus}\n")),
            None => out.push_str(&format!("{}\n", super::HOST_CPUS_UNKNOWN)),
        }
        out
    }

    /// The live host's threads that are not a VM's on VM CPUs, busiest
    /// first, as a table (nothing when there are none).
    fn push_stray_threads(&self, out: &mut String) {
        let Some(live) = self.live.as_ref().filter(|l| !l.stray_threads.is_empty()) else {
            return;
        };
        let width = live
            .stray_threads
            .iter()
            .map(|t| t.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(4);
        out.push_str(&format!(
            "\nstray threads on VM CPUs ({} of {}, busiest first):\n{:>8} {:>8} {:<width$} {:<12} {}\n",
            live.stray_threads.len(),
            live.stray_threads_total,
            "tid",
            "pid",
            "name",
            "affinity",
            "on VM CPUs"
        ));
        for t in &live.stray_threads {
            out.push_str(&format!(
                "{:>8} {:>8} {:<width$} {:<12} {}\n",
                t.tid,
                t.pid,
                t.name,
                t.affinity.to_string(),
                t.on_vm_cpus
            ));
        }
    }

    /// With a plan: its moves, and the conflicts it removes, leaves and adds.
    fn push_plan(&self, out: &mut String) {
        let Some(effect) = &self.plan else {
            return;
        };
        out.push_str(&format!(
            "\nplan: {} move{}; it removes {} conflict{}, leaves {}, adds {}\n",
            self.moves.len(),
            if self.moves.len() == 1 { "" } else { "s" },
            effect.resolved.len(),
            if effect.resolved.len() == 1 { "" } else { "s" },
            effect.remaining.len(),
            effect.introduced.len()
        ));
        for m in &self.moves {
            let thread = match m.id {
                Some(id) => format!("{} {id}", m.thread),
                None => m.thread.to_string(),
            };
            let from = m
                .from
                .as_ref()
                .map_or_else(|| "(new)".to_owned(), |f| f.to_string());
            out.push_str(&format!(
                "  {:<16} {thread:<12} {from:>12} -> {}\n",
                m.vm, m.to
            ));
        }
        for (title, list) in [
            ("removes", &effect.resolved),
            ("leaves", &effect.remaining),
            ("adds", &effect.introduced),
        ] {
            if !list.is_empty() {
                out.push_str(&format!("\nthe plan {title}:\n"));
                out.push_str(&conflict_table(list));
            }
        }
    }

    /// One row per core: each CPU's running tenants, conflicts marked. A
    /// VM's threads that float are on every CPU they may run on, as `vm~`
    /// where nothing pinned of it is.
    fn host_map(&self, host: &HostTopology, colour: bool) -> String {
        use crate::topology::map::{Cell, Paint};
        let in_conflict = |cpu: CpuId, severity: Severity| {
            self.conflicts.iter().any(|c| {
                c.severity == severity
                    && c.cpus.contains(cpu)
                    // A floating warning covers every CPU: marking them all
                    // would say nothing.
                    && !(c.kind == ConflictKind::Floating && c.severity == Severity::Warning)
            })
        };
        let usable_cpus = host.usable_cpus();
        let running: Vec<(usize, &Tenant)> = self
            .tenants
            .iter()
            .filter(|t| t.state == TenantState::Running)
            .enumerate()
            .collect();
        crate::topology::map::render(host, 8, colour, |cpu| {
            let mut names = Vec::new();
            // Who may run there unpinned comes after who is pinned there.
            let mut floating = Vec::new();
            let mut paint = Paint::Plain;
            for (i, t) in &running {
                if t.kind == TenantKind::Host {
                    if t.cpus.contains(cpu) {
                        names.push("host".to_owned());
                        paint = Paint::Host;
                    }
                    continue;
                }
                match on_cpu(t, cpu, &usable_cpus) {
                    Some(OnCpu::Pinned(name)) => {
                        names.push(name);
                        paint = Paint::Tenant(*i);
                    }
                    Some(OnCpu::Floating(name)) => {
                        floating.push(name);
                        if names.is_empty() {
                            paint = Paint::Tenant(*i);
                        }
                    }
                    None => {}
                }
            }
            names.extend(floating);
            let usable = host.pu(cpu).is_some_and(|p| p.usable);
            let (paint, mark) = if in_conflict(cpu, Severity::Error) {
                (Paint::Error, Some('!'))
            } else if in_conflict(cpu, Severity::Warning) {
                (Paint::Warning, Some('?'))
            } else if !usable {
                (Paint::Dim, None)
            } else {
                (paint, None)
            };
            let text = if !names.is_empty() {
                names.join("+")
            } else if usable {
                "-".to_owned()
            } else {
                "x".to_owned()
            };
            Cell { text, paint, mark }
        })
    }
}

/// What a running VM is on `cpu` on the host map: `vm/3` (its vCPU 3 pinned
/// there alone), `vm` (pinned vCPUs allowed there), `vm/emu` (only its
/// pinned emulator), `vm~` (only threads that float: not pinned, they may
/// run there), or nothing.
fn on_cpu(t: &Tenant, cpu: CpuId, usable: &CpuSet) -> Option<OnCpu> {
    let held: Vec<&VcpuCpus> = t
        .vcpus
        .iter()
        .filter(|v| !floats(&v.cpus, usable))
        .collect();
    let on: Vec<u32> = held
        .iter()
        .filter(|v| v.cpus.contains(cpu))
        .map(|v| v.vcpu)
        .collect();
    let only_here = held
        .iter()
        .any(|v| v.cpus.len() == 1 && v.cpus.contains(cpu));
    let floating = usable.contains(cpu) && floating_threads(t, usable).is_some();
    if on.len() == 1 && only_here {
        Some(OnCpu::Pinned(format!("{}/{}", t.name, on[0])))
    } else if !on.is_empty() || (t.vcpus.is_empty() && t.cpus.contains(cpu)) {
        Some(OnCpu::Pinned(t.name.clone()))
    } else if t.emulator_cpus.contains(cpu) && !floats(&t.emulator_cpus, usable) {
        Some(OnCpu::Pinned(format!("{}/emu", t.name)))
    } else if floating {
        Some(OnCpu::Floating(format!("{}~", t.name)))
    } else {
        None
    }
}

/// A VM's cell text on a CPU, by whether something of it is pinned there.
enum OnCpu {
    Pinned(String),
    Floating(String),
}

/// The shut-off tenants, which the map leaves out, with their config pins.
fn shut_off_line(shut_off: &[&Tenant]) -> String {
    let listed: Vec<String> = shut_off
        .iter()
        .map(|t| {
            if t.pinned {
                format!("{} (config: cpus {})", t.name, t.cpus)
            } else {
                format!("{} (config: not pinned)", t.name)
            }
        })
        .collect();
    format!("  shut off, not on the map: {}\n", listed.join(", "))
}

/// One row per conflict. The tenants column is at least 20 wide, and as
/// wide as its longest entry (a floating VM names every tenant it floats
/// over), so that the rows line up.
fn conflict_table(conflicts: &[Conflict]) -> String {
    let width = conflicts
        .iter()
        .map(|c| c.tenants.join(",").chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    let mut out = String::new();
    for c in conflicts {
        let severity = match c.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        out.push_str(&format!(
            "{severity:<8} {:<17} {:<width$} cpus {:<12} {}\n",
            c.kind,
            c.tenants.join(","),
            c.cpus.to_string(),
            c.message
        ));
    }
    out
}
