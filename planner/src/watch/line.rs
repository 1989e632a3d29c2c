//! A decision as the watcher prints it: one line in the journald style
//! (`vm1 started: vCPUs 2-7,18-23, emulator 0,16 (optimal, 3 ms)`), or one
//! JSON object per line (`--format json`).

use super::{Decision, Outcome};
use serde_json::json;

impl Decision {
    /// The line: `DOMAIN EVENT: WHAT (HOW, N ms)`.
    pub fn to_line(&self) -> String {
        let ms = format!("{:.0} ms", self.millis);
        let what = match &self.outcome {
            Outcome::Pinned {
                vcpus,
                emulator,
                proven,
                live,
                moved,
                journal,
            } => {
                let how = if *proven { "optimal" } else { "not proven" };
                let done = match (journal.is_some(), live) {
                    (false, _) => "",
                    (true, true) => ", pinned live",
                    (true, false) => ", pinned in its config",
                };
                let moved = if moved.is_empty() {
                    String::new()
                } else {
                    format!("; moved {}", moved.join(", "))
                };
                format!(
                    "vCPUs {vcpus}, emulator {} ({how}, {ms}){done}{moved}",
                    cpus(emulator)
                )
            }
            Outcome::Kept { vcpus, emulator } => {
                format!(
                    "vCPUs {vcpus}, emulator {} (kept: its own cores, {ms})",
                    cpus(emulator)
                )
            }
            Outcome::Unplaced { why, fix } => match fix {
                Some(fix) => format!("not pinned: {why}; fix: {fix} ({ms})"),
                None => format!("not pinned: {why} ({ms})"),
            },
            Outcome::Shares { core, other, why } => {
                format!("shares core {} with {other}: {why} ({ms})", core.0)
            }
            Outcome::Freed(set) if set.is_empty() => format!("nothing pinned to free ({ms})"),
            Outcome::Freed(set) => format!("CPUs {set} free ({ms})"),
            Outcome::Admission(a) => {
                let word = if a.allow { "allowed" } else { "refused" };
                let reason = a.reason.as_deref().unwrap_or("its pins are its own");
                match &a.fix {
                    Some(fix) => format!("{word}: {reason}; fix: {fix} ({ms})"),
                    None => format!("{word}: {reason} ({ms})"),
                }
            }
            Outcome::NoRequest => format!("no request: planned around ({ms})"),
            Outcome::Invalid(why) => format!("request not valid: {why} ({ms})"),
            Outcome::Gone => format!("gone ({ms})"),
            Outcome::Failed(why) => format!("error: {why} ({ms})"),
        };
        format!("{} {}: {what}", self.domain, self.event)
    }

    /// The decision as one JSON object (one line).
    pub fn to_json_line(&self) -> String {
        let at = self
            .at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut v = json!({
            "time": (at * 1000.0).round() / 1000.0,
            "domain": self.domain,
            "event": self.event,
            "millis": (self.millis * 1000.0).round() / 1000.0,
            "action": action(&self.outcome),
            "message": self.to_line(),
        });
        match &self.outcome {
            Outcome::Pinned {
                vcpus,
                emulator,
                proven,
                live,
                moved,
                journal,
            } => {
                v["vcpus"] = json!(vcpus.to_string());
                v["emulator"] = json!(emulator.to_string());
                v["proven"] = json!(proven);
                v["live"] = json!(live);
                v["changed"] = json!(journal.is_some());
                v["moved"] = json!(moved);
                v["journal"] = json!(journal.as_ref().map(|p| p.display().to_string()));
            }
            Outcome::Kept { vcpus, emulator } => {
                v["vcpus"] = json!(vcpus.to_string());
                v["emulator"] = json!(emulator.to_string());
            }
            Outcome::Freed(set) => v["cpus"] = json!(set.to_string()),
            Outcome::Shares { core, other, .. } => {
                v["core"] = json!(core.0);
                v["other"] = json!(other);
            }
            Outcome::Admission(a) => {
                v["allow"] = json!(a.allow);
                v["reason"] = json!(a.reason);
                v["fix"] = json!(a.fix);
            }
            _ => {}
        }
        v.to_string()
    }
}

/// A CPU list, or `-` for none.
fn cpus(set: &crate::cpuset::CpuSet) -> String {
    if set.is_empty() {
        "-".to_owned()
    } else {
        set.to_string()
    }
}

/// The JSON `action` of an outcome.
fn action(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Pinned {
            journal: Some(_), ..
        } => "pinned",
        Outcome::Pinned { journal: None, .. } => "in-effect",
        Outcome::Kept { .. } => "kept",
        Outcome::Unplaced { .. } => "unplaced",
        Outcome::Shares { .. } => "shares",
        Outcome::Freed(_) => "freed",
        Outcome::Admission(a) if a.allow => "allowed",
        Outcome::Admission(_) => "refused",
        Outcome::NoRequest => "no-request",
        Outcome::Invalid(_) => "invalid",
        Outcome::Gone => "gone",
        Outcome::Failed(_) => "failed",
    }
}
