//! `pinplan watch`: planning with the host as it changes. On libvirt's
//! domain events it pins a domain as it is defined or started, gives its
//! cores back when it stops, answers the admission hook over a local socket
//! (`admission`), and writes the hook (`hook`) and the systemd unit (`unit`)
//! that run it. What it decides is `decide`'s, how it changes the host
//! `pin`'s (apply's checks and journal); this module holds the watcher, its
//! decisions and how they print. The event loop is the program's (the CLI):
//! it calls [`Watcher::happened`], [`Watcher::admit`] and
//! [`Watcher::reconcile`].

pub mod admission;
mod decide;
mod frame;
pub mod hook;
mod judge;
pub mod listen;
mod pin;
pub mod repack;
pub mod undo;
pub mod unit;

pub use decide::{plan_on, Moment, On};
pub use judge::{Admissions, AfterAdmission};
pub use pin::JOURNAL_PREFIX;

use crate::cpuset::CpuSet;
use crate::ids::CoreId;
use crate::spec::Spec;
use crate::topology::Source;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

crate::error::transparent_error! {
    /// Why a decision could not be made or carried out.
    pub enum WatchError {
        /// libvirt refused a call.
        Libvirt(crate::error::LibvirtError),
        /// The domains could not be read.
        Tenants(crate::libvirt::tenants::TenantsError),
        /// A domain's XML could not be read.
        Domain(crate::libvirt::domain::DomainError),
        /// The spec, or a domain's request.
        Spec(crate::spec::SpecError),
        /// The host's topology.
        Topology(crate::topology::TopologyError),
        /// apply's preconditions.
        Prepare(crate::libvirt::apply::host::PrepareError),
        /// The host's apply lock.
        Lock(crate::libvirt::apply::lock::LockError),
        /// A journal could not be written.
        Write(crate::error::WriteError),
        /// No state directory for the journals.
        State(crate::state::StateError),
        /// A pin call failed (and what it had changed was put back).
        Apply(Box<crate::libvirt::apply::ApplyError>),
    }
}

/// What happened to a domain, as the watcher reacts to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Happening {
    /// Defined, or its definition changed (a device, its vCPU count).
    Defined,
    /// Started.
    Started,
    /// Stopped (shut down, destroyed, crashed).
    Stopped,
    /// Undefined.
    Undefined,
    /// Changed: a device attached or detached, its pins changed live (by
    /// anyone, the watcher too). Decided as a define: a running domain is
    /// checked as a start, and what the admission question is answered
    /// from is read again.
    Changed,
}

impl Happening {
    /// The word of the decision line: `vm1 started: …`.
    pub fn word(self) -> &'static str {
        match self {
            Happening::Defined => "defined",
            Happening::Started => "started",
            Happening::Stopped => "stopped",
            Happening::Undefined => "undefined",
            Happening::Changed => "changed",
        }
    }
}

/// What the watcher did (or, with `--dry-run`, would do) for a domain.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Pinned as planned (or already so: `changed` false).
    Pinned {
        /// Its vCPUs' CPUs.
        vcpus: CpuSet,
        /// Its emulator's CPUs.
        emulator: CpuSet,
        /// Whether the plan is proven optimal.
        proven: bool,
        /// Pinned live (a running domain), else in its config.
        live: bool,
        /// Other VMs moved for it.
        moved: Vec<String>,
        /// The journal of the change: none when nothing changed (the pins
        /// were as planned, or `--dry-run`).
        journal: Option<PathBuf>,
    },
    /// Its pins are its own: kept.
    Kept {
        /// Its vCPUs' CPUs.
        vcpus: CpuSet,
        /// Its emulator's CPUs.
        emulator: CpuSet,
    },
    /// No plan fits it now.
    Unplaced {
        /// Why.
        why: String,
        /// The smallest fix, when one is known.
        fix: Option<String>,
    },
    /// It runs on a core another running tenant holds, and pinplan may not
    /// move it.
    Shares {
        /// The core.
        core: CoreId,
        /// The other tenant.
        other: String,
        /// Why it was not moved.
        why: String,
    },
    /// Its CPUs are free again.
    Freed(CpuSet),
    /// The admission hook's answer.
    Admission(admission::Answer),
    /// It has no request, and nothing of its is in the way: not pinplan's.
    NoRequest,
    /// Its request is not valid: why.
    Invalid(String),
    /// It is gone (undefined, or a transient domain stopped).
    Gone,
    /// The decision failed: why, in one line.
    Failed(String),
}

/// One decision: a line of the watcher's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The domain.
    pub domain: String,
    /// What happened: `defined`, `started`, `stopped`, `undefined`,
    /// `reconciled`, `admission`.
    pub event: &'static str,
    /// What was done.
    pub outcome: Outcome,
    /// How long the decision took, in milliseconds.
    pub millis: f64,
    /// When it was made.
    pub at: SystemTime,
}

/// How a watcher is set up.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The host's libvirt URI.
    pub uri: String,
    /// The spec (its `[host]` reservation and tables, its `[[vm]]`s), if any.
    pub spec: Option<PathBuf>,
    /// Decide and say, change nothing (and let every start through, saying
    /// what would have been refused).
    pub dry_run: bool,
    /// With `dry_run`: answer the hook's questions as without it. For a
    /// program that carries the decisions out itself (the `watch` bench on
    /// libvirt's test driver, which has no pin calls); the CLI never sets it.
    pub refuse_in_dry_run: bool,
    /// Each solve's time limit.
    pub time_limit: Duration,
    /// The topology (`--source`): else the spec's `[host] source`, else
    /// read through `uri`. The domains are always read through `uri`.
    pub source: Option<Source>,
}

/// The watcher of one host.
pub struct Watcher {
    /// The ground of its decisions, shared with the admission thread.
    frame: Arc<frame::Frame>,
    /// How it was set up: the spec and topology are read again from there
    /// on SIGHUP.
    settings: Settings,
    /// What the admission question is answered from.
    admissions: Admissions,
}

impl Watcher {
    /// A watcher of `settings.uri`: its spec read, its topology through
    /// `settings.source`, else the spec's `[host] source`, else the URI.
    pub fn new(settings: &Settings) -> Result<Watcher, WatchError> {
        let frame = Arc::new(frame(settings)?);
        Ok(Watcher {
            admissions: Admissions::new(Arc::clone(&frame)),
            frame,
            settings: settings.clone(),
        })
    }

    /// Reads the spec, its tables and the topology again (SIGHUP); on an
    /// error the watcher keeps what it had. The domains' requests are then
    /// checked again against the new spec (the admission question's too).
    pub fn reload(&mut self) -> Result<(), WatchError> {
        let frame = Arc::new(frame(&self.settings)?);
        self.admissions.lock().frame = Arc::clone(&frame);
        self.frame = frame;
        // Unreadable now, the next decision reads it.
        let _ = self.snapshot();
        Ok(())
    }

    /// The handle that answers the admission hook, for the thread that
    /// serves its socket: it never waits on this watcher's decisions.
    pub fn admissions(&self) -> Admissions {
        self.admissions.clone()
    }

    /// The spec's `[[vm]]`s that are not running (by name): what `repack
    /// --for SPEC` makes room for.
    pub fn not_running(&mut self) -> Vec<String> {
        let running: std::collections::BTreeSet<String> = self
            .snapshot()
            .map(|s| {
                s.tenants
                    .into_iter()
                    .filter(|t| t.state == crate::tenant::TenantState::Running)
                    .map(|t| t.name)
                    .collect()
            })
            .unwrap_or_default();
        self.frame
            .spec
            .vm_names()
            .into_iter()
            .filter(|n| !running.contains(n))
            .collect()
    }

    /// The URI watched.
    pub fn uri(&self) -> &str {
        &self.frame.uri
    }

    /// Reacts to `happening` of `domain`, now.
    pub fn happened(&mut self, domain: &str, happening: Happening) -> Decision {
        self.happened_at(domain, happening, SystemTime::now())
    }

    /// Reacts to `happening` of `domain`, which libvirt told `at`.
    pub fn happened_at(&mut self, domain: &str, happening: Happening, at: SystemTime) -> Decision {
        let since = Instant::now();
        let outcome = match happening {
            Happening::Defined | Happening::Changed => self.defined(domain),
            Happening::Started => self.started(domain),
            Happening::Stopped => {
                self.admissions.stopped(domain, at);
                self.stopped(domain)
            }
            Happening::Undefined => Ok(Outcome::Gone),
        };
        decide::decision(domain, happening.word(), failed(outcome), since)
    }

    /// At the watcher's start (and after a reconnect): every running domain
    /// checked as a start (conflicts repaired, or with `--dry-run`
    /// reported), then every shut-off domain with a request planned as a
    /// define (its config pinned where the plan around what runs puts it).
    pub fn reconcile(&mut self) -> Vec<Decision> {
        let since = Instant::now();
        let snap = match self.snapshot() {
            Ok(snap) => snap,
            Err(e) => {
                let outcome = Outcome::Failed(crate::error::one_line(&e));
                return vec![decide::decision(
                    &self.frame.uri.clone(),
                    "reconciled",
                    outcome,
                    since,
                )];
            }
        };
        let mut out = Vec::new();
        let mut order: Vec<(bool, String)> = snap
            .tenants
            .iter()
            .filter(|t| t.kind == crate::tenant::TenantKind::Vm)
            .map(|t| {
                (
                    t.state != crate::tenant::TenantState::Running,
                    t.name.clone(),
                )
            })
            .collect();
        order.sort();
        for (shut_off, name) in order {
            let since = Instant::now();
            let outcome = if shut_off {
                self.defined(&name)
            } else {
                self.started(&name)
            };
            let outcome = failed(outcome);
            if !matches!(outcome, Outcome::NoRequest) {
                out.push(decide::decision(&name, "reconciled", outcome, since));
            }
        }
        out
    }

    /// The admission hook's question, answered here (a program with no
    /// thread of its own for it: the bench); the service answers through
    /// [`Watcher::admissions`].
    pub fn admit(&self, ask: &admission::Ask) -> (admission::Answer, Option<AfterAdmission>) {
        self.admissions.admit(ask)
    }

    /// Pins the config of a domain whose start was refused so that its
    /// next start goes through.
    pub fn after_admission(&mut self, after: AfterAdmission) -> Decision {
        let since = Instant::now();
        let outcome = self.pin(&after.plan, &after.domain, &[], pin::CONFIG);
        decide::decision(&after.domain, "admission", failed(outcome), since)
    }
}

impl Decision {
    /// The admission hook's answer about `domain`, given after `millis`.
    pub fn admission(domain: &str, answer: &admission::Answer, millis: f64) -> Decision {
        Decision {
            domain: domain.to_owned(),
            event: "admission",
            outcome: Outcome::Admission(answer.clone()),
            millis,
            at: SystemTime::now(),
        }
    }
}

/// A failed decision as an outcome.
fn failed(outcome: Result<Outcome, WatchError>) -> Outcome {
    outcome.unwrap_or_else(|e| Outcome::Failed(crate::error::one_line(&e)))
}

/// The ground of a watcher's decisions: the spec (or none: the domains'
/// requests alone), the topology (`--source`, else the spec's `[host]
/// source`, else through the URI) and the reserved CPUs.
fn frame(settings: &Settings) -> Result<frame::Frame, WatchError> {
    let uri = &settings.uri;
    let spec = match &settings.spec {
        Some(path) => Spec::load(path)?,
        None => Spec::without_file(uri)?,
    };
    let source = settings
        .source
        .clone()
        .or_else(|| spec.source.clone())
        .unwrap_or_else(|| Source::Libvirt(uri.clone()));
    let host = crate::topology::load(&source)?;
    Ok(frame::Frame {
        reserved: spec.reserved_cpus(&host)?,
        uri: uri.clone(),
        spec,
        host,
        dry_run: settings.dry_run,
        refuse_in_dry_run: settings.refuse_in_dry_run,
        time_limit: settings.time_limit,
    })
}

mod line;

#[cfg(test)]
mod repack_proptests;
