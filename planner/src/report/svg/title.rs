//! The title: the topology source, then a subtitle of counts — packages,
//! nodes, cores, CPUs, tenants and conflicts, or with a plan whose CPUs are
//! the host's on each side — wrapped between phrases.

use super::text::{chars_fitting, heading, or_none, text, wrap, wrap_phrases};
use super::{Picture, MARGIN};
use crate::text::plural;
use std::collections::BTreeSet;

/// Font size of the subtitle.
pub(super) const SUBTITLE_FONT: i64 = 12;

impl Picture<'_> {
    /// Draws the title from `y` down; returns its last baseline.
    pub(super) fn title(&self, out: &mut String, width: i64, mut y: i64) -> i64 {
        let chars = chars_fitting(width - 2 * MARGIN, 16);
        for line in wrap(&format!("pinplan report: {}", self.host.source), chars) {
            y += 18;
            heading(out, y, 16, &line);
        }
        let chars = chars_fitting(width - 2 * MARGIN, SUBTITLE_FONT);
        for line in wrap_phrases(&self.subtitle(), chars) {
            y += 16;
            text(
                out,
                MARGIN,
                y,
                SUBTITLE_FONT,
                "class=\"subtitle\" fill=\"#3b4754\"",
                &line,
            );
        }
        y
    }

    /// The subtitle, phrases joined by ` · `: what the host has, how many
    /// tenants, then how many conflicts — or, with a plan (each side's
    /// conflicts are under its heading), whose CPUs are the host's on each
    /// side.
    pub(super) fn subtitle(&self) -> String {
        let host = self.host;
        let threads: BTreeSet<usize> = host.cores.iter().map(|c| c.cpus.len()).collect();
        let threads: Vec<String> = threads.iter().map(usize::to_string).collect();
        let per_core = match threads.as_slice() {
            [] => "no threads".to_owned(),
            [one] if one == "1" => "1 thread per core".to_owned(),
            _ => format!("{} threads per core", threads.join("/")),
        };
        let mut phrases = Vec::new();
        for (n, one, many) in [
            (host.packages.len(), "package", "packages"),
            (host.numa_nodes.len(), "NUMA node", "NUMA nodes"),
            (host.l3_domains.len(), "L3 domain", "L3 domains"),
        ] {
            if n > 0 {
                phrases.push(plural(n, one, many));
            }
        }
        phrases.push(format!(
            "{} ({per_core})",
            plural(host.cores.len(), "core", "cores")
        ));
        phrases.push(format!(
            "{} ({} usable)",
            plural(host.pus.len(), "CPU", "CPUs"),
            host.usable_cpus().len()
        ));
        phrases.push(plural(self.cast.members.len(), "tenant", "tenants"));
        match &self.plan {
            None => {
                let errors = self.now.errors();
                let warnings = self.now.report.conflicts.len() - errors;
                phrases.push(plural(errors, "error", "errors"));
                phrases.push(plural(warnings, "warning", "warnings"));
            }
            Some(side) => phrases.push(host_on_both_sides(
                self.now.report.host_cpus.as_ref(),
                side.paint.report.host_cpus.as_ref(),
            )),
        }
        phrases.join(" · ")
    }
}

/// Which CPUs are the host's now (`now`) and with the plan (`planned`: the
/// plan's reserved CPUs, if any), said once when they are the same.
fn host_on_both_sides(
    now: Option<&crate::cpuset::CpuSet>,
    planned: Option<&crate::cpuset::CpuSet>,
) -> String {
    match (now, planned) {
        (Some(a), Some(b)) if a == b => {
            format!("host CPUs {a} (the plan's reserved CPUs) on both sides")
        }
        (Some(a), Some(b)) => {
            format!("host CPUs {a} now, {b} (the plan's reserved CPUs) with the plan")
        }
        (None, Some(b)) => format!("host CPUs {b} (the plan's reserved CPUs) with the plan only"),
        (Some(a), None) => format!("host CPUs {} now, the plan reserves none", or_none(a)),
        (None, None) => "host CPUs unknown, the plan reserves none".to_owned(),
    }
}
