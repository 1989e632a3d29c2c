//! The per-VM libvirt hook: a `qemu.d/pinplan-isolate` script that libvirt
//! runs as `pinplan-isolate NAME OPERATION SUB-OPERATION -` and that calls
//! `pinplan isolate --vm-start NAME` at `prepare begin` and `--vm-stop
//! NAME` at `release end` (no logic in shell). pinplan counts the running
//! VMs in its state directory: the host is kept off the CPUs of every
//! running VM of the plan, and a CPU is given back only when no running VM
//! owns it; after the last one stops every value is as it was before the
//! first started.

use super::IsolateError;
use std::path::{Path, PathBuf};

/// The script's name in `hooks/qemu.d/`.
pub const SCRIPT: &str = "pinplan-isolate";

/// The line that marks a script as pinplan's (one it may replace).
const MARKER: &str = "# pinplan-isolate hook: written by pinplan isolate --emit hook";

/// A word quoted for `sh`.
fn quoted(path: &Path) -> Result<String, IsolateError> {
    crate::text::sh_word(path).ok_or_else(|| IsolateError::Hook {
        path: path.to_owned(),
        message: "the path is not UTF-8 or holds a newline: the hook cannot name it".to_owned(),
    })
}

/// The hook script calling `pinplan` (an absolute path) with `plan`, the
/// isolation `root` and the `state` directory.
pub fn script(
    pinplan: &Path,
    plan: &Path,
    root: &Path,
    state: &Path,
) -> Result<String, IsolateError> {
    let common = format!(
        "{} isolate --plan {} --root {} --state {}",
        quoted(pinplan)?,
        quoted(plan)?,
        quoted(root)?,
        quoted(state)?
    );
    Ok(format!(
        "#!/bin/sh\n\
         {MARKER}\n\
         # libvirt runs it as: {SCRIPT} NAME OPERATION SUB-OPERATION EXTRA (domain XML on stdin).\n\
         # It keeps the host off a planned VM's CPUs while the VM runs; pinplan counts the\n\
         # running VMs. A failure is logged by libvirt and never stops the VM from starting.\n\
         case \"$2 $3\" in\n\
         \x20 \"prepare begin\") {common} --vm-start \"$1\" </dev/null || true ;;\n\
         \x20 \"release end\") {common} --vm-stop \"$1\" </dev/null || true ;;\n\
         esac\n\
         exit 0\n"
    ))
}

/// Writes the script into `dir/qemu.d/` (made if missing), replacing only
/// a script of pinplan's; returns its path. libvirtd reads its hooks when
/// it starts: restart it once after the first install.
pub fn install(dir: &Path, text: &str) -> Result<PathBuf, IsolateError> {
    let hook_dir = dir.join("qemu.d");
    if !dir.is_dir() {
        return Err(IsolateError::Hook {
            path: dir.to_owned(),
            message: "is not a directory".to_owned(),
        });
    }
    if let Err(e) = std::fs::create_dir(&hook_dir) {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(IsolateError::Io {
                what: "cannot create",
                path: hook_dir,
                source: e,
            });
        }
    }
    let path = hook_dir.join(SCRIPT);
    if let Ok(meta) = std::fs::symlink_metadata(&path) {
        let ours = meta.is_file()
            && crate::host::fs::read(&path).is_some_and(|t| t.lines().nth(1) == Some(MARKER));
        if !ours {
            return Err(IsolateError::Hook {
                path,
                message: "exists and is not pinplan's hook: not replaced".to_owned(),
            });
        }
    }
    crate::host::write::write_atomically(&path, text, 0o755).map_err(|e| IsolateError::Io {
        what: "cannot write",
        path: e.path,
        source: e.source,
    })?;
    Ok(path)
}
