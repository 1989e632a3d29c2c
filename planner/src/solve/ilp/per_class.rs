//! The aggregated integer program (DESIGN.md, "aggregate first, then assign").
//!
//! Variables: `n[v][c]` whole cores of class c for VM v; `placed[v]`;
//! `y[v][k]` when v must stay on one NUMA node; `u[v][d]` L3 domains a VM
//! touches; `touched[d]`/`full[d]` per domain. Objectives are optimised one
//! after the other (lexicographically), each optimum becoming a constraint for
//! the next: VMs placed per priority level (highest first), cores used, extra
//! NUMA nodes of `numa = "preferred"` VMs, cores off a preferred NIC's node, L3
//! domains per VM, partially used L3 domains. Sequential solves keep every
//! objective integral and small, instead of one objective with huge weights.
//!
//! Backend: microlp (pure Rust) by default; HiGHS with the `highs` feature.
//! Every solve gets what is left of the time limit, and the whole sequence
//! runs under a watchdog thread.

use super::backend::{run, value_of, Model, Op, Terms};
use crate::solve::classes::{self, Class, Domain};
use crate::solve::{EmulatorPolicy, NumaPolicy, Placement, PlanRequest, ThreadPolicy, Tier};
use crate::ids::{CoreId, NodeId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The integer program for one request.
struct Program {
    model: Model,
    classes: Vec<Class>,
    /// `n[v]`: `(class index, variable)` for the classes VM v may use.
    n: Vec<Vec<(usize, usize)>>,
    placed: Vec<Option<usize>>,
    /// `y[v]`: node → variable, for VMs kept to few nodes.
    y: Vec<BTreeMap<Option<NodeId>, usize>>,
    /// `u[v]`: domain → variable.
    u: Vec<BTreeMap<Domain, usize>>,
    /// `z[v]`: the emulator takes an idle sibling (isolate + emulator isolate).
    z: Vec<Option<usize>>,
    /// Per domain: (touched, full, capacity in cores).
    domains: BTreeMap<Domain, (usize, usize, u32)>,
    /// Objective tiers, in order (each minimised).
    tiers: Vec<(Tier, Terms)>,
    /// A lower bound of each non-placement tier when every VM is placed: a
    /// start point that reaches it is optimal without a solve.
    bounds: BTreeMap<Tier, f64>,
}

fn build(request: &PlanRequest) -> Program {
    let free = classes::free_cores(request);
    let classes = classes::classes(&free);
    let mut model = Model::default();
    let mut n: Vec<Vec<(usize, usize)>> = Vec::new();
    let mut placed: Vec<Option<usize>> = Vec::new();
    let mut extra_nodes: Terms = Vec::new();
    let mut nic_remote: Terms = Vec::new();
    let mut l3_terms: Terms = Vec::new();
    let mut cores_used: Terms = Vec::new();
    let mut class_users: Vec<Terms> = vec![Vec::new(); classes.len()];
    let mut y_vars = Vec::new();
    let mut u_vars = Vec::new();
    let mut z_vars = Vec::new();
    let mut bound_cores = 0.0;
    let mut bound_nodes = 0.0;
    let mut bound_l3 = 0.0;

    for vm in &request.vms {
        let usable: Vec<usize> = classes
            .iter()
            .enumerate()
            .filter(|(_, c)| classes::allowed(vm, c.node, c.threads))
            .map(|(i, _)| i)
            .collect();
        if usable.is_empty() || vm.vcpus == 0 {
            n.push(Vec::new());
            placed.push(None);
            y_vars.push(BTreeMap::new());
            u_vars.push(BTreeMap::new());
            z_vars.push(None);
            continue;
        }
        let mut z_var = None;
        let p = model.binary();
        // The most cores of one class the VM can take: a tight bound keeps the
        // LP relaxation of the big-M links below close to the integer problem.
        let t_max_all = usable
            .iter()
            .map(|&c| classes[c].threads)
            .max()
            .unwrap_or(1);
        let most = |c: usize| -> u32 {
            let bound = match vm.threads {
                ThreadPolicy::Isolate => vm.vcpus + 1,
                ThreadPolicy::Require | ThreadPolicy::Prefer => {
                    (vm.pus_needed() + t_max_all - 1)
                        / classes::pus_per_core(vm, classes[c].threads).max(1)
                }
            };
            bound.min(classes[c].size())
        };
        let vars: Vec<(usize, usize)> = usable
            .iter()
            .map(|&c| (c, model.int(f64::from(most(c)))))
            .collect();
        // Cover cuts: the nodes (domains) a VM uses must hold its demand.
        // Valid for every integer solution, and they make the LP relaxation
        // of the y/u links far tighter (branch and bound then closes quickly).
        let units = |c: usize| f64::from(most(c) * classes::pus_per_core(vm, classes[c].threads));
        let demand_units = f64::from(match vm.threads {
            ThreadPolicy::Isolate => vm.vcpus,
            ThreadPolicy::Require | ThreadPolicy::Prefer => vm.pus_needed(),
        });
        for &(c, var) in &vars {
            class_users[c].push((var, 1.0));
            cores_used.push((var, 1.0));
        }

        // Demand.
        let need = f64::from(vm.pus_needed());
        bound_cores += match vm.threads {
            ThreadPolicy::Isolate => {
                let spare = vars.iter().any(|&(c, _)| classes[c].threads >= 2);
                f64::from(vm.vcpus)
                    + f64::from(u8::from(vm.emulator == EmulatorPolicy::Isolate && !spare))
            }
            ThreadPolicy::Require | ThreadPolicy::Prefer => {
                let t = vars
                    .iter()
                    .map(|&(c, _)| classes[c].threads)
                    .max()
                    .unwrap_or(1);
                (need / f64::from(t)).ceil()
            }
        };
        match vm.threads {
            ThreadPolicy::Isolate => {
                let count: Terms = vars.iter().map(|&(_, v)| (v, 1.0)).collect();
                if vm.emulator == EmulatorPolicy::Isolate {
                    // The emulator takes an idle sibling (z = 1) or one more core.
                    let z = model.binary();
                    z_var = Some(z);
                    let mut eq = count.clone();
                    eq.push((p, -(f64::from(vm.vcpus) + 1.0)));
                    eq.push((z, 1.0));
                    model.con(eq, Op::Eq, 0.0);
                    model.con(vec![(z, 1.0), (p, -1.0)], Op::Le, 0.0);
                    // …and must take it when it has one: no core to spare.
                    for &(c, v) in &vars {
                        if classes[c].threads >= 2 {
                            model.con(vec![(v, 1.0), (z, -f64::from(most(c)))], Op::Le, 0.0);
                        }
                    }
                    let mut siblings: Terms = vars
                        .iter()
                        .filter(|&&(c, _)| classes[c].threads >= 2)
                        .map(|&(_, v)| (v, -1.0))
                        .collect();
                    siblings.push((z, 1.0));
                    model.con(siblings, Op::Le, 0.0);
                } else {
                    let mut eq = count;
                    eq.push((p, -f64::from(vm.vcpus)));
                    model.con(eq, Op::Eq, 0.0);
                }
            }
            ThreadPolicy::Require | ThreadPolicy::Prefer => {
                let pus: Terms = vars
                    .iter()
                    .map(|&(c, v)| (v, f64::from(classes::pus_per_core(vm, classes[c].threads))))
                    .collect();
                let t_max = vars
                    .iter()
                    .map(|&(c, _)| classes[c].threads)
                    .max()
                    .unwrap_or(1);
                let mut lower = pus.clone();
                lower.push((p, -need));
                model.con(lower, Op::Ge, 0.0);
                // At least ceil(need / most threads) cores: the relaxation
                // otherwise takes fractions of cores.
                let mut fewest: Terms = vars.iter().map(|&(_, v)| (v, 1.0)).collect();
                fewest.push((p, -(need / f64::from(t_max)).ceil()));
                model.con(fewest, Op::Ge, 0.0);
                let mut upper = pus;
                upper.push((p, -(need + f64::from(t_max) - 1.0)));
                model.con(upper, Op::Le, 0.0);
            }
        }

        // NUMA.
        let nodes: BTreeSet<Option<NodeId>> = vars.iter().map(|&(c, _)| classes[c].node).collect();
        let mut y_map = BTreeMap::new();
        if matches!(vm.numa, NumaPolicy::Strict | NumaPolicy::Preferred) {
            let y: BTreeMap<Option<NodeId>, usize> =
                nodes.iter().map(|&k| (k, model.binary())).collect();
            for &(c, v) in &vars {
                if let Some(&yk) = y.get(&classes[c].node) {
                    model.con(vec![(v, 1.0), (yk, -f64::from(most(c)))], Op::Le, 0.0);
                }
            }
            let mut cover: Terms = y
                .iter()
                .map(|(&k, &yk)| {
                    let cap: f64 = vars
                        .iter()
                        .filter(|&&(c, _)| classes[c].node == k)
                        .map(|&(c, _)| units(c))
                        .sum();
                    (yk, cap)
                })
                .collect();
            let fewest = fewest_groups(&cover, demand_units);
            cover.push((p, -demand_units));
            model.con(cover, Op::Ge, 0.0);
            let mut rounded: Terms = y.values().map(|&yk| (yk, 1.0)).collect();
            rounded.push((p, -fewest));
            model.con(rounded, Op::Ge, 0.0);
            let mut sum: Terms = y.values().map(|&yk| (yk, 1.0)).collect();
            sum.push((p, -1.0));
            if vm.numa == NumaPolicy::Strict {
                model.con(sum, Op::Eq, 0.0);
            } else {
                model.con(sum.clone(), Op::Ge, 0.0);
                extra_nodes.extend(sum);
                bound_nodes += fewest - 1.0;
            }
            y_map = y;
        }

        // NIC locality as a cost.
        if let Some(node) = vm.preferred_node() {
            nic_remote.extend(
                vars.iter()
                    .filter(|&&(c, _)| classes[c].node != Some(node))
                    .map(|&(_, v)| (v, 1.0)),
            );
        }

        // L3 domains the VM touches.
        let domains: BTreeSet<Domain> = vars.iter().map(|&(c, _)| classes[c].domain).collect();
        let mut u_map = BTreeMap::new();
        if domains.len() > 1 {
            let u: BTreeMap<Domain, usize> = domains.iter().map(|&d| (d, model.binary())).collect();
            for &(c, v) in &vars {
                if let Some(&ud) = u.get(&classes[c].domain) {
                    model.con(vec![(v, 1.0), (ud, -f64::from(most(c)))], Op::Le, 0.0);
                }
            }
            let mut cover: Terms = u
                .iter()
                .map(|(&d, &ud)| {
                    let cap: f64 = vars
                        .iter()
                        .filter(|&&(c, _)| classes[c].domain == d)
                        .map(|&(c, _)| units(c))
                        .sum();
                    (ud, cap)
                })
                .collect();
            let fewest = fewest_groups(&cover, demand_units);
            cover.push((p, -demand_units));
            model.con(cover, Op::Ge, 0.0);
            bound_l3 += fewest;
            let mut rounded: Terms = u.values().map(|&ud| (ud, 1.0)).collect();
            rounded.push((p, -fewest));
            model.con(rounded, Op::Ge, 0.0);
            l3_terms.extend(u.values().map(|&ud| (ud, 1.0)));
            u_map = u;
        }
        n.push(vars);
        placed.push(Some(p));
        y_vars.push(y_map);
        u_vars.push(u_map);
        z_vars.push(z_var);
    }

    // Capacity per class.
    for (c, users) in class_users.iter().enumerate() {
        if !users.is_empty() {
            model.con(users.clone(), Op::Le, f64::from(classes[c].size()));
        }
    }

    // Partially used domains: touched but not full.
    let mut partial: Terms = Vec::new();
    let mut per_domain: BTreeMap<Domain, (Terms, u32)> = BTreeMap::new();
    for (c, class) in classes.iter().enumerate() {
        let entry = per_domain.entry(class.domain).or_default();
        entry.0.extend(class_users[c].iter().copied());
        entry.1 += class.size();
    }
    let mut domain_vars = BTreeMap::new();
    for (&d, (used, capacity)) in &per_domain {
        if used.is_empty() {
            continue;
        }
        let cap = f64::from(*capacity);
        let touched = model.binary();
        let full = model.binary();
        let mut t = used.clone();
        t.push((touched, -cap));
        model.con(t, Op::Le, 0.0);
        let mut f: Terms = used.iter().map(|&(v, c)| (v, -c)).collect();
        f.push((full, cap));
        model.con(f, Op::Le, 0.0);
        partial.push((touched, 1.0));
        partial.push((full, -1.0));
        domain_vars.insert(d, (touched, full, *capacity));
    }

    // Tiers: VMs placed per priority level, highest first (maximised, so negated).
    let mut tiers = Vec::new();
    let levels: BTreeSet<std::cmp::Reverse<i64>> = request
        .vms
        .iter()
        .map(|v| std::cmp::Reverse(v.priority))
        .collect();
    for level in levels {
        let terms: Terms = request
            .vms
            .iter()
            .zip(&placed)
            .filter(|(vm, _)| vm.priority == level.0)
            .filter_map(|(_, p)| p.map(|p| (p, -1.0)))
            .collect();
        tiers.push((Tier::Placed(level.0), terms));
    }
    let vcpus: Terms = request
        .vms
        .iter()
        .zip(&placed)
        .filter_map(|(vm, p)| p.map(|p| (p, -f64::from(vm.vcpus))))
        .collect();
    tiers.push((Tier::Vcpus, vcpus));
    tiers.push((Tier::Cores, cores_used));
    tiers.push((Tier::ExtraNodes, extra_nodes));
    tiers.push((Tier::NicRemote, nic_remote));
    tiers.push((Tier::L3PerVm, l3_terms));
    tiers.push((Tier::PartialL3, partial));
    tiers.retain(|(_, t)| !t.is_empty());
    let total_vcpus: f64 = request.vms.iter().map(|v| f64::from(v.vcpus)).sum();
    let bounds: BTreeMap<Tier, f64> = [
        (Tier::Vcpus, -total_vcpus),
        (Tier::Cores, bound_cores),
        (Tier::ExtraNodes, bound_nodes),
        (Tier::NicRemote, 0.0),
        (Tier::L3PerVm, bound_l3),
        (Tier::PartialL3, 0.0),
    ]
    .into_iter()
    .collect();

    Program {
        model,
        classes,
        n,
        placed,
        y: y_vars,
        u: u_vars,
        z: z_vars,
        domains: domain_vars,
        tiers,
        bounds,
    }
}

/// Whether some subset of `caps` sums to exactly `target`.
pub(crate) fn subset_sum(caps: &[u32], target: u32) -> bool {
    let target = target as usize;
    let mut reachable = vec![false; target + 1];
    reachable[0] = true;
    for &c in caps {
        let c = c as usize;
        for t in (c..=target).rev() {
            if reachable[t - c] {
                reachable[t] = true;
            }
        }
    }
    reachable[target]
}

/// The fewest groups (nodes, domains) whose capacities `(var, capacity)` can
/// hold `demand`: a valid lower bound on how many a VM touches, stronger than
/// the cover cut's fractional one.
fn fewest_groups(cover: &Terms, demand: f64) -> f64 {
    let mut caps: Vec<f64> = cover.iter().map(|&(_, c)| c).collect();
    caps.sort_by(|a, b| b.total_cmp(a));
    let mut held = 0.0;
    for (i, c) in caps.iter().enumerate() {
        held += c;
        if held + 1e-9 >= demand {
            return (i + 1) as f64;
        }
    }
    1.0
}

/// The variable values of a concrete placement (a feasible start point).
fn start_from(request: &PlanRequest, program: &Program, placement: &Placement) -> Vec<f64> {
    let mut values = vec![0.0; program.model.vars.len()];
    let mut class_of: BTreeMap<CoreId, usize> = BTreeMap::new();
    for (c, class) in program.classes.iter().enumerate() {
        for &core in &class.cores {
            class_of.insert(core, c);
        }
    }
    let mut used_per_domain: BTreeMap<Domain, u32> = BTreeMap::new();
    for (&i, cores) in &placement.cores {
        let (Some(Some(p)), Some(vars)) = (program.placed.get(i), program.n.get(i)) else {
            continue;
        };
        values[*p] = 1.0;
        let mut per_class: BTreeMap<usize, f64> = BTreeMap::new();
        for core in cores {
            if let Some(&c) = class_of.get(core) {
                *per_class.entry(c).or_default() += 1.0;
                let class = &program.classes[c];
                *used_per_domain.entry(class.domain).or_default() += 1;
                if let Some(&y) = program.y[i].get(&class.node) {
                    values[y] = 1.0;
                }
                if let Some(&u) = program.u[i].get(&class.domain) {
                    values[u] = 1.0;
                }
            }
        }
        for &(c, var) in vars {
            values[var] = per_class.get(&c).copied().unwrap_or(0.0);
        }
        if let (Some(z), Some(vm)) = (program.z[i], request.vms.get(i)) {
            let taken = cores.len() as f64;
            values[z] = (f64::from(vm.vcpus) + 1.0 - taken).clamp(0.0, 1.0);
        }
    }
    for (d, &(touched, full, cap)) in &program.domains {
        let used = used_per_domain.get(d).copied().unwrap_or(0);
        values[touched] = f64::from(u8::from(used > 0));
        values[full] = f64::from(u8::from(used == cap));
    }
    values
}

/// Solves lexicographically within `time_limit`.
pub fn place(request: &PlanRequest, time_limit: Duration) -> Result<Placement, String> {
    let deadline = Instant::now() + time_limit;
    let mut program = build(request);
    // Greedy first fit gives the first tier a feasible start: the ILP then
    // never places fewer VMs than greedy, even when stopped early.
    // A domain-aware packing is a second candidate: it usually reaches the
    // L3 objectives' bounds, which lets branch and bound stop at once.
    let candidates: Vec<Vec<f64>> = [
        crate::solve::greedy::place(request),
        crate::solve::pack::place(request),
    ]
        .iter()
        .map(|p| start_from(request, &program, p))
        .collect();
    let mut values: Option<Vec<f64>> = None;
    let mut proven = true;
    // Whether every priority level so far was placed whole (then every VM's
    // placed variable is 1 and the tiers' lower bounds hold).
    let mut all_fixed = true;
    let tiers = std::mem::take(&mut program.tiers);
    if tiers.is_empty() {
        values = Some(vec![0.0; program.model.vars.len()]);
    }
    let partial_terms: Terms = program
        .domains
        .values()
        .flat_map(|&(touched, full, _)| [(touched, 1.0), (full, -1.0)])
        .collect();
    for (name, terms) in &tiers {
        // The quality objectives (L3 domains) are bin packing at heart; they
        // get a share of the time, so that one of them cannot eat it all.
        let quality = matches!(name, Tier::L3PerVm | Tier::PartialL3);
        let budget = if quality {
            time_limit.mul_f64(0.4).max(Duration::from_millis(50))
        } else {
            time_limit
        };
        let left = deadline
            .saturating_duration_since(Instant::now())
            .min(budget);
        if left.is_zero() {
            proven = false;
            break;
        }
        let started = Instant::now();
        // Start from the best feasible point known for this objective.
        let start = values
            .iter()
            .chain(candidates.iter())
            .filter(|v| program.model.feasible(v))
            .min_by(|a, b| value_of(a, terms).total_cmp(&value_of(b, terms)))
            .cloned();
        // A start at the objective's lower bound is optimal: no solve needed.
        let bound = if let Tier::Placed(_) = name {
            Some(-(terms.len() as f64))
        } else if all_fixed {
            program.bounds.get(name).copied()
        } else {
            None
        };
        let at_bound = match (&start, bound) {
            (Some(v), Some(b)) => value_of(v, terms) <= b + 1e-6,
            _ => false,
        };
        let outcome = match (&start, at_bound) {
            (Some(v), true) => Ok((v.clone(), true)),
            _ => run(&program.model, terms, left, start.as_deref()),
        };
        if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
            eprintln!(
                "ilp: {name}: {:.1} ms, {} variables, {} constraints, {}",
                started.elapsed().as_secs_f64() * 1e3,
                program.model.vars.len(),
                program.model.cons.len(),
                match &outcome {
                    Ok((v, true)) => format!("optimal {}", value_of(v, terms)),
                    Ok((v, false)) => format!("stopped at {}", value_of(v, terms)),
                    Err(e) => format!("failed: {e}"),
                }
            );
        }
        match outcome {
            Ok((v, optimal)) => {
                let best = value_of(&v, terms).round();
                values = Some(v);
                if !optimal {
                    proven = false;
                    break;
                }
                // Later tiers may not make this one worse. A priority level
                // placed whole is fixed outright (a sum alone leaves the
                // relaxation free to place VMs fractionally); otherwise the
                // sum is kept, so that later objectives may still choose which
                // VMs of the level to leave out.
                let whole =
                    terms.iter().all(|&(_, c)| c == -1.0) && best <= -(terms.len() as f64) + 0.5;
                let level = matches!(name, Tier::Placed(_));
                if level && !whole {
                    all_fixed = false;
                }
                if level && whole {
                    for &(var, _) in terms {
                        program.model.con(vec![(var, 1.0)], Op::Ge, 1.0);
                    }
                } else {
                    // Objectives are integers: hold the optimum exactly
                    // (`best + 0.5` would loosen every later objective).
                    program.model.con(terms.clone(), Op::Le, best);
                }
                // Cores used is now fixed: when no set of whole domains adds up
                // to it, some domain must be partly used.
                if *name == Tier::Cores && !partial_terms.is_empty() {
                    let caps: Vec<u32> = program.domains.values().map(|&(_, _, c)| c).collect();
                    if !subset_sum(&caps, best.max(0.0) as u32) {
                        program.model.con(partial_terms.clone(), Op::Ge, 1.0);
                        program.bounds.insert(Tier::PartialL3, 1.0);
                    }
                }
            }
            Err(e) if values.is_none() => {
                return Err(format!(
                    "the integer program failed while optimising {name}: {e}"
                ))
            }
            Err(_) => {
                proven = false;
                break;
            }
        }
    }
    let values = values.ok_or_else(|| "the integer program produced no solution".to_owned())?;
    Ok(assign_counts(request, &program, &values, proven))
}

/// Counts → concrete cores: VMs by priority (then spec order) take the lowest
/// free cores of each class.
fn assign_counts(
    request: &PlanRequest,
    program: &Program,
    values: &[f64],
    proven: bool,
) -> Placement {
    let mut next: Vec<usize> = vec![0; program.classes.len()];
    let mut order: Vec<usize> = (0..request.vms.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(request.vms[i].priority), i));
    let mut cores: BTreeMap<usize, Vec<CoreId>> = BTreeMap::new();
    for i in order {
        let Some(p) = program.placed[i] else { continue };
        if values.get(p).copied().unwrap_or(0.0) < 0.5 {
            continue;
        }
        let mut mine = Vec::new();
        for &(c, var) in &program.n[i] {
            let count = values.get(var).copied().unwrap_or(0.0).round().max(0.0) as usize;
            let class = &program.classes[c];
            let start = next[c];
            let end = (start + count).min(class.cores.len());
            mine.extend_from_slice(&class.cores[start..end]);
            next[c] = end;
        }
        mine.sort();
        cores.insert(i, mine);
    }
    Placement { cores, proven }
}
