//! The containment tree: every core once, under its package, NUMA node and
//! L3 domain, in the order the host nests them.

use crate::ids::CoreId;
use crate::text::{bytes, plural};
use crate::topology::{Core, HostTopology};
use std::collections::{BTreeMap, BTreeSet};

/// The containment tree: packages, nodes, L3 domains, cores.
pub(super) enum Item {
    Core { label: String, pus: Vec<usize> },
    Group(Group),
}

pub(super) struct Group {
    pub(super) class: &'static str,
    /// The full header, and a short one for narrow boxes.
    pub(super) label: String,
    pub(super) short: String,
    pub(super) children: Vec<Item>,
}

impl Item {
    pub(super) fn is_core(&self) -> bool {
        matches!(self, Item::Core { .. })
    }
}

/// Sorts `None` after every `Some`: cores without a package, node or L3
/// domain come after the others.
fn last_none<T: Ord>(o: Option<T>) -> (bool, Option<T>) {
    (o.is_none(), o)
}

/// A level of the containment tree above cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Package,
    Node,
    L3,
}

impl Level {
    fn key(self, core: &Core) -> Option<u32> {
        match self {
            Level::Package => core.package.map(|p| p.0),
            Level::Node => core.numa_node.map(|n| n.0),
            Level::L3 => core.l3.map(|l| l.0),
        }
    }
}

/// Whether every `lower` group (cores outside any are ignored) lies within
/// one `upper` group.
fn contains(host: &HostTopology, upper: Level, lower: Level) -> bool {
    let mut parent: BTreeMap<u32, Option<u32>> = BTreeMap::new();
    host.cores.iter().all(|c| match lower.key(c) {
        None => true,
        Some(key) => *parent.entry(key).or_insert(upper.key(c)) == upper.key(c),
    })
}

/// Every order of `levels`, in lexicographic order of the permutation.
fn permutations(levels: &[Level]) -> Vec<Vec<Level>> {
    if levels.is_empty() {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for (i, first) in levels.iter().enumerate() {
        let mut rest = levels.to_vec();
        rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, *first);
            out.push(tail);
        }
    }
    out
}

/// The levels the host describes, coarsest first: package, NUMA node, L3
/// domain, unless the host nests them another way (NUMA nodes of four
/// packages on old 16-socket machines, an L3 domain over two nodes). A level
/// the host does not describe at all is left out; where no order nests
/// cleanly, the usual one is kept and split groups are drawn in each parent.
fn level_order(host: &HostTopology) -> Vec<Level> {
    let present: Vec<Level> = [
        (
            Level::Package,
            !host.packages.is_empty() || host.cores.iter().any(|c| c.package.is_some()),
        ),
        (
            Level::Node,
            !host.numa_nodes.is_empty() || host.cores.iter().any(|c| c.numa_node.is_some()),
        ),
        (
            Level::L3,
            !host.l3_domains.is_empty() || host.cores.iter().any(|c| c.l3.is_some()),
        ),
    ]
    .into_iter()
    .filter_map(|(level, present)| present.then_some(level))
    .collect();
    permutations(&present)
        .into_iter()
        .find(|order| {
            order.iter().enumerate().all(|(i, upper)| {
                order
                    .iter()
                    .skip(i + 1)
                    .all(|lower| contains(host, *upper, *lower))
            })
        })
        .unwrap_or(present)
}

/// The containment tree: every core once, under its own package, node and
/// L3 domain (in [`level_order`]); cores without an L3 domain sit directly
/// in their parent. PUs without a core (offline CPUs) get a box of their own
/// at the end.
pub(super) fn build_tree(host: &HostTopology) -> Vec<Item> {
    let levels = level_order(host);

    // Each PU goes to the core that claims it (by id), or to the loose box.
    let core_ids: BTreeSet<CoreId> = host.cores.iter().map(|c| c.id).collect();
    let mut pus_of: BTreeMap<CoreId, Vec<usize>> = BTreeMap::new();
    let mut loose: Vec<usize> = Vec::new();
    for (i, pu) in host.pus.iter().enumerate() {
        match pu.core.filter(|c| core_ids.contains(c)) {
            Some(core) => pus_of.entry(core).or_default().push(i),
            None => loose.push(i),
        }
    }

    // A group found under several parents is drawn in each, marked "(part)".
    let mut parents: BTreeMap<(Level, u32), BTreeSet<Vec<Option<u32>>>> = BTreeMap::new();
    for core in &host.cores {
        for (i, level) in levels.iter().enumerate() {
            if let Some(key) = level.key(core) {
                let path = levels.iter().take(i).map(|l| l.key(core)).collect();
                parents.entry((*level, key)).or_default().insert(path);
            }
        }
    }
    let split: BTreeSet<(Level, u32)> = parents
        .into_iter()
        .filter(|(_, paths)| paths.len() > 1)
        .map(|(key, _)| key)
        .collect();

    let all: Vec<usize> = (0..host.cores.len()).collect();
    let mut tree = Tree {
        host,
        pus_of,
        split,
    };
    let mut top = tree.group(&all, &levels);
    // Anything a core did not take (nothing, in an assembled topology; but
    // nothing may vanish from the picture).
    loose.extend(tree.pus_of.into_values().flatten());
    loose.sort_unstable();
    if !loose.is_empty() {
        let children = loose
            .into_iter()
            .map(|i| Item::Core {
                label: match host.pus.get(i) {
                    Some(pu) if !pu.online => "off".to_owned(),
                    _ => "?".to_owned(),
                },
                pus: vec![i],
            })
            .collect();
        top.push(Item::Group(Group {
            class: "loose",
            label: "CPUs without a core (offline)".to_owned(),
            short: "no core".to_owned(),
            children,
        }));
    }
    top
}

struct Tree<'a> {
    host: &'a HostTopology,
    /// PUs of each core, taken as the core is placed.
    pus_of: BTreeMap<CoreId, Vec<usize>>,
    split: BTreeSet<(Level, u32)>,
}

impl Tree<'_> {
    /// Items for `cores` (indexes in `host.cores`) grouped by `levels`.
    fn group(&mut self, cores: &[usize], levels: &[Level]) -> Vec<Item> {
        let host = self.host;
        let Some((&level, below)) = levels.split_first() else {
            return cores
                .iter()
                .filter_map(|i| host.cores.get(*i))
                .map(|core| Item::Core {
                    label: format!("c{}", core.id),
                    pus: self.pus_of.remove(&core.id).unwrap_or_default(),
                })
                .collect();
        };
        let mut by_key: BTreeMap<(bool, Option<u32>), Vec<usize>> = BTreeMap::new();
        for &i in cores {
            if let Some(core) = host.cores.get(i) {
                by_key
                    .entry(last_none(level.key(core)))
                    .or_default()
                    .push(i);
            }
        }
        let mut items = Vec::new();
        for ((_, key), members) in by_key {
            let children = self.group(&members, below);
            if key.is_none() && level == Level::L3 {
                items.extend(children);
                continue;
            }
            items.push(Item::Group(self.boxed(level, key, &members, children)));
        }
        items
    }

    /// The box of the `level` group `key` (`None`: cores outside any) that
    /// holds `members` (indexes in `host.cores`): its class, its full header
    /// and its short one.
    fn boxed(
        &self,
        level: Level,
        key: Option<u32>,
        members: &[usize],
        children: Vec<Item>,
    ) -> Group {
        let host = self.host;
        let cpus: usize = members
            .iter()
            .filter_map(|i| host.cores.get(*i))
            .map(|c| c.cpus.len())
            .sum();
        let counts = format!(
            "{} · {}",
            plural(members.len(), "core", "cores"),
            plural(cpus, "CPU", "CPUs")
        );
        let part = match key {
            Some(k) if self.split.contains(&(level, k)) => " (part)",
            _ => "",
        };
        let (class, label, short) = self.headers(level, key, &counts, part);
        Group {
            class,
            label,
            short,
            children,
        }
    }

    /// The class, full header and short header of the `level` group `key`
    /// (`None`: cores outside any), `counts` its cores and CPUs and `part`
    /// what marks a group split across the picture.
    fn headers(
        &self,
        level: Level,
        key: Option<u32>,
        counts: &str,
        part: &str,
    ) -> (&'static str, String, String) {
        let host = self.host;
        match (level, key) {
            (Level::Package, Some(id)) => {
                let os = host
                    .packages
                    .iter()
                    .find(|p| p.id.0 == id)
                    .and_then(|p| p.os_index)
                    .filter(|os| *os != id)
                    .map(|os| format!(" (socket {os})"))
                    .unwrap_or_default();
                (
                    "package",
                    format!("package {id}{os} · {counts}{part}"),
                    format!("package {id}{part}"),
                )
            }
            (Level::Package, None) => (
                "package",
                format!("no package · {counts}"),
                "no package".to_owned(),
            ),
            (Level::Node, Some(id)) => {
                let mem = host
                    .numa_nodes
                    .iter()
                    .find(|n| n.id.0 == id)
                    .and_then(|n| n.memory_bytes)
                    .map(|m| format!(" · {}", bytes(m)))
                    .unwrap_or_default();
                (
                    "node",
                    format!("NUMA node {id} · {counts}{mem}{part}"),
                    format!("node {id}{part}"),
                )
            }
            (Level::Node, None) => (
                "node",
                format!("no NUMA node · {counts}"),
                "no node".to_owned(),
            ),
            (Level::L3, _) => {
                let id = key.map_or_else(|| "?".to_owned(), |k| k.to_string());
                let size = host
                    .l3_domains
                    .iter()
                    .find(|d| Some(d.id.0) == key)
                    .and_then(|d| d.size_bytes)
                    .map(|s| format!(" · {}", bytes(s)))
                    .unwrap_or_default();
                (
                    "l3",
                    format!("L3 {id}{size}{part}"),
                    format!("L3 {id}{part}"),
                )
            }
        }
    }
}
