//! The report as a picture: [`render`] draws a host's packages, NUMA nodes, L3
//! domains, cores and CPUs as one standalone SVG 1.1 document, each CPU
//! coloured by the tenants pinned on it, conflicts outlined, with a legend.
//!
//! It owns layout and drawing only. Finding tenants and conflicts is
//! [`crate::report`]'s business; writing the file or converting it to PNG is
//! the caller's. Output is deterministic: integer coordinates, colours given
//! by tenant order, nothing iterated out of a hash map.

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, CpuId, NodeId};
use crate::report::{Conflict, Report, Severity};
use crate::tenant::{Tenant, TenantKind};
use crate::text::{bytes, plural};
use crate::topology::{Core, HostTopology, Pu};
use std::collections::{BTreeMap, BTreeSet};

/// Widest the drawing of the topology may get; it wraps cores into rows
/// instead, so a 384-CPU host is tall rather than wide.
const CONTENT_MAX: i64 = 1200;
/// Narrowest canvas, so the legend has room even for a 2-CPU host.
const MIN_CANVAS: i64 = 880;
const MARGIN: i64 = 16;

const CELL_H: i64 = 20;
const CELL_FONT: i64 = 12;
/// Baseline of a CPU number in its cell.
const CELL_TEXT_Y: i64 = 14;
const CELL_GAP: i64 = 2;
const CORE_PAD: i64 = 3;
const CORE_HEAD: i64 = 12;
const CORE_GAP: i64 = 4;
const BOX_PAD: i64 = 6;
const BOX_HEAD: i64 = 19;
const BOX_GAP: i64 = 8;

/// VM colours, in tenant order. Red and orange are left out (they mean
/// conflicts), and so is grey (the host's).
const PALETTE: [&str; 13] = [
    "#4e79a7", "#59a14f", "#b07aa1", "#499894", "#b6992d", "#9d7660", "#6a51a3", "#a0cbe8",
    "#8cd17d", "#d4a6c8", "#86bcb6", "#f1ce63", "#d7b5a6",
];
const HOST_GREY: &str = "#b0b0b0";
const ERROR_RED: &str = "#d62728";
const WARNING_ORANGE: &str = "#ff7f0e";
const UNUSABLE_FILL: &str = "#e6e6e6";

/// Draws `report` on `host` as a standalone SVG 1.1 document.
///
/// Every PU of `host` is drawn exactly once, as a `<g id="cpu-N">` (with a
/// `<title>` tooltip naming its tenants' vCPUs and threads) whose `class`
/// says `free`, `taken` (one tenant's vCPUs, or the host) or `shared` (more
/// than one), plus `emulator` (hatched: some VM's emulator or I/O threads
/// only), `unusable` (offline or not allowed: greyed and crossed), and
/// `conflict-error` or `conflict-warning` (red or dashed orange outline).
/// Unpinned VMs paint no CPU, and their `floating` warnings, which cover
/// every CPU, are listed in the legend but not outlined. VM colours repeat
/// after 13 VMs; the legend names every tenant with its CPUs.
pub fn render(host: &HostTopology, report: &Report) -> String {
    let paint = Paint::new(host, report);
    let top = build_tree(host);
    let topology = arrange(&top, CONTENT_MAX, paint.cell_w);
    let width = (topology.w + 2 * MARGIN).max(MIN_CANVAS);

    let mut body = String::new();
    let mut y = MARGIN;
    y = paint.title(&mut body, width, y);
    y += 8;
    for op in &topology.ops {
        let mut op = op.clone();
        op.shift(MARGIN, y);
        paint.op(&mut body, &op);
    }
    y += topology.h + 20;
    y = paint.legend(&mut body, width, y);
    let height = y + MARGIN;

    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"monospace\">\n"
    ));
    out.push_str(&format!(
        "<title>{}</title>\n",
        esc(&format!("pinplan report: {}", host.source))
    ));
    paint.defs(&mut out);
    out.push_str(&format!(
        "<rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>\n"
    ));
    out.push_str(&body);
    out.push_str("</svg>\n");
    out
}

/// What sits on one CPU: a tenant's vCPUs, or only its emulator or I/O
/// threads.
#[derive(Debug, Clone, Copy)]
struct Occupant {
    tenant: usize,
    emulator_only: bool,
}

/// A VM's emulator and I/O threads, where they are pinned apart from
/// "anywhere" (`tenant_from_domain` gives an unpinned thread every usable
/// CPU: hatching the whole host with it would hide everything else).
#[derive(Debug, Clone, Default)]
struct Helpers {
    emulator: Option<CpuSet>,
    iothreads: Vec<(u32, CpuSet)>,
}

impl Helpers {
    fn of(t: &Tenant, usable: &CpuSet) -> Helpers {
        let pinned = |cpus: &CpuSet| t.pinned && !cpus.is_empty() && cpus != usable;
        Helpers {
            emulator: Some(t.emulator_cpus.clone()).filter(pinned),
            iothreads: t
                .iothreads
                .iter()
                .filter(|io| pinned(&io.cpus))
                .map(|io| (io.iothread, io.cpus.clone()))
                .collect(),
        }
    }

    /// Each pinned thread with its CPUs: `emulator`, `iothread N`.
    fn threads(&self) -> Vec<(String, &CpuSet)> {
        let mut out: Vec<(String, &CpuSet)> = Vec::new();
        if let Some(cpus) = &self.emulator {
            out.push(("emulator".to_owned(), cpus));
        }
        for (id, cpus) in &self.iothreads {
            out.push((format!("iothread {id}"), cpus));
        }
        out
    }

    fn cpus(&self) -> CpuSet {
        self.threads()
            .iter()
            .fold(CpuSet::new(), |acc, (_, cpus)| acc.union(cpus))
    }
}

/// Everything a drawing step needs to know about tenants and conflicts.
struct Paint<'a> {
    host: &'a HostTopology,
    report: &'a Report,
    /// Colour of each tenant, by index in `report.tenants`.
    colours: Vec<&'static str>,
    /// Each tenant's pinned emulator and I/O threads.
    helpers: Vec<Helpers>,
    occupants: BTreeMap<CpuId, Vec<Occupant>>,
    /// Per CPU, per tenant: the vCPUs that may run there.
    vcpus_on: BTreeMap<CpuId, BTreeMap<usize, Vec<u32>>>,
    /// Per CPU, per tenant: the emulator and I/O threads that may run there.
    helpers_on: BTreeMap<CpuId, BTreeMap<usize, Vec<String>>>,
    /// Per CPU: the conflicts drawn on it (by index), and the worst severity.
    conflicts_on: BTreeMap<CpuId, Vec<usize>>,
    worst: BTreeMap<CpuId, Severity>,
    /// Conflicts that cover every CPU (an unpinned VM): listed, not outlined.
    everywhere: Vec<bool>,
    cell_w: i64,
}

impl<'a> Paint<'a> {
    fn new(host: &'a HostTopology, report: &'a Report) -> Paint<'a> {
        let usable = host.usable_cpus();
        let mut vm_index = 0;
        let colours = report
            .tenants
            .iter()
            .map(|t| match t.kind {
                TenantKind::Host => HOST_GREY,
                TenantKind::Vm => {
                    let c = PALETTE[vm_index % PALETTE.len()];
                    vm_index += 1;
                    c
                }
            })
            .collect();
        let helpers: Vec<Helpers> = report
            .tenants
            .iter()
            .map(|t| Helpers::of(t, &usable))
            .collect();

        let mut occupants: BTreeMap<CpuId, Vec<Occupant>> = BTreeMap::new();
        let mut vcpus_on: BTreeMap<CpuId, BTreeMap<usize, Vec<u32>>> = BTreeMap::new();
        let mut helpers_on: BTreeMap<CpuId, BTreeMap<usize, Vec<String>>> = BTreeMap::new();
        for (i, (t, h)) in report.tenants.iter().zip(&helpers).enumerate() {
            if !t.pinned {
                continue;
            }
            for cpu in t.cpus.iter() {
                occupants.entry(cpu).or_default().push(Occupant {
                    tenant: i,
                    emulator_only: false,
                });
            }
            for cpu in h.cpus().difference(&t.cpus).iter() {
                occupants.entry(cpu).or_default().push(Occupant {
                    tenant: i,
                    emulator_only: true,
                });
            }
            for (thread, cpus) in h.threads() {
                for cpu in cpus.iter() {
                    helpers_on
                        .entry(cpu)
                        .or_default()
                        .entry(i)
                        .or_default()
                        .push(thread.clone());
                }
            }
            for v in &t.vcpus {
                for cpu in v.cpus.iter() {
                    vcpus_on
                        .entry(cpu)
                        .or_default()
                        .entry(i)
                        .or_default()
                        .push(v.vcpu);
                }
            }
        }
        // vCPU occupants first, then emulator-only ones, each in tenant order.
        for list in occupants.values_mut() {
            list.sort_by_key(|o| (o.emulator_only, o.tenant));
        }

        let floating: BTreeSet<&str> = report
            .tenants
            .iter()
            .filter(|t| !t.pinned)
            .map(|t| t.name.as_str())
            .collect();
        let everywhere: Vec<bool> = report
            .conflicts
            .iter()
            .map(|c| {
                !c.tenants.is_empty() && c.tenants.iter().all(|n| floating.contains(n.as_str()))
            })
            .collect();
        let mut conflicts_on: BTreeMap<CpuId, Vec<usize>> = BTreeMap::new();
        let mut worst: BTreeMap<CpuId, Severity> = BTreeMap::new();
        for (i, c) in report.conflicts.iter().enumerate() {
            if everywhere[i] {
                continue;
            }
            for cpu in c.cpus.iter() {
                conflicts_on.entry(cpu).or_default().push(i);
                let w = worst.entry(cpu).or_insert(c.severity);
                // Error sorts before Warning.
                *w = (*w).min(c.severity);
            }
        }

        let digits = host
            .pus
            .iter()
            .map(|p| p.cpu.0.to_string().len())
            .max()
            .unwrap_or(1);
        let cell_w = (text_w(&"0".repeat(digits), CELL_FONT) + 12).max(34);
        Paint {
            host,
            report,
            colours,
            helpers,
            occupants,
            vcpus_on,
            helpers_on,
            conflicts_on,
            worst,
            everywhere,
            cell_w,
        }
    }

    fn colour(&self, tenant: usize) -> &'static str {
        self.colours.get(tenant).copied().unwrap_or(HOST_GREY)
    }

    fn fill(&self, o: Occupant) -> String {
        if o.emulator_only {
            format!("url(#emu-{})", o.tenant)
        } else {
            self.colour(o.tenant).to_owned()
        }
    }

    /// Patterns: one hatch per tenant with pinned emulator threads, and one
    /// for the legend's key.
    fn defs(&self, out: &mut String) {
        out.push_str("<defs>\n");
        let hatch = |out: &mut String, id: &str, colour: &str| {
            out.push_str(&format!(
                "<pattern id=\"{id}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
                 patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffffff\"/>\
                 <rect width=\"3\" height=\"6\" fill=\"{colour}\"/></pattern>\n"
            ));
        };
        for (i, h) in self.helpers.iter().enumerate() {
            if !h.cpus().is_empty() {
                hatch(out, &format!("emu-{i}"), self.colour(i));
            }
        }
        hatch(out, "emu-key", PALETTE[0]);
        out.push_str("</defs>\n");
    }

    fn title(&self, out: &mut String, width: i64, mut y: i64) -> i64 {
        let host = self.host;
        let errors = self
            .report
            .conflicts
            .iter()
            .filter(|c| c.severity == Severity::Error)
            .count();
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
            text(
                out,
                MARGIN,
                y,
                16,
                "font-weight=\"bold\" fill=\"#1f2a36\"",
                &line,
            );
        }
        let chars = chars_fitting(width - 2 * MARGIN, 12);
        for line in wrap(&counts, chars) {
            y += 16;
            text(out, MARGIN, y, 12, "fill=\"#3b4754\"", &line);
        }
        y
    }

    fn op(&self, out: &mut String, op: &Op) {
        match op {
            Op::Group {
                x,
                y,
                w,
                h,
                class,
                label,
            } => {
                let (fill, stroke, extra) = match *class {
                    "package" => ("#dde4ec", "#4f5f70", " stroke-width=\"1.5\""),
                    "node" => ("#edf1f5", "#7b8b9c", ""),
                    "l3" => ("#f8f9fa", "#9aa7b5", " stroke-dasharray=\"4 2\""),
                    _ => ("#f4f4f4", "#8c8c8c", ""),
                };
                out.push_str(&format!(
                    "<g class=\"{class}\">\n<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" \
                     rx=\"5\" fill=\"{fill}\" stroke=\"{stroke}\"{extra}/>\n"
                ));
                let (size, weight) = if *class == "package" {
                    (12, " font-weight=\"bold\"")
                } else {
                    (11, "")
                };
                text(
                    out,
                    x + BOX_PAD,
                    y + 14,
                    size,
                    &format!("fill=\"#1f2a36\"{weight}"),
                    label,
                );
                out.push_str("</g>\n");
            }
            Op::Core { x, y, w, h, label } => {
                out.push_str(&format!(
                    "<rect class=\"core\" x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" rx=\"3\" \
                     fill=\"#d3d9e0\" stroke=\"#8593a3\" stroke-width=\"0.8\"/>\n"
                ));
                text(
                    out,
                    x + w / 2,
                    y + 9,
                    9,
                    "fill=\"#3b4754\" text-anchor=\"middle\"",
                    label,
                );
            }
            Op::Pu { x, y, pu } => {
                if let Some(pu) = self.host.pus.get(*pu) {
                    self.pu(out, *x, *y, pu);
                }
            }
        }
    }

    fn pu(&self, out: &mut String, x: i64, y: i64, pu: &Pu) {
        let cpu = pu.cpu;
        let occupants = self.occupants.get(&cpu).map_or(&[][..], Vec::as_slice);
        let worst = self.worst.get(&cpu).copied();
        let claims = occupants.iter().filter(|o| !o.emulator_only).count();
        let mut class = String::from("pu");
        class.push_str(match (occupants.len(), claims) {
            (0, _) => " free",
            (_, 0 | 1) => " taken",
            _ => " shared",
        });
        if occupants.iter().any(|o| o.emulator_only) {
            class.push_str(" emulator");
        }
        if !pu.usable {
            class.push_str(" unusable");
        }
        match worst {
            Some(Severity::Error) => class.push_str(" conflict-error"),
            Some(Severity::Warning) => class.push_str(" conflict-warning"),
            None => {}
        }
        out.push_str(&format!("<g id=\"cpu-{cpu}\" class=\"{class}\">\n"));
        out.push_str(&format!("<title>{}</title>\n", esc(&self.tooltip(pu))));

        let w = self.cell_w;
        let fills: Vec<String> = if occupants.is_empty() {
            vec![if pu.usable { "#ffffff" } else { UNUSABLE_FILL }.to_owned()]
        } else {
            occupants.iter().map(|o| self.fill(*o)).collect()
        };
        cell(out, x, y, w, &fills, !pu.usable);

        // Text straight on a single solid colour; on stripes, hatching or a
        // cross it gets a white halo, which leaves the stripes visible.
        let plain = occupants.len() <= 1 && pu.usable && !occupants.iter().any(|o| o.emulator_only);
        let label = cpu.to_string();
        let ink = match occupants {
            [one] if plain && !one.emulator_only => ink_on(self.colour(one.tenant)),
            _ if !pu.usable => "#333333",
            _ => "#111111",
        };
        if !plain {
            text(
                out,
                x + w / 2,
                y + CELL_TEXT_Y,
                CELL_FONT,
                "fill=\"#ffffff\" stroke=\"#ffffff\" stroke-width=\"2.5\" \
                 stroke-linejoin=\"round\" text-anchor=\"middle\"",
                &label,
            );
        }
        text(
            out,
            x + w / 2,
            y + CELL_TEXT_Y,
            CELL_FONT,
            &format!("fill=\"{ink}\" text-anchor=\"middle\""),
            &label,
        );
        outline(out, x, y, w, worst);
        if claims > 1 {
            shared_mark(out, x, y, w);
        }
        out.push_str("</g>\n");
    }

    fn tooltip(&self, pu: &Pu) -> String {
        let mut text = format!("CPU {}", pu.cpu);
        if let Some(core) = pu.core {
            text.push_str(&format!(", core {core}"));
        }
        if let Some(node) = pu.numa_node {
            text.push_str(&format!(", node {node}"));
        }
        if !pu.online {
            text.push_str(", offline");
        } else if !pu.allowed {
            text.push_str(", not allowed");
        }
        let occupants = self.occupants.get(&pu.cpu).map_or(&[][..], Vec::as_slice);
        if occupants.is_empty() {
            text.push_str(": free");
        }
        for (i, o) in occupants.iter().enumerate() {
            text.push_str(if i == 0 { ": " } else { "; " });
            let Some(t) = self.report.tenants.get(o.tenant) else {
                continue;
            };
            text.push_str(&t.name);
            let mut threads = Vec::new();
            if let Some(vcpus) = self.vcpus_on.get(&pu.cpu).and_then(|m| m.get(&o.tenant)) {
                let list: Vec<String> = vcpus.iter().map(u32::to_string).collect();
                threads.push(format!("vCPU {}", list.join(",")));
            }
            if let Some(helpers) = self.helpers_on.get(&pu.cpu).and_then(|m| m.get(&o.tenant)) {
                threads.extend(helpers.iter().cloned());
            }
            if !threads.is_empty() {
                text.push(' ');
                text.push_str(&threads.join(", "));
            }
        }
        for i in self
            .conflicts_on
            .get(&pu.cpu)
            .map_or(&[][..], Vec::as_slice)
        {
            if let Some(c) = self.report.conflicts.get(*i) {
                text.push_str(&format!(" | {} {}", severity_word(c.severity), c.kind));
            }
        }
        text
    }

    fn legend(&self, out: &mut String, width: i64, mut y: i64) -> i64 {
        let avail = width - 2 * MARGIN;
        y = self.legend_tenants(out, avail, y);
        y = legend_key(out, avail, y + 10);
        y = self.legend_conflicts(out, avail, y + 10);
        self.legend_notes(out, avail, y)
    }

    fn legend_tenants(&self, out: &mut String, avail: i64, mut y: i64) -> i64 {
        y += 14;
        text(
            out,
            MARGIN,
            y,
            12,
            "font-weight=\"bold\" fill=\"#1f2a36\"",
            "Tenants",
        );
        if self.report.tenants.is_empty() {
            y += 16;
            text(out, MARGIN, y, 11, "fill=\"#3b4754\"", "none");
            return y;
        }
        let known: CpuSet = self.host.pus.iter().map(|p| p.cpu).collect();
        let entries: Vec<String> = self
            .report
            .tenants
            .iter()
            .enumerate()
            .map(|(i, t)| tenant_line(t, &self.helpers[i], &known))
            .collect();
        const SWATCH: i64 = 20;
        const COL_GAP: i64 = 24;
        let longest = entries.iter().map(|e| e.chars().count()).max().unwrap_or(0);
        let fit = chars_fitting(avail - SWATCH, 11);
        let col_chars = longest.min(fit);
        let col_w = SWATCH + text_w(&"m".repeat(col_chars), 11) + COL_GAP;
        let columns = usize::try_from((avail + COL_GAP) / col_w.max(1))
            .unwrap_or(1)
            .clamp(1, entries.len());
        let rows = entries.len().div_ceil(columns);
        let wrapped: Vec<Vec<String>> = entries.iter().map(|e| wrap(e, col_chars)).collect();
        let mut row_y = y + 6;
        for row in 0..rows {
            let mut lines_in_row = 1;
            for col in 0..columns {
                let i = col * rows + row;
                let (Some(t), Some(lines)) = (self.report.tenants.get(i), wrapped.get(i)) else {
                    continue;
                };
                let x = MARGIN + px(col) * col_w;
                self.swatch(out, x, row_y + 2, i, t);
                for (n, line) in lines.iter().enumerate() {
                    text(
                        out,
                        x + SWATCH,
                        row_y + 13 + px(n) * 14,
                        11,
                        "fill=\"#1f2a36\"",
                        line,
                    );
                }
                lines_in_row = lines_in_row.max(lines.len());
            }
            row_y += px(lines_in_row) * 14 + 4;
        }
        row_y
    }

    fn swatch(&self, out: &mut String, x: i64, y: i64, i: usize, t: &Tenant) {
        let colour = self.colour(i);
        if t.pinned {
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

    fn legend_conflicts(&self, out: &mut String, avail: i64, mut y: i64) -> i64 {
        let conflicts = &self.report.conflicts;
        let errors = conflicts
            .iter()
            .filter(|c| c.severity == Severity::Error)
            .count();
        y += 14;
        let heading = if conflicts.is_empty() {
            "Conflicts: none".to_owned()
        } else {
            format!(
                "Conflicts: {}, {}",
                plural(errors, "error", "errors"),
                plural(conflicts.len() - errors, "warning", "warnings")
            )
        };
        text(
            out,
            MARGIN,
            y,
            12,
            "font-weight=\"bold\" fill=\"#1f2a36\"",
            &heading,
        );
        y += 6;
        let chars = chars_fitting(avail - 24, 11);
        for (i, c) in conflicts.iter().enumerate() {
            let line = conflict_line(c, self.everywhere.get(i).copied().unwrap_or(false));
            let lines = wrap(&line, chars);
            outline_sample(out, MARGIN, y + 3, 16, 12, c.severity);
            let ink = match c.severity {
                Severity::Error => "#8b1a1a",
                Severity::Warning => "#7a4100",
            };
            for (n, l) in lines.iter().enumerate() {
                text(
                    out,
                    MARGIN + 24,
                    y + 13 + px(n) * 14,
                    11,
                    &format!("fill=\"{ink}\""),
                    l,
                );
            }
            y += px(lines.len().max(1)) * 14 + 4;
        }
        y
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
        text(
            out,
            MARGIN,
            y,
            12,
            "font-weight=\"bold\" fill=\"#1f2a36\"",
            "NUMA nodes without cores of their own",
        );
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

fn tenant_line(t: &Tenant, helpers: &Helpers, known: &CpuSet) -> String {
    let mut line = match (t.kind, t.pinned) {
        (TenantKind::Host, _) => format!("{}: CPUs {}", t.name, or_none(&t.cpus)),
        (TenantKind::Vm, false) => format!(
            "{}: {}, not pinned (may run on any CPU)",
            t.name,
            plural(t.vcpus.len(), "vCPU", "vCPUs")
        ),
        (TenantKind::Vm, true) => {
            let mut line = format!(
                "{}: {} on {}; ",
                t.name,
                plural(t.vcpus.len(), "vCPU", "vCPUs"),
                or_none(&t.cpus)
            );
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
    text(
        out,
        MARGIN,
        y,
        12,
        "font-weight=\"bold\" fill=\"#1f2a36\"",
        "Key",
    );
    y += 6;
    const W: i64 = 34;
    let items: [(&str, &str); 8] = [
        ("free", "free CPU"),
        ("host", "host"),
        ("vm", "a VM's vCPUs"),
        ("emu", "its emulator/I/O threads only"),
        ("shared", "claimed by several tenants"),
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
        let fills: Vec<String> = match kind {
            "free" => vec!["#ffffff".to_owned()],
            "host" => vec![HOST_GREY.to_owned()],
            "vm" | "error" | "warning" => vec![PALETTE[0].to_owned()],
            "emu" => vec!["url(#emu-key)".to_owned()],
            "shared" => vec![PALETTE[0].to_owned(), PALETTE[1].to_owned()],
            _ => vec![UNUSABLE_FILL.to_owned()],
        };
        cell(out, x, y, W, &fills, kind == "unusable");
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

/// A CPU cell's fill (one stripe per fill), cross, and border.
fn cell(out: &mut String, x: i64, y: i64, w: i64, fills: &[String], cross: bool) {
    let k = px(fills.len().max(1));
    for (i, fill) in fills.iter().enumerate() {
        let x0 = x + w * px(i) / k;
        let x1 = x + w * (px(i) + 1) / k;
        out.push_str(&format!(
            "<rect x=\"{x0}\" y=\"{y}\" width=\"{}\" height=\"{CELL_H}\" fill=\"{fill}\"/>\n",
            x1 - x0
        ));
    }
    if cross {
        // Greyed out, then crossed.
        out.push_str(&format!(
            "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{CELL_H}\" fill=\"#ffffff\" \
             fill-opacity=\"0.45\"/>\n"
        ));
        out.push_str(&format!(
            "<path class=\"cross\" d=\"M{x} {y}L{} {}M{} {y}L{x} {}\" stroke=\"#404040\" \
             stroke-width=\"1.2\"/>\n",
            x + w,
            y + CELL_H,
            x + w,
            y + CELL_H
        ));
    }
    out.push_str(&format!(
        "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{CELL_H}\" fill=\"none\" \
         stroke=\"#5f6b78\" stroke-width=\"0.8\"/>\n"
    ));
}

/// The corner mark of a CPU claimed by several tenants, drawn last so that
/// no outline covers it.
fn shared_mark(out: &mut String, x: i64, y: i64, w: i64) {
    out.push_str(&format!(
        "<path class=\"shared-mark\" d=\"M{} {y}H{}V{}Z\" fill=\"#111111\"/>\n",
        x + w - 10,
        x + w,
        y + 10
    ));
}

/// The conflict outline, drawn inside the cell so neighbours never cover it.
fn outline(out: &mut String, x: i64, y: i64, w: i64, severity: Option<Severity>) {
    match severity {
        Some(Severity::Error) => out.push_str(&format!(
            "<rect class=\"outline-error\" x=\"{}.5\" y=\"{}.5\" width=\"{}\" height=\"{}\" \
             fill=\"none\" stroke=\"{ERROR_RED}\" stroke-width=\"3\"/>\n",
            x + 1,
            y + 1,
            w - 3,
            CELL_H - 3
        )),
        Some(Severity::Warning) => out.push_str(&format!(
            "<rect class=\"outline-warning\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" \
             fill=\"none\" stroke=\"{WARNING_ORANGE}\" stroke-width=\"2\" \
             stroke-dasharray=\"4 2\"/>\n",
            x + 1,
            y + 1,
            w - 2,
            CELL_H - 2
        )),
        None => {}
    }
}

fn outline_sample(out: &mut String, x: i64, y: i64, w: i64, h: i64, severity: Severity) {
    let (stroke, extra) = match severity {
        Severity::Error => (ERROR_RED, "stroke-width=\"3\""),
        Severity::Warning => (
            WARNING_ORANGE,
            "stroke-width=\"2\" stroke-dasharray=\"4 2\"",
        ),
    };
    out.push_str(&format!(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"{stroke}\" \
         {extra}/>\n",
        x + 1,
        y + 1,
        w - 2,
        h - 2
    ));
}

fn text(out: &mut String, x: i64, y: i64, size: i64, attrs: &str, content: &str) {
    out.push_str(&format!(
        "<text x=\"{x}\" y=\"{y}\" font-size=\"{size}\" {attrs}>{}</text>\n",
        esc(content)
    ));
}

/// Black or white text, whichever reads better on `fill` (`#rrggbb`).
fn ink_on(fill: &str) -> &'static str {
    let channel = |i: usize| {
        fill.get(i..i + 2)
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .unwrap_or(255)
    };
    let luma = 299 * channel(1) + 587 * channel(3) + 114 * channel(5);
    if luma < 140_000 {
        "#ffffff"
    } else {
        "#111111"
    }
}

/// Something laid out: its size and what to draw, relative to its corner.
#[derive(Debug, Clone)]
struct Block {
    w: i64,
    h: i64,
    ops: Vec<Op>,
}

/// One thing to draw, at absolute coordinates once placed.
#[derive(Debug, Clone)]
enum Op {
    Group {
        x: i64,
        y: i64,
        w: i64,
        h: i64,
        class: &'static str,
        label: String,
    },
    Core {
        x: i64,
        y: i64,
        w: i64,
        h: i64,
        label: String,
    },
    /// A PU, by index in `host.pus`.
    Pu { x: i64, y: i64, pu: usize },
}

impl Op {
    fn shift(&mut self, dx: i64, dy: i64) {
        let (x, y) = match self {
            Op::Group { x, y, .. } | Op::Core { x, y, .. } | Op::Pu { x, y, .. } => (x, y),
        };
        *x += dx;
        *y += dy;
    }
}

/// The containment tree: packages, nodes, L3 domains, cores.
enum Item {
    Core { label: String, pus: Vec<usize> },
    Group(Group),
}

struct Group {
    class: &'static str,
    /// The full header, and a short one for narrow boxes.
    label: String,
    short: String,
    children: Vec<Item>,
}

impl Item {
    fn is_core(&self) -> bool {
        matches!(self, Item::Core { .. })
    }
}

/// Sorts `None` after every `Some`: cores without a package, node or L3
/// domain come after the others.
fn last_none<T: Ord>(o: Option<T>) -> (bool, Option<T>) {
    (o.is_none(), o)
}

/// A level of the containment tree above cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Package,
    Node,
    L3,
}

impl Level {
    fn key(self, core: &Core) -> Option<u32> {
        match self {
            Level::Package => core.package.map(|p| p.0),
            Level::Node => core.numa_node.map(|n| n.0),
            Level::L3 => core.l3.map(|l| l.0),
        }
    }
}

/// Whether every `lower` group (cores outside any are ignored) lies within
/// one `upper` group.
fn contains(host: &HostTopology, upper: Level, lower: Level) -> bool {
    let mut parent: BTreeMap<u32, Option<u32>> = BTreeMap::new();
    host.cores.iter().all(|c| match lower.key(c) {
        None => true,
        Some(key) => *parent.entry(key).or_insert(upper.key(c)) == upper.key(c),
    })
}

/// Every order of `levels`, in lexicographic order of the permutation.
fn permutations(levels: &[Level]) -> Vec<Vec<Level>> {
    if levels.is_empty() {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, first) in levels.iter().enumerate() {
        let mut rest = levels.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, *first);
            out.push(tail);
        }
    }
    out
}

/// The levels the host describes, coarsest first: package, NUMA node, L3
/// domain, unless the host nests them another way (NUMA nodes of four
/// packages on old 16-socket machines, an L3 domain over two nodes). A level
/// the host does not describe at all is left out; where no order nests
/// cleanly, the usual one is kept and split groups are drawn in each parent.
fn level_order(host: &HostTopology) -> Vec<Level> {
    let present: Vec<Level> = [
        (
            Level::Package,
            !host.packages.is_empty() || host.cores.iter().any(|c| c.package.is_some()),
        ),
        (
            Level::Node,
            !host.numa_nodes.is_empty() || host.cores.iter().any(|c| c.numa_node.is_some()),
        ),
        (
            Level::L3,
            !host.l3_domains.is_empty() || host.cores.iter().any(|c| c.l3.is_some()),
        ),
    ]
    .into_iter()
    .filter_map(|(level, present)| present.then_some(level))
    .collect();
    permutations(&present)
        .into_iter()
        .find(|order| {
            order.iter().enumerate().all(|(i, upper)| {
                order
                    .iter()
                    .skip(i + 1)
                    .all(|lower| contains(host, *upper, *lower))
            })
        })
        .unwrap_or(present)
}

/// The containment tree: every core once, under its own package, node and
/// L3 domain (in [`level_order`]); cores without an L3 domain sit directly
/// in their parent. PUs without a core (offline CPUs) get a box of their own
/// at the end.
fn build_tree(host: &HostTopology) -> Vec<Item> {
    let levels = level_order(host);

    // Each PU goes to the core that claims it (by id), or to the loose box.
    let core_ids: BTreeSet<CoreId> = host.cores.iter().map(|c| c.id).collect();
    let mut pus_of: BTreeMap<CoreId, Vec<usize>> = BTreeMap::new();
    let mut loose: Vec<usize> = Vec::new();
    for (i, pu) in host.pus.iter().enumerate() {
        match pu.core.filter(|c| core_ids.contains(c)) {
            Some(core) => pus_of.entry(core).or_default().push(i),
            None => loose.push(i),
        }
    }

    // A group found under several parents is drawn in each, marked "(part)".
    let mut parents: BTreeMap<(Level, u32), BTreeSet<Vec<Option<u32>>>> = BTreeMap::new();
    for core in &host.cores {
        for (i, level) in levels.iter().enumerate() {
            if let Some(key) = level.key(core) {
                let path = levels.iter().take(i).map(|l| l.key(core)).collect();
                parents.entry((*level, key)).or_default().insert(path);
            }
        }
    }
    let split: BTreeSet<(Level, u32)> = parents
        .into_iter()
        .filter(|(_, paths)| paths.len() > 1)
        .map(|(key, _)| key)
        .collect();

    let all: Vec<usize> = (0..host.cores.len()).collect();
    let mut tree = Tree {
        host,
        pus_of,
        split,
    };
    let mut top = tree.group(&all, &levels);
    // Anything a core did not take (nothing, in an assembled topology; but
    // nothing may vanish from the picture).
    loose.extend(tree.pus_of.into_values().flatten());
    loose.sort_unstable();
    if !loose.is_empty() {
        let children = loose
            .into_iter()
            .map(|i| Item::Core {
                label: match host.pus.get(i) {
                    Some(pu) if !pu.online => "off".to_owned(),
                    _ => "?".to_owned(),
                },
                pus: vec![i],
            })
            .collect();
        top.push(Item::Group(Group {
            class: "loose",
            label: "CPUs without a core (offline)".to_owned(),
            short: "no core".to_owned(),
            children,
        }));
    }
    top
}

struct Tree<'a> {
    host: &'a HostTopology,
    /// PUs of each core, taken as the core is placed.
    pus_of: BTreeMap<CoreId, Vec<usize>>,
    split: BTreeSet<(Level, u32)>,
}

impl Tree<'_> {
    /// Items for `cores` (indexes in `host.cores`) grouped by `levels`.
    fn group(&mut self, cores: &[usize], levels: &[Level]) -> Vec<Item> {
        let host = self.host;
        let Some((&level, below)) = levels.split_first() else {
            return cores
                .iter()
                .filter_map(|i| host.cores.get(*i))
                .map(|core| Item::Core {
                    label: format!("c{}", core.id),
                    pus: self.pus_of.remove(&core.id).unwrap_or_default(),
                })
                .collect();
        };
        let mut by_key: BTreeMap<(bool, Option<u32>), Vec<usize>> = BTreeMap::new();
        for &i in cores {
            if let Some(core) = host.cores.get(i) {
                by_key
                    .entry(last_none(level.key(core)))
                    .or_default()
                    .push(i);
            }
        }
        let mut items = Vec::new();
        for ((_, key), members) in by_key {
            let children = self.group(&members, below);
            if key.is_none() && level == Level::L3 {
                items.extend(children);
                continue;
            }
            let cpus: usize = members
                .iter()
                .filter_map(|i| host.cores.get(*i))
                .map(|c| c.cpus.len())
                .sum();
            let counts = format!(
                "{} · {}",
                plural(members.len(), "core", "cores"),
                plural(cpus, "CPU", "CPUs")
            );
            let part = match key {
                Some(k) if self.split.contains(&(level, k)) => " (part)",
                _ => "",
            };
            let (class, label, short) = match (level, key) {
                (Level::Package, Some(id)) => {
                    let os = host
                        .packages
                        .iter()
                        .find(|p| p.id.0 == id)
                        .and_then(|p| p.os_index)
                        .filter(|os| *os != id)
                        .map(|os| format!(" (socket {os})"))
                        .unwrap_or_default();
                    (
                        "package",
                        format!("package {id}{os} · {counts}{part}"),
                        format!("package {id}{part}"),
                    )
                }
                (Level::Package, None) => (
                    "package",
                    format!("no package · {counts}"),
                    "no package".to_owned(),
                ),
                (Level::Node, Some(id)) => {
                    let mem = host
                        .numa_nodes
                        .iter()
                        .find(|n| n.id.0 == id)
                        .and_then(|n| n.memory_bytes)
                        .map(|m| format!(" · {}", bytes(m)))
                        .unwrap_or_default();
                    (
                        "node",
                        format!("NUMA node {id} · {counts}{mem}{part}"),
                        format!("node {id}{part}"),
                    )
                }
                (Level::Node, None) => (
                    "node",
                    format!("no NUMA node · {counts}"),
                    "no node".to_owned(),
                ),
                (Level::L3, _) => {
                    let id = key.map_or_else(|| "?".to_owned(), |k| k.to_string());
                    let size = host
                        .l3_domains
                        .iter()
                        .find(|d| Some(d.id.0) == key)
                        .and_then(|d| d.size_bytes)
                        .map(|s| format!(" · {}", bytes(s)))
                        .unwrap_or_default();
                    (
                        "l3",
                        format!("L3 {id}{size}{part}"),
                        format!("L3 {id}{part}"),
                    )
                }
            };
            items.push(Item::Group(Group {
                class,
                label,
                short,
                children,
            }));
        }
        items
    }
}

/// Lays an item out within `max_w`.
fn layout(item: &Item, max_w: i64, cell_w: i64) -> Block {
    match item {
        Item::Core { label, pus } => {
            let rows = px(pus.len().max(1));
            let w = cell_w + 2 * CORE_PAD;
            let h = CORE_HEAD + rows * CELL_H + (rows - 1) * CELL_GAP + CORE_PAD;
            let mut ops = vec![Op::Core {
                x: 0,
                y: 0,
                w,
                h,
                label: label.clone(),
            }];
            for (row, pu) in pus.iter().enumerate() {
                ops.push(Op::Pu {
                    x: CORE_PAD,
                    y: CORE_HEAD + px(row) * (CELL_H + CELL_GAP),
                    pu: *pu,
                });
            }
            Block { w, h, ops }
        }
        Item::Group(group) => {
            let inner = max_w - 2 * BOX_PAD;
            let content = arrange(&group.children, inner, cell_w);
            let label = if text_w(&group.label, 12) <= inner {
                group.label.clone()
            } else {
                fit(&group.short, inner, 12)
            };
            let w = content.w.max(text_w(&label, 12)) + 2 * BOX_PAD;
            let h = BOX_HEAD + content.h + BOX_PAD;
            let mut ops = vec![Op::Group {
                x: 0,
                y: 0,
                w,
                h,
                class: group.class,
                label,
            }];
            for mut op in content.ops {
                op.shift(BOX_PAD, BOX_HEAD);
                ops.push(op);
            }
            Block { w, h, ops }
        }
    }
}

/// Lays `items` out side by side within `max_w`. Boxes of boxes (packages,
/// nodes, L3 domains) are tried in 1 to 8 columns, each column narrowing the
/// boxes (which then wrap their cores into more rows); the lowest result
/// wins, the fewest columns on a tie. Six L3 domains of 16 cores thus sit
/// three abreast with two rows of cores each, not one under the other.
fn arrange(items: &[Item], max_w: i64, cell_w: i64) -> Block {
    let all_groups = items.iter().all(|i| !i.is_core());
    if !all_groups || items.len() < 2 {
        return flow(
            items
                .iter()
                .map(|c| (c.is_core(), layout(c, max_w, cell_w)))
                .collect(),
            max_w,
            None,
        );
    }
    // Narrower than this, a box could not hold one core.
    let narrowest = cell_w + 2 * CORE_PAD + 2 * BOX_PAD;
    let mut best: Option<(i64, Block)> = None;
    for columns in 1..=items.len().min(8) {
        let k = px(columns);
        let each = (max_w - (k - 1) * BOX_GAP) / k;
        if columns > 1 && each < narrowest {
            break;
        }
        let block = flow(
            items
                .iter()
                .map(|c| (false, layout(c, each, cell_w)))
                .collect(),
            max_w,
            Some(columns),
        );
        if best.as_ref().is_none_or(|(h, _)| block.h < *h) {
            best = Some((block.h, block));
        }
    }
    best.map(|(_, b)| b).unwrap_or(Block {
        w: 0,
        h: 0,
        ops: Vec::new(),
    })
}

/// Places blocks left to right, wrapping into rows within `max_w` (and after
/// `columns` blocks, when given). A run of cores alone is wrapped into rows
/// of equal length, so 24 cores in room for 22 make two rows of 12, not 22
/// and 2.
fn flow(blocks: Vec<(bool, Block)>, max_w: i64, columns: Option<usize>) -> Block {
    if blocks.is_empty() {
        return Block {
            w: 0,
            h: 0,
            ops: Vec::new(),
        };
    }
    let all_cores = blocks.iter().all(|(core, _)| *core);
    let per_row = if all_cores {
        let w = blocks.iter().map(|(_, b)| b.w).max().unwrap_or(1);
        let fits = usize::try_from((max_w + CORE_GAP) / (w + CORE_GAP).max(1))
            .unwrap_or(1)
            .max(1);
        let rows = blocks.len().div_ceil(fits);
        blocks.len().div_ceil(rows.max(1))
    } else {
        columns.unwrap_or(usize::MAX).max(1)
    };
    let gap = |a: bool, b: bool| if a && b { CORE_GAP } else { BOX_GAP };
    let row_gap = if all_cores { CORE_GAP } else { BOX_GAP };

    let mut ops = Vec::new();
    let (mut x, mut y, mut row_h, mut in_row) = (0, 0, 0, 0usize);
    let mut width = 0;
    let mut previous_core = false;
    for (core, block) in blocks {
        let step = if in_row == 0 {
            0
        } else {
            gap(previous_core, core)
        };
        if in_row > 0 && (in_row >= per_row || x + step + block.w > max_w) {
            y += row_h + row_gap;
            x = 0;
            row_h = 0;
            in_row = 0;
        } else {
            x += step;
        }
        for mut op in block.ops {
            op.shift(x, y);
            ops.push(op);
        }
        x += block.w;
        width = width.max(x);
        row_h = row_h.max(block.h);
        in_row += 1;
        previous_core = core;
    }
    Block {
        w: width,
        h: y + row_h,
        ops,
    }
}

fn px(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX / 4)
}

/// Width of `s` in DejaVu Sans Mono (0.6 em a character), rounded up.
fn text_w(s: &str, size: i64) -> i64 {
    (px(s.chars().count()) * size * 61 + 99) / 100
}

/// How many monospace characters fit in `width`.
fn chars_fitting(width: i64, size: i64) -> usize {
    usize::try_from(width * 100 / (size * 61).max(1))
        .unwrap_or(1)
        .max(8)
}

/// `label` shortened with an ellipsis so it fits `width`.
fn fit(label: &str, width: i64, size: i64) -> String {
    let max = chars_fitting(width, size);
    if label.chars().count() <= max {
        label.to_owned()
    } else {
        let mut short: String = label.chars().take(max.saturating_sub(1)).collect();
        short.push('…');
        short
    }
}

/// Word-wraps `text` into lines of at most `width` characters; words longer
/// than a line are cut, after a `/` (else a `-`, `.`, `,` or `_`) where there
/// is one in the second half of the line.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    let mut line = String::new();
    let mut len = 0;
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let need = if len == 0 {
                word.len()
            } else {
                len + 1 + word.len()
            };
            if need <= width {
                if len > 0 {
                    line.push(' ');
                    len += 1;
                }
                line.extend(word.iter());
                len += word.len();
                break;
            }
            if len > 0 {
                lines.push(std::mem::take(&mut line));
                len = 0;
                continue;
            }
            // Cut a path or list after a separator (a slash first) when one
            // is not too early.
            let after = |is_separator: fn(&char) -> bool| {
                word.iter()
                    .take(width)
                    .rposition(is_separator)
                    .map(|i| i + 1)
                    .filter(|i| *i >= width / 2)
            };
            let cut = after(|c| *c == '/')
                .or_else(|| after(|c| matches!(c, '-' | '.' | ',' | '_')))
                .unwrap_or(width);
            let rest = word.split_off(cut);
            lines.push(word.iter().collect());
            word = rest;
        }
    }
    if len > 0 || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Escapes text for XML content and attribute values; characters XML 1.0
/// cannot hold at all become U+FFFD.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if u32::from(c) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}');
            }
            c => out.push(c),
        }
    }
    out
}

fn or_none(cpus: &CpuSet) -> String {
    if cpus.is_empty() {
        "none".to_owned()
    } else {
        cpus.to_string()
    }
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::domain::tenant_from_domain;
    use crate::report::conflicts;
    use crate::tenant::host_tenant;
    use crate::topology::{self, Source};

    fn synthetic(desc: &str) -> HostTopology {
        topology::load(&Source::Synthetic(desc.into())).unwrap_or_else(|e| panic!("{desc}: {e}"))
    }

    fn fixture(name: &str) -> HostTopology {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/hwloc-xml")
            .join(name);
        topology::load(&Source::File(path)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// A domain pinning vCPU i to `pins[i]`; the name is escaped for XML.
    fn domain(name: &str, pins: &[&str], emulator: Option<&str>) -> String {
        let mut cputune = String::new();
        for (v, c) in pins.iter().enumerate() {
            cputune.push_str(&format!("<vcpupin vcpu='{v}' cpuset='{c}'/>"));
        }
        if let Some(e) = emulator {
            cputune.push_str(&format!("<emulatorpin cpuset='{e}'/>"));
        }
        format!(
            "<domain type='kvm'><name>{}</name><vcpu>{}</vcpu><cputune>{cputune}</cputune></domain>",
            esc(name),
            pins.len().max(1)
        )
    }

    /// The host tenant on `host_cpus`, then one VM per `(name, pins, emulator)`.
    fn report(
        host: &HostTopology,
        host_cpus: &str,
        vms: &[(&str, &[&str], Option<&str>)],
    ) -> Report {
        let mut tenants = vec![host_tenant(&host_cpus.parse().unwrap_or_default())];
        for (name, pins, emulator) in vms {
            let xml = domain(name, pins, *emulator);
            tenants.push(
                tenant_from_domain(&format!("{name}.xml"), &xml, host)
                    .unwrap_or_else(|e| panic!("{e}")),
            );
        }
        Report::new(host, tenants, None)
    }

    /// The `cpu-N` ids of the document, in document order.
    fn cpu_ids(svg: &str) -> Vec<u32> {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        doc.descendants()
            .filter_map(|n| n.attribute("id"))
            .filter_map(|id| id.strip_prefix("cpu-"))
            .map(|n| n.parse().unwrap_or_else(|e| panic!("{n}: {e}")))
            .collect()
    }

    fn class_of(svg: &str, cpu: u32) -> String {
        let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
        let id = format!("cpu-{cpu}");
        doc.descendants()
            .find(|n| n.attribute("id") == Some(id.as_str()))
            .and_then(|n| n.attribute("class"))
            .unwrap_or_else(|| panic!("no {id}"))
            .to_owned()
    }

    /// The 20-CPU host of the brief: siblings N and N+10.
    fn twenty() -> HostTopology {
        synthetic("package:1 core:10 pu:2(indexes=2*10:1*2)")
    }

    #[test]
    fn every_pu_is_drawn_exactly_once() {
        let hosts = [
            synthetic("package:2 numa:2 l3:1 core:4 pu:2"),
            synthetic("package:2 numa:2 l3:6 core:8 pu:2"),
            synthetic("package:1 core:3 pu:8"),
            synthetic("pu:2"),
            twenty(),
            fixture("16em64t-4s2c2t-offlines.xml"),
            fixture("28intel64-2p2g7c-CoD.nogroups.v1tov2.xml"),
            fixture("8em64t-2p2ca2co-nonodesets.v1.xml"),
            fixture("gen29-20em64t-hybrid-1p6c2t+2ca4co1t.xml"),
            fixture("x86-AMD-19h-Zen3-2xEpyc-7763.xml"),
        ];
        for host in &hosts {
            let svg = render(host, &report(host, "0", &[]));
            let mut drawn = cpu_ids(&svg);
            drawn.sort_unstable();
            let expected: Vec<u32> = host.pus.iter().map(|p| p.cpu.0).collect();
            assert_eq!(drawn, expected, "{}", host.source);
        }
    }

    #[test]
    fn every_fixture_host_draws_every_pu_once() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        let mut drawn_hosts = 0;
        for dir in ["hwloc-xml", "libvirt-caps"] {
            let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
                .unwrap_or_else(|e| panic!("{dir}: {e}"))
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            paths.sort();
            for path in paths {
                // Some fixtures are unreadable on purpose (format 3.0, no CPU).
                let Ok(host) = topology::load(&Source::File(path.clone())) else {
                    continue;
                };
                let svg = render(
                    &host,
                    &report(&host, "0", &[("vm1", &["1", "2"], Some("0"))]),
                );
                let mut drawn = cpu_ids(&svg);
                drawn.sort_unstable();
                let expected: Vec<u32> = host.pus.iter().map(|p| p.cpu.0).collect();
                assert_eq!(drawn, expected, "{}", path.display());
                drawn_hosts += 1;
            }
        }
        assert!(drawn_hosts > 50, "{drawn_hosts}");
    }

    #[test]
    fn conflicts_are_outlined_by_severity() {
        let host = twenty();
        let vm1: Vec<String> = (1..=7).chain(11..=17).map(|c| c.to_string()).collect();
        let vm1: Vec<&str> = vm1.iter().map(String::as_str).collect();
        // vm2 also on 17 (vm1's): cpu-shared; vm3 on 9's sibling 19: core-shared.
        let r = report(
            &host,
            "0,10",
            &[
                ("vm1", &vm1, Some("0")),
                ("vm2", &["8", "9", "18", "17"], Some("0")),
                ("vm3", &["19"], Some("0,10")),
            ],
        );
        let svg = render(&host, &r);
        let shared = class_of(&svg, 17);
        assert!(shared.contains("shared"), "{shared}");
        assert!(shared.contains("conflict-error"), "{shared}");
        assert!(class_of(&svg, 19).contains("conflict-error"));
        assert!(class_of(&svg, 1).contains("taken"));
        assert!(!class_of(&svg, 1).contains("conflict"));
        assert!(class_of(&svg, 5).contains("free") || class_of(&svg, 5).contains("taken"));
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}"));
        let cpu17 = doc
            .descendants()
            .find(|n| n.attribute("id") == Some("cpu-17"))
            .unwrap_or_else(|| panic!("no cpu-17"));
        assert!(cpu17
            .descendants()
            .any(|n| n.attribute("class") == Some("outline-error")));
        // Emulator threads of vm1 and vm2 on the host's CPU 0: a warning, and
        // hatched, not coloured.
        let zero = class_of(&svg, 0);
        assert!(zero.contains("emulator"), "{zero}");
        assert!(!zero.contains("conflict-error"), "{zero}");
    }

    #[test]
    fn warnings_alone_get_the_warning_outline() {
        let host = twenty();
        // vm1's emulator on its own vCPU CPU 2: emulator-overlap, a warning.
        let r = report(&host, "0,10", &[("vm1", &["2", "3"], Some("2"))]);
        assert!(!r.has_errors());
        let svg = render(&host, &r);
        assert!(class_of(&svg, 2).contains("conflict-warning"));
        assert!(svg.contains("class=\"outline-warning\""));
        assert!(!class_of(&svg, 3).contains("conflict"));
    }

    #[test]
    fn tenant_names_are_escaped() {
        let host = twenty();
        let name = "a<&\"b' </svg>";
        let r = report(&host, "0,10", &[(name, &["1"], Some("0"))]);
        assert_eq!(r.tenants[1].name, name);
        let svg = render(&host, &r);
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
        assert!(doc
            .descendants()
            .filter_map(|n| n.text())
            .any(|t| t.starts_with(&format!("{name}: 1 vCPU on 1"))));
        assert!(doc
            .descendants()
            .filter_map(|n| n.text())
            .any(|t| t.contains(&format!("{name} vCPU 0"))));
    }

    #[test]
    fn same_input_same_bytes() {
        let host = synthetic("package:2 numa:2 l3:6 core:8 pu:2");
        let vms: Vec<(String, Vec<String>)> = (0..12)
            .map(|i| {
                let cpus = (0..8).map(|v| (i * 16 + v * 2 + 1).to_string()).collect();
                (format!("vm{i}"), cpus)
            })
            .collect();
        let vms: Vec<(&str, Vec<&str>)> = vms
            .iter()
            .map(|(n, c)| (n.as_str(), c.iter().map(String::as_str).collect()))
            .collect();
        let vms: Vec<(&str, &[&str], Option<&str>)> =
            vms.iter().map(|(n, c)| (*n, &c[..], Some("0-1"))).collect();
        let r = report(&host, "0-1,192-193", &vms);
        let first = render(&host, &r);
        assert_eq!(first, render(&host, &r));
        assert_eq!(cpu_ids(&first).len(), 384);
        // Wrapped into rows: no wider than the limit.
        let doc = roxmltree::Document::parse(&first).unwrap_or_else(|e| panic!("{e}"));
        let width: i64 = doc
            .root_element()
            .attribute("width")
            .and_then(|w| w.parse().ok())
            .unwrap_or(i64::MAX);
        assert!(width <= CONTENT_MAX + 2 * MARGIN, "{width}");
    }

    #[test]
    fn unpinned_vms_and_emulators_do_not_paint_the_whole_host() {
        let host = twenty();
        let loose = tenant_from_domain(
            "loose.xml",
            "<domain><name>loose</name><vcpu>2</vcpu></domain>",
            &host,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // vcpupin without emulatorpin: the emulator may run anywhere.
        let mut r = report(&host, "0,10", &[("vm1", &["1", "2"], None)]);
        r.tenants.push(loose);
        r.conflicts = conflicts(&host, &r.tenants);
        let svg = render(&host, &r);
        assert!(class_of(&svg, 5).contains("free"), "{}", class_of(&svg, 5));
        assert!(!class_of(&svg, 5).contains("conflict"));
        assert!(svg.contains("not pinned (may run on any CPU)"));
        assert!(svg.contains("emulator not pinned"));
    }

    #[test]
    fn wraps_text() {
        for (text, width, expected) in [
            ("a bb ccc", 4, &["a bb", "ccc"][..]),
            ("abcdefgh", 3, &["abc", "def", "gh"]),
            ("x /a/bb/ccc/dddd", 8, &["x", "/a/bb/", "ccc/dddd"]),
            ("", 5, &[""]),
            ("one two", 20, &["one two"]),
        ] {
            assert_eq!(wrap(text, width), expected, "{text:?}");
        }
    }
}
