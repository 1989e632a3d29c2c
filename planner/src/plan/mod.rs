//! The [`Plan`] (its types are [`crate::model::plan`]'s, re-exported here):
//! reading a plan file back and checking it against a host (`mod.rs`), its
//! errors (`error.rs`) and its text (`text.rs`). Making plans is
//! [`crate::solve`]'s job.

mod error;
mod text;

pub use crate::model::plan::*;
pub use error::{HostMismatch, PlanError};

use crate::cpuset::CpuSet;
use crate::ids::NodeId;
use std::path::Path;

impl Plan {
    /// Refuses a plan made for another host than `host`: its fingerprint
    /// differs (unless `force`), or it uses CPUs or NUMA nodes `host` does not
    /// have (always). `path` names the plan in errors.
    pub fn check_host(
        &self,
        path: &Path,
        host: &crate::topology::HostTopology,
        force: bool,
    ) -> Result<(), PlanError> {
        let fingerprint = host.fingerprint();
        if !force && !self.host.fingerprint.is_empty() && self.host.fingerprint != fingerprint {
            return Err(PlanError::OtherHost {
                path: path.to_owned(),
                hosts: Box::new(HostMismatch {
                    plan_source: self.host.source.clone(),
                    plan_fingerprint: self.host.fingerprint.clone(),
                    plan_cpus: self.used().0,
                    host_source: host.source.clone(),
                    host_fingerprint: fingerprint,
                    host_size: size(host),
                }),
                forcible: true,
            });
        }
        let cpus: CpuSet = host.pus.iter().map(|p| p.cpu).collect();
        let nodes: std::collections::BTreeSet<NodeId> =
            host.numa_nodes.iter().map(|n| n.id).collect();
        self.check_exist(path, &host.source, &cpus, &nodes)
    }

    /// Refuses a plan that uses CPUs not in `cpus` or nodes not in `nodes`
    /// (of the host named `host_source`).
    pub fn check_exist(
        &self,
        path: &Path,
        host_source: &str,
        cpus: &CpuSet,
        nodes: &std::collections::BTreeSet<NodeId>,
    ) -> Result<(), PlanError> {
        let (used_cpus, used_nodes) = self.used();
        let missing_cpus = used_cpus.difference(cpus);
        let missing_nodes: Vec<String> = used_nodes
            .difference(nodes)
            .map(ToString::to_string)
            .collect();
        let mut missing = Vec::new();
        if !missing_cpus.is_empty() {
            let word = if missing_cpus.len() == 1 {
                "CPU"
            } else {
                "CPUs"
            };
            missing.push(format!("{word} {missing_cpus}"));
        }
        if !missing_nodes.is_empty() {
            let word = if missing_nodes.len() == 1 {
                "NUMA node"
            } else {
                "NUMA nodes"
            };
            missing.push(format!("{word} {}", missing_nodes.join(",")));
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(PlanError::NotOnHost {
            path: path.to_owned(),
            plan_source: self.host.source.clone(),
            host_source: host_source.to_owned(),
            missing: missing.join(" and "),
        })
    }

    /// Reads a plan file (`pinplan plan --out DIR` writes DIR/plan.json).
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| PlanError::Parse {
            path: path.to_owned(),
            line: source.line(),
            source,
        })
    }

    /// The placed VM `name`; `path` names the plan in the error.
    pub fn vm(&self, name: &str, path: &Path) -> Result<&VmPlan, PlanError> {
        self.vms
            .iter()
            .find(|v| v.name == name)
            .ok_or_else(|| PlanError::NoVm {
                path: path.to_owned(),
                name: name.to_owned(),
                unplaced: self.unplaced.iter().any(|u| u == name),
                placed: self.names(),
            })
    }

    /// The names of the VMs it places, in plan order.
    pub fn names(&self) -> Vec<String> {
        self.vms.iter().map(|v| v.name.clone()).collect()
    }
}

/// `host`'s size, for a refusal that compares it with a plan's:
/// `16 CPUs (16 online) in 16 cores, 2 NUMA nodes`.
fn size(host: &crate::topology::HostTopology) -> String {
    use crate::text::plural;
    format!(
        "{} ({} online) in {}, {}",
        plural(host.pus.len(), "CPU", "CPUs"),
        host.online_cpus().len(),
        plural(host.cores.len(), "core", "cores"),
        plural(host.numa_nodes.len(), "NUMA node", "NUMA nodes")
    )
}
