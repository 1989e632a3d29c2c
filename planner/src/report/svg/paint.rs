//! What the picture says about each CPU: the tenants on it (vCPUs, or only
//! emulator and I/O threads), their colours, and the conflicts drawn on it,
//! worked out once from the report in [`Paint::new`].

use super::colour::{HOST_GREY, PALETTE};
use super::layout::CELL_FONT;
use super::text::text_w;
use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::report::{Report, Severity};
use crate::tenant::{Tenant, TenantKind};
use crate::topology::HostTopology;
use std::collections::{BTreeMap, BTreeSet};

/// What sits on one CPU: a tenant's vCPUs, or only its emulator or I/O
/// threads.
#[derive(Debug, Clone, Copy)]
pub(super) struct Occupant {
    pub(super) tenant: usize,
    pub(super) emulator_only: bool,
}

/// A VM's emulator and I/O threads, where they are pinned apart from
/// "anywhere" (`tenant_from_domain` gives an unpinned thread every usable
/// CPU: hatching the whole host with it would hide everything else).
#[derive(Debug, Clone, Default)]
pub(super) struct Helpers {
    pub(super) emulator: Option<CpuSet>,
    pub(super) iothreads: Vec<(u32, CpuSet)>,
}

impl Helpers {
    pub(super) fn of(t: &Tenant, usable: &CpuSet) -> Helpers {
        let pinned = |cpus: &CpuSet| t.pinned && !cpus.is_empty() && cpus != usable;
        Helpers {
            emulator: Some(t.emulator_cpus.clone()).filter(pinned),
            iothreads: t
                .iothreads
                .iter()
                .filter(|io| pinned(&io.cpus))
                .map(|io| (io.iothread, io.cpus.clone()))
                .collect(),
        }
    }

    /// Each pinned thread with its CPUs: `emulator`, `iothread N`.
    pub(super) fn threads(&self) -> Vec<(String, &CpuSet)> {
        let mut out: Vec<(String, &CpuSet)> = Vec::new();
        if let Some(cpus) = &self.emulator {
            out.push(("emulator".to_owned(), cpus));
        }
        for (id, cpus) in &self.iothreads {
            out.push((format!("iothread {id}"), cpus));
        }
        out
    }

    pub(super) fn cpus(&self) -> CpuSet {
        self.threads()
            .iter()
            .fold(CpuSet::new(), |acc, (_, cpus)| acc.union(cpus))
    }
}

/// Everything a drawing step needs to know about tenants and conflicts.
pub(super) struct Paint<'a> {
    pub(super) host: &'a HostTopology,
    pub(super) report: &'a Report,
    /// Colour of each tenant, by index in `report.tenants`.
    pub(super) colours: Vec<&'static str>,
    /// Each tenant's pinned emulator and I/O threads.
    pub(super) helpers: Vec<Helpers>,
    pub(super) occupants: BTreeMap<CpuId, Vec<Occupant>>,
    /// Per CPU, per tenant: the vCPUs that may run there.
    pub(super) vcpus_on: BTreeMap<CpuId, BTreeMap<usize, Vec<u32>>>,
    /// Per CPU, per tenant: the emulator and I/O threads that may run there.
    pub(super) helpers_on: BTreeMap<CpuId, BTreeMap<usize, Vec<String>>>,
    /// Per CPU: the conflicts drawn on it (by index), and the worst severity.
    pub(super) conflicts_on: BTreeMap<CpuId, Vec<usize>>,
    pub(super) worst: BTreeMap<CpuId, Severity>,
    /// Conflicts that cover every CPU (an unpinned VM): listed, not outlined.
    pub(super) everywhere: Vec<bool>,
    pub(super) cell_w: i64,
}

impl<'a> Paint<'a> {
    pub(super) fn new(host: &'a HostTopology, report: &'a Report) -> Paint<'a> {
        let usable = host.usable_cpus();
        let mut vm_index = 0;
        let colours = report
            .tenants
            .iter()
            .map(|t| match t.kind {
                TenantKind::Host => HOST_GREY,
                TenantKind::Vm => {
                    let c = PALETTE[vm_index % PALETTE.len()];
                    vm_index += 1;
                    c
                }
            })
            .collect();
        let helpers: Vec<Helpers> = report
            .tenants
            .iter()
            .map(|t| Helpers::of(t, &usable))
            .collect();

        let mut occupants: BTreeMap<CpuId, Vec<Occupant>> = BTreeMap::new();
        let mut vcpus_on: BTreeMap<CpuId, BTreeMap<usize, Vec<u32>>> = BTreeMap::new();
        let mut helpers_on: BTreeMap<CpuId, BTreeMap<usize, Vec<String>>> = BTreeMap::new();
        for (i, (t, h)) in report.tenants.iter().zip(&helpers).enumerate() {
            if !t.pinned {
                continue;
            }
            for cpu in t.cpus.iter() {
                occupants.entry(cpu).or_default().push(Occupant {
                    tenant: i,
                    emulator_only: false,
                });
            }
            for cpu in h.cpus().difference(&t.cpus).iter() {
                occupants.entry(cpu).or_default().push(Occupant {
                    tenant: i,
                    emulator_only: true,
                });
            }
            for (thread, cpus) in h.threads() {
                for cpu in cpus.iter() {
                    helpers_on
                        .entry(cpu)
                        .or_default()
                        .entry(i)
                        .or_default()
                        .push(thread.clone());
                }
            }
            for v in &t.vcpus {
                for cpu in v.cpus.iter() {
                    vcpus_on
                        .entry(cpu)
                        .or_default()
                        .entry(i)
                        .or_default()
                        .push(v.vcpu);
                }
            }
        }
        // vCPU occupants first, then emulator-only ones, each in tenant order.
        for list in occupants.values_mut() {
            list.sort_by_key(|o| (o.emulator_only, o.tenant));
        }

        let floating: BTreeSet<&str> = report
            .tenants
            .iter()
            .filter(|t| !t.pinned)
            .map(|t| t.name.as_str())
            .collect();
        let everywhere: Vec<bool> = report
            .conflicts
            .iter()
            .map(|c| {
                !c.tenants.is_empty() && c.tenants.iter().all(|n| floating.contains(n.as_str()))
            })
            .collect();
        let mut conflicts_on: BTreeMap<CpuId, Vec<usize>> = BTreeMap::new();
        let mut worst: BTreeMap<CpuId, Severity> = BTreeMap::new();
        for (i, c) in report.conflicts.iter().enumerate() {
            if everywhere[i] {
                continue;
            }
            for cpu in c.cpus.iter() {
                conflicts_on.entry(cpu).or_default().push(i);
                let w = worst.entry(cpu).or_insert(c.severity);
                // Error sorts before Warning.
                *w = (*w).min(c.severity);
            }
        }

        let digits = host
            .pus
            .iter()
            .map(|p| p.cpu.0.to_string().len())
            .max()
            .unwrap_or(1);
        let cell_w = (text_w(&"0".repeat(digits), CELL_FONT) + 12).max(34);
        Paint {
            host,
            report,
            colours,
            helpers,
            occupants,
            vcpus_on,
            helpers_on,
            conflicts_on,
            worst,
            everywhere,
            cell_w,
        }
    }

    pub(super) fn colour(&self, tenant: usize) -> &'static str {
        self.colours.get(tenant).copied().unwrap_or(HOST_GREY)
    }

    pub(super) fn fill(&self, o: Occupant) -> String {
        if o.emulator_only {
            format!("url(#emu-{})", o.tenant)
        } else {
            self.colour(o.tenant).to_owned()
        }
    }
}
