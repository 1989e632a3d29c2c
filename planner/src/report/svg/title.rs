//! The title: the topology source, then a subtitle of counts — packages,
//! nodes, cores, CPUs, tenants and conflicts — wrapped between phrases.

use super::paint::Paint;
use super::text::{chars_fitting, heading, text, wrap, wrap_phrases};
use super::MARGIN;
use crate::text::plural;
use std::collections::BTreeSet;

/// Font size of the subtitle.
pub(super) const SUBTITLE_FONT: i64 = 12;

impl Paint<'_> {
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

    /// The subtitle, phrases joined by ` · `: what the host has, then how
    /// many tenants and conflicts.
    pub(super) fn subtitle(&self) -> String {
        let host = self.host;
        let errors = self.errors();
        let warnings = self.report.conflicts.len() - errors;
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
        phrases.push(plural(self.report.tenants.len(), "tenant", "tenants"));
        phrases.push(plural(errors, "error", "errors"));
        phrases.push(plural(warnings, "warning", "warnings"));
        phrases.join(" · ")
    }
}
