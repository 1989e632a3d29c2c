//! `<cpu>`: the plan's `<topology>` and guest NUMA cells (`<numa>`) inside
//! it; the model, features and everything else in it stay.

use super::doc::{Doc, Splice};
use crate::libvirt::emit;
use crate::plan::VmPlan;

/// KiB in a libvirt scaled amount (`unit` defaults to KiB); 0 when it is
/// not a number.
pub(super) fn kib(amount: &str, unit: Option<&str>) -> u64 {
    let amount: u64 = amount.trim().parse().unwrap_or(0);
    let bytes = crate::topology::unit_bytes(unit.unwrap_or("KiB")).unwrap_or(1024);
    amount.saturating_mul(bytes) / 1024
}

/// Guest memory to share among NUMA cells: `<memory>`, else what the old
/// cells held.
fn memory_kib(doc: &Doc, root: usize, old_cells: &[usize]) -> u64 {
    match doc.child(root, "memory") {
        Some(m) => kib(doc.inner_text(m), doc.attr(m, "unit").as_deref()),
        None => old_cells
            .iter()
            .map(|&c| {
                let memory = doc.attr(c, "memory");
                kib(
                    memory.as_deref().unwrap_or("0"),
                    doc.attr(c, "unit").as_deref(),
                )
            })
            .sum(),
    }
}

/// The edits that give `<cpu>` the plan's topology and cells, or a new
/// `<cpu>` where libvirt puts it.
pub(super) fn rewrite(doc: &Doc, root: usize, anchor: usize, vm: &VmPlan) -> Vec<Splice> {
    let topology = emit::topology(vm);
    let cpu = doc.child(root, "cpu");
    let old_cells: Vec<usize> = cpu
        .and_then(|cpu| doc.child(cpu, "numa"))
        .map(|numa| doc.children_named(numa, "cell").collect())
        .unwrap_or_default();
    let cells = emit::guest_numa(vm, memory_kib(doc, root, &old_cells));
    let Some(cpu) = cpu else {
        return vec![new_cpu(doc, root, anchor, topology, cells)];
    };
    if doc.nodes[cpu].empty {
        let indent = doc.indent_of(cpu);
        let open = format!("{}>", doc.reopened(cpu));
        let children: Vec<String> = std::iter::once(topology)
            .chain(cells.into_iter().flatten())
            .collect();
        return vec![doc.replace(cpu, doc.block(&open, &children, "</cpu>", &indent))];
    }
    let mut splices = vec![topology_in(doc, cpu, topology)];
    if let Some(lines) = cells {
        splices.extend(cells_in(doc, cpu, &old_cells, vm, &lines));
    }
    splices
}

/// A `<cpu>` with `topology` and `cells`, before the first element libvirt
/// puts after `<cpu>`, else after the domain's last child.
fn new_cpu(
    doc: &Doc,
    root: usize,
    anchor: usize,
    topology: String,
    cells: Option<Vec<String>>,
) -> Splice {
    let children: Vec<String> = std::iter::once(topology)
        .chain(cells.into_iter().flatten())
        .collect();
    // libvirt's order: … <os>, <features>, <cpu>, <clock>, <on_*>, …, <devices>.
    let before = [
        "clock",
        "on_poweroff",
        "on_reboot",
        "on_crash",
        "pm",
        "devices",
    ]
    .iter()
    .filter_map(|n| doc.child(root, n))
    .min_by_key(|&i| doc.nodes[i].start);
    match before {
        Some(next) => {
            let block = doc.block("<cpu>", &children, "</cpu>", &doc.indent_of(next));
            doc.insert_before(next, &block)
        }
        None => {
            let last = doc.nodes[root].children.last().copied().unwrap_or(anchor);
            let block = doc.block("<cpu>", &children, "</cpu>", &doc.indent_of(last));
            doc.insert_after(last, &block)
        }
    }
}

/// `topology` in place of the old `<topology>`, else after `<vendor>` or
/// `<model>`, else first in `<cpu>`.
fn topology_in(doc: &Doc, cpu: usize, topology: String) -> Splice {
    if let Some(old) = doc.child(cpu, "topology") {
        return doc.replace(old, topology);
    }
    match ["vendor", "model"].iter().find_map(|c| doc.child(cpu, c)) {
        Some(after) => doc.insert_after(after, &topology),
        None => {
            let indent = format!("{}{}", doc.indent_of(cpu), doc.unit);
            Splice::insert(
                doc.nodes[cpu].start_tag_end,
                format!("\n{indent}{topology}"),
            )
        }
    }
}

/// The planned guest NUMA cells (`lines`) in `<cpu>`. As many old cells as
/// planned are kept (memory, memAccess, distances…) with only their id and
/// vCPUs rewritten; otherwise `<numa>` is replaced or added at the end.
fn cells_in(
    doc: &Doc,
    cpu: usize,
    old_cells: &[usize],
    vm: &VmPlan,
    lines: &[String],
) -> Vec<Splice> {
    let indent = doc.indent_of(cpu);
    let child_indent = format!("{indent}{}", doc.unit);
    let numa = lines.join(&format!("\n{child_indent}"));
    match doc.child(cpu, "numa") {
        Some(_) if old_cells.len() == vm.guest_cells.len() => old_cells
            .iter()
            .zip(&vm.guest_cells)
            .map(|(&cell, planned)| {
                let set = [
                    ("id", planned.id.to_string()),
                    ("cpus", planned.vcpus.clone()),
                ];
                let n = &doc.nodes[cell];
                Splice {
                    start: n.start,
                    end: n.start_tag_end,
                    text: doc.start_tag_with(cell, &set),
                }
            })
            .collect(),
        Some(old) => vec![doc.replace(old, numa)],
        None => vec![doc.insert_lines(
            doc.nodes[cpu].end_tag_start,
            format!("{child_indent}{numa}\n"),
            &indent,
        )],
    }
}
