//! Writing a set of files into one directory as one: into a fresh
//! directory beside it, which then takes its place, so that the directory
//! holds the old set or the new one, never a mix (`plan --out DIR`).

use super::write::{is_stale, parent_dir, write_file};
use crate::error::WriteError;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

/// Why a set could not be written.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// The directory (or its staging directory) could not be made, read or
    /// swapped in.
    #[error("cannot create the output directory {}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// A file of the set could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// What [`write_set`] did besides writing the set.
#[derive(Debug, Default)]
pub struct SetWritten {
    /// Files of an earlier run (names `ours` accepts) the new set lacks:
    /// removed.
    pub removed: Vec<PathBuf>,
    /// Staging directories an interrupted run left beside `dir` that hold
    /// files that are not ours: kept.
    pub interrupted: Vec<PathBuf>,
}

/// One file of a set: its name in the directory and its text.
pub type SetFile<'a> = (&'a OsStr, &'a str);

/// Writes `files` into `dir` as one set. Files of an earlier run that the
/// new set lacks (those whose name `ours` accepts) are removed and listed;
/// anything else in `dir` (a user's notes, subdirectories) is carried over.
pub fn write_set(
    dir: &Path,
    files: &[SetFile<'_>],
    ours: fn(&str) -> bool,
) -> Result<SetWritten, DirError> {
    let parent = parent_dir(dir);
    std::fs::create_dir_all(parent).map_err(failed(parent))?;
    let staging = tempfile::Builder::new()
        .prefix(".pinplan-out-")
        .tempdir_in(parent)
        .map_err(failed(parent))?;
    let mut written = SetWritten {
        interrupted: remove_stale_staging(parent, staging.path(), ours),
        ..SetWritten::default()
    };
    for (name, text) in files {
        write_file(&staging.path().join(name), text, 0o644, true)?;
    }
    let mut mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    let mut carried = Vec::new();
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(failed(dir)(e)),
        Ok(meta) if !meta.is_dir() => {
            return Err(failed(dir)(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "it exists and is not a directory",
            )))
        }
        Ok(meta) => {
            mode = meta.permissions();
            (carried, written.removed) = sort_out(dir, files, ours)?;
        }
    }
    std::fs::set_permissions(staging.path(), mode).map_err(failed(dir))?;
    // What else the directory holds moves to the new one; back on failure.
    if let Err(e) = move_all(dir, staging.path(), &carried) {
        let _ = move_all(staging.path(), dir, &carried);
        return Err(failed(dir)(e));
    }
    swap_in(staging.keep(), dir, parent, &carried)?;
    Ok(written)
}

/// The error for a failed operation on directory `path`.
fn failed(path: &Path) -> impl Fn(std::io::Error) -> DirError {
    let path = path.to_owned();
    move |source| DirError::Dir {
        path: path.clone(),
        source,
    }
}

/// Moves the entries `names` of `from` into `to`.
fn move_all(from: &Path, to: &Path, names: &[OsString]) -> std::io::Result<()> {
    for name in names {
        std::fs::rename(from.join(name), to.join(name))?;
    }
    Ok(())
}

/// Swaps the new set in: the old directory moves aside under a temporary
/// name and is removed once the new one is in place; on failure the old one
/// (with what was `carried` over) is put back.
fn swap_in(new: PathBuf, dir: &Path, parent: &Path, carried: &[OsString]) -> Result<(), DirError> {
    let old = parent.join(format!(
        ".pinplan-old-{}",
        new.file_name().unwrap_or_default().to_string_lossy()
    ));
    let had_old = std::fs::rename(dir, &old).is_ok();
    if let Err(e) = std::fs::rename(&new, dir) {
        if had_old {
            let _ = std::fs::rename(&old, dir);
            let _ = move_all(&new, dir, carried);
        }
        let _ = std::fs::remove_dir_all(&new);
        return Err(failed(dir)(e));
    }
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}

/// What `dir` holds besides the new set: the names to carry over (anything
/// that is not ours), and our files of an earlier run that the new set
/// lacks (removed with the old directory).
type Sorted = (Vec<OsString>, Vec<PathBuf>);

fn sort_out(dir: &Path, files: &[SetFile<'_>], ours: fn(&str) -> bool) -> Result<Sorted, DirError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(failed(dir))?
        .collect::<Result<_, _>>()
        .map_err(failed(dir))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    let (mut kept, mut removed) = (Vec::new(), Vec::new());
    for entry in entries {
        let name = entry.file_name();
        if files.iter().any(|(f, _)| *f == name.as_os_str()) {
            continue;
        }
        if ours(&name.to_string_lossy()) && entry.file_type().is_ok_and(|t| t.is_file()) {
            removed.push(dir.join(&name));
        } else {
            kept.push(name);
        }
    }
    Ok((kept, removed))
}

/// Clears the staging directories (`.pinplan-out-*`, and `.pinplan-old-*`
/// holding a replaced set) that a run killed during [`write_set`] left in
/// `parent`, once older than [`STALE`]: pinplan's own files in them are
/// removed, and the directory with them; a directory that still holds
/// anything else (a user's files being carried over) is kept and returned.
/// Only real directories owned by this user are looked at; links are never
/// followed.
fn remove_stale_staging(parent: &Path, ours_now: &Path, ours: fn(&str) -> bool) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    // Our own fresh staging directory is owned by the user we run as.
    let Ok(uid) = std::fs::metadata(ours_now).map(|m| m.uid()) else {
        return Vec::new();
    };
    let mut kept = Vec::new();
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        if !(name.starts_with(".pinplan-out-") || name.starts_with(".pinplan-old-"))
            || path == ours_now
        {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != uid || !is_stale(&meta) {
            continue;
        }
        let Ok(inner) = std::fs::read_dir(&path) else {
            continue;
        };
        for file in inner.filter_map(Result::ok) {
            let file_name = file.file_name();
            let file_name = file_name.to_string_lossy();
            let temporary = file_name.starts_with(".pinplan-") && file_name.ends_with(".tmp");
            if (ours(&file_name) || temporary) && file.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(file.path());
            }
        }
        if std::fs::remove_dir(&path).is_err() {
            kept.push(path);
        }
    }
    kept
}
