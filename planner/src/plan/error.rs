//! Why a plan file cannot be used, with its hint.

use crate::error::Diagnostic;
use std::path::PathBuf;

/// Why a plan file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The file could not be read.
    #[error("cannot read the plan {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a plan.
    #[error("{}:{line}: not a pinplan plan", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// No placed VM of that name.
    #[error("the plan {} has no placed VM {name:?}{}", path.display(), if *unplaced { " (it was not placed: see the plan's explanations)" } else { "" })]
    NoVm {
        /// The plan file.
        path: PathBuf,
        /// The name asked for.
        name: String,
        /// Whether the plan lists it as unplaced.
        unplaced: bool,
        /// The VMs it places.
        placed: Vec<String>,
    },
    /// The plan was made for another host topology.
    #[error("{}: this plan was made for {} (fingerprint {}; it uses {}); this host is {} (fingerprint {}: {}){}", path.display(), hosts.plan_source, hosts.plan_fingerprint, cpus(&hosts.plan_cpus), hosts.host_source, hosts.host_fingerprint, hosts.host_size, if hosts.plan_source == hosts.host_source { ", whose cores or online CPUs are not what they were when the plan was made" } else { "" })]
    OtherHost {
        /// The plan file.
        path: PathBuf,
        /// The two hosts.
        hosts: Box<HostMismatch>,
        /// Whether `--force` can override it here.
        forcible: bool,
    },
    /// The plan uses CPUs or NUMA nodes this host does not have.
    #[error("{}: the plan (made for {plan_source}) uses {missing}, which this host ({host_source}) does not have", path.display())]
    NotOnHost {
        /// The plan file.
        path: PathBuf,
        /// The plan's topology source.
        plan_source: String,
        /// This host's topology source.
        host_source: String,
        /// What is missing: `CPUs 64-71 and NUMA node 1`.
        missing: String,
    },
}

/// The host a plan was made for, and the host it is used on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMismatch {
    /// The plan's topology source.
    pub plan_source: String,
    /// The plan's fingerprint.
    pub plan_fingerprint: String,
    /// The CPUs the plan uses (its VMs', reserved, fixed).
    pub plan_cpus: crate::cpuset::CpuSet,
    /// This host's topology source.
    pub host_source: String,
    /// This host's fingerprint.
    pub host_fingerprint: String,
    /// This host's size: `16 CPUs (16 online) in 16 cores, 2 NUMA nodes`.
    pub host_size: String,
}

impl Diagnostic for PlanError {
    fn hint(&self) -> Option<String> {
        match self {
            PlanError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Some("`pinplan plan SPEC --out DIR` writes DIR/plan.json".to_owned())
            }
            PlanError::Read { .. } => None,
            PlanError::Parse { .. } => {
                Some("give the plan.json written by `pinplan plan SPEC --out DIR`".to_owned())
            }
            PlanError::NoVm { placed, .. } => {
                Some(format!("VMs in the plan: {}", placed.join(", ")))
            }
            PlanError::OtherHost {
                hosts, forcible, ..
            } => Some(format!(
                "{}{}",
                plan_it_for(&hosts.host_source),
                if *forcible {
                    "; if it is the same machine read another way (an old libvirt lists \
                         each CPU as a core of its own), --force uses this plan anyway (a plan \
                         that uses CPUs or NUMA nodes this host lacks is refused all the same)"
                } else {
                    ""
                }
            )),
            PlanError::NotOnHost { host_source, .. } => Some(plan_it_for(host_source)),
        }
    }
}

/// `CPU 3`, `CPUs 0-2,8`.
fn cpus(set: &crate::cpuset::CpuSet) -> String {
    format!("{} {set}", if set.len() == 1 { "CPU" } else { "CPUs" })
}

/// How to make the plan for the host read from `source`: through its URI
/// when it has one.
fn plan_it_for(source: &str) -> String {
    if source.contains("://") {
        format!("make the plan for this host: `pinplan plan SPEC --connect {source}`")
    } else {
        "make the plan for this host: `pinplan plan SPEC`, with --connect URI or --source for \
         this host"
            .to_owned()
    }
}
