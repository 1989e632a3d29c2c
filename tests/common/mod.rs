//! Helpers for the tests that drive the live libvirtd started by
//! scripts/test.sh (`PINPLAN_TEST_LIBVIRT_URI`).

use std::process::Command;

/// Runs `virsh -c URI ARGS`, panicking with its output on failure.
pub fn virsh(uri: &str, args: &[&str]) -> String {
    let out = Command::new("virsh")
        .args(["-q", "-c", uri])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run virsh: {e}"));
    assert!(
        out.status.success(),
        "virsh {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The test's guests: destroyed and undefined when dropped, even when the
/// test fails.
pub struct Guests {
    /// The libvirt URI.
    pub uri: String,
    /// Domain names.
    pub names: Vec<String>,
}

impl Drop for Guests {
    fn drop(&mut self) {
        for name in &self.names {
            for cmd in ["destroy", "undefine"] {
                let _ = Command::new("virsh")
                    .args(["-q", "-c", &self.uri, cmd, name])
                    .output();
            }
        }
    }
}
