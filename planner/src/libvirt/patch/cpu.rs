//! `<cpu>`: the plan's `<topology>`, cache mode, `topoext` and guest NUMA cells (`<numa>`) inside
//! it; the model, the other features and everything else in it stay.

use super::doc::{Doc, Splice};
use super::PatchError;
use crate::libvirt::emit;
use crate::plan::VmPlan;

/// KiB in a libvirt scaled amount (`unit` defaults to KiB); 0 when it is
/// not a number.
pub(super) fn kib(amount: &str, unit: Option<&str>) -> u64 {
    let amount: u64 = amount.trim().parse().unwrap_or(0);
    let bytes = crate::topology::unit_bytes(unit.unwrap_or("KiB")).unwrap_or(1024);
    amount.saturating_mul(bytes) / 1024
}

/// Guest memory to share among NUMA cells: what the old cells held, else
/// `<memory>`.
fn memory_kib(doc: &Doc, root: usize, old_cells: &[usize]) -> u64 {
    // The old cells hold the guest's boot memory; <memory> also counts
    // memory devices (DIMMs), which keep their own.
    let cells: u64 = old_cells
        .iter()
        .map(|&c| {
            let memory = doc.attr(c, "memory");
            kib(
                memory.as_deref().unwrap_or("0"),
                doc.attr(c, "unit").as_deref(),
            )
        })
        .sum();
    match doc.child(root, "memory") {
        Some(m) if cells == 0 => kib(doc.inner_text(m), doc.attr(m, "unit").as_deref()),
        _ => cells,
    }
}

/// The edits that give `<cpu>` the plan's topology, cache mode, features
/// and cells, or a new `<cpu>` where libvirt puts it. A feature or cache
/// mode needs a CPU mode: a `<cpu>` with neither mode nor model gets
/// `mode='host-passthrough'`; `cache_passthrough` on another mode is refused.
pub(super) fn rewrite(
    doc: &Doc,
    root: usize,
    anchor: usize,
    vm: &VmPlan,
) -> Result<Vec<Splice>, PatchError> {
    let topology = emit::topology(vm);
    let extras = emit::cpu_extras(vm);
    let needs_mode = vm.guest_topology.needs_cpu_mode();
    let cpu = doc.child(root, "cpu");
    let old_cells = doc.guest_cells(root);
    let cells = emit::guest_numa(vm, memory_kib(doc, root, &old_cells));
    let Some(cpu) = cpu else {
        let open = if needs_mode {
            format!("<cpu mode='{}'>", emit::CPU_MODE)
        } else {
            "<cpu>".to_owned()
        };
        let children: Vec<String> = std::iter::once(topology)
            .chain(extras)
            .chain(cells.into_iter().flatten())
            .collect();
        return Ok(vec![new_cpu(doc, root, anchor, &open, &children)]);
    };
    let mode = doc.attr(cpu, "mode");
    let has_model = doc.child(cpu, "model").is_some();
    if vm.guest_topology.cache_passthrough
        && (has_model
            || mode
                .as_deref()
                .is_some_and(|m| m != "host-passthrough" && m != "maximum"))
    {
        let what = mode.map_or_else(|| "a <model>".to_owned(), |m| format!("mode='{m}'"));
        return Err(doc.error(
            doc.nodes[cpu].start,
            "cpu",
            format!("cache_passthrough needs <cpu mode='host-passthrough'> (or 'maximum'), and this domain's <cpu> has {what}: libvirt refuses cache passthrough there; change the CPU mode, or drop cache_passthrough for {}", vm.name),
        ));
    }
    let add_mode = needs_mode && mode.is_none() && !has_model;
    if doc.nodes[cpu].empty {
        let indent = doc.indent_of(cpu);
        let tag = if add_mode {
            doc.start_tag_with(cpu, &[("mode", emit::CPU_MODE.to_owned())])
        } else {
            doc.text[doc.nodes[cpu].start..doc.nodes[cpu].start_tag_end].to_owned()
        };
        let open = format!("{}>", tag.trim_end_matches("/>").trim_end());
        let children: Vec<String> = std::iter::once(topology)
            .chain(extras)
            .chain(cells.into_iter().flatten())
            .collect();
        return Ok(vec![
            doc.replace(cpu, doc.block(&open, &children, "</cpu>", &indent))
        ]);
    }
    let mut splices = Vec::new();
    if add_mode {
        let n = &doc.nodes[cpu];
        splices.push(Splice {
            start: n.start,
            end: n.start_tag_end,
            text: doc.start_tag_with(cpu, &[("mode", emit::CPU_MODE.to_owned())]),
        });
    }
    // The planned cache mode and topoext replace those the domain has; the
    // others follow <topology>.
    let mut after_topology = Vec::new();
    for line in extras {
        let old = if line == emit::CACHE_PASSTHROUGH {
            doc.child(cpu, "cache")
        } else {
            doc.children_named(cpu, "feature")
                .find(|&f| doc.attr(f, "name").as_deref() == Some("topoext"))
        };
        match old {
            Some(old) => splices.push(doc.replace(old, line)),
            None => after_topology.push(line),
        }
    }
    splices.push(topology_in(doc, cpu, topology, &after_topology));
    if let Some(lines) = cells {
        splices.extend(cells_in(doc, cpu, &old_cells, vm, &lines)?);
    }
    Ok(splices)
}

/// Only the plan's guest NUMA cells, which `<numatune><memnode>` names (what
/// `apply` writes with the memory placement): in the domain's `<cpu>`, or in
/// a new `<cpu>` holding just them; nothing when the plan has none.
pub(super) fn cells_only(
    doc: &Doc,
    root: usize,
    anchor: usize,
    vm: &VmPlan,
) -> Result<Vec<Splice>, PatchError> {
    let cpu = doc.child(root, "cpu");
    let old_cells = doc.guest_cells(root);
    let Some(lines) = emit::guest_numa(vm, memory_kib(doc, root, &old_cells)) else {
        return Ok(Vec::new());
    };
    match cpu {
        None => Ok(vec![new_cpu(doc, root, anchor, "<cpu>", &lines)]),
        Some(cpu) if doc.nodes[cpu].empty => {
            let open = format!("{}>", doc.reopened(cpu));
            let indent = doc.indent_of(cpu);
            Ok(vec![
                doc.replace(cpu, doc.block(&open, &lines, "</cpu>", &indent))
            ])
        }
        Some(cpu) => cells_in(doc, cpu, &old_cells, vm, &lines),
    }
}

/// A `<cpu>` opened by `open` with `children`, before the first element libvirt
/// puts after `<cpu>`, else after the domain's last child.
fn new_cpu(doc: &Doc, root: usize, anchor: usize, open: &str, children: &[String]) -> Splice {
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
            let block = doc.block(open, children, "</cpu>", &doc.indent_of(next));
            doc.insert_before(next, &block)
        }
        None => {
            let last = doc.nodes[root].children.last().copied().unwrap_or(anchor);
            let block = doc.block(open, children, "</cpu>", &doc.indent_of(last));
            doc.insert_after(last, &block)
        }
    }
}

/// `topology` (then `more`, each on its own line) in place of the old
/// `<topology>`, else after `<vendor>` or `<model>`, else first in `<cpu>`.
fn topology_in(doc: &Doc, cpu: usize, topology: String, more: &[String]) -> Splice {
    let old = doc.child(cpu, "topology");
    let indent = match old {
        Some(old) => doc.indent_of(old),
        None => format!("{}{}", doc.indent_of(cpu), doc.unit),
    };
    let mut text = topology;
    for line in more {
        text.push('\n');
        text.push_str(&indent);
        text.push_str(line);
    }
    if let Some(old) = old {
        return doc.replace(old, text);
    }
    match ["vendor", "model"].iter().find_map(|c| doc.child(cpu, c)) {
        Some(after) => doc.insert_after(after, &text),
        None => Splice::insert(doc.nodes[cpu].start_tag_end, format!("\n{indent}{text}")),
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
) -> Result<Vec<Splice>, PatchError> {
    let indent = doc.indent_of(cpu);
    let child_indent = format!("{indent}{}", doc.unit);
    let numa = lines.join(&format!("\n{child_indent}"));
    Ok(match doc.child(cpu, "numa") {
        Some(_) if old_cells.len() == vm.guest_cells.len() => old_cells
            .iter()
            .zip(&vm.guest_cells)
            .enumerate()
            .flat_map(|(i, (&cell, planned))| {
                let set = [
                    ("id", planned.id.to_string()),
                    ("cpus", planned.vcpus.to_string()),
                ];
                kept_cell(doc, cell, &set, &emit::distances_of_cell(vm, i))
            })
            .collect(),
        Some(old) => {
            let carried = carried(doc, old, old_cells, vm)?;
            let lines: Vec<String> = lines.iter().map(|l| with_attrs(l, &carried)).collect();
            vec![doc.replace(old, lines.join(&format!("\n{child_indent}")))]
        }
        None => vec![doc.insert_lines(
            doc.nodes[cpu].end_tag_start,
            format!("{child_indent}{numa}\n"),
            &indent,
        )],
    })
}

/// The cell attributes that carry over when the plan's cells replace the
/// domain's (another count of cells): `memAccess` and `discard` when every
/// old cell has the same (vhost-user needs `memAccess='shared'` on all).
/// Settings of one cell only, per-cell caches and `<interconnects>` have no
/// planned cell to go to: refused with the reason.
fn carried(doc: &Doc, numa: usize, old_cells: &[usize], vm: &VmPlan) -> Result<String, PatchError> {
    let refuse = |node: usize, what: String, fix: &str| {
        Err(doc.error(
            doc.nodes[node].start,
            &doc.nodes[node].name,
            format!(
                "{what}, and the plan gives {} {} guest NUMA cells where the domain has {}: {fix}, or plan so that the VM keeps {} cells",
                vm.name,
                vm.guest_cells.len(),
                old_cells.len(),
                old_cells.len()
            ),
        ))
    };
    if let Some(ic) = doc.child(numa, "interconnects") {
        return refuse(
            ic,
            "the domain's <numa> has <interconnects> between its cells".to_owned(),
            "remove them",
        );
    }
    if let Some(cache) = old_cells.iter().find_map(|&c| doc.child(c, "cache")) {
        return refuse(
            cache,
            "a guest NUMA cell has its own <cache>".to_owned(),
            "remove the cells' <cache>",
        );
    }
    let mut out = String::new();
    for name in ["memAccess", "discard"] {
        let values: std::collections::BTreeSet<Option<String>> =
            old_cells.iter().map(|&c| doc.attr(c, name)).collect();
        match values.len() {
            1 => {
                if let Some(Some(v)) = values.into_iter().next() {
                    out.push_str(&format!(" {name}='{}'", emit::attr(&v)));
                }
            }
            _ => {
                let cell = old_cells
                    .iter()
                    .copied()
                    .find(|&c| doc.attr(c, name).is_some())
                    .unwrap_or(numa);
                return refuse(
                    cell,
                    format!("the domain's guest NUMA cells differ in {name}"),
                    &format!("give every cell the same {name}"),
                );
            }
        }
    }
    Ok(out)
}

/// A planned `<cell …>` line with `attrs` added at the end of its start tag.
fn with_attrs(line: &str, attrs: &str) -> String {
    if attrs.is_empty() || !line.trim_start().starts_with("<cell ") {
        return line.to_owned();
    }
    match line.strip_suffix("/>") {
        Some(open) => format!("{open}{attrs}/>"),
        None => match line.strip_suffix('>') {
            Some(open) => format!("{open}{attrs}>"),
            None => line.to_owned(),
        },
    }
}

/// A kept guest cell with `set` in its start tag and, when the plan has
/// them, `distances` (lines of `<distances>`) in place of its own.
fn kept_cell(doc: &Doc, cell: usize, set: &[(&str, String)], distances: &[String]) -> Vec<Splice> {
    let n = &doc.nodes[cell];
    let tag = doc.start_tag_with(cell, set);
    if distances.is_empty() {
        return vec![Splice {
            start: n.start,
            end: n.start_tag_end,
            text: tag,
        }];
    }
    let indent = doc.indent_of(cell);
    let inner = format!("{indent}{}", doc.unit);
    let block = distances.join(&format!("\n{inner}"));
    if n.empty {
        let open = format!("{}>", tag.trim_end_matches("/>").trim_end());
        let text = format!("{open}\n{inner}{block}\n{indent}</cell>");
        return vec![doc.replace(cell, text)];
    }
    let mut splices = vec![Splice {
        start: n.start,
        end: n.start_tag_end,
        text: tag,
    }];
    match doc.child(cell, "distances") {
        Some(old) => splices.push(doc.replace(old, block)),
        None => {
            splices.push(doc.insert_lines(n.end_tag_start, format!("{inner}{block}\n"), &indent))
        }
    }
    splices
}
