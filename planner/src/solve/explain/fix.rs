//! The smallest change that makes a VM fit: single policy or demand changes
//! in order ([`candidates`]), then fewer vCPUs, then a higher priority. A
//! change counts only if the VM then fits without pushing out a VM that was
//! placed: first checked against the cores the plan leaves free
//! ([`leftover`], cheap), then, while time is left, by re-solving exactly
//! whether the placed VMs and the changed VM all fit ([`with_the_placed`]),
//! unless they ask for more cores than are free ([`super::asked_cores`]).

use super::{plural, Explainer};
use crate::deadline::RESOLVE_MOST;
use crate::ids::CoreId;
use crate::model::Message;
use crate::solve::{
    EmulatorPolicy, NicAffinity, NumaPolicy, Placement, PlanRequest, SolverKind, ThreadPolicy,
    VmRequest,
};

impl Explainer<'_> {
    /// Whether `vm_index` fits once changed: in the cores left free, or (when
    /// `resolve` and time is left) by re-solving; `Some(cores of that VM)`
    /// when it then fits and every VM placed before still is.
    fn fits_with(&mut self, vm_index: usize, changed: VmRequest, resolve: bool) -> Option<u32> {
        if let Some(cores) = fits_in_leftover(&mut self.rest, &changed) {
            return Some(cores);
        }
        if !resolve || self.deadline.is_past() {
            return None;
        }
        let (placement, at) = match self.options.solver {
            SolverKind::Ilp => {
                // The free cores cannot hold the placed VMs and the changed
                // one, each on its fewest: no need to build the question
                // or ask the solver.
                let asked = self
                    .placed_cores
                    .saturating_add(super::asked_cores([&changed], &self.free));
                if usize::try_from(asked).unwrap_or(usize::MAX) > self.free.len() {
                    return None;
                }
                let question = question(&changed);
                if self.was_refused(&question) {
                    return None;
                }
                let (trial, at) = with_the_placed(self.request, self.placement, vm_index, changed);
                let placement =
                    crate::solve::exact_placing(&trial, self.deadline.within(RESOLVE_MOST)).ok()?;
                // Every VM of the trial placed: the VM and all placed before.
                if placement.cores.len() < trial.vms.len() {
                    if placement.proven && placement.fault.is_none() {
                        self.refuse(question);
                    }
                    return None;
                }
                (placement, at)
            }
            SolverKind::Greedy => {
                let mut trial = self.request.clone();
                *trial.vms.get_mut(vm_index)? = changed;
                let placement = crate::solve::greedy::place(&trial);
                let keeps_others = self
                    .placement
                    .cores
                    .keys()
                    .all(|i| placement.cores.contains_key(i));
                keeps_others.then_some((placement, vm_index))?
            }
        };
        let cores = placement.cores.get(&at)?;
        Some(u32::try_from(cores.len()).unwrap_or(u32::MAX))
    }

    /// Whether a re-solve of this run proved that `question` (a changed VM
    /// without its name, at priority 0) cannot join the placed VMs. Its
    /// name is no part of the question: the models read a VM's demands and
    /// policies, never its name, and the trial puts every VM at priority 0.
    /// Where it stands among the placed VMs changes no count of VMs
    /// placed, so a proven "no" holds for every VM alike.
    fn was_refused(&self, question: &VmRequest) -> bool {
        self.refused
            .lock()
            .is_ok_and(|refused| refused.contains(question))
    }

    /// Records a proven "no" for [`Self::was_refused`].
    fn refuse(&self, question: VmRequest) {
        if let Ok(mut refused) = self.refused.lock() {
            refused.push(question);
        }
    }

    /// The first change that makes the VM fit: a single policy or demand
    /// change, else fewer vCPUs, else a higher priority.
    pub(super) fn fix(&mut self, i: usize, vm: &VmRequest) -> Option<Message> {
        if !self.options.explain {
            return None;
        }
        for (label, changed) in candidates(vm, self.request) {
            if let Some(cores) = self.fits_with(i, changed, true) {
                return Some(Message::from(format!(
                    "with {label} it needs {} and fits",
                    plural(cores, "core")
                )));
            }
        }
        if vm.demand.is_none() && vm.vcpus > 1 {
            if let Some(v) = self.most_vcpus_that_fit(i, vm) {
                return Some(Message::from(format!("with vcpus = {v} it fits")));
            }
        }
        self.priority_fix(vm)
    }

    /// The largest vCPU count that fits, by bisection.
    fn most_vcpus_that_fit(&mut self, i: usize, vm: &VmRequest) -> Option<u32> {
        let (mut lo, mut hi) = (0u32, vm.vcpus - 1);
        let mut best = None;
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let changed = VmRequest {
                vcpus: mid,
                ..vm.clone()
            };
            if self.fits_with(i, changed, false).is_some() {
                best = Some(mid);
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        best
    }

    /// A full host: the VM fits alone, so above every other priority it is
    /// placed (the first objective places the highest level first), and VMs
    /// of lower priority make room.
    fn priority_fix(&self, vm: &VmRequest) -> Option<Message> {
        if self.placed_names.is_empty() {
            return None;
        }
        let alone = PlanRequest {
            vms: vec![vm.clone()],
            ..self.request.clone()
        };
        if crate::solve::greedy::place(&alone).cores.is_empty() {
            return None;
        }
        let top = self
            .request
            .vms
            .iter()
            .map(|v| v.priority)
            .max()
            .unwrap_or(0);
        let lower: Vec<&str> = self
            .placement
            .cores
            .keys()
            .filter_map(|&j| self.request.vms.get(j))
            .filter(|v| v.priority <= vm.priority)
            .map(|v| v.name.as_str())
            .collect();
        Some(if lower.is_empty() {
            Message::from(format!(
                "with priority = {} it fits, in place of VMs of higher priority now",
                top.saturating_add(1)
            ))
        } else {
            Message::from(format!(
                "with priority = {} it fits, in place of VMs of its priority or lower (",
                top.saturating_add(1),
            ))
            .then(Message::some_names(&lower, 3))
            .text(")")
        })
    }
}

/// The host as `placement` leaves it: the placed VMs become fixed tenants,
/// no VM to place yet. Built once per explanation run.
pub(super) fn leftover(request: &PlanRequest, placement: &Placement) -> PlanRequest {
    let cpus_of: std::collections::BTreeMap<CoreId, &crate::cpuset::CpuSet> =
        request.host.cores.iter().map(|c| (c.id, &c.cpus)).collect();
    let mut rest = PlanRequest {
        vms: Vec::new(),
        ..request.clone()
    };
    for (&i, cores) in &placement.cores {
        let mut cpus = crate::cpuset::CpuSet::default();
        for core in cores {
            if let Some(c) = cpus_of.get(core) {
                cpus = cpus.union(c);
            }
        }
        rest.fixed.push(crate::solve::FixedTenant {
            name: request
                .vms
                .get(i)
                .map(|v| v.name.clone())
                .unwrap_or_default(),
            cpus,
            kind: crate::plan::FixedKind::Spec,
        });
    }
    rest
}

/// The question "does VM `vm_index`, changed, fit beside every VM that
/// `placement` places, wherever they go?" as a request: those VMs alone
/// (the VMs left out cannot push anyone out), all of one priority, so that
/// one objective asks for all of them. With the changed VM's index in it.
fn with_the_placed(
    request: &PlanRequest,
    placement: &Placement,
    vm_index: usize,
    changed: VmRequest,
) -> (PlanRequest, usize) {
    let mut at = 0;
    let mut vms = Vec::new();
    for (j, vm) in request.vms.iter().enumerate() {
        if j == vm_index {
            at = vms.len();
            vms.push(VmRequest {
                priority: 0,
                ..changed.clone()
            });
        } else if placement.cores.contains_key(&j) {
            vms.push(VmRequest {
                priority: 0,
                ..vm.clone()
            });
        }
    }
    let trial = PlanRequest {
        vms,
        ..request.clone()
    };
    (trial, at)
}

/// `changed` as the re-solve's question sees it, to tell questions apart:
/// without its name (no model reads it), at priority 0 (as in the trial).
pub(super) fn question(changed: &VmRequest) -> VmRequest {
    VmRequest {
        name: String::new(),
        priority: 0,
        ..changed.clone()
    }
}

/// Whether `changed` fits in the cores of `rest` ([`leftover`]), every placed
/// VM staying where it is: its cores if so.
fn fits_in_leftover(rest: &mut PlanRequest, changed: &VmRequest) -> Option<u32> {
    rest.vms = vec![changed.clone()];
    let placed = crate::solve::greedy::place(rest);
    placed
        .cores
        .get(&0)
        .map(|c| u32::try_from(c.len()).unwrap_or(u32::MAX))
}

/// Candidate single changes, smallest first: thread policy, emulator, NUMA
/// policy, NIC affinity, smaller measured demands.
fn candidates(vm: &VmRequest, request: &PlanRequest) -> Vec<(String, VmRequest)> {
    let with = |f: &dyn Fn(&mut VmRequest)| {
        let mut v = vm.clone();
        f(&mut v);
        v
    };
    // Another thread policy pads the housekeeping vCPUs' last core as the
    // spec would have (an isolated VM has no padding).
    let threads = |t: ThreadPolicy| {
        move |v: &mut VmRequest| {
            v.threads = t;
            v.roles.pad = crate::model::request::Roles::pad_of(
                &request.host,
                (v.emulator, t),
                v.roles.housekeeping,
            );
        }
    };
    let mut candidates: Vec<(String, VmRequest)> = Vec::new();
    if vm.threads == ThreadPolicy::Isolate {
        candidates.push((
            "threads = \"require\"".to_owned(),
            with(&threads(ThreadPolicy::Require)),
        ));
    }
    if vm.threads != ThreadPolicy::Prefer {
        candidates.push((
            "threads = \"prefer\"".to_owned(),
            with(&threads(ThreadPolicy::Prefer)),
        ));
    }
    if vm.emulator == EmulatorPolicy::Isolate && !request.reserved.is_empty() {
        candidates.push((
            "emulator = \"host\"".to_owned(),
            with(&|v| v.emulator = EmulatorPolicy::Host),
        ));
    }
    if vm.numa == NumaPolicy::Strict {
        candidates.push((
            "numa = \"preferred\"".to_owned(),
            with(&|v| v.numa = NumaPolicy::Preferred),
        ));
    }
    if vm.nic_affinity == NicAffinity::Required {
        candidates.push((
            "nic_affinity = \"preferred\"".to_owned(),
            with(&|v| {
                v.nic_affinity = NicAffinity::Preferred;
                v.cell_nodes.clear();
            }),
        ));
    }
    for (label, vcpus) in &vm.alternatives {
        let v = *vcpus;
        candidates.push((format!("{label} ({v} vCPUs)"), with(&|x| x.vcpus = v)));
    }
    candidates
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::deadline::Deadline;
    use crate::ids::NodeId;
    use crate::solve::SolveOptions;
    use std::time::Duration;

    fn vm(name: &str, vcpus: u32, priority: i64) -> VmRequest {
        VmRequest {
            threads: ThreadPolicy::Isolate,
            priority,
            ..VmRequest::new(name, vcpus)
        }
    }

    /// Two nodes of 4 two-thread cores. `a` and `c` (2 cores each, one
    /// vCPU per core) prefer the NICs of nodes 0 and 1 and sit there, 2
    /// cores free on each node; `b` (5 cores on one node) fits nowhere, nor
    /// does `huge` (listed before it: the trial leaves it out, so `b` is its
    /// second VM). With `threads = "require"` `b` needs 3 cores: not in what
    /// the plan leaves free, but beside `a` and `c` once both share node 0 —
    /// which only the re-solve sees. Worked out by hand.
    #[test]
    fn a_fix_that_moves_the_placed_vms_is_found_by_the_resolve() {
        let near = |name: &str, node: u32| VmRequest {
            nic_affinity: NicAffinity::Preferred,
            nic_nodes: vec![NodeId(node)],
            ..vm(name, 2, 1)
        };
        let request = PlanRequest::on_synthetic(
            "package:1 numa:2 core:4 pu:2",
            vec![near("a", 0), vm("huge", 16, 0), vm("b", 5, 0), near("c", 1)],
        );
        let deadline = Deadline::after(Duration::from_secs(20));
        let plan = crate::solve::solve(&request, &SolveOptions::default(), deadline);
        assert_eq!(plan.unplaced, vec!["huge".to_owned(), "b".to_owned()]);
        let b = plan.explanations.iter().find(|e| e.vm == "b").unwrap();
        let fix = b.fix.as_ref().unwrap().to_string();
        assert_eq!(fix, "with threads = \"require\" it needs 3 cores and fits");
        // The question the re-solve asks: the placed VMs and the changed VM.
        let progress = crate::solve::Progress::default();
        let placement = crate::solve::ilp::place(&request, deadline, &progress).unwrap();
        let changed = VmRequest {
            threads: ThreadPolicy::Require,
            ..request.vms[2].clone()
        };
        let (trial, at) = with_the_placed(&request, &placement, 2, changed);
        assert_eq!(at, 1);
        let names: Vec<(&str, i64, ThreadPolicy)> = trial
            .vms
            .iter()
            .map(|v| (v.name.as_str(), v.priority, v.threads))
            .collect();
        assert_eq!(
            names,
            vec![
                ("a", 0, ThreadPolicy::Isolate),
                ("b", 0, ThreadPolicy::Require),
                ("c", 0, ThreadPolicy::Isolate)
            ]
        );
    }

    /// A re-solve's question is the changed VM but for its name and
    /// priority: two VMs alike but for those ask the same, and a refused
    /// answer holds for both; a running VM, one pinned elsewhere now, or
    /// one of another size asks another.
    #[test]
    fn a_question_is_the_vm_but_its_name_and_priority() {
        let a = vm("a", 4, 2);
        let b = vm("b", 4, 0);
        assert_eq!(question(&a), question(&b));
        let others = [
            VmRequest {
                running: true,
                ..b.clone()
            },
            VmRequest {
                now: vec![(0, crate::ids::CpuId(3))],
                ..b.clone()
            },
            VmRequest { vcpus: 5, ..b },
        ];
        for other in &others {
            assert_ne!(question(&a), question(other), "{other:?}");
        }
    }

    /// An isolated VM whose emulator runs with its one housekeeping vCPU has
    /// no padding (its vCPUs have their cores to themselves). With
    /// `threads = "require"` the spec would pad that vCPU's core: 6 vCPUs
    /// and 1 idle CPU are 7, on two-thread cores 4 cores, not 3. On 5 free
    /// cores the isolated VM (6 cores) does not fit; the fix says 4.
    #[test]
    fn a_thread_fix_pads_the_housekeeping_core_as_the_spec_would() {
        let mut hk = vm("hk", 6, 0);
        hk.emulator = EmulatorPolicy::WithHousekeeping;
        hk.roles.housekeeping = 1;
        let request = PlanRequest::on_synthetic("package:1 numa:1 core:5 pu:2", vec![hk]);
        let deadline = Deadline::after(Duration::from_secs(20));
        let plan = crate::solve::solve(&request, &SolveOptions::default(), deadline);
        assert_eq!(plan.unplaced, vec!["hk".to_owned()]);
        let fix = plan.explanations[0].fix.as_ref().unwrap().to_string();
        assert_eq!(fix, "with threads = \"require\" it needs 4 cores and fits");
    }
}
