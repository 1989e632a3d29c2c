//! `pinplan repack`: moves `movable` running VMs, live and the fewest
//! vCPUs, so that VMs fit (`--for`, all of them in one plan), or, without
//! `--for`, so that the free cores are as whole as they can be
//! ([`compaction`]). The plan with `--for` is the one `plan --connect`
//! makes — running VMs placed first, then the new ones, then the fewest
//! vCPUs moved — and the moves go through apply: the order in which no two
//! tenants ever hold one core, the journal, all-or-nothing, `apply
//! --rollback`.

use super::decide::{plan_all, Goal, Moment};
use super::pin::unplaced_words;
use super::{pin, WatchError};

use crate::cpuset::CpuSet;
use crate::ids::{CoreId, L3Id, NodeId};
use crate::plan::Plan;
use crate::spec::DomainRequest;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// The VM to make room for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum For {
    /// A new VM of this many vCPUs, with the spec's `[defaults]`, named
    /// [`NEW_VM`].
    Vcpus(u32),
    /// A defined domain with a request (or a `[[vm]]` of the spec), not running.
    Domain(String),
}

/// The name of the VM `--for N` makes room for.
pub const NEW_VM: &str = "(new)";

/// What a repack did (or, with `--dry-run`, would do).
#[derive(Debug, Clone, PartialEq)]
pub struct Repacked {
    /// The VMs made room for, in the order asked.
    pub vms: Vec<String>,
    /// The plan: the moves, and where the VM fits.
    pub plan: Plan,
    /// vCPUs moved.
    pub moved_vcpus: usize,
    /// The VMs moved, by name.
    pub moved_vms: Vec<String>,
    /// The journal of the moves (none for a dry run or no move).
    pub journal: Option<PathBuf>,
}

/// Why a repack made no change.
#[derive(Debug, thiserror::Error)]
pub enum RepackError {
    /// No plan fits the VMs, even moving every movable VM.
    #[error("{} not fit even with every movable VM moved: {why}", does_or_do(vms))]
    NoFit {
        /// The VMs that do not fit.
        vms: Vec<String>,
        /// Why, from the plan's explanation.
        why: String,
        /// The smallest fix, when one is known.
        fix: Option<String>,
    },
    /// They fit, with more moves than allowed.
    #[error(
        "{} with {needed} vCPUs moved, more than --max-moves {most}",
        fits_or_fit(vms)
    )]
    TooManyMoves {
        /// The VMs made room for.
        vms: Vec<String>,
        /// The fewest moves that make it fit.
        needed: usize,
        /// `--max-moves`.
        most: usize,
    },
    /// `--for DOMAIN` names no domain with a request.
    #[error("--for {0}: no domain of that name has a request, and the spec has no [[vm]] of it")]
    Unknown(String),
    /// `--for DOMAIN` names a domain that runs.
    #[error("--for {0}: it runs already: repack makes room for a VM that is not running")]
    Running(String),
    /// The exact solver gave no plan (its fallback is not carried out).
    #[error("no exact plan, so nothing was moved: {0}")]
    NotExact(String),
    /// Reading, planning or moving failed.
    #[error(transparent)]
    Watch(#[from] WatchError),
}

/// `a does` or `a, b do`.
fn does_or_do(vms: &[String]) -> String {
    match vms {
        [one] => format!("{one} does"),
        _ => format!("{} do", vms.join(", ")),
    }
}

/// `a fits` or `a, b fit`.
fn fits_or_fit(vms: &[String]) -> String {
    match vms {
        [one] => format!("{one} fits"),
        _ => format!("{} fit", vms.join(", ")),
    }
}

impl crate::error::Diagnostic for RepackError {
    fn hint(&self) -> Option<String> {
        match self {
            RepackError::NoFit { fix, .. } => fix.clone().or_else(|| {
                Some("mark more running VMs movable (pinplan tag VM movable=true), or stop one".to_owned())
            }),
            RepackError::TooManyMoves { needed, .. } => {
                Some(format!("give --max-moves {needed} or more, or stop a VM"))
            }
            RepackError::Unknown(_) => Some(
                "give a number of vCPUs (--for 4), a spec, or tag the domain first (pinplan tag DOMAIN vcpus=N)"
                    .to_owned(),
            ),
            RepackError::Running(_) => Some(
                "repack makes room for a VM to start: give --for N (vCPUs) or a domain that is shut off".to_owned(),
            ),
            RepackError::NotExact(_) => Some(
                "give it more time (--time-limit S), or try again; pinplan plan --connect shows the plan it would make".to_owned(),
            ),
            RepackError::Watch(e) => crate::error::Diagnostic::hint(e),
        }
    }

    fn exit(&self) -> crate::error::Exit {
        match self {
            RepackError::NoFit { .. } | RepackError::TooManyMoves { .. } => crate::error::Exit::No,
            _ => crate::error::Exit::Error,
        }
    }
}

impl super::Watcher {
    /// Makes room for `targets`, all in one plan: the fewest vCPUs of
    /// movable running VMs moved; refused (nothing changed) when one does
    /// not fit or the moves are more than `max_moves`; else the moves made
    /// live (and in the moved VMs' configs), journalled. A `--for DOMAIN`
    /// also gets its config pinned where it fits, so that it starts there.
    pub fn repack(
        &mut self,
        targets: &[For],
        max_moves: Option<usize>,
    ) -> Result<Repacked, RepackError> {
        let snap = self.snapshot()?;
        let mut defined = BTreeMap::new();
        for t in targets {
            if let For::Domain(d) = t {
                if let Ok(xml) = crate::libvirt::inactive_xml(&self.frame.uri, d) {
                    defined.insert(d.clone(), (format!("{} domain {d}", self.frame.uri), xml));
                }
            }
        }
        let on = self.frame.on(&snap);
        let (vms, plan) = room_for(&on, targets, &defined)?;
        exact(&plan)?;
        let moved_vms = changed_vms(&on, &plan);
        let moved_vcpus = plan.moves.len();
        if let Some(most) = max_moves.filter(|&m| moved_vcpus > m) {
            return Err(RepackError::TooManyMoves {
                vms,
                needed: moved_vcpus,
                most,
            });
        }
        let mut names = moved_vms.clone();
        // A defined domain made room for starts where it fits.
        names.extend(
            targets
                .iter()
                .filter_map(|t| match t {
                    For::Domain(d) => Some(d),
                    For::Vcpus(_) => None,
                })
                .filter(|d| snap.tenants.iter().any(|t| &t.name == *d))
                .cloned(),
        );
        let journal = if self.frame.dry_run || names.is_empty() {
            None
        } else {
            self.apply(
                &plan,
                &names,
                pin::LIVE_AND_CONFIG,
                "(pinplan repack's plan)",
            )?
        };
        Ok(Repacked {
            vms,
            plan,
            moved_vcpus,
            moved_vms,
            journal,
        })
    }
}

/// `1 vCPU`, `4 vCPUs`.
fn vcpus_word(n: usize) -> String {
    format!("{n} vCPU{}", if n == 1 { "" } else { "s" })
}

/// The running VMs a plan changes, by name: those whose vCPUs move, and
/// those whose emulator or I/O threads alone do (an isolated emulator's
/// core is no vCPU move, but it is a change to make).
fn changed_vms(on: &super::On<'_>, plan: &Plan) -> Vec<String> {
    let mut names: BTreeSet<String> = plan.moves.iter().map(|m| m.vm.clone()).collect();
    for vm in plan.vms.iter().filter(|v| !v.kept) {
        let running = on
            .tenants
            .iter()
            .find(|t| t.name == vm.name && t.state == crate::tenant::TenantState::Running);
        if let Some(t) = running {
            let io_now = t
                .iothreads
                .iter()
                .fold(CpuSet::new(), |all, p| all.union(&p.cpus));
            let io_planned = vm
                .iothreads
                .iter()
                .fold(CpuSet::new(), |all, p| all.union(&p.cpus));
            if t.emulator_cpus != vm.emulator_cpus || io_now != io_planned {
                names.insert(vm.name.clone());
            }
        }
    }
    names.into_iter().collect()
}

/// Only a plan of the exact solver is carried out: the greedy answer it
/// falls back on (the solver crashed or found nothing in time) knows
/// neither the fewest moves nor compaction's order nor `--max-moves`.
fn exact(plan: &Plan) -> Result<(), RepackError> {
    if plan.solver == crate::solve::SolverKind::Ilp {
        return Ok(());
    }
    let why = plan
        .warnings
        .iter()
        .find(|w| w.kind == crate::model::WarningKind::Solver)
        .map_or_else(
            || "the exact solver gave no plan".to_owned(),
            |w| w.text.to_string(),
        );
    Err(RepackError::NotExact(why))
}

/// The plan that makes room for every one of `targets` on `on`'s host at
/// once (no two given the same cores), and their names: refused, naming
/// those left out, when they do not all fit with every movable VM moved.
/// The moves are the plan's: the fewest vCPUs of running VMs.
pub fn room_for(
    on: &super::On<'_>,
    targets: &[For],
    defined: &BTreeMap<String, (String, String)>,
) -> Result<(Vec<String>, Plan), RepackError> {
    let mut requests = on.requests.to_vec();
    let mut names: Vec<String> = Vec::new();
    for t in targets {
        let name = target(on, &requests, t, names.len())?;
        if let For::Vcpus(n) = t {
            requests.push(DomainRequest {
                domain: name.clone(),
                origin: format!("repack --for {n}"),
                pairs: vec![("vcpus".to_owned(), n.to_string())],
            });
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    let on = super::On {
        requests: &requests,
        ..*on
    };
    let plan = plan_all(&on, &names, Moment::Start, defined, Goal::default())?;
    let left: Vec<String> = names
        .iter()
        .filter(|n| !plan.vms.iter().any(|v| &v.name == *n))
        .cloned()
        .collect();
    if !left.is_empty() {
        let words: Vec<(String, Option<String>)> =
            left.iter().map(|n| unplaced_words(&plan, n)).collect();
        let why = if let [(why, _)] = words.as_slice() {
            why.clone()
        } else {
            left.iter()
                .zip(&words)
                .map(|(n, (why, _))| format!("{n}: {why}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        // The first one's fix: fixes of several are not additive.
        let fix = words.first().and_then(|(_, fix)| fix.clone());
        return Err(RepackError::NoFit {
            vms: left,
            why,
            fix,
        });
    }
    Ok((names, plan))
}

/// The name of the VM `t` makes room for (the `k`-th asked), checked: a
/// domain with a request that does not run, or a new VM.
fn target(
    on: &super::On<'_>,
    requests: &[DomainRequest],
    t: &For,
    k: usize,
) -> Result<String, RepackError> {
    match t {
        For::Vcpus(_) if k == 0 => Ok(NEW_VM.to_owned()),
        For::Vcpus(_) => Ok(format!("(new {})", k + 1)),
        For::Domain(d) => {
            let known = requests.iter().any(|r| &r.domain == d) || on.spec.names(d);
            if !known {
                return Err(RepackError::Unknown(d.clone()));
            }
            let running = crate::tenant::TenantState::Running;
            if on
                .tenants
                .iter()
                .any(|t| &t.name == d && t.state == running)
            {
                return Err(RepackError::Running(d.clone()));
            }
            Ok(d.clone())
        }
    }
}

impl Repacked {
    /// What was done, in lines.
    pub fn to_text(&self, dry_run: bool) -> String {
        let mut out = String::new();
        if self.moved_vcpus == 0 {
            let vms = fits_or_fit(&self.vms);
            out.push_str(&format!("{vms} without moving anything\n"));
        }
        out.push_str(&moves_text(&self.plan, dry_run));
        for name in &self.vms {
            let Some(vm) = self.plan.vms.iter().find(|v| &v.name == name) else {
                continue;
            };
            let vcpus: crate::cpuset::CpuSet = vm.vcpus.iter().map(|p| p.cpu).collect();
            out.push_str(&format!(
                "{name} fits: vCPUs {vcpus}, emulator {} ({} moved{})\n",
                vm.emulator_cpus,
                vcpus_word(self.moved_vcpus),
                if self.plan.proven {
                    ", the fewest"
                } else {
                    ", not proven the fewest"
                }
            ));
        }
        out.push_str(&journal_text(self.journal.as_deref()));
        out
    }
}

/// A line per vCPU `plan` moves.
fn moves_text(plan: &Plan, dry_run: bool) -> String {
    let verb = if dry_run { "would move" } else { "moved" };
    plan.moves
        .iter()
        .map(|m| {
            format!(
                "{verb} {} vCPU {}: CPUs {} -> {}\n",
                m.vm, m.vcpu, m.from, m.to.0
            )
        })
        .collect()
}

/// The journal's line, if there is one.
fn journal_text(journal: Option<&std::path::Path>) -> String {
    journal.map_or_else(String::new, |j| {
        format!(
            "journal: {} (undo: pinplan apply --rollback {})\n",
            j.display(),
            j.display()
        )
    })
}

/// How whole the free cores are, as compaction counts them: of the cores
/// the movable VMs may have (neither the host's nor held by a domain that
/// may not move), the L3 domains and NUMA nodes of which the movable VMs
/// hold some but not all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wholeness {
    /// Partly used L3 domains (NUMA nodes where the L3 cache is unknown).
    pub l3: u32,
    /// Partly used NUMA nodes.
    pub nodes: u32,
}

/// What a compaction (`repack` without `--for`) did, or with `--dry-run`
/// would do.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    /// The plan: the running VMs, moved or kept.
    pub plan: Plan,
    /// The free cores before the moves…
    pub before: Wholeness,
    /// …and after.
    pub after: Wholeness,
    /// The VMs moved, by name.
    pub moved_vms: Vec<String>,
    /// `--max-moves`.
    pub max_moves: Option<usize>,
    /// The journal of the moves (none for a dry run or no move).
    pub journal: Option<PathBuf>,
}

impl super::Watcher {
    /// `repack` without `--for`: the running VMs planned in compaction's
    /// order ([`compaction`]), and its moves made live (and in the moved
    /// VMs' configs) as [`Self::repack`] makes them, journalled.
    pub fn compact(&mut self, max_moves: Option<usize>) -> Result<Compacted, RepackError> {
        let snap = self.snapshot()?;
        let mut done = compaction(&self.frame.on(&snap), max_moves)?;
        exact(&done.plan)?;
        if let Some(most) = max_moves.filter(|&m| done.plan.moves.len() > m) {
            // The ceiling is the model's; a plan over it is no plan of it.
            return Err(RepackError::TooManyMoves {
                vms: done.moved_vms.clone(),
                needed: done.plan.moves.len(),
                most,
            });
        }
        if !self.frame.dry_run && !done.moved_vms.is_empty() {
            done.journal = self.apply(
                &done.plan,
                &done.moved_vms,
                pin::LIVE_AND_CONFIG,
                "(pinplan repack's plan)",
            )?;
        }
        Ok(done)
    }
}

/// The plan that makes the free cores of `on`'s host as whole as moves of
/// movable running VMs can (the fewest partly used L3 domains, then NUMA
/// nodes: [`crate::solve::Order::Compact`]), with the fewest vCPUs moved
/// for that, at most `max_moves`; and the measure before and after,
/// counted from the cores the VMs hold now and the plan's pins.
pub fn compaction(on: &super::On<'_>, max_moves: Option<usize>) -> Result<Compacted, RepackError> {
    let goal = Goal {
        order: crate::solve::Order::Compact,
        max_moves: max_moves.map(|m| u32::try_from(m).unwrap_or(u32::MAX)),
    };
    let plan = plan_all(on, &[], Moment::Start, &BTreeMap::new(), goal)?;
    let (pool, before, after) = core_sets(on, &plan);
    Ok(Compacted {
        before: wholeness(on.host, &pool, &before),
        after: wholeness(on.host, &pool, &after),
        moved_vms: changed_vms(on, &plan),
        plan,
        max_moves,
        journal: None,
    })
}

/// The cores movable VMs may have (usable, none of their CPUs the host's
/// or a fixed tenant's — a domain that may not move among them), and the
/// cores those of them the plan places (`plan.vms` not kept, or left
/// `unplaced`) hold now and after the plan: their vCPUs', emulator's and
/// I/O threads' CPUs but the host's.
fn core_sets(
    on: &super::On<'_>,
    plan: &Plan,
) -> (BTreeSet<CoreId>, BTreeSet<CoreId>, BTreeSet<CoreId>) {
    let reserved = &plan.host.reserved_cpus;
    let cores_of = |cpus: &CpuSet| -> BTreeSet<CoreId> {
        cpus.difference(reserved)
            .iter()
            .filter_map(|c| on.host.pu(c).and_then(|p| p.core))
            .collect()
    };
    let now = |name: &str| -> BTreeSet<CoreId> {
        on.tenants
            .iter()
            .filter(|t| t.name == name && t.state == crate::tenant::TenantState::Running)
            .flat_map(|t| cores_of(&t.every_cpu()))
            .collect()
    };
    let kept = plan.vms.iter().filter(|v| v.kept);
    let mut fixed = plan
        .fixed
        .iter()
        .fold(reserved.clone(), |all, f| all.union(&f.cpus));
    for vm in kept {
        fixed = on
            .tenants
            .iter()
            .filter(|t| t.name == vm.name)
            .fold(fixed, |all, t| {
                all.union(&t.every_cpu().difference(reserved))
            });
    }
    let usable = on.host.usable_cpus();
    let pool: BTreeSet<CoreId> = on
        .host
        .cores
        .iter()
        .filter(|c| c.cpus.intersects(&usable) && !c.cpus.intersects(&fixed))
        .map(|c| c.id)
        .collect();
    let (mut before, mut after) = (BTreeSet::new(), BTreeSet::new());
    for vm in plan.vms.iter().filter(|v| !v.kept) {
        before.extend(now(&vm.name));
        let pins: CpuSet = vm.vcpus.iter().map(|p| p.cpu).collect();
        let held = vm
            .iothreads
            .iter()
            .fold(pins.union(&vm.emulator_cpus), |all, io| all.union(&io.cpus));
        after.extend(cores_of(&held));
    }
    for name in &plan.unplaced {
        before.extend(now(name));
        after.extend(now(name));
    }
    let only = |set: BTreeSet<CoreId>| set.intersection(&pool).copied().collect();
    (pool.clone(), only(before), only(after))
}

/// The L3 domains (NUMA nodes where the L3 is unknown) and NUMA nodes of
/// which `used` holds some of the `pool` cores but not all.
fn wholeness(
    host: &crate::topology::HostTopology,
    pool: &BTreeSet<CoreId>,
    used: &BTreeSet<CoreId>,
) -> Wholeness {
    let mut l3: BTreeMap<Result<L3Id, Option<NodeId>>, (u32, u32)> = BTreeMap::new();
    let mut nodes: BTreeMap<Option<NodeId>, (u32, u32)> = BTreeMap::new();
    for core in host.cores.iter().filter(|c| pool.contains(&c.id)) {
        let taken = u32::from(used.contains(&core.id));
        let domain = core.l3.ok_or(core.numa_node);
        for (group_taken, all) in [
            l3.entry(domain).or_default(),
            nodes.entry(core.numa_node).or_default(),
        ] {
            *group_taken += taken;
            *all += 1;
        }
    }
    let partly = |groups: Vec<(u32, u32)>| {
        let n = groups
            .iter()
            .filter(|&&(taken, all)| taken > 0 && taken < all)
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    };
    Wholeness {
        l3: partly(l3.into_values().collect()),
        nodes: partly(nodes.into_values().collect()),
    }
}

impl Wholeness {
    /// `3 partly used L3 domains -> 1, 2 partly used NUMA nodes -> 1`
    /// (`to` none: the counts alone).
    fn to_text(self, to: Option<Wholeness>) -> String {
        let count =
            |n: u32, what: &str| format!("{n} partly used {what}{}", if n == 1 { "" } else { "s" });
        let arrow = |n: Option<u32>| n.map_or_else(String::new, |n| format!(" -> {n}"));
        format!(
            "{}{}, {}{}",
            count(self.l3, "L3 domain"),
            arrow(to.map(|t| t.l3)),
            count(self.nodes, "NUMA node"),
            arrow(to.map(|t| t.nodes)),
        )
    }
}

impl Compacted {
    /// What was done, in lines: the moves, then the measure before and
    /// after.
    pub fn to_text(&self, dry_run: bool) -> String {
        let mut out = moves_text(&self.plan, dry_run);
        for name in &self.plan.unplaced {
            out.push_str(&format!(
                "{name} stays where it runs: no place was found for it\n"
            ));
        }
        if self.plan.vms.iter().all(|v| v.kept) && self.plan.unplaced.is_empty() {
            out.push_str("no running VM may move (pinplan tag VM movable=true)\n");
        }
        let moved = self.plan.moves.len();
        if moved == 0 {
            let within = self
                .max_moves
                .map_or_else(String::new, |m| format!(" within --max-moves {m}"));
            out.push_str(&format!(
                "free cores: {}: already as whole as moves can make it{within}{}\n",
                self.before.to_text(None),
                if self.plan.proven {
                    ""
                } else {
                    " (not proven)"
                }
            ));
        } else {
            out.push_str(&format!(
                "free cores: {} ({} moved, {})\n",
                self.before.to_text(Some(self.after)),
                vcpus_word(moved),
                if self.plan.proven {
                    "the fewest"
                } else {
                    "not proven the most whole nor the fewest"
                }
            ));
        }
        out.push_str(&journal_text(self.journal.as_deref()));
        out
    }
}
