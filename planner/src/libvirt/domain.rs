//! Reading a libvirt domain XML (`virsh dumpxml`) into a [`Tenant`]: its
//! vCPU, emulator and I/O thread pins, passed-through devices and memory mode.

use crate::cpuset::CpuSet;
use crate::tenant::{IothreadCpus, MemoryTune, Tenant, TenantKind, VcpuCpus};
use crate::topology::pci_parse_int as parse_int;
use crate::topology::{HostTopology, PciAddress};
use crate::xmldoc::{self, NodeExt};
use roxmltree::Node;
use std::collections::{BTreeMap, BTreeSet};

/// Why a domain XML could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct DomainError {
    /// The file.
    pub source_name: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

fn bad(source: &str, e: Node, message: String) -> DomainError {
    DomainError {
        source_name: source.to_owned(),
        line: e.line(),
        message,
    }
}

fn cpuset_attr(source: &str, e: Node, attr: &str) -> Result<Option<CpuSet>, DomainError> {
    match e.attribute(attr) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|err| {
            let name = e.tag_name().name();
            bad(source, e, format!("<{name}> {attr}: {err}"))
        }),
    }
}

/// A count held as an element's text (`<vcpu>4</vcpu>`).
fn count(source: &str, e: Node, what: &str) -> Result<u32, DomainError> {
    let text = e.inner_text();
    text.parse().map_err(|_| {
        let name = e.tag_name().name();
        bad(source, e, format!("<{name}> holds {text:?}, not a {what}"))
    })
}

/// Reads a tenant from a domain XML (`virsh dumpxml`).
pub fn tenant_from_domain(
    source: &str,
    text: &str,
    host: &HostTopology,
) -> Result<Tenant, DomainError> {
    let doc = xmldoc::parse(text).map_err(|e| DomainError {
        source_name: source.to_owned(),
        line: e.line,
        message: e.problem.to_string(),
    })?;
    let root = doc.root_element();
    if !root.is("domain") {
        let message = format!(
            "the root element is <{}>, not <domain>",
            root.written_name()
        );
        return Err(bad(source, root, message));
    }
    let name = root
        .child("name")
        .map(|n| n.inner_text().into_owned())
        .ok_or_else(|| bad(source, root, "the domain has no <name>".to_owned()))?;
    // libvirt's schema makes <vcpu> optional, and libvirt counts a domain
    // without it as one vCPU with no default CPU set.
    let (vcpu_count, default) = match root.child("vcpu") {
        Some(vcpu) => (
            count(source, vcpu, "count")?,
            cpuset_attr(source, vcpu, "cpuset")?,
        ),
        None => (1, None),
    };
    let all = host.usable_cpus();
    let pins = Pins::read(source, root)?;
    // Pinned means held off some CPU: a pin to every CPU (what libvirt keeps
    // after re-pinning a vCPU to all CPUs) floats like no pin at all.
    let pinned = default
        .iter()
        .chain(pins.vcpus.values())
        .chain(pins.emulator.iter())
        .any(|set| !crate::tenant::floats(set, &all));
    let fallback = default.unwrap_or(all);
    let iothreads = iothreads(source, root, &pins.iothreads, &fallback)?;
    let vcpus: Vec<VcpuCpus> = (0..vcpu_count)
        .map(|vcpu| VcpuCpus {
            vcpu,
            cpus: pins.vcpus.get(&vcpu).unwrap_or(&fallback).clone(),
        })
        .collect();
    let cpus = vcpus
        .iter()
        .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus));
    Ok(Tenant {
        name,
        kind: TenantKind::Vm,
        state: crate::tenant::TenantState::Running,
        vcpus,
        cpus,
        emulator_cpus: pins.emulator.unwrap_or(fallback),
        iothreads,
        nics: passthrough_devices(root),
        pinned,
        memory: memory_tune(root),
        memory_resident: None,
    })
}

/// The pins in `<cputune>`.
#[derive(Default)]
struct Pins {
    vcpus: BTreeMap<u32, CpuSet>,
    iothreads: BTreeMap<u32, CpuSet>,
    emulator: Option<CpuSet>,
}

impl Pins {
    fn read(source: &str, root: Node) -> Result<Pins, DomainError> {
        let Some(cputune) = root.child("cputune") else {
            return Ok(Pins::default());
        };
        let iothreads = by_number(source, cputune, "iothreadpin", "iothread", "an iothread")?;
        let vcpus = by_number(source, cputune, "vcpupin", "vcpu", "a vcpu")?;
        let emulator = match cputune.child("emulatorpin") {
            Some(e) => cpuset_attr(source, e, "cpuset")?,
            None => None,
        };
        Ok(Pins {
            vcpus,
            iothreads,
            emulator,
        })
    }
}

/// The `cpuset` of each `<element>` by its `number` attribute
/// (`<vcpupin vcpu='0' cpuset='2'/>`); `a_number` names it in errors.
fn by_number(
    source: &str,
    cputune: Node,
    element: &str,
    number: &str,
    a_number: &str,
) -> Result<BTreeMap<u32, CpuSet>, DomainError> {
    let mut pins = BTreeMap::new();
    for pin in cputune.children_named(element) {
        let id: u32 = pin
            .attribute(number)
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| {
                bad(
                    source,
                    pin,
                    format!("<{element}> without {a_number} number"),
                )
            })?;
        if let Some(set) = cpuset_attr(source, pin, "cpuset")? {
            pins.insert(id, set);
        }
    }
    Ok(pins)
}

/// Every I/O thread (`<iothreads>` counts them, `<iothreadids>` names them
/// and libvirt numbers the rest, see [`iothread_ids`]; pins add theirs) with
/// its CPUs: its pin, else `fallback`.
fn iothreads(
    source: &str,
    root: Node,
    pins: &BTreeMap<u32, CpuSet>,
    fallback: &CpuSet,
) -> Result<Vec<IothreadCpus>, DomainError> {
    let iothread_count = match root.child("iothreads") {
        None => 0,
        Some(e) => count(source, e, "count")?,
    };
    let listed: BTreeSet<u32> = root
        .child("iothreadids")
        .into_iter()
        .flat_map(|l| l.children_named("iothread"))
        .filter_map(|t| t.attribute("id").and_then(|v| v.trim().parse().ok()))
        .collect();
    let mut ids = iothread_ids(iothread_count, &listed);
    ids.extend(pins.keys());
    Ok(ids
        .into_iter()
        .map(|iothread| IothreadCpus {
            iothread,
            cpus: pins.get(&iothread).unwrap_or(fallback).clone(),
        })
        .collect())
}

/// The I/O thread ids libvirt gives a domain that counts `count` of them
/// (`<iothreads>`) and names `listed` (`<iothreadids>`): the listed ids, and
/// while fewer are listed than counted, the lowest ids from 1 up that are
/// not listed (`<iothreads>4</iothreads>` with ids 5 and 6 listed: 1, 2, 5,
/// 6). More listed than counted raise the count (libvirt's domain format
/// documentation, `iothreadids`; `virDomainIOThreadIDDefArrayInit` in its
/// `src/conf/domain_conf.c` fills the missing ones).
pub(crate) fn iothread_ids(count: u32, listed: &BTreeSet<u32>) -> BTreeSet<u32> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let missing = count.saturating_sub(listed.len());
    let mut ids = listed.clone();
    ids.extend(
        (1..=u32::MAX)
            .filter(|id| !listed.contains(id))
            .take(missing),
    );
    ids
}

/// `<numatune><memory>`: its mode (libvirt's default is strict) and nodes.
fn memory_tune(root: Node) -> Option<MemoryTune> {
    root.path(&["numatune", "memory"]).map(|m| MemoryTune {
        mode: m.attribute("mode").unwrap_or("strict").to_owned(),
        nodeset: m.attribute("nodeset").unwrap_or("").to_owned(),
    })
}

/// A domain's memory placement as `apply` writes it, one described value
/// per part (`size`, `huge pages`, `numatune`, `memnode`, `guest cells`),
/// to compare the live domain with its config.
fn memory_placement(
    source: &str,
    text: &str,
) -> Result<BTreeMap<&'static str, String>, DomainError> {
    let doc = xmldoc::parse(text).map_err(|e| DomainError {
        source_name: source.to_owned(),
        line: e.line,
        message: e.problem.to_string(),
    })?;
    let root = doc.root_element();
    // A size in KiB, or the text as written when it is not a size.
    let kib = |e: Node| {
        let unit = e.attribute("unit").unwrap_or("KiB");
        let text = e.inner_text();
        match (
            text.trim().parse::<u64>(),
            crate::topology::unit_bytes(unit),
        ) {
            (Ok(n), Some(scale)) => crate::memory::human(n.saturating_mul(scale)),
            _ => format!("{} {unit}", text.trim()),
        }
    };
    let none = || "none".to_owned();
    let mut out = BTreeMap::new();
    out.insert("size", root.child("memory").map_or_else(none, kib));
    let pages = root.path(&["memoryBacking", "hugepages"]).map(|h| {
        let listed: Vec<String> = h
            .children_named("page")
            .map(|p| {
                let size = p.attribute("size").unwrap_or("?");
                let unit = p.attribute("unit").unwrap_or("KiB");
                match p.attribute("nodeset") {
                    Some(nodes) => format!("{size} {unit} for cell(s) {nodes}"),
                    None => format!("{size} {unit}"),
                }
            })
            .collect();
        if listed.is_empty() {
            "the default size".to_owned()
        } else {
            listed.join(", ")
        }
    });
    out.insert("huge pages", pages.unwrap_or_else(none));
    let tune = memory_tune(root).map(|m| format!("{} {}", m.mode, m.nodeset));
    out.insert("numatune", tune.unwrap_or_else(none));
    let memnodes: Vec<String> = root
        .child("numatune")
        .into_iter()
        .flat_map(|t| t.children_named("memnode"))
        .map(|m| {
            format!(
                "cell {}: {} {}",
                m.attribute("cellid").unwrap_or("?"),
                m.attribute("mode").unwrap_or("strict"),
                m.attribute("nodeset").unwrap_or("")
            )
        })
        .collect();
    out.insert(
        "memnode",
        if memnodes.is_empty() {
            none()
        } else {
            memnodes.join(", ")
        },
    );
    let cells: Vec<String> = root
        .path(&["cpu", "numa"])
        .into_iter()
        .flat_map(|n| n.children_named("cell"))
        .map(|c| {
            let unit = c.attribute("unit").unwrap_or("KiB");
            let memory = c.attribute("memory").unwrap_or("?");
            let size = match (memory.parse::<u64>(), crate::topology::unit_bytes(unit)) {
                (Ok(n), Some(scale)) => crate::memory::human(n.saturating_mul(scale)),
                _ => format!("{memory} {unit}"),
            };
            format!("{}: {size}", c.attribute("id").unwrap_or("?"))
        })
        .collect();
    out.insert(
        "guest cells",
        if cells.is_empty() {
            none()
        } else {
            cells.join(", ")
        },
    );
    Ok(out)
}

/// How a running domain's config places its memory otherwise than the live
/// domain does, one `PART: live X, config Y` per part that differs.
pub fn memory_differences(
    source: &str,
    live: &str,
    config: &str,
) -> Result<Vec<String>, DomainError> {
    let live = memory_placement(source, live)?;
    let config = memory_placement(&format!("{source} (config)"), config)?;
    Ok(live
        .iter()
        .filter(|(part, value)| config.get(*part) != Some(*value))
        .map(|(part, value)| {
            let planned = config.get(part).map_or("none", String::as_str);
            format!("{part}: live {value}, config {planned}")
        })
        .collect())
}

/// PCI addresses of a domain's passed-through devices, as `DDDD:BB:DD.F`.
fn passthrough_devices(root: Node) -> Vec<PciAddress> {
    let Some(devices) = root.child("devices") else {
        return Vec::new();
    };
    let pci = devices
        .children_named("hostdev")
        .filter(|h| h.attribute("type") == Some("pci"))
        .chain(
            devices
                .children_named("interface")
                .filter(|i| i.attribute("type") == Some("hostdev")),
        );
    let mut out: Vec<PciAddress> = pci
        .filter_map(|d| d.path(&["source", "address"]))
        .filter_map(|a| {
            // A missing domain is domain 0, as libvirt reads it.
            PciAddress::from_libvirt(|name| match a.attribute(name) {
                Some(v) => parse_int(v),
                None => (name == "domain").then_some(0),
            })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{self, Source, TopologyError};

    /// Four cores, siblings N and N+4.
    const HOST: &str = "package:1 core:4 pu:2(indexes=2*4:1*2)";

    fn domain(pins: &str, emulator: &str) -> String {
        format!(
            "<domain type='kvm'><name>vm1</name><vcpu placement='static'>1</vcpu><cputune><vcpupin vcpu='0' cpuset='{pins}'/><emulatorpin cpuset='{emulator}'/></cputune></domain>"
        )
    }

    #[test]
    fn a_pin_to_every_cpu_floats() -> Result<(), Box<dyn std::error::Error>> {
        let h = topology::load(&Source::Synthetic(HOST.into()))?;
        let all = tenant_from_domain("a.xml", &domain("0-7", "0-7"), &h)?;
        assert!(!all.pinned);
        let one = tenant_from_domain("b.xml", &domain("0-7", "0"), &h)?;
        assert!(one.pinned);
        Ok(())
    }

    #[test]
    fn iothreads_are_numbered_as_libvirt_numbers_them() {
        // (<iothreads>, <iothreadids>, the ids libvirt has), by the rule of
        // libvirt's domain format documentation: listed ids kept, the lowest
        // free ids from 1 fill the count, more listed raise it.
        for (count, listed, want) in [
            (0, vec![], vec![]),
            (3, vec![], vec![1, 2, 3]),
            // qemu-iothreads-ids-partial: 5 and 6 listed, 2 more from 1.
            (4, vec![5, 6], vec![1, 2, 5, 6]),
            // 2 is taken: the next free after 1 is 3.
            (3, vec![2], vec![1, 2, 3]),
            (2, vec![2, 4], vec![2, 4]),
            // generic-iothreadids: one thread, id 8.
            (1, vec![8], vec![8]),
            (1, vec![2, 4], vec![2, 4]),
        ] {
            let listed: BTreeSet<u32> = listed.into_iter().collect();
            let got: Vec<u32> = iothread_ids(count, &listed).into_iter().collect();
            assert_eq!(got, want, "{count} counted, {listed:?} listed");
        }
    }

    #[test]
    fn a_domain_is_read_as_libvirt_reads_it() -> Result<(), Box<dyn std::error::Error>> {
        let h = topology::load(&Source::Synthetic(HOST.into()))?;
        // No <vcpu>: libvirt counts one vCPU, free to run on all 8 CPUs.
        let none = tenant_from_domain("a.xml", "<domain><name>a</name></domain>", &h)?;
        let vcpus: Vec<(u32, String)> = none
            .vcpus
            .iter()
            .map(|v| (v.vcpu, v.cpus.to_string()))
            .collect();
        assert_eq!(vcpus, [(0, "0-7".to_owned())]);
        assert!(!none.pinned);
        // Four I/O threads, 5 and 6 named: libvirt has 1, 2, 5 and 6, and
        // only 5 is pinned (to CPU 3); the others float on the <vcpu> cpuset.
        let partial = "<domain><name>b</name><vcpu cpuset='1-2'>2</vcpu>\
            <iothreads>4</iothreads><iothreadids><iothread id='5'/><iothread id='6'/>\
            </iothreadids><cputune><iothreadpin iothread='5' cpuset='3'/></cputune></domain>";
        let t = tenant_from_domain("b.xml", partial, &h)?;
        let io: Vec<(u32, String)> = t
            .iothreads
            .iter()
            .map(|i| (i.iothread, i.cpus.to_string()))
            .collect();
        let floating = "1-2".to_owned();
        assert_eq!(
            io,
            [
                (1, floating.clone()),
                (2, floating.clone()),
                (5, "3".to_owned()),
                (6, floating)
            ]
        );
        Ok(())
    }

    #[test]
    fn bad_domains_name_the_line() -> Result<(), TopologyError> {
        let h = topology::load(&Source::Synthetic(HOST.into()))?;
        let pins = "<domain>\n<name>a</name>\n<vcpu>2</vcpu>\n<cputune>";
        for (text, line, message) in [
            (
                format!("{pins}<vcpupin vcpu='0' cpuset='3-1'/></cputune></domain>"),
                4,
                "<vcpupin> cpuset: ",
            ),
            (
                format!("{pins}<iothreadpin cpuset='1'/></cputune></domain>"),
                4,
                "<iothreadpin> without an iothread number",
            ),
            (
                "<domain>\n<name>a</name>\n<vcpu>\n two </vcpu></domain>".to_owned(),
                3,
                "<vcpu> holds \"two\", not a count",
            ),
            (
                "<network/>".to_owned(),
                1,
                "the root element is <network>, not <domain>",
            ),
            (
                "<domain>\n<name>a".to_owned(),
                2,
                "the document ends inside <name> (opened at line 2): it is truncated",
            ),
        ] {
            let err = tenant_from_domain("x.xml", &text, &h).err();
            assert_eq!(
                err.as_ref().map(|e| e.line),
                Some(line),
                "{text:?}: {err:?}"
            );
            assert!(
                err.as_ref().is_some_and(|e| e.message.starts_with(message)),
                "{text:?}: {err:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn an_unknown_entity_names_its_line() -> Result<(), TopologyError> {
        let h = topology::load(&Source::Synthetic(HOST.into()))?;
        for text in [
            "<domain>\n<name>vm&one;</name><vcpu>1</vcpu></domain>",
            "<domain>\n<name>vm1</name><vcpu cpuset='&all;'>1</vcpu></domain>",
        ] {
            let err = tenant_from_domain("x.xml", text, &h).err();
            assert_eq!(err.as_ref().map(|e| e.line), Some(2), "{text:?}");
            assert!(
                err.is_some_and(|e| e.to_string().contains(": unknown entity &")),
                "{text:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn memory_placement_differences_name_each_part() -> Result<(), DomainError> {
        let live =
            "<domain><name>vm</name><vcpu>1</vcpu><memory unit='KiB'>65536</memory></domain>";
        let config = "<domain><name>vm</name><vcpu>1</vcpu><memory unit='MiB'>64</memory>\
            <memoryBacking><hugepages><page size='2048' unit='KiB' nodeset='0'/></hugepages>\
            </memoryBacking><numatune><memory mode='strict' nodeset='1'/>\
            <memnode cellid='0' mode='strict' nodeset='1'/></numatune>\
            <cpu><numa><cell id='0' cpus='0' memory='64' unit='MiB'/></numa></cpu></domain>";
        // The same size in other units is no difference.
        assert_eq!(
            memory_differences("vm", live, config)?,
            [
                "guest cells: live none, config 0: 64.0 MiB",
                "huge pages: live none, config 2048 KiB for cell(s) 0",
                "memnode: live none, config cell 0: strict 1",
                "numatune: live none, config strict 1",
            ]
        );
        assert_eq!(
            memory_differences("vm", config, config)?,
            Vec::<String>::new()
        );
        let bad = memory_differences("vm", live, "<domain><memory>");
        assert!(matches!(bad, Err(DomainError { line: 1, .. })), "{bad:?}");
        Ok(())
    }
}
