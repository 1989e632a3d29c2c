//! Drawing the host: package, NUMA node and L3 boxes, cores, and each CPU's
//! cell with its fill, number, tooltip and several-tenants mark.

use super::colour::{ink_on, CHIP_FILL, UNUSABLE_FILL, UNUSABLE_INK};
use super::layout::{Op, BOX_PAD, CELL_FONT, CELL_H, CELL_TEXT_Y};
use super::outline::outline;
use super::paint::{Occupant, Paint};
use super::text::px;
use super::text::{esc, severity_word, text, text_w};
use crate::report::Severity;
use crate::tenant::TenantKind;
use crate::topology::Pu;

/// The chip under a CPU number that is not on a single solid fill: its top
/// and height in the cell, and its margin around the number.
const CHIP_Y: i64 = 4;
const CHIP_H: i64 = 12;
const CHIP_PAD: i64 = 2;
/// The height of the band of VMs that may run on a CPU without being
/// pinned there: under the number's chip.
const BAND_H: i64 = 4;

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

    /// A CPU's `<g id="cpu-N">`: its classes, tooltip, cell (a stripe per
    /// tenant, naming it in `data-tenant`), number, conflict outline and
    /// several-tenants mark.
    fn pu(&self, out: &mut String, x: i64, y: i64, pu: &Pu) {
        let cpu = pu.cpu;
        let occupants = self.occupants.get(&cpu).map_or(&[][..], Vec::as_slice);
        let worst = self.worst.get(&cpu).copied();
        // Several tenants: by vCPUs, emulator or I/O threads alike (the
        // host's CPU carrying a VM's emulator is shared too).
        let several = occupants.len() > 1;
        let floating = self.floating_here(cpu);
        let mut class = String::from("pu");
        class.push_str(match (occupants.len(), several) {
            (0, _) if floating.is_empty() => " free",
            (0, _) => "",
            (_, false) => " taken",
            (_, true) => " shared",
        });
        if !floating.is_empty() {
            class.push_str(" floating");
        }
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
        out.push_str(&format!(
            "<g id=\"{}cpu-{cpu}\" class=\"{class}\" data-cpu=\"{cpu}\">\n",
            self.id_prefix
        ));
        out.push_str(&format!("<title>{}</title>\n", esc(&self.tooltip(pu))));

        let w = self.cell_w;
        let stripes: Vec<Stripe> = if occupants.is_empty() {
            vec![Stripe::plain(if pu.usable {
                "#ffffff"
            } else {
                UNUSABLE_FILL
            })]
        } else {
            occupants
                .iter()
                .filter_map(|o| {
                    let t = self.report.tenants.get(o.tenant)?;
                    let role = match (o.emulator_only, t.kind) {
                        (true, _) => "threads",
                        (false, TenantKind::Host) => "host",
                        (false, TenantKind::Vm) => "vcpus",
                    };
                    Some(Stripe {
                        fill: self.fill(*o),
                        attrs: format!(" data-tenant=\"{}\" data-role=\"{role}\"", esc(&t.name)),
                    })
                })
                .collect()
        };
        cell(out, x, y, w, &stripes, !pu.usable);
        let band: Vec<Stripe> = floating
            .iter()
            .filter_map(|(i, _)| {
                let t = self.report.tenants.get(*i)?;
                Some(Stripe {
                    fill: self.float_fill(*i),
                    attrs: format!(" data-tenant=\"{}\" data-role=\"floating\"", esc(&t.name)),
                })
            })
            .collect();
        self.number(out, x, y, pu, occupants);
        outline(out, x, y, w, worst);
        // Over the outline's bottom edge: a conflict's outline would hide it.
        floating_band(out, x, y, w, &band);
        if several {
            shared_mark(out, x, y, w);
        }
        out.push_str("</g>\n");
    }

    /// The CPU number: straight on a single solid fill, in whichever of
    /// white and black contrasts more with it; on stripes, hatching or a
    /// cross, on a white chip of its own, which leaves the pattern visible
    /// around it.
    fn number(&self, out: &mut String, x: i64, y: i64, pu: &Pu, occupants: &[Occupant]) {
        let label = pu.cpu.to_string();
        let centre = x + self.cell_w / 2;
        let solid = match occupants {
            [] if pu.usable => Some("#ffffff"),
            [one] if pu.usable && !one.emulator_only => Some(self.colour(one.tenant)),
            _ => None,
        };
        let ink = match solid {
            Some(fill) => ink_on(fill),
            None => {
                let chip_w = text_w(&label, CELL_FONT) + 2 * CHIP_PAD;
                out.push_str(&format!(
                    "<rect class=\"num-chip\" x=\"{}\" y=\"{}\" width=\"{chip_w}\" \
                     height=\"{CHIP_H}\" rx=\"3\" fill=\"{CHIP_FILL}\"/>\n",
                    centre - chip_w / 2,
                    y + CHIP_Y
                ));
                if pu.usable {
                    ink_on(CHIP_FILL)
                } else {
                    UNUSABLE_INK
                }
            }
        };
        text(
            out,
            centre,
            y + CELL_TEXT_Y,
            CELL_FONT,
            &format!("class=\"num\" fill=\"{ink}\" text-anchor=\"middle\""),
            &label,
        );
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
        let floating = self.floating_here(pu.cpu);
        if occupants.is_empty() && floating.is_empty() {
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
        for (i, (tenant, threads)) in floating.iter().enumerate() {
            text.push_str(if i == 0 && occupants.is_empty() {
                ": "
            } else {
                "; "
            });
            let name = self
                .report
                .tenants
                .get(*tenant)
                .map_or("", |t| t.name.as_str());
            text.push_str(&format!("{name} may run here ({threads} not pinned)"));
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

/// One stripe of a CPU cell: its fill and any further attributes.
pub(super) struct Stripe {
    pub(super) fill: String,
    /// Attributes to add, each with a leading space, values escaped.
    pub(super) attrs: String,
}

impl Stripe {
    /// A stripe of `fill` that names no tenant.
    pub(super) fn plain(fill: &str) -> Stripe {
        Stripe {
            fill: fill.to_owned(),
            attrs: String::new(),
        }
    }
}

/// A CPU cell's fill (one stripe per tenant), cross, and border.
pub(super) fn cell(out: &mut String, x: i64, y: i64, w: i64, stripes: &[Stripe], cross: bool) {
    let k = px(stripes.len().max(1));
    for (i, stripe) in stripes.iter().enumerate() {
        let x0 = x + w * px(i) / k;
        let x1 = x + w * (px(i) + 1) / k;
        out.push_str(&format!(
            "<rect class=\"fill\" x=\"{x0}\" y=\"{y}\" width=\"{}\" height=\"{CELL_H}\" \
             fill=\"{}\"{}/>\n",
            x1 - x0,
            stripe.fill,
            stripe.attrs
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

/// The band along the bottom of a CPU cell that says who may run there
/// without being pinned: a dashed segment per VM (`class="floating"`).
pub(super) fn floating_band(out: &mut String, x: i64, y: i64, w: i64, segments: &[Stripe]) {
    let k = px(segments.len().max(1));
    for (i, segment) in segments.iter().enumerate() {
        let x0 = x + w * px(i) / k;
        let x1 = x + w * (px(i) + 1) / k;
        out.push_str(&format!(
            "<rect class=\"floating\" x=\"{x0}\" y=\"{}\" width=\"{}\" height=\"{BAND_H}\" \
             fill=\"{}\"{}/>\n",
            y + CELL_H - BAND_H,
            x1 - x0,
            segment.fill,
            segment.attrs
        ));
    }
}

/// The corner mark of a CPU several tenants use (by vCPUs, emulator or I/O
/// threads), drawn last so that no outline covers it.
pub(super) fn shared_mark(out: &mut String, x: i64, y: i64, w: i64) {
    out.push_str(&format!(
        "<path class=\"shared-mark\" d=\"M{} {y}H{}V{}Z\" fill=\"#111111\"/>\n",
        x + w - 10,
        x + w,
        y + 10
    ));
}
