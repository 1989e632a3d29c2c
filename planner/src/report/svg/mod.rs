//! The report as a picture: [`render`] draws a host's packages, NUMA nodes, L3
//! domains, cores and CPUs as one standalone SVG 1.1 document, each CPU
//! coloured by the tenants pinned on it, conflicts outlined, with a legend;
//! with a plan, the host twice side by side, now and with the plan.
//!
//! It owns layout and drawing only. Finding tenants and conflicts, and the
//! tenants under a plan, is [`crate::report`]'s business; writing the file or
//! converting it to PNG is the caller's. Output is deterministic: integer
//! coordinates, colours given by tenant order, nothing iterated out of a hash
//! map.

// This file puts the document together; each step has its own file: `tree`
// (which box holds which core), `layout` (sizes and places the boxes), `cast`
// (every tenant of either side, with its colour), `paint` (who sits on each
// CPU, one side), `panels` (the two sides with their headings), `colour`,
// `draw` (boxes, cores and CPU cells), `outline` (conflicts), `title`,
// `legend`, and `text` (widths, wrapping, escaping).
mod cast;
mod colour;
mod draw;
mod layout;
mod legend;
mod outline;
mod paint;
mod palette;
mod panels;
mod text;
mod title;
mod tree;

#[cfg(test)]
mod tests;

use crate::plan::Plan;
use crate::report::{moves, planned_tenants, Report};
use crate::topology::HostTopology;
use cast::Cast;
use layout::arrange;
use paint::Paint;
use text::esc;
use tree::build_tree;

/// Widest the drawing of the topology may get (both sides together, with a
/// plan); it wraps cores into rows instead, so a 384-CPU host is tall rather
/// than wide.
const CONTENT_MAX: i64 = 1200;
/// Narrowest canvas, so the legend has room even for a 2-CPU host.
const MIN_CANVAS: i64 = 880;
const MARGIN: i64 = 16;

/// Draws `report` on `host` as a standalone SVG 1.1 document; with `plan`,
/// two sides side by side: `report`'s tenants now (exactly as without a
/// plan) and, on the right, the tenants under the plan ([`planned_tenants`]:
/// its reserved CPUs as the host, its VMs as planned, the others as they
/// are), each in a `<g class="panel" data-panel="now|plan">` under its
/// heading (`class="panel-heading"`: "now", "with the plan"), with one
/// legend.
/// Without a plan the one side is a `panel` too, `now`, with no heading.
///
/// Every PU of `host` is drawn exactly once on each side, as a `<g
/// id="cpu-N" data-cpu="N">` (`id="plan-cpu-N"` on the plan's side) with a
/// `<title>` tooltip naming its tenants' vCPUs and threads, whose `class`
/// says `free` (no one, not even unpinned), `taken` (one tenant) or
/// `shared` (several tenants, by vCPUs,
/// emulator or I/O threads alike: also the host's CPU that carries a VM's
/// emulator), plus `emulator` (hatched: some VM's emulator or I/O threads
/// only), `unusable` (offline or not allowed: greyed and crossed), and
/// `conflict-error` or `conflict-warning` (red or dashed orange outline).
/// The cell has a stripe (`class="fill"`) per tenant, naming it in
/// `data-tenant` with `data-role` `vcpus`, `host` or `threads` (emulator or
/// I/O threads only). The CPU number (`class="num"`) is white or black on a
/// single solid fill, whichever contrasts more, and on stripes, hatching or
/// a cross sits on a white chip (`num-chip`). Threads that are not pinned
/// paint no CPU: their running VM is a dashed band along the bottom of every
/// CPU where they may run (`<rect class="floating" data-role="floating">`,
/// the cell's class `floating`) unless something of it is pinned there; a
/// `floating` warning, which covers every CPU, is listed in the legend but
/// not outlined. Shut-off domains are not drawn, only listed. A tenant has
/// the same colour on both sides; VM
/// colours repeat after 13 VMs. The legend names every tenant with its CPUs
/// (now and with the plan), and every conflict (with what the plan does to
/// it, and those it adds).
pub fn render(host: &HostTopology, report: &Report, plan: Option<&Plan>) -> String {
    with_picture(host, report, plan, |p| p.document())
}

/// Works out the picture of `report` on `host` (with `plan`'s side, when
/// given) and hands it to `f`.
fn with_picture<R>(
    host: &HostTopology,
    report: &Report,
    plan: Option<&Plan>,
    f: impl FnOnce(&Picture<'_>) -> R,
) -> R {
    let planned = plan.map(|p| Planned {
        report: Report::new(host, planned_tenants(&report.tenants, p), None),
        moves: moves(&report.tenants, p).len(),
    });
    let mut sides = vec![report.tenants.as_slice()];
    sides.extend(planned.iter().map(|p| p.report.tenants.as_slice()));
    let cast = Cast::new(&sides);
    f(&Picture::new(host, report, planned.as_ref(), &cast))
}

/// The plan's side: the report of the tenants under it, and how many
/// threads it moves.
struct Planned {
    report: Report,
    moves: usize,
}

/// Everything drawn: the host, who is in the picture, and each side.
struct Picture<'a> {
    host: &'a HostTopology,
    cast: &'a Cast,
    /// The tenants now (the whole picture without a plan).
    now: Paint<'a>,
    /// With a plan: the tenants under it.
    plan: Option<PlanSide<'a>>,
}

/// The plan's side of the picture.
struct PlanSide<'a> {
    paint: Paint<'a>,
    /// Threads the plan moves.
    moves: usize,
}

impl<'a> Picture<'a> {
    fn new(
        host: &'a HostTopology,
        report: &'a Report,
        planned: Option<&'a Planned>,
        cast: &'a Cast,
    ) -> Picture<'a> {
        Picture {
            host,
            cast,
            now: Paint::new(host, report, cast, ""),
            plan: planned.map(|p| PlanSide {
                paint: Paint::new(host, &p.report, cast, "plan-"),
                moves: p.moves,
            }),
        }
    }

    /// The whole SVG document.
    fn document(&self) -> String {
        let host = self.host;
        let top = build_tree(host);
        let sides = if self.plan.is_some() { 2 } else { 1 };
        let topology = arrange(
            &top,
            (CONTENT_MAX - (sides - 1) * panels::PANEL_GAP) / sides,
            self.now.cell_w,
        );
        let panel_w = if self.plan.is_some() {
            topology
                .w
                .max((MIN_CANVAS - 2 * MARGIN - panels::PANEL_GAP) / 2)
        } else {
            topology.w
        };
        let width =
            (sides * panel_w + (sides - 1) * panels::PANEL_GAP + 2 * MARGIN).max(MIN_CANVAS);

        let mut body = String::new();
        let mut y = MARGIN;
        y = self.title(&mut body, width, y);
        y += 8;
        y = match &self.plan {
            None => {
                // One side, with no heading: the same `panel` as with a plan,
                // so that scripts find the tenants now in one place.
                body.push_str("<g class=\"panel\" data-panel=\"now\">\n");
                for op in &topology.ops {
                    let mut op = op.clone();
                    op.shift(MARGIN, y);
                    self.now.op(&mut body, &op);
                }
                body.push_str("</g>\n");
                y + topology.h
            }
            Some(plan) => self.panels(&mut body, plan, &topology, panel_w, y),
        };
        y += 20;
        y = self.legend(&mut body, width, y);
        let height = y + MARGIN;

        let title = match self.plan {
            None => format!("pinplan report: {}", host.source),
            Some(_) => format!("pinplan report: {}, now and with the plan", host.source),
        };
        let mut out = String::new();
        out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        out.push_str(&format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{width}\" \
             height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"monospace\">\n"
        ));
        out.push_str(&format!("<title>{}</title>\n", esc(&title)));
        let mut paints = vec![&self.now];
        paints.extend(self.plan.as_ref().map(|p| &p.paint));
        colour::defs(&mut out, self.cast, &paints);
        out.push_str(&format!(
            "<rect width=\"{width}\" height=\"{height}\" fill=\"#ffffff\"/>\n"
        ));
        out.push_str(&body);
        out.push_str("</svg>\n");
        out
    }
}
