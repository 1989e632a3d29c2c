//! The text form of a [`Report`]: summary, conflict table, host map, and
//! with a plan its moves and effect.

use super::{Conflict, Report, Severity};
use crate::ids::CpuId;
use crate::tenant::{Tenant, TenantKind};
use crate::topology::HostTopology;

impl Report {
    /// A summary line, the conflict table, the host map (in ANSI colour when
    /// `colour`), and with a plan its moves and effect.
    pub fn to_text(&self, host: &HostTopology, colour: bool) -> String {
        let errors = self
            .conflicts
            .iter()
            .filter(|c| c.severity == Severity::Error)
            .count();
        let warnings = self.conflicts.len() - errors;
        let mut out = format!(
            "{} tenant{}, {errors} error{}, {warnings} warning{}\n",
            self.tenants.len(),
            if self.tenants.len() == 1 { "" } else { "s" },
            if errors == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" }
        );
        match &self.host_cpus {
            Some(cpus) => out.push_str(&format!("host CPUs: {cpus}\n")),
            None => out.push_str(&format!("{}\n", super::HOST_CPUS_UNKNOWN)),
        }
        if !self.conflicts.is_empty() {
            out.push('\n');
            out.push_str(&conflict_table(&self.conflicts));
        }
        out.push_str(&format!(
            "\nhost map (tenant/vCPU, emu = emulator only; ! error, ? warning; - free; x not usable):\n{}",
            self.host_map(host, colour)
        ));
        let floating: Vec<&str> = self
            .tenants
            .iter()
            .filter(|t| !t.pinned)
            .map(|t| t.name.as_str())
            .collect();
        if !floating.is_empty() {
            out.push_str(&format!(
                "  not pinned (on no CPU above, on all of them in fact): {}\n",
                floating.join(", ")
            ));
        }
        if let Some(live) = self.live.as_ref().filter(|l| !l.stray_threads.is_empty()) {
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
        for note in self.notes.iter().filter(|n| *n != super::HOST_CPUS_UNKNOWN) {
            out.push_str(&format!("note: {note}\n"));
        }
        if let Some(effect) = &self.plan {
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
        out
    }

    /// One row per core: each CPU's tenant, conflicts marked.
    fn host_map(&self, host: &HostTopology, colour: bool) -> String {
        use crate::topology::map::{Cell, Paint};
        let in_conflict = |cpu: CpuId, severity: Severity| {
            self.conflicts.iter().any(|c| {
                c.severity == severity
                    && c.kind != super::ConflictKind::Floating
                    && c.cpus.contains(cpu)
            })
        };
        let pinned: Vec<(usize, &Tenant)> = self
            .tenants
            .iter()
            .filter(|t| t.pinned)
            .enumerate()
            .collect();
        let usable_cpus = host.usable_cpus();
        crate::topology::map::render(host, 8, colour, |cpu| {
            let mut names = Vec::new();
            let mut paint = Paint::Plain;
            for (i, t) in &pinned {
                if t.kind == TenantKind::Host {
                    if t.cpus.contains(cpu) {
                        names.push("host".to_owned());
                        paint = Paint::Host;
                    }
                    continue;
                }
                let on: Vec<u32> = t
                    .vcpus
                    .iter()
                    .filter(|v| v.cpus.contains(cpu))
                    .map(|v| v.vcpu)
                    .collect();
                let only_here = t
                    .vcpus
                    .iter()
                    .any(|v| v.cpus.len() == 1 && v.cpus.contains(cpu));
                if on.len() == 1 && only_here {
                    names.push(format!("{}/{}", t.name, on[0]));
                } else if !on.is_empty() {
                    names.push(t.name.clone());
                } else if t.emulator_cpus.contains(cpu) && t.emulator_cpus != usable_cpus {
                    names.push(format!("{}/emu", t.name));
                } else {
                    continue;
                }
                paint = Paint::Tenant(*i);
            }
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

fn conflict_table(conflicts: &[Conflict]) -> String {
    let mut out = String::new();
    for c in conflicts {
        let severity = match c.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        out.push_str(&format!(
            "{severity:<8} {:<17} {:<20} cpus {:<12} {}\n",
            c.kind,
            c.tenants.join(","),
            c.cpus.to_string(),
            c.message
        ));
    }
    out
}
