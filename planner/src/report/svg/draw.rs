//! Drawing the host: package, NUMA node and L3 boxes, cores, and each CPU's
//! cell with its fill, number, tooltip and shared mark.

use super::colour::{ink_on, UNUSABLE_FILL};
use super::layout::{px, Op, BOX_PAD, CELL_FONT, CELL_H, CELL_TEXT_Y};
use super::outline::outline;
use super::paint::Paint;
use super::text::{esc, severity_word, text};
use crate::report::Severity;
use crate::topology::Pu;

impl Paint<'_> {
    /// Draws one placed operation: a box, a core, or a CPU cell.
    pub(super) fn op(&self, out: &mut String, op: &Op) {
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

    /// A CPU's `<g id="cpu-N">`: its classes, tooltip, cell, number,
    /// conflict outline and shared mark.
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
        let halo = "fill=\"#ffffff\" stroke=\"#ffffff\" stroke-width=\"2.5\" \
                    stroke-linejoin=\"round\" text-anchor=\"middle\"";
        let ink = format!("fill=\"{ink}\" text-anchor=\"middle\"");
        for attrs in [(!plain).then_some(halo), Some(&ink)].into_iter().flatten() {
            text(out, x + w / 2, y + CELL_TEXT_Y, CELL_FONT, attrs, &label);
        }
        outline(out, x, y, w, worst);
        if claims > 1 {
            shared_mark(out, x, y, w);
        }
        out.push_str("</g>\n");
    }

    /// The CPU's `<title>`: where it is, who may run there, its conflicts.
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
}

/// A CPU cell's fill (one stripe per fill), cross, and border.
pub(super) fn cell(out: &mut String, x: i64, y: i64, w: i64, fills: &[String], cross: bool) {
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
pub(super) fn shared_mark(out: &mut String, x: i64, y: i64, w: i64) {
    out.push_str(&format!(
        "<path class=\"shared-mark\" d=\"M{} {y}H{}V{}Z\" fill=\"#111111\"/>\n",
        x + w - 10,
        x + w,
        y + 10
    ));
}
