//! Reading a libvirt domain XML (`virsh dumpxml`) into a [`Tenant`]: its
//! vCPU, emulator and I/O thread pins, passed-through devices and memory mode.

use crate::cpuset::CpuSet;
use crate::tenant::{IothreadCpus, MemoryTune, Tenant, TenantKind, VcpuCpus};
use crate::topology::pci_parse_int as parse_int;
use crate::topology::{HostTopology, PciAddress};
use crate::xml::{self, Element};
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

fn cpuset_attr(source: &str, e: &Element, attr: &str) -> Result<Option<CpuSet>, DomainError> {
    match e.attr(attr) {
        None => Ok(None),
        Some(text) => text.parse().map(Some).map_err(|err| DomainError {
            source_name: source.to_owned(),
            line: e.line,
            message: format!("<{}> {attr}: {err}", e.name),
        }),
    }
}

/// Reads a tenant from a domain XML (`virsh dumpxml`).
pub fn tenant_from_domain(
    source: &str,
    text: &str,
    host: &HostTopology,
) -> Result<Tenant, DomainError> {
    let doc = xml::parse(text).map_err(|e| DomainError {
        source_name: source.to_owned(),
        line: e.line,
        message: e.message,
    })?;
    let bad = |e: &Element, message: String| DomainError {
        source_name: source.to_owned(),
        line: e.line,
        message,
    };
    if doc.name != "domain" {
        return Err(bad(
            &doc,
            format!("the root element is <{}>, not <domain>", doc.name),
        ));
    }
    let name = doc
        .child("name")
        .map(|n| n.text.clone())
        .ok_or_else(|| bad(&doc, "the domain has no <name>".to_owned()))?;
    let vcpu = doc
        .child("vcpu")
        .ok_or_else(|| bad(&doc, "the domain has no <vcpu>".to_owned()))?;
    let count: u32 = vcpu
        .text
        .trim()
        .parse()
        .map_err(|_| bad(vcpu, format!("<vcpu> holds {:?}, not a count", vcpu.text)))?;
    let all = host.usable_cpus();
    let default = cpuset_attr(source, vcpu, "cpuset")?;
    let mut pins: BTreeMap<u32, CpuSet> = BTreeMap::new();
    let mut io_pins: BTreeMap<u32, CpuSet> = BTreeMap::new();
    let mut emulator = None;
    if let Some(cputune) = doc.child("cputune") {
        for pin in cputune.children_named("iothreadpin") {
            let id: u32 = pin
                .attr("iothread")
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| bad(pin, "<iothreadpin> without an iothread number".to_owned()))?;
            if let Some(set) = cpuset_attr(source, pin, "cpuset")? {
                io_pins.insert(id, set);
            }
        }
        for pin in cputune.children_named("vcpupin") {
            let id: u32 = pin
                .attr("vcpu")
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| bad(pin, "<vcpupin> without a vcpu number".to_owned()))?;
            if let Some(set) = cpuset_attr(source, pin, "cpuset")? {
                pins.insert(id, set);
            }
        }
        if let Some(e) = cputune.child("emulatorpin") {
            emulator = cpuset_attr(source, e, "cpuset")?;
        }
    }
    // Pinned means held off some CPU: a pin to every CPU (what libvirt keeps
    // after re-pinning a vCPU to all CPUs) floats like no pin at all.
    let narrows = |set: &CpuSet| !all.is_subset(set);
    let pinned = default
        .iter()
        .chain(pins.values())
        .chain(emulator.iter())
        .any(narrows);
    let fallback = default.clone().unwrap_or_else(|| all.clone());
    let iothread_count: u32 = match doc.child("iothreads") {
        None => 0,
        Some(e) => e
            .text
            .trim()
            .parse()
            .map_err(|_| bad(e, format!("<iothreads> holds {:?}, not a count", e.text)))?,
    };
    let mut iothread_ids: BTreeSet<u32> = (1..=iothread_count).collect();
    if let Some(ids) = doc.child("iothreadids") {
        iothread_ids = ids
            .children_named("iothread")
            .filter_map(|t| t.attr("id").and_then(|v| v.trim().parse().ok()))
            .collect();
    }
    iothread_ids.extend(io_pins.keys());
    let iothreads = iothread_ids
        .into_iter()
        .map(|iothread| IothreadCpus {
            iothread,
            cpus: io_pins
                .get(&iothread)
                .cloned()
                .unwrap_or_else(|| fallback.clone()),
        })
        .collect();
    let nics = passthrough_devices(&doc);
    let vcpus: Vec<VcpuCpus> = (0..count)
        .map(|vcpu| VcpuCpus {
            vcpu,
            cpus: pins.get(&vcpu).cloned().unwrap_or_else(|| fallback.clone()),
        })
        .collect();
    let cpus = vcpus
        .iter()
        .fold(CpuSet::new(), |acc, v| acc.union(&v.cpus));
    let memory = doc
        .child("numatune")
        .and_then(|n| n.child("memory"))
        .map(|m| MemoryTune {
            mode: m.attr("mode").unwrap_or("strict").to_owned(),
            nodeset: m.attr("nodeset").unwrap_or("").to_owned(),
        });
    Ok(Tenant {
        name,
        kind: TenantKind::Vm,
        vcpus,
        cpus,
        emulator_cpus: emulator.unwrap_or(fallback),
        iothreads,
        nics,
        pinned,
        memory,
    })
}

/// PCI addresses of a domain's passed-through devices, as `DDDD:BB:DD.F`.
fn passthrough_devices(doc: &Element) -> Vec<PciAddress> {
    let Some(devices) = doc.child("devices") else {
        return Vec::new();
    };
    let pci = devices
        .children_named("hostdev")
        .filter(|h| h.attr("type") == Some("pci"))
        .chain(
            devices
                .children_named("interface")
                .filter(|i| i.attr("type") == Some("hostdev")),
        );
    let mut out: Vec<PciAddress> = pci
        .filter_map(|d| d.path(&["source", "address"]))
        .filter_map(|a| {
            // A missing domain is domain 0, as libvirt reads it.
            PciAddress::from_libvirt(|name| match a.attr(name) {
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
    use crate::tenant::test_host as host;

    fn domain(pins: &str, emulator: &str) -> String {
        format!(
            "<domain type='kvm'><name>vm1</name><vcpu placement='static'>1</vcpu><cputune><vcpupin vcpu='0' cpuset='{pins}'/><emulatorpin cpuset='{emulator}'/></cputune></domain>"
        )
    }

    #[test]
    fn a_pin_to_every_cpu_floats() -> Result<(), DomainError> {
        let h = host();
        let all = tenant_from_domain("a.xml", &domain("0-7", "0-7"), &h)?;
        assert!(!all.pinned);
        let one = tenant_from_domain("b.xml", &domain("0-7", "0"), &h)?;
        assert!(one.pinned);
        Ok(())
    }

    #[test]
    fn bad_domains_name_the_line() {
        let h = host();
        let err = tenant_from_domain("x.xml", "<domain>\n<name>a</name>\n<vcpu>2</vcpu>\n<cputune><vcpupin vcpu='0' cpuset='3-1'/></cputune></domain>", &h);
        assert_eq!(err.err().map(|e| e.line), Some(4));
        let err = tenant_from_domain("x.xml", "<network/>", &h);
        assert!(err.is_err());
    }
}
