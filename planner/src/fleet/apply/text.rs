//! What `apply --fleet` did, as text and as JSON, and its exit status.

use super::{FleetApplied, HostStatus};
use crate::error::Exit;
use crate::interrupt::Signal;
use serde_json::{json, Value};
use std::path::Path;

impl FleetApplied {
    /// The exit status: 0 when every host with VMs asked for was applied,
    /// in effect or (dry run) would be; else the worst host's (1 for a host
    /// that failed and was restored, or was held back; 2 for one refused by
    /// an error).
    pub fn exit(&self) -> Option<Exit> {
        if let Some(signal) = self.interrupted() {
            return Some(Exit::Interrupted(signal));
        }
        let mut worst = None;
        for h in &self.hosts {
            let exit = match &h.status {
                HostStatus::Refused { exit, .. } => Some(*exit),
                HostStatus::Failed { .. } | HostStatus::Held { .. } => Some(Exit::No),
                HostStatus::RolledBack { restored, .. } if !restored.errors.is_empty() => {
                    Some(Exit::Error)
                }
                HostStatus::RolledBack { .. } => Some(Exit::No),
                _ => None,
            };
            worst = match (worst, exit) {
                (Some(Exit::Error), _) | (_, Some(Exit::Error)) => Some(Exit::Error),
                (w, e) => w.or(e),
            };
        }
        worst
    }

    /// The signal that stopped the fleet apply (an interrupt request), and
    /// whether a second one stopped a host's restore.
    fn interruption(&self) -> Option<(Signal, bool)> {
        let mut found: Option<(Signal, bool)> = None;
        for h in &self.hosts {
            let (first, again) = match &h.status {
                HostStatus::Failed { failure, .. } => {
                    (failure.interrupted(), failure.restore_interrupted)
                }
                HostStatus::RolledBack { restored, .. } => (None, restored.interrupted),
                _ => (None, None),
            };
            if let Some(signal) = again {
                return Some((signal, true));
            }
            if let (Some(signal), None) = (first, found) {
                found = Some((signal, false));
            }
        }
        found
    }

    /// The signal whose exit status the run takes (the second one's when a
    /// restore was stopped).
    fn interrupted(&self) -> Option<Signal> {
        self.interruption().map(|(signal, _)| signal)
    }

    /// The hosts that ended applied.
    fn applied(&self) -> Vec<&str> {
        self.hosts
            .iter()
            .filter(|h| matches!(h.status, HostStatus::Applied { .. }))
            .map(|h| h.name.as_str())
            .collect()
    }

    /// The command that undoes every host this run changed.
    pub fn undo(&self) -> Option<String> {
        self.journal
            .as_ref()
            .map(|j| format!("pinplan apply --rollback {}", j.display()))
    }

    /// One block per host, then what stands (the fleet journal's line is
    /// [`journal_line`]'s, said when it is written).
    pub fn to_text(&self, colour: bool) -> String {
        let mut out = String::new();
        let width = self.hosts.iter().map(|h| h.name.len()).max().unwrap_or(4);
        for h in &self.hosts {
            let uri = h.uri.as_deref().unwrap_or("no URI");
            let line = status_text(&h.status, uri, colour);
            out.push_str(&format!("{:<width$}  {uri}  {}\n", h.name, line.trim_end()));
        }
        out.push_str(&self.moves_text());
        out.push_str(&self.standing_text());
        out
    }

    /// The moves the plan makes, with how to migrate each (none: empty).
    fn moves_text(&self) -> String {
        let mut out = String::new();
        if !self.moves.is_empty() {
            let uri = |name: &str| {
                self.hosts
                    .iter()
                    .find(|h| h.name == name)
                    .and_then(|h| h.uri.clone())
                    .unwrap_or_else(|| name.to_owned())
            };
            out.push_str(
            "moves the plan makes (pinplan does not migrate: migrate each, then apply --fleet again for its new host):\n",
        );
            for m in &self.moves {
                out.push_str(&format!(
                "  {}: {} -> {} (virsh -c {} migrate --live --persistent --undefinesource {} {})\n",
                m.vm,
                m.from,
                m.to,
                uri(&m.from),
                m.vm,
                uri(&m.to)
            ));
            }
        }
        out
    }

    /// What stands after the run: interrupted, dry run, applied, partly.
    fn standing_text(&self) -> String {
        let mut out = String::new();
        let applied = self.applied();
        let not = self
            .hosts
            .iter()
            .filter(|h| {
                matches!(
                    h.status,
                    HostStatus::Refused { .. }
                        | HostStatus::Failed { .. }
                        | HostStatus::Held { .. }
                        | HostStatus::RolledBack { .. }
                )
            })
            .count();
        let dry = self
            .hosts
            .iter()
            .any(|h| matches!(h.status, HostStatus::DryRun { .. }));
        if let Some((signal, again)) = self.interruption() {
            let journal = self
                .journal
                .as_ref()
                .map(|j| j.display().to_string())
                .unwrap_or_default();
            out.push_str(&if again {
                format!(
                    "interrupted again: the hosts are partly restored; finish with: pinplan apply --rollback {journal}\n"
                )
            } else if applied.is_empty() {
                format!(
                    "interrupted ({signal}): every host changed was restored as it was; fleet journal: {journal}\n"
                )
            } else {
                format!(
                    "interrupted ({signal}): the hosts not done were restored; {} had finished and stay applied (undo with {})\n",
                    applied.join(", "),
                    self.undo().unwrap_or_default()
                )
            });
        } else if dry {
            out.push_str("dry run: nothing was changed on any host\n");
        } else if not == 0 && applied.is_empty() {
            out.push_str("fleet already in effect: nothing changed\n");
        } else if not == 0 {
            out.push_str(&format!(
                "fleet applied: {} changed, every host as planned\n",
                crate::text::plural(applied.len(), "host", "hosts")
            ));
        } else if applied.is_empty() {
            out.push_str("fleet not applied: no host is changed\n");
        } else {
            out.push_str(&format!(
                "fleet partly applied: {} applied ({}): without --all-or-nothing a host \
                 that fails does not undo the others; undo them with {}\n",
                if applied.len() == 1 {
                    "1 host stays".to_owned()
                } else {
                    format!("{} hosts stay", applied.len())
                },
                applied.join(", "),
                self.undo().unwrap_or_default()
            ));
        }
        out
    }

    /// `{"status", "fleet", "journal", "undo", "hosts": [...]}`.
    pub fn to_json(&self) -> String {
        let hosts: Vec<Value> = self
            .hosts
            .iter()
            .map(|h| {
                let (status, extra) = match &h.status {
                    HostStatus::Skipped => ("skipped", json!({})),
                    HostStatus::Refused { error, .. } => ("refused", json!({"error": error})),
                    HostStatus::DryRun { vms, report, .. } => (
                        "dry-run",
                        json!({"vms": vms,
                               "report": serde_json::from_str::<Value>(&report.to_json())
                                   .unwrap_or(Value::Null)}),
                    ),
                    HostStatus::InEffect { vms } => ("in-effect", json!({"vms": vms})),
                    HostStatus::Held { vms } => ("held", json!({"vms": vms})),
                    HostStatus::Applied { vms, journal } => (
                        "applied",
                        json!({"journal": journal, "vms": vms.iter().map(|a| json!({
                            "name": a.vm, "live": a.live, "config": a.config,
                            "pin_calls": a.calls})).collect::<Vec<_>>()}),
                    ),
                    HostStatus::Failed {
                        error,
                        failure,
                        journal,
                    } => (
                        "failed",
                        json!({"error": error, "vm": failure.vm, "journal": journal,
                               "restored": failure.restored,
                               "restore_errors": failure.restore_errors,
                               "changed": failure.changed}),
                    ),
                    HostStatus::RolledBack { journal, restored } => (
                        "rolled-back",
                        json!({"journal": journal, "restored": restored.restored,
                               "restore_errors": restored.errors}),
                    ),
                };
                let mut object = json!({"name": h.name, "uri": h.uri, "status": status});
                if let (Some(o), Value::Object(extra)) = (object.as_object_mut(), extra) {
                    o.extend(extra);
                }
                object
            })
            .collect();
        let status = match self.exit() {
            _ if self
                .hosts
                .iter()
                .any(|h| matches!(h.status, HostStatus::DryRun { .. })) =>
            {
                "dry-run"
            }
            None => "applied",
            Some(_) if self.applied().is_empty() => "not-applied",
            Some(_) => "partly-applied",
        };
        let mut text = serde_json::to_string_pretty(&json!({
            "status": status, "fleet": self.fleet, "journal": self.journal,
            "undo": self.undo(), "all_or_nothing": self.all_or_nothing, "hosts": hosts,
            "moves": self.moves.iter().map(|m| json!({"vm": m.vm, "from": m.from, "to": m.to}))
                .collect::<Vec<_>>()}))
        .unwrap_or_default();
        text.push('\n');
        text
    }
}

/// One host's line (and the lines under it) for its status.
fn status_text(status: &HostStatus, uri: &str, colour: bool) -> String {
    match status {
        HostStatus::Skipped => "nothing to apply (no VM of the plan asked for)".to_owned(),
        HostStatus::Refused { error, .. } => {
            format!("refused, nothing changed: {}", indent(error))
        }
        HostStatus::DryRun { vms, report, host } => format!(
            "dry run: the preconditions hold for {}; nothing was changed\n{}",
            vms.join(", "),
            indent_block(&report.to_text(host, colour))
        ),
        HostStatus::InEffect { vms } => {
            format!(
                "the plan is already in effect for {}: nothing changed",
                vms.join(", ")
            )
        }
        HostStatus::Held { vms } => format!(
            "not changed ({} could be applied; --all-or-nothing and another host was not)",
            vms.join(", ")
        ),
        HostStatus::Applied { vms, journal } => format!(
            "applied: {} (journal {})\n{}",
            crate::text::plural(vms.len(), "VM", "VMs"),
            journal.display(),
            crate::libvirt::apply::summary(vms)
                .lines()
                .filter(|l| l.starts_with("  "))
                .map(|l| format!("  {l}\n"))
                .collect::<String>()
                .trim_end()
        ),
        HostStatus::Failed { error, .. } => format!("failed: {}", indent(error)),
        HostStatus::RolledBack { restored, journal } if restored.errors.is_empty() => {
            format!(
                "applied, then rolled back from {} and verified (--all-or-nothing): {}",
                journal.display(),
                restored.restored.join(", ")
            )
        }
        HostStatus::RolledBack { restored, journal } => format!(
            "applied, and the rollback (--all-or-nothing) did not restore everything: \
             {}; retry with: pinplan apply --rollback {} --connect {uri}",
            restored.errors.join("; "),
            journal.display()
        ),
    }
}

/// `fleet journal: PATH (undo: pinplan apply --rollback PATH)`.
pub fn journal_line(path: &Path) -> String {
    format!(
        "fleet journal: {} (undo: pinplan apply --rollback {})\n",
        path.display(),
        path.display()
    )
}

/// Continuation lines of a host's text, indented under it.
fn indent(text: &str) -> String {
    text.replace('\n', "\n    ")
}

fn indent_block(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}\n"))
        .collect::<String>()
}
