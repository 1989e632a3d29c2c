//! hwloc synthetic descriptions (`package:2 core:16 pu:2(indexes=2*32:1*2)`)
//! built in linear time. hwloc's own importer inserts every object by comparing
//! its cpuset with each sibling, which takes 80 s for `pu:16384`; this builder
//! makes the same topology directly for the descriptions it knows, and leaves
//! the rest of hwloc's grammar to hwloc, on smaller hosts only.
//!
//! What it knows: levels `TYPE:COUNT`, where TYPE is a package (`package`,
//! `pack`, `socket`), a NUMA node (`numa`, `node`, `numanode`), a cache
//! (`l1`…`l5`, optionally `d`, `i` or `u`, or with `cache`), `die`, `group`,
//! `core` or `pu` (any case), each at most once, `pu` last; and on the `pu`
//! level only, the interleaving `indexes=S*N:S*N…`. The test
//! `synthetic_matches_hwloc` checks the result against hwloc's.

use super::assemble::{RawGroup, RawNode, RawPu, RawTopology};
use super::TopologyError;
use crate::cpuset::CpuSet;
use crate::ids::{CpuId, NodeId};

/// What hwloc gives each synthetic NUMA node and L3 cache by default.
const NODE_MEMORY_BYTES: u64 = 1 << 30;
const L3_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Package,
    Numa,
    L3,
    /// A level that splits CPUs but that the model does not keep (other caches, dies, groups).
    Other,
    Core,
    Pu,
}

fn level_of(name: &str) -> Option<Level> {
    let name = name.to_ascii_lowercase();
    Some(match name.as_str() {
        "package" | "pack" | "socket" => Level::Package,
        "numa" | "node" | "numanode" => Level::Numa,
        "l3" | "l3d" | "l3u" | "l3cache" | "l3dcache" | "l3ucache" => Level::L3,
        "die" | "group" => Level::Other,
        "core" => Level::Core,
        "pu" => Level::Pu,
        _ => {
            let cache = name.strip_prefix('l')?;
            let cache = cache.strip_suffix("cache").unwrap_or(cache);
            let digit = cache.chars().next()?;
            let kind = &cache[digit.len_utf8()..];
            if !matches!(digit, '1' | '2' | '4' | '5') || !matches!(kind, "" | "d" | "i" | "u") {
                return None;
            }
            Level::Other
        }
    })
}

/// A description this builder reads: its levels (outermost first) and, when
/// the `pu` level has `indexes=`, the OS index of each logical PU.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Description {
    levels: Vec<(Level, u32)>,
    os_of: Option<Vec<u32>>,
}

impl Description {
    /// `None` when the description uses hwloc syntax this builder does not
    /// know (then hwloc reads it), or is not one hwloc would accept.
    pub(crate) fn parse(text: &str) -> Option<Description> {
        let mut levels: Vec<(Level, u32)> = Vec::new();
        let mut pattern = None;
        for word in text.split_whitespace() {
            let (name, rest) = word.split_once(':')?;
            let (count, attributes) = match rest.split_once('(') {
                Some((count, attributes)) => (count, Some(attributes.strip_suffix(')')?)),
                None => (rest, None),
            };
            let level = level_of(name)?;
            let count: u32 = count.parse().ok().filter(|&n| n > 0)?;
            if level != Level::Other && levels.iter().any(|&(l, _)| l == level) {
                return None;
            }
            if levels.last().is_some_and(|&(l, _)| l == Level::Pu) {
                return None;
            }
            if let Some(attributes) = attributes {
                let indexes = attributes.strip_prefix("indexes=")?;
                if level != Level::Pu {
                    return None;
                }
                pattern = Some(parse_interleave(indexes)?);
            }
            levels.push((level, count));
        }
        if levels.last().map(|&(l, _)| l) != Some(Level::Pu) {
            return None;
        }
        let mut description = Description {
            levels,
            os_of: None,
        };
        let total = description.cpus()?;
        if let Some(pattern) = pattern {
            description.os_of = Some(os_table(&pattern, total)?);
        }
        Some(description)
    }

    /// How many CPUs the description makes, if it is at most [`CpuId::LIMIT`].
    fn cpus(&self) -> Option<u64> {
        self.levels
            .iter()
            .try_fold(1u64, |acc, &(_, n)| acc.checked_mul(u64::from(n)))
            .filter(|&n| n <= u64::from(CpuId::LIMIT))
    }

    /// The OS index of the PU with this logical index.
    fn os_index(&self, logical: u64) -> u64 {
        let Some(table) = &self.os_of else {
            return logical;
        };
        usize::try_from(logical)
            .ok()
            .and_then(|l| table.get(l))
            .map_or(logical, |&os| u64::from(os))
    }

    /// The topology, in the form every reader produces.
    pub(crate) fn build(&self, source_name: &str) -> RawTopology {
        let total = self.cpus().unwrap_or(0);
        // How many PUs each object of a level spans.
        let mut span = vec![1u64; self.levels.len()];
        for i in (0..self.levels.len().saturating_sub(1)).rev() {
            span[i] = span[i + 1] * u64::from(self.levels[i + 1].1);
        }
        let span_of = |level: Level| {
            self.levels
                .iter()
                .position(|&(l, _)| l == level)
                .map(|i| span[i])
        };
        let (package_span, numa_span, l3_span, core_span) = (
            span_of(Level::Package),
            span_of(Level::Numa),
            span_of(Level::L3),
            span_of(Level::Core),
        );

        let os_cpu = |logical: u64| CpuId(u32::try_from(self.os_index(logical)).unwrap_or(0));
        let mut pus = Vec::new();
        for logical in 0..total {
            pus.push(RawPu {
                cpu: os_cpu(logical),
                online: true,
                allowed: true,
                core: core_span.map(|s| logical / s),
                package: package_span.map(|s| logical / s),
                node: Some(NodeId(numa_span.map_or(0, |s| dense(logical / s)))),
                l3: l3_span.map(|s| logical / s),
            });
        }
        let groups = |span: Option<u64>, size_bytes: Option<u64>, os_index: bool| {
            let Some(span) = span else { return Vec::new() };
            (0..total / span)
                .map(|key| RawGroup {
                    key,
                    os_index: os_index.then(|| dense(key)),
                    size_bytes,
                    known_cpus: (key * span..(key + 1) * span).map(os_cpu).collect(),
                })
                .collect()
        };
        let packages = groups(package_span, None, true);
        let l3s = groups(l3_span, Some(L3_BYTES), false);
        let node_span = numa_span.unwrap_or(total.max(1));
        let nodes = (0..total / node_span)
            .map(|key| RawNode {
                id: NodeId(dense(key)),
                memory_bytes: Some(NODE_MEMORY_BYTES),
                memory_free_bytes: None,
                hugepages: Vec::new(),
                cpus: Some(
                    (key * node_span..(key + 1) * node_span)
                        .map(os_cpu)
                        .collect::<CpuSet>(),
                ),
                distances: Vec::new(),
            })
            .collect();
        RawTopology {
            source: source_name.to_owned(),
            pus,
            packages,
            l3s,
            nodes,
            pci: Vec::new(),
            cpu_vendor: None,
        }
    }
}

/// Reads `synthetic:DESC`: built here when this module knows the syntax, by
/// hwloc otherwise.
pub(crate) fn read(description: &str) -> Result<RawTopology, TopologyError> {
    match Description::parse(description) {
        Some(known) => Ok(known.build(&format!("synthetic:{description}"))),
        None => super::hwloc::synthetic(description),
    }
}

fn dense(n: u64) -> u32 {
    // Every count here is below CpuId::LIMIT.
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `2*32:1*2` → [(2, 32), (1, 2)]: logical stride and count per OS digit.
fn parse_interleave(pattern: &str) -> Option<Vec<(u64, u64)>> {
    pattern
        .split(':')
        .map(|part| {
            let (stride, count) = part.split_once('*')?;
            let stride: u64 = stride.parse().ok()?;
            let count: u64 = count.parse().ok().filter(|&n| n > 0)?;
            Some((stride, count))
        })
        .collect()
}

/// The OS index is the mixed-radix number of digits `d_i` (radix = count,
/// first pair fastest); the logical index is `Σ d_i × stride_i`.
fn logical_of_os(pattern: &[(u64, u64)], os: u64) -> Option<u64> {
    let mut rest = os;
    let mut logical = 0u64;
    for &(stride, count) in pattern {
        logical = logical.checked_add((rest % count).checked_mul(stride)?)?;
        rest /= count;
    }
    Some(logical)
}

/// The OS index of each logical PU, when the pattern numbers every one of
/// `total` PUs exactly once.
fn os_table(pattern: &[(u64, u64)], total: u64) -> Option<Vec<u32>> {
    let product = pattern
        .iter()
        .try_fold(1u64, |acc, &(_, count)| acc.checked_mul(count))?;
    if product != total {
        return None;
    }
    let len = usize::try_from(total).ok()?;
    let mut table = vec![u32::MAX; len];
    for os in 0..total {
        let slot = usize::try_from(logical_of_os(pattern, os)?)
            .ok()
            .and_then(|l| table.get_mut(l))?;
        if *slot != u32::MAX {
            return None;
        }
        *slot = u32::try_from(os).ok()?;
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ours(text: &str) -> super::super::HostTopology {
        let d = Description::parse(text).unwrap_or_else(|| panic!("{text}: unknown syntax"));
        d.build(&format!("synthetic:{text}"))
            .assemble()
            .expect("assembles")
    }

    fn hwlocs(text: &str) -> super::super::HostTopology {
        super::super::hwloc::synthetic(text)
            .expect("hwloc reads it")
            .assemble()
            .expect("assembles")
    }

    #[test]
    fn synthetic_matches_hwloc() {
        for text in [
            "pu:1",
            "pu:7",
            "core:3 pu:2",
            "package:2 core:16 pu:2(indexes=2*32:1*2)",
            "package:2 l3:12 core:8 pu:2(indexes=2*192:1*2)",
            "package:2 numa:1 core:4 pu:2",
            "numa:2 core:2 pu:4",
            "pack:2 numa:2 core:1 pu:1",
            "Socket:2 NUMANode:2 L3Cache:2 L2:2 L1d:1 Core:2 PU:2",
            "group:2 die:2 numa:3 l2u:1 core:2 pu:1",
            "core:4 pu:2(indexes=2*4:1*2)",
            "pack:2 core:2 pu:2(indexes=2*2:1*2:4*2)",
        ] {
            assert_eq!(ours(text), hwlocs(text), "{text}");
        }
    }

    #[test]
    fn synthetic_hosts_of_65536_cpus_are_built_here_not_by_hwloc() {
        // hwloc's importer took 238 s and 1.1 GB for this; the builder is linear.
        let raw = read("package:16 core:2048 pu:2").expect("builds");
        assert_eq!(raw.pus.len(), 65_536);
        let host = raw.assemble().expect("assembles");
        assert_eq!((host.packages.len(), host.cores.len()), (16, 32_768));
        // Syntax only hwloc reads stays below hwloc's own limit.
        let e = read("package:2 numa:1(memory=1GB) core:4096 pu:2").expect_err("too big");
        assert!(
            e.to_string()
                .contains("16384 CPUs with syntax only hwloc reads"),
            "{e}"
        );
        assert!(read("package:2 numa:1(memory=1GB) core:4 pu:2").is_ok());
    }

    /// A description from the syntax this module knows: a random subset of
    /// the levels in their usual order, small counts, maybe an interleaving.
    fn description() -> impl Strategy<Value = String> {
        let names = ["package", "group", "numa", "l3", "die", "l2", "core"];
        (
            proptest::collection::vec((any::<bool>(), 1u32..4), names.len()),
            1u32..4,
            any::<bool>(),
        )
            .prop_map(move |(chosen, pus, interleave)| {
                let mut words: Vec<String> = names
                    .iter()
                    .zip(chosen)
                    .filter(|(_, (on, _))| *on)
                    .map(|(name, (_, n))| format!("{name}:{n}"))
                    .collect();
                let total: u32 = words
                    .iter()
                    .filter_map(|w| w.split(':').nth(1)?.parse::<u32>().ok())
                    .product();
                if interleave && pus > 1 && total > 1 {
                    // Siblings N and N + CPUs/threads, as on most x86 hosts.
                    words.push(format!("pu:{pus}(indexes={pus}*{total}:1*{pus})"));
                } else {
                    words.push(format!("pu:{pus}"));
                }
                words.join(" ")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn synthetic_matches_hwloc_on_random_descriptions(text in description()) {
            prop_assert_eq!(ours(&text), hwlocs(&text), "{}", text);
        }
    }

    #[test]
    fn interleaving_follows_hwloc() {
        // `lstopo -i "core:4 pu:2(indexes=2*4:1*2)"`: L#1 is P#4, L#2 is P#1.
        let d = Description::parse("core:4 pu:2(indexes=2*4:1*2)").expect("known syntax");
        let os: Vec<u64> = (0..8).map(|l| d.os_index(l)).collect();
        assert_eq!(os, [0, 4, 1, 5, 2, 6, 3, 7]);
        // `lstopo -i "pack:2 core:2 pu:2(indexes=2*2:1*2:4*2)"`: L#1 is P#2, L#2 is P#1.
        let d = Description::parse("pack:2 core:2 pu:2(indexes=2*2:1*2:4*2)").expect("known");
        let os: Vec<u64> = (0..8).map(|l| d.os_index(l)).collect();
        assert_eq!(os, [0, 2, 1, 3, 4, 6, 5, 7]);
    }

    #[test]
    fn unknown_syntax_is_left_to_hwloc() {
        for text in [
            "",
            "garbage",
            "core:2",
            "pu:2 core:2",
            "numa:2(memory=2GB) pu:2",
            "pack:2 pack:2 pu:1",
            "pu:0",
            "pu:2(indexes=1,0)",
            "core:2 pu:2(indexes=1*2:1*2)",
            "core:2 pu:2(indexes=2*2:1*3)",
            "misc:2 pu:2",
            "pu:65537",
        ] {
            assert_eq!(Description::parse(text), None, "{text}");
        }
    }
}
