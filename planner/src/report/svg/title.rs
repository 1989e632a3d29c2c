//! The title: the topology source, then counts of packages, nodes, cores,
//! CPUs, tenants and conflicts.

use super::paint::Paint;
use super::text::{chars_fitting, heading, text, wrap};
use super::MARGIN;
use crate::text::plural;
use std::collections::BTreeSet;

impl Paint<'_> {
    /// Draws the title from `y` down; returns its last baseline.
    pub(super) fn title(&self, out: &mut String, width: i64, mut y: i64) -> i64 {
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
        let mut counts = Vec::new();
        for (n, one, many) in [
            (host.packages.len(), "package", "packages"),
            (host.numa_nodes.len(), "NUMA node", "NUMA nodes"),
            (host.l3_domains.len(), "L3 domain", "L3 domains"),
        ] {
            if n > 0 {
                counts.push(plural(n, one, many));
            }
        }
        counts.push(format!(
            "{} ({per_core}) · {} ({} usable) · {} · {} · {}",
            plural(host.cores.len(), "core", "cores"),
            plural(host.pus.len(), "CPU", "CPUs"),
            host.usable_cpus().len(),
            plural(self.report.tenants.len(), "tenant", "tenants"),
            plural(errors, "error", "errors"),
            plural(warnings, "warning", "warnings"),
        ));
        let counts = counts.join(" · ");
        let chars = chars_fitting(width - 2 * MARGIN, 16);
        for line in wrap(&format!("pinplan report: {}", host.source), chars) {
            y += 18;
            heading(out, y, 16, &line);
        }
        let chars = chars_fitting(width - 2 * MARGIN, 12);
        for line in wrap(&counts, chars) {
            y += 16;
            text(out, MARGIN, y, 12, "fill=\"#3b4754\"", &line);
        }
        y
    }
}
