//! The preconditions of `apply`, checked for every VM before anything
//! changes (once the plan is known to be this host's): each domain exists with the planned
//! vCPU count and I/O threads, the planned CPUs are online, and no running
//! domain outside the plan may run on the planned cores (pinned onto them,
//! or not pinned at all); a shut-off domain whose config pins it there is a
//! warning ([`strangers`]).

use super::{ffi, lv, Pins, Problem, Session, Target, AFFECT_CONFIG, VCPU_CONFIG, VCPU_LIVE};
use crate::cpuset::CpuSet;
use crate::plan::{IothreadPin, Plan, VmPlan};
use crate::tenant::{Tenant, TenantState};
use crate::topology::HostTopology;

impl Session {
    /// Checks every precondition for every VM named (all the plan's VMs when
    /// `names` is empty) before anything changes: the domain exists, its vCPU
    /// count (live and config) is the plan's, its planned I/O threads exist,
    /// every planned CPU exists and is online on `host` (the connected host's
    /// topology), and no running domain outside the plan may run on the
    /// planned cores (unless `force`). That the plan is this host's is
    /// checked before ([`super::host::check_with`]). Returns every problem found, not only the first; with the
    /// targets, the warnings (shut-off domains pinned onto planned cores).
    pub fn check(
        &self,
        plan: &Plan,
        names: &[String],
        host: &HostTopology,
        force: bool,
    ) -> Result<(Vec<Target>, Vec<Problem>), Vec<Problem>> {
        let mut problems = Vec::new();
        let mut warnings = Vec::new();
        let selected = select(plan, names, &mut problems);
        let online = host.online_cpus();
        let others = self.others(&selected, host);
        let mut targets = Vec::new();
        for vm in selected.iter().copied() {
            let mut bad = Vec::new();
            match &others {
                // A kept VM runs as it runs: the plan changes nothing of
                // it, and said what it shares.
                Ok(_) if vm.kept => {}
                Ok(others) => {
                    let (refused, warned) = strangers(vm, plan, others, force);
                    bad.extend(refused);
                    warnings.extend(warned.into_iter().map(|reason| Problem {
                        vm: vm.name.clone(),
                        reason,
                    }));
                }
                Err(e) => bad.push(e.to_string()),
            }
            let domains = others.as_deref().unwrap_or_default();
            let target = self.check_vm(vm, &online, domains, &mut bad);
            // Writing the plan's memory into the config must work (a
            // refusal is found now, before anything changes), and what it
            // changes beyond the plan (huge pages of another size) is said.
            let target = match target.as_ref().map(memory_notes) {
                Some(Err(reason)) => {
                    bad.push(reason);
                    None
                }
                Some(Ok(notes)) => {
                    warnings.extend(notes.into_iter().map(|reason| Problem {
                        vm: vm.name.clone(),
                        reason,
                    }));
                    target
                }
                None => None,
            };
            problems.extend(bad.into_iter().map(|reason| Problem {
                vm: vm.name.clone(),
                reason,
            }));
            targets.extend(target);
        }
        if problems.is_empty() {
            Ok((targets, warnings))
        } else {
            Err(problems)
        }
    }

    /// One VM's preconditions; its target when the domain can be pinned as
    /// planned (the problems found go to `bad`). `others`, the domains
    /// outside the plan, give a "did you mean" for a name no domain has.
    fn check_vm(
        &self,
        vm: &VmPlan,
        online: &CpuSet,
        others: &[Tenant],
        bad: &mut Vec<String>,
    ) -> Option<Target> {
        let mut planned = Pins::planned(vm);
        if let Some(i) = planned.vcpus.iter().position(|s| s.len() != 1) {
            bad.push(format!("the plan gives vCPU {i} no CPU or several"));
            return None;
        }
        let missing = planned_cpus(vm).difference(online);
        if !missing.is_empty() {
            let verb = if missing.len() == 1 {
                "does not exist or is offline"
            } else {
                "do not exist or are offline"
            };
            bad.push(format!(
                "{} {verb} on {} (online: {online})",
                roles(vm, &missing),
                self.uri
            ));
        }
        let domain = match self.conn.lookup_domain_by_name(&vm.name) {
            Ok(d) => d,
            Err(e) => {
                let guess = crate::text::closest(&vm.name, others.iter().map(|t| t.name.as_str()))
                    .map(|d| format!("did you mean {d}? "))
                    .unwrap_or_default();
                bad.push(format!(
                    "no domain {:?} at {}: {} ({guess}virsh list --all shows the names)",
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
            // The plan numbers its I/O threads 1…n; the domain's own ids
            // (`<iothreadids>`, e.g. 8) are the ones pinned, in order.
            let have: std::collections::BTreeSet<u32> = ffi::iothread_info(&domain, AFFECT_CONFIG)
                .unwrap_or_default()
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            match IothreadPin::on_ids(&planned.iothreads, &have) {
                Some(pins) => planned.iothreads = pins,
                None => bad.push(iothread_count(&have, planned.iothreads.len())),
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

    /// Every domain at the URI but the VMs applied now (`selected`), as a
    /// tenant: with `--vm`, the plan's other VMs stay where they run and
    /// are in the way like any domain.
    fn others(
        &self,
        selected: &[&VmPlan],
        host: &HostTopology,
    ) -> Result<Vec<Tenant>, crate::libvirt::tenants::TenantsError> {
        let mut all = crate::libvirt::tenants::domain_tenants(&self.uri, host)?;
        all.retain(|t| !selected.iter().any(|v| v.name == t.name));
        Ok(all)
    }
}

/// What the domains outside the plan (`others`) mean for `vm`'s planned
/// cores: the reasons to refuse, and warnings. Compared by core: `vm.cpus`
/// holds every CPU of the cores the VM owns, siblings included, and every
/// thread of the other domain counts (vCPUs, emulator, I/O threads). The
/// CPUs in the way are named by what the plan runs there ([`roles`]).
///
/// - a running domain pinned onto them is refused;
/// - a running domain that is not pinned (it floats: no pins, or pins to
///   every CPU) may run on them, and is refused too;
/// - a shut-off domain takes no CPU now: its config's pins onto them are a
///   warning (it would share them when it starts), and a shut-off domain
///   that floats is not worth one.
///
/// A domain the plan lists as unplaced is named so, not as "not in the plan".
/// With `force` (`--force`), what would be refused is a warning that says
/// it was let through.
fn strangers(
    vm: &VmPlan,
    plan: &Plan,
    others: &[Tenant],
    force: bool,
) -> (Vec<String>, Vec<String>) {
    let mut refused = Vec::new();
    let mut warned = Vec::new();
    for t in others {
        let overlap = t.every_cpu().intersection(&vm.cpus);
        if overlap.is_empty() {
            continue;
        }
        let who = if plan.unplaced.contains(&t.name) {
            "unplaced in this plan"
        } else if plan.vms.iter().any(|v| v.name == t.name) {
            "in the plan, not applied now (--vm)"
        } else {
            "not in the plan"
        };
        let place = roles(vm, &overlap);
        let (what, fix, forced) = match (t.state, t.pinned) {
            (TenantState::Running, true) => (
                format!("domain {} ({who}) is pinned onto {place}", t.name),
                "move it first, or --force applies anyway (the two then share them)",
                "applied all the same (--force): the two share them",
            ),
            (TenantState::Running, false) => (
                format!("domain {} ({who}) is not pinned and may run on {place}", t.name),
                "pin it, name it in the spec, or stop it; or --force applies anyway (the two may then share them)",
                "applied all the same (--force): the two may share them",
            ),
            (TenantState::ShutOff, true) => {
                warned.push(format!(
                    "domain {} (shut off) is pinned in its config onto {place}: it would share them when it starts",
                    t.name
                ));
                continue;
            }
            (TenantState::ShutOff, false) => continue,
        };
        if force {
            warned.push(format!("{what}: {forced}"));
        } else {
            refused.push(format!("{what}: {fix}"));
        }
    }
    (refused, warned)
}

/// `cpus` (CPUs of `vm`'s cores) by what the plan runs on them: "this VM's
/// vCPU CPUs 8-10 and emulator CPUs 18-19"; a CPU of its cores that runs
/// none of its threads is an idle sibling.
fn roles(vm: &VmPlan, cpus: &CpuSet) -> String {
    let vcpus: CpuSet = vm.vcpus.iter().map(|p| p.cpu).collect();
    let iothreads = vm
        .iothreads
        .iter()
        .fold(CpuSet::new(), |all, t| all.union(&t.cpus));
    let mut rest = cpus.clone();
    let mut parts = Vec::new();
    for (role, set) in [
        ("vCPU", &vcpus),
        ("emulator", &vm.emulator_cpus),
        ("I/O thread", &iothreads),
    ] {
        let mine = rest.intersection(set);
        if !mine.is_empty() {
            let word = if mine.len() == 1 { "CPU" } else { "CPUs" };
            parts.push(format!("{role} {word} {mine}"));
            rest = rest.difference(&mine);
        }
    }
    if !rest.is_empty() {
        let word = if rest.len() == 1 { "CPU" } else { "CPUs" };
        parts.push(format!("idle sibling {word} {rest} of its cores"));
    }
    format!("this VM's {}", crate::text::and_list(&parts))
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

/// The notes of patching the plan's memory placement into `target`'s config
/// (none when the plan has no memory for it), or why it cannot be patched;
/// a config that cannot be read now is left to the apply step, which says
/// why.
fn memory_notes(target: &Target) -> Result<Vec<String>, String> {
    let Some(vm) = target.memory.as_ref() else {
        return Ok(Vec::new());
    };
    let Ok(xml) = target
        .domain
        .xml_desc(super::XML_INACTIVE | super::XML_SECURE)
    else {
        return Ok(Vec::new());
    };
    crate::libvirt::patch::Domain::read(&vm.name, &xml)
        .and_then(|d| d.patch_memory(vm))
        .map(|p| p.notes)
        .map_err(|e| format!("its config cannot take the plan's memory placement: {e}"))
}

/// Why a domain's I/O threads (`have`, ids) cannot take a plan's `planned`:
/// apply pins, it does not add or remove I/O threads, and one left unpinned
/// would run on any CPU.
fn iothread_count(have: &std::collections::BTreeSet<u32>, planned: usize) -> String {
    let ids: Vec<String> = have.iter().map(u32::to_string).collect();
    let has = match have.len() {
        0 => "no I/O thread".to_owned(),
        1 => format!("1 I/O thread (id {})", ids.join(", ")),
        n => format!("{n} I/O threads (ids {})", ids.join(", ")),
    };
    format!(
        "it has {has} and the plan pins {planned}: plan with iothreads = {}, or change the domain's <iothreads> (virsh edit) and apply again",
        have.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::testroot::{plan, Vm};
    use crate::tenant::{host_tenant, TenantKind};

    /// A domain whose vCPUs may run on `cpus` and its emulator on `emulator`.
    fn domain(name: &str, cpus: &str, emulator: &str, state: TenantState, pinned: bool) -> Tenant {
        let set = |s: &str| s.parse::<CpuSet>().unwrap_or_else(|e| panic!("{e}"));
        Tenant {
            name: name.to_owned(),
            kind: TenantKind::Vm,
            state,
            emulator_cpus: set(emulator),
            pinned,
            ..host_tenant(&set(cpus))
        }
    }

    /// Issue 27, item 4: who is in the way of a VM's cores is named as what
    /// it is — unplaced by this plan, not in it, floating, shut off — and
    /// compared by core (a sibling, an emulator count).
    #[test]
    fn issue_27_strangers_are_named_for_what_they_are() {
        use TenantState::{Running, ShutOff};
        // The test host's cores pair CPU N with N+4: v owns core 1 (1,5).
        let mut p = plan("0,4", &[Vm::new("v", "1,5", "require", 2)]);
        p.unplaced = vec!["a".to_owned()];
        let vm = &p.vms[0];
        for (tenant, refused, warned) in [
            (
                domain("a", "5", "0", Running, true),
                Some("domain a (unplaced in this plan) is pinned onto this VM's vCPU CPU 5: move it first, or --force applies anyway (the two then share them)"),
                None,
            ),
            (
                domain("b", "0-7", "0-7", Running, false),
                Some("domain b (not in the plan) is not pinned and may run on this VM's vCPU CPUs 1,5: pin it, name it in the spec, or stop it; or --force applies anyway (the two may then share them)"),
                None,
            ),
            (
                domain("a", "0-7", "0-7", Running, false),
                Some("domain a (unplaced in this plan) is not pinned and may run on this VM's vCPU CPUs 1,5: pin it, name it in the spec, or stop it; or --force applies anyway (the two may then share them)"),
                None,
            ),
            (
                domain("c", "1", "0", ShutOff, true),
                None,
                Some("domain c (shut off) is pinned in its config onto this VM's vCPU CPU 1: it would share them when it starts"),
            ),
            // Elsewhere, or shut off and floating: nothing to say.
            (domain("d", "2,6", "0", Running, true), None, None),
            (domain("e", "0-7", "0-7", ShutOff, false), None, None),
            // Its emulator on the VM's core counts as much as a vCPU.
            (
                domain("f", "2", "5", Running, true),
                Some("domain f (not in the plan) is pinned onto this VM's vCPU CPU 5: move it first, or --force applies anyway (the two then share them)"),
                None,
            ),
        ] {
            let (r, w) = strangers(vm, &p, std::slice::from_ref(&tenant), false);
            assert_eq!(r, refused.map(str::to_owned).into_iter().collect::<Vec<_>>(), "{}", tenant.name);
            assert_eq!(w, warned.map(str::to_owned).into_iter().collect::<Vec<_>>(), "{}", tenant.name);
        }
    }

    /// Issue 31: "planned CPUs 8-10,18-19" mixed the emulator's CPU 10 into
    /// the vCPUs' (the lab's vm2 on a host with CPUs 0-1 online). Each set
    /// is named by role, a CPU in two roles by the first (vCPU, emulator,
    /// I/O thread), and one of the VM's cores that runs none of its threads
    /// as an idle sibling.
    #[test]
    fn issue_31_cpus_are_named_by_role() {
        let set = |s: &str| s.parse::<CpuSet>().unwrap_or_else(|e| panic!("{e}"));
        // vm2 of the lab: vCPUs 8,18,9,19; emulator on the reserved 0,10.
        let mut p = plan("0,10", &[Vm::new("vm2", "8-9,18-19", "require", 2)]);
        let lab = p.vms[0].clone();
        p.vms[0].iothreads = vec![crate::plan::IothreadPin {
            iothread: 1,
            cpus: set("9,20"),
        }];
        p.vms[0].cpus = set("8-9,18-20");
        let with_io = &p.vms[0];
        for (vm, cpus, expected) in [
            (
                &lab,
                "8-10,18-19",
                "this VM's vCPU CPUs 8-9,18-19 and emulator CPU 10",
            ),
            (&lab, "10", "this VM's emulator CPU 10"),
            (&lab, "19", "this VM's vCPU CPU 19"),
            (
                with_io,
                "8-10,18-20",
                "this VM's vCPU CPUs 8-9,18-19, emulator CPU 10 and I/O thread CPU 20",
            ),
        ] {
            assert_eq!(roles(vm, &set(cpus)), expected, "{cpus}");
        }
        let mut idle = lab.clone();
        idle.cpus = set("8-9,18-19,7,17");
        assert_eq!(
            roles(&idle, &set("7,17")),
            "this VM's idle sibling CPUs 7,17 of its cores"
        );
    }

    /// Issue 31: the CPUs in the way are named by what the plan runs there,
    /// not as one "planned CPUs" set. The test host pairs CPU N with N+4;
    /// w owns cores 1 (1,5) and 2 (2,6): its vCPUs on 1 and 5, its
    /// emulator on 2, and 6 idle.
    #[test]
    fn issue_31_the_cpus_in_the_way_are_named_by_role() {
        let mut p = plan("0,4", &[Vm::new("w", "1-2,5-6", "require", 2)]);
        let w = &mut p.vms[0];
        let keep: CpuSet = "1,5".parse().unwrap_or_else(|e| panic!("{e}"));
        w.vcpus.retain(|v| keep.contains(v.cpu));
        w.emulator_cpus = "2".parse().unwrap_or_else(|e| panic!("{e}"));
        let vm = &p.vms[0];
        for (tenant, expected) in [
            (
                domain("g", "1-2,5-6", "0", TenantState::Running, true),
                "domain g (not in the plan) is pinned onto this VM's vCPU CPUs 1,5, emulator CPU 2 and idle sibling CPU 6 of its cores: move it first, or --force applies anyway (the two then share them)",
            ),
            (
                domain("h", "3", "6", TenantState::Running, true),
                "domain h (not in the plan) is pinned onto this VM's idle sibling CPU 6 of its cores: move it first, or --force applies anyway (the two then share them)",
            ),
            (
                domain("i", "2", "0", TenantState::Running, true),
                "domain i (not in the plan) is pinned onto this VM's emulator CPU 2: move it first, or --force applies anyway (the two then share them)",
            ),
        ] {
            let (r, w) = strangers(vm, &p, std::slice::from_ref(&tenant), false);
            assert_eq!(r, vec![expected.to_owned()], "{}", tenant.name);
            assert!(w.is_empty(), "{w:?}");
        }
        // --force lets it through, and says so.
        let floating = domain("j", "0-7", "0-7", TenantState::Running, false);
        let (r, w) = strangers(vm, &p, std::slice::from_ref(&floating), true);
        assert!(r.is_empty(), "{r:?}");
        assert_eq!(
            w,
            vec!["domain j (not in the plan) is not pinned and may run on this VM's vCPU CPUs 1,5, emulator CPU 2 and idle sibling CPU 6 of its cores: applied all the same (--force): the two may share them".to_owned()]
        );
    }
}
