//! `<memoryBacking>`: only its `<hugepages>` is ours, and `<locked/>` is
//! added for a real-time VM. The other children (`<source type='memfd'/>`,
//! `<access mode='shared'/>` that vhost-user needs, `<nosharepages/>`…)
//! stay as they are. And `<memory>`
//! (with `<currentMemory>` when above it) when the plan's memory differs.

use super::doc::{Doc, Splice};
use crate::libvirt::emit;
use crate::plan::VmPlan;

/// The plan's `<hugepages>` in `<memoryBacking>` (replaced, or added; a new
/// `<memoryBacking>` after `<currentMemory>` or `<memory>`), or the old
/// `<hugepages>` removed for normal pages; nothing when the plan has no
/// memory for the VM.
pub(super) fn rewrite(doc: &Doc, root: usize, anchor: usize, vm: &VmPlan) -> Vec<Splice> {
    let mut splices = size(doc, root, vm);
    splices.extend(backing(doc, root, anchor, vm));
    splices
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

fn backing(doc: &Doc, root: usize, anchor: usize, vm: &VmPlan) -> Vec<Splice> {
    let backing = doc.child(root, "memoryBacking");
    let old = backing.and_then(|b| doc.child(b, "hugepages"));
    // A real-time VM's memory is locked: `<locked/>` added when missing.
    let add_locked =
        vm.realtime_vcpus.is_some() && backing.and_then(|b| doc.child(b, "locked")).is_none();
    let want = emit::hugepages(vm);
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
