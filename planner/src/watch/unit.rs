//! `pinplan watch --emit systemd`: the systemd service unit that runs the
//! watcher, its `ExecStart=` written word by word by systemd's rules
//! (`systemd.service(5)`, "Command lines"; `systemd.syntax(7)`, "Quoting").
//! This module only writes the text; installing it is the user's.

use crate::error::Diagnostic;
use std::path::Path;

/// The unit's file name.
pub const UNIT: &str = "pinplan-watch.service";

/// Why no unit could be written.
#[derive(Debug, thiserror::Error)]
pub enum UnitError {
    /// A path the unit names is relative: systemd runs services in `/`.
    #[error("{} is not an absolute path", path.display())]
    Relative {
        /// The path.
        path: std::path::PathBuf,
    },
    /// systemd refuses to run a program whose path holds a quote, a
    /// backslash or a control character.
    #[error("systemd cannot run {}: its path holds a quote, a backslash or a control character", path.display())]
    Executable {
        /// pinplan's path.
        path: std::path::PathBuf,
    },
    /// A word cannot be written on a unit's line.
    #[error("{word:?} cannot be written in a systemd unit: it holds a control character or is not UTF-8")]
    Word {
        /// The word (lossy when not UTF-8).
        word: String,
    },
}

impl Diagnostic for UnitError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            UnitError::Relative { .. } => "give it as an absolute path".to_owned(),
            UnitError::Executable { .. } => {
                "install pinplan at a plain path, such as /usr/local/bin/pinplan".to_owned()
            }
            UnitError::Word { .. } => "rename it, or leave it out of the unit".to_owned(),
        })
    }
}

/// Characters a word may hold unquoted on an `ExecStart=` line.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "/_.,:=@+-".contains(c)
}

/// `word` as one argument of an `ExecStart=` line: `%` doubled (a
/// specifier otherwise), `$` doubled (a variable otherwise), `\` and `"`
/// escaped inside double quotes when anything in it is not [`plain`] (a
/// lone `;` among them: unquoted, it separates commands).
fn argument(word: &str) -> Result<String, UnitError> {
    if word.chars().any(char::is_control) {
        return Err(UnitError::Word {
            word: word.to_owned(),
        });
    }
    let escaped = word.replace('%', "%%").replace('$', "$$");
    if !word.is_empty() && word.chars().all(plain) {
        return Ok(escaped);
    }
    Ok(format!(
        "\"{}\"",
        escaped.replace('\\', "\\\\").replace('"', "\\\"")
    ))
}

/// pinplan's path as the first word: absolute, no character systemd
/// refuses in a program's path, `%` doubled; `$` stays, as systemd expands
/// no variable there.
fn executable(pinplan: &Path) -> Result<String, UnitError> {
    if !pinplan.is_absolute() {
        return Err(UnitError::Relative {
            path: pinplan.to_owned(),
        });
    }
    let text = pinplan
        .to_str()
        .filter(|t| !t.contains(|c: char| c.is_control() || "\"'\\".contains(c)));
    let Some(text) = text else {
        return Err(UnitError::Executable {
            path: pinplan.to_owned(),
        });
    };
    let escaped = text.replace('%', "%%");
    Ok(if text.chars().all(plain) {
        escaped
    } else {
        format!("\"{escaped}\"")
    })
}

/// Whether `uri` names another host (`qemu+ssh://host/system`): the unit
/// then waits for the network instead of a local daemon.
fn remote(uri: &str) -> bool {
    uri.split_once("://")
        .is_some_and(|(_, rest)| !rest.starts_with('/'))
}

/// The `ExecStart=` command: `pinplan watch --connect URI [SPEC] EXTRA…`.
fn command(
    pinplan: &Path,
    uri: &str,
    spec: Option<&Path>,
    extra_args: &[String],
) -> Result<String, UnitError> {
    let mut words = vec![
        executable(pinplan)?,
        "watch".to_owned(),
        "--connect".to_owned(),
    ];
    words.push(argument(uri)?);
    if let Some(spec) = spec {
        if !spec.is_absolute() {
            return Err(UnitError::Relative {
                path: spec.to_owned(),
            });
        }
        let Some(text) = spec.to_str() else {
            return Err(UnitError::Word {
                word: spec.to_string_lossy().into_owned(),
            });
        };
        words.push(argument(text)?);
    }
    for word in extra_args {
        words.push(argument(word)?);
    }
    Ok(words.join(" "))
}

/// The service unit running `pinplan watch --connect URI [SPEC]
/// EXTRA_ARGS…` with `pinplan` (an absolute path; `spec` too).
///
/// It is ordered after libvirt's daemons, monolithic and modular, but
/// pulls in neither: `Wants=` on both would start the one the host does
/// not use (two QEMU drivers over the same guests). The hardening leaves
/// the watcher what it needs: `/run` (libvirt's socket, `/run/pinplan`),
/// `/var/lib/pinplan`, `/sys` and `/proc`, and root's capabilities
/// (`sched_setaffinity` on QEMU threads); `/usr`, `/boot` and `/etc` are
/// read-only, homes too.
pub fn unit(
    pinplan: &Path,
    uri: &str,
    spec: Option<&Path>,
    extra_args: &[String],
) -> Result<String, UnitError> {
    let exec = command(pinplan, uri, spec, extra_args)?;
    let after = if remote(uri) {
        "After=network-online.target\nWants=network-online.target\n"
    } else {
        "After=libvirtd.service libvirtd.socket virtqemud.service virtqemud.socket\n"
    };
    Ok(format!(
        "# {UNIT}: written by pinplan watch --emit systemd. Install it with\n\
         #   pinplan watch --emit systemd … > /etc/systemd/system/{UNIT}\n\
         #   systemctl daemon-reload && systemctl enable --now pinplan-watch\n\
         [Unit]\n\
         Description=pinplan watch: pins libvirt domains as they start, answers the admission hook\n\
         Documentation=man:pinplan-watch(1)\n\
         # After libvirt's daemon, monolithic or modular, pulling in neither (that would\n\
         # start the one this host does not use); the watcher connects when it is up.\n\
         {after}\
         # Restarts for as long as it fails (libvirt down, say), every RestartSec.\n\
         StartLimitIntervalSec=0\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={exec}\n\
         ExecReload=/bin/kill -HUP $MAINPID\n\
         KillSignal=SIGTERM\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         # Its journals and its admission socket are root's alone.\n\
         UMask=0077\n\
         # It writes /run (libvirt's socket, /run/pinplan) and /var/lib/pinplan, reads\n\
         # /sys and /proc, and sets QEMU threads' affinity: only these are held back.\n\
         NoNewPrivileges=yes\n\
         ProtectSystem=full\n\
         ProtectHome=read-only\n\
         PrivateTmp=yes\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;
    use std::process::Command;

    #[test]
    fn exec_start_words_follow_systemds_quoting() {
        for (word, written) in [
            ("qemu:///system", "qemu:///system"),
            ("--format", "--format"),
            ("", "\"\""),
            (";", "\";\""),
            ("a b", "\"a b\""),
            ("100%", "\"100%%\""),
            ("$HOME", "\"$$HOME\""),
            ("it's \"x\" \\", "\"it's \\\"x\\\" \\\\\""),
            (
                "qemu+ssh://h/system?keyfile=/k&x=1",
                "\"qemu+ssh://h/system?keyfile=/k&x=1\"",
            ),
        ] {
            assert_eq!(argument(word).unwrap(), written, "{word}");
        }
        assert!(matches!(argument("a\nb"), Err(UnitError::Word { .. })));
        assert_eq!(
            executable(Path::new("/opt/p%d/pinplan")).unwrap(),
            "\"/opt/p%%d/pinplan\""
        );
        assert_eq!(
            executable(Path::new("/opt/a $b/pinplan")).unwrap(),
            "\"/opt/a $b/pinplan\""
        );
        for bad in ["/opt/it's/pinplan", "/opt/a\\b", "/opt/a\"b"] {
            let err = executable(Path::new(bad)).unwrap_err();
            assert!(matches!(err, UnitError::Executable { .. }), "{bad}");
        }
        let relative = unit(Path::new("pinplan"), "qemu:///system", None, &[]);
        assert!(matches!(relative, Err(UnitError::Relative { .. })));
        let spec = unit(
            Path::new("/p"),
            "qemu:///system",
            Some(Path::new("s.toml")),
            &[],
        );
        assert!(matches!(spec, Err(UnitError::Relative { .. })));
    }

    #[test]
    fn remote_uris_wait_for_the_network() {
        let local = unit(Path::new("/usr/bin/pinplan"), "qemu:///system", None, &[]).unwrap();
        assert!(local.contains("\nAfter=libvirtd.service libvirtd.socket virtqemud.service"));
        assert!(!local.contains("Wants="), "no libvirt daemon is pulled in");
        assert!(local.contains("\nExecStart=/usr/bin/pinplan watch --connect qemu:///system\n"));
        let far = unit(
            Path::new("/usr/bin/pinplan"),
            "qemu+ssh://h/system",
            None,
            &[],
        )
        .unwrap();
        assert!(far.contains("\nWants=network-online.target\n"));
    }

    /// `systemd-analyze verify` on the unit: skipped only where the tool is
    /// missing outside CI.
    #[test]
    fn systemd_analyze_verifies_the_unit() {
        let Ok(out) = Command::new("systemd-analyze").arg("--version").output() else {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "systemd-analyze is missing under CI=true: scripts/test.sh installs systemd"
            );
            println!("skipped: systemd-analyze is missing; the unit is not verified");
            return;
        };
        assert!(out.status.success());
        let dir = tempfile::tempdir().unwrap();
        // A program at a path systemd takes, though odd: a space, %, $.
        let bin = dir.path().join("bin dir");
        std::fs::create_dir(&bin).unwrap();
        let pinplan = bin.join("pin%plan$x");
        std::fs::copy("/bin/true", &pinplan).unwrap();
        std::fs::set_permissions(&pinplan, std::fs::Permissions::from_mode(0o755)).unwrap();
        let spec = dir.path().join("it's \"my\" spec;%h$HOME\\.toml");
        let extra = ["--format", "json", ";", "", "$MAINPID", "a b"].map(String::from);
        let text = unit(&pinplan, "qemu:///system", Some(&spec), &extra).unwrap();
        let path = dir.path().join(UNIT);
        std::fs::write(&path, &text).unwrap();
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{said}\n{text}"
        );
    }
}
