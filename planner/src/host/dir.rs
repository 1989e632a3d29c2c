//! Writing a set of files into one directory as one: into a fresh
//! directory beside it, which then takes its place, so that the directory
//! holds the old set or the new one, never a mix (`plan --out DIR`). A set
//! may have directories of files one level down (a fleet's `DIR/HOST/…`):
//! the whole tree is staged, made durable and swapped in at once.

use super::write::{is_stale, parent_dir};
use crate::error::WriteError;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

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
    /// The written set could not be made durable (fsync, syncfs).
    #[error("cannot sync the output written for {} to disk", path.display())]
    Sync {
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

/// A set written as one directory: its own files, and directories of
/// files inside it (each by name, in the order given).
#[derive(Debug, Default)]
pub struct SetTree<'a> {
    /// The files directly in the directory.
    pub files: Vec<SetFile<'a>>,
    /// Directories inside it and their files.
    pub dirs: Vec<(&'a OsStr, Vec<SetFile<'a>>)>,
}

/// How a staged set is made durable before it takes the directory's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// An fsync of each file, then of each directory, once all are written:
    /// for a handful of files.
    EachFile,
    /// One `syncfs(2)` of the filesystem that holds the staging directory:
    /// for thousands of files (a fleet), where an fsync each costs a
    /// journal commit and a disk flush each (measured in
    /// `docs/benchmarks.md`). It writes whatever else is pending on that
    /// filesystem too; a write-back error since the staging directory was
    /// made fails it.
    Filesystem,
}

/// Writes `files` into `dir` as one set, each file fsynced. Files of an
/// earlier run that the new set lacks (those whose name `ours` accepts) are
/// removed and listed; anything else in `dir` (a user's notes,
/// subdirectories) is carried over.
pub fn write_set(
    dir: &Path,
    files: &[SetFile<'_>],
    ours: fn(&str) -> bool,
) -> Result<SetWritten, DirError> {
    let tree = SetTree {
        files: files.to_vec(),
        dirs: Vec::new(),
    };
    write_tree(dir, &tree, ours, Durability::EachFile)
}

/// Writes `tree` into `dir` as one set: every file is written into a fresh
/// staging directory beside `dir` (same filesystem), what `dir` holds
/// besides our files moves over, the staging directory is made durable
/// (`durability`) and swapped with `dir` in one rename. At each level (the
/// directory, and each directory of the tree that `dir` already has) files
/// of an earlier run the new set lacks (`ours`) are removed and listed;
/// anything else is carried over, among it directories of an earlier run
/// the tree does not name.
pub fn write_tree(
    dir: &Path,
    tree: &SetTree<'_>,
    ours: fn(&str) -> bool,
    durability: Durability,
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
    // Opened before anything is written: syncfs reports the write-back
    // errors of the filesystem since the descriptor was opened.
    let staged = File::open(staging.path()).map_err(failed(dir))?;
    let clock = std::time::Instant::now();
    let files = write_staged(staging.path(), tree, durability)?;
    let wrote = clock.elapsed();
    let old = Earlier::sort_out(dir, staging.path(), tree, ours)?;
    set_modes(staging.path(), tree, &old.modes).map_err(failed(dir))?;
    // What else the directory holds moves to the new one; back on failure.
    // A user's file that cannot be moved back keeps the staging directory.
    if let Err(e) = move_all(&old.carried) {
        if !move_back(&old.carried) {
            let _ = staging.keep();
        }
        return Err(failed(dir)(e));
    }
    if let Err(e) = make_durable(durability, &staged, staging.path(), tree, files) {
        if !move_back(&old.carried) {
            let _ = staging.keep();
        }
        return Err(DirError::Sync {
            path: dir.to_owned(),
            source: e,
        });
    }
    let synced = clock.elapsed();
    let old_set = swap_in(staging.keep(), dir, parent, &old.carried)?;
    // The rename is durable once the directory that holds `dir` is synced.
    let swap_synced = File::open(parent).and_then(|p| p.sync_all());
    let swapped = clock.elapsed();
    if let Some(old_set) = old_set {
        remove_set(&old_set);
    }
    let files = tree.files.len() + tree.dirs.iter().map(|(_, f)| f.len()).sum::<usize>();
    trace_steps(
        dir,
        files,
        durability,
        [wrote, synced, swapped, clock.elapsed()],
    );
    swap_synced.map_err(|source| DirError::Sync {
        path: dir.to_owned(),
        source,
    })?;
    written.removed = old.removed;
    Ok(written)
}

/// Says how long each step of [`write_tree`] took (`-vv`): `marks` are the
/// times since the first write at which the files were written, made
/// durable, swapped in, and the earlier set removed.
fn trace_steps(dir: &Path, files: usize, durability: Durability, marks: [Duration; 4]) {
    let [wrote, synced, swapped, removed] = marks;
    tracing::debug!(
        target: "pinplan::output",
        "{}: {files} files written in {:.3} s, made durable ({durability:?}) in {:.3} s, \
         swapped in in {:.3} s, the earlier set removed in {:.3} s",
        dir.display(),
        wrote.as_secs_f64(),
        (synced - wrote).as_secs_f64(),
        (swapped - synced).as_secs_f64(),
        (removed - swapped).as_secs_f64(),
    );
}

/// The error for a failed operation on directory `path`.
fn failed(path: &Path) -> impl Fn(std::io::Error) -> DirError {
    let path = path.to_owned();
    move |source| DirError::Dir {
        path: path.clone(),
        source,
    }
}

/// Threads that write a tree's directories (and remove an earlier one's).
/// Creating a file is kernel work that stalls on a loaded machine, and on
/// ext4 in the minutes after many inodes were freed; four threads took the
/// median creation of 25,001 files from 5.6 s to 4.0 s there, and the
/// removal of as many from about 2 s to about 1 s (`docs/benchmarks.md`).
const WRITERS: usize = 4;

/// Runs `work` on each of `items`, [`WRITERS`] at a time; the results in
/// the order of `items`.
fn in_parallel<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WRITERS.min(items.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return mine;
                        };
                        mine.push((i, work(item)));
                    }
                })
            })
            .collect();
        // A worker that panicked loses its results: the caller sees fewer.
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Writes every file of `tree` into `staging` (fresh, private: nobody else
/// can have put a name there), created exclusively, 0644 (less the umask);
/// the tree's directories [`WRITERS`] at a time. The files are kept open
/// to be fsynced under [`Durability::EachFile`].
fn write_staged(
    staging: &Path,
    tree: &SetTree<'_>,
    durability: Durability,
) -> Result<Vec<File>, DirError> {
    let keep = durability == Durability::EachFile;
    let mut open = write_level(staging, &tree.files, keep)?;
    let per_dir = in_parallel(&tree.dirs, |(name, files)| {
        let at = staging.join(name);
        std::fs::create_dir(&at).map_err(failed(&at))?;
        write_level(&at, files, keep)
    });
    if per_dir.len() != tree.dirs.len() {
        return Err(failed(staging)(std::io::Error::other(
            "a thread writing the set stopped",
        )));
    }
    for files in per_dir {
        open.extend(files?);
    }
    Ok(open)
}

/// Writes `files` into `at`; the files, if `keep`.
fn write_level(at: &Path, files: &[SetFile<'_>], keep: bool) -> Result<Vec<File>, DirError> {
    let mut open = Vec::new();
    for (name, text) in files {
        let file = write_new_file(&at.join(name), text)?;
        if keep {
            open.push(file);
        }
    }
    Ok(open)
}

/// Removes an earlier set swapped out of the way: its directories
/// [`WRITERS`] at a time, then the rest.
fn remove_set(old: &Path) {
    let dirs: Vec<PathBuf> = entries_of(old)
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
        .collect();
    in_parallel(&dirs, |d| std::fs::remove_dir_all(d));
    let _ = std::fs::remove_dir_all(old);
}

fn write_new_file(path: &Path, text: &str) -> Result<File, WriteError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let failed = |source| WriteError {
        path: path.to_owned(),
        source,
    };
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    Ok(file)
}

/// The staged set on disk: each file, then each directory, or the whole
/// filesystem at once.
fn make_durable(
    durability: Durability,
    staged: &File,
    staging: &Path,
    tree: &SetTree<'_>,
    files: Vec<File>,
) -> std::io::Result<()> {
    if durability == Durability::Filesystem {
        return rustix::fs::syncfs(staged).map_err(std::io::Error::from);
    }
    for file in files {
        file.sync_all()?;
    }
    for (name, _) in &tree.dirs {
        File::open(staging.join(name))?.sync_all()?;
    }
    staged.sync_all()
}

/// What the directory of an earlier run holds, sorted out against the new
/// set.
#[derive(Debug, Default)]
struct Earlier {
    /// Entries to carry over: (where it is, where it goes in the staging
    /// directory), relative names; in name order.
    carried: Vec<(PathBuf, PathBuf)>,
    /// Our files of the earlier run that the new set lacks (removed with
    /// the old directory).
    removed: Vec<PathBuf>,
    /// The permissions of the directory and of each of the tree's
    /// directories it has (by name; `None` for the directory itself).
    modes: Vec<(Option<OsString>, std::fs::Permissions)>,
}

impl Earlier {
    /// Sorts out `dir` (absent: nothing to carry) against `tree` staged in
    /// `staging`.
    fn sort_out(
        dir: &Path,
        staging: &Path,
        tree: &SetTree<'_>,
        ours: fn(&str) -> bool,
    ) -> Result<Self, DirError> {
        let mut old = Earlier::default();
        let Some(mode) = existing_dir(dir)? else {
            return Ok(old);
        };
        old.modes.push((None, mode));
        let subdirs: Vec<&OsStr> = tree.dirs.iter().map(|(name, _)| *name).collect();
        for name in old.level(dir, staging, &tree.files, &subdirs, ours)? {
            let Some((_, files)) = tree.dirs.iter().find(|(d, _)| *d == name.as_os_str()) else {
                continue;
            };
            let sub = dir.join(&name);
            if let Some(mode) = existing_dir(&sub)? {
                old.modes.push((Some(name.clone()), mode));
                // A level of the tree has no directories of its own.
                old.level(&sub, &staging.join(&name), files, &[], ours)?;
            }
        }
        Ok(old)
    }

    /// Sorts out the entries of `at` (a level of the directory), staged in
    /// `to`: entries named in `files` are replaced, our files the new set
    /// lacks removed, the rest carried over; the names of `subdirs` found
    /// are returned, to be sorted out in turn.
    fn level(
        &mut self,
        at: &Path,
        to: &Path,
        files: &[SetFile<'_>],
        subdirs: &[&OsStr],
        ours: fn(&str) -> bool,
    ) -> Result<Vec<OsString>, DirError> {
        let mut entries: Vec<_> = std::fs::read_dir(at)
            .map_err(failed(at))?
            .collect::<Result<_, _>>()
            .map_err(failed(at))?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        let mut found = Vec::new();
        for entry in entries {
            let name = entry.file_name();
            if files.iter().any(|(f, _)| *f == name.as_os_str()) {
                continue;
            }
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if subdirs.contains(&name.as_os_str()) {
                found.push(name);
            } else if is_file && ours(&name.to_string_lossy()) {
                self.removed.push(at.join(&name));
            } else {
                self.carried.push((at.join(&name), to.join(&name)));
            }
        }
        Ok(found)
    }
}

/// The permissions of `path` if it is a directory (never through a link),
/// `None` if it is absent; anything else there is an error.
fn existing_dir(path: &Path) -> Result<Option<std::fs::Permissions>, DirError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(failed(path)(e)),
        Ok(meta) if !meta.is_dir() => Err(failed(path)(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "it exists and is not a directory",
        ))),
        Ok(meta) => Ok(Some(meta.permissions())),
    }
}

/// Gives the staged directories the permissions of those they replace, or
/// 0755 (the staging directory is made 0700).
fn set_modes(
    staging: &Path,
    tree: &SetTree<'_>,
    modes: &[(Option<OsString>, std::fs::Permissions)],
) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode_of = |name: Option<&OsStr>| {
        modes
            .iter()
            .find(|(n, _)| n.as_deref() == name)
            .map_or_else(
                || std::fs::Permissions::from_mode(0o755),
                |(_, m)| m.clone(),
            )
    };
    for (name, _) in &tree.dirs {
        std::fs::set_permissions(staging.join(name), mode_of(Some(name)))?;
    }
    std::fs::set_permissions(staging, mode_of(None))
}

/// Moves each entry `(from, to)`.
fn move_all(moves: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
    for (from, to) in moves {
        std::fs::rename(from, to)?;
    }
    Ok(())
}

/// Moves back what [`move_all`] moved (on a failure after it).
/// Whether everything is back (an entry never moved is); where not, the
/// staging directory holding it must be kept, never removed with it.
fn move_back(moves: &[(PathBuf, PathBuf)]) -> bool {
    let mut all = true;
    for (from, to) in moves {
        match std::fs::rename(to, from) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => all = false,
            _ => {}
        }
    }
    all
}

/// Swaps the new set in and returns where the old set now is (to be
/// removed). When `dir` exists, one `renameat2(2)` exchanges the two
/// directories: at every instant `dir` is the old set or the new one, and
/// the old set takes the staging name. Where the filesystem cannot
/// exchange, the old directory moves aside first (`.pinplan-old-…`) and the
/// new one takes its name: a crash between the two renames leaves `dir`
/// absent and the old set whole beside it. On failure the old set is put
/// back, with what was `carried` over.
fn swap_in(
    new: PathBuf,
    dir: &Path,
    parent: &Path,
    carried: &[(PathBuf, PathBuf)],
) -> Result<Option<PathBuf>, DirError> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, &new, CWD, dir, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(Some(new)),
        Err(e) if e == rustix::io::Errno::NOENT && !dir.exists() => {
            std::fs::rename(&new, dir).map_err(|e| give_up(&new, dir, carried, e))?;
            Ok(None)
        }
        Err(_) => swap_by_renames(&new, dir, parent, carried).map(Some),
    }
}

/// [`swap_in`] without an exchange: the old directory aside, the new one
/// in; returns where the old one is.
fn swap_by_renames(
    new: &Path,
    dir: &Path,
    parent: &Path,
    carried: &[(PathBuf, PathBuf)],
) -> Result<PathBuf, DirError> {
    let old = parent.join(format!(
        ".pinplan-old-{}",
        new.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::fs::rename(dir, &old).map_err(|e| give_up(new, dir, carried, e))?;
    if let Err(e) = std::fs::rename(new, dir) {
        let _ = std::fs::rename(&old, dir);
        return Err(give_up(new, dir, carried, e));
    }
    Ok(old)
}

/// The new set is not swapped in: what was carried over goes back, and the
/// staging directory is removed (kept if something of the user's is still
/// in it).
fn give_up(new: &Path, dir: &Path, carried: &[(PathBuf, PathBuf)], e: std::io::Error) -> DirError {
    if move_back(carried) {
        let _ = std::fs::remove_dir_all(new);
    }
    failed(dir)(e)
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
        // A fleet's set has a directory per host: cleared the same way.
        for sub in entries_of(&path) {
            let real_dir = std::fs::symlink_metadata(&sub).is_ok_and(|m| m.is_dir());
            if real_dir {
                remove_ours(&sub, ours);
                let _ = std::fs::remove_dir(&sub);
            }
        }
        remove_ours(&path, ours);
        if std::fs::remove_dir(&path).is_err() {
            kept.push(path);
        }
    }
    kept
}

/// The paths of the entries of `dir` (none if it cannot be read).
fn entries_of(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// Removes the regular files in `dir` that are ours or our temporary files.
fn remove_ours(dir: &Path, ours: fn(&str) -> bool) {
    let Ok(inner) = std::fs::read_dir(dir) else {
        return;
    };
    for file in inner.filter_map(Result::ok) {
        let file_name = file.file_name();
        let file_name = file_name.to_string_lossy();
        let temporary = file_name.starts_with(".pinplan-") && file_name.ends_with(".tmp");
        if (ours(&file_name) || temporary) && file.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(file.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    /// Where a filesystem cannot exchange two directories, the old one goes
    /// aside and the new one takes its name; on failure the old one is back
    /// with what was carried over, and the staging directory is gone.
    #[test]
    fn without_an_exchange_the_old_set_moves_aside() {
        let root = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (dir, new) = (root.path().join("out"), root.path().join(".pinplan-out-N"));
        for (d, text) in [(&dir, "old"), (&new, "new")] {
            std::fs::create_dir(d).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(d.join("plan.json"), text).unwrap_or_else(|e| panic!("{e}"));
        }
        let old = swap_by_renames(&new, &dir, root.path(), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old, root.path().join(".pinplan-old-.pinplan-out-N"));
        assert_eq!(read(&dir.join("plan.json")), "new");
        assert_eq!(read(&old.join("plan.json")), "old");

        // The new one cannot take the name (it is not there): the old one is
        // put back, and a user's file carried over returns to it.
        let staged = root.path().join(".pinplan-out-M");
        std::fs::create_dir(&staged).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(staged.join("notes.txt"), "mine").unwrap_or_else(|e| panic!("{e}"));
        let carried = [(dir.join("notes.txt"), staged.join("notes.txt"))];
        let missing = root.path().join(".pinplan-out-X");
        assert!(swap_by_renames(&missing, &dir, root.path(), &carried).is_err());
        assert_eq!(read(&dir.join("plan.json")), "new");
        assert!(!root.path().join(".pinplan-old-.pinplan-out-X").exists());
        assert_eq!(read(&dir.join("notes.txt")), "mine");
    }
}
