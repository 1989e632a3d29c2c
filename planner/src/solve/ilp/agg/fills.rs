//! Objectives 6–7 by a search over what each NUMA node holds.
//!
//! With every VM placed, a layout is, node by node, the pieces there (a
//! VM's cores on that node) and how they lie over the node's L3 domains.
//! How they best lie is [`super::components`]: the pieces plus a cost per
//! node. So objectives 6–7 are the least, over which pieces each node
//! holds, of the pieces (the VMs plus the extra nodes of objective 4, held)
//! plus the nodes' costs. The search fills node after node, best content
//! first, and prunes by what the nodes left cannot do better than: each
//! piece left touches a domain per largest domain's cores, on a full host
//! ([`Search::upper_components`]) the components the pieces' cores allow,
//! and free cores that no set of the domains left holds whole leave one
//! partly used ([`Search::empty_domains_hold`]). It ends as soon as a
//! layout is at the models' lower bounds of objectives 6–7 (`floor`). On a
//! full host the spread VMs' cores fill a node exactly unless a VM is split
//! there, and on the last node each spread VM puts all it has left.
//!
//! The pattern model's relaxation does not see components: on full chiplet
//! hosts it stopped 1–2 domains above this optimum after 8 s. The search
//! covers VMs with `numa = "strict"`, `"preferred"` with at most one extra
//! node (one preferred VM in two pieces, the first on the earlier node) and
//! `"spread"` (any cores on each node it may use); it declines — and the
//! models decide — with more extra nodes, memory that can bind, VMs that
//! must touch given nodes, a VM left out, a node whose grouping gives up
//! ([`super::components::Costed`]), or when it runs out of its budget. It
//! keeps every rule the models keep, objective 5 only where its optimum is
//! 0 (no core off a NIC's node): its layout is the answer when it holds
//! objectives 1–5 (checked), else the models decide.

use super::components::{Caps, Cost, Costed, Counts, Groups};
use super::host::{Host, Vms};
use super::layout::Units;
use crate::deadline::Deadline;
use crate::ids::NodeId;
use crate::solve::{NumaPolicy, PlanRequest, Tier};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// Node contents the search may try before it gives up (0.07–0.22 s on the
/// big-VM benchmark, docs/benchmarks.md).
const BUDGET: u64 = 2_000_000;

/// The same with spread VMs, whose cores per node multiply the contents,
/// once the search has found a layout better than the start (else
/// [`BUDGET`]): on the big-VM benchmark's `s512-l3x32-90` it improves after
/// 1.6 million and reaches the bound after 3.8 million (0.25 s), where the
/// models did not in 8 s (docs/benchmarks.md).
const BUDGET_SPREAD: u64 = 4_000_000;

/// Contents of one node the search lists at most; more, and it gives up.
const MOST_FILLS: usize = 100_000;

/// Objectives 6 and 7 of a layout, compared in that order.
pub(super) type Value = (u32, u32);

/// What the search found.
pub(super) enum Found {
    /// The search ended: objectives 6–7's optimum, and a layout that has it
    /// (`None` when the start has it already).
    Optimum(Value, Option<Units>),
    /// It stopped early; a layout better than the start, if it found one.
    Stopped(Option<Units>),
}

/// VMs that the search tells apart only by cores, whether they may be split
/// and where they may go.
struct Kind {
    cores: u32,
    preferred: bool,
    /// Per node (in [`Search::nodes`] order).
    allowed: Vec<bool>,
    /// The VMs, in spec order.
    members: Vec<usize>,
}

struct Node {
    cells: Vec<usize>,
    caps: Caps,
    /// The first node with these caps: the key of their costs.
    caps_id: u32,
    cores: u32,
    domains: u32,
}

/// What one node holds.
#[derive(Clone, Debug, PartialEq)]
struct Fill {
    /// Whole VMs: how many of each kind.
    whole: Counts,
    /// The rest of the VM split before (its kind, cores).
    rest: Option<(usize, u32)>,
    /// The first piece of a VM split here (kind, cores here).
    first: Option<(usize, u32)>,
    /// Cores here of each VM with `numa = "spread"` ([`Search::spread`]).
    spread: Counts,
    /// Its pieces, and their cost on the node.
    pieces: u32,
    cost: Cost,
}

impl Fill {
    /// Its pieces' cores, appended to `sizes`.
    fn sizes(&self, kinds: &[Kind], sizes: &mut Vec<u32>) {
        for (k, &n) in self.whole.iter().enumerate() {
            sizes.extend(std::iter::repeat_n(kinds[k].cores, n as usize));
        }
        sizes.extend(self.rest.map(|(_, c)| c));
        sizes.extend(self.first.map(|(_, c)| c));
        sizes.extend(self.spread.iter().copied().filter(|&c| c > 0));
    }

    fn whole_only(&self) -> bool {
        self.rest.is_none() && self.first.is_none() && self.spread.iter().all(|&c| c == 0)
    }

    /// Its objectives 6 and 7 on its node.
    fn value(&self) -> Value {
        (self.pieces + self.cost.0, self.cost.1)
    }
}

/// Which ways of spread VMs' cores a node may take.
#[derive(Clone, Copy)]
struct Ways {
    /// They fill the node's free cores exactly.
    exact: bool,
    /// It is the last node: each puts all its cores left.
    last: bool,
}

/// A VM with `numa = "spread"`: any cores on any node it may use, each
/// node's a piece.
struct Spread {
    vm: usize,
    /// Per node (in [`Search::nodes`] order).
    allowed: Vec<bool>,
    /// Its cores not on a node yet.
    left: u32,
}

/// The domains of the nodes from each on (the bounds read them at every
/// content tried).
struct After {
    /// Free cores, the most of one domain (1 at least) and domains.
    room: u32,
    largest: u32,
    domains: u32,
    /// Domains by free cores: how many.
    caps: BTreeMap<u32, u32>,
    /// Per number of free cores, whether some of the domains hold exactly
    /// that many whole.
    sums: Vec<bool>,
}

impl After {
    /// Per node `n` (and one past the last), the domains of nodes `n..`.
    fn of(nodes: &[Node]) -> Vec<After> {
        let mut out = vec![After {
            room: 0,
            largest: 1,
            domains: 0,
            caps: BTreeMap::new(),
            sums: vec![true],
        }];
        for node in nodes.iter().rev() {
            let next = out.last().map_or_else(Vec::new, |a| a.sums.clone());
            let mut caps = out.last().map(|a| a.caps.clone()).unwrap_or_default();
            let mut sums = next;
            for &(v, c) in &node.caps {
                *caps.entry(v).or_default() += c;
                // Each domain of `v` free cores, taken or not.
                for _ in 0..c {
                    let mut more = vec![false; sums.len() + v as usize];
                    for (x, &can) in sums.iter().enumerate() {
                        more[x] |= can;
                        more[x + v as usize] |= can;
                    }
                    sums = more;
                }
            }
            let before = out.last();
            out.push(After {
                room: before.map_or(0, |a| a.room) + node.cores,
                largest: before
                    .map_or(1, |a| a.largest)
                    .max(node.caps.first().map_or(1, |c| c.0)),
                domains: before.map_or(0, |a| a.domains) + node.domains,
                caps,
                sums,
            });
        }
        out.reverse();
        out
    }
}

struct Search {
    /// Per node, its domains and the later nodes' ([`After::of`]).
    after: Vec<After>,
    nodes: Vec<Node>,
    kinds: Vec<Kind>,
    spread: Vec<Spread>,
    left: Vec<u32>,
    /// The second piece of the split VM, not yet on a node.
    pending: Option<(usize, u32)>,
    splits: u32,
    /// Every free core is used: nodes are filled exactly.
    full: bool,
    fills: Vec<Fill>,
    /// Per node, whether it is alike the node before ([`Search::alike_nodes`]).
    alike: Vec<bool>,
    /// Per node, its contents and their order, kept for the next visit.
    lists: Vec<(Vec<Fill>, Vec<usize>)>,
    /// The best value known (the start's), and a better answer's fills.
    best: Value,
    better: Option<Vec<Fill>>,
    /// The models' lower bounds of objectives 6–7: a layout there is
    /// optimal, and the search ends.
    floor: Value,
    /// Costs known, by the node's caps id followed by its sorted pieces.
    costs: FxHashMap<Vec<u32>, Costed>,
    /// The key being looked up (kept to spare an allocation per content).
    key: Vec<u32>,
    /// The spread VMs' ways on a node ([`Search::spread_pieces`]), kept
    /// for the same reason.
    ways: Vec<Counts>,
    /// Node contents tried, and how many it may.
    work: u64,
    budget: u64,
    deadline: Deadline,
    stopped: bool,
}

/// Objectives 6–7 by the search, where it applies: `start` (holding
/// objectives 1–5) has the value `start`, `floor` is the models' lower
/// bound of them; `held` the optima of 1–5. `None` where it does not apply.
pub(super) fn search(
    request: &PlanRequest,
    (host, vms): (&Host, &Vms),
    held: &BTreeMap<Tier, f64>,
    (start, floor): (Value, Value),
    deadline: Deadline,
) -> Option<Found> {
    let total: u32 = host.cells.iter().map(super::host::Cell::cap).sum();
    // Held optima are integers; a backend's 0.9999 is 1 (as 0 it would
    // leave out every layout with the extra node objective 4 needs).
    let held_at = |tier| held.get(&tier).map(|v: &f64| v.round());
    let extra = held_at(Tier::ExtraNodes).unwrap_or(0.0);
    let cores: u32 = vms.each().map(|(_, c)| c).sum();
    let applies = host.one_cell_per_domain()
        && vms.placeable() == request.vms.len()
        && held_at(Tier::Cores) == Some(f64::from(cores))
        && (0.0..=1.0).contains(&extra)
        && !crate::solve::memory::active(request)
        && request.vms.iter().all(|v| v.cell_nodes.is_empty());
    if !applies {
        return None;
    }
    // Objective 5 held at 0: no VM has a core off its NIC's node, which
    // the search keeps as a rule of where VMs may go.
    let near_nic = held_at(Tier::NicRemote).is_some_and(|r| r == 0.0);
    let started = std::time::Instant::now();
    let mut s = Search::new(host, vms, (request, near_nic), extra as u32, deadline);
    s.full = cores == total;
    s.best = start;
    s.floor = floor;
    s.go(0, (0, 0));
    let units = s.better.take().map(|fills| s.units(host, &fills));
    tracing::debug!(
        target: super::super::TRACE,
        "agg: search over the nodes' contents: {:.1} ms, {} contents tried, {}",
        started.elapsed().as_secs_f64() * 1e3,
        s.work,
        if s.stopped { "stopped" } else { "ended" }
    );
    if s.stopped && !s.at_floor() {
        return Some(Found::Stopped(units));
    }
    Some(Found::Optimum(s.best, units))
}

impl Search {
    fn new(
        host: &Host,
        vms: &Vms,
        (request, near_nic): (&PlanRequest, bool),
        splits: u32,
        deadline: Deadline,
    ) -> Search {
        let mut nodes: Vec<(Option<NodeId>, Node)> = host
            .nodes
            .iter()
            .map(|(&key, cells)| {
                let mut by_cap: BTreeMap<std::cmp::Reverse<u32>, u32> = BTreeMap::new();
                for &e in cells {
                    *by_cap
                        .entry(std::cmp::Reverse(host.cells[e].cap()))
                        .or_default() += 1;
                }
                let node = Node {
                    cells: cells.clone(),
                    caps: by_cap.into_iter().map(|(c, n)| (c.0, n)).collect(),
                    caps_id: 0,
                    cores: cells.iter().map(|&e| host.cells[e].cap()).sum(),
                    domains: u32::try_from(cells.len()).unwrap_or(u32::MAX),
                };
                (key, node)
            })
            .collect();
        let mut by_kind: BTreeMap<(u32, bool, Vec<bool>), Vec<usize>> = BTreeMap::new();
        let mut spread = Vec::new();
        for (i, c) in vms.each() {
            let vm = &request.vms[i];
            let allowed = nodes
                .iter()
                .map(|(key, _)| host.allows(vm, *key) && !(near_nic && vm.nic_remote(*key)))
                .collect();
            if vm.numa == NumaPolicy::Spread {
                spread.push(Spread {
                    vm: i,
                    allowed,
                    left: c,
                });
                continue;
            }
            by_kind
                .entry((c, vm.numa == NumaPolicy::Preferred, allowed))
                .or_default()
                .push(i);
        }
        let mut kinds: Vec<Kind> = by_kind
            .into_iter()
            .map(|((cores, preferred, allowed), mut members)| {
                members.sort_unstable();
                Kind {
                    cores,
                    preferred,
                    allowed,
                    members,
                }
            })
            .collect();
        // Largest first: a node's contents are found sooner.
        kinds.sort_by_key(|k| (std::cmp::Reverse(k.cores), k.members.first().copied()));
        // Nodes alike (same domains, same VMs allowed) next to each other,
        // so that their contents can be taken in one order only.
        let column = |n: usize| {
            let kinds = kinds.iter().map(|k| k.allowed[n]);
            kinds
                .chain(spread.iter().map(|v| v.allowed[n]))
                .collect::<Vec<_>>()
        };
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by_key(|&n| (nodes[n].1.caps.clone(), column(n), n));
        for k in &mut kinds {
            k.allowed = order.iter().map(|&n| k.allowed[n]).collect();
        }
        for v in &mut spread {
            v.allowed = order.iter().map(|&n| v.allowed[n]).collect();
        }
        spread.sort_by_key(|v| v.vm);
        let budget = if spread.is_empty() {
            BUDGET
        } else {
            BUDGET_SPREAD
        };
        let mut by_order: Vec<Option<Node>> = nodes.drain(..).map(|(_, n)| Some(n)).collect();
        let mut nodes: Vec<Node> = order.iter().filter_map(|&n| by_order[n].take()).collect();
        for n in 0..nodes.len() {
            let first = (0..n)
                .find(|&m| nodes[m].caps == nodes[n].caps)
                .unwrap_or(n);
            nodes[n].caps_id = u32::try_from(first).unwrap_or(u32::MAX);
        }
        let left = kinds
            .iter()
            .map(|k| u32::try_from(k.members.len()).unwrap_or(u32::MAX))
            .collect();
        let after = After::of(&nodes);
        let count = nodes.len();
        let mut search = Search {
            after,
            alike: vec![false; count],
            lists: (0..count).map(|_| Default::default()).collect(),
            nodes,
            kinds,
            spread,
            left,
            pending: None,
            splits,
            full: false,
            fills: Vec::new(),
            best: (u32::MAX, u32::MAX),
            better: None,
            floor: (0, 0),
            costs: FxHashMap::default(),
            key: Vec::new(),
            ways: Vec::new(),
            work: 0,
            budget,
            deadline,
            stopped: false,
        };
        for n in 1..count {
            search.alike[n] = search.alike_nodes(n - 1, n);
        }
        search
    }

    /// Whether the budget is spent: all of it, or with spread VMs
    /// [`BUDGET`] where no layout better than the start has been found (a
    /// search that improves is closing in: on the big-VM benchmark the one
    /// that ended past it had).
    fn spent(&self) -> bool {
        self.work > self.budget || (self.better.is_none() && self.work > BUDGET)
    }

    /// Whether the best layout found is at the models' lower bounds.
    fn at_floor(&self) -> bool {
        self.best <= self.floor
    }

    /// Whether nodes `a` and `b` are alike.
    fn alike_nodes(&self, a: usize, b: usize) -> bool {
        self.nodes[a].caps == self.nodes[b].caps
            && self.kinds.iter().all(|k| k.allowed[a] == k.allowed[b])
            && self.spread.iter().all(|v| v.allowed[a] == v.allowed[b])
    }

    /// Fills node `n` on; `so_far` is the nodes' before.
    fn go(&mut self, n: usize, so_far: Value) {
        if self.stopped || self.at_floor() {
            return;
        }
        if n == self.nodes.len() {
            // Every VM placed, and the extra node objective 4 holds used.
            let done = self.pending.is_none()
                && self.splits == 0
                && self.left.iter().all(|&l| l == 0)
                && self.spread.iter().all(|v| v.left == 0);
            if done && so_far < self.best {
                self.best = so_far;
                self.better = Some(self.fills.clone());
            }
            return;
        }
        // This node's lists, kept from visit to visit (allocating them
        // each time was a tenth of the search).
        let (mut fills, mut order) = std::mem::take(&mut self.lists[n]);
        self.fills_of(n, &mut fills);
        // Best first, in a stable order (the contents are sorted by index:
        // moving them is most of the cost of sorting them).
        order.clear();
        order.extend(0..fills.len());
        order.sort_by_key(|&i| fills[i].value());
        for &i in &order {
            if self.stopped || self.at_floor() {
                break;
            }
            let f = &fills[i];
            let v = f.value();
            let at = (so_far.0 + v.0, so_far.1 + v.1);
            self.apply(f, true);
            if self.least(n + 1, at) < self.best {
                self.fills.push(f.clone());
                self.go(n + 1, at);
                self.fills.pop();
            }
            self.apply(f, false);
        }
        self.lists[n] = (fills, order);
    }

    /// The least value a layout can reach from nodes `n` on, with `so_far`
    /// on the nodes before (`u32::MAX` when the cores left do not fit).
    fn least(&self, n: usize, so_far: Value) -> Value {
        let After { room, largest, .. } = self.after[n];
        // The pieces left, their cores, and the domains they touch at
        // least: each a domain per `largest` cores (a VM's two pieces, as
        // many as the VM whole at least). Kinds are counted at once.
        let (mut used, mut count, mut domains) = (0u32, 0u32, 0u32);
        for (&l, kind) in self.left.iter().zip(&self.kinds) {
            used += l * kind.cores;
            count += l;
            domains += l * kind.cores.div_ceil(largest);
        }
        for c in self.rests_left() {
            used += c;
            count += 1;
            domains += c.div_ceil(largest);
        }
        if used > room {
            return (u32::MAX, u32::MAX);
        }
        let pieces = count + self.splits;
        if self.full {
            // Pieces plus domains less components.
            let all = self.after[n].domains;
            domains = domains.max((pieces + all).saturating_sub(self.upper_components(n, pieces)));
        }
        // Free cores that no set of the domains left holds whole leave a
        // used domain partly used.
        let partial = u32::from(!self.empty_domains_hold(n, room - used));
        (so_far.0.saturating_add(domains), so_far.1 + partial)
    }

    /// Whether `free` cores are the free cores of some of the domains of
    /// nodes `n` on, whole (those domains left empty).
    fn empty_domains_hold(&self, n: usize, free: u32) -> bool {
        self.after[n]
            .sums
            .get(free as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Cores of the pieces left: whole VMs, the split VM's rest, and each
    /// spread VM's cores not on a node yet.
    fn sizes_left(&self) -> impl Iterator<Item = u32> + '_ {
        let whole = self
            .left
            .iter()
            .zip(&self.kinds)
            .flat_map(|(&l, kind)| std::iter::repeat_n(kind.cores, l as usize));
        whole.chain(self.rests_left())
    }

    /// The same but the whole VMs: the split VM's rest and the spread VMs'.
    fn rests_left(&self) -> impl Iterator<Item = u32> + '_ {
        // A spread VM's cores left: one piece at least (more pieces touch
        // no fewer domains, and add no more parts than pieces).
        let spread = self.spread.iter().map(|v| v.left).filter(|&c| c > 0);
        self.pending.map(|(_, c)| c).into_iter().chain(spread)
    }

    /// The most components the pieces left ([`Search::sizes_left`], with
    /// the split's: `pieces`) can make on full nodes `n` on: one per domain
    /// at most, one per piece, and what their cores allow. With `d` the
    /// commonest free cores of the domains left, a component on
    /// none of the `s` others has cores a multiple of `d`, so it holds a
    /// piece of a multiple of `d` cores (`z` such pieces), or two pieces
    /// whose rests add up to `d` (`pairs` at most), or three other pieces at
    /// least. A split adds a piece of unknown cores: one more.
    fn upper_components(&self, n: usize, pieces: u32) -> u32 {
        let caps = &self.after[n].caps;
        let domains: u32 = caps.values().sum();
        let Some(d) = super::full_host::commonest(caps) else {
            return 0;
        };
        let s: u32 = caps
            .iter()
            .filter(|&(&v, _)| !v.is_multiple_of(d))
            .map(|(_, &c)| c)
            .sum();
        let mut rests = vec![0u32; d as usize];
        for c in self.sizes_left() {
            rests[(c % d) as usize] += 1;
        }
        let z = rests[0];
        let m: u32 = rests[1..].iter().sum();
        let mut pairs = 0;
        for r in 1..d as usize {
            let other = d as usize - r;
            match r.cmp(&other) {
                std::cmp::Ordering::Less => pairs += rests[r].min(rests[other]),
                std::cmp::Ordering::Equal => pairs += rests[r] / 2,
                std::cmp::Ordering::Greater => {}
            }
        }
        let by_cores = s + z + pairs + (m - 2 * pairs) / 3 + self.splits;
        domains.min(pieces).min(by_cores)
    }

    fn apply(&mut self, f: &Fill, on: bool) {
        for (v, &c) in self.spread.iter_mut().zip(&f.spread) {
            if on {
                v.left -= c;
            } else {
                v.left += c;
            }
        }
        for (k, &w) in f.whole.iter().enumerate() {
            if on {
                self.left[k] -= w;
            } else {
                self.left[k] += w;
            }
        }
        if f.rest.is_some() {
            self.pending = if on { None } else { f.rest };
        }
        if let Some((k, here)) = f.first {
            if on {
                self.left[k] -= 1;
                self.splits -= 1;
                self.pending = Some((k, self.kinds[k].cores - here));
            } else {
                self.left[k] += 1;
                self.splits += 1;
                self.pending = None;
            }
        }
    }

    /// Every content of node `n` (exactly its cores on a full host) with
    /// its cost; alike nodes in a row holding whole VMs only take them in
    /// one order.
    fn fills_of(&mut self, n: usize, out: &mut Vec<Fill>) {
        out.clear();
        let cap = self.nodes[n].cores;
        let before = (n > 0 && self.alike[n])
            .then(|| {
                self.fills
                    .last()
                    .filter(|f| f.whole_only())
                    .map(|f| f.whole.clone())
            })
            .flatten();
        let last = n + 1 == self.nodes.len();
        let rests: Vec<Option<(usize, u32)>> = match self.pending {
            Some((k, c)) if self.kinds[k].allowed[n] && c <= cap => {
                if last {
                    vec![Some((k, c))]
                } else {
                    vec![Some((k, c)), None]
                }
            }
            Some(_) if last => return,
            _ => vec![None],
        };
        let full = self.full;
        for rest in rests {
            let room = cap - rest.map_or(0, |(_, c)| c);
            let mut whole = vec![0u32; self.kinds.len()];
            self.whole_fills(n, 0, room, &mut whole, &mut |search, whole, free| {
                // On a full host a node takes no piece after the spread
                // VMs' unless a VM is split here: theirs fill it exactly.
                let split_here =
                    search.splits > 0 && search.pending.is_none() && rest.is_none() && !last;
                let rule = Ways {
                    exact: full && !split_here,
                    last,
                };
                // The ways' list is kept from call to call (an allocation
                // per call was a tenth of the search).
                let mut ways = std::mem::take(&mut search.ways);
                let listed = search.spread_pieces(n, free, rule, &mut ways);
                for spread in ways.iter().take_while(|_| listed) {
                    if out.len() > MOST_FILLS {
                        break;
                    }
                    let free = free - spread.iter().sum::<u32>();
                    let fill = |first| Fill {
                        whole: Counts::from_slice(whole),
                        rest,
                        first,
                        spread: spread.clone(),
                        pieces: 0,
                        cost: (0, 0),
                    };
                    let whole_only = rest.is_none() && spread.iter().all(|&c| c == 0);
                    let in_order = before
                        .as_ref()
                        .is_none_or(|b| !whole_only || whole <= &b[..]);
                    if in_order && (free == 0 || !full) {
                        out.push(fill(None));
                    }
                    if free == 0
                        || search.splits == 0
                        || search.pending.is_some()
                        || rest.is_some()
                        || last
                    {
                        continue;
                    }
                    for (k, kind) in search.kinds.iter().enumerate() {
                        if !(kind.preferred && kind.allowed[n] && search.left[k] > whole[k]) {
                            continue;
                        }
                        // On a full host the piece is what the node lacks.
                        let sizes = if full { free..=free } else { 1..=free };
                        for here in sizes.filter(|&here| here < kind.cores) {
                            out.push(fill(Some((k, here))));
                        }
                    }
                }
                search.ways = ways;
            });
        }
        if out.len() > MOST_FILLS {
            self.stopped = true;
            out.clear();
            return;
        }
        // The contents the node holds, kept in place and in order.
        let mut kept = 0;
        for i in 0..out.len() {
            self.work += 1;
            if (self.work.is_multiple_of(256) && self.deadline.is_past()) || self.spent() {
                self.stopped = true;
            }
            if self.stopped {
                out.clear();
                return;
            }
            if let Some((pieces, cost)) = self.cost(n, &out[i]) {
                out[i].pieces = pieces;
                out[i].cost = cost;
                if kept != i {
                    out.swap(kept, i);
                }
                kept += 1;
            }
        }
        out.truncate(kept);
    }

    /// The cores on node `n` of each spread VM, every way within `free` (a
    /// split VM's piece may take the rest) that `rule` allows, into `ways`.
    /// Each way counts as a content tried; `false`, and the search stops,
    /// past the budget, the deadline or [`MOST_FILLS`] ways: a list cut
    /// short would not be every way.
    fn spread_pieces(&mut self, n: usize, free: u32, rule: Ways, ways: &mut Vec<Counts>) -> bool {
        struct Walk<'s> {
            spread: &'s [Spread],
            n: usize,
            rule: Ways,
            now: Counts,
            out: &'s mut Vec<Counts>,
            cut: bool,
        }
        impl Walk<'_> {
            fn go(&mut self, free: u32) {
                if self.cut {
                    return;
                }
                let Some(v) = self.spread.get(self.now.len()) else {
                    if !self.rule.exact || free == 0 {
                        self.out.push(self.now.clone());
                        self.cut = self.out.len() > MOST_FILLS;
                    }
                    return;
                };
                let most = if v.allowed[self.n] {
                    v.left.min(free)
                } else {
                    0
                };
                // On the last node a VM puts all it has left; the last
                // spread VM of an exact way takes what is free.
                let mut least = if self.rule.last { v.left } else { 0 };
                if self.rule.exact && self.now.len() + 1 == self.spread.len() {
                    least = least.max(free);
                }
                if least > most {
                    return;
                }
                for c in (least..=most).rev() {
                    self.now.push(c);
                    self.go(free - c);
                    self.now.pop();
                }
            }
        }
        ways.clear();
        let mut walk = Walk {
            spread: &self.spread,
            n,
            rule,
            now: Counts::new(),
            out: ways,
            cut: false,
        };
        walk.go(free);
        let cut = walk.cut;
        self.work += ways.len() as u64;
        if cut || self.spent() || self.deadline.is_past() {
            self.stopped = true;
            return false;
        }
        true
    }

    /// Whole VMs of kinds `k` on for node `n` within `room` cores; `found`
    /// gets each choice with the cores it leaves free.
    fn whole_fills(
        &mut self,
        n: usize,
        k: usize,
        room: u32,
        whole: &mut Vec<u32>,
        found: &mut dyn FnMut(&mut Search, &[u32], u32),
    ) {
        self.work += 1;
        if (self.work.is_multiple_of(4096) && self.deadline.is_past()) || self.spent() {
            self.stopped = true;
        }
        if self.stopped {
            return;
        }
        if k == self.kinds.len() {
            found(self, whole, room);
            return;
        }
        let kind = &self.kinds[k];
        let most = if kind.allowed[n] {
            self.left[k].min(room / kind.cores.max(1))
        } else {
            0
        };
        for w in (0..=most).rev() {
            whole[k] = w;
            let cores = self.kinds[k].cores;
            self.whole_fills(n, k + 1, room - w * cores, whole, found);
        }
        whole[k] = 0;
    }

    /// The pieces of node `n` holding `fill`, and their cost (`None`: the
    /// node does not hold them, or the grouping gave up, which stops the
    /// search).
    fn cost(&mut self, n: usize, fill: &Fill) -> Option<(u32, Cost)> {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push(self.nodes[n].caps_id);
        fill.sizes(&self.kinds, &mut key);
        key[1..].sort_unstable();
        let pieces = u32::try_from(key.len() - 1).unwrap_or(u32::MAX);
        let costed = match self.costs.get(&key[..]) {
            Some(&c) => c,
            None => {
                let (c, steps) = super::components::cost(&key[1..], &self.nodes[n].caps);
                // A step of the grouping costs about what a content does.
                self.work += steps;
                self.costs.insert(key.clone(), c);
                c
            }
        };
        self.key = key;
        match costed {
            Costed::Least(c) => Some((pieces, c)),
            Costed::Unheld => None,
            Costed::GaveUp => {
                self.stopped = true;
                None
            }
        }
    }

    /// The layout of `fills`: each node's pieces grouped and laid out over
    /// its domains; the kinds' members in spec order.
    fn units(&self, host: &Host, fills: &[Fill]) -> Units {
        let mut next = vec![0usize; self.kinds.len()];
        let mut split: Option<usize> = None;
        let mut units = Units::new();
        for (n, f) in fills.iter().enumerate() {
            let node = &self.nodes[n];
            let mut owners: Vec<usize> = Vec::new();
            let mut sizes: Vec<u32> = Vec::new();
            for (k, &w) in f.whole.iter().enumerate() {
                for _ in 0..w {
                    owners.push(self.kinds[k].members[next[k]]);
                    next[k] += 1;
                    sizes.push(self.kinds[k].cores);
                }
            }
            if let (Some((_, c)), Some(vm)) = (f.rest, split) {
                owners.push(vm);
                sizes.push(c);
            }
            if let Some((k, c)) = f.first {
                let vm = self.kinds[k].members[next[k]];
                next[k] += 1;
                split = Some(vm);
                owners.push(vm);
                sizes.push(c);
            }
            for (v, &c) in self.spread.iter().zip(&f.spread) {
                if c > 0 {
                    owners.push(v.vm);
                    sizes.push(c);
                }
            }
            // Domain slots of `lay_out` are by free cores, as the caps list
            // them: the cells of each count, in order.
            let cells_of: Vec<Vec<usize>> = node
                .caps
                .iter()
                .map(|&(v, _)| {
                    let mut cells: Vec<usize> = node
                        .cells
                        .iter()
                        .copied()
                        .filter(|&e| host.cells[e].cap() == v)
                        .collect();
                    cells.sort_unstable();
                    cells
                })
                .collect();
            let mut groups = Groups::new(&sizes, &node.caps);
            let Some((_, laid)) = groups.lay_out() else {
                continue;
            };
            for (p, pieces) in laid.into_iter().enumerate() {
                let entry = units.entry(owners[p]).or_default();
                for ((v, d), cores) in pieces {
                    if let Some(&e) = cells_of.get(v).and_then(|c| c.get(d as usize)) {
                        *entry.entry(e).or_default() += cores;
                    }
                }
            }
        }
        units
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::{ThreadPolicy, VmRequest};
    use crate::topology::{load, Source};

    fn request(desc: &str, reserved: &str, cores: &[u32]) -> PlanRequest {
        PlanRequest {
            host: load(&Source::Synthetic(desc.to_owned())).unwrap(),
            // None reserved: "" (which a spec would not parse).
            reserved: if reserved.is_empty() {
                Default::default()
            } else {
                reserved.parse().unwrap()
            },
            fixed: Vec::new(),
            vms: cores
                .iter()
                .enumerate()
                .map(|(i, &c)| VmRequest {
                    threads: ThreadPolicy::Prefer,
                    ..VmRequest::new(&format!("vm{i}"), c)
                })
                .collect(),
            order: Default::default(),
            max_moves: None,
        }
    }

    /// The bound on objective 7 from free cores: on one node of domains of
    /// 4, 3 and 3 free cores (CPUs 4 and 8 reserved), the sums of whole
    /// domains are 0, 3, 4, 6, 7 and 10 (by hand); on two domains of 4, the
    /// multiples of 4 up to 8.
    #[test]
    fn whole_empty_domains_hold_their_sums() {
        let far = Deadline::after(std::time::Duration::from_secs(10));
        for (desc, reserved, sums) in [
            (
                "package:1 numa:1 l3:3 core:4 pu:1",
                "4,8",
                &[0, 3, 4, 6, 7, 10][..],
            ),
            ("package:1 numa:1 l3:2 core:4 pu:1", "", &[0, 4, 8][..]),
        ] {
            let req = request(desc, reserved, &[1]);
            let host = Host::new(&req);
            let vms = Vms::new(&req, &host);
            let s = Search::new(&host, &vms, (&req, false), 0, far);
            let holds: Vec<u32> = (0..=12).filter(|&f| s.empty_domains_hold(0, f)).collect();
            assert_eq!(holds, sums, "{desc}");
        }
    }

    /// Found in review: a node left empty has no partly used domain, even
    /// one of a single domain. Node 0 has one domain of 6 free cores (its
    /// other reserved), node 1 two of 4; two strict VMs of 4 cores. From a
    /// start of one VM per node (2 domains, 1 partly used), the search finds
    /// both on node 1 by hand: 2 domains, none partly used. Counting node 0
    /// empty as partly used, it found nothing better and called the start
    /// optimal.
    #[test]
    fn an_empty_node_of_one_domain_is_not_partly_used() {
        let req = request(
            "package:1 numa:2 l3:2 core:6 pu:1",
            "6-11,12-13,18-19",
            &[4, 4],
        );
        let host = Host::new(&req);
        let vms = Vms::new(&req, &host);
        let held = BTreeMap::from([(Tier::Cores, 8.0), (Tier::ExtraNodes, 0.0)]);
        let far = Deadline::after(std::time::Duration::from_secs(10));
        let Some(Found::Optimum(value, Some(units))) =
            search(&req, (&host, &vms), &held, ((2, 1), (0, 0)), far)
        else {
            panic!("the search ends with a better layout");
        };
        assert_eq!(value, (2, 0));
        let node_one: Vec<usize> = host.nodes[&Some(NodeId(1))].clone();
        for (vm, cells) in &units {
            assert_eq!(cells.len(), 1, "vm{vm}: {cells:?}");
            assert!(
                cells.keys().all(|e| node_one.contains(e)),
                "vm{vm}: {cells:?}"
            );
        }
    }
}
