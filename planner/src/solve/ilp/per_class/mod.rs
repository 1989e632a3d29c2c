//! The per-class integer program, for hosts whose free cores differ in usable
//! threads (hybrid cores, an offline sibling), and its lexicographic solve.
//!
//! How many cores of each class every VM gets; then the lowest free cores of
//! each class (docs/plan.md, "The model"). Variables: `n[v][c]` whole cores of class c for VM v; `placed[v]`;
//! `y[v][k]` when v must stay on one NUMA node; `u[v][d]` L3 domains a VM
//! touches; `z[v]` the emulator on an idle sibling; `touched[d]`/`full[d]` per
//! domain. Objectives are optimised one after the other, each optimum becoming
//! a constraint for the next (docs/plan.md, "Objective"): sequential solves
//! keep every objective integral and small, instead of one objective with huge
//! weights. Every solve gets what is left of the time limit.

mod fewest_domains;
mod on_threads;
mod program;

pub(crate) use program::uncounted_memory;

use super::backend::Model;
use super::expr::{Expr, Var};
use super::groups::subset_sum;
use super::lexicographic::{lexicographic, Rules};
use crate::deadline::Deadline;
use crate::ids::{CoreId, NodeId};
use crate::plan::Objective;
use crate::solve::classes::{Class, Domain};
use crate::solve::ExactError;
use crate::solve::{Placement, PlanRequest, Tier};
use fewest_domains::Restriction;
use program::{build, Program};
use std::collections::BTreeMap;
use std::time::Duration;

/// Whether nothing but the per-class model's own rules set `request`
/// apart: [`without_moves`], and the memory of every VM counted (the other
/// models of a host count these alike).
pub(crate) fn counted_alike(request: &PlanRequest) -> bool {
    without_moves(request) && uncounted_memory(request).is_empty()
}

/// Whether no VM's moves count: no running VM, no compaction, no move
/// ceiling.
fn without_moves(request: &PlanRequest) -> bool {
    !request.vms.iter().any(|v| v.running)
        && request.order != crate::solve::Order::Compact
        && request.max_moves.is_none()
}

/// The variable values of a concrete placement (a feasible start point).
fn start_from(request: &PlanRequest, program: &Program, placement: &Placement) -> Vec<f64> {
    let mut values = program.model.zeros();
    let mut class_of: BTreeMap<CoreId, usize> = BTreeMap::new();
    for (c, class) in program.classes.iter().enumerate() {
        for &core in &class.cores {
            class_of.insert(core, c);
        }
    }
    let mut used_per_domain: BTreeMap<Domain, u32> = BTreeMap::new();
    let mut used_per_node: BTreeMap<Option<NodeId>, u32> = BTreeMap::new();
    for (&i, cores) in &placement.cores {
        let Some(Some(vars)) = program.vms.get(i) else {
            continue;
        };
        values[vars.placed.index()] = 1.0;
        let mut per_class: BTreeMap<usize, f64> = BTreeMap::new();
        for core in cores {
            if let Some(&c) = class_of.get(core) {
                *per_class.entry(c).or_default() += 1.0;
                let class = &program.classes[c];
                *used_per_domain.entry(class.domain).or_default() += 1;
                *used_per_node.entry(class.node).or_default() += 1;
                if let Some(&y) = vars.y.get(&class.node) {
                    values[y.index()] = 1.0;
                }
                if let Some(&u) = vars.u.get(&class.domain) {
                    values[u.index()] = 1.0;
                }
            }
        }
        for &(c, var) in &vars.n {
            values[var.index()] = per_class.get(&c).copied().unwrap_or(0.0);
        }
        if let (Some(z), Some(vm)) = (vars.z, request.vms.get(i)) {
            let taken = cores.len() as f64;
            values[z.index()] = (f64::from(vm.vcpus) + 1.0 - taken).clamp(0.0, 1.0);
        }
    }
    for (d, &(touched, full, cap)) in &program.domains {
        let used = used_per_domain.get(d).copied().unwrap_or(0);
        values[touched.index()] = f64::from(u8::from(used > 0));
        values[full.index()] = f64::from(u8::from(used == cap));
    }
    for (n, &(touched, full, cap)) in &program.nodes {
        let used = used_per_node.get(n).copied().unwrap_or(0);
        values[touched.index()] = f64::from(u8::from(used > 0));
        values[full.index()] = f64::from(u8::from(used == cap));
    }
    values
}

/// Per group of cores (L3 domain or NUMA node): its touched and full
/// variables and its capacity.
type Groups<K> = BTreeMap<K, (Var, Var, u32)>;

/// What the per-class model adds to the one loop: a placed level's bound
/// (every VM of it), the tiers' lower bounds while every level so far was
/// placed whole, the quality tiers' share of the time, and a level placed
/// whole fixed outright.
struct ClassRules<'p> {
    /// Lower bounds of the tiers (`Program::bounds`).
    bounds: &'p mut BTreeMap<Tier, f64>,
    /// Per L3 domain: its touched and full variables and its capacity.
    domains: &'p Groups<Domain>,
    /// Per NUMA node, likewise (compaction's order only).
    nodes: &'p Groups<Option<NodeId>>,
    /// Compaction's order: the partly used groups are what it is for, and
    /// get the whole time.
    compact: bool,
    /// The whole time limit, of which the quality tiers get a share.
    limit: Duration,
    /// Whether every priority level so far was placed whole (then every
    /// VM's placed variable is 1 and the tiers' lower bounds hold).
    all_fixed: bool,
    /// A relaxation's optimum ([`place_bounded`]): its value bounds a tier
    /// while every tier held so far has the relaxation's value.
    relaxed: Option<Objective>,
    /// The tiers held so far, with their optima.
    held: Vec<(Tier, f64)>,
    /// The VMs the model may place, for [`Rules::near`].
    vms: Vec<NearVm>,
    /// Where every plan at the optima held puts each VM it places on its
    /// fewest cores (`fewest_domains`): the L3 domains over those VMs, each
    /// in its fewest, objective 6's bound; and the pattern model's proven
    /// optimum of objective 7 at that value, objective 7's bound once
    /// objective 6 is held there.
    fewest_domains: Option<(f64, Option<f64>)>,
    /// Only whether every VM fits ([`place_bounded`]'s `placing_only`).
    placing_only: bool,
}

impl ClassRules<'_> {
    /// The bounds of `fewest_domains`: objective 6 at the VMs' fewest L3
    /// domains, objective 7 at the pattern model's optimum while objective
    /// 6 is held there.
    fn fewest_domains(&self, tier: Tier) -> Option<f64> {
        let (domains, partial) = self.fewest_domains?;
        match tier {
            Tier::L3PerVm => Some(domains),
            Tier::PartialL3 => {
                let held = self.held.iter().find(|(t, _)| *t == Tier::L3PerVm)?.1;
                partial.filter(|_| (held - domains).abs() < 0.5)
            }
            _ => None,
        }
    }

    /// The relaxation's value of `tier`, while every tier before it agrees
    /// with the relaxation's: each held at that value, or left out of the
    /// model for want of terms (then 0: a priority level whose VMs fit
    /// nowhere here, which the relaxation may still place).
    fn relaxed(&self, tier: Tier) -> Option<f64> {
        let relaxed = self.relaxed.as_ref()?;
        let held: BTreeMap<Tier, f64> = self.held.iter().copied().collect();
        let mut before = Vec::new();
        for t in relaxed.tiers() {
            if t == tier {
                // And nothing held that the relaxation does not count.
                let known = held.keys().all(|h| before.contains(h));
                return known.then(|| relaxed.at(tier)).flatten();
            }
            let agrees = relaxed
                .at(t)
                .is_some_and(|r| (r - held.get(&t).copied().unwrap_or(0.0)).abs() < 0.5);
            if !agrees {
                return None;
            }
            before.push(t);
        }
        None
    }
}

impl Rules for ClassRules<'_> {
    /// Objective 3 (cores used) and the L3 objectives near a start: each
    /// VM placed as there and kept to the NUMA nodes it has cores on there,
    /// free to take other cores of them (cores of two threads where it has
    /// cores of one, say, or cores of fewer L3 domains). The nodes apart,
    /// this is small: which classes of a node hold which of its VMs. Not at
    /// objective 3 where every VM the start places is on its fewest cores
    /// already: nothing near it uses fewer.
    fn near(&self, model: &Model, (tier, terms): (Tier, &Expr), start: &[f64]) -> Option<Model> {
        if !matches!(tier, Tier::Cores | Tier::L3PerVm | Tier::PartialL3) {
            return None;
        }
        if tier == Tier::Cores {
            let fewest: u32 = self
                .vms
                .iter()
                .filter(|vm| vm.placed.count(start) > 0)
                .map(|vm| vm.fewest)
                .sum();
            if terms.value(start) <= f64::from(fewest) + 0.5 {
                return None;
            }
        }
        let mut near = model.clone();
        for vm in &self.vms {
            near.eq(vm.placed, f64::from(vm.placed.count(start)));
            for vars in &vm.per_node {
                if vars.iter().all(|v| v.count(start) == 0) {
                    near.le(vars.iter().copied().sum::<Expr>(), 0.0);
                }
            }
        }
        Some(near)
    }

    fn below_start(&self) -> bool {
        // As the aggregated models (docs/benchmarks.md, seventh pass).
        true
    }

    fn only_at_bound(&self, tier: Tier) -> bool {
        // An explanation's re-solve, as the aggregated models.
        self.placing_only && tier.places_vms()
    }

    fn bound(&self, tier: Tier, terms: &Expr) -> Option<f64> {
        let own = if tier.places_vms() {
            Some(-(terms.len() as f64))
        } else if self.all_fixed {
            self.bounds.get(&tier).copied()
        } else {
            // VMs left out: the bounds that hold whichever VMs are placed.
            // Cores off NICs' nodes, nodes beyond each VM's first, partly
            // used domains and nodes are never below 0; and at least one
            // domain (node) is partly used where no set of whole ones adds
            // up to the cores held (`hold`).
            match tier {
                Tier::NicRemote | Tier::ExtraNodes => Some(0.0),
                Tier::PartialL3 | Tier::PartialNodes => {
                    Some(self.bounds.get(&tier).copied().unwrap_or(0.0))
                }
                _ => None,
            }
        };
        [own, self.relaxed(tier), self.fewest_domains(tier)]
            .into_iter()
            .flatten()
            .reduce(f64::max)
    }

    fn budget(&self, tier: Tier, left: Duration) -> Duration {
        // The quality objectives (L3 domains) are bin packing at heart; they
        // get a share of the time, so that one of them cannot eat it all.
        let quality = match tier {
            Tier::L3PerVm => true,
            Tier::PartialL3 => !self.compact,
            _ => false,
        };
        if quality {
            left.min(crate::deadline::quality_budget(self.limit))
        } else {
            left
        }
    }

    fn hold(&mut self, model: &mut Model, tier: Tier, terms: &Expr, best: f64) {
        self.held.push((tier, best));
        // A priority level placed whole is fixed outright (a sum alone leaves
        // the relaxation free to place VMs fractionally); otherwise the sum is
        // kept, so that later objectives may still choose which VMs of the
        // level to leave out.
        let whole =
            terms.terms().iter().all(|&(_, c)| c == -1.0) && best <= -(terms.len() as f64) + 0.5;
        let level = tier.places_vms();
        if level && !whole {
            self.all_fixed = false;
        }
        if level && whole {
            for &(var, _) in terms.terms() {
                model.ge(var, 1.0);
            }
        } else {
            model.le(terms.clone(), best);
        }
        // Cores used is now fixed: when no set of whole domains (nodes) adds
        // up to it, some domain (node) must be partly used.
        if tier == Tier::Cores {
            let used = best.max(0.0) as u32;
            if some_partly_used(model, self.domains, used) {
                self.bounds.insert(Tier::PartialL3, 1.0);
            }
            if some_partly_used(model, self.nodes, used) {
                self.bounds.insert(Tier::PartialNodes, 1.0);
            }
        }
    }
}

/// Whether no set of whole `groups` holds exactly `used` cores: then at
/// least one is partly used, which becomes a row of `model`.
fn some_partly_used<K>(model: &mut Model, groups: &Groups<K>, used: u32) -> bool {
    if groups.is_empty() {
        return false;
    }
    let caps: Vec<u32> = groups.values().map(|&(_, _, c)| c).collect();
    if subset_sum(&caps, used) {
        return false;
    }
    let partial: Expr = groups.values().map(|&(t, f, _)| t - f).sum();
    model.ge(partial, 1.0);
    true
}

/// Solves lexicographically by `deadline`. A placement not proven because
/// the backend's process failed carries that fault.
pub fn place(request: &PlanRequest, deadline: Deadline) -> Result<Placement, ExactError> {
    place_bounded(request, deadline, None, None, false)
}

/// [`place`], with `relaxed`: the proven optimum of a relaxation of the
/// request (the aggregated model with every free core at the host's most
/// threads; the face of `ilp` says where it is one). Each objective is at
/// least the relaxation's while the objectives before it equal the
/// relaxation's, so a point at that value is optimal without a search; and
/// its cores, dealt out again on the host's threads (`on_threads`), are one
/// more start, as is `start` (a placement of the host: the aggregated
/// model's on its cores of the most threads). With `placing_only` only
/// the VMs placed per priority level (and the running VMs placed) are
/// solved, as the aggregated models do for an explanation's re-solve.
pub fn place_bounded(
    request: &PlanRequest,
    deadline: Deadline,
    relaxed: Option<&Placement>,
    start: Option<Placement>,
    placing_only: bool,
) -> Result<Placement, ExactError> {
    let limit = deadline.remaining();
    let mut program = build(request);
    if placing_only {
        program.tiers.retain(|(tier, _)| tier.places_vms());
    }
    // Greedy first fit gives the first tier a feasible start: the ILP then
    // never places fewer VMs than greedy, even when stopped early.
    // A domain-aware packing is a second candidate: it usually reaches the
    // L3 objectives' bounds, which lets branch and bound stop at once.
    let mut starts = vec![
        crate::solve::greedy::place(request),
        crate::solve::pack::place(request),
    ];
    // Compaction starts from where the VMs run: no move, within any
    // ceiling (a VM whose pins break its rules makes it infeasible, and
    // the loop drops it).
    if request.order == crate::solve::Order::Compact {
        starts.push(as_now(request));
    }
    if let Some(dealt) = relaxed.and_then(|r| on_threads::on_threads(request, &program.classes, r))
    {
        starts.push(lowest_cores(request, &program.classes, &dealt, false));
    }
    starts.extend(start);
    let candidates: Vec<Vec<f64>> = starts
        .iter()
        .map(|p| start_from(request, &program, p))
        .collect();
    let tiers = std::mem::take(&mut program.tiers);
    let mut bounds = std::mem::take(&mut program.bounds);
    let mut rules = ClassRules {
        bounds: &mut bounds,
        domains: &program.domains,
        nodes: &program.nodes,
        compact: request.order == crate::solve::Order::Compact,
        limit,
        all_fixed: true,
        relaxed: relaxed.map(|r| crate::solve::objective(request, r)),
        held: Vec::new(),
        vms: near_vms(&program),
        fewest_domains: None,
        placing_only,
    };
    // Objectives 6–7 apart: where the optima before them put each VM they
    // place on its fewest cores, the pattern model of `fewest_domains`
    // bounds both.
    let six = tiers
        .iter()
        .position(|(t, _)| *t == Tier::L3PerVm)
        .filter(|_| fewest_domains::applies(request, &program.classes))
        .unwrap_or(tiers.len());
    let (before, after) = tiers.split_at(six);
    let mut solved = lexicographic(
        &mut program.model,
        before,
        &candidates,
        deadline,
        &mut rules,
        "ilp",
    );
    if !after.is_empty() && solved.proven {
        let mut more: Vec<Vec<f64>> = solved.values.iter().cloned().collect();
        more.extend(candidates);
        let bound = fewest_domains_held(&program, &rules).and_then(|held| {
            let model = Restriction::new(request, &program.classes)?;
            let bound = model.fewest_domains(&held)?;
            Some((held, model, bound))
        });
        if let Some((held, model, bound)) = bound {
            let domains = bound.domains;
            tracing::debug!(
                target: super::TRACE,
                "ilp fewest domains: objective 6 at least {domains} (slack {})",
                bound.slack
            );
            rules.fewest_domains = Some((f64::from(domains), None));
            if !at_bounds(&program, &rules, after, &more) {
                // An L3 objective's share of the time (it runs before
                // objective 6): where the pattern model proves its plan,
                // that ends objectives 6 and 7 (its relaxation is the
                // tighter); where not, the per-class model has its own
                // shares after it, of what is left.
                let budget = rules.budget(Tier::PartialL3, deadline.remaining());
                let within = deadline.within(budget);
                let found = model.solve(request, &program.classes, (&held, bound), within);
                if let Some(p) = found {
                    if p.proven {
                        let partial = crate::solve::objective(request, &p).partial_l3_domains;
                        rules.fewest_domains = Some((f64::from(domains), Some(f64::from(partial))));
                    }
                    more.push(start_from(request, &program, &p));
                }
            }
        }
        let rest = lexicographic(
            &mut program.model,
            after,
            &more,
            deadline,
            &mut rules,
            "ilp",
        );
        solved = solved.then(rest);
    }
    if let Some((tier, cause)) = solved.failed {
        return Err(ExactError::Tier { tier, cause });
    }
    let values = match solved.values {
        Some(v) => v,
        None if tiers.is_empty() => program.model.zeros(),
        None => return Err(ExactError::NoSolution),
    };
    let mut placement = assign_counts(request, &program, &values, solved.proven);
    placement.fault = solved.fault;
    Ok(placement)
}

/// For tests: the restriction of `fewest_domains` over `extra_nodes` extra
/// NUMA nodes with at most `nic_remote` cores off the NICs' nodes, beside
/// the per-class model's lower bound of the cores (each VM on its fewest)
/// and the L3 domains over VMs each in its fewest; `None` where the model
/// declines.
#[cfg(test)]
pub(crate) fn fewest_domains_for_tests(
    request: &PlanRequest,
    (extra_nodes, nic_remote): (u32, f64),
) -> Option<(f64, u32, Option<Placement>)> {
    let program = build(request);
    let model = Restriction::new(request, &program.classes)?;
    let far = Deadline::after(Duration::from_secs(30));
    let fewest = program.bounds.get(&Tier::Cores).copied().unwrap_or(0.0);
    let held = model.every_vm_held(extra_nodes, nic_remote);
    let domains = model.domains();
    let bound = fewest_domains::Bound { domains, slack: 0 };
    let found = model.solve(request, &program.classes, (&held, bound), far);
    Some((fewest, domains, found))
}

/// For tests: the pattern model of `fewest_domains` at the optima of `at`
/// (VMs placed per level, vCPUs, cores, extra nodes, cores off the NICs'
/// nodes), as
/// the per-class model would hold them: objective 6's bound there
/// ([`Restriction::fewest_domains`]), and the model's plan at that bound;
/// `None` where the model declines, `Some((None, None))` where it has no
/// bound.
#[cfg(test)]
pub(crate) fn fewest_domains_at_for_tests(
    request: &PlanRequest,
    at: &Objective,
) -> Option<(Option<u32>, Option<Placement>)> {
    let program = build(request);
    let model = Restriction::new(request, &program.classes)?;
    let mut placed: BTreeMap<i64, u32> = request.vms.iter().map(|v| (v.priority, 0)).collect();
    for &(level, count) in &at.placed_by_priority {
        placed.insert(level, count);
    }
    let held = fewest_domains::Held {
        placed,
        vcpus: at.vcpus_placed,
        cores: at.cores_used,
        extra_nodes: at.extra_numa_nodes,
        nic_remote: f64::from(at.nic_remote_cores),
    };
    let Some(bound) = model.fewest_domains(&held) else {
        return Some((None, None));
    };
    let far = Deadline::after(Duration::from_secs(30));
    let found = model.solve(request, &program.classes, (&held, bound), far);
    Some((Some(bound.domains), found))
}

/// The optima held so far, where the pattern model of `fewest_domains` may
/// stand for them: every VM has columns, and nothing is held but VMs
/// placed, vCPUs, cores, extra nodes and cores off the NICs' nodes.
/// Whether every plan at them puts each VM it places on its fewest cores,
/// or on a few more laid out alike, is the pattern model's check
/// ([`Restriction::fewest_domains`]). Objective 6's bound rests on these
/// checks (a VM given more cores than its fewest may fit one domain where
/// its fewest do not); objective 7's does not — where one fails, the
/// pattern model has no point, since its plans are the host's and would
/// beat the held optima.
fn fewest_domains_held(program: &Program, rules: &ClassRules) -> Option<fewest_domains::Held> {
    let columns = program.vms.iter().all(Option::is_some);
    let held: BTreeMap<Tier, f64> = rules.held.iter().copied().collect();
    let at = |tier: Tier| held.get(&tier).copied().unwrap_or(0.0);
    let count = |value: f64| u32::try_from((-value).round() as i64).ok();
    let known = held.keys().all(|t| {
        matches!(
            t,
            Tier::Placed(_) | Tier::Vcpus | Tier::Cores | Tier::ExtraNodes | Tier::NicRemote
        )
    });
    if !columns || !known {
        return None;
    }
    let mut placed = BTreeMap::new();
    for (&tier, &value) in &held {
        if let Tier::Placed(level) = tier {
            placed.insert(level, count(value)?);
        }
    }
    Some(fewest_domains::Held {
        placed,
        vcpus: count(*held.get(&Tier::Vcpus)?)?,
        cores: count(-*held.get(&Tier::Cores)?)?,
        extra_nodes: count(-at(Tier::ExtraNodes))?,
        nic_remote: at(Tier::NicRemote),
    })
}

/// Whether a start feasible now already meets the bounds of every tier of
/// `tiers` (the pattern model would add nothing).
fn at_bounds(
    program: &Program,
    rules: &ClassRules,
    tiers: &[(Tier, Expr)],
    starts: &[Vec<f64>],
) -> bool {
    starts
        .iter()
        .filter(|v| program.model.feasible(v))
        .any(|v| {
            tiers.iter().all(|(tier, terms)| {
                rules
                    .bound(*tier, terms)
                    .is_some_and(|b| terms.value(v) <= b + 1e-6)
            })
        })
}

/// The running VMs where they run now: each on the free cores its vCPUs'
/// CPUs are on.
fn as_now(request: &PlanRequest) -> Placement {
    let free = crate::solve::free_cores(request);
    let cores = request
        .vms
        .iter()
        .enumerate()
        .filter(|(_, vm)| vm.running && !vm.now.is_empty())
        .map(|(i, vm)| {
            let mine = free
                .iter()
                .filter(|c| vm.now.iter().any(|&(_, cpu)| c.pus.contains(cpu)))
                .map(|c| c.core)
                .collect();
            (i, mine)
        })
        .collect();
    Placement {
        cores,
        proven: false,
        fault: None,
    }
}

/// Per placed VM: its cores per class (class index → count).
type Counts = BTreeMap<usize, BTreeMap<usize, u32>>;

/// The model's values → counts → concrete cores ([`lowest_cores`]).
fn assign_counts(
    request: &PlanRequest,
    program: &Program,
    values: &[f64],
    proven: bool,
) -> Placement {
    let mut counts = Counts::new();
    for (i, vars) in program.vms.iter().enumerate() {
        let Some(vars) = vars else { continue };
        if values.get(vars.placed.index()).copied().unwrap_or(0.0) < 0.5 {
            continue;
        }
        let mine = counts.entry(i).or_default();
        for &(c, var) in &vars.n {
            *mine.entry(c).or_default() += var.count(values);
        }
    }
    lowest_cores(request, &program.classes, &counts, proven)
}

/// One VM as the search near a start sees it ([`Rules::near`]).
struct NearVm {
    placed: Var,
    /// Its core variables, grouped by NUMA node.
    per_node: Vec<Vec<Var>>,
    /// Its fewest cores (`VmVars::fewest`).
    fewest: u32,
}

/// The VMs the model may place, for the search near a start.
fn near_vms(program: &Program) -> Vec<NearVm> {
    program
        .vms
        .iter()
        .flatten()
        .map(|vars| {
            let mut per_node: BTreeMap<Option<NodeId>, Vec<Var>> = BTreeMap::new();
            for &(c, v) in &vars.n {
                if let Some(class) = program.classes.get(c) {
                    per_node.entry(class.node).or_default().push(v);
                }
            }
            NearVm {
                placed: vars.placed,
                per_node: per_node.into_values().collect(),
                fewest: vars.fewest,
            }
        })
        .collect()
}

/// Counts → concrete cores: VMs by priority (then spec order) take the lowest
/// free cores of each class.
fn lowest_cores(
    request: &PlanRequest,
    classes: &[Class],
    counts: &Counts,
    proven: bool,
) -> Placement {
    let mut next: Vec<usize> = vec![0; classes.len()];
    let mut order: Vec<usize> = counts.keys().copied().collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.vms.get(i).map(|v| v.priority)), i));
    let mut cores: BTreeMap<usize, Vec<CoreId>> = BTreeMap::new();
    for i in order {
        let mut mine = Vec::new();
        for (&c, &count) in counts.get(&i).into_iter().flatten() {
            let Some(class) = classes.get(c) else {
                continue;
            };
            let start = next[c];
            let end = (start + count as usize).min(class.cores.len());
            mine.extend_from_slice(&class.cores[start..end]);
            next[c] = end;
        }
        mine.sort();
        cores.insert(i, mine);
    }
    Placement {
        cores,
        proven,
        fault: None,
    }
}

/// For the tests of this model's parts: the synthetic host `desc` with CPU
/// `off` unusable, VMs `vm0`, `vm1`… of `vcpus`, `threads = "prefer"`.
#[cfg(test)]
fn test_request(desc: &str, off: u32, vcpus: &[u32]) -> PlanRequest {
    use crate::topology::{load, Source};
    let mut host =
        load(&Source::Synthetic(desc.to_owned())).unwrap_or_else(|e| panic!("{desc}: {e}"));
    for pu in &mut host.pus {
        if pu.cpu.0 == off {
            pu.usable = false;
            pu.allowed = false;
        }
    }
    let vms = vcpus
        .iter()
        .enumerate()
        .map(|(i, &v)| crate::solve::VmRequest {
            threads: crate::solve::ThreadPolicy::Prefer,
            ..crate::solve::VmRequest::new(&format!("vm{i}"), v)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The relaxation of `a_level_only_the_relaxation_places_leaves_the_plan_the_oracles`
    /// (solve/proptests/regressions.rs): level 10 and level 0 one VM each,
    /// 5 vCPUs, 4 cores.
    fn relaxation() -> Objective {
        Objective {
            placed: 2,
            placed_by_priority: vec![(10, 1), (0, 1)],
            vcpus_placed: 5,
            cores_used: 4,
            ..Objective::default()
        }
    }

    /// `f` of the rules of a model of no groups and VMs left out, a limit
    /// of 1 s, and `relaxed`, `held` and `vms`.
    fn with_rules<T>(
        (relaxed, held, vms): (Option<Objective>, &[(Tier, f64)], Vec<NearVm>),
        f: impl FnOnce(&ClassRules) -> T,
    ) -> T {
        let mut bounds = BTreeMap::new();
        let (domains, nodes) = (BTreeMap::new(), BTreeMap::new());
        let rules = ClassRules {
            bounds: &mut bounds,
            domains: &domains,
            nodes: &nodes,
            compact: false,
            limit: Duration::from_secs(1),
            all_fixed: false,
            relaxed,
            held: held.to_vec(),
            vms,
            fewest_domains: None,
            placing_only: false,
        };
        f(&rules)
    }

    fn bound_of(held: &[(Tier, f64)], tier: Tier) -> Option<f64> {
        with_rules((Some(relaxation()), held, Vec::new()), |rules| {
            rules.relaxed(tier)
        })
    }

    /// Level 10 held at the relaxation's one VM, level 0 and the vCPUs too:
    /// the cores are bounded by its 4.
    #[test]
    fn the_relaxation_bounds_while_every_tier_before_agrees() {
        let held = [
            (Tier::Placed(10), -1.0),
            (Tier::Placed(0), -1.0),
            (Tier::Vcpus, -5.0),
        ];
        assert_eq!(bound_of(&held, Tier::Cores), Some(4.0));
        assert_eq!(bound_of(&held[..2], Tier::Vcpus), Some(-5.0));
    }

    /// Level 10 has no objective in the model (its VMs fit nowhere): it is
    /// 0 there, the relaxation's is -1, so nothing after it is bounded.
    #[test]
    fn a_level_left_out_of_the_model_is_zero_and_disagrees() {
        let held = [(Tier::Placed(0), -1.0), (Tier::Vcpus, -5.0)];
        assert_eq!(bound_of(&held, Tier::Cores), None);
        assert_eq!(bound_of(&held[..1], Tier::Vcpus), None);
    }

    /// The search near a start, by hand. Two nodes of two cores, CPU 1
    /// offline: node 0 has core 0 of one thread and core 1 of two; node 1
    /// two cores of two. A start puts `vm0` (2 vCPUs, prefer, strict) on
    /// cores 0 and 1: near it the VM keeps node 0 and takes core 1 alone
    /// (1 core, not 2); node 1 is closed to it there, though the model
    /// holds it. On its fewest cores already (core 1 alone), nothing near
    /// uses fewer: no search. Only the tiers of cores and L3 domains have
    /// one.
    #[test]
    fn near_a_start_each_vm_keeps_its_nodes() {
        let req = test_request("package:1 numa:2 core:2 pu:2", 1, &[2]);
        let program = build(&req);
        let on = |cores: &[u32]| {
            let placement = Placement {
                cores: [(0, cores.iter().map(|&c| CoreId(c)).collect())]
                    .into_iter()
                    .collect(),
                proven: false,
                fault: None,
            };
            start_from(&req, &program, &placement)
        };
        let (two, fewest, elsewhere) = (on(&[0, 1]), on(&[1]), on(&[2]));
        for start in [&two, &fewest, &elsewhere] {
            assert!(program.model.feasible(start), "{start:?}");
        }
        let terms = |tier: Tier| {
            let (_, terms) = program.tiers.iter().find(|(t, _)| *t == tier).unwrap();
            (tier, terms)
        };
        let cores = terms(Tier::Cores).1;
        assert_eq!(cores.value(&two), 2.0);
        let vms = near_vms(&program);
        let (near, at_fewest, at_vcpus, at_l3) = with_rules((None, &[], vms), |rules| {
            (
                rules.near(&program.model, terms(Tier::Cores), &two),
                rules.near(&program.model, terms(Tier::Cores), &fewest),
                rules.near(&program.model, terms(Tier::Vcpus), &two),
                rules.near(&program.model, terms(Tier::L3PerVm), &fewest),
            )
        });
        let near = near.unwrap();
        assert!(near.feasible(&fewest));
        assert!(!near.feasible(&elsewhere));
        let (v, proven) =
            super::super::backend::run(&near, cores, Duration::from_secs(10), None).unwrap();
        assert!(proven);
        assert_eq!(cores.value(&v), 1.0);
        assert!(at_fewest.is_none());
        assert!(at_vcpus.is_none());
        assert!(at_l3.is_some());
    }

    /// A held tier the relaxation does not count (a running VM's moves)
    /// ends the bounds.
    #[test]
    fn a_tier_the_relaxation_does_not_count_ends_the_bounds() {
        let held = [
            (Tier::Placed(10), -1.0),
            (Tier::Placed(0), -1.0),
            (Tier::Vcpus, -5.0),
            (Tier::VcpusMoved, 0.0),
        ];
        assert_eq!(bound_of(&held, Tier::Cores), None);
    }
}
