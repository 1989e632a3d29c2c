//! Objectives 6–7 of a host of mixed thread counts where each VM placed
//! sits in its fewest L3 domains: a pattern model of each domain's classes.
//!
//! Once the per-class model holds objectives 1–5 with every VM it places on
//! its fewest cores (every VM placed, or a choice of them: [`held`]), a VM
//! takes at least one L3 domain where some domain holds it whole, else at
//! least two: their sum over the VMs placed
//! ([`Restriction::fewest_domains`]) bounds objective 6. Where objective 6
//! is held there, what is left of objective
//! 7 is which VMs (or halves of VMs) share a domain and on which of its
//! classes each takes its cores: a VM that needs an odd count of CPUs can
//! take a core of one thread, a VM that needs an even count cannot. The per-class model's
//! relaxation of that packing is weak (on the bench's `s256-off16-70` it
//! stopped at 6 partly used domains against a bound of 5); the patterns of
//! a domain — the VMs and pieces of VMs it holds, each with its cores per
//! thread count — give the packing its cutting-stock form, whose relaxation
//! is tight.
//!
//! A VM of two domains is a *split*: two pieces whose cores together are
//! what it needs ([`classes::fits_exactly`]), on one NUMA node unless the
//! VM spreads; each piece is counted in the patterns of its domain, and per
//! node the pieces of each kind balance the splits chosen. Where the held
//! optima have extra NUMA nodes (a `preferred` VM over two nodes, when the
//! pools are tight), a `preferred` VM's split may also lie *across* two
//! nodes, one piece on each, and the splits across are at most as many as
//! the extra nodes held (as many, at the optimum held): a VM in its fewest
//! domains touches one node, or two where its two domains are on two
//! nodes, and only `preferred` VMs count extra nodes.
//!
//! Every plan of the host at the held optima with objective 6 at its bound
//! is then a plan of this model (each VM it places on its fewest domains,
//! on its fewest cores or up to the slack more, [`held`]; the cores of the
//! NIC-preferring VMs off their NICs' nodes no more than held), and each
//! plan of this model is one of the host's at
//! those optima: its proven optimum is the host's objective 7
//! ([`Restriction::solve`]), and any of its plans meets objective 6's
//! bound.

use super::super::backend::Model;
use super::super::expr::{Expr, Var};
use super::super::lexicographic::{lexicographic, Rules};
use super::super::memory_rows::MemoryRows;
use super::program;
use crate::deadline::Deadline;
use crate::ids::{CoreId, NodeId};
use crate::solve::classes::{self, Class, Domain};
use crate::solve::memory::Split;
use crate::solve::{EmulatorPolicy, NumaPolicy, Placement, PlanRequest, Tier, VmRequest};
use std::cell::OnceCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

mod held;

pub(super) use held::{Bound, Held};

/// The most patterns over all domain groups; beyond it the model declines.
const MOST_PATTERNS: usize = 20_000;

/// The most cores beyond its fewest a VM may take in this model: where the
/// held cores are more than the fewest of a choice of VMs, a plan at the
/// optima may give a VM as many more as the difference (its slack), and the
/// model then lays VMs out on their fewest cores or up to this many more.
const MOST_SLACK: u32 = 2;

/// Whether the request has the form this model needs, whatever the held
/// optima: no running VM, no compaction or move ceiling, no VM that must
/// touch a set of nodes, and every L3 domain inside one NUMA node. Memory
/// is counted as the per-class model counts it (memory rows per node and
/// page size, as its): a VM whose memory it leaves uncounted
/// ([`super::uncounted_memory`], named in the plan's warning) is left
/// uncounted here too, so that both models have the same plans.
pub(super) fn applies(request: &PlanRequest, classes: &[Class]) -> bool {
    let mut node_of: BTreeMap<Domain, Option<NodeId>> = BTreeMap::new();
    let one_node = classes
        .iter()
        .all(|c| *node_of.entry(c.domain).or_insert(c.node) == c.node);
    one_node
        && super::without_moves(request)
        && request.vms.iter().all(|vm| vm.cell_nodes.is_empty())
}

/// The host and the VMs as this model sees them, built once per solve.
pub(super) struct Restriction {
    host: Host,
    kinds: Vec<Kind>,
}

impl Restriction {
    /// `None` where the model declines (see [`applies`]; a VM that needs
    /// more than two domains or fits nowhere).
    pub(super) fn new(request: &PlanRequest, classes: &[Class]) -> Option<Restriction> {
        if !applies(request, classes) {
            return None;
        }
        let host = Host::new(classes)?;
        let kinds = kinds(request, classes, &host)?;
        Some(Restriction { host, kinds })
    }

    /// The L3 domains over all VMs where each sits in its fewest (one where
    /// a domain holds it whole, else two).
    #[cfg(test)]
    pub(super) fn domains(&self) -> u32 {
        held::total(&self.kinds, Kind::domains)
    }

    /// For tests: the optima held where every VM is placed, each on its
    /// fewest cores, over `extra_nodes` extra NUMA nodes, with at most
    /// `nic_remote` cores off the NICs' nodes.
    #[cfg(test)]
    pub(super) fn every_vm_held(&self, extra_nodes: u32, nic_remote: f64) -> Held {
        Held::of_every_vm(&self.kinds, extra_nodes, nic_remote)
    }

    /// Objective 6's bound at `held` ([`held::fewest_domains`]): the L3
    /// domains over the VMs placed, each in its fewest, where every plan at
    /// the held optima puts each VM it places on its fewest cores or a few
    /// more laid out alike; `None` where that is not sure.
    pub(super) fn fewest_domains(&self, held: &Held) -> Option<Bound> {
        held::fewest_domains(&self.kinds, held, &|k| k.more(&self.host))
    }

    /// The optimum of objective 7 over the plans at `held` whose placed VMs
    /// take `domains` L3 domains in all, each VM on its fewest cores and L3
    /// domains (`domains` from [`Restriction::fewest_domains`]), with at
    /// most `held.nic_remote` cores of NIC-preferring VMs off their NICs'
    /// nodes and at most `held.extra_nodes` splits across two nodes — a placement
    /// of the host, proven or not; `None` past the patterns' limit or with
    /// no point by `deadline`. Where `held` leaves VMs out, the model
    /// chooses how many of each kind it places (the first in spec order).
    pub(super) fn solve(
        &self,
        request: &PlanRequest,
        classes: &[Class],
        (held, bound): (&Held, Bound),
        deadline: Deadline,
    ) -> Option<Placement> {
        let Restriction { host, kinds } = self;
        let kinds = kinds.as_slice();
        let layings: Vec<Laying> = kinds
            .iter()
            .map(|k| k.laying(bound.slack, held.extra_nodes > 0, host))
            .collect();
        let mut patterns: Vec<Vec<Pattern>> = Vec::new();
        let mut total = 0;
        for group in &host.groups {
            let found = patterns_of(
                &host.threads,
                (kinds, &layings),
                group,
                MOST_PATTERNS - total,
            )?;
            total += found.len();
            patterns.push(found);
        }
        let mut m = Model::default();
        let placed = placed_per_kind(&mut m, kinds, held, bound);
        // Where a VM may take more than its fewest cores, the cores held.
        let mut cores = Expr::default();
        let mut memory = MemoryRows::new(request);
        let mut x: Vec<Vec<Var>> = Vec::new();
        let mut partial = Expr::default();
        let mut remote = Expr::default();
        // Per (kind, zone, shape): the items of the patterns that hold it.
        let mut items: BTreeMap<(usize, Zone, &[u32]), Expr> = BTreeMap::new();
        for (group, found) in host.groups.iter().zip(&patterns) {
            let most = group.domains.len() as f64;
            let vars: Vec<Var> = found.iter().map(|_| m.int(most)).collect();
            for (p, &v) in found.iter().zip(&vars) {
                if !p.full {
                    partial += v;
                }
                if p.remote > 0 {
                    remote += f64::from(p.remote) * v;
                }
                for (k, shape) in &p.items {
                    let kind = &kinds[*k];
                    let zone = kind.zone(group.node);
                    cores += f64::from(shape.iter().sum::<u32>()) * v;
                    *items.entry((*k, zone, shape.as_slice())).or_default() += v;
                    // Memory: a whole VM's on its node; a split's, where it
                    // stays on one node, with the split below; per core else.
                    let vm = kind.members[0];
                    match kind.memory {
                        Split::Whole if kind.whole => memory.add(vm, group.node, 1.0, v),
                        Split::PerCore(c) => {
                            let cores: u32 = shape.iter().sum();
                            memory.add(vm, group.node, f64::from(cores) / f64::from(c), v);
                        }
                        Split::Whole | Split::Uncounted => {}
                    }
                }
            }
            m.le(vars.iter().copied().sum::<Expr>(), most);
            x.push(vars);
        }
        // Every VM placed once: whole, or as the two pieces of a split.
        let mut splits: Vec<BTreeMap<(Zone, usize), Var>> = Vec::new();
        let mut splits_across: Vec<BTreeMap<(Nodes, usize), Var>> = Vec::new();
        let mut extra = Expr::default();
        for (((k, kind), placed), laying) in kinds.iter().enumerate().zip(placed).zip(&layings) {
            let count = kind.count() as f64;
            let mut chosen = BTreeMap::new();
            let mut chosen_across = BTreeMap::new();
            if kind.whole {
                let whole: Expr = items
                    .iter()
                    .filter(|((kk, _, _), _)| *kk == k)
                    .map(|(_, e)| e.clone())
                    .sum();
                m.eq(whole, placed);
            } else {
                // Per zone and shape: the pieces the splits chosen take.
                let mut used: BTreeMap<(Zone, &[u32]), Expr> = BTreeMap::new();
                for &zone in &kind.zones(host) {
                    for (s, (a, b)) in laying.splits.iter().enumerate() {
                        let y = m.int(count);
                        chosen.insert((zone, s), y);
                        if let (Some(node), Split::Whole) = (zone, kind.memory) {
                            memory.add(kind.members[0], node, 1.0, y);
                        }
                        *used.entry((zone, a.as_slice())).or_default() += y;
                        *used.entry((zone, b.as_slice())).or_default() += y;
                    }
                }
                // Across two nodes (a `preferred` VM's, whose memory is
                // counted per core, with the pieces).
                for (s, (a, b)) in laying.across.iter().enumerate() {
                    for (first, second) in node_pairs(host, a == b) {
                        let w = m.int(count);
                        chosen_across.insert(((first, second), s), w);
                        extra += w;
                        *used.entry((kind.zone(first), a.as_slice())).or_default() += w;
                        *used.entry((kind.zone(second), b.as_slice())).or_default() += w;
                    }
                }
                // Every zone has every shape of its kind's splits (across
                // ones: every node is in some pair), so these rows hold
                // every piece laid out.
                for ((zone, shape), used) in used {
                    let pieces = items.get(&(k, zone, shape)).cloned().unwrap_or_default();
                    m.eq(pieces, used);
                }
                let all = chosen.values().chain(chosen_across.values()).copied();
                m.eq(all.sum::<Expr>(), placed);
            }
            splits.push(chosen);
            splits_across.push(chosen_across);
        }
        m.le(extra, f64::from(held.extra_nodes));
        if bound.slack > 0 {
            m.eq(cores, f64::from(held.cores));
        }
        m.le(remote, held.nic_remote);
        memory.bound(&mut m);
        let tiers = vec![(Tier::PartialL3, partial)];
        let solved = lexicographic(
            &mut m,
            &tiers,
            &[],
            deadline,
            &mut Plain,
            "ilp fewest domains",
        );
        let values = solved.values?;
        let laid = Laid {
            classes,
            host,
            kinds,
            values: &values,
        };
        let cores = laid.out(&patterns, &x, (&layings, (&splits, &splits_across)))?;
        Some(Placement {
            cores,
            proven: solved.proven,
            fault: solved.fault,
        })
    }
}

/// Per kind, how many of its VMs the model places: all of them where
/// `held` places every VM; else a variable, with rows that keep the choice
/// at `held` (VMs per level, vCPUs, cores at each VM's fewest where none
/// may take more) and at `bound`'s L3 domains over the VMs placed.
fn placed_per_kind(m: &mut Model, kinds: &[Kind], held: &Held, bound: Bound) -> Vec<Expr> {
    if held.every_vm(kinds) {
        return kinds
            .iter()
            .map(|k| Expr::from(f64::from(k.count())))
            .collect();
    }
    let placed: Vec<Var> = kinds.iter().map(|k| m.int(f64::from(k.count()))).collect();
    let sum = |per_vm: &dyn Fn(&Kind) -> u32| -> Expr {
        kinds
            .iter()
            .zip(&placed)
            .map(|(k, &v)| f64::from(per_vm(k)) * v)
            .sum()
    };
    for (&level, &count) in &held.placed {
        let at_level: Expr = kinds
            .iter()
            .zip(&placed)
            .filter(|(k, _)| k.vm.priority == level)
            .map(|(_, &v)| Expr::from(v))
            .sum();
        m.eq(at_level, f64::from(count));
    }
    m.eq(sum(&|k| k.vm.vcpus), f64::from(held.vcpus));
    if bound.slack == 0 {
        m.eq(sum(&|k| k.fewest), f64::from(held.cores));
    }
    m.eq(sum(&Kind::domains), f64::from(bound.domains));
    placed.into_iter().map(Expr::from).collect()
}

/// The loop's plain rules: no bound, the whole time.
struct Plain;

impl Rules for Plain {}

/// Where a split's two pieces must lie: one NUMA node, or anywhere
/// (`None`: a VM that spreads).
type Zone = Option<Option<NodeId>>;

/// A split's two pieces, cores per thread count each.
type Pair = (Vec<u32>, Vec<u32>);

/// The nodes of a split across two: its first piece's, its second's.
type Nodes = (Option<NodeId>, Option<NodeId>);

/// The ordered pairs of two nodes of `host`, first below second where the
/// two pieces are alike (either order is the same split then).
fn node_pairs(host: &Host, alike: bool) -> Vec<Nodes> {
    let nodes = host.nodes();
    let mut pairs = Vec::new();
    for &first in &nodes {
        for &second in &nodes {
            if first < second || (first > second && !alike) {
                pairs.push((first, second));
            }
        }
    }
    pairs
}

/// The host as this model sees it: its thread counts and its domains,
/// grouped where alike.
struct Host {
    /// The thread counts of its classes, most first: a shape's positions.
    threads: Vec<u32>,
    groups: Vec<Group>,
}

/// L3 domains alike: the same node and the same cores per thread count.
struct Group {
    node: Option<NodeId>,
    /// Cores per thread count (`Host::threads`' order).
    caps: Vec<u32>,
    /// Per domain: its class per thread count.
    domains: Vec<Vec<Option<usize>>>,
}

impl Host {
    /// `None` where a domain has two classes of one thread count.
    fn new(classes: &[Class]) -> Option<Host> {
        let set: BTreeSet<u32> = classes.iter().map(|c| c.threads).collect();
        let threads: Vec<u32> = set.into_iter().rev().collect();
        let mut per_domain: BTreeMap<Domain, Vec<Option<usize>>> = BTreeMap::new();
        for (c, class) in classes.iter().enumerate() {
            let at = threads.iter().position(|&t| t == class.threads);
            let slots = per_domain
                .entry(class.domain)
                .or_insert_with(|| vec![None; threads.len()]);
            // One class per domain and thread count (classes split by where
            // running VMs are now, which `applies` rules out, would be
            // several): a second is not this model's.
            match at.and_then(|at| slots.get_mut(at)) {
                Some(slot @ None) => *slot = Some(c),
                _ => return None,
            }
        }
        /// A domain's node and cores per thread count.
        type Key = (Option<NodeId>, Vec<u32>);
        let mut by_shape: BTreeMap<Key, Vec<Vec<Option<usize>>>> = BTreeMap::new();
        for (_, slots) in per_domain {
            let caps = slots
                .iter()
                .map(|c| c.map_or(0, |c| classes[c].size()))
                .collect();
            let node = slots.iter().flatten().next().and_then(|&c| classes[c].node);
            by_shape.entry((node, caps)).or_default().push(slots);
        }
        let groups = by_shape
            .into_iter()
            .map(|((node, caps), domains)| Group {
                node,
                caps,
                domains,
            })
            .collect();
        Some(Host { threads, groups })
    }

    /// The nodes of its domains.
    fn nodes(&self) -> BTreeSet<Option<NodeId>> {
        self.groups.iter().map(|g| g.node).collect()
    }
}

/// VMs alike for this model: the same vCPUs, isolated emulator or not,
/// CPUs needed, thread policy, NUMA policy, NICs and memory (so the same
/// classes, shapes, remote cores and pages), and priority (where VMs are
/// left out, the VMs placed are counted per level).
#[derive(Clone)]
struct Kind {
    /// The VMs, in spec order.
    members: Vec<usize>,
    /// One of them.
    vm: VmRequest,
    /// Cores each needs at its fewest: on the most threads of its classes.
    fewest: u32,
    /// Whether some domain holds it whole.
    whole: bool,
    /// Where no domain holds it whole: its splits on one node (on any two
    /// domains, if it spreads), two pieces each (cores per thread count),
    /// the smaller piece first.
    splits: Vec<Pair>,
    /// Where no domain holds it whole and it is `preferred`: its splits
    /// across two nodes, likewise (a `strict` VM keeps to a node, and a VM
    /// that spreads has every split in `splits` already).
    across: Vec<Pair>,
    /// With 1, 2… ([`MOST_SLACK`]) cores more than its fewest: found when
    /// first asked ([`Kind::more`]), only where the held cores leave slack.
    more: OnceCell<Vec<More>>,
    /// How its memory goes to nodes, as the per-class model counts it.
    memory: Split,
}

/// A VM of a kind on more cores than its fewest.
#[derive(Debug, Clone, PartialEq)]
enum More {
    /// No mix of that many cores fits it exactly: no plan gives it as many.
    Never,
    /// Laid out as on its fewest: whole in a domain where those are (then
    /// no splits), else over two (these splits, on one node and across).
    Alike {
        splits: Vec<Pair>,
        across: Vec<Pair>,
    },
    /// Otherwise: whole where its fewest are not, or the other way round,
    /// or over three domains or more.
    Unlike,
}

/// How the model lays a kind's VMs out: whole on each of `cores` core
/// counts, or as these splits.
struct Laying {
    cores: Vec<u32>,
    splits: Vec<Pair>,
    across: Vec<Pair>,
}

impl Kind {
    fn count(&self) -> u32 {
        u32::try_from(self.members.len()).unwrap_or(u32::MAX)
    }

    /// The L3 domains each of its VMs takes.
    fn domains(&self) -> u32 {
        if self.whole {
            1
        } else {
            2
        }
    }

    /// Its laying where VMs may take up to `slack` cores more than their
    /// fewest, with splits across two nodes where `across`.
    fn laying(&self, slack: u32, across: bool, host: &Host) -> Laying {
        let mut laying = Laying {
            cores: vec![self.fewest],
            splits: self.splits.clone(),
            across: if across {
                self.across.clone()
            } else {
                Vec::new()
            },
        };
        // Found only where there is slack.
        if slack == 0 {
            return laying;
        }
        for (extra, more) in (1..=slack).zip(self.more(host)) {
            if let More::Alike {
                splits,
                across: apart,
            } = more
            {
                laying.cores.push(self.fewest + extra);
                laying.splits.extend(splits.iter().cloned());
                if across {
                    laying.across.extend(apart.iter().cloned());
                }
            }
        }
        laying
    }

    /// How it lies on 1, 2… ([`MOST_SLACK`]) cores more than its fewest.
    fn more(&self, host: &Host) -> &[More] {
        self.more.get_or_init(|| {
            (1..=MOST_SLACK)
                .map(|extra| more_cores(&self.vm, self.fewest + extra, self.whole, host))
                .collect()
        })
    }

    /// Where its pieces on `node` must balance.
    fn zone(&self, node: Option<NodeId>) -> Zone {
        (self.vm.numa != NumaPolicy::Spread).then_some(node)
    }

    /// Every zone its splits may take.
    fn zones(&self, host: &Host) -> Vec<Zone> {
        if self.vm.numa == NumaPolicy::Spread {
            vec![None]
        } else {
            host.nodes().into_iter().map(Some).collect()
        }
    }
}

/// The kinds of `request`'s VMs; `None` where a VM needs more than two
/// domains (or fits nowhere).
fn kinds(request: &PlanRequest, classes: &[Class], host: &Host) -> Option<Vec<Kind>> {
    type Key = (
        (u32, bool, u32),
        &'static str,
        &'static str,
        (crate::solve::NicAffinity, Vec<NodeId>, Vec<NodeId>),
        Option<(u64, u64)>,
        i64,
    );
    let mut by_key: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, vm) in request.vms.iter().enumerate() {
        let numa = match vm.numa {
            NumaPolicy::Strict => "strict",
            NumaPolicy::Preferred => "preferred",
            NumaPolicy::Spread => "spread",
        };
        let cpus = (
            vm.vcpus,
            vm.emulator == EmulatorPolicy::Isolate,
            vm.pus_needed(),
        );
        let memory = vm.memory.map(|m| (m.bytes, m.page_kib));
        let key = (
            cpus,
            vm.threads.name(),
            numa,
            vm.nic_key(),
            memory,
            vm.priority,
        );
        by_key.entry(key).or_default().push(i);
    }
    by_key
        .into_values()
        .map(|members| {
            let vm = request.vms[members[0]].clone();
            let most = host
                .groups
                .iter()
                .flat_map(|g| {
                    g.caps
                        .iter()
                        .zip(&host.threads)
                        .filter(|&(&cap, &t)| cap > 0 && classes::allowed(&vm, g.node, t))
                        .map(|(_, &t)| t)
                })
                .max()?;
            let fewest = classes::cores_needed(&vm, most);
            let whole = host
                .groups
                .iter()
                .any(|g| !shapes(&vm, fewest, g, &host.threads, true).is_empty());
            let (splits, across) = if whole {
                (Vec::new(), Vec::new())
            } else {
                let (splits, across) = two_domains(&vm, fewest, host);
                if splits.is_empty() && across.is_empty() {
                    return None;
                }
                (splits, across)
            };
            Some(Kind {
                members,
                memory: program::memory_split(&vm, classes),
                vm,
                fewest,
                whole,
                splits,
                across,
                more: OnceCell::new(),
            })
        })
        .collect()
}

/// `vm`'s splits of `cores` cores over two domains: on one node (any two,
/// if it spreads), and across two nodes (`preferred` VMs only).
fn two_domains(vm: &VmRequest, cores: u32, host: &Host) -> (Vec<Pair>, Vec<Pair>) {
    let span = match vm.numa {
        NumaPolicy::Spread => Span::Anywhere,
        _ => Span::OneNode,
    };
    let across = match vm.numa {
        NumaPolicy::Preferred => splits_of(vm, cores, host, Span::Across),
        _ => Vec::new(),
    };
    (splits_of(vm, cores, host, span), across)
}

/// `vm` on `cores` cores, more than its fewest (which a domain holds
/// `whole`, or not): never, where no mix of the host's thread counts it
/// may use fits it exactly ([`classes::fits_exactly`]); alike, where it is
/// whole in some domain as its fewest are, or split over two as they are;
/// unlike else.
fn more_cores(vm: &VmRequest, cores: u32, whole: bool, host: &Host) -> More {
    // Any count of cores of each thread count some domain lets it use.
    let caps: Vec<u32> = host
        .threads
        .iter()
        .map(|&t| {
            let usable = host.groups.iter().any(|g| classes::allowed(vm, g.node, t));
            if usable {
                cores
            } else {
                0
            }
        })
        .collect();
    let fits = |shape: &[u32]| classes::fits_exactly(vm, &thread_list(shape, &host.threads));
    let mut any = false;
    let mut shape = vec![0u32; host.threads.len()];
    fill(&caps, (cores, 0), &mut shape, &mut |s| any |= fits(s));
    if !any {
        return More::Never;
    }
    let whole_here = host
        .groups
        .iter()
        .any(|g| !shapes(vm, cores, g, &host.threads, true).is_empty());
    if whole || whole_here {
        return if whole && whole_here {
            More::Alike {
                splits: Vec::new(),
                across: Vec::new(),
            }
        } else {
            More::Unlike
        };
    }
    let (splits, across) = two_domains(vm, cores, host);
    if splits.is_empty() && across.is_empty() {
        More::Unlike
    } else {
        More::Alike { splits, across }
    }
}

/// Every way to put `left` cores on the thread counts from `at` on,
/// within `caps` per thread count.
fn fill(
    caps: &[u32],
    (left, at): (u32, usize),
    shape: &mut Vec<u32>,
    found: &mut dyn FnMut(&[u32]),
) {
    let Some(&cap) = caps.get(at) else {
        if left == 0 {
            found(shape);
        }
        return;
    };
    for n in (0..=left.min(cap)).rev() {
        shape[at] = n;
        fill(caps, (left - n, at + 1), shape, found);
    }
    shape[at] = 0;
}

/// The ways `cores` cores of `vm` lie in a domain of `group`: cores per
/// thread count, each of a class the VM may use and the domain has; with
/// `exact`, only those whose threads are what it needs
/// ([`classes::fits_exactly`], the rule of every solver).
fn shapes(
    vm: &VmRequest,
    cores: u32,
    group: &Group,
    threads: &[u32],
    exact: bool,
) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut shape = vec![0u32; group.caps.len()];
    let mut keep = |shape: &[u32]| {
        if !exact || classes::fits_exactly(vm, &thread_list(shape, threads)) {
            out.push(shape.to_vec());
        }
    };
    // The domain's cores of each thread count the VM may use there.
    let caps: Vec<u32> = group
        .caps
        .iter()
        .zip(threads)
        .map(|(&cap, &t)| {
            if classes::allowed(vm, group.node, t) {
                cap
            } else {
                0
            }
        })
        .collect();
    fill(&caps, (cores, 0), &mut shape, &mut keep);
    out
}

/// A shape's cores as their thread counts.
fn thread_list(shape: &[u32], threads: &[u32]) -> Vec<u32> {
    shape
        .iter()
        .zip(threads)
        .flat_map(|(&n, &t)| std::iter::repeat_n(t, n as usize))
        .collect()
}

/// Which two domains a split may take.
#[derive(Clone, Copy, PartialEq)]
enum Span {
    /// Two of one node.
    OneNode,
    /// Two of two nodes.
    Across,
    /// Any two.
    Anywhere,
}

/// The splits of a VM of `fewest` cores over two domains as `span` has
/// them: pieces of at least one core that domains of the host hold,
/// together what it needs.
fn splits_of(vm: &VmRequest, fewest: u32, host: &Host, span: Span) -> Vec<Pair> {
    let mut found: BTreeSet<Pair> = BTreeSet::new();
    for (i, a) in host.groups.iter().enumerate() {
        for b in &host.groups[i..] {
            let same = std::ptr::eq(a, b);
            let apart = match span {
                Span::OneNode => a.node != b.node,
                Span::Across => a.node == b.node,
                Span::Anywhere => false,
            };
            if (same && a.domains.len() < 2) || apart {
                continue;
            }
            for n in 1..fewest {
                for pa in shapes(vm, n, a, &host.threads, false) {
                    for pb in shapes(vm, fewest - n, b, &host.threads, false) {
                        let both: Vec<u32> = pa.iter().zip(&pb).map(|(x, y)| x + y).collect();
                        if classes::fits_exactly(vm, &thread_list(&both, &host.threads)) {
                            let pair = if pa <= pb {
                                (pa.clone(), pb)
                            } else {
                                (pb, pa.clone())
                            };
                            found.insert(pair);
                        }
                    }
                }
            }
        }
    }
    found.into_iter().collect()
}

/// What one domain holds: VMs and pieces of VMs (by kind) with their cores
/// per thread count.
struct Pattern {
    /// `(kind, cores per thread count)`: a whole VM, or a piece of a split.
    items: Vec<(usize, Vec<u32>)>,
    /// Every free core of the domain taken.
    full: bool,
    /// Cores of NIC-preferring VMs off their NICs' nodes.
    remote: u32,
}

/// Every non-empty pattern of `group`: multisets of (kind, shape) within
/// the domain's cores per thread count, at most one item per VM of a kind:
/// whole VMs of each core count, or pieces of each kind's splits, on one
/// node and across two, as its [`Laying`] has them. `None` past `most`.
fn patterns_of(
    threads: &[u32],
    (kinds, layings): (&[Kind], &[Laying]),
    group: &Group,
    most: usize,
) -> Option<Vec<Pattern>> {
    let mut items: Vec<(usize, Vec<u32>)> = Vec::new();
    for ((k, kind), laying) in kinds.iter().enumerate().zip(layings) {
        let shapes: BTreeSet<Vec<u32>> = if kind.whole {
            laying
                .cores
                .iter()
                .flat_map(|&n| shapes(&kind.vm, n, group, threads, true))
                .collect()
        } else {
            laying
                .splits
                .iter()
                .chain(&laying.across)
                .flat_map(|(a, b)| [a.clone(), b.clone()])
                .filter(|s| holds(&kind.vm, s, group, threads))
                .collect()
        };
        items.extend(shapes.into_iter().map(|s| (k, s)));
    }
    let mut search = Search {
        kinds,
        group,
        items: &items,
        most,
        out: Vec::new(),
        chosen: Vec::new(),
        per_kind: vec![0; kinds.len()],
    };
    search.from(0, group.caps.clone())?;
    Some(search.out)
}

/// Whether a domain of `group` holds a piece of `shape` of `vm`: cores
/// enough of each thread count, each of a class the VM may use.
fn holds(vm: &VmRequest, shape: &[u32], group: &Group, threads: &[u32]) -> bool {
    shape
        .iter()
        .zip(&group.caps)
        .zip(threads)
        .all(|((&n, &cap), &t)| n == 0 || (n <= cap && classes::allowed(vm, group.node, t)))
}

/// The depth-first enumeration of [`patterns_of`].
struct Search<'a> {
    kinds: &'a [Kind],
    group: &'a Group,
    items: &'a [(usize, Vec<u32>)],
    most: usize,
    out: Vec<Pattern>,
    /// Indices into `items`, non-decreasing.
    chosen: Vec<usize>,
    per_kind: Vec<usize>,
}

impl Search<'_> {
    /// Patterns that add items from `at` on to `chosen`, within `left`.
    fn from(&mut self, at: usize, left: Vec<u32>) -> Option<()> {
        for j in at..self.items.len() {
            let (k, shape) = &self.items[j];
            if self.per_kind[*k] >= self.kinds[*k].members.len()
                || shape.iter().zip(&left).any(|(n, l)| n > l)
            {
                continue;
            }
            let rest: Vec<u32> = left.iter().zip(shape).map(|(l, n)| l - n).collect();
            self.chosen.push(j);
            self.per_kind[*k] += 1;
            self.record(&rest)?;
            self.from(j, rest)?;
            self.per_kind[*k] -= 1;
            self.chosen.pop();
        }
        Some(())
    }

    fn record(&mut self, left: &[u32]) -> Option<()> {
        if self.out.len() >= self.most {
            return None;
        }
        let items: Vec<(usize, Vec<u32>)> =
            self.chosen.iter().map(|&j| self.items[j].clone()).collect();
        let remote = items
            .iter()
            .filter(|(k, _)| self.kinds[*k].vm.nic_remote(self.group.node))
            .map(|(_, shape)| shape.iter().sum::<u32>())
            .sum();
        self.out.push(Pattern {
            items,
            full: left.iter().all(|&l| l == 0),
            remote,
        });
        Some(())
    }
}

/// The model's values → concrete cores.
struct Laid<'a> {
    classes: &'a [Class],
    host: &'a Host,
    kinds: &'a [Kind],
    values: &'a [f64],
}

/// Pieces laid out, waiting for their split: per (kind, zone, shape), the
/// cores of each.
type Pieces = BTreeMap<(usize, Zone, Vec<u32>), VecDeque<Vec<CoreId>>>;

/// Per kind, its laying and the splits chosen: on one node (per zone and
/// split) and across two (per nodes and split).
type SplitsChosen<'a> = (
    &'a [Laying],
    (
        &'a [BTreeMap<(Zone, usize), Var>],
        &'a [BTreeMap<(Nodes, usize), Var>],
    ),
);

impl Laid<'_> {
    /// Each group's domains in order take its patterns in order, each item
    /// the lowest free cores of its domain's classes; a whole VM is the next
    /// of its kind (spec order), and the pieces, per zone, make up the
    /// splits chosen.
    fn out(
        &self,
        patterns: &[Vec<Pattern>],
        x: &[Vec<Var>],
        (layings, (splits, splits_across)): SplitsChosen,
    ) -> Option<BTreeMap<usize, Vec<CoreId>>> {
        let mut next_of_kind = vec![0usize; self.kinds.len()];
        let mut cores: BTreeMap<usize, Vec<CoreId>> = BTreeMap::new();
        let mut pieces = Pieces::new();
        for ((group, found), vars) in self.host.groups.iter().zip(patterns).zip(x) {
            let mut domains = group.domains.iter();
            for (p, &v) in found.iter().zip(vars) {
                for _ in 0..v.count(self.values) {
                    let domain = domains.next()?;
                    let mut taken = vec![0usize; domain.len()];
                    for (k, shape) in &p.items {
                        let mut mine = Vec::new();
                        for ((class, &n), from) in domain.iter().zip(shape).zip(&mut taken) {
                            if n == 0 {
                                continue;
                            }
                            let to = *from + n as usize;
                            mine.extend_from_slice(
                                self.classes.get((*class)?)?.cores.get(*from..to)?,
                            );
                            *from = to;
                        }
                        let kind = &self.kinds[*k];
                        if kind.whole {
                            let i = *kind.members.get(next_of_kind[*k])?;
                            next_of_kind[*k] += 1;
                            cores.insert(i, mine);
                        } else {
                            let key = (*k, kind.zone(group.node), shape.clone());
                            pieces.entry(key).or_default().push_back(mine);
                        }
                    }
                }
            }
        }
        for (k, chosen) in splits.iter().enumerate() {
            let kind = &self.kinds[k];
            let laying = layings.get(k)?;
            let here = chosen
                .iter()
                .map(|(&(zone, s), &y)| ((zone, zone), laying.splits.get(s), y));
            let apart = splits_across[k].iter().map(|(&((first, second), s), &y)| {
                (
                    (kind.zone(first), kind.zone(second)),
                    laying.across.get(s),
                    y,
                )
            });
            for ((first, second), pair, y) in here.chain(apart) {
                let (a, b) = pair?;
                for _ in 0..y.count(self.values) {
                    let i = *kind.members.get(next_of_kind[k])?;
                    next_of_kind[k] += 1;
                    let mut mine = pieces.get_mut(&(k, first, a.clone()))?.pop_front()?;
                    mine.extend(pieces.get_mut(&(k, second, b.clone()))?.pop_front()?);
                    cores.insert(i, mine);
                }
            }
        }
        for mine in cores.values_mut() {
            mine.sort();
        }
        Some(cores)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::ThreadPolicy;

    /// One node, two L3 domains of 4 two-thread cores (CPUs 0–7 and 8–15),
    /// CPU 7 (core 3's sibling) off: domain 0 has 3 cores of two threads
    /// and one of one. VMs of `vcpus`, `threads = "prefer"`.
    fn request(vcpus: &[u32]) -> PlanRequest {
        super::super::test_request("package:1 l3:2 core:4 pu:2", 7, vcpus)
    }

    /// Objective 6's bound of `domains` with every VM on its fewest cores.
    fn at_fewest(domains: u32) -> Bound {
        Bound { domains, slack: 0 }
    }

    /// The restriction's plan (every VM in its fewest domains): per VM its
    /// cores, and objective 7.
    fn solved(req: &PlanRequest) -> (Vec<Vec<u32>>, u32) {
        let classes = classes::classes(&classes::free_cores(req));
        let far = Deadline::after(std::time::Duration::from_secs(30));
        let model = Restriction::new(req, &classes).unwrap();
        let held = model.every_vm_held(0, 0.0);
        let p = model
            .solve(req, &classes, (&held, at_fewest(model.domains())), far)
            .unwrap();
        assert!(p.proven);
        let cores = p
            .cores
            .values()
            .map(|c| c.iter().map(|c| c.0).collect())
            .collect();
        (cores, crate::solve::objective(req, &p).partial_l3_domains)
    }

    /// 7 vCPUs need 4 cores: 3 of two threads and the core of one fill
    /// domain 0 exactly; 8 vCPUs fill domain 1. Nothing partly used.
    #[test]
    fn an_odd_vm_fills_the_domain_with_the_core_of_one_thread() {
        let (cores, partial) = solved(&request(&[8, 7]));
        assert_eq!(cores, vec![vec![4, 5, 6, 7], vec![0, 1, 2, 3]]);
        assert_eq!(partial, 0);
    }

    /// Two VMs of 6 vCPUs (3 two-thread cores each) cannot use the core of
    /// one thread: one goes to domain 0, which stays partly used, and so
    /// does domain 1 (4 cores, 3 taken) — 2, where counting the core of one
    /// thread as two would give 1 (domain 0 full).
    #[test]
    fn even_vms_leave_the_core_of_one_thread_and_its_domain_partly_used() {
        let (cores, partial) = solved(&request(&[6, 6]));
        assert_eq!(cores.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 3]);
        assert!(cores.iter().flatten().all(|&c| c != 3));
        assert_eq!(partial, 2);
    }

    /// 12 vCPUs (6 two-thread cores) fit no domain whole: a split, 3 and 3
    /// or 2 and 4 two-thread cores (the core of one thread would leave it a
    /// vCPU short). With 2 vCPUs (one two-thread core) beside it, every
    /// two-thread core is taken: domain 1 full, domain 0 partly used (its
    /// core of one thread left), whichever split — 1.
    #[test]
    fn a_vm_of_two_domains_is_split_over_them() {
        let req = request(&[12, 2]);
        let classes = classes::classes(&classes::free_cores(&req));
        assert_eq!(
            Restriction::new(&req, &classes).map(|r| r.domains()),
            Some(3)
        );
        let (cores, partial) = solved(&req);
        assert_eq!(cores[0].len(), 6);
        assert!(!cores[0].contains(&3));
        assert_eq!(cores.iter().flatten().filter(|&&c| c >= 4).count(), 4);
        assert_eq!(partial, 1);
    }

    /// VMs alike but for their priority are two kinds: where VMs are left
    /// out, the VMs placed are counted per level. One VM of 4 vCPUs (2
    /// two-thread cores, one domain) placed at level 10 and none at level
    /// 0: the bound is its one domain.
    #[test]
    fn vms_of_two_priorities_are_two_kinds() {
        let mut req = request(&[4, 4]);
        req.vms[1].priority = 10;
        let classes = classes::classes(&classes::free_cores(&req));
        let model = Restriction::new(&req, &classes).unwrap();
        assert_eq!(model.kinds.len(), 2);
        let held = Held {
            placed: [(0, 0), (10, 1)].into_iter().collect(),
            vcpus: 4,
            cores: 2,
            extra_nodes: 0,
            nic_remote: 0.0,
        };
        assert_eq!(model.fewest_domains(&held), Some(at_fewest(1)));
    }

    /// Two nodes of two L3 domains of 2 one-thread cores (CPUs 0–3 on node
    /// 0, 4–7 on node 1), and two `preferred` VMs of 3 vCPUs: each needs
    /// two domains, 2 cores in one and 1 in the other. Kept to a node each,
    /// both nodes keep a domain partly used: 2. With one extra node held,
    /// one VM crosses to the other's node and their pieces of 1 core share
    /// a domain there: three full domains, 0, and one VM over two nodes.
    #[test]
    fn a_preferred_vm_splits_across_two_nodes_as_the_extra_nodes_held() {
        let mut req = super::super::test_request("package:1 numa:2 l3:2 core:2 pu:1", 99, &[3, 3]);
        for vm in &mut req.vms {
            vm.numa = NumaPolicy::Preferred;
        }
        let classes = classes::classes(&classes::free_cores(&req));
        let model = Restriction::new(&req, &classes).unwrap();
        assert_eq!(model.domains(), 4);
        let far = Deadline::after(std::time::Duration::from_secs(30));
        let solve = |extra| {
            let held = model.every_vm_held(extra, 0.0);
            let p = model
                .solve(&req, &classes, (&held, at_fewest(4)), far)
                .unwrap();
            assert!(p.proven);
            let o = crate::solve::objective(&req, &p);
            (o.partial_l3_domains, o.extra_numa_nodes, o.vm_l3_domains)
        };
        assert_eq!(solve(0), (2, 0, 4));
        assert_eq!(solve(1), (0, 1, 4));
    }

    /// One L3 domain per node: a `preferred` VM that no domain holds has
    /// only splits across two nodes, and a `strict` one none (declined).
    #[test]
    fn a_vm_over_two_nodes_of_one_domain_each_is_preferred_or_declined() {
        let desc = "package:1 numa:2 l3:1 core:2 pu:1";
        let mut req = super::super::test_request(desc, 99, &[3]);
        let classes = classes::classes(&classes::free_cores(&req));
        assert!(Restriction::new(&req, &classes).is_none());
        req.vms[0].numa = NumaPolicy::Preferred;
        let model = Restriction::new(&req, &classes).unwrap();
        let far = Deadline::after(std::time::Duration::from_secs(30));
        // No extra node held: no plan; one: the VM over both nodes.
        let held = model.every_vm_held(0, 0.0);
        assert!(model
            .solve(&req, &classes, (&held, at_fewest(2)), far)
            .is_none());
        let held = model.every_vm_held(1, 0.0);
        let p = model
            .solve(&req, &classes, (&held, at_fewest(2)), far)
            .unwrap();
        let o = crate::solve::objective(&req, &p);
        assert_eq!(
            (o.placed, o.extra_numa_nodes, o.partial_l3_domains),
            (1, 1, 1)
        );
    }

    /// A VM that needs three domains (9 cores) is not this model's.
    #[test]
    fn a_vm_over_three_domains_is_declined() {
        let req = request(&[18]);
        let classes = classes::classes(&classes::free_cores(&req));
        assert!(Restriction::new(&req, &classes).is_none());
    }

    /// A VM that must touch a set of nodes is left to the per-class model.
    #[test]
    fn a_vm_on_given_nodes_is_not_this_models() {
        let mut req = request(&[2]);
        req.vms[0].cell_nodes = vec![NodeId(0), NodeId(1)];
        let classes = classes::classes(&classes::free_cores(&req));
        assert!(!applies(&req, &classes));
    }

    /// Isolated threads take any core, one vCPU each: 4 vCPUs fill domain
    /// 0 with its core of one thread, 4 two-thread cores of `prefer` fill
    /// domain 1.
    #[test]
    fn isolated_threads_take_the_core_of_one_thread() {
        let mut req = request(&[4, 8]);
        req.vms[0].threads = ThreadPolicy::Isolate;
        let (cores, partial) = solved(&req);
        assert_eq!(cores, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(partial, 0);
    }
}
