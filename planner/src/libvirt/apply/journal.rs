//! The journal: what every VM had before `apply` touched it (live and config
//! pins, the whole persistent definition), written before the first change
//! and read back by `apply --rollback`.

use crate::cpuset::CpuSet;
use crate::error::Diagnostic;
use crate::plan::{IothreadPin, VmPlan};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The version of the journal format.
pub const JOURNAL_VERSION: u32 = 1;

/// A VM's pinning in one scope (live or config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pins {
    /// Each vCPU's CPUs, by vCPU number.
    pub vcpus: Vec<CpuSet>,
    /// The emulator threads' CPUs.
    pub emulator: CpuSet,
    /// Each I/O thread's CPUs.
    pub iothreads: Vec<IothreadPin>,
}

impl Pins {
    pub(super) fn planned(vm: &VmPlan) -> Pins {
        let mut vcpus = vec![CpuSet::new(); vm.vcpus.len()];
        for pin in &vm.vcpus {
            if let Some(slot) = vcpus.get_mut(pin.vcpu as usize) {
                slot.insert(pin.cpu);
            }
        }
        Pins {
            vcpus,
            emulator: vm.emulator_cpus.clone(),
            iothreads: vm.iothreads.clone(),
        }
    }

    /// The planned I/O threads only (a domain may have more than the plan).
    pub(super) fn restricted_to(&self, planned: &Pins) -> Pins {
        Pins {
            vcpus: self.vcpus.clone(),
            emulator: self.emulator.clone(),
            iothreads: self
                .iothreads
                .iter()
                .filter(|t| planned.iothreads.iter().any(|p| p.iothread == t.iothread))
                .cloned()
                .collect(),
        }
    }

    pub(super) fn describe_difference(&self, want: &Pins) -> Option<String> {
        for (i, (got, want)) in self.vcpus.iter().zip(&want.vcpus).enumerate() {
            if got != want {
                return Some(format!("vCPU {i} is on {got}, not {want}"));
            }
        }
        if self.vcpus.len() != want.vcpus.len() {
            return Some(format!(
                "libvirt reports {} vCPUs, not {}",
                self.vcpus.len(),
                want.vcpus.len()
            ));
        }
        if self.emulator != want.emulator {
            return Some(format!(
                "the emulator is on {}, not {}",
                self.emulator, want.emulator
            ));
        }
        for w in &want.iothreads {
            match self.iothreads.iter().find(|g| g.iothread == w.iothread) {
                Some(g) if g.cpus == w.cpus => {}
                Some(g) => {
                    return Some(format!(
                        "I/O thread {} is on {}, not {}",
                        w.iothread, g.cpus, w.cpus
                    ))
                }
                None => return Some(format!("I/O thread {} is missing", w.iothread)),
            }
        }
        None
    }
}

/// What a VM had before `apply` touched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalVm {
    /// Domain name.
    pub name: String,
    /// Domain UUID (a domain of the same name but another UUID is not restored).
    pub uuid: String,
    /// Live pinning, when the domain was running.
    pub live: Option<Pins>,
    /// Config (persistent) pinning.
    pub config: Pins,
    /// The whole persistent definition (`virsh dumpxml --inactive
    /// --security-info`): restoring the config redefines exactly this.
    pub config_xml: String,
}

/// Everything needed to put the VMs back: written before the first change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version ([`JOURNAL_VERSION`]).
    pub pinplan_journal: u32,
    /// The libvirt URI.
    pub uri: String,
    /// The VMs, in the order they are applied.
    pub vms: Vec<JournalVm>,
}

impl Journal {
    /// The JSON form written to the journal file.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Why a journal file cannot be used for a rollback.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file could not be read.
    #[error("cannot read the journal {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a journal.
    #[error("{}:{line}: not a pinplan journal", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// A journal format this pinplan does not read.
    #[error("{}: journal version {version}, this pinplan reads version {reads}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u32,
        /// The version this pinplan reads of that kind of journal.
        reads: u32,
    },
    /// The journal is of another libvirt host.
    #[error("{} was written for {written_for}, not {uri}", path.display())]
    OtherHost {
        /// The file.
        path: PathBuf,
        /// The URI it was written for.
        written_for: String,
        /// The URI given.
        uri: String,
    },
}

impl Diagnostic for JournalError {
    fn hint(&self) -> Option<String> {
        match self {
            JournalError::Parse { .. } => {
                Some("give the journal file that `pinplan apply` printed".to_owned())
            }
            JournalError::OtherHost { written_for, .. } => {
                Some(format!("use --connect {written_for}"))
            }
            JournalError::Read { .. } | JournalError::Version { .. } => None,
        }
    }
}

impl Journal {
    /// Reads the journal at `path`, checking its version and that it was
    /// written for `uri`.
    /// `uri` `None`: the journal's own URI.
    pub fn load(path: &Path, uri: Option<&str>) -> Result<Journal, JournalError> {
        let text = std::fs::read_to_string(path).map_err(|source| JournalError::Read {
            path: path.to_owned(),
            source,
        })?;
        let journal: Journal =
            serde_json::from_str(&text).map_err(|source| JournalError::Parse {
                path: path.to_owned(),
                line: source.line(),
                source,
            })?;
        if journal.pinplan_journal != JOURNAL_VERSION {
            return Err(JournalError::Version {
                path: path.to_owned(),
                version: journal.pinplan_journal,
                reads: JOURNAL_VERSION,
            });
        }
        if let Some(uri) = uri.filter(|&u| u != journal.uri) {
            return Err(JournalError::OtherHost {
                path: path.to_owned(),
                written_for: journal.uri,
                uri: uri.to_owned(),
            });
        }
        Ok(journal)
    }
}
