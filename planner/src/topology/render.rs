//! The text map printed by `pinplan topology --format text`: a summary line,
//! then packages, NUMA nodes, L3 domains, one line per core (unusable CPUs
//! marked), the unusable CPUs with the reason, and PCI devices.

use super::{HostTopology, PcieLink};
use crate::text::{bytes, plural};
use std::fmt::Write;

fn cpus_or_none(cpus: &crate::cpuset::CpuSet) -> String {
    if cpus.is_empty() {
        "no online cpus".to_owned()
    } else {
        format!("cpus {cpus}")
    }
}

fn opt<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "?".to_owned(), |v| v.to_string())
}

fn link(l: &PcieLink) -> String {
    let one = |speed: Option<f64>, width: Option<u32>| match (speed, width) {
        (None, None) => None,
        (s, w) => Some(format!(
            "{} x{}",
            s.map_or_else(|| "? GT/s".to_owned(), |s| format!("{s} GT/s")),
            opt(w)
        )),
    };
    let mut text = one(l.speed_gts, l.width).unwrap_or_default();
    if let Some(max) = one(l.max_speed_gts, l.max_width) {
        if text.is_empty() {
            text = format!("max {max}");
        } else if max != text {
            text = format!("{text} (max {max})");
        }
    }
    if text.is_empty() {
        if let Some(g) = l.gbytes_per_s {
            text = format!("{g:.2} GB/s");
        }
    }
    text
}

pub(super) fn text(host: &HostTopology) -> String {
    let mut out = String::new();
    summary(&mut out, host);
    groups(&mut out, host);
    cores(&mut out, host);
    unusable_cpus(&mut out, host);
    pci_devices(&mut out, host);
    out
}

// Writing to a String cannot fail: the functions below ignore `writeln!`'s result.

/// `host: SOURCE` and the counts.
fn summary(out: &mut String, host: &HostTopology) {
    let threads: std::collections::BTreeSet<usize> =
        host.cores.iter().map(|c| c.cpus.len()).collect();
    let threads = match threads.len() {
        0 => "no cores".to_owned(),
        1 => plural(threads.first().copied().unwrap_or(1), "thread", "threads") + " per core",
        _ => {
            let counts: Vec<String> = threads.iter().map(usize::to_string).collect();
            format!("{} threads per core", counts.join(" or "))
        }
    };
    let _ = writeln!(out, "host: {}", host.source);
    let _ = writeln!(
        out,
        "  {}, {}, {}, {}, {} ({} usable), {threads}",
        plural(host.packages.len(), "package", "packages"),
        plural(host.numa_nodes.len(), "NUMA node", "NUMA nodes"),
        plural(host.l3_domains.len(), "L3 domain", "L3 domains"),
        plural(host.cores.len(), "core", "cores"),
        plural(host.pus.len(), "CPU", "CPUs"),
        host.usable_cpus().len(),
    );
    if let Some(vendor) = &host.cpu_vendor {
        let _ = writeln!(out, "  CPU vendor: {vendor}");
    }
}

/// Packages, NUMA nodes and L3 domains, each section only when there are any.
fn groups(out: &mut String, host: &HostTopology) {
    if !host.packages.is_empty() {
        let _ = writeln!(out, "\npackages:");
        for p in &host.packages {
            let os = p
                .os_index
                .map(|o| format!(" (socket_id {o})"))
                .unwrap_or_default();
            let _ = writeln!(out, "  package {}: {}{os}", p.id, cpus_or_none(&p.cpus));
        }
    }
    if !host.numa_nodes.is_empty() {
        let _ = writeln!(out, "\nnuma nodes:");
        for n in &host.numa_nodes {
            let cpus = cpus_or_none(&n.cpus);
            let mut mem = n
                .memory_bytes
                .map(|m| format!(", {}", bytes(m)))
                .unwrap_or_default();
            if let Some(free) = n.memory_free_bytes {
                mem.push_str(&format!(" ({} free)", bytes(free)));
            }
            let pools: Vec<String> = n
                .hugepages
                .iter()
                .map(|p| {
                    let free = p.free.map(|f| format!(", {f} free")).unwrap_or_default();
                    format!(
                        "{} × {}{free}",
                        p.total,
                        bytes(p.size_kib.saturating_mul(1024))
                    )
                })
                .collect();
            if !pools.is_empty() {
                mem.push_str(&format!("; huge pages: {}", pools.join("; ")));
            }
            if !n.distances.is_empty() {
                let to: Vec<String> = n
                    .distances
                    .iter()
                    .map(|d| format!("{}:{}", d.node, d.value))
                    .collect();
                mem.push_str(&format!("; distances (node:value) {}", to.join(" ")));
            }
            let _ = writeln!(out, "  node {}: {cpus}{mem}", n.id);
        }
    }
    if !host.l3_domains.is_empty() {
        let _ = writeln!(out, "\nl3 domains:");
        for d in &host.l3_domains {
            let size = d
                .size_bytes
                .map(|s| format!(", {}", bytes(s)))
                .unwrap_or_default();
            let _ = writeln!(out, "  l3 {}: {}{size}", d.id, cpus_or_none(&d.cpus));
        }
    }
}

/// One line per core, its CPUs aligned, unusable ones starred.
fn cores(out: &mut String, host: &HostTopology) {
    let usable = host.usable_cpus();
    let _ = writeln!(out, "\ncores (* = CPU not usable):");
    let labels: Vec<String> = host
        .cores
        .iter()
        .map(|c| {
            let cpus: Vec<String> = c
                .cpus
                .iter()
                .map(|cpu| {
                    if usable.contains(cpu) {
                        cpu.to_string()
                    } else {
                        format!("{cpu}*")
                    }
                })
                .collect();
            format!("core {}: cpus {}", c.id, cpus.join(","))
        })
        .collect();
    let width = labels.iter().map(String::len).max().unwrap_or(0);
    for (core, label) in host.cores.iter().zip(&labels) {
        let _ = writeln!(
            out,
            "  {label:width$}  package {}, node {}, l3 {}",
            opt(core.package),
            opt(core.numa_node),
            opt(core.l3)
        );
    }
}

/// The CPUs a plan may not use, and why.
fn unusable_cpus(out: &mut String, host: &HostTopology) {
    let unusable: Vec<String> = host
        .pus
        .iter()
        .filter(|p| !p.usable)
        .map(|p| {
            let why = match (p.online, p.allowed) {
                (false, false) => "offline or not allowed",
                (false, true) => "offline",
                _ => "not allowed (cgroup/cpuset)",
            };
            format!("  cpu {}: {why}", p.cpu)
        })
        .collect();
    if !unusable.is_empty() {
        let _ = writeln!(out, "\nunusable cpus:");
        for line in unusable {
            let _ = writeln!(out, "{line}");
        }
    }
}

/// PCI devices with their names, node and link.
fn pci_devices(out: &mut String, host: &HostTopology) {
    if !host.pci.is_empty() {
        let _ = writeln!(out, "\npci devices:");
        for d in &host.pci {
            let names = if d.names.is_empty() {
                String::new()
            } else {
                format!(" [{}]", d.names.join(", "))
            };
            let node = d
                .numa_node
                .map_or_else(|| "node unknown".to_owned(), |n| format!("node {n}"));
            let link = d.link.as_ref().map(link).filter(|l| !l.is_empty());
            let link = link.map(|l| format!(", link {l}")).unwrap_or_default();
            let _ = writeln!(out, "  {} {}{names}: {node}{link}", d.address, d.class);
        }
    }
}
