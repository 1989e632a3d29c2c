//! The fleet plan as `fleet.json` and as text.

use super::{FleetObjective, FleetPlan, FleetVmOutcome};

impl FleetObjective {
    /// The running VMs moved, to another host or on theirs:
    /// `3 moved: 1 to another host, 2 re-pinned on their host`, or `0 moved`.
    pub(super) fn moved_text(&self) -> String {
        let (away, here) = (self.moves, self.repinned);
        let on = if here == 1 { "its" } else { "their" };
        match (away, here) {
            (_, 0) => format!("{away} moved"),
            (0, _) => format!("{here} moved: re-pinned on {on} host"),
            _ => format!(
                "{} moved: {away} to another host, {here} re-pinned on {on} host",
                away + here
            ),
        }
    }
}

impl FleetPlan {
    /// `fleet.json`: which VM is on which host and why others were refused.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A summary per host, then the VMs left out with why.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let placed = self.objective.placed;
        let total = self.vms.len();
        let unread = self.hosts.iter().filter(|h| h.error.is_some()).count();
        let unread = if unread > 0 {
            format!(" ({unread} not read: planned without them)")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "fleet plan: {}, {placed} of {total} VMs placed on {} of {} hosts{unread} ({}), {:.2} s",
            match (&self.gap, self.proven) {
                (_, true) => "proven optimal".to_owned(),
                (Some(g), false) => format!(
                    "not proven optimal ({}: {} reached, bound {})",
                    g.objective, g.reached, g.bound
                ),
                (None, false) => "not proven optimal".to_owned(),
            },
            self.objective.hosts_touched,
            self.hosts.len(),
            self.objective.moved_text(),
            self.solve_seconds
        );
        let _ = writeln!(out);
        let width = self
            .hosts
            .iter()
            .map(|h| h.name.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(
            out,
            "{:<width$}  {:>5}  {:>11}  vms",
            "host", "vms", "cores"
        );
        for h in &self.hosts {
            if let Some(e) = &h.error {
                let _ = writeln!(
                    out,
                    "{:<width$}  {:>5}  {:>11}  not read: {e}",
                    h.name, "-", "-"
                );
                continue;
            }
            let listed = if h.vms.len() > 8 {
                format!("{} … ({} more)", h.vms[..8].join(", "), h.vms.len() - 8)
            } else {
                h.vms.join(", ")
            };
            let _ = writeln!(
                out,
                "{:<width$}  {:>5}  {:>11}  {listed}",
                h.name,
                h.vms.len(),
                format!("{}/{}", h.cores_used, h.cores_free)
            );
        }
        let unplaced: Vec<&FleetVmOutcome> = self.vms.iter().filter(|v| v.host.is_none()).collect();
        if !unplaced.is_empty() {
            let _ = writeln!(out, "\nunplaced:");
            for v in unplaced.iter().take(20) {
                let why: Vec<String> = v
                    .refused
                    .iter()
                    .take(3)
                    .map(|r| format!("{}: {}", r.host, r.reason))
                    .collect();
                let why = if why.is_empty() {
                    "no room on the hosts it may use".to_owned()
                } else {
                    why.join("; ")
                };
                let _ = writeln!(out, "  {}: {why}", v.name);
            }
            if unplaced.len() > 20 {
                let _ = writeln!(
                    out,
                    "  … and {} more (fleet.json lists them)",
                    unplaced.len() - 20
                );
            }
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        out
    }
}
