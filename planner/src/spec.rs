//! The plan request file (TOML), documented in `docs/formats.md`: the host's
//! reservation, throughput tables, defaults, the VMs to place and the tenants
//! to plan around. Parsing checks the file on its own ([`Spec::load`]); the
//! host-dependent checks and the demands happen in [`Spec::request`]. Every
//! error names the file, the line and the key.

use crate::cpuset::CpuSet;
use crate::demand::{self, DemandOptions, Table};
use crate::plan::PlannedDemand;
use crate::solve::{
    EmulatorPolicy, FixedTenant, NicAffinity, NumaPolicy, PlanRequest, ThreadPolicy, VmRequest,
};
use crate::topology::{HostTopology, PciAddress};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use crate::text::closest;
use toml::Spanned;

/// A problem in a spec file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}:{line}: {message}", file.display())]
pub struct SpecError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line (1 when the problem is the whole file).
    pub line: usize,
    /// The key at fault, e.g. `vm.threads`.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do, when known.
    pub hint: Option<String>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct HostSection {
    source: Option<Spanned<String>>,
    reserved_cores: Option<Spanned<u32>>,
    reserved_cpus: Option<Spanned<String>>,
    #[serde(default)]
    tables: Vec<Spanned<String>>,
    line_rate_gbps: Option<Spanned<f64>>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
struct Policies {
    threads: Option<ThreadPolicy>,
    emulator: Option<EmulatorPolicy>,
    numa: Option<NumaPolicy>,
    nic_affinity: Option<NicAffinity>,
    min_fraction: Option<Spanned<f64>>,
    iothreads: Option<u32>,
    priority: Option<i64>,
    packet_bytes: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VmSection {
    name: Spanned<String>,
    profile: Option<Spanned<String>>,
    target_gbps: Option<Spanned<f64>>,
    vcpus: Option<Spanned<u32>>,
    nic: Option<Spanned<String>>,
    threads: Option<ThreadPolicy>,
    emulator: Option<EmulatorPolicy>,
    numa: Option<NumaPolicy>,
    nic_affinity: Option<NicAffinity>,
    min_fraction: Option<Spanned<f64>>,
    iothreads: Option<u32>,
    priority: Option<i64>,
    packet_bytes: Option<u32>,
    domain_xml: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedSection {
    name: Spanned<String>,
    cpus: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    #[serde(default)]
    host: HostSection,
    #[serde(default)]
    defaults: Policies,
    #[serde(default)]
    vm: Vec<Spanned<VmSection>>,
    #[serde(default)]
    fixed: Vec<Spanned<FixedSection>>,
}

/// Keys each table accepts, for suggestions.
const KEYS: &[&str] = &[
    "host",
    "defaults",
    "vm",
    "fixed",
    "source",
    "reserved_cores",
    "reserved_cpus",
    "tables",
    "line_rate_gbps",
    "name",
    "profile",
    "target_gbps",
    "vcpus",
    "nic",
    "threads",
    "emulator",
    "numa",
    "nic_affinity",
    "min_fraction",
    "iothreads",
    "priority",
    "packet_bytes",
    "cpus",
];

/// How a VM's vCPU count is given.
#[derive(Debug, Clone, PartialEq)]
enum Sizing {
    Explicit(u32),
    Table { profile: String, target_gbps: f64 },
}

/// One VM as the spec says, with defaults applied.
#[derive(Debug, Clone, PartialEq)]
struct VmSpec {
    name: String,
    line: usize,
    sizing: Sizing,
    sizing_line: usize,
    nic: Option<(PciAddress, usize)>,
    threads: ThreadPolicy,
    emulator: EmulatorPolicy,
    numa: NumaPolicy,
    nic_affinity: NicAffinity,
    min_fraction: f64,
    iothreads: u32,
    priority: i64,
    packet_bytes: Option<u32>,
    domain_xml: Option<PathBuf>,
}

/// A parsed and checked plan spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The file.
    pub file: PathBuf,
    /// `[host] source`, resolved against the spec's directory.
    pub source: Option<PathBuf>,
    reserved_cores: Option<(u32, usize)>,
    reserved_cpus: Option<(CpuSet, usize)>,
    table: Table,
    line_rate_gbps: f64,
    vms: Vec<VmSpec>,
    fixed: Vec<(String, CpuSet, usize)>,
}

impl Spec {
    /// The `domain_xml` a VM's `[[vm]]` names, resolved against the spec's directory.
    pub fn domain_xml(&self, vm: &str) -> Option<PathBuf> {
        self.vms
            .iter()
            .find(|v| v.name == vm)
            .and_then(|v| v.domain_xml.clone())
    }

    fn error(&self, line: usize, key: &str, message: String) -> SpecError {
        SpecError {
            file: self.file.clone(),
            line,
            key: Some(key.to_owned()),
            message,
            hint: None,
        }
    }

    /// Reads and checks a spec file (and the tables it names).
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|e| SpecError {
            file: path.to_owned(),
            line: 1,
            key: None,
            message: format!("cannot read the plan spec: {e}"),
            hint: None,
        })?;
        Spec::parse(path, &text)
    }

    /// Parses and checks spec text; `path` names it and anchors relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Spec, SpecError> {
        let line_of = |offset: usize| crate::xml::line_col(text.as_bytes(), offset).0;
        let raw: SpecFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_of(s.start));
            let message = e.message().trim().to_owned();
            // serde: "unknown field `threds`, expected one of `threads`, ..."
            let hint = message
                .strip_prefix("unknown field `")
                .or_else(|| message.strip_prefix("unknown variant `"))
                .and_then(|rest| rest.split('`').next())
                .and_then(|unknown| {
                    let expected: Vec<&str> = message.split('`').skip(3).step_by(2).collect();
                    let pool: Vec<&str> = if expected.is_empty() {
                        KEYS.to_vec()
                    } else {
                        expected
                    };
                    closest(unknown, pool).map(|k| format!("did you mean `{k}`?"))
                });
            SpecError {
                file: path.to_owned(),
                line,
                key: None,
                message,
                hint,
            }
        })?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let mut spec = Spec {
            file: path.to_owned(),
            source: raw.host.source.as_ref().map(|s| base.join(s.get_ref())),
            reserved_cores: None,
            reserved_cpus: None,
            table: Table::default(),
            line_rate_gbps: 100.0,
            vms: Vec::new(),
            fixed: Vec::new(),
        };

        if let (Some(_), Some(cpus)) = (&raw.host.reserved_cores, &raw.host.reserved_cpus) {
            return Err(spec.error(
                line_of(cpus.span().start),
                "host.reserved_cpus",
                "give either reserved_cores or reserved_cpus, not both".to_owned(),
            ));
        }
        spec.reserved_cores = raw
            .host
            .reserved_cores
            .as_ref()
            .map(|c| (*c.get_ref(), line_of(c.span().start)));
        if let Some(cpus) = &raw.host.reserved_cpus {
            let line = line_of(cpus.span().start);
            let set: CpuSet = cpus.get_ref().parse().map_err(|e| {
                spec.error(line, "host.reserved_cpus", format!("reserved_cpus: {e}"))
            })?;
            spec.reserved_cpus = Some((set, line));
        }
        if let Some(rate) = &raw.host.line_rate_gbps {
            if !(rate.get_ref().is_finite() && *rate.get_ref() > 0.0) {
                return Err(spec.error(
                    line_of(rate.span().start),
                    "host.line_rate_gbps",
                    "line_rate_gbps must be above 0".to_owned(),
                ));
            }
            spec.line_rate_gbps = *rate.get_ref();
        }
        for t in &raw.host.tables {
            let table_path = base.join(t.get_ref());
            let table = Table::load(&table_path).map_err(|e| SpecError {
                file: path.to_owned(),
                line: line_of(t.span().start),
                key: Some("host.tables".to_owned()),
                message: format!("table {}: {e}", t.get_ref()),
                hint: None,
            })?;
            spec.table.rows.extend(table.rows);
        }

        let defaults = raw.defaults;
        let check_fraction = |spec: &Spec, f: &Spanned<f64>, key: &str| {
            let v = *f.get_ref();
            if v > 0.0 && v <= 1.0 {
                Ok(v)
            } else {
                Err(spec.error(
                    line_of(f.span().start),
                    key,
                    format!("min_fraction is {v}: it must be above 0 and at most 1"),
                ))
            }
        };
        let default_fraction = match &defaults.min_fraction {
            Some(f) => check_fraction(&spec, f, "defaults.min_fraction")?,
            None => 1.0,
        };

        let mut names: BTreeSet<String> = BTreeSet::new();
        for vm in &raw.vm {
            let line = line_of(vm.span().start);
            let vm = vm.get_ref();
            let name = vm.name.get_ref().trim().to_owned();
            let name_line = line_of(vm.name.span().start);
            if name.is_empty() {
                return Err(spec.error(name_line, "vm.name", "a VM needs a name".to_owned()));
            }
            if !names.insert(name.clone()) {
                return Err(spec.error(
                    name_line,
                    "vm.name",
                    format!("two VMs are named {name:?}"),
                ));
            }
            let sizing = match (&vm.vcpus, &vm.profile, &vm.target_gbps) {
                (Some(v), None, None) => {
                    if *v.get_ref() == 0 {
                        return Err(spec.error(
                            line_of(v.span().start),
                            "vm.vcpus",
                            format!("{name}: vcpus must be at least 1"),
                        ));
                    }
                    (Sizing::Explicit(*v.get_ref()), line_of(v.span().start))
                }
                (Some(v), Some(_), _) | (Some(v), _, Some(_)) => {
                    return Err(spec.error(
                        line_of(v.span().start),
                        "vm.vcpus",
                        format!("{name}: give either vcpus or profile + target_gbps, not both"),
                    ))
                }
                (None, Some(p), Some(t)) => {
                    let profile = p.get_ref().clone();
                    if spec.table.rows.is_empty() {
                        return Err(spec.error(
                            line_of(p.span().start),
                            "vm.profile",
                            format!("{name}: profile {profile:?} needs throughput tables: add tables = [\"...csv\"] to [host]"),
                        ));
                    }
                    if !spec.table.profiles().contains(&profile.as_str()) {
                        let mut e = spec.error(
                            line_of(p.span().start),
                            "vm.profile",
                            format!("{name}: no profile {profile:?} in the tables"),
                        );
                        e.hint = Some(match closest(&profile, spec.table.profiles()) {
                            Some(c) => format!(
                                "did you mean {c:?}? profiles: {}",
                                spec.table.profiles().join(", ")
                            ),
                            None => format!("profiles: {}", spec.table.profiles().join(", ")),
                        });
                        return Err(e);
                    }
                    let target = *t.get_ref();
                    if !(target.is_finite() && target > 0.0) {
                        return Err(spec.error(
                            line_of(t.span().start),
                            "vm.target_gbps",
                            format!("{name}: target_gbps must be above 0"),
                        ));
                    }
                    (
                        Sizing::Table {
                            profile,
                            target_gbps: target,
                        },
                        line_of(p.span().start),
                    )
                }
                (None, Some(p), None) => {
                    return Err(spec.error(
                        line_of(p.span().start),
                        "vm.target_gbps",
                        format!("{name}: profile needs target_gbps (the rate to reach)"),
                    ))
                }
                (None, None, Some(t)) => {
                    return Err(spec.error(
                        line_of(t.span().start),
                        "vm.profile",
                        format!("{name}: target_gbps needs a profile from the tables"),
                    ))
                }
                (None, None, None) => {
                    return Err(spec.error(
                        line,
                        "vm.vcpus",
                        format!("{name}: give vcpus = N, or profile and target_gbps"),
                    ))
                }
            };
            let nic = match &vm.nic {
                None => None,
                Some(n) => {
                    let nl = line_of(n.span().start);
                    let address: PciAddress = n
                        .get_ref()
                        .parse()
                        .map_err(|e| spec.error(nl, "vm.nic", format!("{name}: {e}")))?;
                    Some((address, nl))
                }
            };
            let min_fraction = match &vm.min_fraction {
                Some(f) => check_fraction(&spec, f, "vm.min_fraction")?,
                None => default_fraction,
            };
            spec.vms.push(VmSpec {
                name,
                line,
                sizing: sizing.0,
                sizing_line: sizing.1,
                nic,
                threads: vm
                    .threads
                    .or(defaults.threads)
                    .unwrap_or(ThreadPolicy::Require),
                emulator: vm
                    .emulator
                    .or(defaults.emulator)
                    .unwrap_or(EmulatorPolicy::Host),
                numa: vm.numa.or(defaults.numa).unwrap_or(NumaPolicy::Strict),
                nic_affinity: vm.nic_affinity.or(defaults.nic_affinity).unwrap_or(
                    if vm.nic.is_some() {
                        NicAffinity::Preferred
                    } else {
                        NicAffinity::Ignore
                    },
                ),
                min_fraction,
                iothreads: vm.iothreads.or(defaults.iothreads).unwrap_or(0),
                priority: vm.priority.or(defaults.priority).unwrap_or(0),
                packet_bytes: vm.packet_bytes.or(defaults.packet_bytes),
                domain_xml: vm.domain_xml.as_ref().map(|d| base.join(d.get_ref())),
            });
        }

        for f in &raw.fixed {
            let f = f.get_ref();
            let line = line_of(f.cpus.span().start);
            let name = f.name.get_ref().trim().to_owned();
            let cpus: CpuSet = f
                .cpus
                .get_ref()
                .parse()
                .map_err(|e| spec.error(line, "fixed.cpus", format!("fixed {name}: {e}")))?;
            if let Some((other, _, _)) = spec.fixed.iter().find(|(_, c, _)| c.intersects(&cpus)) {
                let shared = spec
                    .fixed
                    .iter()
                    .find(|(n, _, _)| n == other)
                    .map(|(_, c, _)| c.intersection(&cpus))
                    .unwrap_or_default();
                return Err(spec.error(
                    line,
                    "fixed.cpus",
                    format!("fixed {name} and fixed {other} both claim CPUs {shared}"),
                ));
            }
            if names.contains(&name) || spec.fixed.iter().any(|(n, _, _)| *n == name) {
                return Err(spec.error(
                    line_of(f.name.span().start),
                    "fixed.name",
                    format!("the name {name:?} is used twice"),
                ));
            }
            spec.fixed.push((name, cpus, line));
        }
        Ok(spec)
    }

    /// Host-dependent checks, demands from the tables, and the solver's input.
    /// Returns the request and warnings (from the tables and the NICs).
    pub fn request(&self, host: HostTopology) -> Result<(PlanRequest, Vec<String>), SpecError> {
        let mut warnings = Vec::new();
        let known: CpuSet = host.pus.iter().map(|p| p.cpu).collect();
        let reserved: CpuSet = match (&self.reserved_cpus, self.reserved_cores) {
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
                host.cores
                    .iter()
                    .filter(|c| cores.contains(&c.id))
                    .flat_map(|c| c.cpus.iter())
                    .chain(set.iter())
                    .collect()
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
                usable_cores
                    .iter()
                    .take(n as usize)
                    .flat_map(|c| c.cpus.iter())
                    .collect()
            }
            (None, None) => CpuSet::new(),
        };

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
            let overlap = cpus.intersection(&reserved);
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
            });
        }

        let mut vms = Vec::new();
        for vm in &self.vms {
            let (nic, nic_node) = match &vm.nic {
                None => (None, None),
                Some((address, line)) => match host.pci.iter().find(|d| d.address == *address) {
                    Some(device) => (Some(*address), device.numa_node),
                    None => {
                        if vm.nic_affinity == NicAffinity::Required {
                            let mut e = self.error(
                                *line,
                                "vm.nic",
                                format!("{}: NIC {address} is not on {} and nic_affinity is \"required\"", vm.name, host.source),
                            );
                            let nics: Vec<String> = host
                                .pci
                                .iter()
                                .filter(|d| d.is_network())
                                .map(|d| d.address.to_string())
                                .collect();
                            e.hint = Some(if nics.is_empty() {
                                "this topology lists no network devices; use a source with PCI devices (the live host, `lstopo --of xml`, or --connect), or nic_affinity = \"preferred\"".to_owned()
                            } else {
                                format!("network devices on the host: {}", nics.join(", "))
                            });
                            return Err(e);
                        }
                        if vm.nic_affinity == NicAffinity::Preferred {
                            warnings.push(format!(
                                "{}: NIC {address} is not on {}: its locality is unknown",
                                vm.name, host.source
                            ));
                        }
                        (Some(*address), None)
                    }
                },
            };
            let (vcpus, planned, alternatives) = match &vm.sizing {
                Sizing::Explicit(n) => (*n, None, Vec::new()),
                Sizing::Table {
                    profile,
                    target_gbps,
                } => {
                    let options = DemandOptions {
                        min_fraction: vm.min_fraction,
                        packet_bytes: vm.packet_bytes,
                        line_rate_gbps: self.line_rate_gbps,
                        basis: None,
                        allow_extrapolation: false,
                    };
                    let d = demand::demand(&self.table, profile, *target_gbps, &options).map_err(
                        |e| self.error(vm.sizing_line, "vm.profile", format!("{}: {e}", vm.name)),
                    )?;
                    warnings.extend(d.warnings.iter().map(|w| format!("{}: {w}", vm.name)));
                    // Smaller measured configurations, reachable by lowering min_fraction.
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
                    (
                        d.vcpus,
                        Some(PlannedDemand {
                            basis: d.basis,
                            predicted_gbps: d.predicted_gbps,
                            profile: profile.clone(),
                            target_gbps: *target_gbps,
                            min_fraction: vm.min_fraction,
                        }),
                        alternatives,
                    )
                }
            };
            if vm.emulator == EmulatorPolicy::Host && reserved.is_empty() {
                return Err(self.error(
                    vm.line,
                    "vm.emulator",
                    format!("{}: emulator = \"host\" pins the emulator to the host's reserved CPUs, but none are reserved: set reserved_cores or reserved_cpus in [host], or emulator = \"isolate\"", vm.name),
                ));
            }
            vms.push(VmRequest {
                name: vm.name.clone(),
                vcpus,
                threads: vm.threads,
                emulator: vm.emulator,
                numa: vm.numa,
                nic,
                nic_node,
                nic_affinity: vm.nic_affinity,
                iothreads: vm.iothreads,
                priority: vm.priority,
                demand: planned,
                alternatives,
            });
        }
        Ok((
            PlanRequest {
                host,
                reserved,
                fixed,
                vms,
            },
            warnings,
        ))
    }
}
