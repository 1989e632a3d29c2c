//! Overlap analysis: who is pinned where now, and which CPUs and physical
//! cores tenants share. Reads domain XML into [`Tenant`]s and finds
//! [`Conflict`]s against a [`HostTopology`], compares them with a [`Plan`]
//! ([`Move`]s, conflicts removed) and prints the text form with a host map.
//! Reading live libvirt domains is the caller's business.

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::plan::{Plan, VmPlan};
use crate::topology::pci_parse_int as parse_int;
use crate::topology::{HostTopology, PciAddress};
use crate::xml::{self, Element};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Who a tenant is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TenantKind {
    /// The host's own CPUs.
    Host,
    /// A VM (libvirt domain).
    Vm,
}

/// One vCPU's allowed CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VcpuCpus {
    /// Guest vCPU.
    pub vcpu: u32,
    /// Host CPUs it may run on.
    pub cpus: CpuSet,
}

/// A domain's `<numatune><memory>`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct MemoryTune {
    /// `strict`, `preferred`, `interleave` or `restrictive`.
    pub mode: String,
    /// Host NUMA nodes, e.g. `0-1`.
    pub nodeset: String,
}

/// One I/O thread's allowed CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IothreadCpus {
    /// libvirt I/O thread id (1-based).
    pub iothread: u32,
    /// Host CPUs it may run on.
    pub cpus: CpuSet,
}

/// A tenant's current pinning.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tenant {
    /// Name (`host` for the host).
    pub name: String,
    /// Host or VM.
    pub kind: TenantKind,
    /// Each vCPU's allowed CPUs (vcpupin, else `<vcpu cpuset>`, else every CPU).
    pub vcpus: Vec<VcpuCpus>,
    /// The CPUs its vCPUs may run on, together.
    pub cpus: CpuSet,
    /// emulatorpin (else the `<vcpu cpuset>`, else every CPU).
    pub emulator_cpus: CpuSet,
    /// Each I/O thread's CPUs (iothreadpin, else the `<vcpu cpuset>`, else
    /// every CPU).
    pub iothreads: Vec<IothreadCpus>,
    /// PCI addresses of its passed-through devices (`<hostdev>`,
    /// `<interface type='hostdev'>`), e.g. `0000:65:00.2`.
    pub nics: Vec<PciAddress>,
    /// Whether any pin keeps it off some usable CPU (a VM with no pinning, or
    /// pinned to every CPU, floats).
    pub pinned: bool,
    /// `<numatune><memory mode nodeset>`, when set.
    pub memory: Option<MemoryTune>,
}

/// How bad a conflict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Throughput collapses: fix it.
    Error,
    /// Worth a look.
    Warning,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conflict {
    /// `cpu-shared`, `core-shared`, `host-overlap`, `emulator-overlap`,
    /// `floating`, `numa-split`, `nic-remote`.
    pub kind: String,
    /// Error or warning.
    pub severity: Severity,
    /// The tenants involved.
    pub tenants: Vec<String>,
    /// The CPUs involved.
    pub cpus: CpuSet,
    /// One line: why.
    pub message: String,
}

/// Why a domain XML could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct DomainError {
    /// The file.
    pub source_name: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn cpuset_attr(source: &str, e: &Element, attr: &str) -> Result<Option<CpuSet>, DomainError> {
    match e.attr(attr) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|err| DomainError {
            source_name: source.to_owned(),
            line: e.line,
            message: format!("<{}> {attr}: {err}", e.name),
        }),
    }
}

/// Reads a tenant from a domain XML (`virsh dumpxml`).
pub fn tenant_from_domain(
    source: &str,
    text: &str,
    host: &HostTopology,
) -> Result<Tenant, DomainError> {
    let doc = xml::parse(text).map_err(|e| DomainError {
        source_name: source.to_owned(),
        line: e.line,
        message: e.message,
    })?;
    let bad = |e: &Element, message: String| DomainError {
        source_name: source.to_owned(),
        line: e.line,
        message,
    };
    if doc.name != "domain" {
        return Err(bad(
            &doc,
            format!("the root element is <{}>, not <domain>", doc.name),
        ));
    }
    let name = doc
        .child("name")
        .map(|n| n.text.clone())
        .ok_or_else(|| bad(&doc, "the domain has no <name>".to_owned()))?;
    let vcpu = doc
        .child("vcpu")
        .ok_or_else(|| bad(&doc, "the domain has no <vcpu>".to_owned()))?;
    let count: u32 = vcpu
        .text
        .trim()
        .parse()
        .map_err(|_| bad(vcpu, format!("<vcpu> holds {:?}, not a count", vcpu.text)))?;
    let all = host.usable_cpus();
    let default = cpuset_attr(source, vcpu, "cpuset")?;
    let mut pins: BTreeMap<u32, CpuSet> = BTreeMap::new();
    let mut io_pins: BTreeMap<u32, CpuSet> = BTreeMap::new();
    let mut emulator = None;
    if let Some(cputune) = doc.child("cputune") {
        for pin in cputune.children_named("iothreadpin") {
            let id: u32 = pin
                .attr("iothread")
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| bad(pin, "<iothreadpin> without an iothread number".to_owned()))?;
            if let Some(set) = cpuset_attr(source, pin, "cpuset")? {
                io_pins.insert(id, set);
            }
        }
        for pin in cputune.children_named("vcpupin") {
            let id: u32 = pin
                .attr("vcpu")
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| bad(pin, "<vcpupin> without a vcpu number".to_owned()))?;
            if let Some(set) = cpuset_attr(source, pin, "cpuset")? {
                pins.insert(id, set);
            }
        }
        if let Some(e) = cputune.child("emulatorpin") {
            emulator = cpuset_attr(source, e, "cpuset")?;
        }
    }
    // Pinned means held off some CPU: a pin to every CPU (what libvirt keeps
    // after re-pinning a vCPU to all CPUs) floats like no pin at all.
    let narrows = |set: &CpuSet| !all.is_subset(set);
    let pinned = default
        .iter()
        .chain(pins.values())
        .chain(emulator.iter())
        .any(narrows);
    let fallback = default.clone().unwrap_or_else(|| all.clone());
    let iothread_count: u32 = match doc.child("iothreads") {
        None => 0,
        Some(e) => e
            .text
            .trim()
            .parse()
            .map_err(|_| bad(e, format!("<iothreads> holds {:?}, not a count", e.text)))?,
    };
    let mut iothread_ids: BTreeSet<u32> = (1..=iothread_count).collect();
    if let Some(ids) = doc.child("iothreadids") {
        iothread_ids = ids
            .children_named("iothread")
            .filter_map(|t| t.attr("id").and_then(|v| v.trim().parse().ok()))
            .collect();
    }
    iothread_ids.extend(io_pins.keys());
    let iothreads = iothread_ids
        .into_iter()
        .map(|iothread| IothreadCpus {
            iothread,
            cpus: io_pins
                .get(&iothread)
                .cloned()
                .unwrap_or_else(|| fallback.clone()),
        })
        .collect();
    let nics = passthrough_devices(&doc);
    let vcpus: Vec<VcpuCpus> = (0..count)
        .map(|vcpu| VcpuCpus {
            vcpu,
            cpus: pins.get(&vcpu).cloned().unwrap_or_else(|| fallback.clone()),
        })
        .collect();
    let cpus = vcpus
        .iter()
        .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus));
    let memory = doc
        .child("numatune")
        .and_then(|n| n.child("memory"))
        .map(|m| MemoryTune {
            mode: m.attr("mode").unwrap_or("strict").to_owned(),
            nodeset: m.attr("nodeset").unwrap_or("").to_owned(),
        });
    Ok(Tenant {
        name,
        kind: TenantKind::Vm,
        vcpus,
        cpus,
        emulator_cpus: emulator.unwrap_or(fallback),
        iothreads,
        nics,
        pinned,
        memory,
    })
}

/// PCI addresses of a domain's passed-through devices, as `DDDD:BB:DD.F`.
fn passthrough_devices(doc: &Element) -> Vec<PciAddress> {
    let Some(devices) = doc.child("devices") else {
        return Vec::new();
    };
    let pci = devices
        .children_named("hostdev")
        .filter(|h| h.attr("type") == Some("pci"))
        .chain(
            devices
                .children_named("interface")
                .filter(|i| i.attr("type") == Some("hostdev")),
        );
    let mut out: Vec<PciAddress> = pci
        .filter_map(|d| d.path(&["source", "address"]))
        .filter_map(|a| {
            // A missing domain is domain 0, as libvirt reads it.
            PciAddress::from_libvirt(|name| match a.attr(name) {
                Some(v) => parse_int(v),
                None => (name == "domain").then_some(0),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The host as a tenant of its own CPUs.
pub fn host_tenant(cpus: &CpuSet) -> Tenant {
    Tenant {
        name: "host".to_owned(),
        kind: TenantKind::Host,
        vcpus: Vec::new(),
        cpus: cpus.clone(),
        emulator_cpus: CpuSet::new(),
        iothreads: Vec::new(),
        nics: Vec::new(),
        pinned: true,
        memory: None,
    }
}

/// One thread a plan moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Move {
    /// The VM.
    pub vm: String,
    /// `vcpu`, `emulator` or `iothread`.
    pub thread: String,
    /// The vCPU or I/O thread number (none for the emulator).
    pub id: Option<u32>,
    /// Its CPUs now (none when the thread does not exist yet, e.g. a VM
    /// that is not defined or has fewer vCPUs).
    pub from: Option<CpuSet>,
    /// Its CPUs under the plan.
    pub to: CpuSet,
}

/// What applying a plan would do to the conflicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEffect {
    /// Conflicts now that the plan removes.
    pub resolved: Vec<Conflict>,
    /// Conflicts now that stay under the plan (with their CPUs after it).
    pub remaining: Vec<Conflict>,
    /// Conflicts the plan would add.
    pub introduced: Vec<Conflict>,
}

/// The host's own CPUs by the kernel command line: every usable CPU not in
/// `isolcpus=`; `None` without `isolcpus=`.
pub fn host_cpus_from_cmdline(
    cmdline: &crate::cmdline::KernelCmdline,
    host: &HostTopology,
) -> Result<Option<CpuSet>, crate::cmdline::CmdlineError> {
    let usable = host.usable_cpus();
    cmdline
        .cpu_list("isolcpus", &usable)
        .transpose()
        .map(|isolated| isolated.map(|i| usable.difference(&i)))
}

/// What `pinplan report --format json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Every tenant (the host first).
    pub tenants: Vec<Tenant>,
    /// Every conflict, errors first.
    pub conflicts: Vec<Conflict>,
    /// Threads a plan would move (empty without a plan).
    pub moves: Vec<Move>,
    /// With a plan: which conflicts it removes, leaves and adds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanEffect>,
}

impl Report {
    /// The report of `tenants` on `host`, compared with `plan` when given.
    pub fn new(host: &HostTopology, tenants: Vec<Tenant>, plan: Option<&Plan>) -> Report {
        let conflicts = conflicts(host, &tenants);
        let (moves, effect) = match plan {
            None => (Vec::new(), None),
            Some(plan) => {
                let after = self::conflicts(host, &planned_tenants(&tenants, plan));
                let key = |c: &Conflict| (c.kind.clone(), c.tenants.clone());
                let before_keys: BTreeSet<_> = conflicts.iter().map(key).collect();
                let after_keys: BTreeSet<_> = after.iter().map(key).collect();
                let effect = PlanEffect {
                    resolved: conflicts
                        .iter()
                        .filter(|c| !after_keys.contains(&key(c)))
                        .cloned()
                        .collect(),
                    remaining: after
                        .iter()
                        .filter(|c| before_keys.contains(&key(c)))
                        .cloned()
                        .collect(),
                    introduced: after
                        .iter()
                        .filter(|c| !before_keys.contains(&key(c)))
                        .cloned()
                        .collect(),
                };
                (moves(&tenants, plan), Some(effect))
            }
        };
        Report {
            tenants,
            conflicts,
            moves,
            plan: effect,
        }
    }

    /// Whether any conflict is an error (exit status 1).
    pub fn has_errors(&self) -> bool {
        self.conflicts.iter().any(|c| c.severity == Severity::Error)
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

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
            "{} tenants, {errors} error{}, {warnings} warning{}\n",
            self.tenants.len(),
            if errors == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" }
        );
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
                    None => m.thread.clone(),
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
        use crate::hostmap::{Cell, Paint};
        let in_conflict = |cpu: CpuId, severity: Severity| {
            self.conflicts
                .iter()
                .any(|c| c.severity == severity && c.kind != "floating" && c.cpus.contains(cpu))
        };
        let pinned: Vec<(usize, &Tenant)> = self
            .tenants
            .iter()
            .filter(|t| t.pinned)
            .enumerate()
            .collect();
        let usable_cpus = host.usable_cpus();
        crate::hostmap::render(host, 8, colour, |cpu| {
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

/// A planned VM as a tenant (its NICs and memory mode from `now`, if known).
fn planned_tenant(vm: &VmPlan, now: Option<&Tenant>) -> Tenant {
    let vcpus: Vec<VcpuCpus> = vm
        .vcpus
        .iter()
        .map(|p| VcpuCpus {
            vcpu: p.vcpu,
            cpus: std::iter::once(p.cpu).collect(),
        })
        .collect();
    let nodes: CpuSet = vm.numa_nodes.iter().map(|n| CpuId(n.0)).collect();
    Tenant {
        name: vm.name.clone(),
        kind: TenantKind::Vm,
        cpus: vcpus.iter().fold(CpuSet::new(), |a, v| a.union(&v.cpus)),
        vcpus,
        emulator_cpus: vm.emulator_cpus.clone(),
        iothreads: vm
            .iothreads
            .iter()
            .map(|t| IothreadCpus {
                iothread: t.iothread,
                cpus: t.cpus.clone(),
            })
            .collect(),
        nics: now.map(|t| t.nics.clone()).unwrap_or_default(),
        pinned: true,
        memory: (!nodes.is_empty()).then(|| MemoryTune {
            mode: "strict".to_owned(),
            nodeset: nodes.to_string(),
        }),
    }
}

/// The tenants as they would be under `plan`: the plan's reserved CPUs as the
/// host, its VMs as planned, every other tenant as it is now.
pub fn planned_tenants(now: &[Tenant], plan: &Plan) -> Vec<Tenant> {
    let mut out = Vec::new();
    if !plan.host.reserved_cpus.is_empty() {
        out.push(host_tenant(&plan.host.reserved_cpus));
    }
    let find = |name: &str| {
        now.iter()
            .find(|t| t.kind == TenantKind::Vm && t.name == name)
    };
    for t in now.iter().filter(|t| t.kind == TenantKind::Vm) {
        match plan.vms.iter().find(|v| v.name == t.name) {
            Some(vm) => out.push(planned_tenant(vm, Some(t))),
            None => out.push(t.clone()),
        }
    }
    for vm in plan.vms.iter().filter(|v| find(&v.name).is_none()) {
        out.push(planned_tenant(vm, None));
    }
    for f in plan.fixed.iter().filter(|f| find(&f.name).is_none()) {
        let mut t = host_tenant(&f.cpus);
        t.name = f.name.clone();
        t.kind = TenantKind::Vm;
        out.push(t);
    }
    out
}

/// Every thread of the plan's VMs whose CPUs would change, in plan order.
pub fn moves(now: &[Tenant], plan: &Plan) -> Vec<Move> {
    let mut out = Vec::new();
    for vm in &plan.vms {
        let current = now
            .iter()
            .find(|t| t.kind == TenantKind::Vm && t.name == vm.name);
        let mut push = |thread: &str, id: Option<u32>, from: Option<CpuSet>, to: CpuSet| {
            if from.as_ref() != Some(&to) {
                out.push(Move {
                    vm: vm.name.clone(),
                    thread: thread.to_owned(),
                    id,
                    from,
                    to,
                });
            }
        };
        for pin in &vm.vcpus {
            let from = current.and_then(|t| {
                t.vcpus
                    .iter()
                    .find(|v| v.vcpu == pin.vcpu)
                    .map(|v| v.cpus.clone())
            });
            push(
                "vcpu",
                Some(pin.vcpu),
                from,
                std::iter::once(pin.cpu).collect(),
            );
        }
        push(
            "emulator",
            None,
            current.map(|t| t.emulator_cpus.clone()),
            vm.emulator_cpus.clone(),
        );
        for io in &vm.iothreads {
            let from = current.and_then(|t| {
                t.iothreads
                    .iter()
                    .find(|i| i.iothread == io.iothread)
                    .map(|i| i.cpus.clone())
            });
            push("iothread", Some(io.iothread), from, io.cpus.clone());
        }
    }
    out
}

fn core_of(host: &HostTopology) -> BTreeMap<CpuId, CoreId> {
    host.pus
        .iter()
        .filter_map(|p| p.core.map(|c| (p.cpu, c)))
        .collect()
}

/// Every conflict among `tenants` on `host`, in a stable order.
pub fn conflicts(host: &HostTopology, tenants: &[Tenant]) -> Vec<Conflict> {
    let mut out = Vec::new();
    let core = core_of(host);
    let pinned: Vec<&Tenant> = tenants.iter().filter(|t| t.pinned).collect();
    for t in tenants.iter().filter(|t| !t.pinned) {
        out.push(Conflict {
            kind: "floating".to_owned(),
            severity: Severity::Warning,
            tenants: vec![t.name.clone()],
            cpus: t.cpus.clone(),
            message: format!(
                "{} is not pinned: its vCPUs can run on any CPU, next to anyone",
                t.name
            ),
        });
    }
    for (i, a) in pinned.iter().enumerate() {
        for b in pinned.iter().skip(i + 1) {
            let names = vec![a.name.clone(), b.name.clone()];
            let shared = a.cpus.intersection(&b.cpus);
            let host_pair = a.kind == TenantKind::Host || b.kind == TenantKind::Host;
            if !shared.is_empty() {
                let (kind, message) = if host_pair {
                    let vm = if a.kind == TenantKind::Host {
                        &b.name
                    } else {
                        &a.name
                    };
                    (
                        "host-overlap",
                        format!("{vm} runs vCPUs on the host's CPUs {shared}"),
                    )
                } else {
                    (
                        "cpu-shared",
                        format!(
                            "{} and {} have vCPUs on the same CPUs {shared}",
                            a.name, b.name
                        ),
                    )
                };
                out.push(Conflict {
                    kind: kind.to_owned(),
                    severity: Severity::Error,
                    tenants: names.clone(),
                    cpus: shared.clone(),
                    message,
                });
            }
            // Siblings: different CPUs of one physical core.
            let cores_a: BTreeMap<CoreId, CpuSet> = group_by_core(&a.cpus, &core);
            let cores_b: BTreeMap<CoreId, CpuSet> = group_by_core(&b.cpus, &core);
            let mut sibling_cpus = CpuSet::new();
            let mut sibling_cores = BTreeSet::new();
            for (c, ca) in &cores_a {
                if let Some(cb) = cores_b.get(c) {
                    let only_a = ca.difference(cb);
                    let only_b = cb.difference(ca);
                    if !only_a.is_empty() || !only_b.is_empty() {
                        sibling_cpus = sibling_cpus.union(&ca.union(cb));
                        sibling_cores.insert(*c);
                    }
                }
            }
            if !sibling_cores.is_empty() {
                let cores: Vec<String> = sibling_cores.iter().map(|c| c.to_string()).collect();
                out.push(Conflict {
                    kind: "core-shared".to_owned(),
                    severity: Severity::Error,
                    tenants: names,
                    cpus: sibling_cpus.clone(),
                    message: format!(
                        "{} and {} run on SMT siblings of core{} {} (CPUs {sibling_cpus}): noisy neighbours",
                        a.name,
                        b.name,
                        if cores.len() == 1 { "" } else { "s" },
                        cores.join(",")
                    ),
                });
            }
        }
    }
    // Emulator threads on vCPU CPUs.
    for t in tenants
        .iter()
        .filter(|t| t.kind == TenantKind::Vm && t.pinned)
    {
        for other in tenants
            .iter()
            .filter(|o| o.kind == TenantKind::Vm && o.pinned)
        {
            let shared = t.emulator_cpus.intersection(&other.cpus);
            if !shared.is_empty() {
                let whose = if other.name == t.name {
                    "its own".to_owned()
                } else {
                    format!("{}'s", other.name)
                };
                out.push(Conflict {
                    kind: "emulator-overlap".to_owned(),
                    severity: Severity::Warning,
                    tenants: if other.name == t.name {
                        vec![t.name.clone()]
                    } else {
                        vec![t.name.clone(), other.name.clone()]
                    },
                    cpus: shared.clone(),
                    message: format!(
                        "{}'s emulator threads run on {whose} vCPU CPUs {shared}",
                        t.name
                    ),
                });
            }
        }
    }
    // NUMA: vCPUs on several nodes under strict memory, or memory elsewhere.
    let node_of: BTreeMap<CpuId, NodeId> = host
        .pus
        .iter()
        .filter_map(|p| p.numa_node.map(|n| (p.cpu, n)))
        .collect();
    for t in tenants
        .iter()
        .filter(|t| t.kind == TenantKind::Vm && t.pinned)
    {
        let nodes: BTreeSet<NodeId> = t
            .cpus
            .iter()
            .filter_map(|c| node_of.get(&c).copied())
            .collect();
        let listed: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        let MemoryTune { mode, nodeset } = t.memory.clone().unwrap_or_default();
        let memory_nodes: BTreeSet<NodeId> = nodeset
            .parse::<CpuSet>()
            .map(|s| s.iter().map(|c| NodeId(c.0)).collect())
            .unwrap_or_default();
        let split = nodes.len() > 1 && mode == "strict";
        let elsewhere =
            !memory_nodes.is_empty() && !nodes.is_empty() && memory_nodes.is_disjoint(&nodes);
        if split || elsewhere {
            out.push(Conflict {
                kind: "numa-split".to_owned(),
                severity: Severity::Warning,
                tenants: vec![t.name.clone()],
                cpus: t.cpus.clone(),
                message: if split {
                    format!(
                        "{}'s vCPUs span NUMA nodes {} under strict memory",
                        t.name,
                        listed.join(",")
                    )
                } else {
                    format!(
                        "{}'s memory is on node(s) {nodeset}, its vCPUs on {}",
                        t.name,
                        listed.join(",")
                    )
                },
            });
        }
    }
    for t in tenants
        .iter()
        .filter(|t| t.kind == TenantKind::Vm && t.pinned)
    {
        for nic in &t.nics {
            let Some(nic_node) = nic_node(host, nic) else {
                continue;
            };
            let remote: CpuSet = t
                .cpus
                .iter()
                .filter(|c| node_of.get(c).is_some_and(|n| *n != nic_node))
                .collect();
            if !remote.is_empty() {
                out.push(Conflict {
                    kind: "nic-remote".to_owned(),
                    severity: Severity::Warning,
                    tenants: vec![t.name.clone()],
                    cpus: remote.clone(),
                    message: format!(
                        "{}'s vCPUs on CPUs {remote} are on another NUMA node than its NIC {nic} (node {nic_node})",
                        t.name
                    ),
                });
            }
        }
    }
    out.sort_by(|a, b| (a.severity, &a.kind, &a.tenants).cmp(&(b.severity, &b.kind, &b.tenants)));
    out
}

/// The NUMA node of a PCI device: its own, else that of another function of
/// the same physical device (a VF's PF often is the only function a
/// topology lists).
fn nic_node(host: &HostTopology, wanted: &PciAddress) -> Option<NodeId> {
    let same_slot = |a: &PciAddress| {
        a.domain == wanted.domain && a.bus == wanted.bus && a.device == wanted.device
    };
    host.pci
        .iter()
        .find(|d| d.address == *wanted)
        .and_then(|d| d.numa_node)
        .or_else(|| {
            host.pci
                .iter()
                .filter(|d| same_slot(&d.address))
                .find_map(|d| d.numa_node)
        })
}

fn group_by_core(cpus: &CpuSet, core: &BTreeMap<CpuId, CoreId>) -> BTreeMap<CoreId, CpuSet> {
    let mut out: BTreeMap<CoreId, CpuSet> = BTreeMap::new();
    for cpu in cpus.iter() {
        if let Some(c) = core.get(&cpu) {
            out.entry(*c).or_default().insert(cpu);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{self, Source};

    fn host() -> HostTopology {
        // Siblings N and N+4, like servers (not adjacent).
        topology::load(&Source::Synthetic(
            "package:1 core:4 pu:2(indexes=2*4:1*2)".into(),
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    }

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
            .map(|c| (c.kind.clone(), c.tenants.clone(), c.cpus.to_string()))
            .collect()
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
        assert!(
            found.contains(&expect("floating", &["loose"], "0-7")),
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

    #[test]
    fn a_pin_to_every_cpu_floats() -> Result<(), DomainError> {
        let h = host();
        let all = tenant_from_domain("a.xml", &domain("vm1", &[(0, "0-7")], Some("0-7")), &h)?;
        assert!(!all.pinned);
        let one = tenant_from_domain("b.xml", &domain("vm1", &[(0, "0-7")], Some("0")), &h)?;
        assert!(one.pinned);
        Ok(())
    }

    #[test]
    fn the_host_keeps_what_isolcpus_leaves() {
        use crate::cmdline::KernelCmdline;
        let h = host();
        let c = KernelCmdline::parse("ro isolcpus=managed_irq,domain,1-3,5-7");
        assert_eq!(
            host_cpus_from_cmdline(&c, &h).map(|s| s.map(|s| s.to_string())),
            Ok(Some("0,4".to_owned()))
        );
        assert_eq!(
            host_cpus_from_cmdline(&KernelCmdline::parse("ro"), &h),
            Ok(None)
        );
        assert!(host_cpus_from_cmdline(&KernelCmdline::parse("isolcpus=x"), &h).is_err());
    }

    #[test]
    fn bad_domains_name_the_line() {
        let h = host();
        let err = tenant_from_domain("x.xml", "<domain>\n<name>a</name>\n<vcpu>2</vcpu>\n<cputune><vcpupin vcpu='0' cpuset='3-1'/></cputune></domain>", &h);
        assert_eq!(err.err().map(|e| e.line), Some(4));
        let err = tenant_from_domain("x.xml", "<network/>", &h);
        assert!(err.is_err());
    }
}
