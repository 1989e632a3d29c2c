//! The pinning elements of a libvirt domain for one planned VM, in libvirt's
//! canonical order and formatting (two-space indentation, single quotes):
//! `<vcpu>`, `<iothreads>`, `<cputune>`, `<numatune>`, `<cpu><topology>`.

use crate::plan::VmPlan;

/// Escapes an attribute value for single quotes.
pub(crate) fn attr(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('\'', "&apos;")
}

/// `<vcpu placement='static' cpuset='…'>N</vcpu>`.
pub fn vcpu(vm: &VmPlan) -> String {
    format!(
        "<vcpu placement='static' cpuset='{}'>{}</vcpu>",
        vm.cpus,
        vm.vcpus.len()
    )
}

/// `<iothreads>N</iothreads>`, when the VM has I/O threads.
pub fn iothreads(vm: &VmPlan) -> Option<String> {
    (!vm.iothreads.is_empty()).then(|| format!("<iothreads>{}</iothreads>", vm.iothreads.len()))
}

/// The pins that belong in `<cputune>`, one element per line, unindented.
pub fn cputune_pins(vm: &VmPlan) -> Vec<String> {
    let mut lines: Vec<String> = vm
        .vcpus
        .iter()
        .map(|p| format!("<vcpupin vcpu='{}' cpuset='{}'/>", p.vcpu, p.cpu))
        .collect();
    if !vm.emulator_cpus.is_empty() {
        lines.push(format!("<emulatorpin cpuset='{}'/>", vm.emulator_cpus));
    }
    lines.extend(vm.iothreads.iter().map(|t| {
        format!(
            "<iothreadpin iothread='{}' cpuset='{}'/>",
            t.iothread, t.cpus
        )
    }));
    if let Some(rt) = &vm.realtime_vcpus {
        lines.push(format!(
            "<vcpusched vcpus='{rt}' scheduler='fifo' priority='1'/>"
        ));
    }
    lines
}

/// `<numatune>` children: memory on the VM's nodes, one memnode per guest cell.
pub fn numatune_children(vm: &VmPlan) -> Vec<String> {
    if vm.numa_nodes.is_empty() {
        return Vec::new();
    }
    let nodes: Vec<String> = vm.numa_nodes.iter().map(|n| n.to_string()).collect();
    let mut lines = vec![format!(
        "<memory mode='strict' nodeset='{}'/>",
        nodes.join(",")
    )];
    lines.extend(vm.guest_cells.iter().map(|c| {
        format!(
            "<memnode cellid='{}' mode='strict' nodeset='{}'/>",
            c.id, c.host_node
        )
    }));
    lines
}

/// `<topology …/>` for `<cpu>`.
pub fn topology(vm: &VmPlan) -> String {
    let t = vm.guest_topology;
    format!(
        "<topology sockets='{}' dies='{}' cores='{}' threads='{}'/>",
        t.sockets,
        t.dies.max(1),
        t.cores,
        t.threads
    )
}

/// The CPU mode `<cpu>` gets when the plan needs a feature or cache mode
/// and the domain names none (libvirt refuses features without a model).
pub const CPU_MODE: &str = "host-passthrough";

/// `<cache mode='passthrough'/>` (`cache_passthrough`).
pub const CACHE_PASSTHROUGH: &str = "<cache mode='passthrough'/>";

/// `<feature policy='require' name='topoext'/>`: AMD guests see SMT only
/// with it.
pub const TOPOEXT: &str = "<feature policy='require' name='topoext'/>";

/// What `<cpu>` holds after `<topology>` for the plan: the cache mode and
/// the features, in libvirt's order.
pub fn cpu_extras(vm: &VmPlan) -> Vec<String> {
    let t = vm.guest_topology;
    let mut lines = Vec::new();
    if t.cache_passthrough {
        lines.push(CACHE_PASSTHROUGH.to_owned());
    }
    if t.topoext {
        lines.push(TOPOEXT.to_owned());
    }
    lines
}

/// A guest cell's `<distances>` lines, when the plan has its distances.
fn cell_distances(vm: &VmPlan, cell: &crate::plan::GuestCell) -> Vec<String> {
    if cell.distances.len() != vm.guest_cells.len() {
        return Vec::new();
    }
    let mut lines = vec!["<distances>".to_owned()];
    lines.extend(
        vm.guest_cells
            .iter()
            .zip(&cell.distances)
            .map(|(to, value)| format!("  <sibling id='{}' value='{value}'/>", to.id)),
    );
    lines.push("</distances>".to_owned());
    lines
}

/// `<numa>` for `<cpu>` when the VM spans nodes: one cell per host node,
/// with the plan's memory split (in proportion to each cell's vCPUs, whole
/// pages, see [`crate::memory::placement::per_node`]) when the plan has the VM's memory,
/// else the domain's memory (KiB) split evenly.
pub fn guest_numa(vm: &VmPlan, memory_kib: u64) -> Option<Vec<String>> {
    if vm.guest_cells.is_empty() {
        return None;
    }
    let planned: Option<Vec<u64>> = vm.memory.map(|m| {
        crate::memory::placement::per_node(vm, &m)
            .iter()
            .map(|&(_, bytes)| bytes / 1024)
            .collect()
    });
    let cells = u64::try_from(vm.guest_cells.len()).unwrap_or(1).max(1);
    let even = memory_kib / cells;
    let mut lines = vec!["<numa>".to_owned()];
    for (i, c) in vm.guest_cells.iter().enumerate() {
        let kib = planned
            .as_ref()
            .and_then(|p| p.get(i).copied())
            .unwrap_or(even);
        let open = format!(
            "  <cell id='{}' cpus='{}' memory='{kib}' unit='KiB'",
            c.id, c.vcpus
        );
        let distances = cell_distances(vm, c);
        if distances.is_empty() {
            lines.push(format!("{open}/>"));
        } else {
            lines.push(format!("{open}>"));
            lines.extend(distances.iter().map(|d| format!("    {d}")));
            lines.push("  </cell>".to_owned());
        }
    }
    lines.push("</numa>".to_owned());
    Some(lines)
}

/// What the plan says of `<memoryBacking><hugepages>`: `None` when the plan
/// has no memory for the VM (leave it as it is); `Some(None)` for normal
/// pages (no `<hugepages>`); `Some(Some(lines))` for the `<hugepages>`
/// element: one `<page>` (per guest cell when the VM spans nodes).
pub fn hugepages(vm: &VmPlan) -> Option<Option<Vec<String>>> {
    let memory = vm.memory?;
    if memory.page_kib <= crate::memory::NORMAL_PAGE_KIB {
        return Some(None);
    }
    let size = memory.page_kib;
    let mut lines = vec!["<hugepages>".to_owned()];
    if vm.guest_cells.is_empty() {
        lines.push(format!("  <page size='{size}' unit='KiB'/>"));
    } else {
        lines.extend(
            vm.guest_cells
                .iter()
                .map(|c| format!("  <page size='{size}' unit='KiB' nodeset='{}'/>", c.id)),
        );
    }
    lines.push("</hugepages>".to_owned());
    Some(Some(lines))
}

fn block(out: &mut String, open: &str, children: &[String], close: &str) {
    out.push_str(open);
    out.push('\n');
    for c in children {
        out.push_str("  ");
        out.push_str(c);
        out.push('\n');
    }
    out.push_str(close);
    out.push('\n');
}

/// The fragment printed by `pinplan xml` without `--patch`: the elements to
/// put into the domain (`virsh edit NAME`), top level, in libvirt's order.
pub fn fragment(vm: &VmPlan) -> String {
    let mut out = format!(
        "<!-- pinplan: CPU pinning for {}; put these into the domain (virsh edit {}), \
         replacing the elements of the same name -->\n",
        attr(&vm.name).replace("--", "- -"),
        attr(&vm.name).replace("--", "- -")
    );
    out.push_str(&vcpu(vm));
    out.push('\n');
    if let Some(io) = iothreads(vm) {
        out.push_str(&io);
        out.push('\n');
    }
    let mut backing = hugepages(vm).flatten().unwrap_or_default();
    if vm.realtime_vcpus.is_some() {
        backing.push("<locked/>".to_owned());
    }
    if !backing.is_empty() {
        block(&mut out, "<memoryBacking>", &backing, "</memoryBacking>");
    }
    block(&mut out, "<cputune>", &cputune_pins(vm), "</cputune>");
    let numa = numatune_children(vm);
    if !numa.is_empty() {
        block(&mut out, "<numatune>", &numa, "</numatune>");
    }
    let mut cpu = vec![topology(vm)];
    cpu.extend(cpu_extras(vm));
    if !vm.guest_cells.is_empty() {
        cpu.push(
            "<!-- guest NUMA cells: patching a domain (pinplan xml, patch mode) adds them with its memory -->"
                .to_owned(),
        );
    }
    let open = if vm.guest_topology.needs_cpu_mode() {
        format!("<cpu mode='{CPU_MODE}'>")
    } else {
        "<cpu>".to_owned()
    };
    block(&mut out, &open, &cpu, "</cpu>");
    out
}

/// The distances of planned cell `index` as `<distances>` lines, for a
/// kept cell of a patched domain.
pub fn distances_of_cell(vm: &VmPlan, index: usize) -> Vec<String> {
    vm.guest_cells
        .get(index)
        .map(|c| cell_distances(vm, c))
        .unwrap_or_default()
}
