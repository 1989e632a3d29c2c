//! What the watcher decides for one domain, and does: on a define, plan it
//! around what runs and pin its config; on a start, keep its pins when
//! they are its own, else re-plan (moving only `movable` VMs, the fewest)
//! and pin it live; on a stop, say which CPUs are free; on a question of
//! the admission hook, allow a start whose pins are free. Every change goes
//! through `apply`'s checks and journal ([`super::pin`]). Each decision
//! reads the host afresh: the watcher keeps no picture of its own that
//! could drift from libvirt's.

use super::admission::{Answer, Ask};
use super::{Decision, Outcome, WatchError};
use crate::cpuset::CpuSet;
use crate::deadline::Deadline;
use crate::ids::CoreId;
use crate::libvirt::domain::tenant_from_domain;
use crate::libvirt::tenants::tenants_of;
use crate::plan::Plan;
use crate::solve::{Order, SolveOptions, SolverKind};
use crate::spec::{DomainRequest, Running};
use crate::tenant::{Tenant, TenantKind, TenantState};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The host as one decision reads it.
#[derive(Clone)]
pub(super) struct Snapshot {
    /// Every domain as a tenant (live pins for running ones).
    pub(super) tenants: Vec<Tenant>,
    /// The valid requests of the domains.
    pub(super) requests: Vec<DomainRequest>,
    /// Domains whose request is not valid, with why.
    pub(super) invalid: BTreeMap<String, String>,
}

/// Why a plan is made: a define pins the config around what runs, moving
/// nothing; a start may move `movable` VMs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// A domain defined: nothing else moves.
    Define,
    /// A domain starting (or made room for): `movable` VMs may move.
    Start,
}

impl super::Watcher {
    /// Reads the host's domains and their requests, and keeps what it read
    /// for the admission question ([`Self::decide_admission`]).
    pub(super) fn snapshot(&mut self) -> Result<Snapshot, WatchError> {
        let mut snap = self.read_host()?;
        // A domain admitted counts as running until libvirt says it runs
        // (its start event ends the wait) — or that it stopped.
        self.admitted.retain(|name, _| {
            !snap
                .tenants
                .iter()
                .any(|t| &t.name == name && t.state == TenantState::Running)
        });
        for (name, t) in &self.admitted {
            snap.tenants.retain(|x| &x.name != name);
            snap.tenants.push(t.clone());
        }
        self.seen = Some(snap.clone());
        Ok(snap)
    }

    /// A domain's request is valid as the watcher's spec reads it (its
    /// tables and `[defaults]`); a domain the spec's `[[vm]]` names is the
    /// spec's, whatever its metadata says.
    pub(super) fn check_request(&self, r: &DomainRequest) -> Result<(), crate::spec::SpecError> {
        if self.spec.names(&r.domain) {
            return Ok(());
        }
        self.spec.with_domains(std::slice::from_ref(r)).map(|_| ())
    }

    /// Whether `domain` is pinplan's to place: a valid request, or a
    /// `[[vm]]` of the spec.
    pub(super) fn ours(&self, snap: &Snapshot, domain: &str) -> bool {
        snap.requests.iter().any(|r| r.domain == domain) || self.spec.names(domain)
    }

    /// Reads the host's domains and their requests, every domain's XML once
    /// (a running domain's request is its live XML's: what it runs with).
    fn read_host(&self) -> Result<Snapshot, WatchError> {
        let domains = crate::libvirt::all_domain_xml(&self.uri)?;
        let tenants = tenants_of(&self.uri, &self.host, &domains)?;
        let mut requests = Vec::new();
        let mut invalid = BTreeMap::new();
        for (name, request) in crate::libvirt::metadata::requests_of(&self.uri, &domains) {
            match request.and_then(|r| {
                self.check_request(&r)?;
                Ok(r)
            }) {
                Ok(r) => requests.push(r),
                Err(e) => {
                    invalid.insert(name, crate::error::one_line(&e));
                }
            }
        }
        Ok(Snapshot {
            tenants,
            requests,
            invalid,
        })
    }

    /// The plan for `domain` at `moment` ([`plan_on`]), with its defined
    /// domain's memory.
    pub(super) fn plan_for(
        &self,
        snap: &Snapshot,
        domain: &str,
        moment: Moment,
    ) -> Result<Plan, WatchError> {
        let xml = crate::libvirt::inactive_xml(&self.uri, domain).ok();
        self.plan_with(snap, domain, moment, xml)
    }

    /// [`Self::plan_for`] with the domain's XML given (`None`: none).
    pub(super) fn plan_with(
        &self,
        snap: &Snapshot,
        domain: &str,
        moment: Moment,
        xml: Option<String>,
    ) -> Result<Plan, WatchError> {
        let mut defined = BTreeMap::new();
        if let Some(xml) = xml {
            defined.insert(
                domain.to_owned(),
                (format!("{} domain {domain}", self.uri), xml),
            );
        }
        plan_on(&self.on(snap), domain, moment, &defined)
    }

    /// What a plan is made on: this watcher's spec and host, as `snap` read it.
    pub(super) fn on<'a>(&'a self, snap: &'a Snapshot) -> On<'a> {
        On {
            spec: &self.spec,
            requests: &snap.requests,
            tenants: &snap.tenants,
            host: &self.host,
            uri: &self.uri,
            limit: self.time_limit,
        }
    }

    /// The cores each running tenant other than `domain` holds.
    pub(super) fn held_cores(&self, snap: &Snapshot, domain: &str) -> BTreeMap<CoreId, String> {
        let mut held = BTreeMap::new();
        for t in snap
            .tenants
            .iter()
            .filter(|t| t.state == TenantState::Running && t.name != domain)
        {
            for core in self.held_by(t) {
                held.entry(core).or_insert_with(|| t.name.clone());
            }
        }
        held
    }

    /// The cores a tenant holds: its vCPUs' and I/O threads' wherever they
    /// are, its emulator's but on the host's reserved CPUs (where the
    /// emulator threads of many VMs are meant to be together).
    pub(super) fn held_by(&self, t: &crate::tenant::Tenant) -> BTreeSet<CoreId> {
        let emulator = t.emulator_cpus.difference(&self.reserved);
        self.cores(&vcpu_and_io_cpus(t).union(&emulator))
    }

    /// The cores `cpus` touch.
    pub(super) fn cores(&self, cpus: &CpuSet) -> BTreeSet<CoreId> {
        cpus.iter()
            .filter_map(|c| self.host.pu(c).and_then(|p| p.core))
            .collect()
    }

    /// The first core `t` would hold that another running tenant holds,
    /// and its name.
    /// A domain pinplan places (`ours`) also clashes with the host when its
    /// vCPUs or I/O threads touch the host's reserved CPUs (only emulators
    /// may join the host there); a domain that is not pinplan's is never
    /// moved, and is refused only where it meets another tenant.
    fn clash(
        &self,
        snap: &Snapshot,
        t: &crate::tenant::Tenant,
        ours: bool,
    ) -> Option<(CoreId, String)> {
        let held = self.held_cores(snap, &t.name);
        let tenant = self
            .held_by(t)
            .into_iter()
            .find_map(|c| held.get(&c).map(|n| (c, n.clone())));
        let on_host = vcpu_and_io_cpus(t).intersection(&self.reserved);
        let host = self.cores(&on_host).into_iter().next().filter(|_| ours);
        tenant.or_else(|| host.map(|core| (core, HOST.to_owned())))
    }

    /// A domain defined or changed: plan it around what runs and pin its
    /// config (not while it runs: then it is checked as a start).
    pub(super) fn defined(&mut self, domain: &str) -> Result<Outcome, WatchError> {
        let snap = self.snapshot()?;
        let Some(me) = snap.tenants.iter().find(|t| t.name == domain) else {
            return Ok(Outcome::Gone);
        };
        if me.state == TenantState::Running {
            return self.started_with(&snap, domain);
        }
        if let Some(why) = snap.invalid.get(domain) {
            return Ok(Outcome::Invalid(why.clone()));
        }
        if !self.ours(&snap, domain) {
            return Ok(Outcome::NoRequest);
        }
        let plan = self.plan_for(&snap, domain, Moment::Define)?;
        self.pin(&plan, domain, &[], super::pin::CONFIG)
    }

    /// A domain started: its pins kept when no other running tenant holds
    /// their cores, else re-planned and pinned live.
    pub(super) fn started(&mut self, domain: &str) -> Result<Outcome, WatchError> {
        let snap = self.snapshot()?;
        self.started_with(&snap, domain)
    }

    fn started_with(&mut self, snap: &Snapshot, domain: &str) -> Result<Outcome, WatchError> {
        let Some(me) = snap.tenants.iter().find(|t| t.name == domain) else {
            return Ok(Outcome::Gone);
        };
        if let Some(why) = snap.invalid.get(domain) {
            return Ok(Outcome::Invalid(why.clone()));
        }
        let ours = self.ours(snap, domain);
        let clash = self.clash(snap, me, ours);
        match (ours, clash, me.pinned) {
            (false, None, _) => Ok(Outcome::NoRequest),
            (false, Some((core, other)), _) => Ok(Outcome::Shares {
                core,
                other,
                why: "it has no request: pinplan does not move it".to_owned(),
            }),
            (true, None, true) => Ok(Outcome::Kept {
                vcpus: me.cpus.clone(),
                emulator: me.emulator_cpus.clone(),
            }),
            (true, _, _) => {
                let plan = self.plan_for(snap, domain, Moment::Start)?;
                let moved: Vec<String> = plan
                    .moves
                    .iter()
                    .map(|m| m.vm.clone())
                    .filter(|v| v != domain)
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                self.pin(&plan, domain, &moved, super::pin::LIVE_AND_CONFIG)
            }
        }
    }

    /// A domain stopped: the CPUs its config pins its vCPUs to (where it
    /// ran, unless it was moved live only), free now.
    pub(super) fn stopped(&mut self, domain: &str) -> Result<Outcome, WatchError> {
        let snap = self.snapshot()?;
        Ok(match snap.tenants.iter().find(|t| t.name == domain) {
            Some(t) if t.pinned => Outcome::Freed(t.cpus.clone()),
            _ => Outcome::Freed(CpuSet::new()),
        })
    }

    /// The admission hook's question: may `ask.domain` start with the XML
    /// libvirt is about to start? Yes when its pins touch no core another
    /// running tenant holds. Else no, with the plan's way out: the start is
    /// refused and, when a plan fits, the watcher pins its config so that
    /// the next start goes through ([`Admission::repin`]).
    ///
    /// It reads the host as the last decision left it, not through libvirt:
    /// while a domain waits in its `prepare` hook, libvirt holds its object,
    /// and listing the domains waits for the hook — which waits for this
    /// answer. Every start goes through this question, and a domain allowed
    /// counts as running from then on; what the cache misses is a pin
    /// changed by hand since the last event.
    pub(super) fn decide_admission(&mut self, ask: &Ask) -> Result<Admission, WatchError> {
        // Never libvirt from here: with nothing read yet, no decision.
        let Some(mut snap) = self.seen.clone() else {
            return Ok(Admission::answer(
                true,
                Some(
                    "pinplan watch has not read the host yet: the start goes unchecked".to_owned(),
                ),
                None,
            ));
        };
        let origin = format!("{} domain {} (start)", self.uri, ask.domain);
        let mut me = tenant_from_domain(&origin, &ask.xml, &self.host)?;
        self.asked_request(&mut snap, &origin, ask);
        if let Some(why) = snap.invalid.get(&ask.domain) {
            return Ok(self.refusal(
                format!("its pinplan request is not valid: {why}"),
                format!("fix it with pinplan tag {} KEY=VALUE…", ask.domain),
                None,
            ));
        }
        if !me.pinned {
            // Unpinned, its vCPUs may run on every CPU.
            me.cpus = self.host.usable_cpus();
        }
        let ours = self.ours(&snap, &ask.domain);
        let Some((core, other)) = self.clash(&snap, &me, ours) else {
            // Running from now on, for the next question before its event.
            me.state = TenantState::Running;
            self.admitted.insert(ask.domain.clone(), me.clone());
            if let Some(seen) = &mut self.seen {
                seen.tenants.retain(|t| t.name != ask.domain);
                seen.tenants.push(me);
            }
            return Ok(Admission::answer(true, None, None));
        };
        let whose = if other == HOST {
            format!("core {}, the host's", core.0)
        } else {
            format!("core {} of {other}, which runs", core.0)
        };
        let what = if me.pinned {
            format!("its pins {} take {whose}", me.every_cpu())
        } else {
            format!("it is not pinned: its vCPUs would float over {whose}")
        };
        if !ours {
            let fix = format!("pin it onto free cores, or give it a request (pinplan tag {} vcpus=N) so that pinplan pins it", ask.domain);
            return Ok(self.refusal(what, fix, None));
        }
        // Its XML as libvirt is about to start it: libvirt is not asked.
        let plan = self.plan_with(&snap, &ask.domain, Moment::Define, Some(ask.xml.clone()))?;
        if plan.vms.iter().any(|v| v.name == ask.domain) {
            let fix = format!(
                "pinplan watch pins its config onto free cores now: start {} again",
                ask.domain
            );
            return Ok(self.refusal(what, fix, Some(plan)));
        }
        let (why, fix) = super::pin::unplaced_words(&plan, &ask.domain);
        let movable = self
            .spec
            .with_domains(&snap.requests)
            .map(|(s, _)| s.movable_vms())
            .unwrap_or_default();
        let fix = match (movable.is_empty(), fix) {
            (false, _) => format!(
                "make room by moving movable VMs ({}): pinplan repack --connect {} --for {}",
                movable.join(", "),
                self.uri,
                ask.domain
            ),
            (true, Some(fix)) => fix,
            (true, None) => {
                "stop a VM, or mark VMs movable (pinplan tag VM movable=true)".to_owned()
            }
        };
        Ok(self.refusal(
            format!("{what}; no plan fits it now without moving a running VM: {why}"),
            fix,
            None,
        ))
    }

    /// The request of the domain asking to start, as libvirt is about to
    /// start it (its XML's metadata), in place of the one read before.
    fn asked_request(&self, snap: &mut Snapshot, origin: &str, ask: &Ask) {
        snap.requests.retain(|r| r.domain != ask.domain);
        snap.invalid.remove(&ask.domain);
        let read = DomainRequest::read(origin, &ask.domain, &ask.xml).and_then(|r| {
            if let Some(r) = &r {
                self.check_request(r)?;
            }
            Ok(r)
        });
        match read {
            Ok(Some(r)) => snap.requests.push(r),
            Ok(None) => {}
            Err(e) => {
                snap.invalid
                    .insert(ask.domain.clone(), crate::error::one_line(&e));
            }
        }
    }

    /// A refused start (`why`, `fix`), and the plan whose config pins are
    /// written after the answer. With `--dry-run` nothing is refused: the
    /// start goes through, and the answer says what would have been said.
    fn refusal(&self, why: String, fix: String, repin: Option<Plan>) -> Admission {
        if self.dry_run && !self.refuse_in_dry_run {
            return Admission::answer(
                true,
                Some(format!("--dry-run: would refuse: {why}; fix: {fix}")),
                None,
            );
        }
        Admission {
            answer: Answer {
                allow: false,
                reason: Some(why),
                fix: Some(fix),
            },
            repin,
        }
    }
}

/// What a plan is made on: the spec, the domains' requests and the host
/// with what it runs. No libvirt call: the tests make plans on made-up hosts.
pub struct On<'a> {
    /// The spec (or the empty spec of [`crate::spec::Spec::without_file`]).
    pub spec: &'a crate::spec::Spec,
    /// The domains' requests.
    pub requests: &'a [DomainRequest],
    /// Every domain as a tenant, running or not.
    pub tenants: &'a [Tenant],
    /// The host.
    pub host: &'a crate::topology::HostTopology,
    /// Its URI, for messages.
    pub uri: &'a str,
    /// The solve's time limit.
    pub limit: Duration,
}

/// What a plan optimises besides its domains: the objectives' order and a
/// ceiling on the vCPUs moved (the request's [`Order`] and `max_moves`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Goal {
    /// A plan's order, or compaction's.
    pub order: Order,
    /// The most vCPUs moved, all told.
    pub max_moves: Option<u32>,
}

/// The plan for `domain` at `moment`: the spec and the domains' requests,
/// kept to `domain` and the VMs that run (the others are not planned now),
/// around every other running domain; at a define nothing else moves, at a
/// start the `movable` VMs (and `domain`) may, the fewest vCPUs.
/// `defined` gives domains' XML for their memory.
pub fn plan_on(
    on: &On<'_>,
    domain: &str,
    moment: Moment,
    defined: &BTreeMap<String, (String, String)>,
) -> Result<Plan, WatchError> {
    plan_all(on, &[domain.to_owned()], moment, defined, Goal::default())
}

/// [`plan_on`] for several domains at once (none: only the VMs that run),
/// optimising `goal`.
pub fn plan_all(
    on: &On<'_>,
    domains: &[String],
    moment: Moment,
    defined: &BTreeMap<String, (String, String)>,
    goal: Goal,
) -> Result<Plan, WatchError> {
    let spec = on.spec.with_domains(on.requests)?.0;
    let mut keep: BTreeSet<String> = on
        .tenants
        .iter()
        .filter(|t| t.state == TenantState::Running && t.kind == TenantKind::Vm)
        .map(|t| t.name.clone())
        .collect();
    keep.extend(domains.iter().cloned());
    let movable: BTreeSet<String> = match moment {
        Moment::Define => BTreeSet::new(),
        Moment::Start => spec
            .movable_vms()
            .into_iter()
            .chain(domains.iter().cloned())
            .collect(),
    };
    let spec = spec.only(&keep, &movable);
    let (mut request, warnings, residents) = spec.request_running(
        on.host.clone(),
        defined,
        &Running {
            uri: on.uri,
            domains: on.tenants,
            count_shut_off: false,
        },
    )?;
    request.order = goal.order;
    request.max_moves = goal.max_moves;
    let options = SolveOptions {
        solver: SolverKind::Ilp,
        explain: true,
        progress: None,
    };
    let mut plan = residents.solve(&request, &options, Deadline::after(on.limit));
    plan.warnings.splice(0..0, warnings);
    Ok(plan)
}

/// The watcher's answer to the hook, and the plan whose config pins it
/// writes after answering (libvirt holds the domain while the hook waits).
pub(super) struct Admission {
    pub(super) answer: Answer,
    pub(super) repin: Option<Plan>,
}

impl Admission {
    fn answer(allow: bool, reason: Option<String>, fix: Option<String>) -> Admission {
        Admission {
            answer: Answer { allow, reason, fix },
            repin: None,
        }
    }
}

/// Who holds the host's reserved CPUs, in a clash.
const HOST: &str = "the host";

/// The CPUs a tenant's vCPUs and I/O threads may run on (not its emulator's).
fn vcpu_and_io_cpus(t: &crate::tenant::Tenant) -> CpuSet {
    t.iothreads
        .iter()
        .fold(t.cpus.clone(), |all, io| all.union(&io.cpus))
}

/// How long a decision took, in milliseconds.
pub(super) fn millis(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

/// A decision for the record.
pub(super) fn decision(
    domain: &str,
    event: &'static str,
    outcome: Outcome,
    since: Instant,
) -> Decision {
    Decision {
        domain: domain.to_owned(),
        event,
        outcome,
        millis: millis(since),
        at: std::time::SystemTime::now(),
    }
}
