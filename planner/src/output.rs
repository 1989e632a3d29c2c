//! What the commands write: the files of `plan --out DIR` (the plan, and per
//! VM its patched domain or a fragment), the XML `pinplan xml` prints, and
//! atomic file writes (a temporary file in the same directory, fsync, rename:
//! readers never see half a file).

use crate::error::{Diagnostic, WriteError};
use crate::libvirt::{emit, patch};
use crate::plan::{Plan, PlanError};
use crate::spec::Spec;
use std::path::{Path, PathBuf};

/// Why the output could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The output directory could not be created.
    #[error("cannot create the output directory {}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
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
    /// The plan has no such VM.
    #[error(transparent)]
    Plan(#[from] PlanError),
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
            OutputError::Write(e) => e.hint(),
            OutputError::Patch(e) => e.hint(),
            OutputError::Plan(e) => e.hint(),
            OutputError::WhichVm { placed } => {
                Some(format!("VMs in the plan: {}", placed.join(", ")))
            }
            OutputError::NotInPlan { placed, .. } => Some(format!(
                "pass --vm NAME to patch it with one of the plan's VMs: {}",
                placed.join(", ")
            )),
            OutputError::Dir { .. }
            | OutputError::ReadDomain { .. }
            | OutputError::BadName { .. } => None,
        }
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
/// `DIR/NAME.fragment.xml` (the pinning elements alone). Everything is made
/// before anything is written.
pub fn plan_files(
    plan: &Plan,
    json: &str,
    spec: &Spec,
    dir: &Path,
) -> Result<Vec<OutputFile>, OutputError> {
    let mut files = vec![OutputFile {
        path: dir.join("plan.json"),
        text: json.to_owned(),
    }];
    for vm in &plan.vms {
        if let Some(reason) = crate::spec::bad_vm_name(&vm.name) {
            return Err(OutputError::BadName {
                name: vm.name.clone(),
                reason,
                dir: dir.to_owned(),
            });
        }
        let file = match spec.domain_xml(&vm.name) {
            Some(path) => {
                let xml = read_domain(&spec.file.display().to_string(), &path)?;
                let patched = patch::patch(
                    &path.display().to_string(),
                    &xml,
                    vm,
                    &patch::PatchOptions {
                        set_vcpus: false,
                        name_given: true,
                    },
                )?;
                OutputFile {
                    path: dir.join(format!("{}.xml", vm.name)),
                    text: patched,
                }
            }
            None => OutputFile {
                path: dir.join(format!("{}.fragment.xml", vm.name)),
                text: emit::fragment(vm),
            },
        };
        files.push(file);
    }
    Ok(files)
}

/// Creates `dir` if needed and writes every file atomically.
pub fn write_files(dir: &Path, files: &[OutputFile]) -> Result<(), OutputError> {
    std::fs::create_dir_all(dir).map_err(|source| OutputError::Dir {
        path: dir.to_owned(),
        source,
    })?;
    for f in files {
        write_atomically(&f.path, &f.text, 0o644)?;
    }
    Ok(())
}

/// A domain XML named by `origin` (a spec, `--patch`).
pub fn read_domain(origin: &str, path: &Path) -> Result<String, OutputError> {
    std::fs::read_to_string(path).map_err(|source| OutputError::ReadDomain {
        origin: origin.to_owned(),
        path: path.to_owned(),
        source,
    })
}

/// A domain to patch: where it came from (for messages) and its XML.
#[derive(Debug, Clone, Copy)]
pub struct Domain<'a> {
    /// A file name, or `URI domain NAME`.
    pub source_name: &'a str,
    /// The XML.
    pub xml: &'a str,
}

/// The VM `pinplan xml` writes: `--vm NAME`, else the patched domain's name
/// (which must be a VM of the plan), else the plan's only VM.
pub fn xml_vm(
    plan: &Plan,
    plan_path: &Path,
    vm: Option<&str>,
    domain: Option<Domain<'_>>,
) -> Result<String, OutputError> {
    match (vm, domain) {
        (Some(name), _) => Ok(name.to_owned()),
        (None, Some(d)) => {
            let (name, line) = patch::domain_name(d.source_name, d.xml)?;
            if plan.vms.iter().any(|v| v.name == name) {
                Ok(name)
            } else {
                Err(OutputError::NotInPlan {
                    source_name: d.source_name.to_owned(),
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
    domain: Option<Domain<'_>>,
    options: &patch::PatchOptions,
) -> Result<String, OutputError> {
    let vm = plan.vm(name, plan_path)?;
    Ok(match domain {
        None => emit::fragment(vm),
        Some(d) => patch::patch(d.source_name, d.xml, vm, options)?,
    })
}

/// Writes `text` to `path` through a temporary file in the same directory,
/// fsync and a rename, with permission bits `mode` (0o600 for files that
/// may hold secrets, such as an apply journal). The temporary file has an
/// unpredictable name and is created exclusively (never through a link
/// someone planted); a `path` that is a link is replaced, not followed.
pub fn write_atomically(path: &Path, text: &str, mode: u32) -> Result<(), WriteError> {
    write_file(path, text, mode, true)
}

/// [`write_atomically`] for a file that must not exist yet (an apply
/// journal, the only record of the state before): an existing `path` is an
/// error, never overwritten.
pub fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), WriteError> {
    write_file(path, text, mode, false)
}

fn write_file(path: &Path, text: &str, mode: u32, replace: bool) -> Result<(), WriteError> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let failed = |source| WriteError {
        path: path.to_owned(),
        source,
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".pinplan-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .map_err(failed)?;
    temp.write_all(text.as_bytes()).map_err(failed)?;
    temp.as_file().sync_all().map_err(failed)?;
    // The temporary file is removed when `persist` fails.
    let persisted = if replace {
        temp.persist(path)
    } else {
        temp.persist_noclobber(path)
    };
    persisted.map(drop).map_err(|e| failed(e.error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

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
}
