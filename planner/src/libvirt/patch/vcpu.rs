//! `<vcpu>`: the plan's placement and CPUs as attributes, the count checked
//! (or set); and `<iothreads>`, which libvirt keeps right after it.

use super::doc::{Doc, Splice};
use super::{PatchError, PatchOptions};
use crate::libvirt::emit;
use crate::plan::VmPlan;

/// The edits of `<vcpu>`, and its index.
pub(super) fn rewrite(
    doc: &Doc,
    root: usize,
    vm: &VmPlan,
    options: &PatchOptions,
) -> Result<(usize, Vec<Splice>), PatchError> {
    let planned = vm.vcpus.len();
    let Some(vcpu) = doc.child(root, "vcpu") else {
        return Err(doc.error(
            doc.nodes[root].start,
            "vcpu",
            "the domain has no <vcpu> element: it is not a complete domain definition".to_owned(),
        ));
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
    if count != planned && !options.set_vcpus {
        let mut e = doc.error(
            n.start,
            "vcpu",
            format!(
                "the domain has {count} vCPUs but the plan gives {} {planned}: pass --set-vcpus (in a spec: set_vcpus = true) to change the domain's count, or plan with vcpus = {count}",
                vm.name
            ),
        );
        e.vcpu_counts = Some((count, planned));
        return Err(e);
    }
    // Keep attributes we do not own (e.g. current='2'); a current count
    // above a lowered maximum would make libvirt refuse it.
    let mut set = vec![
        ("placement", "static".to_owned()),
        ("cpuset", vm.cpus.to_string()),
    ];
    if doc
        .attr(vcpu, "current")
        .is_some_and(|c| c.trim().parse::<usize>().is_ok_and(|c| c > planned))
    {
        set.push(("current", planned.to_string()));
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

/// The last of the elements that come before `<cputune>` in libvirt's order.
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

/// `<iothreads>` with the plan's count, in place or right after `<vcpu>`.
pub(super) fn iothreads(doc: &Doc, root: usize, vcpu: usize, vm: &VmPlan) -> Option<Splice> {
    let io = emit::iothreads(vm)?;
    Some(match doc.child(root, "iothreads") {
        Some(existing) => doc.replace(existing, io),
        None => doc.insert_after(vcpu, &io),
    })
}
