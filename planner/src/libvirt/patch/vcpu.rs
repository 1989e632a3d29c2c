//! `<vcpu>`: the plan's placement and CPUs as attributes, the count checked
//! (or set), the element written when the domain has none (libvirt counts
//! one vCPU then); and `<iothreads>`, which libvirt keeps right after it.

use super::doc::{Doc, Splice};
use super::{PatchError, PatchOptions};
use crate::libvirt::emit;
use crate::plan::VmPlan;

/// The elements libvirt writes before `<vcpu>`, in its order.
const BEFORE_VCPU: [&str; 12] = [
    "name",
    "uuid",
    "genid",
    "title",
    "description",
    "metadata",
    "maxMemory",
    "memory",
    "currentMemory",
    "blkiotune",
    "memtune",
    "memoryBacking",
];

/// The domain's `<vcpu>`, else the element a new `<vcpu>` goes right after
/// (the last of those libvirt writes before it): what the elements libvirt
/// keeps after `<vcpu>` (`<iothreads>`, `<cputune>`…) follow when the
/// domain has none of them.
pub(super) fn place(doc: &Doc, root: usize) -> Result<usize, PatchError> {
    if let Some(vcpu) = doc.child(root, "vcpu") {
        return Ok(vcpu);
    }
    BEFORE_VCPU
        .iter()
        .flat_map(|name| doc.children_named(root, name))
        .max_by_key(|&i| doc.nodes[i].start)
        .ok_or_else(|| {
            doc.error(
                doc.nodes[root].start,
                "name",
                "the domain has neither <vcpu> nor <name>: it is not a complete domain definition"
                    .to_owned(),
            )
        })
}

/// The edits of `<vcpu>`, and the index of [`place`].
pub(super) fn rewrite(
    doc: &Doc,
    root: usize,
    vm: &VmPlan,
    options: &PatchOptions,
) -> Result<(usize, Vec<Splice>), PatchError> {
    let planned = vm.vcpus.len();
    let place = place(doc, root)?;
    let Some(vcpu) = doc.child(root, "vcpu") else {
        // libvirt counts a domain without <vcpu> as one vCPU; the new
        // element says so, with the plan's count and CPUs.
        check_count(doc, doc.nodes[root].start, 1, vm, options)?;
        return Ok((place, vec![doc.insert_after(place, &emit::vcpu(vm))]));
    };
    let n = &doc.nodes[vcpu];
    let count_text = doc.inner_text(vcpu).trim();
    let count: usize = count_text.parse().map_err(|_| {
        doc.error(
            n.start,
            "vcpu",
            format!("<vcpu> holds {count_text:?}, not a vCPU count"),
        )
    })?;
    check_count(doc, n.start, count, vm, options)?;
    // Keep attributes we do not own (e.g. current='2'); a current count
    // above a lowered maximum would make libvirt refuse it.
    let mut set = vec![
        ("placement", "static".to_owned()),
        ("cpuset", vm.cpus.to_string()),
    ];
    // With a <vcpus> list libvirt counts the enabled entries as online
    // (those the patch keeps, and the new vCPUs it adds online).
    let listed = super::refs::online_after(doc, root, count, planned);
    match (doc.attr(vcpu, "current"), listed) {
        (Some(_), Some(online)) => set.push(("current", online.to_string())),
        (Some(c), None) if c.trim().parse::<usize>().is_ok_and(|c| c > planned) => {
            set.push(("current", planned.to_string()));
        }
        _ => {}
    }
    // A count parsed, so <vcpu> is not empty: its start tag and text are
    // edited apart, and the text only when it changes.
    let mut splices = vec![Splice {
        start: n.start,
        end: n.start_tag_end,
        text: doc.start_tag_with(vcpu, &set),
    }];
    if count != planned {
        splices.push(Splice {
            start: n.start_tag_end,
            end: n.end_tag_start,
            text: planned.to_string(),
        });
    }
    Ok((vcpu, splices))
}

/// Refuses the domain's `count` of vCPUs (its `<vcpu>` at `offset`) when
/// the plan's differs and may not replace it.
fn check_count(
    doc: &Doc,
    offset: usize,
    count: usize,
    vm: &VmPlan,
    options: &PatchOptions,
) -> Result<(), PatchError> {
    let planned = vm.vcpus.len();
    if count == planned || options.set_vcpus {
        return Ok(());
    }
    let has = if count == 1 {
        "1 vCPU".to_owned()
    } else {
        format!("{count} vCPUs")
    };
    let mut e = doc.error(
        offset,
        "vcpu",
        format!(
            "the domain has {has} but the plan gives {} {planned}: pass --set-vcpus (in a spec: set_vcpus = true) to change the domain's count, or plan with vcpus = {count}",
            vm.name
        ),
    );
    e.vcpu_counts = Some((count, planned));
    Err(e)
}

/// The last of the elements that come before `<cputune>` in libvirt's order
/// (`vcpu` is [`place`]).
pub(super) fn cputune_anchor(doc: &Doc, root: usize, vcpu: usize) -> usize {
    [
        "vcpu",
        "vcpus",
        "iothreads",
        "iothreadids",
        "defaultiothread",
    ]
    .iter()
    .filter_map(|n| doc.child(root, n))
    .max_by_key(|&i| doc.nodes[i].start)
    .unwrap_or(vcpu)
}

/// `<iothreads>` with the plan's count, in place or right after `vcpu`
/// ([`place`]).
pub(super) fn iothreads(doc: &Doc, root: usize, vcpu: usize, vm: &VmPlan) -> Option<Splice> {
    let io = emit::iothreads(vm)?;
    Some(match doc.child(root, "iothreads") {
        Some(existing) => doc.replace(existing, io),
        None => doc.insert_after(vcpu, &io),
    })
}
