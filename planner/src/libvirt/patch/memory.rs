//! `<memoryBacking>`: only its `<hugepages>` is ours. The other children
//! (`<source type='memfd'/>`, `<access mode='shared'/>` that vhost-user
//! needs, `<locked/>`, `<nosharepages/>`…) stay as they are. And `<memory>`
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
    let Some(want) = emit::hugepages(vm) else {
        return Vec::new();
    };
    let backing = doc.child(root, "memoryBacking");
    let old = backing.and_then(|b| doc.child(b, "hugepages"));
    let Some(lines) = want else {
        return old
            .map(|h| vec![doc.replace_lines(h, String::new())])
            .unwrap_or_default();
    };
    let (open, children) = lines
        .split_first()
        .map_or(("", &[][..]), |(o, c)| (o.as_str(), c));
    let inner: Vec<String> = children
        .iter()
        .take(children.len().saturating_sub(1))
        .map(|l| l.trim_start().to_owned())
        .collect();
    let close = "</hugepages>";
    match (backing, old) {
        (Some(_), Some(h)) => {
            let indent = doc.indent_of(h);
            vec![doc.replace(h, doc.block(open, &inner, close, &indent))]
        }
        (Some(b), None) if doc.nodes[b].empty => {
            let indent = doc.indent_of(b);
            let hp = doc.block(open, &inner, close, &format!("{indent}{}", doc.unit));
            let text = format!(
                "{}>\n{indent}{}{hp}\n{indent}</memoryBacking>",
                doc.reopened(b),
                doc.unit
            );
            vec![doc.replace(b, text)]
        }
        (Some(b), None) => {
            let indent = doc.indent_of(b);
            let child = format!("{indent}{}", doc.unit);
            let hp = doc.block(open, &inner, close, &child);
            vec![doc.insert_lines(
                doc.nodes[b].end_tag_start,
                format!("{child}{hp}\n"),
                &indent,
            )]
        }
        (None, _) => {
            let after = ["currentMemory", "memory"]
                .iter()
                .find_map(|n| doc.child(root, n))
                .unwrap_or(anchor);
            let indent = doc.indent_of(after);
            let hp = doc.block(open, &inner, close, &format!("{indent}{}", doc.unit));
            let block = format!(
                "<memoryBacking>\n{indent}{}{hp}\n{indent}</memoryBacking>",
                doc.unit
            );
            vec![doc.insert_after(after, &block)]
        }
    }
}
