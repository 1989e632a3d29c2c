//! One `apply` (or rollback) at a time per libvirt host: an exclusive
//! `flock` on `/run/pinplan/apply-HOST.lock` (for another user than root,
//! `$XDG_RUNTIME_DIR/pinplan/`), held until the run ends — also when it is
//! killed, as the kernel drops the lock with the process.

use crate::error::Diagnostic;
use crate::host::lock::{acquire, FileLock, LockFailure, Wait};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a second run waits for the first before it refuses.
pub const WAIT: Duration = Duration::from_secs(120);

/// A held lock; dropping it releases it.
#[derive(Debug)]
pub struct HostLock {
    _lock: FileLock,
    /// The lock file.
    pub path: PathBuf,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock file could not be opened.
    #[error("cannot open the apply lock {}", path.display())]
    Open {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// Another run held it for longer than [`WAIT`].
    #[error("another pinplan apply on {host} has held {} for {} s; nothing was changed", path.display(), WAIT.as_secs())]
    Busy {
        /// The libvirt host.
        host: String,
        /// The lock file.
        path: PathBuf,
    },
}

impl Diagnostic for LockError {
    fn hint(&self) -> Option<String> {
        match self {
            LockError::Busy { .. } => Some(
                "wait for it to finish (`fuser -v LOCK` names it), then run this again".to_owned(),
            ),
            LockError::Open { .. } => None,
        }
    }
}

/// The host part of a libvirt URI, as a file-name-safe key: `localhost`
/// for `qemu:///system`, `b1` for `qemu+ssh://root@b1:22/system`.
pub fn host_key(uri: &str) -> String {
    let rest = uri.split_once("://").map_or(uri, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = host.split(':').next().unwrap_or("");
    let host = if host.is_empty() { "localhost" } else { host };
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Takes the apply lock of `uri`'s host, waiting up to [`WAIT`] (saying so
/// through `waiting` once) while another run holds it.
pub fn lock(uri: &str, waiting: &mut dyn FnMut(&Path)) -> Result<HostLock, LockError> {
    let host = host_key(uri);
    let dir = crate::state::runtime_dir().map_err(|e| match e {
        crate::state::StateError::Create { path, source, .. } => LockError::Open { path, source },
        crate::state::StateError::NoHome => LockError::Open {
            path: PathBuf::from("/run/pinplan"),
            source: std::io::ErrorKind::NotFound.into(),
        },
    })?;
    let path = dir.join(format!("apply-{host}.lock"));
    let wait = Wait {
        limit: WAIT,
        poll: Duration::from_millis(50),
    };
    match acquire(&path, wait, &mut || waiting(&path)) {
        Ok(lock) => Ok(HostLock { _lock: lock, path }),
        Err(LockFailure::Busy) => Err(LockError::Busy { host, path }),
        Err(LockFailure::Open(source)) => Err(LockError::Open { path, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_per_host() {
        assert_eq!(host_key("qemu:///system"), "localhost");
        assert_eq!(host_key("qemu+ssh://root@b1/system"), "b1");
        assert_eq!(host_key("qemu+tls://b1.lab:16514/system"), "b1.lab");
        assert_eq!(host_key("qemu+ssh://x/../../etc/system"), "x");
        assert_eq!(host_key("test:///default"), "localhost");
    }

    #[test]
    fn a_second_holder_waits() {
        let first = lock("qemu+ssh://pinplan-lock-test/system", &mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        let mut waited = false;
        let handle = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            drop(first);
        });
        let second = lock("qemu+ssh://pinplan-lock-test/system", &mut |_| {
            waited = true
        });
        assert!(second.is_ok());
        assert!(waited, "the second run did not wait");
        let _ = handle.join();
    }
}
