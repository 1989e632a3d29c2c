//! The legend under the drawing: every tenant with its CPUs (now and with
//! the plan), the key to fills and marks, every conflict (with what the plan
//! does to it, and those it adds), and NUMA nodes that have no box of their
//! own.

use super::colour::{HOST_GREY, PALETTE, UNUSABLE_FILL};
use super::draw::{cell, floating_band, shared_mark, Stripe};
use super::layout::{CELL_H, CELL_TEXT_Y};
use super::outline::{outline, outline_sample};
use super::paint::{Helpers, Paint};
use super::text::px;
use super::text::{
    chars_fitting, heading, or_none, paragraph, severity_word, text, text_w, wrap, wrap_phrases,
};
use super::{Picture, MARGIN};
use crate::cpuset::CpuSet;
use crate::ids::NodeId;
use crate::report::conflicts::floats;
use crate::report::{Conflict, Severity};
use crate::tenant::{Tenant, TenantKind, TenantState};
use crate::text::{bytes, plural};
use std::collections::BTreeSet;

impl Picture<'_> {
    /// Draws the legend from `y` down; returns where it ends.
    pub(super) fn legend(&self, out: &mut String, width: i64, mut y: i64) -> i64 {
        let avail = width - 2 * MARGIN;
        y = self.legend_tenants(out, avail, y);
        y = legend_key(out, avail, y + 10);
        y = self.legend_conflicts(out, avail, y + 10);
        self.legend_notes(out, avail, y)
    }

    /// Every tenant, a swatch and an entry each, in columns.
    fn legend_tenants(&self, out: &mut String, avail: i64, mut y: i64) -> i64 {
        y += 14;
        heading(out, y, 12, "Tenants");
        if self.cast.members.is_empty() {
            y += 16;
            text(out, MARGIN, y, 11, "fill=\"#3b4754\"", "none");
            return y;
        }
        let entries: Vec<Vec<String>> = (0..self.cast.members.len())
            .map(|i| self.tenant_entry(i))
            .collect();
        const SWATCH: i64 = 20;
        const COL_GAP: i64 = 24;
        let longest = entries
            .iter()
            .flatten()
            .map(|e| e.chars().count())
            .max()
            .unwrap_or(0);
        let fit = chars_fitting(avail - SWATCH, 11);
        let col_chars = longest.min(fit);
        let col_w = SWATCH + text_w(&"m".repeat(col_chars), 11) + COL_GAP;
        let columns = usize::try_from((avail + COL_GAP) / col_w.max(1))
            .unwrap_or(1)
            .clamp(1, entries.len());
        let rows = entries.len().div_ceil(columns);
        let wrapped: Vec<Vec<String>> = entries
            .iter()
            .map(|e| e.iter().flat_map(|p| wrap_phrases(p, col_chars)).collect())
            .collect();
        let mut row_y = y + 6;
        for row in 0..rows {
            let mut lines_in_row = 1;
            for col in 0..columns {
                let i = col * rows + row;
                let Some(lines) = wrapped.get(i) else {
                    continue;
                };
                let x = MARGIN + px(col) * col_w;
                self.swatch(out, x, row_y + 2, i);
                paragraph(out, x + SWATCH, row_y, "fill=\"#1f2a36\"", lines);
                lines_in_row = lines_in_row.max(lines.len());
            }
            row_y += px(lines_in_row) * 14 + 4;
        }
        row_y
    }

    /// Cast member `i`'s legend entry, a paragraph each: its threads and
    /// their CPUs; with a plan, then those under the plan (or that the plan
    /// leaves it as it is).
    fn tenant_entry(&self, i: usize) -> Vec<String> {
        let name = self.cast.members.get(i).map_or("", |m| m.name.as_str());
        let known: CpuSet = self.host.pus.iter().map(|p| p.cpu).collect();
        let usable = self.host.usable_cpus();
        let line = |side: &Paint<'_>| {
            side.tenant(i)
                .map(|(t, h)| tenant_line(t, h, &known, &usable))
        };
        let now = line(&self.now);
        let Some(plan) = &self.plan else {
            return vec![format!("{name}: {}", now.unwrap_or_default())];
        };
        match (now, line(&plan.paint)) {
            (Some(now), Some(planned)) if now == planned => {
                vec![format!("{name}: {now}; the same with the plan")]
            }
            (Some(now), Some(planned)) => vec![
                format!("{name}: {now}"),
                format!("with the plan: {planned}"),
            ],
            (Some(now), None) => vec![
                format!("{name}: {now}"),
                "with the plan: not a tenant".to_owned(),
            ],
            (None, Some(planned)) => vec![
                format!("{name}: not a tenant now"),
                format!("with the plan: {planned}"),
            ],
            (None, None) => vec![format!("{name}: not a tenant")],
        }
    }

    /// Cast member `i`'s colour; dashed and empty for a tenant that is not
    /// pinned or is shut off (now, or if it is only on the plan's side, with
    /// the plan).
    fn swatch(&self, out: &mut String, x: i64, y: i64, i: usize) {
        let colour = self.cast.members.get(i).map_or(HOST_GREY, |m| m.colour);
        let pinned = self
            .now
            .tenant(i)
            .or_else(|| self.plan.as_ref().and_then(|p| p.paint.tenant(i)))
            .is_none_or(|(t, _)| t.pinned && t.state == TenantState::Running);
        if pinned {
            out.push_str(&format!(
                "<rect x=\"{x}\" y=\"{y}\" width=\"14\" height=\"12\" fill=\"{colour}\" \
                 stroke=\"#555555\" stroke-width=\"0.8\"/>\n"
            ));
        } else {
            out.push_str(&format!(
                "<rect x=\"{x}\" y=\"{y}\" width=\"14\" height=\"12\" fill=\"#ffffff\" \
                 stroke=\"{colour}\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/>\n"
            ));
        }
    }

    /// Every conflict, with a sample of its outline; with a plan, the
    /// conflicts now, each with what the plan does to it, then those it adds.
    fn legend_conflicts(&self, out: &mut String, avail: i64, y: i64) -> i64 {
        let now = &self.now;
        let conflicts = &now.report.conflicts;
        let Some(plan) = &self.plan else {
            let title = if conflicts.is_empty() {
                "Conflicts: none".to_owned()
            } else {
                format!("Conflicts: {}", conflict_counts(conflicts))
            };
            heading(out, y + 14, 12, &title);
            let lines: Vec<(Severity, String)> = conflicts
                .iter()
                .enumerate()
                .map(|(i, c)| (c.severity, conflict_line(c, now.unoutlined(i))))
                .collect();
            return conflict_list(out, avail, y + 20, &lines);
        };
        let after = &plan.paint.report.conflicts;
        let (left, added) = fates(conflicts, after);
        let kept = left.iter().filter(|l| **l).count();
        let title = if conflicts.is_empty() {
            "Conflicts now: none".to_owned()
        } else {
            format!(
                "Conflicts now: {}; the plan removes {}, leaves {kept}, adds {}",
                conflict_counts(conflicts),
                conflicts.len() - kept,
                added.len()
            )
        };
        heading(out, y + 14, 12, &title);
        let lines: Vec<(Severity, String)> = conflicts
            .iter()
            .zip(&left)
            .enumerate()
            .map(|(i, (c, left))| {
                let fate = if *left { "leaves" } else { "removes" };
                let line = conflict_line(c, now.unoutlined(i));
                (c.severity, format!("{line} (the plan {fate} it)"))
            })
            .collect();
        let y = conflict_list(out, avail, y + 20, &lines);
        if added.is_empty() {
            return y;
        }
        let added: Vec<(usize, &Conflict)> = added
            .into_iter()
            .filter_map(|i| Some((i, after.get(i)?)))
            .collect();
        heading(
            out,
            y + 24,
            12,
            &format!(
                "Added by the plan: {}",
                conflict_counts(added.iter().map(|(_, c)| *c))
            ),
        );
        let lines: Vec<(Severity, String)> = added
            .iter()
            .map(|(i, c)| (c.severity, conflict_line(c, plan.paint.unoutlined(*i))))
            .collect();
        conflict_list(out, avail, y + 30, &lines)
    }

    /// NUMA nodes that have no core of their own in the picture: memory-only
    /// nodes, and nodes whose CPUs are drawn under another node (hosts where
    /// nodes share CPUs).
    fn legend_notes(&self, out: &mut String, avail: i64, mut y: i64) -> i64 {
        let drawn: BTreeSet<NodeId> = self.host.cores.iter().filter_map(|c| c.numa_node).collect();
        let notes: Vec<String> = self
            .host
            .numa_nodes
            .iter()
            .filter(|n| !drawn.contains(&n.id))
            .map(|n| {
                let mem = n
                    .memory_bytes
                    .map(|m| format!(", {}", bytes(m)))
                    .unwrap_or_default();
                if n.cpus.is_empty() {
                    format!("node {}: memory only{mem}", n.id)
                } else {
                    format!(
                        "node {}: CPUs {} (drawn under the node each core belongs to){mem}",
                        n.id, n.cpus
                    )
                }
            })
            .collect();
        if notes.is_empty() {
            return y;
        }
        y += 24;
        heading(out, y, 12, "NUMA nodes without cores of their own");
        let chars = chars_fitting(avail, 11);
        for note in notes {
            for line in wrap(&note, chars) {
                y += 14;
                text(out, MARGIN, y, 11, "fill=\"#3b4754\"", &line);
            }
        }
        y
    }
}

/// A tenant's legend entry after its name: its vCPUs, emulator and I/O
/// threads and where they are pinned (a shut-off domain's by its config,
/// and not drawn).
fn tenant_line(t: &Tenant, helpers: &Helpers, known: &CpuSet, usable: &CpuSet) -> String {
    let shut_off = if t.state == TenantState::ShutOff {
        "shut off, not drawn; its config: "
    } else {
        ""
    };
    let mut line = match (t.kind, t.pinned) {
        (TenantKind::Host, _) => format!("CPUs {}", or_none(&t.cpus)),
        (TenantKind::Vm, false) => format!(
            "{shut_off}{}, not pinned (may run on any CPU)",
            plural(t.vcpus.len(), "vCPU", "vCPUs")
        ),
        (TenantKind::Vm, true) => {
            let loose: Vec<String> = t
                .vcpus
                .iter()
                .filter(|v| floats(&v.cpus, usable))
                .map(|v| v.vcpu.to_string())
                .collect();
            let held = t
                .vcpus
                .iter()
                .filter(|v| !floats(&v.cpus, usable))
                .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus));
            let mut line = if loose.is_empty() {
                format!(
                    "{shut_off}{} on {}; ",
                    plural(t.vcpus.len(), "vCPU", "vCPUs"),
                    or_none(&t.cpus)
                )
            } else {
                format!(
                    "{shut_off}{} on {}, {} {} not pinned; ",
                    plural(t.vcpus.len(), "vCPU", "vCPUs"),
                    or_none(&held),
                    if loose.len() == 1 { "vCPU" } else { "vCPUs" },
                    loose.join(",")
                )
            };
            match &helpers.emulator {
                Some(cpus) => line.push_str(&format!("emulator on {cpus}")),
                None => line.push_str("emulator not pinned"),
            }
            if !helpers.iothreads.is_empty() {
                let cpus = helpers
                    .iothreads
                    .iter()
                    .fold(CpuSet::new(), |acc, (_, c)| acc.union(c));
                line.push_str(&format!(
                    "; {} on {cpus}",
                    plural(helpers.iothreads.len(), "I/O thread", "I/O threads")
                ));
            }
            if helpers.iothreads.len() < t.iothreads.len() {
                let n = t.iothreads.len() - helpers.iothreads.len();
                line.push_str(&format!(
                    "; {} not pinned",
                    plural(n, "I/O thread", "I/O threads")
                ));
            }
            line
        }
    };
    let missing = t.cpus.union(&helpers.cpus()).difference(known);
    if !missing.is_empty() {
        line.push_str(&format!("; not on this host: {missing}"));
    }
    line
}

/// `3 errors, 1 warning`.
fn conflict_counts<'c>(conflicts: impl IntoIterator<Item = &'c Conflict>) -> String {
    let (mut errors, mut warnings) = (0, 0);
    for c in conflicts {
        match c.severity {
            Severity::Error => errors += 1,
            Severity::Warning => warnings += 1,
        }
    }
    format!(
        "{}, {}",
        plural(errors, "error", "errors"),
        plural(warnings, "warning", "warnings")
    )
}

/// What a plan does to the conflicts: per conflict `now`, whether it is
/// left (else removed), and the conflicts of `after` it adds (by index). As
/// [`Report::new`](crate::report::Report::new) tells them apart, a
/// conflict is the same one under the plan when its
/// [`identity`](Conflict::identity) is.
fn fates(now: &[Conflict], after: &[Conflict]) -> (Vec<bool>, Vec<usize>) {
    let same = |a: &Conflict, b: &Conflict| a.identity() == b.identity();
    let left = now
        .iter()
        .map(|c| after.iter().any(|a| same(a, c)))
        .collect();
    let added = after
        .iter()
        .enumerate()
        .filter(|(_, a)| !now.iter().any(|c| same(a, c)))
        .map(|(i, _)| i)
        .collect();
    (left, added)
}

/// Conflict entries, each with a sample of its outline, from `y` down;
/// returns where they end.
fn conflict_list(out: &mut String, avail: i64, mut y: i64, lines: &[(Severity, String)]) -> i64 {
    let chars = chars_fitting(avail - 24, 11);
    for (severity, line) in lines {
        let lines = wrap(line, chars);
        outline_sample(out, MARGIN, y + 3, 16, 12, *severity);
        let ink = match severity {
            Severity::Error => "#8b1a1a",
            Severity::Warning => "#7a4100",
        };
        paragraph(out, MARGIN + 24, y, &format!("fill=\"{ink}\""), &lines);
        y += px(lines.len().max(1)) * 14 + 4;
    }
    y
}

/// A conflict's legend entry.
fn conflict_line(c: &Conflict, everywhere: bool) -> String {
    let mut line = format!(
        "{} {} [{}] CPUs {}: {}",
        severity_word(c.severity),
        c.kind,
        c.tenants.join(", "),
        or_none(&c.cpus),
        c.message
    );
    if everywhere {
        line.push_str(" (not outlined: it covers every CPU)");
    }
    line
}

/// The key: what fills, marks and outlines mean, as samples in a row.
fn legend_key(out: &mut String, avail: i64, mut y: i64) -> i64 {
    y += 14;
    heading(out, y, 12, "Key");
    y += 6;
    const W: i64 = 34;
    let items: [(&str, &str); 9] = [
        ("free", "free CPU"),
        ("host", "host"),
        ("vm", "a VM's vCPUs"),
        ("emu", "its emulator/I/O threads only"),
        ("floating", "a VM may run here, not pinned"),
        ("shared", "several tenants (any thread)"),
        ("unusable", "offline / not allowed"),
        ("error", "in an error conflict"),
        ("warning", "in a warning only"),
    ];
    let mut x = MARGIN;
    for (kind, label) in items {
        let item_w = W + 6 + text_w(label, 11) + 18;
        if x > MARGIN && x + item_w > MARGIN + avail {
            x = MARGIN;
            y += CELL_H + 6;
        }
        let fills: Vec<Stripe> = match kind {
            "free" | "floating" => vec![Stripe::plain("#ffffff")],
            "host" => vec![Stripe::plain(HOST_GREY)],
            "vm" | "error" | "warning" => vec![Stripe::plain(PALETTE[0])],
            "emu" => vec![Stripe::plain("url(#emu-key)")],
            "shared" => vec![Stripe::plain(HOST_GREY), Stripe::plain("url(#emu-key)")],
            _ => vec![Stripe::plain(UNUSABLE_FILL)],
        };
        cell(out, x, y, W, &fills, kind == "unusable");
        if kind == "floating" {
            floating_band(out, x, y, W, &[Stripe::plain("url(#float-key)")]);
        }
        let severity = match kind {
            "error" => Some(Severity::Error),
            "warning" => Some(Severity::Warning),
            _ => None,
        };
        outline(out, x, y, W, severity);
        if kind == "shared" {
            shared_mark(out, x, y, W);
        }
        text(
            out,
            x + W + 6,
            y + CELL_TEXT_Y,
            11,
            "fill=\"#1f2a36\"",
            label,
        );
        x += item_w;
    }
    y + CELL_H
}
