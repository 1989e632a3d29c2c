//! The preconditions of `apply`, checked for every VM before anything
//! changes: the plan is this host's, each domain exists with the planned
//! vCPU count and I/O threads, the planned CPUs are online, and no domain
//! outside the plan is pinned onto them.

use super::{ffi, lv, Pins, Problem, Session, Target, AFFECT_CONFIG, VCPU_CONFIG, VCPU_LIVE};
use crate::cpuset::CpuSet;
use crate::plan::{Plan, VmPlan};
use crate::tenant::Tenant;
use crate::topology::HostTopology;

impl Session {
    /// Checks every precondition for every VM named (all the plan's VMs when
    /// `names` is empty) before anything changes: the domain exists, its vCPU
    /// count (live and config) is the plan's, its planned I/O threads exist,
    /// every planned CPU exists and is online on `host` (the connected host's
    /// topology), the plan was made for this host (fingerprint), and no
    /// domain outside the plan is pinned onto the planned CPUs (unless
    /// `force`). Returns every problem found, not only the first.
    pub fn check(
        &self,
        plan: &Plan,
        names: &[String],
        host: &HostTopology,
        force: bool,
    ) -> Result<Vec<Target>, Vec<Problem>> {
        let mut problems = Vec::new();
        let fingerprint = host.fingerprint();
        if plan.host.fingerprint != fingerprint {
            problems.push(Problem {
                vm: "(plan)".to_owned(),
                reason: format!(
                    "the plan was made for another host topology ({}, fingerprint {}); {} has {fingerprint}: make the plan with `pinplan plan SPEC --connect {}`",
                    plan.host.source, plan.host.fingerprint, self.uri, self.uri
                ),
            });
        }
        let selected = select(plan, names, &mut problems);
        let online = host.online_cpus();
        let others = self.others(plan, host);
        let mut targets = Vec::new();
        for vm in selected {
            let mut bad = Vec::new();
            let target = self.check_vm(vm, &online, &others, force, &mut bad);
            problems.extend(bad.into_iter().map(|reason| Problem {
                vm: vm.name.clone(),
                reason,
            }));
            targets.extend(target);
        }
        if problems.is_empty() {
            Ok(targets)
        } else {
            Err(problems)
        }
    }

    /// One VM's preconditions; its target when the domain can be pinned as
    /// planned (the problems found go to `bad`).
    fn check_vm(
        &self,
        vm: &VmPlan,
        online: &CpuSet,
        others: &Result<Vec<Tenant>, String>,
        force: bool,
        bad: &mut Vec<String>,
    ) -> Option<Target> {
        let planned = Pins::planned(vm);
        if let Some(i) = planned.vcpus.iter().position(|s| s.len() != 1) {
            bad.push(format!("the plan gives vCPU {i} no CPU or several"));
            return None;
        }
        let missing = planned_cpus(vm).difference(online);
        if !missing.is_empty() {
            bad.push(format!(
                "planned CPUs {missing} do not exist or are offline on {} (online: {online})",
                self.uri
            ));
        }
        match others {
            Ok(others) if !force => {
                for t in others {
                    let overlap = t.cpus.intersection(&vm.cpus);
                    if t.pinned && !overlap.is_empty() {
                        bad.push(format!(
                            "domain {} (not in the plan) is pinned onto its planned CPUs {overlap}: move it first or pass --force",
                            t.name
                        ));
                    }
                }
            }
            Ok(_) => {}
            Err(e) => bad.push(e.clone()),
        }
        let domain = match self.conn.lookup_domain_by_name(&vm.name) {
            Ok(d) => d,
            Err(e) => {
                bad.push(format!(
                    "no domain {:?} at {}: {} (virsh list --all shows the names)",
                    vm.name,
                    self.uri,
                    lv(&e)
                ));
                return None;
            }
        };
        let running = domain.is_active().unwrap_or(false);
        let before = bad.len();
        check_vcpus(&domain, running, vm.vcpus.len(), bad);
        if !planned.iothreads.is_empty() {
            let have = ffi::iothread_info(&domain, AFFECT_CONFIG).unwrap_or_default();
            for t in &planned.iothreads {
                if !have.iter().any(|(id, _)| *id == t.iothread) {
                    bad.push(format!(
                        "it has no I/O thread {} (the plan pins it)",
                        t.iothread
                    ));
                }
            }
        }
        (bad.len() == before).then(|| Target {
            name: vm.name.clone(),
            domain,
            running,
            planned,
            memory: vm.memory.is_some().then(|| vm.clone()),
        })
    }

    /// Every domain at the URI that the plan does not place, as a tenant.
    fn others(&self, plan: &Plan, host: &HostTopology) -> Result<Vec<Tenant>, String> {
        let mut all =
            crate::libvirt::tenants::domain_tenants(&self.uri, host).map_err(|e| e.to_string())?;
        all.retain(|t| !plan.vms.iter().any(|v| v.name == t.name));
        Ok(all)
    }
}

/// The plan's VMs named (all when `names` is empty); a name the plan does
/// not place is a problem.
fn select<'p>(plan: &'p Plan, names: &[String], problems: &mut Vec<Problem>) -> Vec<&'p VmPlan> {
    if names.is_empty() {
        return plan.vms.iter().collect();
    }
    names
        .iter()
        .filter_map(|n| {
            let found = plan.vms.iter().find(|v| &v.name == n);
            if found.is_none() {
                let known: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
                problems.push(Problem {
                    vm: n.clone(),
                    reason: format!("not a placed VM of the plan (it has {})", known.join(", ")),
                });
            }
            found
        })
        .collect()
}

/// Every CPU a planned VM uses: vCPUs, emulator, I/O threads.
fn planned_cpus(vm: &VmPlan) -> CpuSet {
    let mut wanted = vm.cpus.union(&vm.emulator_cpus);
    for t in &vm.iothreads {
        wanted = wanted.union(&t.cpus);
    }
    for p in &vm.vcpus {
        wanted.insert(p.cpu);
    }
    wanted
}

/// The domain's vCPU count, config and (when running) live, is the plan's.
fn check_vcpus(domain: &virt::domain::Domain, running: bool, want: usize, bad: &mut Vec<String>) {
    let mut counts = vec![("config", domain.vcpus_flags(VCPU_CONFIG))];
    if running {
        counts.push(("live", domain.vcpus_flags(VCPU_LIVE)));
    }
    for (scope, count) in counts {
        match count {
            Ok(n) if n as usize == want => {}
            Ok(n) => bad.push(format!(
                "it has {} ({scope}), the plan {want}: resize it (virsh setvcpus) or re-plan",
                crate::text::plural(n as usize, "vCPU", "vCPUs")
            )),
            Err(e) => bad.push(format!("cannot read its vCPU count ({scope}): {}", lv(&e))),
        }
    }
}
