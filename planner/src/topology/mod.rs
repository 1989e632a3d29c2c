//! The host's CPU topology ([`HostTopology`]) and the readers that build it.
//!
//! Every reader — live hwloc, hwloc XML, hwloc synthetic descriptions, libvirt
//! capabilities XML, a live libvirt connection, pinplan's own topology JSON
//! (checked against a rebuild) — first collects a flat list of
//! CPUs with the keys of their core, package, node and L3 domain
//! (`assemble::RawTopology`); one shared step turns that into the model, so all
//! sources number cores and packages the same way. Planning, reports and XML are
//! not this module's business.

mod assemble;
pub(crate) mod caps;
pub(crate) mod detect;
mod fingerprint;
mod hwloc;
pub(crate) mod json;
mod libvirt;
pub mod map;
mod memory;
mod pci;
pub(crate) mod precheck;
mod render;
mod synthetic;

pub(crate) use caps::unit_bytes;
pub use detect::SourceKind;
pub(crate) use libvirt::{interfaces_by_parent, pcie_link};
pub(crate) use pci::parse_int as pci_parse_int;
pub(crate) use pci::read_sysfs_link;
pub use pci::{link_gbps, PciAddress, PciClass, PciDevice, PcieLink};

use crate::cpuset::CpuSet;
use crate::error::Diagnostic;
use crate::ids::{CoreId, CpuId, L3Id, NodeId, PackageId};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where a topology comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The machine we run on, through hwloc (with PCI discovery).
    LiveHost,
    /// A file: hwloc XML (`lstopo --of xml`), libvirt capabilities XML
    /// (`virsh capabilities`) or pinplan's own topology JSON (`pinplan
    /// topology --format json`), told apart by content.
    File(PathBuf),
    /// An hwloc synthetic description such as `package:2 core:16 pu:2`.
    Synthetic(String),
    /// A libvirt connection URI (`qemu:///system`, `qemu+ssh://host/system`).
    Libvirt(String),
}

impl Source {
    /// Reads the `--source` argument: `host`, `synthetic:DESC`, or a path.
    pub fn from_arg(arg: &str) -> Source {
        if arg == "host" {
            Source::LiveHost
        } else if let Some(desc) = arg.strip_prefix("synthetic:") {
            Source::Synthetic(desc.to_owned())
        } else {
            Source::File(PathBuf::from(arg))
        }
    }

    /// How the source is named in output and errors.
    pub fn describe(&self) -> String {
        match self {
            Source::LiveHost => "host".to_owned(),
            Source::File(path) => path.display().to_string(),
            Source::Synthetic(desc) => format!("synthetic:{desc}"),
            Source::Libvirt(uri) => uri.clone(),
        }
    }
}

/// Why a topology could not be read. Each variant names its input.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// The file could not be read at all.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not well-formed XML (or not XML at all).
    #[error("{path}:{line}:{column}: {problem}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// What is wrong, and what to do.
        problem: String,
    },
    /// Well-formed XML of a kind we do not read.
    #[error("{path}: {problem}")]
    WrongKind {
        /// The file.
        path: PathBuf,
        /// What the file is, and what to give instead.
        problem: String,
    },
    /// hwloc XML in a format this hwloc cannot import.
    #[error(
        "{path}: hwloc XML format {version} cannot be read by the hwloc library pinplan uses \
         (API {linked}: it reads formats 1.x and 2.0; format 3.0 is written by hwloc 3.x and \
         read only by hwloc 2.10 or newer)"
    )]
    UnsupportedHwlocFormat {
        /// The file.
        path: PathBuf,
        /// The `version` attribute of its `<topology>`.
        version: String,
        /// The hwloc API version we run with (e.g. `2.8.0` for hwloc 2.8 and 2.9).
        linked: String,
    },
    /// The content is XML of the right kind, but a value in it is wrong.
    #[error("{path}:{line}: {problem}")]
    BadValue {
        /// The file (or URI).
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        problem: String,
    },
    /// The source parsed, but describes no usable processor.
    #[error("{source_name}: {problem}")]
    Empty {
        /// The source as given.
        source_name: String,
        /// What is missing.
        problem: String,
    },
    /// JSON whose value at `key` is not what the topology JSON has there.
    #[error("{}:{line}:{column}: {}", path.display(), json_key(key))]
    BadJson {
        /// The file.
        path: PathBuf,
        /// 1-based line of the bad value.
        line: usize,
        /// 1-based column of the bad value.
        column: usize,
        /// Where (`pus[3].cpu`); empty when it could not be told.
        key: String,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// Topology JSON whose values read, but do not fit together.
    #[error("{}: `{key}`: {problem}", path.display())]
    BadJsonValue {
        /// The file.
        path: PathBuf,
        /// Where (`cores[2]`).
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// hwloc refused to build the topology.
    #[error("hwloc could not load {source_name}: {message}")]
    Hwloc {
        /// The source as given.
        source_name: String,
        /// hwloc's own words.
        message: String,
    },
    /// libvirt refused (connection, capabilities).
    #[error(transparent)]
    Libvirt(#[from] crate::error::LibvirtError),
}

/// How [`TopologyError::BadJson`] names the place of the fault.
fn json_key(key: &str) -> String {
    if key.is_empty() {
        "not pinplan's topology JSON".to_owned()
    } else {
        format!("`{key}` is not what pinplan's topology JSON has there")
    }
}

impl Diagnostic for TopologyError {
    fn hint(&self) -> Option<String> {
        match self {
            TopologyError::UnsupportedHwlocFormat { .. } => Some(
                "re-export it in format 2.0: on a machine with hwloc 2.10 or newer run \
                 `lstopo --input FILE --of xml OUT.xml` with hwloc 2.x, or with hwloc 3.x run \
                 `lstopo --input FILE --of xml --export-xml-flags v2 OUT.xml`; or run \
                 `lstopo --of xml` with hwloc 2.x on the host itself"
                    .to_owned(),
            ),
            TopologyError::WrongKind { .. } | TopologyError::Malformed { .. } => Some(
                "give the output of `lstopo --of xml` (hwloc), `virsh capabilities` \
                 (libvirt) or `pinplan topology --format json`, or use --source host / \
                 --connect URI"
                    .to_owned(),
            ),
            TopologyError::BadJson { .. } | TopologyError::BadJsonValue { .. } => Some(
                "give the JSON `pinplan topology --format json` wrote, unedited: capture it \
                 again from its source (`pinplan topology --source SRC --format json`)"
                    .to_owned(),
            ),
            TopologyError::Libvirt(e) => e.hint(),
            TopologyError::Io { source, path } if source.kind() == std::io::ErrorKind::NotFound => {
                let given = path.to_string_lossy();
                // `hots`, `Host`, `synthtic:…`: a keyword mistyped, not a file.
                let word = given
                    .split(':')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                let meant = match crate::text::closest(&word, ["host", "synthetic"]) {
                    Some("host") if !given.contains(['/', ':']) => Some("host"),
                    Some("synthetic") if given.contains(':') => Some("synthetic:DESC"),
                    _ => None,
                };
                Some(match meant {
                    Some(m) => format!("no such file; did you mean `--source {m}`?"),
                    None => crate::text::MISSING_FILE_HINT.to_owned(),
                })
            }
            _ => None,
        }
    }
}

/// A processor package (socket).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Package {
    /// Dense id, in order of the package's lowest CPU.
    pub id: PackageId,
    /// The OS's own number (`physical_package_id`, libvirt's `socket_id`) when known.
    pub os_index: Option<u32>,
    /// Online CPUs of the package (usable or not).
    pub cpus: CpuSet,
}

/// A NUMA node that has CPUs or memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    /// The OS's node number (may be sparse).
    pub id: NodeId,
    /// Online CPUs of the node (usable or not); empty for CPU-less memory nodes.
    pub cpus: CpuSet,
    /// Local memory, when the source says.
    pub memory_bytes: Option<u64>,
    /// Free memory now, when the source says (the live host's sysfs, a
    /// libvirt connection; files describe no moment).
    #[serde(default)]
    pub memory_free_bytes: Option<u64>,
    /// Huge page pools (page sizes above 4 KiB), by size.
    #[serde(default)]
    pub hugepages: Vec<PagePool>,
    /// Its distance to each node (ACPI SLIT: 10 is local), by node, when the
    /// source has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub distances: Vec<NodeDistance>,
}

/// A NUMA node's distance to another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeDistance {
    /// The other node.
    pub node: NodeId,
    /// Relative latency: 10 is local, 20 a typical remote node.
    pub value: u32,
}

/// The pages of one size on one NUMA node (read from sysfs by
/// [`crate::host::hugepages`], which owns the type).
pub use crate::host::hugepages::PagePool;

/// A last-level (L3) cache and the CPUs that share it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct L3Domain {
    /// Dense id, in order of the domain's lowest CPU.
    pub id: L3Id,
    /// Online CPUs sharing this cache.
    pub cpus: CpuSet,
    /// Cache size, when the source says.
    pub size_bytes: Option<u64>,
}

/// A physical core and its SMT sibling CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Core {
    /// Unique across the host, dense, in order of the core's lowest CPU.
    pub id: CoreId,
    /// The package it sits in, when known.
    pub package: Option<PackageId>,
    /// The NUMA node of its CPUs, when known.
    pub numa_node: Option<NodeId>,
    /// Its L3 domain, when known.
    pub l3: Option<L3Id>,
    /// Its online CPUs (SMT siblings), ascending.
    #[serde(with = "cpus_as_list")]
    pub cpus: CpuSet,
}

/// One logical CPU (hwloc PU, Linux `cpuN`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pu {
    /// The Linux CPU number.
    pub cpu: CpuId,
    /// Its core; `None` for offline CPUs, whose core the OS does not report.
    pub core: Option<CoreId>,
    /// Online and allowed: a plan may use it.
    pub usable: bool,
    /// Whether the CPU is online.
    pub online: bool,
    /// Whether the host's VMs may use it: on the live host, libvirt's cgroup
    /// cpuset (not pinplan's own cgroup or affinity); in an hwloc XML file,
    /// what the exporting process was allowed.
    pub allowed: bool,
    /// Its NUMA node, when known.
    pub numa_node: Option<NodeId>,
}

/// A host's CPU topology: what a plan is made for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostTopology {
    /// Where it was read from, as given.
    pub source: String,
    /// Packages, by id.
    pub packages: Vec<Package>,
    /// NUMA nodes with CPUs or memory, by id.
    pub numa_nodes: Vec<NumaNode>,
    /// L3 domains, by id (empty when the source does not describe caches).
    pub l3_domains: Vec<L3Domain>,
    /// Physical cores, by id.
    pub cores: Vec<Core>,
    /// Every CPU the source knows, online or not, by CPU number.
    pub pus: Vec<Pu>,
    /// PCI devices, when the source has them, by address.
    pub pci: Vec<PciDevice>,
    /// The CPU vendor, when the source says (`GenuineIntel`, `AuthenticAMD`;
    /// libvirt's `Intel`, `AMD`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_vendor: Option<String>,
}

impl HostTopology {
    /// Whether the CPUs are AMD's (or Hygon's, the same cores): their Linux
    /// guests see SMT siblings only with the `topoext` CPU feature.
    pub fn is_amd(&self) -> bool {
        self.cpu_vendor
            .as_deref()
            .is_some_and(|v| v.contains("AMD") || v.contains("Hygon"))
    }

    /// The distance from node `from` to node `to`, when the source gives it.
    pub fn distance(&self, from: NodeId, to: NodeId) -> Option<u32> {
        self.numa_nodes
            .iter()
            .find(|n| n.id == from)?
            .distances
            .iter()
            .find(|d| d.node == to)
            .map(|d| d.value)
    }

    /// The cores that `cpus` touch: a set of CPUs widened to whole cores (a
    /// core with one reserved CPU is the host's entirely).
    pub fn whole_cores(&self, cpus: &CpuSet) -> std::collections::BTreeSet<CoreId> {
        self.cores
            .iter()
            .filter(|c| c.cpus.intersects(cpus))
            .map(|c| c.id)
            .collect()
    }

    /// The CPUs a plan may use (online and allowed).
    pub fn usable_cpus(&self) -> CpuSet {
        self.pus
            .iter()
            .filter(|p| p.usable)
            .map(|p| p.cpu)
            .collect()
    }

    /// The online CPUs (usable or not).
    pub fn online_cpus(&self) -> CpuSet {
        self.pus
            .iter()
            .filter(|p| p.online)
            .map(|p| p.cpu)
            .collect()
    }

    /// Looks a CPU up by number.
    pub fn pu(&self, cpu: CpuId) -> Option<&Pu> {
        self.pus
            .binary_search_by_key(&cpu, |p| p.cpu)
            .ok()
            .and_then(|i| self.pus.get(i))
    }

    /// Looks a core up by id.
    pub fn core(&self, id: CoreId) -> Option<&Core> {
        self.cores.get(id.0 as usize).filter(|c| c.id == id)
    }

    /// The machine-readable form documented in `docs/topology.md`.
    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// The human-readable map printed by `pinplan topology`.
    pub fn to_text(&self) -> String {
        render::text(self)
    }
}

/// Reads a topology from any source.
pub fn load(source: &Source) -> Result<HostTopology, TopologyError> {
    let raw = match source {
        Source::LiveHost => hwloc::live()?,
        Source::Synthetic(desc) => synthetic::read(desc)?,
        Source::File(path) => return load_file(path),
        Source::Libvirt(uri) => libvirt::connect(uri)?,
    };
    raw.assemble()
}

/// The topology of the host at `uri` and its node devices' XML as read
/// for it (or why they could not be listed): one connection for both.
pub fn load_libvirt(
    uri: &str,
) -> Result<
    (
        HostTopology,
        Result<crate::host::nodedev::NodeDevices, crate::error::LibvirtError>,
    ),
    TopologyError,
> {
    let (raw, devices) = libvirt::connect_with_devices(uri)?;
    Ok((raw.assemble()?, devices))
}

fn load_file(path: &Path) -> Result<HostTopology, TopologyError> {
    if path.as_os_str().is_empty() {
        return Err(TopologyError::Empty {
            source_name: "''".to_owned(),
            problem: "an empty topology source: give `host`, a file, `synthetic:DESC`, \
                      or --connect URI"
                .to_owned(),
        });
    }
    let text = std::fs::read(path).map_err(|source| TopologyError::Io {
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8(text).map_err(|e| {
        let (line, column) = crate::text::line_col(e.as_bytes(), e.utf8_error().valid_up_to());
        TopologyError::Malformed {
            path: path.to_owned(),
            line,
            column,
            problem: "not UTF-8 text: this is not a topology file".to_owned(),
        }
    })?;
    if json::looks_like_json(&text) {
        return json::read(path, &text);
    }
    let (kind, doc) = detect::parse(path, &text)?;
    let raw = match kind {
        SourceKind::HwlocXml => {
            precheck::hwloc(path, doc.root_element())?;
            drop(doc);
            hwloc::xml(path, &text)?
        }
        SourceKind::LibvirtCapabilities => caps::parse(&path.display().to_string(), &text)?,
    };
    raw.assemble()
}

/// Serializes a core's CPUs as a JSON array of numbers, the documented shape.
mod cpus_as_list {
    use crate::cpuset::CpuSet;
    use crate::ids::CpuId;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(set: &CpuSet, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(set.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<CpuSet, D::Error> {
        Ok(Vec::<CpuId>::deserialize(deserializer)?
            .into_iter()
            .collect())
    }
}
