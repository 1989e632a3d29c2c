//! Atomic file writes: a temporary file in the same directory, fsync,
//! rename, fsync of the directory — readers never see half a file, and a
//! journal is on disk before the first change it records.

use crate::error::WriteError;
use std::path::Path;

/// Writes `text` to `path` through a temporary file in the same directory,
/// fsync, a rename and an fsync of the directory, with permission bits `mode` (0o600 for files that
/// may hold secrets, such as an apply journal). The temporary file has an
/// unpredictable name and is created exclusively (never through a link
/// someone planted); a `path` that is a link is replaced, not followed.
pub fn write_atomically(path: &Path, text: &str, mode: u32) -> Result<(), WriteError> {
    write_file(path, text, mode, true)?;
    remove_stale_temporaries(path);
    Ok(())
}

/// [`write_atomically`] for a file that must not exist yet (an apply
/// journal, the only record of the state before): an existing `path` is an
/// error, never overwritten.
pub fn write_new(path: &Path, text: &str, mode: u32) -> Result<(), WriteError> {
    write_file(path, text, mode, false)?;
    remove_stale_temporaries(path);
    Ok(())
}

pub(crate) fn write_file(
    path: &Path,
    text: &str,
    mode: u32,
    replace: bool,
) -> Result<(), WriteError> {
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    let failed = |source| WriteError {
        path: path.to_owned(),
        source,
    };
    let dir = parent_dir(path);
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
    persisted.map(drop).map_err(|e| failed(e.error))?;
    // The rename is durable once the directory is synced: a journal must
    // be on disk before the first change it records.
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(failed)
}

/// The directory a file is written in.
pub fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or_else(|| Path::new("."))
}

/// How old a temporary file of ours must be to count as left by a run that
/// was killed between writing and renaming it.
pub const STALE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Whether a file or directory was last changed more than [`STALE`] ago.
pub(crate) fn is_stale(meta: &std::fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age > STALE)
}

/// Removes `.pinplan-*.tmp` files beside `written` older than [`STALE`]:
/// what a killed run left. Links and other files are never touched.
fn remove_stale_temporaries(written: &Path) {
    let Ok(entries) = std::fs::read_dir(parent_dir(written)) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(".pinplan-") && name.ends_with(".tmp")) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if meta.is_file() && is_stale(&meta) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
