//! `<numatune>`: ours entirely, replaced, or added after `<cputune>`.

use super::doc::{Doc, Splice};
use crate::libvirt::emit;
use crate::plan::VmPlan;

/// The plan's `<numatune>` in place of the old one, else after `<cputune>`
/// (the one inserted after `anchor` when the domain has none); nothing when
/// the plan has no memory policy.
pub(super) fn rewrite(doc: &Doc, root: usize, anchor: usize, vm: &VmPlan) -> Option<Splice> {
    let numa = emit::numatune_children(vm);
    if numa.is_empty() {
        return None;
    }
    let block = |at: usize| doc.block("<numatune>", &numa, "</numatune>", &doc.indent_of(at));
    Some(match doc.child(root, "numatune") {
        Some(old) => doc.replace(old, block(old)),
        None => {
            let after = doc.child(root, "cputune").unwrap_or(anchor);
            doc.insert_after(after, &block(after))
        }
    })
}
