//! The plan request file (TOML), documented in `docs/formats.md`: the host's
//! reservation, throughput tables, defaults, the VMs to place and the tenants
//! to plan around. Parsing checks the file on its own ([`Spec::load`]); the
//! host-dependent checks and the demands happen in [`Spec::request`]. Every
//! error names the file, the line and the key. The TOML shape is `schema`'s,
//! the host-free checks `parse`'s, the host-dependent ones `request`'s.

mod fleet;
pub mod metadata;
mod nics;
mod parse;
mod request;
mod running;
mod schema;
mod sizing;

pub use fleet::{AnySpec, FleetHost, FleetSpec, FleetVm};
pub use metadata::DomainRequest;

pub use parse::{bad_vm_name, NAME_MAX_BYTES};
pub use running::{plan_around, Residents, Running};

use crate::cpuset::CpuSet;
use crate::demand::Table;
use crate::model::{EmulatorPolicy, NumaPolicy, ThreadPolicy};
use crate::topology::PciAddress;
use schema::NicLocality;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A problem in a spec file.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}{}: {message}", file.display(), at_line(*line))]
pub struct SpecError {
    /// The file, or for a domain's request where it was read
    /// (`qemu:///system domain vm1, pinplan metadata key threads`).
    pub file: PathBuf,
    /// 1-based line (1 when the problem is the whole file); 0 for a
    /// domain's request, which has no lines.
    pub line: usize,
    /// The key at fault, e.g. `vm.threads`.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do, when known.
    pub hint: Option<String>,
    /// The underlying error (the OS's, a table's), when there is one.
    #[source]
    pub cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

/// `:LINE` after a file's name; nothing for line 0 (a domain's request).
fn at_line(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}")
    }
}

impl crate::error::Diagnostic for SpecError {
    fn hint(&self) -> Option<String> {
        self.hint.clone()
    }
}

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
    /// `nics`, or the one `nic`: address, affinity, line.
    nics: Vec<(PciAddress, NicLocality, usize)>,
    threads: ThreadPolicy,
    emulator: EmulatorPolicy,
    numa: NumaPolicy,
    min_fraction: f64,
    /// The level of a model answer's interval (`confidence`, 0.9).
    confidence: f64,
    iothreads: u32,
    priority: i64,
    packet_bytes: Option<u32>,
    domain_xml: Option<PathBuf>,
    /// `set_vcpus`: `plan --out` may change the domain's vCPU count.
    set_vcpus: bool,
    /// `allow_extrapolation`: the demand model may answer beyond what was measured.
    allow_extrapolation: bool,
    /// `memory` in bytes, when given (spec, else `[defaults]`).
    memory: Option<u64>,
    /// `hugepages`: the page size in KiB (4: none), when given.
    page_kib: Option<u64>,
    /// `housekeeping_vcpus` (VM, else `[defaults]`) and its line.
    housekeeping_vcpus: Option<(u32, usize)>,
    /// `cache_aware` (VM, else `[defaults]`): dies from the L3 domains.
    cache_aware: bool,
    /// `cache_passthrough` (VM, else `[defaults]`).
    cache_passthrough: bool,
    /// `realtime` (VM, else `[defaults]`).
    realtime: bool,
    /// `realtime_vcpus` and its line.
    realtime_vcpus: Option<(CpuSet, usize)>,
    /// `movable` (VM, else `[defaults]`): running, it may be re-pinned.
    movable: bool,
}

/// A parsed and checked plan spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// The file.
    pub file: PathBuf,
    /// `[host] source`: a file resolved against the spec's directory, or
    /// `synthetic:DESC`.
    pub source: Option<crate::topology::Source>,
    reserved_cores: Option<(u32, usize)>,
    /// `reserved_cores_per_node` and its line.
    reserved_per_node: Option<(u32, usize)>,
    reserved_cpus: Option<(CpuSet, usize)>,
    table: Table,
    line_rate_gbps: f64,
    /// `[host] reserved_memory` per node, in bytes, when given.
    reserved_memory: Option<u64>,
    /// Shared: every host of a fleet with the same tables has the same VMs.
    vms: Arc<Vec<VmSpec>>,
    fixed: Vec<(String, CpuSet, usize)>,
    /// `[[ignore]]`: domains not planned around, and their lines.
    ignore: Vec<(String, usize)>,
    /// `[host] connect`: the libvirt URI of the host (its topology, unless
    /// a source is given, and the domains running there).
    pub connect: Option<String>,
    /// `[defaults]` as written, for the VMs of domains' requests.
    defaults: Arc<schema::Policies>,
    /// `[defaults] min_fraction`, or 1.
    default_fraction: f64,
    /// The lines of the spec's text and of the domains' requests read after it.
    line_count: usize,
    /// Where each domain's request stands among those lines.
    domain_lines: Vec<metadata::DomainLines>,
    /// The tables the domains' requests named, each loaded once.
    tables_read: Vec<PathBuf>,
}

impl Spec {
    /// Where to read the host: `given` (a command-line source), else the
    /// spec's `[host] source` file, else the live host.
    pub fn topology_source(
        &self,
        given: Option<crate::topology::Source>,
    ) -> crate::topology::Source {
        match (given, &self.source) {
            (Some(source), _) => source,
            (None, Some(source)) => source.clone(),
            (None, None) => match &self.connect {
                Some(uri) => crate::topology::Source::Libvirt(uri.clone()),
                None => crate::topology::Source::LiveHost,
            },
        }
    }

    /// What tells two hosts' specs apart: their `[host]` keys (every host of
    /// a fleet has the same VMs).
    pub fn host_key(&self) -> String {
        // Values only: the same key on another line is the same host.
        let fixed: Vec<(&String, &CpuSet)> = self.fixed.iter().map(|(n, c, _)| (n, c)).collect();
        format!(
            "{:?}|{:?}|{:?}|{}|{:?}|{:?}|{:?}",
            self.reserved_cores.map(|(n, _)| n),
            self.reserved_per_node.map(|(n, _)| n),
            self.reserved_cpus.as_ref().map(|(c, _)| c),
            self.line_rate_gbps,
            self.reserved_memory,
            self.table.rows,
            fixed
        )
    }

    /// The VMs that name a `domain_xml`, by name: that file (resolved
    /// against the spec's directory) and the VM's `set_vcpus`. One look-up
    /// for a whole plan: a fleet's host spec holds every VM of the fleet,
    /// and a search per planned VM made `plan --out` of 12,000 VMs spend
    /// 0.5 s comparing names.
    pub fn domain_xmls(&self) -> std::collections::BTreeMap<&str, (&Path, bool)> {
        self.vms
            .iter()
            .filter_map(|v| {
                let path = v.domain_xml.as_deref()?;
                Some((v.name.as_str(), (path, v.set_vcpus)))
            })
            .collect()
    }

    /// The VMs without a `domain_xml`, by name (their defined domains may
    /// give their memory: `plan --connect`).
    pub fn vms_without_domain_xml(&self) -> Vec<&str> {
        self.vms
            .iter()
            .filter(|v| v.domain_xml.is_none())
            .map(|v| v.name.as_str())
            .collect()
    }

    /// Whether a running domain the spec does not place is planned around:
    /// not when `[[ignore]]`d, nor when a `[[fixed]]` gives its CPUs.
    pub fn plans_around(&self, domain: &str) -> bool {
        !self.ignores(domain) && !self.fixes(domain)
    }

    /// Whether `[[ignore]]` names `domain`.
    pub fn ignores(&self, domain: &str) -> bool {
        self.ignore.iter().any(|(n, _)| n == domain)
    }

    /// Whether a `[[fixed]]` gives `domain`'s CPUs.
    pub fn fixes(&self, domain: &str) -> bool {
        self.fixed.iter().any(|(n, _, _)| n == domain)
    }

    /// Whether a `[[vm]]` (or a domain's request added) is named `vm`.
    pub fn names(&self, vm: &str) -> bool {
        self.vms.iter().any(|v| v.name == vm)
    }

    /// Every VM's name, in the spec's order.
    pub fn vm_names(&self) -> Vec<String> {
        self.vms.iter().map(|v| v.name.clone()).collect()
    }

    /// The VMs marked `movable`.
    pub fn movable_vms(&self) -> Vec<String> {
        self.vms
            .iter()
            .filter(|v| v.movable)
            .map(|v| v.name.clone())
            .collect()
    }

    /// The spec with only the VMs `keep` names, `movable` exactly those
    /// `movable` names: what the watcher plans at one moment.
    pub fn only(
        &self,
        keep: &std::collections::BTreeSet<String>,
        movable: &std::collections::BTreeSet<String>,
    ) -> Spec {
        let vms = self
            .vms
            .iter()
            .filter(|v| keep.contains(&v.name))
            .map(|v| VmSpec {
                movable: movable.contains(&v.name),
                ..v.clone()
            })
            .collect();
        Spec {
            vms: Arc::new(vms),
            ..self.clone()
        }
    }

    /// The error `message` about `key` at `line`: of the spec file, or of a
    /// domain's request read after it ([`Spec::with_domains`]).
    fn error(&self, line: usize, key: &str, message: String) -> SpecError {
        if let Some(domain) = self.domain_lines.iter().find(|d| d.holds(line)) {
            return domain.error(line, Some(key), message);
        }
        SpecError {
            file: self.file.clone(),
            line,
            key: Some(key.to_owned()),
            message,
            hint: None,
            cause: None,
        }
    }

    /// Reads and checks a spec file (and the tables it names).
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let text = read_spec_text(path)?;
        Spec::parse(path, &text)
    }
}

/// A spec file's text; an error names it (and suggests a fix when it is missing).
fn read_spec_text(path: &Path) -> Result<String, SpecError> {
    {
        std::fs::read_to_string(path).map_err(|e| SpecError {
            file: path.to_owned(),
            line: 1,
            key: None,
            message: "cannot read the plan spec".to_owned(),
            hint: (e.kind() == std::io::ErrorKind::NotFound)
                .then(|| crate::text::MISSING_FILE_HINT.to_owned()),
            cause: Some(Arc::new(e)),
        })
    }
}
