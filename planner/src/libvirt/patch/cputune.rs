//! `<cputune>`: the plan's pins replace `<vcpupin>`, `<emulatorpin>` and
//! `<iothreadpin>`; every other child (`<shares>`, `<vcpusched>`,
//! `<cachetune>`…) stays where it is.

use super::doc::{Doc, Splice};
use crate::libvirt::emit;
use crate::plan::VmPlan;

/// The children libvirt puts after the pins.
const AFTER_PINS: [&str; 5] = [
    "vcpusched",
    "iothreadsched",
    "emulatorsched",
    "cachetune",
    "memorytune",
];

/// The edits that put the plan's pins in `<cputune>`, or a new `<cputune>`
/// right after `anchor`.
pub(super) fn rewrite(doc: &Doc, root: usize, anchor: usize, vm: &VmPlan) -> Vec<Splice> {
    let pins = emit::cputune_pins(vm);
    let Some(cputune) = doc.child(root, "cputune") else {
        // An <iothreads> inserted after <vcpu> lands first when both go to
        // the same offset.
        let indent = doc.indent_of(anchor);
        let block = doc.block("<cputune>", &pins, "</cputune>", &indent);
        return vec![doc.insert_after(anchor, &block)];
    };
    let indent = doc.indent_of(cputune);
    let child_indent = format!("{indent}{}", doc.unit);
    let lines: String = pins
        .iter()
        .map(|p| format!("{child_indent}{p}\n"))
        .collect();
    let children = &doc.nodes[cputune].children;
    let owned: Vec<usize> = children
        .iter()
        .copied()
        .filter(|&c| {
            let name = doc.nodes[c].name.as_str();
            // A real-time plan's <vcpusched> replaces the old ones too.
            matches!(name, "vcpupin" | "emulatorpin" | "iothreadpin")
                || (name == "vcpusched" && vm.realtime_vcpus.is_some())
        })
        .collect();
    // The pins go where the first old pin was, else before the first element
    // libvirt puts after pins, else before </cputune>.
    if let Some(&first) = owned.first() {
        return owned
            .iter()
            .map(|&pin| {
                let text = if pin == first {
                    lines.clone()
                } else {
                    String::new()
                };
                doc.replace_lines(pin, text)
            })
            .collect();
    }
    let after_pins = children
        .iter()
        .copied()
        .find(|&c| AFTER_PINS.contains(&doc.nodes[c].name.as_str()));
    vec![match after_pins {
        Some(next) => doc.insert_lines(doc.nodes[next].start, lines, ""),
        None if doc.nodes[cputune].empty => {
            let open = doc.reopened(cputune);
            doc.replace(cputune, format!("{open}>\n{lines}{indent}</cputune>"))
        }
        None => doc.insert_lines(doc.nodes[cputune].end_tag_start, lines, &indent),
    }]
}
