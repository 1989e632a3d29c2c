//! The journal: what every VM had before `apply` touched it (live and config
//! pins, the whole persistent definition), written before the first change
//! and read back by `apply --rollback`; and whether that apply finished
//! ([`JournalStatus`]), which the next `apply` on the host looks at
//! ([`unfinished`]): a journal left `applying` means the host may be half
//! changed, and a new journal taken then would record the half state as
//! "before".

use crate::cpuset::CpuSet;
use crate::error::{Diagnostic, WriteError};
use crate::host::journal::{self as envelope, Body, ReadError, Tool, Write};
use crate::plan::{IothreadPin, VmPlan};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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

/// Whether the apply (or rollback) of a journal finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalStatus {
    /// Written before the first change. An apply that stops in the middle
    /// (killed, or its restore failed or was interrupted) leaves it so:
    /// unfinished.
    Applying,
    /// Applied and verified: finished.
    Applied,
    /// `apply --rollback` started; one that stopped in the middle leaves it
    /// so: unfinished.
    RollingBack,
    /// Every VM restored from it and verified (by the apply's own restore
    /// or by `--rollback`): finished.
    RolledBack,
    /// Written by a pinplan that did not record it (read as finished).
    Unrecorded,
}

impl JournalStatus {
    /// Whether the host may be left half changed by its run.
    pub fn unfinished(self) -> bool {
        matches!(self, JournalStatus::Applying | JournalStatus::RollingBack)
    }
}

fn unrecorded() -> JournalStatus {
    JournalStatus::Unrecorded
}

/// Everything needed to put the VMs back: written before the first change,
/// in the journals' envelope ([`crate::host::journal`], tool `pinplan
/// apply`; version 1 of this journal, `"pinplan_journal": 1`, is read too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// The libvirt URI.
    pub uri: String,
    /// Whether its run finished; rewritten as the run goes on.
    #[serde(default = "unrecorded")]
    pub status: JournalStatus,
    /// When the apply started (seconds since 1970, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
    /// The VMs, in the order they are applied.
    pub vms: Vec<JournalVm>,
}

impl Body for Journal {
    const TOOL: Tool = Tool::Apply;
}

impl Journal {
    /// Writes the journal to `path`, which must not exist (a journal is
    /// never overwritten): atomically and synced to disk (temporary file,
    /// fsync, rename, fsync of the directory; mode 0600). A journal outside
    /// the state directory gets a link there, so that the next apply finds it
    /// while it is unfinished.
    pub fn write_new(&self, path: &Path) -> Result<(), WriteError> {
        envelope::write(path, self, Write::New)?;
        if self.status.unfinished() {
            link(path);
        }
        Ok(())
    }

    /// Records `status` in the journal at `path` (rewritten atomically); a
    /// finished journal's link in the state directory goes.
    pub fn mark(&self, path: &Path, status: JournalStatus) -> Result<(), WriteError> {
        let mut marked = self.clone();
        marked.status = status;
        envelope::write(path, &marked, Write::Update)?;
        if status.unfinished() {
            link(path);
        } else {
            unlink(path);
        }
        Ok(())
    }
}

/// How a link in the state directory to a journal elsewhere is named:
/// `link-STEM-SECONDS-PID.path`, holding the journal's absolute path.
fn link_name(journal: &Path) -> String {
    let stem = journal.file_stem().map_or_else(
        || "journal".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("link-{stem}-{secs}-{}.path", std::process::id())
}

/// The journal's absolute path, its links resolved when it exists.
fn absolute(path: &Path) -> PathBuf {
    path.canonicalize()
        .or_else(|_| std::path::absolute(path))
        .unwrap_or_else(|_| path.to_owned())
}

/// Every link in `dir` and the journal it names.
fn links(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(PathBuf, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "path")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("link-"))
        })
        .filter_map(|p| {
            let target = std::fs::read_to_string(&p).ok()?;
            Some((p, PathBuf::from(target.trim_end_matches('\n'))))
        })
        .collect();
    found.sort();
    found
}

/// Links the journal at `path` from the state directory, unless it is in
/// it or linked already. Best effort: a journal that cannot be linked is
/// still the journal (the apply says where it is), only the next apply
/// cannot find it.
fn link(path: &Path) {
    let Ok(dir) = crate::state::state_dir() else {
        return;
    };
    let journal = absolute(path);
    if journal.parent() == Some(absolute(&dir).as_path())
        || links(&dir).iter().any(|(_, to)| *to == journal)
    {
        return;
    }
    let text = format!("{}\n", journal.display());
    let _ = crate::host::write::write_new(&dir.join(link_name(path)), &text, 0o600);
}

/// Removes the state directory's links to the journal at `path`.
fn unlink(path: &Path) {
    let Ok(dir) = crate::state::state_dir_path() else {
        return;
    };
    let journal = absolute(path);
    for (link, to) in links(&dir) {
        if to == journal {
            let _ = std::fs::remove_file(link);
        }
    }
}

/// An unfinished journal of a host, found in the state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// The journal.
    pub path: PathBuf,
    /// The URI it was written for.
    pub uri: String,
    /// When its apply started (seconds since 1970), when recorded.
    pub started: Option<u64>,
    /// `applying` or `rolling-back`.
    pub status: JournalStatus,
}

/// The fields of a journal the search reads.
#[derive(Deserialize)]
struct Head {
    uri: String,
    #[serde(default = "unrecorded")]
    status: JournalStatus,
    #[serde(default)]
    started: Option<u64>,
}

impl Body for Head {
    const TOOL: Tool = Tool::Apply;
}

/// The unfinished journals of `uri`'s host in the state directory `dir`
/// (its own `*.json` journals and the ones its links name), the latest
/// started first. A host is the URI's [`host_key`](super::lock::host_key),
/// as for the apply lock: `qemu:///system` and `qemu+ssh://root@b1/system`
/// are different hosts. Files that are not apply journals (fleet journals,
/// isolate's) are passed over.
pub fn unfinished(dir: &Path, uri: &str) -> Vec<Unfinished> {
    let host = super::lock::host_key(uri);
    let mut candidates: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    for (link, journal) in links(dir) {
        if journal.exists() {
            candidates.push(journal);
        } else {
            // The journal was removed: nothing left to find.
            let _ = std::fs::remove_file(link);
        }
    }
    let mut found: Vec<Unfinished> = candidates
        .into_iter()
        .filter_map(|path| {
            // Anything else (not a journal, another tool's, too large) is
            // passed over.
            let head = envelope::read::<Head>(&path).ok()?.body;
            (head.status.unfinished() && super::lock::host_key(&head.uri) == host).then_some(
                Unfinished {
                    path,
                    uri: head.uri,
                    started: head.started,
                    status: head.status,
                },
            )
        })
        .collect();
    found.sort_by(|a, b| b.started.cmp(&a.started).then_with(|| a.path.cmp(&b.path)));
    found.dedup_by(|a, b| a.path == b.path);
    found
}

/// `2026-12-02 04:34:22 UTC` for seconds since 1970.
pub fn utc(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Why a journal file cannot be used for a rollback.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file is not an apply journal this pinplan reads.
    #[error(transparent)]
    Read(#[from] ReadError),
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
            JournalError::Read(e) => e.hint(),
            JournalError::OtherHost { written_for, .. } => {
                Some(format!("use --connect {written_for}"))
            }
        }
    }
}

impl Journal {
    /// Reads the journal at `path` (in any version this pinplan reads),
    /// checking that it was written for `uri`.
    /// `uri` `None`: the journal's own URI.
    pub fn load(path: &Path, uri: Option<&str>) -> Result<Journal, JournalError> {
        let journal: Journal = envelope::read(path)?.body;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::journal::to_text;

    fn journal(uri: &str, status: JournalStatus, started: u64) -> Journal {
        Journal {
            uri: uri.to_owned(),
            status,
            started: Some(started),
            vms: Vec::new(),
        }
    }

    #[test]
    fn utc_is_the_calendar() {
        for (secs, text) in [
            (0, "1970-01-01 00:00:00 UTC"),
            (951_782_400, "2000-02-29 00:00:00 UTC"),
            (1_796_185_062, "2026-12-02 04:17:42 UTC"),
        ] {
            assert_eq!(utc(secs), text);
        }
    }

    /// Issue 27, item 2: the journals of a host that did not finish are
    /// found in the state directory, the latest first; finished ones, other
    /// hosts' and other files are not; a journal elsewhere is found through
    /// its link until it is marked finished.
    #[test]
    fn issue_27_unfinished_journals_are_found_by_host() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path();
        let put = |name: &str, j: &Journal| std::fs::write(dir.join(name), to_text(j)).unwrap();
        let local = "qemu:///system";
        put("old.json", &journal(local, JournalStatus::Applying, 100));
        put("new.json", &journal(local, JournalStatus::RollingBack, 200));
        put("done.json", &journal(local, JournalStatus::Applied, 300));
        put("back.json", &journal(local, JournalStatus::RolledBack, 300));
        put(
            "b1.json",
            &journal("qemu+ssh://root@b1/system", JournalStatus::Applying, 400),
        );
        std::fs::write(dir.join("fleet.json"), r#"{"pinplan_fleet_journal": 1}"#).unwrap();
        std::fs::write(
            dir.join("old-pinplan.json"),
            r#"{"pinplan_journal": 1, "uri": "qemu:///system", "vms": []}"#,
        )
        .unwrap();
        // Issue 29: one an earlier pinplan left unfinished, before the
        // journals' envelope.
        std::fs::write(
            dir.join("v1.json"),
            r#"{"pinplan_journal": 1, "uri": "qemu:///system", "status": "applying", "started": 50, "vms": []}"#,
        )
        .unwrap();
        // Elsewhere, linked from the state directory.
        let elsewhere = tempfile::tempdir().unwrap();
        let far = elsewhere.path().join("j.json");
        let j = journal(
            "qemu+ssh://root@localhost/system",
            JournalStatus::Applying,
            150,
        );
        std::fs::write(&far, to_text(&j)).unwrap();
        std::fs::write(
            dir.join("link-j-1-2.path"),
            format!("{}\n", absolute(&far).display()),
        )
        .unwrap();
        let found = |uri: &str| -> Vec<String> {
            unfinished(dir, uri)
                .iter()
                .map(|u| u.path.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(found(local), ["new.json", "j.json", "old.json", "v1.json"]);
        assert_eq!(found("qemu+ssh://b1/system"), ["b1.json"]);
        assert!(found("qemu+ssh://b2/system").is_empty());
        // A journal removed by hand takes its link with it.
        std::fs::remove_file(&far).unwrap();
        assert_eq!(found(local), ["new.json", "old.json", "v1.json"]);
        assert!(!dir.join("link-j-1-2.path").exists());
    }

    /// A journal keeps its status across the rewrite, and an older
    /// journal without one reads as unrecorded (finished).
    #[test]
    fn the_status_is_written_and_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.json");
        let j = journal("test:///default", JournalStatus::Applying, 1);
        std::fs::write(&path, to_text(&j)).unwrap();
        j.mark(&path, JournalStatus::RolledBack).unwrap();
        let back = Journal::load(&path, None).unwrap();
        assert_eq!(back.status, JournalStatus::RolledBack);
        assert_eq!(back.started, Some(1));
        std::fs::write(&path, r#"{"pinplan_journal": 1, "uri": "x", "vms": []}"#).unwrap();
        let old = Journal::load(&path, None).unwrap();
        assert_eq!(old.status, JournalStatus::Unrecorded);
        assert!(!old.status.unfinished());
    }

    /// Issue 29: a journal exactly as version 1 wrote it (before the
    /// journals' envelope: `"pinplan_journal": 1`; this one written by
    /// `pinplan apply` on libvirt's test driver) reads as the same value;
    /// marked, it is rewritten in the envelope, `tool` and `version` in
    /// place of its key, and reads the same again.
    #[test]
    fn issue_29_a_version_1_journal_reads_as_the_same_value() {
        const V1: &str = include_str!("../../../../tests/fixtures/journals/apply-v1.json");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.json");
        std::fs::write(&path, V1).unwrap();
        let journal = Journal::load(&path, Some("test:///default")).unwrap();
        let config = Pins {
            vcpus: vec!["0-7".parse().unwrap(); 2],
            emulator: "0-7".parse().unwrap(),
            iothreads: Vec::new(),
        };
        assert_eq!(
            (
                &journal.uri,
                journal.status,
                journal.started,
                journal.vms.len()
            ),
            (
                &"test:///default".to_owned(),
                JournalStatus::Applied,
                Some(1_796_225_005),
                1
            )
        );
        let vm = &journal.vms[0];
        assert_eq!(
            (vm.name.as_str(), vm.uuid.as_str(), &vm.live, &vm.config),
            (
                "test",
                "6695eb01-f6a4-8304-79aa-97f2502e193f",
                &None,
                &config
            )
        );
        assert!(
            vm.config_xml
                .starts_with("<domain type='test'>\n  <name>test</name>\n")
                && vm.config_xml.ends_with("</devices>\n</domain>\n"),
            "{}",
            vm.config_xml
        );
        journal.mark(&path, JournalStatus::Applied).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            V1.replacen(
                "\"pinplan_journal\": 1,",
                "\"tool\": \"pinplan apply\",\n  \"version\": 2,",
                1
            )
        );
        assert_eq!(Journal::load(&path, None).unwrap(), journal);
    }
}
