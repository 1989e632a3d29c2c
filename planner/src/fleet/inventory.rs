//! A fleet's inventory for `apply --fleet`, `report --fleet` and `doctor
//! --fleet`: its hosts, each with its libvirt URI, its `doctor` tree and,
//! from a fleet plan directory, its plan. Read from a directory `plan FLEET
//! --out DIR` wrote (`DIR/fleet.json` names the hosts, `DIR/HOST/plan.json`
//! is each host's plan) or from the fleet spec itself. Every file is checked
//! before any host is reached: a host name that is not a plain directory
//! name, a plan that is missing or does not place what `fleet.json` says,
//! are errors that name the file.

use crate::error::Diagnostic;
use crate::plan::{Plan, PlanError};
use crate::spec::{AnySpec, SpecError};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The hosts of a fleet.
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The directory or spec it was read from.
    pub origin: PathBuf,
    /// Whether it is a plan directory (each host with its plan).
    pub planned: bool,
    /// The hosts, in spec order.
    pub hosts: Vec<InventoryHost>,
    /// From a plan directory: the running VMs the plan moves to another
    /// host (pinplan does not migrate them).
    pub moves: Vec<Move>,
}

/// A running VM a fleet plan puts on another host than the one it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// The VM.
    pub vm: String,
    /// The host it runs on.
    pub from: String,
    /// The host it is planned on.
    pub to: String,
}

/// One host of the inventory.
#[derive(Debug, Clone)]
pub struct InventoryHost {
    /// Its name.
    pub name: String,
    /// Its libvirt URI (`connect`).
    pub connect: Option<String>,
    /// The tree `doctor` reads for it (`doctor_root`).
    pub doctor_root: Option<PathBuf>,
    /// From a plan directory, when the fleet plan put VMs on it: the plan
    /// file and the plan.
    pub plan: Option<(PathBuf, Plan)>,
}

/// Why an inventory cannot be used; no host was reached.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// `fleet.json` could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// `fleet.json` is not a fleet plan.
    #[error("{}:{line}: not a fleet plan (fleet.json)", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A host entry that cannot be used.
    #[error("{}: host {name:?}: {reason}", path.display())]
    Host {
        /// The file.
        path: PathBuf,
        /// The host.
        name: String,
        /// Why.
        reason: String,
    },
    /// A host's plan could not be read.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A fleet spec that could not be read.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// A single-host spec given where a fleet is asked for.
    #[error("{} is a single-host spec (one [host]), not a fleet", path.display())]
    NotAFleet {
        /// The spec.
        path: PathBuf,
    },
}

impl Diagnostic for InventoryError {
    fn hint(&self) -> Option<String> {
        match self {
            InventoryError::Read { .. } | InventoryError::Parse { .. } => Some(
                "give the directory `pinplan plan FLEET.toml --out DIR` wrote (DIR/fleet.json and \
                 DIR/HOST/plan.json), or the fleet spec"
                    .to_owned(),
            ),
            InventoryError::Host { .. } => Some(
                "the directory is not as `pinplan plan FLEET.toml --out DIR` wrote it: plan again"
                    .to_owned(),
            ),
            InventoryError::Plan(e) => e.hint(),
            InventoryError::Spec(e) => e.hint(),
            InventoryError::NotAFleet { .. } => Some(
                "without --fleet the single-host commands take it (`pinplan plan SPEC`), or give \
                 a spec of [[host]] tables"
                    .to_owned(),
            ),
        }
    }
}

/// What `fleet.json` holds that the inventory reads.
#[derive(Deserialize)]
struct FleetFile {
    hosts: Vec<FleetFileHost>,
    #[serde(default)]
    vms: Vec<FleetFileVm>,
}

#[derive(Deserialize)]
struct FleetFileVm {
    name: String,
    host: Option<String>,
    #[serde(default)]
    was_on: Option<String>,
}

#[derive(Deserialize)]
struct FleetFileHost {
    name: String,
    connect: Option<String>,
    #[serde(default)]
    doctor_root: Option<String>,
    vms: Vec<String>,
}

impl Inventory {
    /// Reads a fleet plan directory, or a fleet spec file.
    pub fn load(path: &Path) -> Result<Inventory, InventoryError> {
        if path.is_dir() {
            Inventory::from_dir(path)
        } else {
            Inventory::from_spec(path)
        }
    }

    /// Reads `DIR/fleet.json` and the plan of every host it puts VMs on.
    pub fn from_dir(dir: &Path) -> Result<Inventory, InventoryError> {
        let path = dir.join("fleet.json");
        let text = std::fs::read_to_string(&path).map_err(|source| InventoryError::Read {
            path: path.clone(),
            source,
        })?;
        let file: FleetFile =
            serde_json::from_str(&text).map_err(|source| InventoryError::Parse {
                path: path.clone(),
                line: source.line(),
                source,
            })?;
        let mut names = BTreeSet::new();
        let mut hosts = Vec::new();
        for h in file.hosts {
            let bad = |reason: String| InventoryError::Host {
                path: path.clone(),
                name: h.name.clone(),
                reason,
            };
            // The name is a directory under DIR: nothing that leaves it.
            if let Some(reason) = crate::spec::bad_vm_name(&h.name) {
                return Err(bad(format!("the name {reason}")));
            }
            if h.name.is_empty() || !names.insert(h.name.clone()) {
                return Err(bad("the name is empty or given twice".to_owned()));
            }
            let plan = if h.vms.is_empty() {
                None
            } else {
                let plan_path = dir.join(&h.name).join("plan.json");
                let plan = Plan::load(&plan_path)?;
                let placed: BTreeSet<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
                let listed: BTreeSet<&str> = h.vms.iter().map(String::as_str).collect();
                if placed != listed {
                    return Err(bad(format!(
                        "{} places {} but fleet.json puts {} there",
                        plan_path.display(),
                        join(&placed),
                        join(&listed)
                    )));
                }
                Some((plan_path, plan))
            };
            hosts.push(InventoryHost {
                name: h.name,
                connect: h.connect,
                doctor_root: h.doctor_root.map(PathBuf::from),
                plan,
            });
        }
        let moves = file
            .vms
            .into_iter()
            .filter_map(|v| match (v.was_on, v.host) {
                (Some(from), Some(to)) if from != to => Some(Move {
                    vm: v.name,
                    from,
                    to,
                }),
                _ => None,
            })
            .collect();
        Ok(Inventory {
            origin: dir.to_owned(),
            planned: true,
            hosts,
            moves,
        })
    }

    /// The hosts of a fleet spec (no plans).
    pub fn from_spec(path: &Path) -> Result<Inventory, InventoryError> {
        let fleet = match AnySpec::load(path)? {
            AnySpec::Fleet(fleet) => fleet,
            AnySpec::One(_) => {
                return Err(InventoryError::NotAFleet {
                    path: path.to_owned(),
                })
            }
        };
        Ok(Inventory {
            origin: path.to_owned(),
            planned: false,
            moves: Vec::new(),
            hosts: fleet
                .hosts
                .into_iter()
                .map(|h| InventoryHost {
                    name: h.name,
                    connect: h.connect,
                    doctor_root: h.doctor_root,
                    plan: None,
                })
                .collect(),
        })
    }
}

fn join(names: &BTreeSet<&str>) -> String {
    if names.is_empty() {
        "no VM".to_owned()
    } else {
        names.iter().copied().collect::<Vec<_>>().join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(fleet: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fleet.json"), fleet).unwrap();
        dir
    }

    /// Host names from the file are directories under DIR: one that would
    /// leave it is refused before anything else is read.
    #[test]
    fn a_host_name_that_leaves_the_directory_is_refused() {
        for name in ["../etc", "a/b", ".hidden", ""] {
            let dir = dir_with(&format!(
                r#"{{"hosts": [{{"name": {name:?}, "connect": null, "vms": ["vm1"]}}]}}"#
            ));
            let e = Inventory::from_dir(dir.path()).unwrap_err();
            assert!(
                matches!(&e, InventoryError::Host { name: n, .. } if n == name),
                "{name}: {e}"
            );
        }
    }

    #[test]
    fn a_plan_that_does_not_match_fleet_json_is_refused() {
        let dir = dir_with(r#"{"hosts": [{"name": "b1", "connect": null, "vms": ["vm1"]}]}"#);
        let e = Inventory::from_dir(dir.path()).unwrap_err();
        assert!(
            matches!(e, InventoryError::Plan(PlanError::Read { .. })),
            "{e}"
        );
        let e = Inventory::from_dir(&dir.path().join("nothing")).unwrap_err();
        assert!(matches!(e, InventoryError::Read { .. }), "{e}");
        std::fs::write(dir.path().join("fleet.json"), "{\"hosts\": 3}").unwrap();
        let e = Inventory::from_dir(dir.path()).unwrap_err();
        assert!(
            e.to_string().contains("fleet.json:1: not a fleet plan"),
            "{e}"
        );
    }

    /// A running VM planned on another host is a move the directory names.
    #[test]
    fn moves_are_read_from_fleet_json() {
        let dir = dir_with(
            r#"{"hosts": [{"name": "a", "connect": "qemu:///system", "vms": []},
                          {"name": "b", "connect": "qemu:///system", "vms": []}],
                "vms": [{"name": "v1", "host": "b", "was_on": "a", "refused": []},
                        {"name": "v2", "host": "a", "was_on": "a", "refused": []},
                        {"name": "v3", "host": null, "was_on": null, "refused": []}]}"#,
        );
        let inventory = Inventory::from_dir(dir.path()).unwrap();
        assert_eq!(
            inventory.moves,
            vec![Move {
                vm: "v1".to_owned(),
                from: "a".to_owned(),
                to: "b".to_owned()
            }]
        );
    }
}
