//! Elements that name a vCPU, a guest NUMA cell or an I/O thread by number,
//! outside the ones the plan rewrites: when the plan changes how many of
//! them the domain has, each is kept valid — trimmed to what remains,
//! extended, or removed when it named only what is gone, and then said in a
//! note — or the patch is refused with the element, its line and the fix.
//! libvirt refuses a domain that names what it does not have (`vcpu id '2'
//! is out of range of maximum vcpu count`, `Number of CPUs in <numa> exceeds
//! the <vcpu> count`, `can't add memory backend for guest node '1'`).

use super::doc::{Doc, Splice};
use super::PatchError;
use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use crate::plan::VmPlan;
use std::collections::BTreeSet;

/// The domain's vCPU count as libvirt reads it: `<vcpu>`, else 1.
pub(super) fn old_vcpus(doc: &Doc, root: usize) -> Option<usize> {
    match doc.child(root, "vcpu") {
        Some(v) => doc.inner_text(v).trim().parse().ok(),
        None => Some(1),
    }
}

/// The ids `0..n`, as a set.
fn first(n: usize) -> CpuSet {
    (0..n)
        .filter_map(|i| u32::try_from(i).ok())
        .map(CpuId)
        .collect()
}

/// `n` of `one`s in words (`1 vCPU`, `2 vCPUs`).
fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The set an attribute of `node` names (`vcpus='0-3,^2'`), or a refusal
/// naming it when it is not one.
fn set_attr(doc: &Doc, node: usize, name: &str) -> Result<Option<CpuSet>, PatchError> {
    let Some(text) = doc.attr(node, name) else {
        return Ok(None);
    };
    text.parse::<CpuSet>().map(Some).map_err(|_| {
        doc.error(
            doc.nodes[node].start,
            &doc.nodes[node].name,
            format!(
                "<{} {name}={text:?}> is not a set of numbers (e.g. '0-3,^2')",
                doc.nodes[node].name
            ),
        )
    })
}

/// What the patch does to the elements that name vCPUs when the count goes
/// from the domain's to the plan's: the edits, and the notes that say what
/// was trimmed, removed or added.
pub(super) fn vcpus(
    doc: &Doc,
    root: usize,
    vm: &VmPlan,
    notes: &mut Vec<String>,
) -> Result<Vec<Splice>, PatchError> {
    let planned = vm.vcpus.len();
    let Some(old) = old_vcpus(doc, root) else {
        // vcpu.rs refuses a count that is not one.
        return Ok(Vec::new());
    };
    if old == planned {
        return Ok(Vec::new());
    }
    let mut splices = Vec::new();
    if let Some(tune) = doc.child(root, "cputune") {
        for name in ["vcpusched", "cachetune", "memorytune"] {
            // A real-time plan writes its own <vcpusched>.
            if name == "vcpusched" && vm.realtime_vcpus.is_some() {
                continue;
            }
            for node in doc.children_named(tune, name) {
                splices.extend(trimmed(doc, node, planned, notes)?);
            }
        }
    }
    if let Some(list) = doc.child(root, "vcpus") {
        splices.extend(vcpu_list(doc, root, list, old, planned, notes)?);
    }
    if vm.guest_cells.is_empty() {
        splices.extend(kept_cells(doc, root, old, planned, notes)?);
    }
    Ok(splices)
}

/// A `<vcpusched>`, `<cachetune>` or `<memorytune>` (and its `<monitor>`s)
/// with its `vcpus` trimmed below `planned`; removed when it names none
/// that remain.
fn trimmed(
    doc: &Doc,
    node: usize,
    planned: usize,
    notes: &mut Vec<String>,
) -> Result<Vec<Splice>, PatchError> {
    let Some(set) = set_attr(doc, node, "vcpus")? else {
        return Ok(Vec::new());
    };
    let kept = set.intersection(&first(planned));
    let name = &doc.nodes[node].name;
    let line = doc.line(node);
    if kept.is_empty() {
        notes.push(format!(
            "<{name} vcpus='{set}'> (line {line}) removed: it names only vCPUs that a plan of {} removes",
            plural(planned, "vCPU")
        ));
        return Ok(vec![doc.replace_lines(node, String::new())]);
    }
    let mut splices = Vec::new();
    if kept != set {
        notes.push(format!(
            "<{name} vcpus='{set}'> (line {line}) trimmed to vCPUs {kept}, for a plan of {}",
            plural(planned, "vCPU")
        ));
        splices.push(attr_set(doc, node, "vcpus", kept.to_string()));
    }
    // libvirt refuses two monitors of one set ("Identical vcpus found in
    // same type monitors"): one that trims to a kept one's set goes.
    let mut kept_sets: Vec<CpuSet> = Vec::new();
    for monitor in doc.children_named(node, "monitor") {
        let Some(set) = set_attr(doc, monitor, "vcpus")? else {
            continue;
        };
        let after = set.intersection(&first(planned));
        if !after.is_empty() && kept_sets.contains(&after) {
            notes.push(format!(
                "<monitor vcpus='{set}'> (line {}) removed: trimmed for a plan of {}, it would name vCPUs {after} as another monitor does",
                doc.line(monitor),
                plural(planned, "vCPU")
            ));
            splices.push(doc.replace_lines(monitor, String::new()));
            continue;
        }
        if !after.is_empty() {
            kept_sets.push(after);
        }
        splices.extend(trimmed(doc, monitor, planned, notes)?);
    }
    Ok(splices)
}

/// `node`'s start tag with attribute `name` set to `value`, the others as
/// they were.
fn attr_set(doc: &Doc, node: usize, name: &str, value: String) -> Splice {
    let n = &doc.nodes[node];
    // Keep the attributes' order: those before `name` stay before it.
    let before: Vec<(String, String)> = doc
        .attr_names(node)
        .into_iter()
        .take_while(|k| k != name)
        .filter_map(|k| doc.attr(node, &k).map(|v| (k, v)))
        .collect();
    let mut set: Vec<(&str, String)> = before
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    set.push((name, value));
    Splice {
        start: n.start,
        end: n.start_tag_end,
        text: doc.start_tag_with(node, &set),
    }
}

/// `<vcpus>`: an entry per vCPU, as libvirt wants (`vcpu id '2' is out of
/// range of maximum vcpu count`): those of removed vCPUs go, the plan's new
/// vCPUs get an online entry each (libvirt would add them offline).
fn vcpu_list(
    doc: &Doc,
    root: usize,
    list: usize,
    old: usize,
    planned: usize,
    notes: &mut Vec<String>,
) -> Result<Vec<Splice>, PatchError> {
    let entries: Vec<usize> = doc.children_named(list, "vcpu").collect();
    let line = doc.line(list);
    if planned < old {
        if online_after(doc, root, old, planned) == Some(0) {
            return Err(doc.error(
                doc.nodes[list].start,
                "vcpus",
                format!(
                    "<vcpus> has none of the vCPUs that a plan of {} keeps ({}) enabled: no vCPU would be online; enable one (enabled='yes') or plan more vCPUs",
                    plural(planned, "vCPU"),
                    first(planned)
                ),
            ));
        }
        let mut splices = Vec::new();
        for &entry in &entries {
            let id = doc.attr(entry, "id").unwrap_or_default();
            let id: usize = id.trim().parse().map_err(|_| {
                doc.error(
                    doc.nodes[entry].start,
                    "vcpu",
                    format!("<vcpu id={id:?}> in <vcpus> is not a vCPU number"),
                )
            })?;
            if id >= planned {
                splices.push(doc.replace_lines(entry, String::new()));
            }
        }
        if !splices.is_empty() {
            notes.push(format!(
                "<vcpus> (line {line}): the entries of vCPUs {planned} and up removed, with the vCPUs"
            ));
        }
        return Ok(splices);
    }
    let Some(&last) = entries.last() else {
        return Ok(Vec::new());
    };
    let added: Vec<String> = (old..planned)
        .map(|id| format!("<vcpu id='{id}' enabled='yes' hotpluggable='no'/>"))
        .collect();
    notes.push(format!(
        "<vcpus> (line {line}): vCPUs {} added online (enabled='yes' hotpluggable='no')",
        CpuSet::from_iter(
            (old..planned)
                .filter_map(|i| u32::try_from(i).ok())
                .map(CpuId)
        )
    ));
    let indent = doc.indent_of(last);
    Ok(vec![
        doc.insert_after(last, &added.join(&format!("\n{indent}")))
    ])
}

/// How many vCPUs a domain with a `<vcpus>` list has online once its count
/// goes from `old` to `planned`: its enabled entries below `planned`, and
/// every vCPU the patch adds (online); `None` without a list.
pub(super) fn online_after(doc: &Doc, root: usize, old: usize, planned: usize) -> Option<usize> {
    let list = doc.child(root, "vcpus")?;
    let kept = doc
        .children_named(list, "vcpu")
        .filter(|&e| {
            let enabled = doc.attr(e, "enabled").is_none_or(|v| v.trim() == "yes");
            let id = doc
                .attr(e, "id")
                .and_then(|i| i.trim().parse::<usize>().ok());
            enabled && id.is_some_and(|id| id < planned)
        })
        .count();
    Some(kept + planned.saturating_sub(old))
}

/// The domain's own guest NUMA cells, kept when the plan writes none: their
/// `cpus` trimmed below `planned`, or the new vCPUs added to the last cell.
/// A cell left without a vCPU is refused.
fn kept_cells(
    doc: &Doc,
    root: usize,
    old: usize,
    planned: usize,
    notes: &mut Vec<String>,
) -> Result<Vec<Splice>, PatchError> {
    let cells = doc.guest_cells(root);
    let Some(&last) = cells.last() else {
        return Ok(Vec::new());
    };
    let keep = first(planned);
    let mut splices = Vec::new();
    for (position, &cell) in cells.iter().enumerate() {
        let Some(set) = set_attr(doc, cell, "cpus")? else {
            continue;
        };
        let mut want = set.intersection(&keep);
        if cell == last && planned > old {
            want = want.union(&first(planned).difference(&first(old)));
        }
        if want == set {
            continue;
        }
        // A cell without an id is numbered by its place, as libvirt does.
        let id = doc.attr(cell, "id").unwrap_or_else(|| position.to_string());
        if want.is_empty() {
            return Err(doc.error(
                doc.nodes[cell].start,
                "cell",
                format!(
                    "guest NUMA cell {id} holds only vCPUs {set}, which a plan of {} removes: the cell would have none; plan at least {} vCPUs, or remove the cell from <cpu><numa>",
                    plural(planned, "vCPU"),
                    set.first()
                        .map_or(1, |c| usize::try_from(c.0).map_or(usize::MAX, |c| c + 1))
                ),
            ));
        }
        notes.push(format!(
            "guest NUMA cell {id} (line {}): vCPUs {set} become {want}, for a plan of {}",
            doc.line(cell),
            plural(planned, "vCPU")
        ));
        splices.push(attr_set(doc, cell, "cpus", want.to_string()));
    }
    Ok(splices)
}

/// When the plan's guest cells replace the domain's (`new_cells` of them,
/// ids from 0, where the domain had `old_cells`): a memory device or a PCI
/// expander bus that targets a cell that is gone, and a huge page size set
/// for one (when the plan leaves `<hugepages>` as it is), are refused.
pub(super) fn cells(doc: &Doc, root: usize, vm: &VmPlan) -> Result<(), PatchError> {
    let old_cells = doc.guest_cells(root).len();
    let new_cells = vm.guest_cells.len();
    if new_cells == 0 || new_cells == old_cells {
        return Ok(());
    }
    let kept: BTreeSet<u32> = vm.guest_cells.iter().map(|c| c.id).collect();
    let ids: Vec<String> = kept.iter().map(u32::to_string).collect();
    let has = format!(
        "the plan gives {} {} ({})",
        vm.name,
        plural(new_cells, "guest NUMA cell"),
        ids.join(", ")
    );
    for device in doc
        .child(root, "devices")
        .into_iter()
        .flat_map(|d| doc.nodes[d].children.clone())
    {
        let what = match doc.nodes[device].name.as_str() {
            "memory" => "memory device",
            "controller" => "controller",
            _ => continue,
        };
        let Some(node) = doc
            .child(device, "target")
            .and_then(|t| doc.child(t, "node"))
        else {
            continue;
        };
        let text = doc.inner_text(node).trim();
        if text.parse::<u32>().is_ok_and(|n| kept.contains(&n)) {
            continue;
        }
        return Err(doc.error(
            doc.nodes[node].start,
            "node",
            format!(
                "a {what} (<{}> at line {}) targets guest NUMA cell {text}, but {has}: move it to one of those cells (its <target><node>), or plan so that the VM keeps {old_cells} cells",
                doc.nodes[device].name,
                doc.line(device)
            ),
        ));
    }
    if vm.memory.is_some() {
        // The plan writes <hugepages> per planned cell.
        return Ok(());
    }
    let pages = doc
        .child(root, "memoryBacking")
        .and_then(|b| doc.child(b, "hugepages"))
        .into_iter()
        .flat_map(|h| doc.children_named(h, "page").collect::<Vec<_>>());
    let staying: CpuSet = kept.iter().map(|&c| CpuId(c)).collect();
    for page in pages {
        let Some(nodeset) = set_attr(doc, page, "nodeset")? else {
            continue;
        };
        if nodeset.is_subset(&staying) {
            continue;
        }
        return Err(doc.error(
            doc.nodes[page].start,
            "page",
            format!(
                "the domain's <page nodeset='{nodeset}'> sets huge pages for guest NUMA cells that go: {has} where it had {old_cells}; give the VM memory and hugepages in the spec so that pinplan writes the pages of each planned cell, or change the page's nodeset"
            ),
        ));
    }
    Ok(())
}

/// The plan's I/O threads, numbered as the domain's (`ids`): a disk or
/// controller bound to another I/O thread (`<driver iothread='3'>`) is
/// refused, and an `<iothreadsched>` trimmed to those that remain (removed
/// when none do).
pub(super) fn iothreads(
    doc: &Doc,
    root: usize,
    vm: &VmPlan,
    notes: &mut Vec<String>,
) -> Result<Vec<Splice>, PatchError> {
    if vm.iothreads.is_empty() {
        return Ok(Vec::new());
    }
    let ids: CpuSet = vm.iothreads.iter().map(|t| CpuId(t.iothread)).collect();
    for device in doc
        .child(root, "devices")
        .into_iter()
        .flat_map(|d| doc.nodes[d].children.clone())
    {
        let Some(driver) = doc.child(device, "driver") else {
            continue;
        };
        // `<driver iothread='N'>`, or per queue `<driver><iothreads>
        // <iothread id='N'>` (libvirt 10).
        let per_queue = doc
            .child(driver, "iothreads")
            .into_iter()
            .flat_map(|t| doc.children_named(t, "iothread").collect::<Vec<_>>())
            .filter_map(|t| doc.attr(t, "id").map(|id| (t, id)));
        let named = doc.attr(driver, "iothread").map(|id| (driver, id));
        let Some((at, text)) = named.into_iter().chain(per_queue).find(|(_, text)| {
            !text
                .trim()
                .parse::<u32>()
                .is_ok_and(|n| ids.contains(CpuId(n)))
        }) else {
            continue;
        };
        return Err(doc.error(
            doc.nodes[at].start,
            &doc.nodes[at].name,
            format!(
                "the <{}> at line {} runs on I/O thread {text}, which the patched domain does not have (a plan of {}: ids {ids}): plan more iothreads, or move the device to one of those",
                doc.nodes[device].name,
                doc.line(device),
                plural(vm.iothreads.len(), "I/O thread"),
            ),
        ));
    }
    let mut splices = Vec::new();
    let tune = doc.child(root, "cputune");
    for sched in tune
        .into_iter()
        .flat_map(|t| doc.children_named(t, "iothreadsched").collect::<Vec<_>>())
    {
        let Some(set) = set_attr(doc, sched, "iothreads")? else {
            continue;
        };
        let kept = set.intersection(&ids);
        let line = doc.line(sched);
        if kept.is_empty() {
            notes.push(format!(
                "<iothreadsched iothreads='{set}'> (line {line}) removed: the domain no longer has those I/O threads"
            ));
            splices.push(doc.replace_lines(sched, String::new()));
        } else if kept != set {
            notes.push(format!(
                "<iothreadsched iothreads='{set}'> (line {line}) trimmed to I/O threads {kept}"
            ));
            splices.push(attr_set(doc, sched, "iothreads", kept.to_string()));
        }
    }
    Ok(splices)
}
