//! `<memoryBacking>`: only its `<hugepages>` is ours, and `<locked/>` is
//! added for a real-time VM. The other children (`<source type='memfd'/>`,
//! `<access mode='shared'/>` that vhost-user needs, `<nosharepages/>`…)
//! stay as they are. And `<memory>`
//! (with `<currentMemory>` when above it) when the plan's memory differs.

use super::doc::{Doc, Splice};
use crate::libvirt::emit;
use crate::memory::pages::{self, PageRule};
use crate::plan::VmPlan;

/// The plan's `<hugepages>` in `<memoryBacking>` (replaced, or added; a new
/// `<memoryBacking>` after `<currentMemory>` or `<memory>`), or the old
/// `<hugepages>` removed for normal pages; nothing when the plan has no
/// memory for the VM.
///
/// A change of page sizes is said in `notes`; `<hugepages>` that already
/// gives each cell the planned size stays as it is.
pub(super) fn rewrite(
    doc: &Doc,
    root: usize,
    anchor: usize,
    vm: &VmPlan,
    notes: &mut Vec<String>,
) -> Vec<Splice> {
    let mut splices = size(doc, root, vm);
    splices.extend(backing(doc, root, anchor, vm, notes));
    splices
}

/// The `<page>`s of a `<hugepages>`, as libvirt reads them.
fn rules(doc: &Doc, hugepages: usize) -> Vec<PageRule> {
    doc.children_named(hugepages, "page")
        .map(|p| PageRule {
            kib: super::cpu::kib(
                &doc.attr(p, "size").unwrap_or_default(),
                doc.attr(p, "unit").as_deref(),
            ),
            cells: doc.attr(p, "nodeset").and_then(|s| s.parse().ok()),
        })
        .collect()
}

/// The guest cell ids of the patched domain: the plan's, else the domain's
/// own (kept when the plan has none).
fn domain_cells(doc: &Doc, root: usize, vm: &VmPlan) -> Vec<u32> {
    if !vm.guest_cells.is_empty() {
        return vm.guest_cells.iter().map(|c| c.id).collect();
    }
    doc.guest_cells(root)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            doc.attr(c, "id")
                .and_then(|id| id.trim().parse().ok())
                .unwrap_or_else(|| u32::try_from(i).unwrap_or(u32::MAX))
        })
        .collect()
}

/// Whether every `<page nodeset>` of `hugepages` names only cells the
/// patched domain has (the plan's, else the domain's own that stay): a page
/// for a cell that goes makes libvirt refuse the domain (`hugepages: node 2
/// not found`).
fn names_only_planned_cells(doc: &Doc, root: usize, hugepages: usize, vm: &VmPlan) -> bool {
    let cells: crate::cpuset::CpuSet = domain_cells(doc, root, vm)
        .into_iter()
        .map(crate::ids::CpuId)
        .collect();
    rules(doc, hugepages)
        .iter()
        .all(|r| r.cells.as_ref().is_none_or(|c| c.is_subset(&cells)))
}

/// The page size of each guest cell (the plan's, else the domain's own, or
/// the VM without cells) under the domain's `<hugepages>` (`old`) and under
/// the plan's, in words when they differ.
fn page_change(
    doc: &Doc,
    root: usize,
    old: Option<usize>,
    vm: &VmPlan,
    planned_kib: u64,
) -> Option<String> {
    let cells = domain_cells(doc, root, vm);
    let old_rules = old.map(|h| rules(doc, h));
    let was = pages::layout(old_rules.as_deref(), &cells);
    let planned = [PageRule {
        kib: planned_kib,
        cells: None,
    }];
    let now = if planned_kib <= crate::memory::NORMAL_PAGE_KIB {
        pages::layout(None, &cells)
    } else {
        pages::layout(Some(&planned), &cells)
    };
    (was != now).then(|| {
        format!(
            "huge pages: the domain's {} become {}, as planned",
            pages::describe(&was),
            pages::describe(&now)
        )
    })
}

/// `<memory>` set to the plan's memory when it differs (in KiB), and
/// `<currentMemory>` lowered to it when above.
fn size(doc: &Doc, root: usize, vm: &VmPlan) -> Vec<Splice> {
    let Some(memory) = vm.memory else {
        return Vec::new();
    };
    let want = memory.bytes / 1024;
    let mut splices = Vec::new();
    for (name, only_above) in [("memory", false), ("currentMemory", true)] {
        let Some(node) = doc.child(root, name) else {
            continue;
        };
        let have = super::cpu::kib(doc.inner_text(node), doc.attr(node, "unit").as_deref());
        let change = if only_above {
            have > want
        } else {
            have != want
        };
        if change {
            splices.push(doc.replace(node, format!("<{name} unit='KiB'>{want}</{name}>")));
        }
    }
    splices
}

fn backing(
    doc: &Doc,
    root: usize,
    anchor: usize,
    vm: &VmPlan,
    notes: &mut Vec<String>,
) -> Vec<Splice> {
    let backing = doc.child(root, "memoryBacking");
    let old = backing.and_then(|b| doc.child(b, "hugepages"));
    let change = vm
        .memory
        .and_then(|m| page_change(doc, root, old, vm, m.page_kib));
    // The domain's pages already as planned, naming only cells that stay:
    // kept, byte for byte.
    let keep = vm.memory.is_some()
        && change.is_none()
        && old.is_some_and(|h| names_only_planned_cells(doc, root, h, vm));
    notes.extend(change);
    // A real-time VM's memory is locked: `<locked/>` added when missing.
    let add_locked =
        vm.realtime_vcpus.is_some() && backing.and_then(|b| doc.child(b, "locked")).is_none();
    let want = if keep { None } else { emit::hugepages(vm) };
    let mut splices = Vec::new();
    // The new <hugepages> element's lines (open, children, close), when one
    // is to be written.
    let mut new_pages: Option<(String, Vec<String>)> = None;
    match want {
        // No memory in the plan: <hugepages> stays as it is.
        None => {}
        // Normal pages: the old <hugepages> goes.
        Some(None) => {
            if let Some(h) = old {
                splices.push(doc.replace_lines(h, String::new()));
            }
        }
        Some(Some(lines)) => {
            let (open, children) = lines
                .split_first()
                .map_or(("", &[][..]), |(o, c)| (o.as_str(), c));
            let inner: Vec<String> = children
                .iter()
                .take(children.len().saturating_sub(1))
                .map(|l| l.trim_start().to_owned())
                .collect();
            match old {
                Some(h) => {
                    let indent = doc.indent_of(h);
                    splices.push(doc.replace(h, doc.block(open, &inner, "</hugepages>", &indent)));
                }
                None => new_pages = Some((open.to_owned(), inner)),
            }
        }
    }
    if new_pages.is_none() && !add_locked {
        return splices;
    }
    // What goes into <memoryBacking>, at `indent`: the new <hugepages>, then
    // <locked/>.
    let children = |indent: &str| -> String {
        let mut out = Vec::new();
        if let Some((open, inner)) = &new_pages {
            out.push(format!(
                "{indent}{}",
                doc.block(open, inner, "</hugepages>", indent)
            ));
        }
        if add_locked {
            out.push(format!("{indent}<locked/>"));
        }
        out.join("\n")
    };
    match backing {
        Some(b) if doc.nodes[b].empty => {
            let indent = doc.indent_of(b);
            let inside = children(&format!("{indent}{}", doc.unit));
            let text = format!("{}>\n{inside}\n{indent}</memoryBacking>", doc.reopened(b));
            splices.push(doc.replace(b, text));
        }
        Some(b) => {
            let indent = doc.indent_of(b);
            let inside = children(&format!("{indent}{}", doc.unit));
            splices.push(doc.insert_lines(
                doc.nodes[b].end_tag_start,
                format!("{inside}\n"),
                &indent,
            ));
        }
        None => {
            let after = ["currentMemory", "memory"]
                .iter()
                .find_map(|n| doc.child(root, n))
                .unwrap_or(anchor);
            let indent = doc.indent_of(after);
            let inside = children(&format!("{indent}{}", doc.unit));
            let block = format!("<memoryBacking>\n{inside}\n{indent}</memoryBacking>");
            splices.push(doc.insert_after(after, &block));
        }
    }
    splices
}
