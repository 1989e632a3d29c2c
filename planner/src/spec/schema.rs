//! The spec file's TOML shape, as serde reads it: every table and key, with
//! the position of each value for error messages. Checking is `super::parse`'s.

use crate::solve::{EmulatorPolicy, NumaPolicy, ThreadPolicy};
use serde::Deserialize;
use toml::Spanned;

/// How much a NIC's locality matters (`nic_affinity`, `nics[].affinity`).
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NicLocality {
    /// vCPUs only on the NIC's node.
    Required,
    /// vCPUs only on nodes of the NIC's package (socket).
    Socket,
    /// As many as possible on the NIC's node.
    Preferred,
    /// Don't care.
    Ignore,
}

/// One of `nics = [{ addr = "…", affinity = "…" }]`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct NicEntry {
    pub(super) addr: Spanned<String>,
    pub(super) affinity: Option<NicLocality>,
}

/// A memory size: `"16GiB"`, or a number of MiB.
#[derive(Debug, Deserialize, Clone)]
#[serde(untagged)]
pub(super) enum Size {
    Text(String),
    MiB(u64),
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct HostSection {
    pub(super) source: Option<Spanned<String>>,
    pub(super) reserved_cores: Option<Spanned<u32>>,
    pub(super) reserved_cores_per_node: Option<Spanned<u32>>,
    pub(super) reserved_cpus: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) tables: Vec<Spanned<String>>,
    pub(super) line_rate_gbps: Option<Spanned<f64>>,
    pub(super) reserved_memory: Option<Spanned<Size>>,
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct Policies {
    pub(super) threads: Option<ThreadPolicy>,
    pub(super) emulator: Option<EmulatorPolicy>,
    pub(super) numa: Option<NumaPolicy>,
    pub(super) nic_affinity: Option<NicLocality>,
    pub(super) min_fraction: Option<Spanned<f64>>,
    pub(super) iothreads: Option<u32>,
    pub(super) priority: Option<i64>,
    pub(super) packet_bytes: Option<u32>,
    pub(super) set_vcpus: Option<bool>,
    pub(super) allow_extrapolation: Option<bool>,
    pub(super) memory: Option<Spanned<Size>>,
    pub(super) hugepages: Option<Spanned<String>>,
    pub(super) housekeeping_vcpus: Option<Spanned<u32>>,
    pub(super) realtime: Option<bool>,
    pub(super) cache_aware: Option<bool>,
    pub(super) cache_passthrough: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct VmSection {
    pub(super) name: Spanned<String>,
    pub(super) profile: Option<Spanned<String>>,
    pub(super) target_gbps: Option<Spanned<f64>>,
    pub(super) vcpus: Option<Spanned<u32>>,
    pub(super) nic: Option<Spanned<String>>,
    pub(super) nics: Option<Spanned<Vec<NicEntry>>>,
    pub(super) threads: Option<ThreadPolicy>,
    pub(super) emulator: Option<EmulatorPolicy>,
    pub(super) numa: Option<NumaPolicy>,
    pub(super) nic_affinity: Option<NicLocality>,
    pub(super) min_fraction: Option<Spanned<f64>>,
    pub(super) iothreads: Option<u32>,
    pub(super) priority: Option<i64>,
    pub(super) packet_bytes: Option<u32>,
    pub(super) domain_xml: Option<Spanned<String>>,
    pub(super) set_vcpus: Option<bool>,
    pub(super) allow_extrapolation: Option<bool>,
    pub(super) memory: Option<Spanned<Size>>,
    pub(super) hugepages: Option<Spanned<String>>,
    pub(super) housekeeping_vcpus: Option<Spanned<u32>>,
    pub(super) realtime: Option<bool>,
    pub(super) realtime_vcpus: Option<Spanned<String>>,
    pub(super) cache_aware: Option<bool>,
    pub(super) cache_passthrough: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FixedSection {
    pub(super) name: Spanned<String>,
    pub(super) cpus: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SpecFile {
    #[serde(default)]
    pub(super) host: HostSection,
    #[serde(default)]
    pub(super) defaults: Policies,
    #[serde(default)]
    pub(super) vm: Vec<Spanned<VmSection>>,
    #[serde(default)]
    pub(super) fixed: Vec<Spanned<FixedSection>>,
}

/// Keys each table accepts, for suggestions.
pub(super) const KEYS: &[&str] = &[
    "host",
    "defaults",
    "vm",
    "fixed",
    "source",
    "reserved_cores",
    "reserved_cores_per_node",
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
    "nics",
    "addr",
    "affinity",
    "min_fraction",
    "iothreads",
    "priority",
    "packet_bytes",
    "cpus",
    "housekeeping_vcpus",
    "realtime",
    "realtime_vcpus",
    "cache_aware",
    "cache_passthrough",
];
