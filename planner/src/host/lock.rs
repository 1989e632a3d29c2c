//! An exclusive `flock` on a lock file, held while the value lives — also
//! when the process is killed, as the kernel drops the lock with it. The
//! one lock of pinplan: `apply` takes one per libvirt host, `isolate` one
//! per state directory; each says in its own words why it could not.

use std::fs::{File, TryLockError};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// A held lock; dropping it releases it.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// How long to wait for another holder, and how often to try again.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    /// The longest wait before giving up.
    pub limit: Duration,
    /// The pause between two tries.
    pub poll: Duration,
}

/// Why the lock was not taken.
#[derive(Debug)]
pub enum LockFailure {
    /// The lock file could not be opened or locked.
    Open(std::io::Error),
    /// Another holder kept it for longer than the wait's limit.
    Busy,
}

/// Takes the lock on `path` (created when absent, never through a link as
/// its last component), waiting as `wait` says while another process holds
/// it; `waiting` is called once when the first try finds it held.
pub fn acquire(
    path: &Path,
    wait: Wait,
    waiting: &mut dyn FnMut(),
) -> Result<FileLock, LockFailure> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(LockFailure::Open)?;
    let started = Instant::now();
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(FileLock { _file: file }),
            Err(TryLockError::WouldBlock) if started.elapsed() < wait.limit => {
                if !said {
                    waiting();
                    said = true;
                }
                std::thread::sleep(wait.poll);
            }
            Err(TryLockError::WouldBlock) => return Err(LockFailure::Busy),
            Err(TryLockError::Error(e)) => return Err(LockFailure::Open(e)),
        }
    }
}
