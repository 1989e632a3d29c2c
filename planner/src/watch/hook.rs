//! The admission hook: a `qemu.d/pinplan-admit` script that libvirt runs as
//! `pinplan-admit NAME OPERATION SUB-OPERATION EXTRA`, the domain XML on
//! standard input, and that at `prepare begin` only runs `pinplan watch
//! --admit=NAME`, which asks the running watcher over its socket
//! ([`super::admission`]) and exits non-zero to refuse the start (no logic
//! in shell, no libvirt call: libvirt forbids them in hooks).
//!
//! What libvirt does with it (`src/util/virhook.c`, `src/qemu/qemu_process.c`,
//! and seen on libvirt 9.0): it runs every executable file of
//! `hooks/qemu.d/` in the byte order of their names, each with the same
//! XML, and all of them even when one fails; one failure at `prepare
//! begin` aborts the start, whose error (`virsh start`'s) is `Hook script
//! execution failed: internal error: Child process (ENV… SCRIPT NAME prepare
//! begin -) unexpected exit status N: ` followed by all the script wrote on
//! standard error (its standard output is not shown). The aborted start
//! then runs `stopped end` and `release end` as any stop does, so the
//! isolate hook (`pinplan-isolate`, after this one: `a` sorts before `i`),
//! which ran at `prepare begin` too, undoes it at `release end`. libvirt
//! waits for a hook without a time limit, holding the domain: the hook's
//! own wait is bounded (`--timeout-ms`). Whether any qemu hook exists is
//! read when libvirt starts (and on SIGHUP), the scripts at each call:
//! restart libvirt once after the first hook of a host is installed.

use crate::error::Diagnostic;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The script's name in `hooks/qemu.d/`: it sorts before `pinplan-isolate`.
pub const SCRIPT: &str = "pinplan-admit";

/// The line that marks a script as pinplan's admission hook (one it may replace).
const MARKER: &str = "# pinplan-admit hook: written by pinplan watch --emit hook";

/// Why the hook could not be written.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// A path the script must name cannot be written in `sh`.
    #[error("{} cannot be named in a shell script: it is not UTF-8 or holds a newline", path.display())]
    Unquotable {
        /// The path.
        path: PathBuf,
    },
    /// The hooks directory is not a directory.
    #[error("{} is not a directory", path.display())]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A script of that name exists and is not pinplan's.
    #[error("{} exists and is not pinplan's admission hook: not replaced", path.display())]
    Foreign {
        /// The script.
        path: PathBuf,
    },
    /// The OS refused a step.
    #[error("{what} {}", path.display())]
    Io {
        /// `cannot create`, `cannot write`.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

impl Diagnostic for HookError {
    fn hint(&self) -> Option<String> {
        match self {
            HookError::Unquotable { .. } => {
                Some("install pinplan (or put the socket) at a plain path".to_owned())
            }
            HookError::NotADirectory { .. } => {
                Some("give libvirt's hooks directory, usually /etc/libvirt/hooks".to_owned())
            }
            HookError::Foreign { path } => Some(format!(
                "move {} aside (pinplan never replaces a script it did not write), \
                 or call pinplan watch --admit from it yourself",
                path.display()
            )),
            HookError::Io { .. } => None,
        }
    }
}

/// A path as one `sh` word (single-quoted).
fn quoted(path: &Path) -> Result<String, HookError> {
    crate::text::sh_word(path).ok_or_else(|| HookError::Unquotable {
        path: path.to_owned(),
    })
}

/// The hook script: at `prepare begin` it runs `pinplan` (an absolute
/// path) as `watch --admit=NAME --socket SOCKET --timeout-ms N [--strict]`
/// with the domain XML on standard input, and exits with its status; at
/// every other operation it exits 0. A `pinplan` that cannot be run lets the
/// start through, or with `strict` refuses it.
pub fn script(
    pinplan: &Path,
    socket: &Path,
    strict: bool,
    timeout: Duration,
) -> Result<String, HookError> {
    let program = quoted(pinplan)?;
    let socket = quoted(socket)?;
    let ms = timeout.as_millis();
    let (flag, missing, status) = if strict {
        (" --strict", "start refused (--strict)", 1)
    } else {
        ("", "start let through", 0)
    };
    Ok(format!(
        "#!/bin/sh\n\
         {MARKER}\n\
         # libvirt runs it as: {SCRIPT} NAME OPERATION SUB-OPERATION EXTRA (domain XML on stdin),\n\
         # before pinplan-isolate. At \"prepare begin\" pinplan asks the running pinplan watch\n\
         # whether the domain may start: a non-zero status refuses the start, and what pinplan\n\
         # writes on stderr ends libvirt's error. Every other operation passes untouched.\n\
         case \"$2 $3\" in\n\
         \x20 \"prepare begin\")\n\
         \x20   if [ ! -x {program} ]; then\n\
         \x20     echo \"{SCRIPT}: cannot run\" {program} \"- {missing}\" >&2\n\
         \x20     exit {status}\n\
         \x20   fi\n\
         \x20   exec {program} watch --admit=\"$1\" --socket {socket} --timeout-ms {ms}{flag} ;;\n\
         esac\n\
         exit 0\n"
    ))
}

/// Writes the script into `dir/qemu.d/` (made if missing), replacing only
/// pinplan's admission hook; returns its path.
pub fn install(dir: &Path, text: &str) -> Result<PathBuf, HookError> {
    if !dir.is_dir() {
        return Err(HookError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    let hook_dir = dir.join("qemu.d");
    if let Err(source) = std::fs::create_dir(&hook_dir) {
        if source.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(HookError::Io {
                what: "cannot create",
                path: hook_dir,
                source,
            });
        }
    }
    let path = hook_dir.join(SCRIPT);
    if let Ok(meta) = std::fs::symlink_metadata(&path) {
        let ours = meta.is_file()
            && crate::host::fs::read(&path).is_some_and(|t| t.lines().nth(1) == Some(MARKER));
        if !ours {
            return Err(HookError::Foreign { path });
        }
    }
    crate::host::write::write_atomically(&path, text, 0o755).map_err(|e| HookError::Io {
        what: "cannot write",
        path: e.path,
        source: e.source,
    })?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::unix::fs::PermissionsExt as _;
    use std::process::{Command, Stdio};

    /// A stand-in for pinplan at a path with a quote and a space: it
    /// records its arguments and standard input beside it and exits with
    /// the status written in `status`.
    fn stand_in(dir: &Path) -> PathBuf {
        let bin = dir.join("it's here");
        std::fs::create_dir(&bin).unwrap();
        let program = bin.join("pin plan");
        let record = dir.display();
        std::fs::write(
            &program,
            format!(
                "#!/bin/sh\n\
                 for a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{record}/args'\n\
                 cat > '{record}/stdin'\n\
                 exit $(cat '{record}/status')\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    /// Runs the hook as libvirt does; its status and standard error.
    fn run(hook: &Path, args: [&str; 4], xml: &str) -> (i32, String) {
        let mut child = Command::new("sh")
            .current_dir(hook.parent().unwrap())
            .arg(hook)
            .args(args)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The hook may exit without reading: a closed pipe is no failure.
        let _ = child.stdin.take().unwrap().write_all(xml.as_bytes());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code().unwrap(), stderr)
    }

    #[test]
    fn paths_are_quoted_for_sh() {
        let text = script(
            Path::new("/opt/it's here/pinplan"),
            Path::new("/run/pinplan/watch.sock"),
            true,
            Duration::from_millis(1500),
        )
        .unwrap();
        assert!(text.contains(
            "exec '/opt/it'\\''s here/pinplan' watch --admit=\"$1\" \
             --socket '/run/pinplan/watch.sock' --timeout-ms 1500 --strict ;;"
        ));
        assert_eq!(text.lines().nth(1), Some(MARKER));
        let bad = script(Path::new("/a\nb"), Path::new("/s"), false, Duration::ZERO);
        assert!(matches!(bad, Err(HookError::Unquotable { .. })));
    }

    #[test]
    fn only_prepare_begin_asks_and_its_status_is_the_hooks() {
        let dir = tempfile::tempdir().unwrap();
        let program = stand_in(dir.path());
        let hook = dir.path().join(SCRIPT);
        let socket = dir.path().join("a socket");
        let text = script(&program, &socket, false, Duration::from_millis(700)).unwrap();
        std::fs::write(&hook, text).unwrap();
        let name = "-vm \"$(touch x)\" 'one'";
        let xml = "<domain><name>vm</name></domain>\n";
        for status in ["0", "1", "2"] {
            std::fs::write(dir.path().join("status"), status).unwrap();
            let got = run(&hook, [name, "prepare", "begin", "-"], xml);
            assert_eq!(got.0.to_string(), status);
            let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
            let expected = format!(
                "watch\n--admit={name}\n--socket\n{}\n--timeout-ms\n700\n",
                socket.display()
            );
            assert_eq!(args, expected);
            assert_eq!(
                std::fs::read_to_string(dir.path().join("stdin")).unwrap(),
                xml
            );
        }
        std::fs::remove_file(dir.path().join("args")).unwrap();
        for (op, sub) in [
            ("start", "begin"),
            ("started", "begin"),
            ("stopped", "end"),
            ("release", "end"),
            ("prepare", "end"),
            ("migrate", "begin"),
            ("restore", "begin"),
            ("reconnect", "begin"),
        ] {
            assert_eq!(run(&hook, ["vm", op, sub, "-"], xml).0, 0, "{op} {sub}");
        }
        assert!(
            !dir.path().join("args").exists(),
            "pinplan ran outside prepare begin"
        );
        assert!(
            !dir.path().join("x").exists(),
            "the domain name ran as a command"
        );
    }

    #[test]
    fn a_missing_pinplan_lets_through_unless_strict() {
        let dir = tempfile::tempdir().unwrap();
        let hook = dir.path().join(SCRIPT);
        let missing = dir.path().join("gone/pinplan");
        for (strict, status) in [(false, 0), (true, 1)] {
            let text = script(&missing, Path::new("/s"), strict, Duration::ZERO).unwrap();
            std::fs::write(&hook, text).unwrap();
            let (got, stderr) = run(&hook, ["vm", "prepare", "begin", "-"], "<domain/>");
            assert_eq!(got, status);
            assert!(stderr.contains("cannot run"), "{stderr}");
        }
    }

    #[test]
    fn install_never_replaces_a_foreign_script() {
        let dir = tempfile::tempdir().unwrap();
        let text = script(
            Path::new("/usr/bin/pinplan"),
            Path::new("/s"),
            false,
            Duration::ZERO,
        )
        .unwrap();
        let path = install(dir.path(), &text).unwrap();
        assert_eq!(path, dir.path().join("qemu.d").join(SCRIPT));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        // Ours is replaced.
        let strict = text.replace(" ;;", " --strict ;;");
        install(dir.path(), &strict).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), strict);
        // A user's script of the same name is not, nor a link.
        std::fs::write(&path, "#!/bin/sh\n# mine\nexit 0\n").unwrap();
        let err = install(dir.path(), &text).unwrap_err();
        assert!(matches!(err, HookError::Foreign { .. }), "{err:?}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "#!/bin/sh\n# mine\nexit 0\n"
        );
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        assert!(matches!(
            install(dir.path(), &text),
            Err(HookError::Foreign { .. })
        ));
        let err = install(&dir.path().join("nope"), &text).unwrap_err();
        assert!(matches!(err, HookError::NotADirectory { .. }), "{err:?}");
    }
}
