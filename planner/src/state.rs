//! Where pinplan keeps what outlives one command, by one rule for every
//! command:
//!
//! - the **state directory** ([`state_dir`]): journals (`apply`, `apply
//!   --fleet`, `isolate`) when no `--journal` is given, and the links to
//!   journals written elsewhere that are not finished yet. `/var/lib/pinplan`
//!   for root, `$XDG_STATE_HOME/pinplan` (default `~/.local/state/pinplan`)
//!   for another user; `$PINPLAN_STATE_DIR` overrides both (tests, and a
//!   user who keeps journals elsewhere).
//! - the **runtime directory** ([`runtime_dir`]): locks and what holds until
//!   the next boot (`isolate --state`). `/run/pinplan`, or
//!   `$XDG_RUNTIME_DIR/pinplan` for a user who may not write `/run`.
//!
//! Both are created mode 0700 (a journal holds whole domain definitions).
//! This module only finds and creates them; what goes in is the caller's.

use crate::error::Diagnostic;
use crate::host::journal::Tool;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable that moves the state directory.
pub const STATE_DIR_ENV: &str = "PINPLAN_STATE_DIR";

/// Why a directory of pinplan's could not be had.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Creating it (or a parent) failed.
    #[error("cannot create pinplan's {what} directory {}", path.display())]
    Create {
        /// `state` or `runtime`.
        what: &'static str,
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// Not root, and neither `$XDG_STATE_HOME` nor `$HOME` says where.
    #[error("no state directory: not root, and neither XDG_STATE_HOME nor HOME is set")]
    NoHome,
}

impl Diagnostic for StateError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            StateError::Create { .. } => format!(
                "set {STATE_DIR_ENV}=DIR to a directory you may write, or give --journal FILE"
            ),
            StateError::NoHome => {
                format!("set {STATE_DIR_ENV}=DIR, or give --journal FILE")
            }
        })
    }
}

/// Whether this process runs as root (the owner of `/proc/self` is the
/// effective user; no `unsafe` `geteuid` needed).
fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// What the environment says about pinplan's directories, read by the
/// program (the CLI) and set once with [`configure`]: the library reads no
/// environment. An empty value counts as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateDirs {
    /// `$PINPLAN_STATE_DIR` ([`STATE_DIR_ENV`]): the state directory itself.
    pub state_dir: Option<PathBuf>,
    /// `$XDG_STATE_HOME` (ignored when relative, as XDG says).
    pub xdg_state_home: Option<PathBuf>,
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR`: the runtime directory of a user who may not write `/run`.
    pub xdg_runtime_dir: Option<PathBuf>,
}

impl StateDirs {
    /// The settings from a lookup of environment variables by name (the
    /// CLI passes `std::env::var_os`).
    pub fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> StateDirs {
        let path = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        StateDirs {
            state_dir: path(STATE_DIR_ENV),
            xdg_state_home: path("XDG_STATE_HOME"),
            home: path("HOME"),
            xdg_runtime_dir: path("XDG_RUNTIME_DIR"),
        }
    }

    /// The state directory by the rule in the module doc, for root or not.
    fn state_dir(&self, root: bool) -> Result<PathBuf, StateError> {
        if let Some(dir) = &self.state_dir {
            return Ok(dir.clone());
        }
        if root {
            return Ok(PathBuf::from("/var/lib/pinplan"));
        }
        // XDG: a relative XDG_STATE_HOME is invalid and is ignored.
        if let Some(home) = self.xdg_state_home.as_ref().filter(|h| h.is_absolute()) {
            return Ok(home.join("pinplan"));
        }
        self.home
            .as_ref()
            .map(|home| home.join(".local/state/pinplan"))
            .ok_or(StateError::NoHome)
    }
}

static CONFIGURED: OnceLock<StateDirs> = OnceLock::new();

/// Sets where pinplan's directories go for the rest of the process, once,
/// before the first is asked for; `false` when they were set already. Unset,
/// nothing comes from the environment (root's directories, else
/// [`StateError::NoHome`]).
pub fn configure(dirs: StateDirs) -> bool {
    CONFIGURED.set(dirs).is_ok()
}

/// The settings of [`configure`], or none.
fn configured() -> StateDirs {
    CONFIGURED.get().cloned().unwrap_or_default()
}

/// Where the state directory is, by the rule in the module doc; nothing is
/// created.
pub fn state_dir_path() -> Result<PathBuf, StateError> {
    configured().state_dir(is_root())
}

/// The state directory, created (mode 0700) when missing.
pub fn state_dir() -> Result<PathBuf, StateError> {
    let dir = state_dir_path()?;
    create(&dir, "state")?;
    Ok(dir)
}

/// The runtime directory, created (mode 0700) when missing: `/run/pinplan`,
/// or for a user who may not write `/run`, `$XDG_RUNTIME_DIR/pinplan`.
pub fn runtime_dir() -> Result<PathBuf, StateError> {
    let run = PathBuf::from("/run/pinplan");
    match create(&run, "runtime") {
        Ok(()) => Ok(run),
        Err(StateError::Create { source, .. })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            let Some(user) = configured().xdg_runtime_dir else {
                return Err(StateError::Create {
                    what: "runtime",
                    path: run,
                    source,
                });
            };
            let dir = user.join("pinplan");
            create(&dir, "runtime")?;
            Ok(dir)
        }
        Err(e) => Err(e),
    }
}

fn create(dir: &Path, what: &'static str) -> Result<(), StateError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| StateError::Create {
            what,
            path: dir.to_owned(),
            source,
        })
}

/// A new journal of `tool`'s default path: `STATE/pinplan-KIND-SECONDS-PID.json`
/// (`KIND`: [`Tool::file_kind`], `journal`, `fleet-journal`, `isolate`).
pub fn default_journal(tool: Tool) -> Result<PathBuf, StateError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let kind = tool.file_kind();
    Ok(state_dir()?.join(format!("pinplan-{kind}-{secs}-{}.json", std::process::id())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn one_rule_for_the_state_directory() {
        let unset: &[(&str, &str)] = &[];
        for (env, root, expected) in [
            (unset, true, Some("/var/lib/pinplan")),
            (&[("PINPLAN_STATE_DIR", "/s")][..], true, Some("/s")),
            (
                &[("PINPLAN_STATE_DIR", "/s"), ("HOME", "/h")][..],
                false,
                Some("/s"),
            ),
            (
                &[("HOME", "/h")][..],
                false,
                Some("/h/.local/state/pinplan"),
            ),
            (
                &[("HOME", "/h"), ("XDG_STATE_HOME", "/x")][..],
                false,
                Some("/x/pinplan"),
            ),
            // A relative XDG_STATE_HOME is not XDG's: ignored.
            (
                &[("HOME", "/h"), ("XDG_STATE_HOME", "x")][..],
                false,
                Some("/h/.local/state/pinplan"),
            ),
            (&[("PINPLAN_STATE_DIR", "")][..], false, None),
            (unset, false, None),
        ] {
            let var = |name: &str| {
                env.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            };
            let got = StateDirs::from_vars(var).state_dir(root).ok();
            assert_eq!(got, expected.map(PathBuf::from), "{env:?} root {root}");
        }
    }

    #[test]
    fn directories_are_created_private() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("a/b");
        create(&dir, "state").unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
