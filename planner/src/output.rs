//! What the commands write: the files of `plan --out DIR` (the plan, and per
//! VM its patched domain or a fragment) and the XML `pinplan xml` prints.
//! How files are written (atomically, a set as one) is [`crate::host`]'s.

use crate::error::{Diagnostic, WriteError};
use crate::host::dir::{write_set, write_tree, DirError, Durability, SetFile, SetTree};
/// The atomic writes, for the files the commands write (`xml --out`, `man`).
pub use crate::host::write::{write_atomically, write_new};
use crate::libvirt::{emit, patch};
use crate::plan::{Plan, PlanError};
use crate::spec::Spec;
use std::path::{Path, PathBuf};

/// Why the output could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The output directory could not be created, or a file of its set
    /// written.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// A file could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A VM's `domain_xml` (or `--patch` file) could not be read.
    #[error("{origin}: cannot read the domain XML {}", path.display())]
    ReadDomain {
        /// Who named it: the spec file, or `--patch`.
        origin: String,
        /// The domain XML.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The domain could not be patched.
    #[error(transparent)]
    Patch(#[from] patch::PatchError),
    /// `plan --out` wrote the set but not these VMs' domains, whose vCPU
    /// count differs from the plan's.
    #[error(
        "{} not written: {}; the rest of the set was written",
        names(not_written),
        reasons(not_written)
    )]
    VcpusDiffer {
        /// Why each VM's file was not written.
        not_written: Vec<NotWritten>,
    },
    /// The plan has no such VM.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The plan keeps the VM where it runs: nothing of it changes.
    #[error("{name} is kept where it runs by this plan (made through --connect): the plan changes nothing of it, so there is no XML to write")]
    Kept {
        /// The VM.
        name: String,
    },
    /// The plan places no VM.
    #[error("the plan places no VM{}: there is no XML to write", if unplaced.is_empty() { String::new() } else { format!(" (not placed: {})", unplaced.join(", ")) })]
    NothingPlaced {
        /// The VMs it could not place.
        unplaced: Vec<String>,
    },
    /// Which VM is meant is not said.
    #[error("the plan has several VMs: say which with --vm NAME")]
    WhichVm {
        /// The plan's VMs.
        placed: Vec<String>,
    },
    /// A VM name that would put its file outside the output directory.
    #[error("VM name {name:?} {reason}: its file would not stay in {}", dir.display())]
    BadName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: String,
        /// The output directory.
        dir: PathBuf,
    },
    /// The domain to patch is not a VM of the plan.
    #[error("{source_name}:{line}: the domain is named {name:?}, which is not a VM of the plan {}", plan.display())]
    NotInPlan {
        /// The domain XML's origin.
        source_name: String,
        /// The line of its `<name>`.
        line: usize,
        /// Its name.
        name: String,
        /// The plan file.
        plan: PathBuf,
        /// The plan's VMs.
        placed: Vec<String>,
    },
}

impl Diagnostic for OutputError {
    fn hint(&self) -> Option<String> {
        match self {
            OutputError::Write(e) | OutputError::Dir(DirError::Write(e)) => e.hint(),
            OutputError::Patch(e) => e.hint(),
            OutputError::Plan(e) => e.hint(),
            OutputError::WhichVm { placed } => {
                Some(format!("VMs in the plan: {}", placed.join(", ")))
            }
            OutputError::NotInPlan { placed, .. } => Some(format!(
                "pass --vm NAME to patch it with one of the plan's VMs: {}",
                placed.join(", ")
            )),
            OutputError::VcpusDiffer { .. } => Some(
                "to size the domain as planned, pass --set-vcpus, or set set_vcpus = true \
                 for the VM (or in [defaults]) in the spec"
                    .to_owned(),
            ),
            OutputError::Kept { name } => Some(format!(
                "its domain is `virsh dumpxml {name}`; to plan it anew, set movable = true for it in the spec"
            )),
            OutputError::NothingPlaced { .. } => Some(
                "see the plan's explanations (`pinplan plan SPEC`) for why no VM fits".to_owned(),
            ),
            OutputError::Dir(DirError::Dir { .. } | DirError::Sync { .. })
            | OutputError::ReadDomain { .. }
            | OutputError::BadName { .. } => None,
        }
    }
}

/// A VM file `plan --out` did not write.
#[derive(Debug, Clone, PartialEq)]
pub struct NotWritten {
    /// The file it would have been.
    pub path: PathBuf,
    /// Why.
    pub error: patch::PatchError,
}

fn names(files: &[NotWritten]) -> String {
    let names: Vec<String> = files.iter().map(|f| f.path.display().to_string()).collect();
    names.join(", ")
}

fn reasons(files: &[NotWritten]) -> String {
    let reasons: Vec<String> = files.iter().map(|f| f.error.to_string()).collect();
    reasons.join("; ")
}

/// What `plan --out DIR` writes, and the VM files it cannot.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanFiles {
    /// `plan.json` and each VM's file.
    pub files: Vec<OutputFile>,
    /// VMs whose `domain_xml` has another vCPU count than the plan's (and
    /// `set_vcpus` is not given): their file is left out of the set.
    pub not_written: Vec<NotWritten>,
    /// What patching a VM's domain changed beyond its pins
    /// ([`patch::Patched::notes`]), with the file written.
    pub notes: Vec<(PathBuf, String)>,
}

impl PlanFiles {
    /// The notes as lines to print: `note: FILE: WHAT`.
    pub fn notes_text(&self) -> String {
        self.notes
            .iter()
            .map(|(path, note)| format!("note: {}: {note}\n", path.display()))
            .collect()
    }
}

/// One file to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile {
    /// Where.
    pub path: PathBuf,
    /// What.
    pub text: String,
}

/// The files `plan --out DIR` writes: `DIR/plan.json` (`json`), and per
/// placed VM `DIR/NAME.xml` (its `domain_xml` patched) or
/// `DIR/NAME.fragment.xml` (the pinning elements alone), and
/// `DIR/NAME.guest.txt` (the guest side: [`crate::guest`]). Everything is made
/// before anything is written. A domain whose vCPU count differs from the
/// plan's is resized with `set_vcpus` (the flag, or the VM's spec key), and
/// otherwise left out and listed in [`PlanFiles::not_written`].
pub fn plan_files(
    plan: &Plan,
    json: &str,
    spec: &Spec,
    dir: &Path,
    set_vcpus: bool,
) -> Result<PlanFiles, OutputError> {
    let mut files = vec![OutputFile {
        path: dir.join("plan.json"),
        text: json.to_owned(),
    }];
    let mut not_written = Vec::new();
    let mut notes = Vec::new();
    let domains = spec.domain_xmls();
    // A kept VM runs as it is: no file would change it.
    for vm in plan.vms.iter().filter(|v| !v.kept) {
        if let Some(reason) = crate::spec::bad_vm_name(&vm.name) {
            return Err(OutputError::BadName {
                name: vm.name.clone(),
                reason,
                dir: dir.to_owned(),
            });
        }
        let file = match domains.get(vm.name.as_str()) {
            Some(&(path, vm_set_vcpus)) => {
                let xml = read_domain(&spec.file.display().to_string(), path)?;
                let target = dir.join(format!("{}.xml", vm.name));
                let patched = patch::patch(
                    &path.display().to_string(),
                    &xml,
                    vm,
                    &patch::PatchOptions {
                        set_vcpus: set_vcpus || vm_set_vcpus,
                        name_given: true,
                    },
                );
                match patched {
                    Ok(patched) => {
                        notes.extend(patched.notes.into_iter().map(|n| (target.clone(), n)));
                        OutputFile {
                            path: target,
                            text: patched.text,
                        }
                    }
                    Err(error) if error.vcpu_counts.is_some() => {
                        not_written.push(NotWritten {
                            path: target,
                            error,
                        });
                        continue;
                    }
                    Err(error) => return Err(error.into()),
                }
            }
            None => OutputFile {
                path: dir.join(format!("{}.fragment.xml", vm.name)),
                text: emit::fragment(vm),
            },
        };
        files.push(file);
        files.push(OutputFile {
            path: dir.join(format!("{}.guest.txt", vm.name)),
            text: crate::guest::GuestMap::of(vm).to_text(),
        });
    }
    Ok(PlanFiles {
        files,
        not_written,
        notes,
    })
}

/// What [`write_files`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// The files written, in order.
    pub files: Vec<PathBuf>,
    /// Files of an earlier run (`plan.json`, `*.xml`) the new set does not
    /// have: removed.
    pub removed: Vec<PathBuf>,
    /// Directories an interrupted run left beside `DIR` that hold files that
    /// are not pinplan's (a user's files it was carrying over): kept.
    pub interrupted: Vec<PathBuf>,
}

impl Written {
    /// What `plan --out` says on standard error.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for f in &self.files {
            out.push_str(&format!("wrote {}\n", f.display()));
        }
        for f in &self.removed {
            out.push_str(&format!("removed {} (of an earlier run)\n", f.display()));
        }
        for d in &self.interrupted {
            out.push_str(&format!(
                "note: {} was left by an interrupted run and holds files that are not \
                 pinplan's; move what you need from it, then remove it\n",
                d.display()
            ));
        }
        out
    }
}

/// Whether a file name is one `plan --out` writes.
fn ours(name: &str) -> bool {
    name == "plan.json"
        || name == "fleet.json"
        || name.ends_with(".xml")
        || name.ends_with(".guest.txt")
}

/// Writes the set of `files` (all directly in `dir`) as one: into a fresh
/// directory beside `dir`, which then takes `dir`'s place, so that `dir`
/// holds the old set or the new one, never a mix. Files of an earlier run
/// that the new set lacks are removed (and listed); anything else in `dir`
/// (a user's notes, subdirectories) is carried over.
pub fn write_files(dir: &Path, files: &[OutputFile]) -> Result<Written, OutputError> {
    let set: Vec<SetFile<'_>> = files
        .iter()
        .map(|f| (f.path.file_name().unwrap_or_default(), f.text.as_str()))
        .collect();
    let done = write_set(dir, &set, ours)?;
    Ok(Written {
        files: files.iter().map(|f| f.path.clone()).collect(),
        removed: done.removed,
        interrupted: done.interrupted,
    })
}

/// Writes a fleet's set as one: `files` are `DIR/fleet.json` and each
/// host's `DIR/HOST/NAME` (in the order given, which is the order listed).
/// The whole tree is written into one staging directory beside `dir`, made
/// durable with one `syncfs(2)` and swapped in with one rename, so that
/// `dir` holds the old fleet's set or the new one. At each level, files of
/// an earlier run the new set lacks are removed (and listed), anything
/// else is carried over, as [`write_files`] does for one host.
pub fn write_fleet(dir: &Path, files: &[OutputFile]) -> Result<Written, OutputError> {
    let mut tree = SetTree::default();
    // Each host's place in `tree.dirs`.
    let mut index = std::collections::BTreeMap::new();
    for f in files {
        let (name, parent) = (f.path.file_name(), f.path.parent());
        let Some(name) = name else {
            return Err(outside(dir, &f.path));
        };
        let file = (name, f.text.as_str());
        if parent == Some(dir) {
            tree.files.push(file);
            continue;
        }
        let Some(host) = parent
            .filter(|p| p.parent() == Some(dir))
            .and_then(Path::file_name)
        else {
            return Err(outside(dir, &f.path));
        };
        let at = *index.entry(host).or_insert(tree.dirs.len());
        match tree.dirs.get_mut(at) {
            Some((_, set)) => set.push(file),
            None => tree.dirs.push((host, vec![file])),
        }
    }
    let done = write_tree(dir, &tree, ours, Durability::Filesystem)?;
    Ok(Written {
        files: files.iter().map(|f| f.path.clone()).collect(),
        removed: done.removed,
        interrupted: done.interrupted,
    })
}

/// A file of a fleet's set that is neither in `dir` nor in a directory of
/// it (the caller's mistake: host names are checked when the spec is read).
fn outside(dir: &Path, path: &Path) -> OutputError {
    OutputError::Dir(DirError::Dir {
        path: dir.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is neither in it nor in a host's directory in it",
                path.display()
            ),
        ),
    })
}

/// A domain XML named by `origin` (a spec, `--patch`).
pub fn read_domain(origin: &str, path: &Path) -> Result<String, OutputError> {
    std::fs::read_to_string(path).map_err(|source| OutputError::ReadDomain {
        origin: origin.to_owned(),
        path: path.to_owned(),
        source,
    })
}

/// The VM `pinplan xml` writes: `--vm NAME`, else the patched domain's name
/// (which must be a VM of the plan), else the plan's only VM.
pub fn xml_vm(
    plan: &Plan,
    plan_path: &Path,
    vm: Option<&str>,
    domain: Option<&patch::Domain<'_>>,
) -> Result<String, OutputError> {
    match (vm, domain) {
        (Some(name), _) => Ok(name.to_owned()),
        (None, Some(d)) => {
            let (name, line) = d.name()?;
            if plan.vms.iter().any(|v| v.name == name) {
                Ok(name)
            } else {
                Err(OutputError::NotInPlan {
                    source_name: d.source_name().to_owned(),
                    line,
                    name,
                    plan: plan_path.to_owned(),
                    placed: plan.names(),
                })
            }
        }
        (None, None) => only_vm(plan),
    }
}

/// The plan's only VM, or an error listing them.
pub fn only_vm(plan: &Plan) -> Result<String, OutputError> {
    match plan.vms.as_slice() {
        [only] => Ok(only.name.clone()),
        [] => Err(OutputError::NothingPlaced {
            unplaced: plan.unplaced.clone(),
        }),
        _ => Err(OutputError::WhichVm {
            placed: plan.names(),
        }),
    }
}

/// What `pinplan xml` prints for VM `name`: `domain` patched, or without a
/// domain the pinning fragment.
pub fn xml_text(
    plan: &Plan,
    plan_path: &Path,
    name: &str,
    domain: Option<&patch::Domain<'_>>,
    options: &patch::PatchOptions,
) -> Result<patch::Patched, OutputError> {
    let vm = plan.vm(name, plan_path)?;
    if vm.kept {
        return Err(OutputError::Kept {
            name: vm.name.clone(),
        });
    }
    Ok(match domain {
        None => patch::Patched {
            text: emit::fragment(vm),
            notes: Vec::new(),
        },
        Some(d) => d.patch(vm, options)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::write::STALE;
    use std::os::unix::fs::PermissionsExt as _;

    fn age(path: &Path) {
        let long_ago = std::time::SystemTime::now() - 2 * STALE;
        std::fs::File::open(path)
            .and_then(|f| f.set_modified(long_ago))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }

    /// Issue 14: a run killed inside `plan --out` leaves its staging
    /// directory; the next run removes it once stale, unless it holds a
    /// user's files.
    #[test]
    fn staging_directories_of_a_killed_run_are_cleared() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let out = root.path().join("out");
        let mk = |name: &str, files: &[&str]| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
            for f in files {
                std::fs::write(dir.join(f), "x").unwrap_or_else(|e| panic!("{e}"));
            }
            dir
        };
        let stale = mk(".pinplan-out-AbC123", &["plan.json", "vm1.xml"]);
        let old = mk(".pinplan-old-.pinplan-out-Q1", &["plan.json"]);
        let carrying = mk(".pinplan-out-DeF456", &["vm1.xml", "notes.txt"]);
        let fresh = mk(".pinplan-out-GhI789", &["plan.json"]);
        for d in [&stale, &old, &carrying] {
            age(d);
        }
        let files = [OutputFile {
            path: out.join("plan.json"),
            text: "{}".to_owned(),
        }];
        let written = write_files(&out, &files).unwrap_or_else(|e| panic!("{e}"));
        assert!(!stale.exists() && !old.exists(), "stale staging left");
        assert!(fresh.exists(), "another run's fresh staging was removed");
        assert_eq!(written.interrupted, std::slice::from_ref(&carrying));
        assert!(
            carrying.join("notes.txt").exists(),
            "a user's file was lost"
        );
        assert!(!carrying.join("vm1.xml").exists());
        assert!(written.to_text().contains("left by an interrupted run"));
    }

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    }

    /// Issue 14, defect 2: a link planted where the temporary file or the
    /// output goes is never written through.
    #[test]
    fn temp_files_cannot_be_hijacked() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap_or_else(|e| panic!("{e}"));
        // The old predictable temporary names, as links to the victim.
        for pid in [std::process::id(), 1, 2] {
            let planted = dir.path().join(format!(".plan.json.{pid}.tmp"));
            std::os::unix::fs::symlink(&victim, planted).unwrap_or_else(|e| panic!("{e}"));
        }
        // The output itself a link to the victim: replaced, not followed.
        let out = dir.path().join("plan.json");
        std::os::unix::fs::symlink(&victim, &out).unwrap_or_else(|e| panic!("{e}"));
        write_atomically(&out, "new", 0o644).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            std::fs::read_to_string(&victim).ok().as_deref(),
            Some("keep")
        );
        assert!(std::fs::symlink_metadata(&out).is_ok_and(|m| m.is_file()));
        assert_eq!(std::fs::read_to_string(&out).ok().as_deref(), Some("new"));
        assert_eq!(mode(&out), 0o644);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
            .unwrap_or_default();
        assert!(
            !left
                .iter()
                .any(|n| n.to_string_lossy().starts_with(".pinplan-")),
            "a temporary file was left: {left:?}"
        );
    }

    /// A journal is created 0600 and never replaces an existing file.
    #[test]
    fn a_journal_is_private_and_never_overwritten() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let journal = dir.path().join("j.json");
        write_new(&journal, "first", 0o600).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mode(&journal), 0o600);
        let again = write_new(&journal, "second", 0o600);
        assert_eq!(
            again.map_err(|e| e.source.kind()).err(),
            Some(std::io::ErrorKind::AlreadyExists)
        );
        assert_eq!(
            std::fs::read_to_string(&journal).ok().as_deref(),
            Some("first")
        );
    }

    fn file(dir: &Path, name: &str, text: &str) -> OutputFile {
        OutputFile {
            path: dir.join(name),
            text: text.to_owned(),
        }
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Issue 14, defect 9: the set replaces the old set as one; files of the
    /// earlier run it lacks go (and are listed), a user's files stay.
    #[test]
    fn plan_out_is_atomic_per_set() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = root.path().join("out");
        let old = [
            ("plan.json", "old"),
            ("vm1.xml", "old"),
            ("vm9.fragment.xml", "old"),
            ("notes.txt", "mine"),
        ];
        std::fs::create_dir_all(dir.join("sub")).unwrap_or_else(|e| panic!("{e}"));
        for (name, text) in old {
            std::fs::write(dir.join(name), text).unwrap_or_else(|e| panic!("{e}"));
        }
        let new = [file(&dir, "plan.json", "new"), file(&dir, "vm1.xml", "new")];
        let written = write_files(&dir, &new).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(listing(&dir), ["notes.txt", "plan.json", "sub", "vm1.xml"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("plan.json"))
                .ok()
                .as_deref(),
            Some("new")
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("notes.txt"))
                .ok()
                .as_deref(),
            Some("mine")
        );
        assert_eq!(written.removed, [dir.join("vm9.fragment.xml")]);
        assert_eq!(written.files, [dir.join("plan.json"), dir.join("vm1.xml")]);
        assert_eq!(listing(root.path()), ["out"], "staging left behind");

        // A set that fails on its second file leaves the old set whole.
        let long = "v".repeat(300) + ".xml";
        let bad = [file(&dir, "plan.json", "newer"), file(&dir, &long, "x")];
        assert!(write_files(&dir, &bad).is_err());
        assert_eq!(listing(&dir), ["notes.txt", "plan.json", "sub", "vm1.xml"]);
        assert_eq!(
            std::fs::read_to_string(dir.join("plan.json"))
                .ok()
                .as_deref(),
            Some("new")
        );
        assert_eq!(listing(root.path()), ["out"], "staging left behind");
    }

    /// Issue 14, defect 11: a temporary file left by a run killed between
    /// writing and renaming it is removed by the next write, once stale.
    #[test]
    fn a_stale_temp_journal_is_left_no_more() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let stale = dir.path().join(".pinplan-AbC123.tmp");
        let fresh = dir.path().join(".pinplan-XyZ789.tmp");
        std::fs::write(&stale, "journal").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&fresh, "journal").unwrap_or_else(|e| panic!("{e}"));
        let long_ago = std::time::SystemTime::now() - 2 * STALE;
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .and_then(|f| f.set_modified(long_ago))
            .unwrap_or_else(|e| panic!("{e}"));
        write_atomically(&dir.path().join("plan.json"), "{}", 0o644)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!stale.exists(), "the stale temporary file was left");
        assert!(
            fresh.exists(),
            "a fresh temporary file (another run's) was removed"
        );
    }

    /// Issue 31: a fleet's set is one tree; one that fails on a host's file
    /// leaves the earlier set whole, and no staging directory behind.
    #[test]
    fn a_fleet_set_that_fails_leaves_the_earlier_one() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = root.path().join("out");
        let set = |text: &str, last: &str| {
            vec![
                file(&dir.join("h1"), "plan.json", text),
                file(&dir.join("h2"), last, text),
                file(&dir, "fleet.json", text),
            ]
        };
        let written = write_fleet(&dir, &set("old", "plan.json")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(written.files.len(), 3);
        assert_eq!(listing(&dir), ["fleet.json", "h1", "h2"]);
        let long = "v".repeat(300) + ".xml";
        assert!(write_fleet(&dir, &set("new", &long)).is_err());
        for f in ["fleet.json", "h1/plan.json", "h2/plan.json"] {
            let text = std::fs::read_to_string(dir.join(f)).ok();
            assert_eq!(text.as_deref(), Some("old"), "{f}");
        }
        assert_eq!(listing(root.path()), ["out"], "staging left behind");
        // A file outside the fleet's directory and its hosts' is refused.
        let deep = [file(&dir.join("h1").join("x"), "plan.json", "new")];
        assert!(write_fleet(&dir, &deep).is_err());
        assert_eq!(listing(root.path()), ["out"]);
    }

    /// The output directory (and, for a fleet, a host's) must be a real
    /// directory: a link or a file there is refused, never written through.
    #[test]
    fn a_directory_that_is_a_link_or_a_file_is_refused() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let target = root.path().join("target");
        std::fs::create_dir(&target).unwrap_or_else(|e| panic!("{e}"));
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap_or_else(|e| panic!("{e}"));
        let plain = root.path().join("plain");
        std::fs::write(&plain, "mine").unwrap_or_else(|e| panic!("{e}"));
        for dir in [&link, &plain] {
            let one = write_files(dir, &[file(dir, "plan.json", "x")]);
            let fleet = write_fleet(dir, &[file(dir, "fleet.json", "x")]);
            for result in [one.err(), fleet.err()] {
                let said = result.map(|e| format!("{:?}", e)).unwrap_or_default();
                assert!(
                    said.contains("not a directory"),
                    "{}: {said}",
                    dir.display()
                );
            }
        }
        let fleet = root.path().join("fleet");
        std::fs::create_dir(&fleet).unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink(&target, fleet.join("h1")).unwrap_or_else(|e| panic!("{e}"));
        let set = [file(&fleet.join("h1"), "plan.json", "x")];
        assert!(write_fleet(&fleet, &set).is_err());
        assert_eq!(listing(&target), Vec::<String>::new(), "written through");
        assert_eq!(
            std::fs::read_to_string(&plain).ok().as_deref(),
            Some("mine")
        );
        assert_eq!(listing(root.path()), ["fleet", "link", "plain", "target"]);
    }

    /// Issue 31: a killed fleet run's staging directory holds a directory
    /// per host; once stale it is cleared with them (our files only).
    #[test]
    fn a_killed_fleet_runs_staging_is_cleared() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mk = |name: &str, files: &[&str]| {
            let dir = root.path().join(name);
            for f in files {
                let path = dir.join(f);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
                }
                std::fs::write(path, "x").unwrap_or_else(|e| panic!("{e}"));
            }
            age(&dir);
            dir
        };
        let stale = mk(
            ".pinplan-out-F1",
            &[
                "fleet.json",
                "h1/plan.json",
                "h1/vm1.guest.txt",
                "h2/plan.json",
            ],
        );
        let carrying = mk(
            ".pinplan-out-F2",
            &["fleet.json", "h1/plan.json", "h1/notes.txt"],
        );
        let out = root.path().join("out");
        let written =
            write_fleet(&out, &[file(&out, "fleet.json", "{}")]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!stale.exists(), "a stale fleet staging was left");
        assert_eq!(written.interrupted, std::slice::from_ref(&carrying));
        assert_eq!(listing(&carrying.join("h1")), ["notes.txt"]);
        assert_eq!(listing(&carrying), ["h1"]);
    }
}
