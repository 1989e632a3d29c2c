//! `pinplan repack`: moves `movable` running VMs, live and the fewest
//! vCPUs, so that a VM fits (`--for`). The plan is the one `plan --connect`
//! makes — running VMs placed first, then the new ones, then the fewest
//! vCPUs moved — and the moves go through apply: the order in which no two
//! tenants ever hold one core, the journal, all-or-nothing, `apply
//! --rollback`.

use super::decide::Moment;
use super::pin::unplaced_words;
use super::{pin, WatchError};

use crate::plan::Plan;
use crate::spec::DomainRequest;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The VM to make room for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum For {
    /// A new VM of this many vCPUs, with the spec's `[defaults]`, named
    /// [`NEW_VM`].
    Vcpus(u32),
    /// A defined domain with a request (or a `[[vm]]` of the spec), not running.
    Domain(String),
    /// A new VM of this many whole cores on one NUMA node (`threads =
    /// "isolate"`, `numa = "strict"`): what `repack` without `--for` makes
    /// room for, the largest it can.
    Cores(u32),
}

/// The name of the VM `--for N` makes room for.
pub const NEW_VM: &str = "(new)";

/// What a repack did (or, with `--dry-run`, would do).
#[derive(Debug, Clone, PartialEq)]
pub struct Repacked {
    /// The VM made room for.
    pub vm: String,
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
    /// No plan fits the VM, even moving every movable VM.
    #[error("{vm} does not fit even with every movable VM moved: {why}")]
    NoFit {
        /// The VM.
        vm: String,
        /// Why, from the plan's explanation.
        why: String,
        /// The smallest fix, when one is known.
        fix: Option<String>,
    },
    /// It fits, with more moves than allowed.
    #[error("{vm} fits with {needed} vCPUs moved, more than --max-moves {most}")]
    TooManyMoves {
        /// The VM.
        vm: String,
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
    /// Reading, planning or moving failed.
    #[error(transparent)]
    Watch(#[from] WatchError),
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
    /// Makes room for `vm`: the plan with the fewest vCPUs of movable
    /// running VMs moved; refused (nothing changed) when it does not fit
    /// or needs more than `max_moves`; else the moves made live (and in the
    /// moved VMs' configs), journalled. A `--for DOMAIN` also gets its
    /// config pinned where it fits, so that it starts there.
    pub fn repack(&mut self, vm: &For, max_moves: Option<usize>) -> Result<Repacked, RepackError> {
        let snap = self.snapshot()?;
        let mut defined = std::collections::BTreeMap::new();
        if let For::Domain(d) = vm {
            if let Ok(xml) = crate::libvirt::inactive_xml(&self.frame.uri, d) {
                defined.insert(d.clone(), (format!("{} domain {d}", self.frame.uri), xml));
            }
        }
        let (name, plan) = room_for(&self.frame.on(&snap), vm, &defined)?;
        let moved_vms: Vec<String> = plan
            .moves
            .iter()
            .map(|m| m.vm.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let moved_vcpus = plan.moves.len();
        if let Some(most) = max_moves.filter(|&m| moved_vcpus > m) {
            return Err(RepackError::TooManyMoves {
                vm: name,
                needed: moved_vcpus,
                most,
            });
        }
        let mut names = moved_vms.clone();
        // A defined domain made room for starts where it fits.
        if matches!(vm, For::Domain(_)) && snap.tenants.iter().any(|t| t.name == name) {
            names.push(name.clone());
        }
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
            vm: name,
            plan,
            moved_vcpus,
            moved_vms,
            journal,
        })
    }
}

/// The plan that makes room for `vm` on `on`'s host, and the VM's name:
/// refused when it does not fit with every movable VM moved. The moves are
/// the plan's: the fewest vCPUs of running VMs.
pub fn room_for(
    on: &super::On<'_>,
    vm: &For,
    defined: &std::collections::BTreeMap<String, (String, String)>,
) -> Result<(String, Plan), RepackError> {
    let mut requests = on.requests.to_vec();
    let name = match vm {
        For::Vcpus(n) => {
            requests.push(DomainRequest {
                domain: NEW_VM.to_owned(),
                origin: format!("repack --for {n}"),
                pairs: vec![("vcpus".to_owned(), n.to_string())],
            });
            NEW_VM.to_owned()
        }
        For::Cores(n) => {
            requests.push(DomainRequest {
                domain: NEW_VM.to_owned(),
                origin: format!("repack (room for {n} cores)"),
                pairs: vec![
                    ("vcpus".to_owned(), n.to_string()),
                    ("threads".to_owned(), "isolate".to_owned()),
                    ("numa".to_owned(), "strict".to_owned()),
                ],
            });
            NEW_VM.to_owned()
        }
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
            d.clone()
        }
    };
    let on = super::On {
        requests: &requests,
        ..*on
    };
    let plan = super::plan_on(&on, &name, Moment::Start, defined)?;
    if !plan.vms.iter().any(|v| v.name == name) {
        let (why, fix) = unplaced_words(&plan, &name);
        return Err(RepackError::NoFit { vm: name, why, fix });
    }
    Ok((name, plan))
}

impl super::Watcher {
    /// `repack` without `--for`: room for the largest VM of whole cores on
    /// one NUMA node that moves can make within `max_moves`
    /// ([`largest_room`]), made with the fewest vCPUs moved.
    pub fn repack_largest(&mut self, max_moves: Option<usize>) -> Result<Repacked, RepackError> {
        let snap = self.snapshot()?;
        let cores = largest_room(&self.frame.on(&snap), max_moves)?;
        self.repack(&For::Cores(cores), max_moves)
    }
}

/// The most whole cores on one NUMA node that a new VM can have on `on`'s
/// host with at most `max_moves` vCPUs of movable VMs moved. Whether `n`
/// cores fit is monotone in `n` (room for `n` is room for fewer, with the
/// same moves), so it is found by halving, a plan per step.
pub fn largest_room(on: &super::On<'_>, max_moves: Option<usize>) -> Result<u32, RepackError> {
    let most = on
        .host
        .numa_nodes
        .iter()
        .map(|n| {
            n.cpus
                .iter()
                .filter_map(|c| on.host.pu(c).and_then(|p| p.core))
                .collect::<BTreeSet<_>>()
                .len()
        })
        .max()
        .unwrap_or(0);
    let fits = |n: usize| -> bool {
        let vm = For::Cores(u32::try_from(n).unwrap_or(u32::MAX));
        match room_for(on, &vm, &std::collections::BTreeMap::new()) {
            Ok((_, plan)) => max_moves.is_none_or(|m| plan.moves.len() <= m),
            Err(_) => false,
        }
    };
    let (mut low, mut high) = (0, most);
    while low < high {
        let mid = (low + high).div_ceil(2);
        if fits(mid) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    if low == 0 {
        return Err(RepackError::NoFit {
            vm: NEW_VM.to_owned(),
            why: "no core can be freed on any node, even with every movable VM moved".to_owned(),
            fix: None,
        });
    }
    Ok(u32::try_from(low).unwrap_or(u32::MAX))
}

impl Repacked {
    /// What was done, in lines.
    pub fn to_text(&self, dry_run: bool) -> String {
        let mut out = String::new();
        let verb = if dry_run { "would move" } else { "moved" };
        if self.moved_vcpus == 0 {
            out.push_str(&format!("{} fits without moving anything\n", self.vm));
        }
        for m in &self.plan.moves {
            out.push_str(&format!(
                "{verb} {} vCPU {}: CPUs {} -> {}\n",
                m.vm, m.vcpu, m.from, m.to.0
            ));
        }
        if let Some(vm) = self.plan.vms.iter().find(|v| v.name == self.vm) {
            let vcpus: crate::cpuset::CpuSet = vm.vcpus.iter().map(|p| p.cpu).collect();
            out.push_str(&format!(
                "{} fits: vCPUs {vcpus}, emulator {} ({} vCPUs moved{})\n",
                self.vm,
                vm.emulator_cpus,
                self.moved_vcpus,
                if self.plan.proven {
                    ", the fewest"
                } else {
                    ", not proven the fewest"
                }
            ));
        }
        if let Some(journal) = &self.journal {
            out.push_str(&format!(
                "journal: {} (undo: pinplan apply --rollback {})\n",
                journal.display(),
                journal.display()
            ));
        }
        out
    }
}
