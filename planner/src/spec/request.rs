//! A checked spec on a concrete host: the reservation and fixed tenants
//! against the host's CPUs, each VM's NIC looked up, vCPU counts from the
//! throughput tables, and the [`PlanRequest`] the solver takes.

use super::{Sizing, Spec, SpecError, VmSpec};
use crate::cpuset::CpuSet;
use crate::demand::{self, DemandOptions};
use crate::ids::{CpuId, NodeId};
use crate::memory::pages::PageRule;
use crate::model::request::{EmulatorPolicy, FixedTenant, PlanRequest, VmRequest};
use crate::model::{ThreadPolicy, Warning, WarningKind};
use crate::plan::PlannedDemand;
use crate::topology::HostTopology;
use std::collections::BTreeSet;

/// What the host keeps of each node's normal memory when the spec does not
/// say (`[host] reserved_memory`): 1 GiB, or a quarter of a smaller node.
pub const DEFAULT_RESERVED_MEMORY: u64 = 1 << 30;

/// A VM's vCPU count, how the tables gave it, and smaller measured
/// configurations reachable by lowering `min_fraction`.
type Sized = (
    u32,
    Option<PlannedDemand>,
    Vec<(String, u32)>,
    Option<(u32, u32)>,
);

/// A request, its warnings, and the VMs that cannot go to its host with why.
pub type EachRequest = (PlanRequest, Vec<Warning>, Vec<(String, SpecError)>);

impl Spec {
    /// Host-dependent checks, demands from the tables, and the solver's input.
    /// Returns the request and warnings (from the tables and the NICs).
    pub fn request(&self, host: HostTopology) -> Result<(PlanRequest, Vec<Warning>), SpecError> {
        self.request_with(host, &std::collections::BTreeMap::new())
    }

    /// [`Spec::request`], with `domains` (name → the defined domain's XML,
    /// read through `plan --connect`) as the defaults of the VMs that have
    /// no `domain_xml`.
    pub fn request_with(
        &self,
        host: HostTopology,
        domains: &std::collections::BTreeMap<String, (String, String)>,
    ) -> Result<(PlanRequest, Vec<Warning>), SpecError> {
        let (request, warnings, refused) = self.request_each(host, domains)?;
        match refused.into_iter().next() {
            Some((_, first)) => Err(first),
            None => Ok((request, warnings)),
        }
    }

    /// [`Spec::request_with`], keeping going past VMs that cannot go to this
    /// host (a required NIC it lacks, a target its tables cannot reach…):
    /// those are returned with their errors, in spec order, instead of the
    /// first failing the whole request. Host-level errors (the reservation,
    /// fixed tenants) still do.
    pub fn request_each(
        &self,
        mut host: HostTopology,
        domains: &std::collections::BTreeMap<String, (String, String)>,
    ) -> Result<EachRequest, SpecError> {
        let mut warnings = Vec::new();
        // The host keeps `reserved_memory` of each node's normal memory for
        // itself (never of its huge page pools): the solver sees the rest.
        for node in &mut host.numa_nodes {
            let Some(size) = node.memory_bytes else {
                continue;
            };
            let reserve = self
                .reserved_memory
                .unwrap_or_else(|| DEFAULT_RESERVED_MEMORY.min(size / 4));
            node.memory_bytes = Some(size.saturating_sub(reserve));
            node.memory_free_bytes = node.memory_free_bytes.map(|f| f.saturating_sub(reserve));
        }
        let reserved = self.reserved(&host)?;
        let fixed = self.fixed_tenants(&host, &reserved)?;
        let mut vms = Vec::new();
        let mut refused = Vec::new();
        for vm in self.vms.iter() {
            let mut own = Vec::new();
            match self.vm_request(vm, &host, &reserved, domains, &mut own) {
                Ok(request) => {
                    warnings.extend(own);
                    vms.push(request);
                }
                Err(e) => refused.push((vm.name.clone(), e)),
            }
        }
        Ok((
            PlanRequest {
                host,
                reserved,
                fixed,
                vms,
                order: Default::default(),
                max_moves: None,
            },
            warnings,
            refused,
        ))
    }

    /// One VM's solver input on `host`.
    fn vm_request(
        &self,
        vm: &VmSpec,
        host: &HostTopology,
        reserved: &CpuSet,
        domains: &std::collections::BTreeMap<String, (String, String)>,
        warnings: &mut Vec<Warning>,
    ) -> Result<VmRequest, SpecError> {
        let nics = self.nic(vm, host, warnings)?;
        let (vcpus, demand, alternatives, table_roles) = self.vcpus(vm, warnings)?;
        let roles = self.roles(vm, vcpus, table_roles, host)?;
        if vm.emulator == EmulatorPolicy::Host && reserved.is_empty() {
            return Err(self.error(
                vm.line,
                "vm.emulator",
                format!("{}: emulator = \"host\" pins the emulator to the host's reserved CPUs, but none are reserved: set reserved_cores or reserved_cpus in [host], or emulator = \"isolate\"", vm.name),
            ));
        }
        Ok(VmRequest {
            name: vm.name.clone(),
            vcpus,
            threads: vm.threads,
            emulator: vm.emulator,
            numa: vm.numa,
            nic: nics.nics.first().copied(),
            nics: nics.nics,
            nic_nodes: nics.nodes,
            nic_affinity: nics.affinity,
            cell_nodes: nics.cells,
            iothreads: vm.iothreads,
            priority: vm.priority,
            demand,
            alternatives,
            memory: self.memory(vm, domains.get(&vm.name), warnings)?,
            roles,
            guest: crate::model::request::GuestOptions {
                cache_aware: vm.cache_aware,
                cache_passthrough: vm.cache_passthrough,
            },
            running: false,
            now: Vec::new(),
        })
    }

    /// The VM's memory: the spec's `memory` and `hugepages`, each defaulting
    /// to its `domain_xml`'s `<memory>` and `<memoryBacking><hugepages>`; a
    /// spec value that differs from the domain's is a warning naming both.
    fn memory(
        &self,
        vm: &VmSpec,
        defined: Option<&(String, String)>,
        warnings: &mut Vec<Warning>,
    ) -> Result<Option<crate::memory::VmMemory>, SpecError> {
        let domain = match (&vm.domain_xml, defined) {
            (Some(path), _) => std::fs::read_to_string(path)
                .map_err(|source| DomainMemoryError::Read {
                    path: path.clone(),
                    source,
                })
                .and_then(|text| domain_memory(&path.display().to_string(), &text))
                .map_err(|m| self.error(vm.line, "vm.domain_xml", format!("{}: {m}", vm.name)))?,
            (None, Some((origin, text))) => domain_memory(origin, text)
                .map_err(|m| self.error(vm.line, "vm.name", format!("{}: {m}", vm.name)))?,
            (None, None) => (None, None),
        };
        let (domain_bytes, domain_page) = domain;
        let whence = if vm.domain_xml.is_some() {
            "its domain_xml"
        } else {
            "its libvirt domain"
        };
        let human = crate::memory::human;
        if let (Some(spec), Some(dom)) = (vm.memory, domain_bytes) {
            if spec != dom {
                warnings.push(Warning::vm(
                    &vm.name,
                    WarningKind::Sizing,
                    format!(
                        "memory = {} in the spec, {} in {whence}: the spec's is planned",
                        human(spec),
                        human(dom)
                    ),
                ));
            }
        }
        let domain_page = match (&domain_page, vm.page_kib) {
            (Some(pages), spec) => self.domain_page(vm, pages, spec, whence, warnings)?,
            (None, _) => None,
        };
        Ok(vm
            .memory
            .or(domain_bytes)
            .map(|bytes| crate::memory::VmMemory {
                bytes,
                page_kib: vm
                    .page_kib
                    .or(domain_page)
                    .unwrap_or(crate::memory::NORMAL_PAGE_KIB),
            }))
    }

    /// The page size a VM's domain gives its memory, when the spec's
    /// `hugepages` (`spec`, KiB) does not say. One size per VM is planned: a
    /// spec size that differs from the domain's is a warning naming the cells
    /// that change; a domain whose cells are on different sizes needs the
    /// spec to choose, rather than the plan moving memory between page sizes
    /// unsaid.
    fn domain_page(
        &self,
        vm: &VmSpec,
        pages: &DomainPages,
        spec: Option<u64>,
        whence: &str,
        warnings: &mut Vec<Warning>,
    ) -> Result<Option<u64>, SpecError> {
        let described = crate::memory::pages::describe(&pages.0);
        match (spec, pages.single()) {
            (Some(spec), Some(dom)) if spec == dom => Ok(None),
            (Some(spec), _) => {
                warnings.push(Warning::vm(
                    &vm.name,
                    WarningKind::Sizing,
                    format!(
                        "the spec's hugepages ({}) differ from {whence}'s ({described}): the spec's are planned for all of its memory, and its <hugepages> is rewritten",
                        crate::memory::pages::size_words(spec)
                    ),
                ));
                Ok(None)
            }
            (None, Some(dom)) => Ok(Some(dom)),
            (None, None) => Err(self.error(
                vm.line,
                "vm.hugepages",
                format!(
                    "{}: {whence} has {described}; pinplan plans one page size per VM: set hugepages (e.g. hugepages = \"1G\") for {} in the spec to choose the size of all its memory, and its <hugepages> is rewritten for it",
                    vm.name, vm.name
                ),
            )),
        }
    }

    /// The host's CPUs: `reserved_cpus` widened to whole cores, or the first
    /// `reserved_cores` usable cores, or none.
    /// The host's reserved CPUs on `host` (`[host] reserved_*`).
    pub fn reserved_cpus(&self, host: &HostTopology) -> Result<CpuSet, SpecError> {
        self.reserved(host)
    }

    fn reserved(&self, host: &HostTopology) -> Result<CpuSet, SpecError> {
        let known: CpuSet = host.pus.iter().map(|p| p.cpu).collect();
        match (&self.reserved_cpus, self.reserved_cores) {
            (Some((set, line)), _) => {
                let missing = set.difference(&known);
                if !missing.is_empty() {
                    return Err(self.error(
                        *line,
                        "host.reserved_cpus",
                        format!("reserved_cpus names CPUs {missing} that {} does not have (its CPUs: {known})", host.source),
                    ));
                }
                // Whole cores: a reserved CPU takes its siblings with it.
                let cores = host.whole_cores(set);
                Ok(host
                    .cores
                    .iter()
                    .filter(|c| cores.contains(&c.id))
                    .flat_map(|c| c.cpus.iter())
                    .chain(set.iter())
                    .collect())
            }
            (None, Some((n, line))) => {
                let usable_cores: Vec<&crate::topology::Core> = host
                    .cores
                    .iter()
                    .filter(|c| {
                        c.cpus
                            .iter()
                            .any(|cpu| host.pu(cpu).is_some_and(|p| p.usable))
                    })
                    .collect();
                if n as usize >= usable_cores.len() {
                    return Err(self.error(
                        line,
                        "host.reserved_cores",
                        format!(
                            "reserved_cores = {n} leaves no core for VMs: {} has {}",
                            host.source,
                            usable_cores.len()
                        ),
                    ));
                }
                Ok(usable_cores
                    .iter()
                    .take(n as usize)
                    .flat_map(|c| c.cpus.iter())
                    .collect())
            }
            (None, None) => match self.reserved_per_node {
                Some((n, line)) => self.reserved_per_node(host, n, line),
                None => Ok(CpuSet::new()),
            },
        }
    }

    /// `reserved_cores_per_node = N`: the N lowest usable cores of every NUMA
    /// node that has usable cores (which nodes get VMs is the plan's answer,
    /// so every node keeps its share); a node that would keep none for VMs
    /// is refused.
    fn reserved_per_node(
        &self,
        host: &HostTopology,
        n: u32,
        line: usize,
    ) -> Result<CpuSet, SpecError> {
        let mut by_node: std::collections::BTreeMap<Option<NodeId>, Vec<&crate::topology::Core>> =
            std::collections::BTreeMap::new();
        for c in host.cores.iter().filter(|c| {
            c.cpus
                .iter()
                .any(|cpu| host.pu(cpu).is_some_and(|p| p.usable))
        }) {
            by_node.entry(c.numa_node).or_default().push(c);
        }
        let mut out = CpuSet::new();
        for (node, cores) in &by_node {
            if n as usize >= cores.len() {
                let node = node.map_or_else(|| "of unknown id".to_owned(), |k| k.to_string());
                return Err(self.error(
                    line,
                    "host.reserved_cores_per_node",
                    format!(
                        "reserved_cores_per_node = {n} leaves node {node} no core for VMs: it has {}",
                        cores.len()
                    ),
                ));
            }
            out = cores
                .iter()
                .take(n as usize)
                .flat_map(|c| c.cpus.iter())
                .fold(out, |mut acc, cpu| {
                    acc.insert(cpu);
                    acc
                });
        }
        Ok(out)
    }

    /// The `[[fixed]]` tenants, on CPUs the host has and does not reserve.
    fn fixed_tenants(
        &self,
        host: &HostTopology,
        reserved: &CpuSet,
    ) -> Result<Vec<FixedTenant>, SpecError> {
        let known: CpuSet = host.pus.iter().map(|p| p.cpu).collect();
        let mut fixed = Vec::new();
        for (name, cpus, line) in &self.fixed {
            let missing = cpus.difference(&known);
            if !missing.is_empty() {
                return Err(self.error(
                    *line,
                    "fixed.cpus",
                    format!("fixed {name}: CPUs {missing} are not on {}", host.source),
                ));
            }
            let overlap = cpus.intersection(reserved);
            if !overlap.is_empty() {
                return Err(self.error(
                    *line,
                    "fixed.cpus",
                    format!("fixed {name}: CPUs {overlap} are the host's reserved CPUs (a reserved CPU takes its whole core: {reserved})"),
                ));
            }
            fixed.push(FixedTenant {
                name: name.clone(),
                cpus: cpus.clone(),
                kind: crate::plan::FixedKind::Spec,
            });
        }
        Ok(fixed)
    }

    /// `emulator = "with-housekeeping"` on a VM without housekeeping vCPUs.
    /// A VM sized from a table takes its housekeeping vCPUs from the row
    /// (`housekeeping_vcpus` is refused there), so its fix is another row or
    /// sizing it with `vcpus`.
    fn no_housekeeping(&self, vm: &VmSpec, vcpus: u32, table: Option<(u32, u32)>) -> SpecError {
        let name = &vm.name;
        let (has_none, fix) = match table {
            Some((_, rx)) => (
                format!(
                    "its table row has none (vcpus {vcpus} = tx {} + rx {rx})",
                    vcpus.saturating_sub(rx)
                ),
                "size it from a table row with a housekeeping vCPU (vcpus > tx + rx), or \
                 give vcpus = N with housekeeping_vcpus = 1 instead of the table, or choose \
                 emulator = \"host\" or \"isolate\"",
            ),
            None => (
                "it has none".to_owned(),
                "set housekeeping_vcpus = 1, or choose emulator = \"host\" or \"isolate\"",
            ),
        };
        let mut error = self.error(
            vm.line,
            "vm.emulator",
            format!(
                "{name}: emulator = \"with-housekeeping\" puts the emulator on the housekeeping \
                 vCPUs' cores, and {has_none}"
            ),
        );
        error.hint = Some(fix.to_owned());
        error
    }

    /// The VM's vCPU roles: a table's housekeeping and rx vCPUs, or
    /// `housekeeping_vcpus`; the idle CPUs `emulator = "with-housekeeping"`
    /// needs on SMT cores; the real-time vCPUs (never housekeeping ones, and
    /// only on cores of their own: `threads = "isolate"`).
    fn roles(
        &self,
        vm: &VmSpec,
        vcpus: u32,
        table: Option<(u32, u32)>,
        host: &HostTopology,
    ) -> Result<crate::model::request::Roles, SpecError> {
        let name = &vm.name;
        let (housekeeping, rx) = match (table, vm.housekeeping_vcpus) {
            (Some((table_h, _)), Some((_, line))) => {
                return Err(self.error(
                    line,
                    "vm.housekeeping_vcpus",
                    format!("{name}: a VM sized from a table has the table's housekeeping vCPUs (vcpus - tx - rx: {table_h} here): drop housekeeping_vcpus, or give vcpus = N"),
                ))
            }
            (Some((h, rx)), None) => (h, Some(rx)),
            (None, Some((h, line))) if h >= vcpus => {
                return Err(self.error(
                    line,
                    "vm.housekeeping_vcpus",
                    format!("{name}: housekeeping_vcpus = {h} leaves none of its {vcpus} vCPUs for poll-mode threads: give fewer"),
                ))
            }
            (None, Some((h, _))) => (h, None),
            (None, None) => (0, None),
        };
        if vm.emulator == EmulatorPolicy::WithHousekeeping && housekeeping == 0 {
            return Err(self.no_housekeeping(vm, vcpus, table));
        }
        // Whole cores for the housekeeping vCPUs: the rest of the last one
        // stays idle (the emulator's) on cores of `t` threads.
        let pad =
            crate::model::request::Roles::pad_of(host, (vm.emulator, vm.threads), housekeeping);
        let pmd: CpuSet = (housekeeping..vcpus).map(CpuId).collect();
        let realtime = match &vm.realtime_vcpus {
            Some((set, line)) => {
                let main: CpuSet = set.iter().filter(|c| c.0 < housekeeping).collect();
                let beyond: CpuSet = set.iter().filter(|c| c.0 >= vcpus).collect();
                if !main.is_empty() || !beyond.is_empty() {
                    return Err(self.error(
                        *line,
                        "vm.realtime_vcpus",
                        format!("{name}: realtime_vcpus = \"{set}\" must name poll-mode vCPUs only ({}): {}", if pmd.is_empty() { "none".to_owned() } else { pmd.to_string() }, if main.is_empty() { format!("it has no vCPU {beyond}") } else { format!("{main} are housekeeping vCPUs") }),
                    ));
                }
                set.clone()
            }
            None if vm.realtime => pmd,
            None => CpuSet::new(),
        };
        if !realtime.is_empty() {
            if vm.threads != ThreadPolicy::Isolate {
                return Err(self.error(
                    vm.line,
                    "vm.threads",
                    format!("{name}: a real-time vCPU must share its core with nothing, not even a sibling vCPU: set threads = \"isolate\""),
                ));
            }
            if vm.emulator == EmulatorPolicy::Isolate && housekeeping == 0 {
                return Err(self.error(
                    vm.line,
                    "vm.emulator",
                    format!("{name}: with no housekeeping vCPU, emulator = \"isolate\" would put the emulator beside a real-time vCPU: use emulator = \"host\", or housekeeping_vcpus = 1"),
                ));
            }
        }
        Ok(crate::model::request::Roles {
            housekeeping,
            rx,
            pad,
            realtime,
        })
    }

    /// How the profile's rows ran their forwarding threads
    /// (`threads_per_core`), held against where the VM's vCPUs go: a rate
    /// measured one thread per core is not promised to a VM whose vCPUs fill
    /// both SMT siblings of each core (`threads = "require"`: refused, the
    /// user chooses), and may not hold under `prefer` (a warning); rows
    /// measured on siblings under `isolate` are a floor.
    fn threading(
        &self,
        vm: &VmSpec,
        profile: &str,
        d: &demand::Demand,
        warnings: &mut Vec<Warning>,
    ) -> Result<Option<u32>, SpecError> {
        let measured_on = self
            .table
            .profile_rows(profile)
            .find_map(|r| r.threads_per_core);
        if measured_on != Some(1) {
            return Ok(measured_on);
        }
        let rows = d.rows.join(", ");
        let rate = crate::demand::table::fmt_gbps(d.predicted_gbps);
        match vm.threads {
            ThreadPolicy::Require => Err(self.error(
                vm.sizing_line,
                "vm.threads",
                format!(
                    "{}: profile {profile} was measured with one forwarding thread per core \
                     (threads_per_core = 1; {rows}), but threads = \"require\" puts two of its \
                     vCPUs on each core's SMT siblings, where the {rate} G it reached is not to be \
                     had: set threads = \"isolate\" to place it as measured, or size it from rows \
                     measured on siblings (threads_per_core = 2)",
                    vm.name
                ),
            )),
            ThreadPolicy::Prefer => {
                warnings.push(Warning::vm(
                    &vm.name,
                    WarningKind::Sizing,
                    format!(
                        "profile {profile} was measured with one forwarding thread per core \
                         (threads_per_core = 1; {rows}); threads = \"prefer\" may put two of its \
                         vCPUs on one core's SMT siblings, and then the {rate} G is not promised: \
                         threads = \"isolate\" places it as measured"
                    ),
                ));
                Ok(measured_on)
            }
            ThreadPolicy::Isolate => Ok(measured_on),
        }
    }

    /// The VM's vCPU count: as given, or the demand from the tables.
    fn vcpus(&self, vm: &VmSpec, warnings: &mut Vec<Warning>) -> Result<Sized, SpecError> {
        let (profile, target_gbps) = match &vm.sizing {
            Sizing::Explicit(n) => return Ok((*n, None, Vec::new(), None)),
            Sizing::Table {
                profile,
                target_gbps,
            } => (profile, target_gbps),
        };
        let options = DemandOptions {
            min_fraction: vm.min_fraction,
            packet_bytes: vm.packet_bytes,
            line_rate_gbps: self.line_rate_gbps,
            basis: None,
            allow_extrapolation: vm.allow_extrapolation,
            in_spec: true,
            confidence: vm.confidence,
        };
        let d = demand::demand(&self.table, profile, *target_gbps, &options)
            .map_err(|e| self.error(vm.sizing_line, "vm.profile", format!("{}: {e}", vm.name)))?;
        warnings.extend(
            d.warnings
                .iter()
                .map(|w| Warning::vm(&vm.name, WarningKind::Sizing, w.as_str())),
        );
        let measured_on = self.threading(vm, profile, &d, warnings)?;
        let alternatives = self.alternatives(vm, profile, *target_gbps, &d);
        let planned = PlannedDemand {
            basis: d.basis,
            predicted_gbps: d.predicted_gbps,
            profile: profile.clone(),
            target_gbps: *target_gbps,
            min_fraction: vm.min_fraction,
            model: d.model.as_ref().map(|m| m.family),
            interval: d.interval.clone(),
            threads_per_core: measured_on,
            sources: sources(&self.table, &d),
        };
        // The table's configuration: tx + rx cores, the rest housekeeping.
        let housekeeping = d.vcpus.saturating_sub(d.tx_cores + d.rx_cores);
        if housekeeping == 0 {
            warnings.push(Warning::vm(
                &vm.name,
                WarningKind::Sizing,
                format!(
                    "its table row has vcpus = tx + rx = {}: with no housekeeping vCPU, DPDK's \
                     main lcore shares a vCPU with a forwarding core and the guest's kernel has \
                     no CPU of its own (the guest hints leave the first vCPU to both: one \
                     forwarding core fewer); measure a row with one housekeeping vCPU (vcpus = \
                     tx + rx + 1 = {})",
                    d.vcpus,
                    d.vcpus + 1
                ),
            ));
        }
        Ok((
            d.vcpus,
            Some(planned),
            alternatives,
            Some((housekeeping, d.rx_cores)),
        ))
    }

    /// Smaller measured configurations than the demand `d`, largest first,
    /// each with the `min_fraction` that would accept it.
    fn alternatives(
        &self,
        vm: &VmSpec,
        profile: &str,
        target_gbps: f64,
        d: &demand::Demand,
    ) -> Vec<(String, u32)> {
        let mut alternatives: Vec<(String, u32)> = Vec::new();
        let mut seen = BTreeSet::new();
        let mut rows: Vec<&demand::Row> = self
            .table
            .profile_rows(profile)
            .filter(|r| r.packet_bytes == d.packet_bytes && r.vcpus < d.vcpus)
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.vcpus));
        for r in rows {
            let f = (r.gbps / target_gbps * 100.0).floor() / 100.0;
            if f > 0.0 && f < vm.min_fraction && seen.insert(r.vcpus) {
                alternatives.push((format!("min_fraction = {f}"), r.vcpus));
            }
        }
        alternatives
    }
}

/// The `source` of each table row a demand rests on (`file:line` in
/// [`demand::Demand::rows`]), each once, in order.
fn sources(table: &demand::Table, d: &demand::Demand) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for at in &d.rows {
        let source = table
            .rows
            .iter()
            .find(|r| &r.at() == at)
            .and_then(|r| r.source.clone());
        if let Some(source) = source.filter(|s| !out.contains(s)) {
            out.push(source);
        }
    }
    out
}

/// A domain XML's `<memory>` in bytes and the page size of each of its
/// guest cells (`<memoryBacking><hugepages>`, by libvirt's rule in
/// [`crate::memory::pages`]; `None` without `<memoryBacking>`).
fn domain_memory(
    origin: &str,
    text: &str,
) -> Result<(Option<u64>, Option<DomainPages>), DomainMemoryError> {
    use crate::xmldoc::NodeExt as _;
    let doc = crate::xmldoc::parse(text).map_err(|e| DomainMemoryError::Xml {
        origin: origin.to_owned(),
        line: e.line,
        problem: e.problem.to_string(),
    })?;
    let root = doc.root_element();
    // libvirt's scaled amounts default to KiB.
    let scale = |unit: Option<&str>| crate::topology::unit_bytes(unit.unwrap_or("KiB"));
    let bytes = root.child("memory").and_then(|m| {
        let n: u64 = m.inner_text().trim().parse().ok()?;
        n.checked_mul(scale(m.attribute("unit"))?)
    });
    let Some(backing) = root.child("memoryBacking") else {
        return Ok((bytes, None));
    };
    let rules: Option<Vec<PageRule>> = backing.child("hugepages").map(|huge| {
        huge.children_named("page")
            .filter_map(|p| {
                let n: u64 = p.attribute("size")?.trim().parse().ok()?;
                Some(PageRule {
                    kib: n.saturating_mul(scale(p.attribute("unit"))?) / 1024,
                    cells: p.attribute("nodeset").and_then(|s| s.parse().ok()),
                })
            })
            .collect()
    });
    let cells: Vec<u32> = root
        .path(&["cpu", "numa"])
        .into_iter()
        .flat_map(|n| n.children_named("cell"))
        .enumerate()
        .map(|(i, c)| {
            c.attribute("id")
                .and_then(|id| id.trim().parse().ok())
                .unwrap_or_else(|| u32::try_from(i).unwrap_or(u32::MAX))
        })
        .collect();
    let layout = crate::memory::pages::layout(rules.as_deref(), &cells);
    Ok((bytes, Some(DomainPages(layout))))
}

/// The page size of each guest cell of a domain (KiB → cells).
struct DomainPages(std::collections::BTreeMap<u64, crate::cpuset::CpuSet>);

impl DomainPages {
    /// The one page size of all its memory, if it has one.
    fn single(&self) -> Option<u64> {
        match self.0.len() {
            1 => self.0.keys().next().copied(),
            _ => None,
        }
    }
}

/// Why a VM's domain XML could not give its memory.
#[derive(Debug, thiserror::Error)]
enum DomainMemoryError {
    /// The spec's `domain_xml` file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// The domain is not well-formed XML.
    #[error("{origin}:{line}: {problem}")]
    Xml {
        origin: String,
        line: usize,
        problem: String,
    },
}
