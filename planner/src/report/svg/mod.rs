//! The report as a picture: [`render`] draws a host's packages, NUMA nodes, L3
//! domains, cores and CPUs as one standalone SVG 1.1 document, each CPU
//! coloured by the tenants pinned on it, conflicts outlined, with a legend.
//!
//! It owns layout and drawing only. Finding tenants and conflicts is
//! [`crate::report`]'s business; writing the file or converting it to PNG is
//! the caller's. Output is deterministic: integer coordinates, colours given
//! by tenant order, nothing iterated out of a hash map.

// This file puts the document together; each step has its own file: `tree`
// (which box holds which core), `layout` (sizes and places the boxes), `paint`
// (who sits on each CPU), `colour`, `draw` (boxes, cores and CPU cells),
// `outline` (conflicts), `title`, `legend`, and `text` (widths, wrapping,
// escaping).
mod colour;
mod draw;
mod layout;
mod legend;
mod outline;
mod paint;
mod text;
mod title;
mod tree;

#[cfg(test)]
mod tests;

use crate::report::Report;
use crate::topology::HostTopology;
use layout::arrange;
use paint::Paint;
use text::esc;
use tree::build_tree;

/// Widest the drawing of the topology may get; it wraps cores into rows
/// instead, so a 384-CPU host is tall rather than wide.
const CONTENT_MAX: i64 = 1200;
/// Narrowest canvas, so the legend has room even for a 2-CPU host.
const MIN_CANVAS: i64 = 880;
const MARGIN: i64 = 16;

/// Draws `report` on `host` as a standalone SVG 1.1 document.
///
/// Every PU of `host` is drawn exactly once, as a `<g id="cpu-N"
/// data-cpu="N">` (with a `<title>` tooltip naming its tenants' vCPUs and
/// threads) whose `class` says `free`, `taken` (one tenant) or `shared`
/// (several tenants, by vCPUs, emulator or I/O threads alike: also the
/// host's CPU that carries a VM's emulator), plus `emulator` (hatched: some
/// VM's emulator or I/O threads only), `unusable` (offline or not allowed:
/// greyed and crossed), and `conflict-error` or `conflict-warning` (red or
/// dashed orange outline). The cell has a stripe (`class="fill"`) per
/// tenant, naming it in `data-tenant` with `data-role` `vcpus`, `host` or
/// `threads` (emulator or I/O threads only). The CPU number (`class="num"`)
/// is white or black on a single solid fill, whichever contrasts more, and
/// on stripes, hatching or a cross sits on a white chip (`num-chip`).
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
