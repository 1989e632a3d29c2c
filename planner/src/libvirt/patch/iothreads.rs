//! The domain's own I/O thread ids: a plan numbers a VM's I/O threads from
//! 1, a domain may name its own (`<iothreadids>`, the rest numbered by
//! libvirt), and an `<iothreadpin>` must name one of the domain's, or
//! libvirt refuses the domain (`Cannot find 'iothread' : 1`). The plan's
//! I/O threads, in order, pin the domain's ids, lowest first.

use super::doc::Doc;
use super::PatchError;
use crate::libvirt::domain::iothread_ids;
use crate::plan::{IothreadPin, VmPlan};
use std::borrow::Cow;
use std::collections::BTreeSet;

/// `vm` with its I/O threads numbered as the patched domain's: the ids
/// libvirt gives the domain once its `<iothreads>` is the plan's count.
/// Refuses a domain that names more I/O threads than the plan has (libvirt
/// would keep them all, some unpinned) and an id that is not one.
pub(super) fn renumbered<'v>(
    doc: &Doc,
    root: usize,
    vm: &'v VmPlan,
) -> Result<Cow<'v, VmPlan>, PatchError> {
    // No I/O threads in the plan: `<iothreads>` is left as it is.
    if vm.iothreads.is_empty() {
        return Ok(Cow::Borrowed(vm));
    }
    let listed = listed(doc, root)?;
    let planned = vm.iothreads.len();
    if listed.len() > planned {
        let at = doc.child(root, "iothreadids").unwrap_or(root);
        let ids: Vec<String> = listed.iter().map(u32::to_string).collect();
        return Err(doc.error(
            doc.nodes[at].start,
            "iothreadids",
            format!(
                "the domain names {} I/O threads in <iothreadids> ({}) but the plan gives {} {planned}: plan with iothreads = {}, or remove ids from <iothreadids>",
                listed.len(),
                ids.join(", "),
                vm.name,
                listed.len()
            ),
        ));
    }
    let count = u32::try_from(planned).unwrap_or(u32::MAX);
    let ids = iothread_ids(count, &listed);
    let Some(threads) = IothreadPin::on_ids(&vm.iothreads, &ids) else {
        return Ok(Cow::Borrowed(vm));
    };
    if threads == vm.iothreads {
        return Ok(Cow::Borrowed(vm));
    }
    let mut renumbered = vm.clone();
    renumbered.iothreads = threads;
    Ok(Cow::Owned(renumbered))
}

/// The ids of `<iothreadids>`; an id that is not a number from 1 up is
/// refused at its line, as libvirt refuses it.
fn listed(doc: &Doc, root: usize) -> Result<BTreeSet<u32>, PatchError> {
    let Some(ids) = doc.child(root, "iothreadids") else {
        return Ok(BTreeSet::new());
    };
    doc.children_named(ids, "iothread")
        .map(|t| {
            let text = doc.attr(t, "id").unwrap_or_default();
            text.trim()
                .parse::<u32>()
                .ok()
                .filter(|&id| id > 0)
                .ok_or_else(|| {
                    doc.error(
                        doc.nodes[t].start,
                        "iothread",
                        format!("<iothread id={text:?}> in <iothreadids>: an I/O thread id is a number from 1 up"),
                    )
                })
        })
        .collect()
}
