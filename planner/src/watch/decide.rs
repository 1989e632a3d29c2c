//! What the watcher decides for one domain, and does: on a define, plan it
//! around what runs and pin its config; on a start, keep its pins when
//! they are its own, else re-plan (moving only `movable` VMs, the fewest)
//! and pin it live; on a stop, say which CPUs are free. Every change goes
//! through `apply`'s checks and journal ([`super::pin`]). Each decision
//! reads the host afresh: the watcher keeps no picture of its own that
//! could drift from libvirt's — but for the admission hook's question,
//! answered from the last reading ([`super::judge`]).

use super::{Decision, Outcome, WatchError};
use crate::cpuset::CpuSet;
use crate::deadline::Deadline;
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
    /// Reads the host's domains and their requests, and hands what it read
    /// to the admission question ([`super::judge`]).
    pub(super) fn snapshot(&mut self) -> Result<Snapshot, WatchError> {
        let mut snap = self.read_host()?;
        self.admissions
            .with_admitted(&mut snap, std::time::SystemTime::now());
        self.admissions.read(snap.clone());
        Ok(snap)
    }

    /// Reads the host's domains and their requests, every domain's XML once
    /// (a running domain's request is its live XML's: what it runs with).
    fn read_host(&self) -> Result<Snapshot, WatchError> {
        let domains = crate::libvirt::all_domain_xml(&self.frame.uri)?;
        let tenants = tenants_of(&self.frame.uri, &self.frame.host, &domains)?;
        let mut requests = Vec::new();
        let mut invalid = BTreeMap::new();
        for (name, request) in crate::libvirt::metadata::requests_of(&self.frame.uri, &domains) {
            match request.and_then(|r| {
                self.frame.check_request(&r)?;
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
        let xml = crate::libvirt::inactive_xml(&self.frame.uri, domain).ok();
        self.frame.plan_with(snap, domain, moment, xml)
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
        if !self.frame.ours(&snap, domain) {
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
        let ours = self.frame.ours(snap, domain);
        let clash = self.frame.clash(snap, me, ours);
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
