//! Reads libvirt host capabilities (`virsh capabilities`) into the flat form.
//!
//! Trusts the per-CPU `socket_id`/`die_id`/`core_id`/`siblings` attributes in
//! `<host><topology><cells>`, never the `<host><cpu><topology>` summary (which
//! describes one NUMA node and can be wrong). L3 domains come from
//! `<host><cache><bank level='3'>`. A CPU listed without topology attributes
//! while others have them is offline (libvirt cannot read an offline CPU's
//! topology); when no CPU has them (old libvirt), every CPU is its own core.

use super::assemble::{RawGroup, RawNode, RawPu, RawTopology};
use super::TopologyError;
use crate::cpuset::CpuSet;
use crate::ids::{CpuId, NodeId};
use crate::xmldoc::{self, NodeExt};
use roxmltree::Node;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Bytes in one libvirt scaled-integer unit (`KiB`, `MiB`, `bytes`...).
pub(crate) fn unit_bytes(unit: &str) -> Option<u64> {
    let unit = unit.trim();
    Some(match unit.to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1,
        "kb" => 1_000,
        "k" | "kib" => 1 << 10,
        "mb" => 1_000_000,
        "m" | "mib" => 1 << 20,
        "gb" => 1_000_000_000,
        "g" | "gib" => 1 << 30,
        "tb" => 1_000_000_000_000,
        "t" | "tib" => 1 << 40,
        _ => return None,
    })
}

struct Ctx<'a> {
    source: &'a str,
}

impl Ctx<'_> {
    fn bad(&self, element: Node, problem: String) -> TopologyError {
        TopologyError::BadValue {
            path: PathBuf::from(self.source),
            line: element.line(),
            problem,
        }
    }

    fn number<T: std::str::FromStr>(
        &self,
        element: Node,
        attr: &str,
    ) -> Result<Option<T>, TopologyError> {
        match element.attribute(attr) {
            None => Ok(None),
            Some(text) => text.trim().parse().map(Some).map_err(|_| {
                self.bad(
                    element,
                    format!(
                        "<{}> attribute {attr}='{text}' is not a number",
                        element.tag_name().name()
                    ),
                )
            }),
        }
    }

    fn cpuset(&self, element: Node, attr: &str) -> Result<Option<CpuSet>, TopologyError> {
        match element.attribute(attr) {
            None => Ok(None),
            Some(text) => text.parse().map(Some).map_err(|e| {
                let name = element.tag_name().name();
                self.bad(element, format!("<{name}> attribute {attr}: {e}"))
            }),
        }
    }

    fn scaled(&self, element: Node, value: &str) -> Result<u64, TopologyError> {
        let name = element.tag_name().name();
        let unit = element.attribute("unit").unwrap_or("KiB");
        let scale = unit_bytes(unit)
            .ok_or_else(|| self.bad(element, format!("<{name}> has unknown unit '{unit}'")))?;
        let amount: u64 = value
            .trim()
            .parse()
            .map_err(|_| self.bad(element, format!("<{name}> value '{value}' is not a number")))?;
        Ok(amount.saturating_mul(scale))
    }
}

/// Parses capabilities XML; `source` names the file or URI in errors.
pub(crate) fn parse(source: &str, text: &str) -> Result<RawTopology, TopologyError> {
    let doc = xmldoc::parse(text).map_err(|e| TopologyError::Malformed {
        path: PathBuf::from(source),
        line: e.line,
        column: e.column,
        problem: e.problem.to_string(),
    })?;
    let root = doc.root_element();
    let ctx = Ctx { source };
    if !root.is("capabilities") {
        return Err(TopologyError::WrongKind {
            path: PathBuf::from(source),
            problem: format!(
                "expected libvirt <capabilities>, found <{}>",
                root.written_name()
            ),
        });
    }
    let Some(cells) = root.path(&["host", "topology", "cells"]) else {
        return Err(TopologyError::Empty {
            source_name: source.to_owned(),
            problem: "the capabilities have no <host><topology><cells>: libvirt could not read \
                      this host's NUMA topology, so there is nothing to plan on; use hwloc \
                      (`lstopo --of xml` on the host) instead"
                .to_owned(),
        });
    };
    let (nodes, cpus) = cells_of(&ctx, cells)?;
    let l3_banks = l3_banks(&ctx, root)?;
    let pus = pus(&ctx, &cpus, &l3_banks)?;
    Ok(RawTopology {
        source: source.to_owned(),
        packages: packages(&pus),
        l3s: l3_groups(l3_banks),
        pus,
        nodes,
        pci: Vec::new(),
        cpu_vendor: root
            .path(&["host", "cpu", "vendor"])
            .map(|v| v.inner_text().trim().to_owned())
            .filter(|v| !v.is_empty()),
    })
}

/// A `<cell>`'s `<distances><sibling id value/>`: whole numbers, values in
/// libvirt's 10–255.
fn distances_of(
    ctx: &Ctx,
    cell: Node,
    own: NodeId,
) -> Result<Vec<super::NodeDistance>, TopologyError> {
    let Some(list) = cell.child("distances") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for sibling in list.children_named("sibling") {
        let id: Option<u32> = ctx.number(sibling, "id")?;
        let value: Option<u32> = ctx.number(sibling, "value")?;
        let (Some(id), Some(value)) = (id, value) else {
            return Err(ctx.bad(sibling, "<sibling> needs an id and a value".to_owned()));
        };
        if !(10..=255).contains(&value) {
            return Err(ctx.bad(
                sibling,
                format!("<sibling id='{id}'> distance {value} is outside 10-255"),
            ));
        }
        if NodeId(id) == own && value != 10 {
            return Err(ctx.bad(
                sibling,
                format!(
                    "<sibling id='{id}'> is the cell itself: its distance must be 10, not {value}"
                ),
            ));
        }
        out.push(super::NodeDistance {
            node: NodeId(id),
            value,
        });
    }
    Ok(out)
}

/// Each `<cpu>` element with the NUMA node of its `<cell>`.
type CellCpus<'a, 'i> = Vec<(NodeId, Node<'a, 'i>)>;

/// The NUMA nodes of `<cells>`, and their CPUs.
fn cells_of<'a, 'i>(
    ctx: &Ctx,
    cells: Node<'a, 'i>,
) -> Result<(Vec<RawNode>, CellCpus<'a, 'i>), TopologyError> {
    let mut nodes = Vec::new();
    let mut cpus = Vec::new();
    for cell in cells.children_named("cell") {
        let id: u32 = ctx
            .number(cell, "id")?
            .ok_or_else(|| ctx.bad(cell, "<cell> without an id".to_owned()))?;
        let memory_bytes = match cell.child("memory") {
            Some(memory) => Some(ctx.scaled(memory, &memory.inner_text())?),
            None => None,
        };
        nodes.push(RawNode {
            id: NodeId(id),
            memory_bytes,
            memory_free_bytes: None,
            hugepages: pages_of(ctx, cell)?,
            cpus: None,
            distances: distances_of(ctx, cell, NodeId(id))?,
        });
        if let Some(list) = cell.child("cpus") {
            cpus.extend(list.children_named("cpu").map(|c| (NodeId(id), c)));
        }
    }
    Ok((nodes, cpus))
}

/// A cell's huge page pools: `<pages unit='KiB' size='2048'>N</pages>`
/// (the 4 KiB pages, which are the memory itself, are left out). libvirt
/// lists totals; free counts come from a connection.
fn pages_of(ctx: &Ctx, cell: Node) -> Result<Vec<super::PagePool>, TopologyError> {
    let mut pools = Vec::new();
    for pages in cell.children_named("pages") {
        let size: u64 = ctx
            .number(pages, "size")?
            .ok_or_else(|| ctx.bad(pages, "<pages> without a size".to_owned()))?;
        let unit = pages.attribute("unit").unwrap_or("KiB");
        let scale = unit_bytes(unit)
            .ok_or_else(|| ctx.bad(pages, format!("<pages> has unknown unit '{unit}'")))?;
        let size_kib = size.saturating_mul(scale) / 1024;
        let text = pages.inner_text();
        let total: u64 = text
            .trim()
            .parse()
            .map_err(|_| ctx.bad(pages, format!("<pages> count '{text}' is not a number")))?;
        if size_kib > 4 {
            pools.push(super::PagePool {
                size_kib,
                total,
                free: None,
            });
        }
    }
    Ok(pools)
}

/// The CPUs and size of each L3 `<bank>` in `<host><cache>`.
fn l3_banks(ctx: &Ctx, root: Node) -> Result<Vec<(CpuSet, Option<u64>)>, TopologyError> {
    let Some(cache) = root.path(&["host", "cache"]) else {
        return Ok(Vec::new());
    };
    let mut banks = Vec::new();
    for bank in cache.children_named("bank") {
        if bank.attribute("level").map(str::trim) != Some("3") {
            continue;
        }
        let Some(set) = ctx.cpuset(bank, "cpus")? else {
            continue;
        };
        let size = match bank.attribute("size") {
            Some(size) => Some(ctx.scaled(bank, size)?),
            None => None,
        };
        banks.push((set, size));
    }
    Ok(banks)
}

/// One PU per `<cpu>`; cores numbered in order of first appearance.
fn pus(
    ctx: &Ctx,
    cpus: &[(NodeId, Node)],
    l3_banks: &[(CpuSet, Option<u64>)],
) -> Result<Vec<RawPu>, TopologyError> {
    let any_topology = cpus.iter().any(|&(_, c)| has_topology(c));
    let mut core_keys: BTreeMap<String, u64> = BTreeMap::new();
    let mut pus = Vec::new();
    for &(node, cpu) in cpus {
        let id: u32 = ctx
            .number(cpu, "id")?
            .ok_or_else(|| ctx.bad(cpu, "<cpu> without an id".to_owned()))?;
        if id >= CpuId::LIMIT {
            return Err(ctx.bad(cpu, format!("CPU id {id} is out of range")));
        }
        let cpu_id = CpuId(id);
        let online = !any_topology || has_topology(cpu);
        let socket: Option<u32> = ctx.number(cpu, "socket_id")?;
        let next = core_keys.len() as u64;
        let core = core_key(ctx, cpu, cpu_id, socket)?.map(|k| *core_keys.entry(k).or_insert(next));
        let l3 = l3_banks
            .iter()
            .position(|(set, _)| set.contains(cpu_id))
            .map(|i| i as u64);
        pus.push(RawPu {
            cpu: cpu_id,
            online,
            allowed: true,
            core,
            package: socket.map(u64::from),
            node: Some(node),
            l3: if online { l3 } else { None },
        });
    }
    Ok(pus)
}

/// What groups a CPU with its SMT siblings: the siblings list the kernel
/// gives, else (socket, die, core); `None` when libvirt knows neither.
fn core_key(
    ctx: &Ctx,
    cpu: Node,
    id: CpuId,
    socket: Option<u32>,
) -> Result<Option<String>, TopologyError> {
    let die: Option<u32> = ctx.number(cpu, "die_id")?;
    let core_id: Option<u32> = ctx.number(cpu, "core_id")?;
    let siblings = ctx.cpuset(cpu, "siblings")?;
    if let Some(siblings) = &siblings {
        if !siblings.contains(id) {
            return Err(ctx.bad(
                cpu,
                format!(
                    "CPU {} has siblings='{siblings}', which does not include itself",
                    id.0
                ),
            ));
        }
    }
    Ok(match (&siblings, socket, core_id) {
        (Some(set), _, _) => Some(format!("siblings {set}")),
        (None, Some(s), Some(c)) => Some(format!("socket {s} die {} core {c}", die.unwrap_or(0))),
        _ => None,
    })
}

fn packages(pus: &[RawPu]) -> Vec<RawGroup> {
    pus.iter()
        .filter_map(|p| p.package)
        .collect::<BTreeSet<u64>>()
        .into_iter()
        .map(|socket| RawGroup {
            key: socket,
            os_index: u32::try_from(socket).ok(),
            size_bytes: None,
            known_cpus: CpuSet::new(),
        })
        .collect()
}

fn l3_groups(banks: Vec<(CpuSet, Option<u64>)>) -> Vec<RawGroup> {
    banks
        .into_iter()
        .enumerate()
        .map(|(i, (cpus, size))| RawGroup {
            key: i as u64,
            os_index: None,
            size_bytes: size,
            known_cpus: cpus,
        })
        .collect()
}

fn has_topology(cpu: Node) -> bool {
    cpu.has_attribute("siblings") || cpu.has_attribute("core_id") || cpu.has_attribute("socket_id")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: &str = r#"<capabilities>
  <host>
    <cpu><topology sockets='1' dies='1' cores='2' threads='2'/></cpu>
    <topology>
      <cells num='3'>
        <cell id='0'>
          <memory unit='KiB'>1024</memory>
          <cpus num='4'>
            <cpu id='0' socket_id='3' die_id='0' core_id='0' siblings='0,2'/>
            <cpu id='1' socket_id='3' die_id='0' core_id='1' siblings='1,3'/>
            <cpu id='2' socket_id='3' die_id='0' core_id='0' siblings='0,2'/>
            <cpu id='3' socket_id='3' die_id='0' core_id='1' siblings='1,3'/>
          </cpus>
        </cell>
        <cell id='8'>
          <memory unit='MiB'>2</memory>
          <cpus num='2'>
            <cpu id='4' socket_id='7' die_id='0' core_id='0' siblings='4'/>
            <cpu id='5'/>
          </cpus>
        </cell>
        <cell id='9'>
          <memory unit='KiB'>4096</memory>
          <cpus num='0'/>
        </cell>
      </cells>
    </topology>
    <cache>
      <bank id='0' level='3' type='both' size='8' unit='MiB' cpus='0-3'/>
      <bank id='1' level='2' type='both' size='1' unit='MiB' cpus='4'/>
    </cache>
  </host>
</capabilities>"#;

    #[test]
    fn reads_cells_cores_and_caches() -> Result<(), TopologyError> {
        let host = parse("caps.xml", CAPS)?.assemble()?;
        let cores: Vec<String> = host.cores.iter().map(|c| c.cpus.to_string()).collect();
        assert_eq!(cores, ["0,2", "1,3", "4"]);
        assert_eq!(host.packages.len(), 2);
        assert_eq!(host.packages[1].os_index, Some(7));
        let nodes: Vec<(u32, String, Option<u64>)> = host
            .numa_nodes
            .iter()
            .map(|n| (n.id.0, n.cpus.to_string(), n.memory_bytes))
            .collect();
        assert_eq!(
            nodes,
            [
                (0, "0-3".to_owned(), Some(1 << 20)),
                (8, "4".to_owned(), Some(2 << 20)),
                (9, String::new(), Some(4 << 20))
            ]
        );
        assert_eq!(host.l3_domains.len(), 1);
        assert_eq!(host.l3_domains[0].size_bytes, Some(8 << 20));
        assert_eq!(host.cores[2].l3, None);
        assert_eq!(host.usable_cpus().to_string(), "0-4");
        Ok(())
    }

    #[test]
    fn bad_values_name_the_line() {
        let text = CAPS.replace(
            "core_id='1' siblings='1,3'/>\n            <cpu id='2'",
            "core_id='x' siblings='1,3'/>\n            <cpu id='2'",
        );
        let err = parse("caps.xml", &text).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("caps.xml:10: <cpu> attribute core_id='x' is not a number")
        );
        let err = parse("caps.xml", "<capabilities><host/></capabilities>")
            .err()
            .map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("no <host><topology><cells>")),
            "{err:?}"
        );
    }

    #[test]
    fn an_unknown_entity_names_its_line() {
        for (from, to, at) in [
            (
                "<memory unit='KiB'>1024",
                "<memory unit='KiB'>&ten;24",
                "caps.xml:7:30:",
            ),
            ("<cell id='8'>", "<cell id='&eight;'>", "caps.xml:15:19:"),
        ] {
            let err = parse("caps.xml", &CAPS.replace(from, to))
                .err()
                .map(|e| e.to_string());
            assert!(
                err.as_deref()
                    .is_some_and(|e| e.starts_with(at) && e.contains("unknown entity &")),
                "{err:?}"
            );
        }
    }
}
