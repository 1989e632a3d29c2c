//! systemd's side of the host's cgroups: a unit's `AllowedCPUs`, read and
//! set at runtime through `systemctl`.

use super::IsolateError;

/// `systemctl`, found on `PATH`.
fn systemctl(args: &[&str]) -> Result<String, IsolateError> {
    let failed = |message: String| IsolateError::Systemctl {
        args: args.join(" "),
        message,
    };
    let out = std::process::Command::new("systemctl")
        .args(args)
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !out.status.success() {
        let message = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(failed(if message.is_empty() {
            out.status.to_string()
        } else {
            message
        }));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A unit's `AllowedCPUs` now (empty: not set).
pub(super) fn allowed_cpus(unit: &str) -> Result<String, IsolateError> {
    systemctl(&["show", "--property", "AllowedCPUs", "--value", unit])
}

/// Sets a unit's `AllowedCPUs` for this boot (`--runtime`: nothing under
/// /etc changes); an empty value removes the restriction.
pub(super) fn set_allowed_cpus(unit: &str, cpus: &str) -> Result<(), IsolateError> {
    let property = format!("AllowedCPUs={cpus}");
    systemctl(&["set-property", "--runtime", unit, &property]).map(|_| ())
}
