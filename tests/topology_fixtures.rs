//! `pinplan topology --format json` on every hwloc XML and libvirt capabilities
//! fixture, compared against an independent reading of the same XML file done
//! here with `roxmltree` (the planner crate is deliberately not used).
//!
//! The oracle reads the raw XML and applies only the transformations that hwloc
//! 2.x itself applies when it imports a file; each such rule is written down
//! next to the code that encodes it. Every fixture is checked, all differences
//! are collected, and the test fails once at the end with the whole list.

use crate::util::{self, arg, fixture};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;

type Cpus = BTreeSet<u32>;

// ---------------------------------------------------------------------------
// CPU sets
// ---------------------------------------------------------------------------

/// Parses a Linux cpulist ("0-3,8,10-11"; "" is the empty set).
fn parse_cpulist(text: &str) -> Result<Cpus, String> {
    let mut set = Cpus::new();
    if text.trim().is_empty() {
        return Ok(set);
    }
    for part in text.split(',') {
        let part = part.trim();
        let number = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|e| format!("bad cpulist {text:?}: {s:?}: {e}"))
        };
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (number(first)?, number(last)?);
                if first > last {
                    return Err(format!("bad cpulist {text:?}: range {part:?} is reversed"));
                }
                set.extend(first..=last);
            }
            None => {
                set.insert(number(part)?);
            }
        }
    }
    Ok(set)
}

/// Canonical cpulist: ascending, maximal ranges, "a-b" for 2+ CPUs... except
/// that two consecutive CPUs are written as a range too ("0-1"), like the
/// kernel does.
fn format_cpulist(set: &Cpus) -> String {
    let mut parts = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(first) = iter.next() {
        let mut last = first;
        while iter.peek() == Some(&(last + 1)) {
            last += 1;
            iter.next();
        }
        if first == last {
            parts.push(first.to_string());
        } else {
            parts.push(format!("{first}-{last}"));
        }
    }
    parts.join(",")
}

/// An hwloc bitmap as written in XML: comma-separated 32-bit hex words, most
/// significant first ("0x000000ff,0xff000000,,0x0000ffff"; an empty word is
/// zero). A leading "0xf...f" word means "every bit above the written words
/// is set too" (and "0xf...f" alone is the full, infinite set).
#[derive(Debug, Clone, Default)]
struct HwlocBitmap {
    bits: Cpus,
    /// Every bit from this index upward is set as well.
    infinite_from: Option<u32>,
}

impl HwlocBitmap {
    fn parse(text: &str) -> Result<Self, String> {
        let mut rest = text.trim();
        let mut infinite = false;
        if let Some(after) = rest.strip_prefix("0xf...f") {
            infinite = true;
            rest = after.strip_prefix(',').unwrap_or(after);
            if rest.is_empty() {
                return Ok(HwlocBitmap {
                    bits: Cpus::new(),
                    infinite_from: Some(0),
                });
            }
        }
        let words: Vec<&str> = rest.split(',').collect();
        let count = words.len();
        let mut bits = Cpus::new();
        for (i, word) in words.iter().enumerate() {
            let word = word.trim();
            if word.is_empty() {
                continue;
            }
            let hex = word
                .strip_prefix("0x")
                .ok_or_else(|| format!("bad hwloc bitmap {text:?}: word {word:?}"))?;
            let value = u64::from_str_radix(hex, 16)
                .map_err(|e| format!("bad hwloc bitmap {text:?}: word {word:?}: {e}"))?;
            if value > u64::from(u32::MAX) {
                return Err(format!(
                    "bad hwloc bitmap {text:?}: word {word:?} > 32 bits"
                ));
            }
            let base = 32 * u32::try_from(count - 1 - i).expect("few words");
            for bit in 0..32 {
                if value >> bit & 1 == 1 {
                    bits.insert(base + bit);
                }
            }
        }
        let width = 32 * u32::try_from(count).expect("few words");
        Ok(HwlocBitmap {
            bits,
            infinite_from: infinite.then_some(width),
        })
    }

    fn contains(&self, cpu: u32) -> bool {
        self.bits.contains(&cpu) || self.infinite_from.is_some_and(|from| cpu >= from)
    }
}

fn show(set: &Cpus) -> String {
    format!("{{{}}}", format_cpulist(set))
}

// ---------------------------------------------------------------------------
// What the program must print, according to the oracle
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ExpectedPackage {
    os_index: Option<u64>,
    cpus: Cpus,
}

#[derive(Debug, Default)]
struct Expected {
    /// Multiset (sorted list) of packages.
    packages: Vec<ExpectedPackage>,
    /// Every core as its set of CPUs.
    cores: BTreeSet<Cpus>,
    /// NUMA node OS id -> (online CPUs, memory in bytes if the file gives it).
    numa: BTreeMap<u64, (Cpus, Option<u64>)>,
    /// Multiset of L3 domains as (CPUs, size in bytes) (None: not checked for
    /// this kind of file).
    l3: Option<Vec<(Cpus, Option<u64>)>>,
    /// Every CPU the file knows (online or not).
    known: Cpus,
    /// CPUs that are online (have a PU / a topology entry).
    online: Cpus,
    /// Online CPUs that the file marks allowed.
    allowed: Cpus,
}

#[derive(Debug)]
enum Oracle {
    /// The file describes a topology; the program must print this.
    Topology(Box<Expected>),
    /// The program must refuse the file (exit 2) with a message containing this.
    Reject(&'static str),
}

fn read_xml(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("oracle cannot read the file: {e}"))
}

fn parse_doc(text: &str) -> Result<roxmltree::Document<'_>, String> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    roxmltree::Document::parse_with_options(text, options)
        .map_err(|e| format!("oracle cannot parse the XML: {e}"))
}

// ---------------------------------------------------------------------------
// hwloc XML oracle
// ---------------------------------------------------------------------------

fn is_object(node: &roxmltree::Node) -> bool {
    node.is_element() && node.has_tag_name("object")
}

fn obj_type<'a>(node: &roxmltree::Node<'a, '_>) -> &'a str {
    node.attribute("type").unwrap_or("")
}

/// OS indexes of the PU objects at or below `node`.
fn pus_below(node: &roxmltree::Node) -> Result<Cpus, String> {
    let mut set = Cpus::new();
    for pu in node
        .descendants()
        .filter(|n| is_object(n) && obj_type(n) == "PU")
    {
        let index = pu
            .attribute("os_index")
            .ok_or_else(|| "PU object without os_index".to_string())?;
        set.insert(
            index
                .parse()
                .map_err(|e| format!("PU os_index {index:?}: {e}"))?,
        );
    }
    Ok(set)
}

fn has_numa_below(node: &roxmltree::Node) -> bool {
    node.descendants()
        .any(|n| is_object(&n) && obj_type(&n) == "NUMANode")
}

/// hwloc 2 drops (`remove_empty()` in topology.c) a CPU-side object that ends up
/// with no PU and no memory attached below it. The oracle does the same for
/// packages and L3 caches, so a package that has lost all its CPUs to a cgroup
/// but still holds a NUMA node (gen29-16amd64-4n4c-cgroup-distance-merge.xml)
/// is expected, with an empty CPU set.
fn kept_by_hwloc(node: &roxmltree::Node, pus: &Cpus) -> bool {
    !pus.is_empty() || has_numa_below(node)
}

fn attr_bitmap(node: &roxmltree::Node, name: &str) -> Result<Option<HwlocBitmap>, String> {
    node.attribute(name)
        .map(|text| HwlocBitmap::parse(text).map_err(|e| format!("{name}: {e}")))
        .transpose()
}

fn is_l3(node: &roxmltree::Node, v1: bool) -> bool {
    match obj_type(node) {
        "L3Cache" => true,
        // hwloc 1.x wrote every cache as type="Cache" with depth/cache_type
        // attributes; hwloc 2 turns depth 3 unified/data caches into L3Cache
        // (cache_type 2 = instruction cache, which becomes L3iCache).
        "Cache" if v1 => {
            node.attribute("depth") == Some("3") && node.attribute("cache_type") != Some("2")
        }
        _ => false,
    }
}

fn hwloc_oracle(path: &Path) -> Result<Oracle, String> {
    let text = read_xml(path)?;
    let doc = parse_doc(&text)?;
    let topology = doc.root_element();
    if !topology.has_tag_name("topology") {
        return Err(format!(
            "root element is <{}>, not <topology>",
            topology.tag_name().name()
        ));
    }
    // No version attribute = hwloc 1.x format. "3.0" cannot be imported by
    // hwloc < 2.10 ("cannot import XML version 3.0 > 2"), so it must be refused.
    let v1 = match topology.attribute("version") {
        None => true,
        Some(version) if version.starts_with("1.") => true,
        Some(version) if version.starts_with("2.") => false,
        Some(version) if version.starts_with("3.") => return Ok(Oracle::Reject("format 3.0")),
        Some(version) => return Err(format!("unknown topology version {version:?}")),
    };
    let root = topology
        .children()
        .find(is_object)
        .ok_or("no root <object>")?;
    let objects: Vec<roxmltree::Node> = root.descendants().filter(is_object).collect();

    // PU objects are the online CPUs: hwloc never creates PU objects for
    // offline CPUs, which only show up in the root's complete_cpuset.
    let mut expected = Expected {
        online: pus_below(&root)?,
        ..Expected::default()
    };
    let root_cpuset = attr_bitmap(&root, "cpuset")?.ok_or("root object has no cpuset")?;
    if root_cpuset.bits != expected.online || root_cpuset.infinite_from.is_some() {
        return Err(format!(
            "fixture inconsistent: root cpuset {} but PU objects {}",
            show(&root_cpuset.bits),
            show(&expected.online)
        ));
    }

    // Known CPUs = complete_cpuset of the root (online + offline + CPUs
    // excluded when the file was exported). A v1 NUMANode root gets a Machine
    // inserted above it whose complete_cpuset is the node's cpuset
    // (topology-xml.c, "crazy case of NUMA node root"); both are equal in the
    // only such fixture. An infinite complete_cpuset tail is not enumerable:
    // only its written part is taken.
    let complete = attr_bitmap(&root, "complete_cpuset")?.unwrap_or_default();
    expected.known = complete.bits.union(&expected.online).copied().collect();

    // allowed_cpuset is only read on the root; hwloc 2 intersects it with the
    // root cpuset after loading (so CPUs outside the cpuset are never
    // "allowed"); a missing allowed_cpuset means everything is allowed. The
    // v1 online_cpuset attribute is ignored by hwloc 2 (topology-xml.c:
    // "deprecated from 1.x ... ignored").
    let allowed = attr_bitmap(&root, "allowed_cpuset")?;
    expected.allowed = expected
        .online
        .iter()
        .copied()
        .filter(|cpu| allowed.as_ref().is_none_or(|set| set.contains(*cpu)))
        .collect();

    // Packages ("Socket" in v1 files, which hwloc 2 reads as Package).
    let mut packages = Vec::new();
    for package in objects
        .iter()
        .filter(|n| matches!(obj_type(n), "Package" | "Socket"))
    {
        let cpus = pus_below(package)?;
        if !kept_by_hwloc(package, &cpus) {
            continue;
        }
        let os_index = package
            .attribute("os_index")
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|e| format!("package os_index {s:?}: {e}"))
            })
            .transpose()?;
        packages.push(ExpectedPackage { os_index, cpus });
    }
    packages.sort();
    expected.packages = packages;

    // Cores: the PUs of each Core object; a PU with no Core ancestor is a core
    // by itself. A Core with no PU left is removed by hwloc (remove_empty).
    let mut in_core = Cpus::new();
    for core in objects.iter().filter(|n| obj_type(n) == "Core") {
        let cpus = pus_below(core)?;
        if cpus.is_empty() {
            continue;
        }
        in_core.extend(cpus.iter().copied());
        if !expected.cores.insert(cpus.clone()) {
            return Err(format!(
                "two Core objects with the same PUs {}",
                show(&cpus)
            ));
        }
    }
    for cpu in expected.online.difference(&in_core) {
        expected.cores.insert(Cpus::from([*cpu]));
    }

    // NUMA nodes.
    let numa_objects: Vec<&roxmltree::Node> = objects
        .iter()
        .filter(|n| obj_type(n) == "NUMANode")
        .collect();
    for node in &numa_objects {
        let os_index: u64 = node
            .attribute("os_index")
            .ok_or("NUMANode without os_index")?
            .parse()
            .map_err(|e| format!("NUMANode os_index: {e}"))?;
        let cpus = if v1 {
            // v1: the NUMANode is an ordinary tree object and its CPUs are the
            // PUs below it. hwloc 2 re-attaches the node's children to the
            // node's parent and, when the node's locality differs from its
            // parent's, inserts a Group with the node's cpuset to carry it
            // (topology-xml.c, "insert a group above pre-v2.0 NUMA nodes"),
            // so the node keeps exactly the CPUs it had in the file.
            pus_below(node)?
        } else {
            // v2: the NUMANode is a memory child; its CPUs are those of the
            // nearest normal ancestor.
            let parent = node
                .ancestors()
                .skip(1)
                .find(|n| is_object(n) && !matches!(obj_type(n), "NUMANode" | "MemCache"))
                .ok_or("NUMANode without a normal parent")?;
            pus_below(&parent)?
        };
        let memory = node
            .attribute("local_memory")
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|e| format!("local_memory {s:?}: {e}"))
            })
            .transpose()?;
        // Nodes are listed when they have CPUs or memory.
        if cpus.is_empty() && memory.unwrap_or(0) == 0 {
            continue;
        }
        if expected.numa.insert(os_index, (cpus, memory)).is_some() {
            return Err(format!("two NUMANode objects with os_index {os_index}"));
        }
    }
    if numa_objects.is_empty() {
        // A file without any NUMA node (possible in v1): hwloc 2 always has at
        // least one, so it adds NUMA node P#0 covering the whole machine, and
        // the machine's local_memory becomes that node's memory
        // (lstopo 2.9 -i 8em64t-2p2ca2co-nonodesets.v1.xml shows exactly that).
        let memory = root
            .attribute("local_memory")
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|e| format!("local_memory {s:?}: {e}"))
            })
            .transpose()?;
        expected.numa.insert(0, (expected.online.clone(), memory));
    }

    // L3 domains.
    let mut l3 = Vec::new();
    for cache in objects.iter().filter(|n| is_l3(n, v1)) {
        let cpus = pus_below(cache)?;
        if kept_by_hwloc(cache, &cpus) {
            let size = cache
                .attribute("cache_size")
                .map(|s| {
                    s.parse::<u64>()
                        .map_err(|e| format!("cache_size {s:?}: {e}"))
                })
                .transpose()?;
            l3.push((cpus, size));
        }
    }
    l3.sort();
    expected.l3 = Some(l3);

    Ok(Oracle::Topology(Box::new(expected)))
}

// ---------------------------------------------------------------------------
// libvirt capabilities oracle
// ---------------------------------------------------------------------------

fn child<'a, 'i>(node: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    node.children()
        .find(|n| n.is_element() && n.has_tag_name(name))
}

fn caps_memory_bytes(memory: roxmltree::Node) -> Result<u64, String> {
    let amount: u64 = memory
        .text()
        .unwrap_or("")
        .trim()
        .parse()
        .map_err(|e| format!("cell <memory>: {e}"))?;
    // libvirt's default unit for <memory> is KiB.
    let factor: u64 = match memory.attribute("unit").unwrap_or("KiB") {
        "b" | "B" | "bytes" => 1,
        "k" | "K" | "KiB" => 1 << 10,
        "KB" => 1000,
        "M" | "MiB" => 1 << 20,
        "MB" => 1_000_000,
        "G" | "GiB" => 1 << 30,
        "GB" => 1_000_000_000,
        other => return Err(format!("cell <memory> unit {other:?}")),
    };
    Ok(amount * factor)
}

fn caps_oracle(path: &Path) -> Result<Oracle, String> {
    let text = read_xml(path)?;
    let doc = parse_doc(&text)?;
    let caps = doc.root_element();
    if !caps.has_tag_name("capabilities") {
        return Err("root element is not <capabilities>".into());
    }
    let Some(cells) = child(caps, "host")
        .and_then(|host| child(host, "topology"))
        .and_then(|topology| child(topology, "cells"))
    else {
        return Ok(Oracle::Reject("no <host><topology><cells>"));
    };

    struct CapsCpu {
        id: u32,
        cell: u64,
        socket: Option<u64>,
        siblings: Option<Cpus>,
        has_topology: bool,
    }
    let mut cpus = Vec::new();
    let mut expected = Expected::default();
    for cell in cells
        .children()
        .filter(|n| n.is_element() && n.has_tag_name("cell"))
    {
        let cell_id: u64 = cell
            .attribute("id")
            .ok_or("cell without id")?
            .parse()
            .map_err(|e| format!("cell id: {e}"))?;
        let memory = child(cell, "memory").map(caps_memory_bytes).transpose()?;
        expected.numa.insert(cell_id, (Cpus::new(), memory));
        for cpu in child(cell, "cpus")
            .into_iter()
            .flat_map(|c| c.children())
            .filter(|n| n.is_element() && n.has_tag_name("cpu"))
        {
            let id: u32 = cpu
                .attribute("id")
                .ok_or("cpu without id")?
                .parse()
                .map_err(|e| format!("cpu id: {e}"))?;
            let socket = cpu
                .attribute("socket_id")
                .map(|s| {
                    s.parse::<u64>()
                        .map_err(|e| format!("socket_id {s:?}: {e}"))
                })
                .transpose()?;
            let siblings = cpu.attribute("siblings").map(parse_cpulist).transpose()?;
            let has_topology = socket.is_some()
                || siblings.is_some()
                || cpu.attribute("core_id").is_some()
                || cpu.attribute("die_id").is_some();
            cpus.push(CapsCpu {
                id,
                cell: cell_id,
                socket,
                siblings,
                has_topology,
            });
        }
    }

    // When some <cpu> carry topology attributes, the ones without are offline
    // (libvirt writes only the id for a CPU it cannot read the topology of).
    // When none carry them, every CPU is online and its own core, and there is
    // no package information.
    let any_topology = cpus.iter().any(|c| c.has_topology);
    let mut packages: BTreeMap<u64, Cpus> = BTreeMap::new();
    for cpu in &cpus {
        expected.known.insert(cpu.id);
        if any_topology && !cpu.has_topology {
            continue;
        }
        expected.online.insert(cpu.id);
        if let Some((cell_cpus, _)) = expected.numa.get_mut(&cpu.cell) {
            cell_cpus.insert(cpu.id);
        }
        if let Some(socket) = cpu.socket {
            packages.entry(socket).or_default().insert(cpu.id);
        }
    }
    for cpu in &cpus {
        if !expected.online.contains(&cpu.id) {
            continue;
        }
        // A core is one `siblings` set (restricted to online CPUs).
        let core: Cpus = match &cpu.siblings {
            Some(siblings) if any_topology => siblings
                .intersection(&expected.online)
                .copied()
                .chain([cpu.id])
                .collect(),
            _ => Cpus::from([cpu.id]),
        };
        expected.cores.insert(core);
    }
    expected.packages = packages
        .into_iter()
        .map(|(socket, cpus)| ExpectedPackage {
            os_index: Some(socket),
            cpus,
        })
        .collect();
    expected.packages.sort();
    // Capabilities carry no notion of "allowed": every online CPU is allowed.
    expected.allowed = expected.online.clone();
    // L3 is not derived from capabilities by this oracle.
    expected.l3 = None;
    Ok(Oracle::Topology(Box::new(expected)))
}

// ---------------------------------------------------------------------------
// What the program printed
// ---------------------------------------------------------------------------

struct ActualCore {
    id: u64,
    package: Option<u64>,
    numa_node: Option<u64>,
    l3: Option<u64>,
    cpus: Vec<u32>,
}

struct ActualPu {
    cpu: u32,
    core: Option<u64>,
    usable: bool,
    online: bool,
    allowed: bool,
    numa_node: Option<u64>,
}

struct Actual {
    /// (id, os_index, cpus) in output order.
    packages: Vec<(u64, Option<u64>, Cpus)>,
    /// (id, cpus, memory_bytes) in output order.
    numa: Vec<(u64, Cpus, Option<u64>)>,
    /// (id, cpus, size_bytes) in output order.
    l3: Vec<(u64, Cpus, Option<u64>)>,
    cores: Vec<ActualCore>,
    pus: Vec<ActualPu>,
}

fn field<'a>(value: &'a Value, name: &str, context: &str) -> Result<&'a Value, String> {
    value
        .get(name)
        .ok_or_else(|| format!("JSON: {context} has no \"{name}\""))
}

fn array<'a>(value: &'a Value, name: &str, context: &str) -> Result<&'a Vec<Value>, String> {
    field(value, name, context)?
        .as_array()
        .ok_or_else(|| format!("JSON: {context}.{name} is not an array"))
}

fn uint(value: &Value, name: &str, context: &str) -> Result<u64, String> {
    field(value, name, context)?
        .as_u64()
        .ok_or_else(|| format!("JSON: {context}.{name} is not an unsigned integer"))
}

fn opt_uint(value: &Value, name: &str, context: &str) -> Result<Option<u64>, String> {
    let v = field(value, name, context)?;
    if v.is_null() {
        Ok(None)
    } else {
        v.as_u64().map(Some).ok_or_else(|| {
            format!("JSON: {context}.{name} is neither null nor an unsigned integer")
        })
    }
}

fn boolean(value: &Value, name: &str, context: &str) -> Result<bool, String> {
    field(value, name, context)?
        .as_bool()
        .ok_or_else(|| format!("JSON: {context}.{name} is not a boolean"))
}

/// Reads a "cpus" cpulist string and checks it is in canonical form.
fn cpus_string(value: &Value, context: &str, problems: &mut Vec<String>) -> Result<Cpus, String> {
    let text = field(value, "cpus", context)?
        .as_str()
        .ok_or_else(|| format!("JSON: {context}.cpus is not a string"))?;
    let set = parse_cpulist(text).map_err(|e| format!("JSON: {context}.cpus: {e}"))?;
    let canonical = format_cpulist(&set);
    if canonical != text {
        problems.push(format!(
            "{context}.cpus {text:?} is not canonical (expected {canonical:?})"
        ));
    }
    Ok(set)
}

fn parse_actual(json: &Value, problems: &mut Vec<String>) -> Result<Actual, String> {
    let mut actual = Actual {
        packages: Vec::new(),
        numa: Vec::new(),
        l3: Vec::new(),
        cores: Vec::new(),
        pus: Vec::new(),
    };
    for (i, p) in array(json, "packages", "top level")?.iter().enumerate() {
        let ctx = format!("packages[{i}]");
        actual.packages.push((
            uint(p, "id", &ctx)?,
            opt_uint(p, "os_index", &ctx)?,
            cpus_string(p, &ctx, problems)?,
        ));
    }
    for (i, n) in array(json, "numa_nodes", "top level")?.iter().enumerate() {
        let ctx = format!("numa_nodes[{i}]");
        actual.numa.push((
            uint(n, "id", &ctx)?,
            cpus_string(n, &ctx, problems)?,
            opt_uint(n, "memory_bytes", &ctx)?,
        ));
    }
    for (i, l) in array(json, "l3_domains", "top level")?.iter().enumerate() {
        let ctx = format!("l3_domains[{i}]");
        actual.l3.push((
            uint(l, "id", &ctx)?,
            cpus_string(l, &ctx, problems)?,
            opt_uint(l, "size_bytes", &ctx)?,
        ));
    }
    for (i, c) in array(json, "cores", "top level")?.iter().enumerate() {
        let ctx = format!("cores[{i}]");
        let cpus = array(c, "cpus", &ctx)?
            .iter()
            .map(|v| {
                v.as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| format!("JSON: {ctx}.cpus has a non-CPU entry {v}"))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        actual.cores.push(ActualCore {
            id: uint(c, "id", &ctx)?,
            package: opt_uint(c, "package", &ctx)?,
            numa_node: opt_uint(c, "numa_node", &ctx)?,
            l3: opt_uint(c, "l3", &ctx)?,
            cpus,
        });
    }
    for (i, p) in array(json, "pus", "top level")?.iter().enumerate() {
        let ctx = format!("pus[{i}]");
        let cpu = uint(p, "cpu", &ctx)?;
        actual.pus.push(ActualPu {
            cpu: u32::try_from(cpu).map_err(|e| format!("JSON: {ctx}.cpu: {e}"))?,
            core: opt_uint(p, "core", &ctx)?,
            usable: boolean(p, "usable", &ctx)?,
            online: boolean(p, "online", &ctx)?,
            allowed: boolean(p, "allowed", &ctx)?,
            numa_node: opt_uint(p, "numa_node", &ctx)?,
        });
    }
    Ok(actual)
}

// ---------------------------------------------------------------------------
// Comparison
// ---------------------------------------------------------------------------

/// Describes the difference between two multisets (sorted vectors).
fn multiset_diff<T: Ord + Clone>(
    what: &str,
    expected: &[T],
    actual: &[T],
    fmt: impl Fn(&T) -> String,
    problems: &mut Vec<String>,
) {
    let mut missing: Vec<T> = expected.to_vec();
    let mut extra = Vec::new();
    for item in actual {
        if let Some(pos) = missing.iter().position(|m| m == item) {
            missing.remove(pos);
        } else {
            extra.push(item.clone());
        }
    }
    if missing.is_empty() && extra.is_empty() {
        return;
    }
    let list = |items: &[T]| {
        let shown: Vec<String> = items.iter().take(8).map(&fmt).collect();
        let more = if items.len() > 8 {
            format!(" (+{} more)", items.len() - 8)
        } else {
            String::new()
        };
        format!("[{}]{more}", shown.join(", "))
    };
    problems.push(format!(
        "{what}: expected {} entries, program printed {}; missing {}; unexpected {}",
        expected.len(),
        actual.len(),
        list(&missing),
        list(&extra)
    ));
}

fn set_diff(what: &str, expected: &Cpus, actual: &Cpus, problems: &mut Vec<String>) {
    if expected != actual {
        let missing: Cpus = expected.difference(actual).copied().collect();
        let extra: Cpus = actual.difference(expected).copied().collect();
        problems.push(format!(
            "{what}: expected {}, program printed {} (missing {}, unexpected {})",
            show(expected),
            show(actual),
            show(&missing),
            show(&extra)
        ));
    }
}

/// Checks that ids are 0..n in array order and that non-empty entries are in
/// order of their lowest CPU.
fn check_dense<'a>(
    what: &str,
    entries: impl Iterator<Item = (u64, &'a Cpus)>,
    problems: &mut Vec<String>,
) {
    let mut last_first: Option<u32> = None;
    for (index, (id, cpus)) in entries.enumerate() {
        if id != index as u64 {
            problems.push(format!("{what}[{index}] has id {id}, expected {index}"));
        }
        if let Some(first) = cpus.first().copied() {
            if last_first.is_some_and(|last| last >= first) {
                problems.push(format!(
                    "{what}[{index}] (lowest CPU {first}) is not in order of lowest CPU"
                ));
            }
            last_first = Some(first);
        }
    }
}

/// (what, printed id, printed table of that kind, whether the file puts the
/// core in one).
type Link<'a> = (&'a str, Option<u64>, &'a BTreeMap<u64, &'a Cpus>, bool);

fn compare(expected: &Expected, actual: &Actual, problems: &mut Vec<String>) {
    // Packages: as a multiset of (os_index, cpus); this includes the count.
    let mut printed_packages: Vec<ExpectedPackage> = actual
        .packages
        .iter()
        .map(|(_, os_index, cpus)| ExpectedPackage {
            os_index: *os_index,
            cpus: cpus.clone(),
        })
        .collect();
    printed_packages.sort();
    if expected.packages.len() != printed_packages.len() {
        problems.push(format!(
            "package count: expected {}, program printed {}",
            expected.packages.len(),
            printed_packages.len()
        ));
    }
    multiset_diff(
        "packages (os_index, cpus)",
        &expected.packages,
        &printed_packages,
        |p| match p.os_index {
            Some(i) => format!("P#{i} {}", show(&p.cpus)),
            None => format!("P#? {}", show(&p.cpus)),
        },
        problems,
    );
    check_dense(
        "packages",
        actual.packages.iter().map(|(id, _, cpus)| (*id, cpus)),
        problems,
    );

    // Cores: as a set of CPU sets.
    let mut printed_cores: Vec<Cpus> = actual
        .cores
        .iter()
        .map(|c| c.cpus.iter().copied().collect())
        .collect();
    for core in &actual.cores {
        let sorted: Cpus = core.cpus.iter().copied().collect();
        if sorted.len() != core.cpus.len() {
            problems.push(format!(
                "core {} lists a CPU twice: {:?}",
                core.id, core.cpus
            ));
        }
    }
    printed_cores.sort();
    let expected_cores: Vec<Cpus> = expected.cores.iter().cloned().collect();
    if expected_cores.len() != printed_cores.len() {
        problems.push(format!(
            "core count: expected {}, program printed {}",
            expected_cores.len(),
            printed_cores.len()
        ));
    }
    multiset_diff("cores", &expected_cores, &printed_cores, show, problems);
    let core_sets: Vec<Cpus> = actual
        .cores
        .iter()
        .map(|c| c.cpus.iter().copied().collect())
        .collect();
    check_dense(
        "cores",
        actual.cores.iter().zip(&core_sets).map(|(c, s)| (c.id, s)),
        problems,
    );

    // NUMA nodes: CPU set (and memory, where the file gives it) by OS id.
    let mut printed_numa: BTreeMap<u64, (Cpus, Option<u64>)> = BTreeMap::new();
    for (id, cpus, memory) in &actual.numa {
        if printed_numa.insert(*id, (cpus.clone(), *memory)).is_some() {
            problems.push(format!("NUMA node {id} is printed twice"));
        }
    }
    let expected_ids: Vec<u64> = expected.numa.keys().copied().collect();
    let printed_ids: Vec<u64> = printed_numa.keys().copied().collect();
    if expected_ids != printed_ids {
        problems.push(format!(
            "NUMA node ids: expected {expected_ids:?}, program printed {printed_ids:?}"
        ));
    }
    for (id, (cpus, memory)) in &expected.numa {
        let Some((printed_cpus, printed_memory)) = printed_numa.get(id) else {
            continue;
        };
        set_diff(
            &format!("NUMA node {id} cpus"),
            cpus,
            printed_cpus,
            problems,
        );
        match memory {
            Some(bytes) if printed_memory != &Some(*bytes) => problems.push(format!(
                "NUMA node {id} memory_bytes: expected {bytes}, program printed {printed_memory:?}"
            )),
            None if printed_memory.is_some_and(|b| b != 0) => problems.push(format!(
                "NUMA node {id} memory_bytes: the file gives no memory size, program printed {printed_memory:?}"
            )),
            _ => {}
        }
    }

    // L3 domains: multiset of CPU sets.
    if let Some(l3) = &expected.l3 {
        let mut printed: Vec<(Cpus, Option<u64>)> = actual
            .l3
            .iter()
            .map(|(_, cpus, size)| (cpus.clone(), *size))
            .collect();
        printed.sort();
        multiset_diff(
            "L3 domains (cpus, size_bytes)",
            l3,
            &printed,
            |(cpus, size)| match size {
                Some(bytes) => format!("{} {bytes} B", show(cpus)),
                None => format!("{} size ?", show(cpus)),
            },
            problems,
        );
    }
    check_dense(
        "l3_domains",
        actual.l3.iter().map(|(id, cpus, _)| (*id, cpus)),
        problems,
    );

    // Links from cores to their package / NUMA node / L3.
    let packages_by_id: BTreeMap<u64, &Cpus> =
        actual.packages.iter().map(|(id, _, c)| (*id, c)).collect();
    let numa_by_id: BTreeMap<u64, &Cpus> = actual.numa.iter().map(|(id, c, _)| (*id, c)).collect();
    let l3_by_id: BTreeMap<u64, &Cpus> = actual.l3.iter().map(|(id, c, _)| (*id, c)).collect();
    for (core, cpus) in actual.cores.iter().zip(&core_sets) {
        let containing = |sets: &mut dyn Iterator<Item = &Cpus>| -> bool {
            for set in sets {
                if !cpus.is_empty() && cpus.is_subset(set) {
                    return true;
                }
            }
            false
        };
        let links: [Link; 3] = [
            (
                "package",
                core.package,
                &packages_by_id,
                containing(&mut expected.packages.iter().map(|p| &p.cpus)),
            ),
            (
                "numa_node",
                core.numa_node,
                &numa_by_id,
                containing(&mut expected.numa.values().map(|(c, _)| c)),
            ),
            (
                "l3",
                core.l3,
                &l3_by_id,
                match &expected.l3 {
                    Some(l3) => containing(&mut l3.iter().map(|(cpus, _)| cpus)),
                    None => core.l3.is_some(),
                },
            ),
        ];
        for (what, link, table, should_have) in links {
            match link {
                Some(id) => match table.get(&id) {
                    Some(target) if cpus.is_subset(target) => {}
                    Some(target) => problems.push(format!(
                        "core {} {} has {what} {id} whose cpus {} do not contain it",
                        core.id,
                        show(cpus),
                        show(target)
                    )),
                    None => problems.push(format!(
                        "core {} {} refers to {what} {id}, which is not printed",
                        core.id,
                        show(cpus)
                    )),
                },
                None if should_have => problems.push(format!(
                    "core {} {} has {what} null, but the file puts it in one",
                    core.id,
                    show(cpus)
                )),
                None => {}
            }
        }
    }

    // PUs: every CPU the file knows, online or not, and usable ones.
    let mut printed_known = Cpus::new();
    for pu in &actual.pus {
        if !printed_known.insert(pu.cpu) {
            problems.push(format!("pus: CPU {} is listed twice", pu.cpu));
        }
    }
    set_diff(
        "all CPUs (pus[].cpu)",
        &expected.known,
        &printed_known,
        problems,
    );
    let printed_online: Cpus = actual
        .pus
        .iter()
        .filter(|p| p.online)
        .map(|p| p.cpu)
        .collect();
    set_diff("online CPUs", &expected.online, &printed_online, problems);
    let expected_usable = &expected.allowed; // allowed is already restricted to online
    let printed_usable: Cpus = actual
        .pus
        .iter()
        .filter(|p| p.usable)
        .map(|p| p.cpu)
        .collect();
    set_diff("usable CPUs", expected_usable, &printed_usable, problems);
    let printed_allowed_online: Cpus = actual
        .pus
        .iter()
        .filter(|p| p.online && p.allowed)
        .map(|p| p.cpu)
        .collect();
    set_diff(
        "allowed online CPUs",
        &expected.allowed,
        &printed_allowed_online,
        problems,
    );
    let cores_by_id: BTreeMap<u64, &Cpus> = actual
        .cores
        .iter()
        .zip(&core_sets)
        .map(|(c, s)| (c.id, s))
        .collect();
    let mut bad_links = Vec::new();
    for pu in &actual.pus {
        if pu.usable != (pu.online && pu.allowed) {
            problems.push(format!(
                "pu {}: usable={} but online={} allowed={}",
                pu.cpu, pu.usable, pu.online, pu.allowed
            ));
        }
        let expected_core = expected.cores.iter().find(|c| c.contains(&pu.cpu));
        match (expected_core, pu.core) {
            (Some(want), Some(id)) => {
                if cores_by_id.get(&id).copied() != Some(want) {
                    bad_links.push(format!(
                        "pu {} core {id} = {}, expected the core {}",
                        pu.cpu,
                        cores_by_id.get(&id).map_or("(missing)".into(), |s| show(s)),
                        show(want)
                    ));
                }
            }
            (Some(want), None) => bad_links.push(format!(
                "pu {} has core null, expected the core {}",
                pu.cpu,
                show(want)
            )),
            (None, Some(id)) => bad_links.push(format!(
                "pu {} is offline in the file but has core {id}",
                pu.cpu
            )),
            (None, None) => {}
        }
        if expected.online.contains(&pu.cpu) {
            let nodes: Vec<u64> = expected
                .numa
                .iter()
                .filter(|(_, (cpus, _))| cpus.contains(&pu.cpu))
                .map(|(id, _)| *id)
                .collect();
            let ok = match pu.numa_node {
                Some(id) => nodes.contains(&id),
                None => nodes.is_empty(),
            };
            if !ok {
                bad_links.push(format!(
                    "pu {} numa_node {:?}, expected one of {nodes:?}",
                    pu.cpu, pu.numa_node
                ));
            }
        }
    }
    if !bad_links.is_empty() {
        let count = bad_links.len();
        bad_links.truncate(8);
        problems.push(format!("{count} bad pu links: {}", bad_links.join("; ")));
    }
}

// ---------------------------------------------------------------------------
// Running the program
// ---------------------------------------------------------------------------

fn run_pinplan(source: &Path) -> Output {
    util::pinplan(["topology", "--source", arg(source), "--format", "json"])
}

/// Runs the program on one fixture and returns what is wrong.
fn check_fixture(path: &Path, oracle: Result<Oracle, String>) -> Vec<String> {
    let oracle = match oracle {
        Ok(oracle) => oracle,
        Err(e) => return vec![format!("oracle: {e}")],
    };
    let output = run_pinplan(path);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let mut problems = Vec::new();
    match oracle {
        Oracle::Reject(fragment) => {
            if output.status.code() != Some(2) {
                problems.push(format!(
                    "must be refused (exit 2), got {:?}",
                    output.status.code()
                ));
            }
            if !stderr.starts_with("error: ") || !stderr.contains(fragment) {
                problems.push(format!(
                    "stderr must start with \"error: \" and mention {fragment:?}, got {stderr:?}"
                ));
            }
            if !stdout.is_empty() {
                problems.push("stdout must be empty on error".into());
            }
        }
        Oracle::Topology(expected) => {
            if !output.status.success() {
                problems.push(format!(
                    "exit status {:?}, stderr: {}",
                    output.status.code(),
                    stderr.trim()
                ));
                return problems;
            }
            let json: Value = match serde_json::from_str(&stdout) {
                Ok(json) => json,
                Err(e) => return vec![format!("stdout is not JSON: {e}")],
            };
            match parse_actual(&json, &mut problems) {
                Ok(actual) => compare(&expected, &actual, &mut problems),
                Err(e) => problems.push(e),
            }
        }
    }
    problems
}

fn fixtures(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    files.sort();
    files
}

/// Checks every fixture of a directory (on two threads) and fails once with
/// every problem of every fixture.
fn check_directory(dir: &str, oracle: fn(&Path) -> Result<Oracle, String>, minimum: usize) {
    let files = fixtures(&fixture(dir));
    assert!(
        files.len() >= minimum,
        "expected at least {minimum} fixtures in {dir}, found {}",
        files.len()
    );
    let results: Vec<(PathBuf, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|worker| {
                let files = &files;
                scope.spawn(move || {
                    files
                        .iter()
                        .skip(worker)
                        .step_by(2)
                        .map(|path| (path.clone(), check_fixture(path, oracle(path))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("worker thread"))
            .collect()
    });
    let mut failures = Vec::new();
    let mut failed_files = 0;
    for (path, problems) in &results {
        if problems.is_empty() {
            continue;
        }
        failed_files += 1;
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        for problem in problems {
            failures.push(format!("{name}: {problem}"));
        }
    }
    failures.sort();
    assert!(
        failures.is_empty(),
        "{failed_files} of {} fixtures in {dir} disagree with the oracle:\n{}",
        results.len(),
        failures.join("\n")
    );
}

#[test]
fn hwloc_xml_fixtures_match_the_oracle() {
    check_directory("hwloc-xml", hwloc_oracle, 90);
}

#[test]
fn libvirt_caps_fixtures_match_the_oracle() {
    check_directory("libvirt-caps", caps_oracle, 16);
}

/// No capabilities fixture has a `<cpu>` without topology attributes next to
/// ones with them (libvirt's way of showing an offline CPU), so one was
/// written for this test (`inputs/caps-offline-cpu.xml`) and is checked
/// through the same oracle.
#[test]
fn caps_cpu_without_topology_attributes_is_offline() {
    let path = fixture("inputs/caps-offline-cpu.xml");
    let oracle = caps_oracle(&path);
    let problems = check_fixture(&path, oracle);
    let output = run_pinplan(&path);
    assert!(problems.is_empty(), "{problems:#?}");
    let json: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(pu(&json, 2)["online"], Value::Bool(false));
    assert_eq!(numa_node(&json, 0)["cpus"], "0-1");
    assert_eq!(numa_ids(&json), [0, 3]);
}

// ---------------------------------------------------------------------------
// Oracle self-tests (the oracle's own parsers)
// ---------------------------------------------------------------------------

#[test]
fn oracle_parses_hwloc_bitmaps() {
    let set = HwlocBitmap::parse("0x000000ff,0xff000000,,0x0000ffff").unwrap();
    let mut want: Cpus = (0..16).collect();
    want.extend(88..104);
    assert_eq!(set.bits, want);
    assert_eq!(set.infinite_from, None);
    assert_eq!(HwlocBitmap::parse("0x0").unwrap().bits, Cpus::new());
    let inf = HwlocBitmap::parse("0xf...f,0x00000003").unwrap();
    assert_eq!(inf.bits, Cpus::from([0, 1]));
    assert!(inf.contains(32) && inf.contains(1000) && !inf.contains(2));
    assert!(HwlocBitmap::parse("0xf...f").unwrap().contains(7));
}

#[test]
fn oracle_parses_and_formats_cpulists() {
    let set = parse_cpulist("0-1,3,8-10").unwrap();
    assert_eq!(set, Cpus::from([0, 1, 3, 8, 9, 10]));
    assert_eq!(format_cpulist(&set), "0-1,3,8-10");
    assert_eq!(format_cpulist(&Cpus::new()), "");
    assert_eq!(parse_cpulist("").unwrap(), Cpus::new());
}

// ---------------------------------------------------------------------------
// Hand-checked cases from PROVENANCE-INDEX.md (literal values, no oracle)
// ---------------------------------------------------------------------------

fn json_of(path: &Path) -> Value {
    util::pinplan_json(&["topology", "--source", arg(path), "--format", "json"])
}

fn hwloc(name: &str) -> PathBuf {
    fixture("hwloc-xml").join(name)
}

fn caps(name: &str) -> PathBuf {
    fixture("libvirt-caps").join(name)
}

/// The CPUs of the core that `cpu` belongs to, found through pus[].core.
fn core_of(json: &Value, cpu: u64) -> Vec<u64> {
    let pu = pu(json, cpu);
    let core = pu["core"].as_u64().expect("pu has a core");
    let core = json["cores"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"].as_u64() == Some(core))
        .expect("core id exists");
    let mut cpus: Vec<u64> = core["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    cpus.sort_unstable();
    cpus
}

fn pu(json: &Value, cpu: u64) -> &Value {
    json["pus"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["cpu"].as_u64() == Some(cpu))
        .unwrap_or_else(|| panic!("CPU {cpu} is not in pus"))
}

fn count(json: &Value, list: &str) -> usize {
    json[list].as_array().unwrap().len()
}

fn numa_ids(json: &Value) -> Vec<u64> {
    json["numa_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_u64().unwrap())
        .collect()
}

fn numa_node(json: &Value, id: u64) -> &Value {
    json["numa_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"].as_u64() == Some(id))
        .unwrap_or_else(|| panic!("NUMA node {id} is not printed"))
}

fn usable(json: &Value) -> Vec<u64> {
    json["pus"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["usable"] == Value::Bool(true))
        .map(|p| p["cpu"].as_u64().unwrap())
        .collect()
}

#[test]
fn broadwell_siblings_are_n_and_n_plus_28() {
    let json = json_of(&hwloc("x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml"));
    assert_eq!(core_of(&json, 0), [0, 28]);
    assert_eq!(core_of(&json, 27), [27, 55]);
    assert_eq!(count(&json, "packages"), 2);
    assert_eq!(count(&json, "cores"), 28);
    assert_eq!(count(&json, "pus"), 56);
}

#[test]
fn e5_4640_siblings_are_n_and_n_plus_192() {
    for name in ["192em64t-24n8c2t.xml", "192em64t-12gr2n8c2t.xml"] {
        let json = json_of(&hwloc(name));
        assert_eq!(core_of(&json, 0), [0, 192], "{name}");
        assert_eq!(core_of(&json, 191), [191, 383], "{name}");
        assert_eq!(count(&json, "packages"), 24, "{name}");
        assert_eq!(count(&json, "cores"), 192, "{name}");
        assert_eq!(count(&json, "numa_nodes"), 24, "{name}");
        assert_eq!(count(&json, "pus"), 384, "{name}");
    }
}

#[test]
fn knights_landing_smt4_siblings_are_64_apart() {
    let json = json_of(&hwloc("x86-Intel-KnightsLanding-XeonPhi-7210.xml"));
    assert_eq!(core_of(&json, 0), [0, 64, 128, 192]);
    assert_eq!(core_of(&json, 192), [0, 64, 128, 192]);
    assert_eq!(count(&json, "cores"), 64);
}

#[test]
fn power7_has_sparse_numa_ids_and_adjacent_smt4() {
    let json = json_of(&hwloc("gen29-256ppc-8n8s4t.xml"));
    assert_eq!(numa_ids(&json), [0, 1, 4, 5, 8, 9, 12, 13]);
    assert_eq!(core_of(&json, 0), [0, 1, 2, 3]);
    assert_eq!(core_of(&json, 255), [252, 253, 254, 255]);
    assert_eq!(count(&json, "cores"), 64);
    assert_eq!(count(&json, "pus"), 256);
}

#[test]
fn offline_cpus_are_listed_but_not_usable() {
    let json = json_of(&hwloc("linux-16em64t-4s2c2t-offlines.xml"));
    assert_eq!(count(&json, "pus"), 16);
    for cpu in [2, 5, 13, 14] {
        let pu = pu(&json, cpu);
        assert_eq!(pu["online"], Value::Bool(false), "CPU {cpu}");
        assert_eq!(pu["usable"], Value::Bool(false), "CPU {cpu}");
        assert!(pu["core"].is_null(), "CPU {cpu}");
    }
    assert_eq!(usable(&json), [0, 1, 3, 4, 6, 7, 8, 9, 10, 11, 12, 15]);
    // Siblings are N and N+8: of 2/10 only 10 is online, of 6/14 only 6,
    // and 5/13 are both offline, which leaves 7 cores.
    assert_eq!(core_of(&json, 10), [10]);
    assert_eq!(core_of(&json, 6), [6]);
    assert_eq!(core_of(&json, 0), [0, 8]);
    assert_eq!(count(&json, "cores"), 7);
}

#[test]
fn cgroup_restricted_cpus_are_listed_but_not_usable() {
    // 4 of 16 CPUs allowed; nodes 2 and 3 keep their memory but no CPU.
    let json = json_of(&hwloc("gen29-16amd64-4n4c-cgroup-distance-merge.xml"));
    assert_eq!(count(&json, "pus"), 16);
    assert_eq!(usable(&json), [0, 1, 2, 3]);
    for cpu in 4..16 {
        assert_eq!(pu(&json, cpu)["usable"], Value::Bool(false), "CPU {cpu}");
        assert!(pu(&json, cpu)["core"].is_null(), "CPU {cpu}");
    }
    assert_eq!(numa_ids(&json), [2, 3]);
    assert_eq!(numa_node(&json, 2)["cpus"], "");
    assert_eq!(numa_node(&json, 2)["memory_bytes"], 8_589_934_592_u64);
    // hwloc 2.9 keeps packages P#2 and P#3 (they hold NUMA nodes 2 and 3):
    // lstopo shows 3 packages, and PROVENANCE-INDEX.md says "P3/N2/C4/PU4".
    assert_eq!(
        count(&json, "packages"),
        3,
        "packages P#2 and P#3 have no allowed CPU but hold NUMA nodes 2 and 3"
    );

    // cgroup v2: 6 of 32 CPUs allowed.
    let json = json_of(&hwloc("linux-32amd64-4s2n4c-cgroup2.xml"));
    assert_eq!(count(&json, "pus"), 32);
    assert_eq!(usable(&json), [0, 1, 2, 3, 4, 5]);
    assert_eq!(count(&json, "cores"), 6);
}

#[test]
fn itanium_cpuless_numa_node_16_is_listed() {
    let json = json_of(&hwloc("gen29-128ia64-17n4s2c.xml"));
    assert_eq!(count(&json, "numa_nodes"), 17);
    assert_eq!(numa_node(&json, 16)["cpus"], "");
    let json = json_of(&hwloc("8ia64-2n2s2c+1n.v1.xml"));
    assert_eq!(numa_ids(&json), [0, 2, 16]);
    assert_eq!(numa_node(&json, 16)["cpus"], "");
    assert_eq!(numa_node(&json, 16)["memory_bytes"], 1_044_660_224_u64);
    assert_eq!(numa_node(&json, 2)["cpus"], "16-19");
    assert_eq!(usable(&json), [0, 1, 2, 3, 16, 17, 18, 19]);
}

#[test]
fn v1_file_without_numa_gets_one_node() {
    let json = json_of(&hwloc("8em64t-2p2ca2co-nonodesets.v1.xml"));
    assert_eq!(numa_ids(&json), [0]);
    assert_eq!(numa_node(&json, 0)["cpus"], "0-7");
    assert_eq!(count(&json, "packages"), 2);
    assert_eq!(core_of(&json, 4), [4]);
}

#[test]
fn hmat_caps_has_cpuless_cell_1() {
    let json = json_of(&caps("vircaps-x86_64-hmat.xml"));
    assert_eq!(numa_ids(&json), [0, 1]);
    assert_eq!(numa_node(&json, 0)["cpus"], "0-23");
    assert_eq!(numa_node(&json, 1)["cpus"], "");
    assert_eq!(numa_node(&json, 1)["memory_bytes"], 2_097_152_u64 * 1024);
    assert_eq!(count(&json, "packages"), 24);
}

#[test]
fn qemu_kvm_caps_has_2_sockets_16_cores() {
    let json = json_of(&caps("caps-qemu-kvm.xml"));
    assert_eq!(count(&json, "packages"), 2);
    assert_eq!(count(&json, "cores"), 16);
    assert_eq!(numa_node(&json, 0)["cpus"], "0,2,4,6,8,10,12,14");
    assert_eq!(numa_node(&json, 1)["cpus"], "1,3,5,7,9,11,13,15");
}

#[test]
fn caps_without_topology_attributes_have_one_cpu_per_core() {
    let json = json_of(&caps("caps-test.xml"));
    assert_eq!(count(&json, "packages"), 0);
    assert_eq!(count(&json, "cores"), 16);
    assert_eq!(core_of(&json, 3), [3]);
    assert_eq!(numa_node(&json, 1)["cpus"], "1,3,5,7,9,11,13,15");
}

#[test]
fn caps_smt_siblings_n_and_n_plus_4() {
    let json = json_of(&caps("vircaps-x86_64-caches.xml"));
    assert_eq!(core_of(&json, 0), [0, 4]);
    assert_eq!(core_of(&json, 7), [3, 7]);
    assert_eq!(count(&json, "cores"), 4);
}

// ---------------------------------------------------------------------------
// NUMA distances and the CPU vendor (issue 18: guest cell distances, topoext)
// ---------------------------------------------------------------------------

/// (from, to) → value as a file gives it: hwloc 2's `<distances2
/// type="NUMANode" name="NUMALatency" indexing="os">` (OS indexes, then the
/// row-major values, both possibly split over several elements), or libvirt's
/// `<cell id><distances><sibling id value/>`. `None` when the file has none.
type Distances = BTreeMap<(u64, u64), u64>;

fn file_distances(path: &Path) -> Result<Option<Distances>, String> {
    let text = read_xml(path)?;
    let doc = parse_doc(&text)?;
    let numbers = |node: roxmltree::Node, tag: &str| -> Result<Vec<u64>, String> {
        let mut out = Vec::new();
        for part in node.children().filter(|c| c.has_tag_name(tag)) {
            for word in part.text().unwrap_or("").split_whitespace() {
                out.push(word.parse().map_err(|e| format!("{tag} {word:?}: {e}"))?);
            }
        }
        Ok(out)
    };
    if doc.root_element().has_tag_name("capabilities") {
        let mut out = BTreeMap::new();
        for cell in doc.descendants().filter(|n| n.has_tag_name("cell")) {
            let Some(id) = cell.attribute("id") else {
                continue;
            };
            for sibling in cell.descendants().filter(|n| n.has_tag_name("sibling")) {
                let num = |a: &str| -> Result<u64, String> {
                    sibling
                        .attribute(a)
                        .unwrap_or("")
                        .parse()
                        .map_err(|e| format!("sibling {a}: {e}"))
                };
                let from: u64 = id.parse().map_err(|e| format!("cell id: {e}"))?;
                out.insert((from, num("id")?), num("value")?);
            }
        }
        return Ok((!out.is_empty()).then_some(out));
    }
    // hwloc 1.x: `<distances nbobjs latency_base>` of relative latencies
    // (value = latency × base), over the NUMA nodes in document order.
    if let Some(matrix) = doc
        .descendants()
        .find(|n| n.has_tag_name("distances") && n.attribute("latency_base").is_some())
    {
        let nodes: Vec<u64> = doc
            .descendants()
            .filter(|n| is_object(n) && obj_type(n) == "NUMANode")
            .filter_map(|n| n.attribute("os_index")?.parse().ok())
            .collect();
        let base: f64 = matrix
            .attribute("latency_base")
            .unwrap_or("")
            .parse()
            .map_err(|e| format!("latency_base: {e}"))?;
        let values: Vec<f64> = matrix
            .children()
            .filter(|c| c.has_tag_name("latency"))
            .map(|c| {
                c.attribute("value")
                    .unwrap_or("")
                    .parse()
                    .unwrap_or(f64::NAN)
            })
            .collect();
        let n = nodes.len();
        if n == 0 || values.len() != n * n {
            return Ok(None);
        }
        let mut out = BTreeMap::new();
        for (k, v) in values.into_iter().enumerate() {
            out.insert((nodes[k / n], nodes[k % n]), (v * base).round() as u64);
        }
        return Ok(Some(out));
    }
    let Some(matrix) = doc.descendants().find(|n| {
        n.has_tag_name("distances2")
            && n.attribute("type") == Some("NUMANode")
            // hwloc's NUMA latency matrix: named so, or (files converted
            // from 1.x) unnamed with the latency bit (4) in its kind.
            && matches!(n.attribute("name"), Some("NUMALatency") | None)
            && n.attribute("kind").and_then(|k| k.parse::<u32>().ok()).is_some_and(|k| k & 4 != 0)
            && n.attribute("indexing") == Some("os")
    }) else {
        return Ok(None);
    };
    let indexes = numbers(matrix, "indexes")?;
    let values = numbers(matrix, "u64values")?;
    let n = indexes.len();
    if values.len() != n * n {
        return Err(format!("{} values for {n} nodes", values.len()));
    }
    let mut out = BTreeMap::new();
    for (k, value) in values.into_iter().enumerate() {
        out.insert((indexes[k / n], indexes[k % n]), value);
    }
    Ok(Some(out))
}

/// The first `CPUVendor` info of a Package (hwloc), or `<host><cpu><vendor>`.
fn file_vendor(path: &Path) -> Result<Option<String>, String> {
    let text = read_xml(path)?;
    let doc = parse_doc(&text)?;
    if doc.root_element().has_tag_name("capabilities") {
        return Ok(doc
            .descendants()
            .find(|n| n.has_tag_name("cpu") && n.parent().is_some_and(|p| p.has_tag_name("host")))
            .and_then(|cpu| child(cpu, "vendor"))
            .and_then(|v| v.text())
            .map(|t| t.trim().to_owned()));
    }
    Ok(doc
        .descendants()
        .filter(|n| is_object(n) && obj_type(n) == "Package")
        .flat_map(|p| p.children().filter(|c| c.has_tag_name("info")))
        .find(|i| i.attribute("name") == Some("CPUVendor"))
        .and_then(|i| i.attribute("value"))
        // pinplan trims the value (hwloc keeps CPUID's padding).
        .map(|v| v.trim().to_owned()))
}

/// Every fixture's NUMA distances and CPU vendor, as the program prints
/// them, against the file read here. Must find distances in at least 10
/// files and vendors in at least 20, so that it cannot pass by reading none.
#[test]
fn numa_distances_and_the_cpu_vendor_match_the_files() {
    let mut problems = Vec::new();
    let (mut with_distances, mut with_vendor) = (0, 0);
    for dir in ["hwloc-xml", "libvirt-caps"] {
        for path in fixtures(&fixture(dir)) {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let out = run_pinplan(&path);
            if !out.status.success() {
                continue; // refused files are the error tests' business
            }
            let json: Value = serde_json::from_slice(&out.stdout).expect("topology JSON");
            let vendor = json["cpu_vendor"].as_str().map(str::to_owned);
            match file_vendor(&path) {
                Ok(expected) => {
                    if expected.is_some() {
                        with_vendor += 1;
                    }
                    if expected != vendor {
                        problems.push(format!("{name}: vendor {expected:?}, printed {vendor:?}"));
                    }
                }
                Err(e) => problems.push(format!("{name}: {e}")),
            }
            let mut printed = BTreeMap::new();
            for node in json["numa_nodes"].as_array().into_iter().flatten() {
                let from = node["id"].as_u64().unwrap_or(u64::MAX);
                for d in node["distances"].as_array().into_iter().flatten() {
                    let to = d["node"].as_u64().unwrap_or(u64::MAX);
                    printed.insert((from, to), d["value"].as_u64().unwrap_or(0));
                }
            }
            let listed: BTreeSet<u64> = json["numa_nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|n| n["id"].as_u64())
                .collect();
            match file_distances(&path) {
                Ok(None) if printed.is_empty() => {}
                Ok(None) => problems.push(format!(
                    "{name}: no distances in the file, printed {printed:?}"
                )),
                Ok(Some(expected)) => {
                    // Between the nodes the program lists (CPU-less, memory-less
                    // nodes are dropped).
                    let expected: BTreeMap<(u64, u64), u64> = expected
                        .into_iter()
                        .filter(|((a, b), _)| listed.contains(a) && listed.contains(b))
                        .collect();
                    let local_not_10 = expected.iter().any(|((a, b), v)| a == b && *v != 10);
                    if local_not_10 || expected.values().any(|v| !(10..=255).contains(v)) {
                        // Not a SLIT (local 10, all in libvirt's 10–255): the
                        // reader keeps none.
                        if !printed.is_empty() {
                            problems.push(format!("{name}: out-of-range distances printed"));
                        }
                        continue;
                    }
                    with_distances += 1;
                    if expected != printed {
                        problems.push(format!(
                            "{name}: distances {expected:?}, printed {printed:?}"
                        ));
                    }
                }
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        with_distances >= 10,
        "only {with_distances} fixtures with distances"
    );
    assert!(
        with_vendor >= 20,
        "only {with_vendor} fixtures with a vendor"
    );
}
