//! Objective 7 of a host of mixed thread counts where every VM sits in one
//! L3 domain: a pattern model of each domain's classes.
//!
//! Once the per-class model holds objectives 1–6 with every VM placed, each
//! on its fewest cores and in one L3 domain (objective 6 at the number of
//! VMs), what is left of objective 7 is which VMs share a domain and on
//! which of its classes each VM's cores lie: a VM of an odd count of vCPUs
//! can take a core of one thread, a VM of an even count cannot. The
//! per-class model's relaxation of that packing is weak (on the bench's
//! `s256-off16-70` it stopped at 6 partly used domains against a bound of
//! 5); the patterns of a domain — which VMs it holds, each with its cores
//! per class — give the packing its cutting-stock form, whose relaxation is
//! tight.
//!
//! Every plan of the host at the held optima is a plan of this model (every
//! VM in one domain, on its fewest cores, the cores of the NIC-preferring
//! VMs off their NICs' nodes no more than held), and each plan of this
//! model is one of the host's at those optima: its proven optimum is the
//! host's objective 7 ([`restricted`]).

use super::super::backend::Model;
use super::super::expr::{Expr, Var};
use super::super::lexicographic::{lexicographic, Rules};
use crate::deadline::Deadline;
use crate::ids::{CoreId, NodeId};
use crate::solve::classes::{self, Class, Domain};
use crate::solve::{NumaPolicy, Order, Placement, PlanRequest, ThreadPolicy, Tier, VmRequest};
use std::collections::BTreeMap;

/// The most patterns over all domain groups; beyond it the model declines.
const MOST_PATTERNS: usize = 20_000;

/// Whether the request has the form this model needs, whatever the held
/// optima: no running VM, no compaction or move ceiling, memory that cannot
/// bind, every VM of `threads = "prefer"` or `"require"` that must touch no
/// set of nodes, and every L3 domain inside one NUMA node.
pub(super) fn applies(request: &PlanRequest, classes: &[Class]) -> bool {
    let mut node_of: BTreeMap<Domain, Option<NodeId>> = BTreeMap::new();
    let one_node = classes
        .iter()
        .all(|c| *node_of.entry(c.domain).or_insert(c.node) == c.node);
    one_node
        && request.order != Order::Compact
        && request.max_moves.is_none()
        && !crate::solve::memory::active(request)
        && request.vms.iter().all(|vm| {
            !vm.running
                && vm.cell_nodes.is_empty()
                && matches!(vm.threads, ThreadPolicy::Prefer | ThreadPolicy::Require)
        })
}

/// The optimum of objective 7 over the plans that place every VM of
/// `request`, each on its fewest cores and in one L3 domain, with at most
/// `nic_remote` cores of NIC-preferring VMs off their NICs' nodes — a
/// placement of the host, proven or not; `None` where the model declines
/// (see [`applies`]; too many patterns) or has no point by `deadline`.
pub(super) fn restricted(
    request: &PlanRequest,
    classes: &[Class],
    nic_remote: f64,
    deadline: Deadline,
) -> Option<Placement> {
    if !applies(request, classes) {
        return None;
    }
    let kinds = kinds(request, classes);
    let groups = groups(classes);
    let mut patterns: Vec<Vec<Pattern>> = Vec::new();
    let mut total = 0;
    for group in &groups {
        let found = patterns_of(request, &kinds, group, MOST_PATTERNS - total)?;
        total += found.len();
        patterns.push(found);
    }
    let mut m = Model::default();
    let mut x: Vec<Vec<Var>> = Vec::new();
    let mut partial = Expr::default();
    let mut remote = Expr::default();
    let mut placed: Vec<Expr> = vec![Expr::default(); kinds.len()];
    for (group, found) in groups.iter().zip(&patterns) {
        let most = group.domains.len() as f64;
        let vars: Vec<Var> = found.iter().map(|_| m.int(most)).collect();
        for (p, &v) in found.iter().zip(&vars) {
            if !p.full {
                partial += v;
            }
            if p.remote > 0 {
                remote += f64::from(p.remote) * v;
            }
            for &(k, _) in &p.items {
                placed[k] += v;
            }
        }
        m.le(vars.iter().copied().sum::<Expr>(), most);
        x.push(vars);
    }
    // Every VM placed, each once.
    for (k, kind) in kinds.iter().enumerate() {
        m.eq(placed[k].clone(), kind.members.len() as f64);
    }
    m.le(remote, nic_remote);
    let tiers = vec![(Tier::PartialL3, partial)];
    let solved = lexicographic(&mut m, &tiers, &[], deadline, &mut Plain, "ilp one domain");
    let values = solved.values?;
    let cores = lay_out((classes, &kinds, &groups), &patterns, &x, &values)?;
    Some(Placement {
        cores,
        proven: solved.proven,
        fault: solved.fault,
    })
}

/// The loop's plain rules: no bound, the whole time.
struct Plain;

impl Rules for Plain {}

/// VMs alike for this model: the same CPUs needed, thread policy, NUMA
/// policy and NICs (so the same classes, shapes and remote cores).
struct Kind {
    /// The VMs, in spec order.
    members: Vec<usize>,
    /// Cores each needs at its fewest: on the most threads of its classes.
    fewest: u32,
}

/// The kinds of `request`'s VMs.
fn kinds(request: &PlanRequest, classes: &[Class]) -> Vec<Kind> {
    type Key = (
        u32,
        &'static str,
        bool,
        (crate::solve::NicAffinity, Vec<NodeId>, Vec<NodeId>),
    );
    let mut by_key: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, vm) in request.vms.iter().enumerate() {
        let key = (
            vm.pus_needed(),
            vm.threads.name(),
            vm.numa == NumaPolicy::Strict,
            vm.nic_key(),
        );
        by_key.entry(key).or_default().push(i);
    }
    by_key
        .into_values()
        .map(|members| {
            let vm = &request.vms[members[0]];
            let most = classes
                .iter()
                .filter(|c| classes::allowed(vm, c.node, c.threads))
                .map(|c| c.threads)
                .max()
                .unwrap_or(1);
            Kind {
                fewest: classes::cores_needed(vm, most),
                members,
            }
        })
        .collect()
}

/// L3 domains alike: the same node and the same classes (threads and size).
struct Group {
    node: Option<NodeId>,
    /// `(threads, cores)` per class, in the domains' class order.
    caps: Vec<(u32, u32)>,
    /// Per domain: its classes' indices, in that order.
    domains: Vec<Vec<usize>>,
}

/// The domain groups of `classes` (in class order, most threads first
/// within a domain).
fn groups(classes: &[Class]) -> Vec<Group> {
    let mut per_domain: BTreeMap<Domain, Vec<usize>> = BTreeMap::new();
    for (c, class) in classes.iter().enumerate() {
        per_domain.entry(class.domain).or_default().push(c);
    }
    /// A domain's node and `(threads, cores)` per class.
    type Key = (Option<NodeId>, Vec<(u32, u32)>);
    let mut by_shape: BTreeMap<Key, Vec<Vec<usize>>> = BTreeMap::new();
    for (_, mut members) in per_domain {
        members.sort_by_key(|&c| (std::cmp::Reverse(classes[c].threads), c));
        let caps = members
            .iter()
            .map(|&c| (classes[c].threads, classes[c].size()))
            .collect();
        let node = classes[members[0]].node;
        by_shape.entry((node, caps)).or_default().push(members);
    }
    by_shape
        .into_iter()
        .map(|((node, caps), domains)| Group {
            node,
            caps,
            domains,
        })
        .collect()
}

/// What one domain holds: VMs (by kind) with their cores per class.
struct Pattern {
    /// `(kind, cores per class)`, one per VM.
    items: Vec<(usize, Vec<u32>)>,
    /// Every free core of the domain taken.
    full: bool,
    /// Cores of NIC-preferring VMs off their NICs' nodes.
    remote: u32,
}

/// The ways one VM of `vm`'s kind, on its `fewest` cores, lies in a domain
/// of `group`: cores per class, each class one it may use, the cores'
/// threads exactly what it needs ([`classes::fits_exactly`], the rule of
/// every solver).
fn shapes(vm: &VmRequest, fewest: u32, group: &Group) -> Vec<Vec<u32>> {
    let mut out = Vec::new();
    let mut shape = vec![0u32; group.caps.len()];
    spread(vm, group, fewest, 0, &mut shape, &mut out);
    out
}

/// Every way to spread `left` cores over the classes from `at` on.
fn spread(
    vm: &VmRequest,
    group: &Group,
    left: u32,
    at: usize,
    shape: &mut Vec<u32>,
    out: &mut Vec<Vec<u32>>,
) {
    let Some(&(threads, size)) = group.caps.get(at) else {
        if left == 0 {
            let list: Vec<u32> = shape
                .iter()
                .zip(&group.caps)
                .flat_map(|(&n, &(t, _))| std::iter::repeat_n(t, n as usize))
                .collect();
            if classes::fits_exactly(vm, &list) {
                out.push(shape.clone());
            }
        }
        return;
    };
    let allowed = classes::allowed(vm, group.node, threads);
    let most = if allowed { left.min(size) } else { 0 };
    for n in (0..=most).rev() {
        shape[at] = n;
        spread(vm, group, left - n, at + 1, shape, out);
    }
    shape[at] = 0;
}

/// Every non-empty pattern of `group`: multisets of (kind, shape) within
/// the classes' sizes and the kinds' counts. `None` past `most`.
fn patterns_of(
    request: &PlanRequest,
    kinds: &[Kind],
    group: &Group,
    most: usize,
) -> Option<Vec<Pattern>> {
    let mut items: Vec<(usize, Vec<u32>)> = Vec::new();
    for (k, kind) in kinds.iter().enumerate() {
        let vm = &request.vms[kind.members[0]];
        for shape in shapes(vm, kind.fewest, group) {
            items.push((k, shape));
        }
    }
    let caps: Vec<u32> = group.caps.iter().map(|&(_, size)| size).collect();
    let mut search = Search {
        request,
        kinds,
        group,
        items: &items,
        most,
        out: Vec::new(),
        chosen: Vec::new(),
        per_kind: vec![0; kinds.len()],
    };
    search.from(0, caps)?;
    Some(search.out)
}

/// The depth-first enumeration of [`patterns_of`].
struct Search<'a> {
    request: &'a PlanRequest,
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
            .filter(|(k, _)| {
                let vm = &self.request.vms[self.kinds[*k].members[0]];
                vm.nic_remote(self.group.node)
            })
            .map(|(k, _)| self.kinds[*k].fewest)
            .sum();
        self.out.push(Pattern {
            items,
            full: left.iter().all(|&l| l == 0),
            remote,
        });
        Some(())
    }
}

/// The model's counts → concrete cores: each group's domains in order take
/// its patterns in order, each VM of a kind (spec order) the next one of
/// its kind, each the lowest free cores of its domain's classes.
fn lay_out(
    (classes, kinds, groups): (&[Class], &[Kind], &[Group]),
    patterns: &[Vec<Pattern>],
    x: &[Vec<Var>],
    values: &[f64],
) -> Option<BTreeMap<usize, Vec<CoreId>>> {
    let mut next_of_kind = vec![0usize; kinds.len()];
    let mut cores: BTreeMap<usize, Vec<CoreId>> = BTreeMap::new();
    for ((group, found), vars) in groups.iter().zip(patterns).zip(x) {
        let mut domains = group.domains.iter();
        for (p, &v) in found.iter().zip(vars) {
            for _ in 0..v.count(values) {
                let domain = domains.next()?;
                let mut taken = vec![0usize; domain.len()];
                for (k, shape) in &p.items {
                    let i = *kinds[*k].members.get(next_of_kind[*k])?;
                    next_of_kind[*k] += 1;
                    let mine = cores.entry(i).or_default();
                    for ((&c, &n), from) in domain.iter().zip(shape).zip(&mut taken) {
                        let to = *from + n as usize;
                        mine.extend_from_slice(classes.get(c)?.cores.get(*from..to)?);
                        *from = to;
                    }
                    mine.sort();
                }
            }
        }
    }
    Some(cores)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::solve::VmRequest;
    use crate::topology::{load, Source};

    /// One node, two L3 domains of 4 two-thread cores (CPUs 0–7 and 8–15),
    /// CPU 7 (core 3's sibling) off: domain 0 has 3 cores of two threads
    /// and one of one. VMs of `vcpus`, `threads = "prefer"`.
    fn request(vcpus: &[u32]) -> PlanRequest {
        let desc = "package:1 l3:2 core:4 pu:2";
        let mut host = load(&Source::Synthetic(desc.to_owned())).unwrap();
        for pu in &mut host.pus {
            if pu.cpu.0 == 7 {
                pu.usable = false;
                pu.allowed = false;
            }
        }
        let vms = vcpus
            .iter()
            .enumerate()
            .map(|(i, &v)| VmRequest {
                threads: ThreadPolicy::Prefer,
                ..VmRequest::new(&format!("vm{i}"), v)
            })
            .collect();
        PlanRequest {
            host,
            reserved: Default::default(),
            fixed: Vec::new(),
            vms,
            order: Default::default(),
            max_moves: None,
        }
    }

    /// The restriction's plan: per VM its cores, and objective 7.
    fn solved(req: &PlanRequest) -> (Vec<Vec<u32>>, u32) {
        let classes = classes::classes(&classes::free_cores(req));
        let far = Deadline::after(std::time::Duration::from_secs(30));
        let p = restricted(req, &classes, 0.0, far).unwrap();
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

    /// A VM that needs two domains (9 cores of two threads) has no pattern:
    /// the model has no point, and says so.
    #[test]
    fn a_vm_over_several_domains_has_no_point() {
        let req = request(&[18]);
        let classes = classes::classes(&classes::free_cores(&req));
        let far = Deadline::after(std::time::Duration::from_secs(30));
        assert!(restricted(&req, &classes, 0.0, far).is_none());
    }

    /// Isolated threads are left to the per-class model.
    #[test]
    fn isolated_threads_are_not_this_models() {
        let mut req = request(&[2]);
        req.vms[0].threads = ThreadPolicy::Isolate;
        let classes = classes::classes(&classes::free_cores(&req));
        assert!(!applies(&req, &classes));
    }
}
