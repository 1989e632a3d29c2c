//! The plan as JSON (the contract) and as the text `pinplan plan` prints.

use super::{FixedKind, Plan, SolverKind, Status};
use crate::ids::CpuId;
use crate::solve::ThreadPolicy;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Its name in the plan (`isolate`, `require`, `prefer`), as the spec gives
/// it.
impl std::fmt::Display for ThreadPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Plan {
    /// The JSON contract.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

// Writing to a String cannot fail: the printing below ignores `writeln!`'s result.
impl Plan {
    /// The text printed by `pinplan plan`: a summary, a table per VM, the
    /// unplaced VMs with explanations, and a map of the host (one row per core,
    /// the tenant of each CPU).
    pub fn to_text(&self, host: &crate::topology::HostTopology) -> String {
        let mut out = String::new();
        self.write_headline(&mut out);
        self.write_vm_table(&mut out);
        self.write_unplaced(&mut out);
        self.write_hugepages(&mut out);
        self.write_host_map(&mut out, host);
        out
    }

    /// Per node and page size: the huge pages the plan needs, what is free,
    /// and how to allocate what is missing (now, or at boot).
    fn write_hugepages(&self, out: &mut String) {
        if self.hugepages.is_empty() {
            return;
        }
        let _ = writeln!(out, "\nhuge pages the placed VMs need, per node:");
        for a in &self.hugepages {
            let size = crate::memory::human(a.size_kib.saturating_mul(1024));
            let free = a
                .free
                .map_or_else(|| "free unknown".to_owned(), |f| format!("{f} free"));
            let verdict = match (&a.command, a.free) {
                (None, _) => "enough".to_owned(),
                (Some(command), Some(_)) => format!("allocate {} more: {command}", a.missing),
                (Some(command), None) => {
                    format!("the source does not say; to have them: {command}")
                }
            };
            let _ = writeln!(
                out,
                "  node {}, {size} pages: {} needed, {free}: {verdict}",
                a.node, a.needed
            );
        }
        for args in &self.hugepages_boot_args {
            let _ = writeln!(
                out,
                "  or at boot (kernel command line; the per-node form needs Linux 5.7+): {args}"
            );
        }
    }

    /// `plan for SOURCE: STATUS, N of M VMs placed (…); host reserved: …`.
    fn write_headline(&self, out: &mut String) {
        let placed = self.vms.len();
        let total = placed + self.unplaced.len();
        let status = match self.status {
            Status::Optimal => "optimal",
            Status::Feasible => "feasible",
            Status::Infeasible => "infeasible (not every VM fits)",
        };
        let proof = match (self.solver, self.proven, self.solve_seconds) {
            (SolverKind::Greedy, _, _) => String::new(),
            _ if self.status == Status::Optimal => String::new(),
            (_, true, _) => ", proven optimal".to_owned(),
            (_, false, Some(s)) => format!(", best found in {s:.1} s, not proven"),
            (_, false, None) => ", not proven optimal".to_owned(),
        };
        let _ = writeln!(
            out,
            "plan for {}: {status}{proof}, {placed} of {total} VMs placed ({} solver{}); host reserved: {}",
            self.host.source,
            self.solver,
            match &self.backend {
                Some(b) => format!(", {b}"),
                None => String::new(),
            },
            if self.host.reserved_cpus.is_empty() {
                "none".to_owned()
            } else {
                format!("cpus {}", self.host.reserved_cpus)
            }
        );
    }

    /// One row per placed VM, then the fixed tenants. Columns are as wide as
    /// their widest cell (at least the usual width), so long names and CPU
    /// lists never push the next column out of line.
    fn write_vm_table(&self, out: &mut String) {
        let _ = writeln!(out);
        let header = [
            "vm", "vcpus", "cores", "threads", "cpus", "nodes", "emulator", "rate",
        ];
        let mut rows: Vec<[String; 8]> = Vec::new();
        for vm in &self.vms {
            let nodes: Vec<String> = vm.numa_nodes.iter().map(|n| n.to_string()).collect();
            let rate = vm.demand.as_ref().map_or_else(
                || "-".to_owned(),
                |d| {
                    format!(
                        "{} G {} ({} of {} G)",
                        d.predicted_gbps,
                        match d.basis {
                            crate::demand::Basis::Measured => "measured",
                            crate::demand::Basis::Model => "model",
                        },
                        d.profile,
                        d.target_gbps
                    )
                },
            );
            rows.push([
                if vm.kept {
                    format!("{} (kept)", vm.name)
                } else {
                    vm.name.clone()
                },
                vm.vcpus.len().to_string(),
                vm.cores.len().to_string(),
                vm.threads.to_string(),
                vm.cpus.to_string(),
                nodes.join(","),
                vm.emulator_cpus.to_string(),
                rate,
            ]);
        }
        let mut widths = [16, 5, 5, 8, 16, 10, 9, 0];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row).take(7) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 8]| {
            let mut text = String::new();
            for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
                let cell = match i {
                    0 => format!("{cell:<w$}"),
                    1 | 2 => format!(" {cell:>w$}"),
                    7 => format!(" {cell}"),
                    _ => format!(" {cell:<w$}"),
                };
                text.push_str(&cell);
            }
            text
        };
        let _ = writeln!(out, "{}", line(header));
        for row in &rows {
            let _ = writeln!(out, "{}", line(std::array::from_fn(|i| row[i].as_str())));
        }
        for f in &self.fixed {
            let what = match f.kind {
                FixedKind::Spec => "fixed",
                FixedKind::Running => "runs",
                FixedKind::ShutOff => "shut off, config",
            };
            let _ = writeln!(out, "{:<16} {what} on cpus {}", f.name, f.cpus);
        }
        if !self.moves.is_empty() {
            let _ = writeln!(out, "\nmoves (running VMs re-pinned live by apply):");
            for m in &self.moves {
                let _ = writeln!(
                    out,
                    "  {:<16} vcpu {:<4} {} -> {}",
                    m.vm, m.vcpu, m.from, m.to
                );
            }
        }
    }

    /// The summary, why each unplaced VM did not fit, and the warnings.
    fn write_unplaced(&self, out: &mut String) {
        if let Some(summary) = &self.summary {
            let _ = writeln!(out, "\n{summary}");
        }
        // Free cores per node are the same for every unplaced VM: printed
        // once, then one line per VM.
        let mut shown: Option<&Vec<crate::model::Message>> = None;
        for e in &self.explanations {
            if shown != Some(&e.free) {
                for line in &e.free {
                    let _ = writeln!(out, "  {line}");
                }
                shown = Some(&e.free);
            }
            let _ = writeln!(out, "unplaced: {}", e.message);
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
    }

    /// The map: each CPU's tenant.
    fn write_host_map(&self, out: &mut String, host: &crate::topology::HostTopology) {
        let tenant = self.tenants(host);
        let _ = writeln!(
            out,
            "\nhost map (tenant/vCPU; idle = owned but unused; - = free; x = not usable):"
        );
        let map = crate::topology::map::render(host, 12, false, |cpu| crate::topology::map::Cell {
            text: match tenant.get(&cpu) {
                Some(t) => t.clone(),
                None if host.pu(cpu).is_some_and(|p| p.usable) => "-".to_owned(),
                None => "x".to_owned(),
            },
            paint: crate::topology::map::Paint::Plain,
            mark: None,
        });
        out.push_str(&map);
    }

    /// Each CPU's label on the map: `host`, a fixed tenant, `vm/3`,
    /// `vm/emu` or `vm(idle)`.
    fn tenants(&self, host: &crate::topology::HostTopology) -> BTreeMap<CpuId, String> {
        let mut tenant: BTreeMap<CpuId, String> = BTreeMap::new();
        for cpu in self.host.reserved_cpus.iter() {
            tenant.insert(cpu, "host".to_owned());
        }
        // Tenants planned around may share CPUs as they run: each is named.
        for f in &self.fixed {
            for cpu in f.cpus.iter() {
                tenant
                    .entry(cpu)
                    .and_modify(|t| {
                        t.push('+');
                        t.push_str(&f.name);
                    })
                    .or_insert_with(|| f.name.clone());
            }
        }
        for vm in &self.vms {
            for cpu in vm.cpus.iter() {
                tenant.insert(cpu, format!("{}(idle)", vm.name));
            }
            for pin in &vm.vcpus {
                tenant.insert(pin.cpu, format!("{}/{}", vm.name, pin.vcpu));
            }
            if vm.emulator_cpus.len() == 1 && vm.emulator_cpus.is_subset(&vm.cpus) {
                for cpu in vm.emulator_cpus.iter() {
                    tenant.insert(cpu, format!("{}/emu", vm.name));
                }
            }
        }
        // A core with a tenant's CPU is that tenant's whole: mark the siblings.
        for core in &host.cores {
            let owner = core.cpus.iter().find_map(|cpu| tenant.get(&cpu).cloned());
            if let Some(owner) = owner {
                let base = owner.split(['/', '(']).next().unwrap_or(&owner).to_owned();
                for cpu in core.cpus.iter() {
                    if host.pu(cpu).is_some_and(|p| p.usable) {
                        tenant.entry(cpu).or_insert_with(|| format!("{base}(idle)"));
                    }
                }
            }
        }
        tenant
    }
}
