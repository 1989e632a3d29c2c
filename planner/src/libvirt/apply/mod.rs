//! Applying a plan to libvirt domains: preconditions for every VM before
//! anything changes, a journal of what was there, the pin calls
//! (`virDomainPinVcpuFlags`, `virDomainPinEmulator`, `virDomainPinIOThread`,
//! live and/or config), a read-back after each VM, and all-or-nothing
//! rollback from the journal. Writing the journal file and printing are the
//! caller's business; [`Session::apply`] takes a hook called before each pin
//! call, which is where tests inject faults, and an [`Interrupt`] checked
//! before each pin call: a request stops the apply and restores what was
//! changed, a second one stops that restore too. The journal is
//! [`journal`]'s, the preconditions `check`'s, the errors [`error`]'s.

mod check;
pub mod error;
pub mod host;
pub mod journal;
pub mod lock;
mod order;
pub mod outcome;
mod rollback;

pub use error::{check_journal_is_new, retry, ApplyError, Problem};
pub use journal::{Journal, JournalError, JournalStatus, JournalVm, Pins, Unfinished};

use super::ffi;
use crate::error::{LibvirtAction, LibvirtCause, LibvirtError};
use crate::interrupt::{Interrupt, Signal};
use crate::plan::IothreadPin;
use std::time::{Duration, Instant};
use virt::connect::Connect;
use virt::domain::Domain;

use virt_sys::{
    VIR_DOMAIN_AFFECT_CONFIG as AFFECT_CONFIG, VIR_DOMAIN_AFFECT_LIVE as AFFECT_LIVE,
    VIR_DOMAIN_VCPU_CONFIG as VCPU_CONFIG, VIR_DOMAIN_VCPU_LIVE as VCPU_LIVE,
    VIR_DOMAIN_XML_INACTIVE as XML_INACTIVE, VIR_DOMAIN_XML_SECURE as XML_SECURE,
};

/// Which definitions to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// The running domain (ignored for domains that are not running).
    pub live: bool,
    /// The persistent definition.
    pub config: bool,
}

/// A VM that passed the preconditions.
pub struct Target {
    /// Its name.
    pub name: String,
    domain: Domain,
    running: bool,
    planned: Pins,
    /// The plan's VM when it places the VM's memory: then the config's
    /// `<numatune>`, `<memoryBacking>` and `<memory>` are patched too.
    memory: Option<crate::plan::VmPlan>,
}

impl Target {
    /// Whether the domain was running when checked.
    pub fn running(&self) -> bool {
        self.running
    }
}

/// What a rollback did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// VMs restored and verified.
    pub restored: Vec<String>,
    /// What could not be restored, per VM.
    pub errors: Vec<String>,
    /// What a user should know about VMs restored (`NAME: …`).
    pub notes: Vec<String>,
    /// A second interrupt request stopped the restore (the VMs not restored
    /// are in `errors`).
    pub interrupted: Option<Signal>,
}

/// What happened to one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The VM.
    pub vm: String,
    /// Whether the live domain was pinned (it was running and live was asked).
    pub live: bool,
    /// Whether the config was pinned.
    pub config: bool,
    /// Pin calls made.
    pub calls: u32,
    /// Wall time for its pin calls and read-back.
    pub elapsed: Duration,
    /// Whether its config got the plan's memory placement (next start).
    pub memory: bool,
}

/// How a failed apply ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The VM being pinned when it failed.
    pub vm: String,
    /// What failed.
    pub error: StepError,
    /// VMs restored from the journal (and verified).
    pub restored: Vec<String>,
    /// What the restore could not do, if anything (then the host is not as it was).
    pub restore_errors: Vec<String>,
    /// Whether any pin call had succeeded: when none had, nothing changed
    /// and nothing is restored.
    pub changed: bool,
    /// A second interrupt request stopped the restore: the host is partly
    /// restored (what is not is in `restore_errors`).
    pub restore_interrupted: Option<Signal>,
}

impl Failure {
    /// The signal that stopped the apply, when an interrupt did.
    pub fn interrupted(&self) -> Option<Signal> {
        match self.error {
            StepError::Interrupted { signal, .. } => Some(signal),
            _ => None,
        }
    }

    /// The journal's status after this failure: rolled back when every VM
    /// changed was restored (or none was changed), else still applying —
    /// unfinished, for the next apply to find.
    pub fn journal_status(&self) -> JournalStatus {
        if self.restore_errors.is_empty() && self.restore_interrupted.is_none() {
            JournalStatus::RolledBack
        } else {
            JournalStatus::Applying
        }
    }
}

/// What `apply` says about the VMs a plan leaves unplaced: they are not
/// touched and keep whatever pins they have. `None` when the plan places all.
pub fn unplaced_note(plan: &crate::plan::Plan) -> Option<String> {
    (!plan.unplaced.is_empty()).then(|| {
        format!(
            "not placed by the plan, so not touched (they keep their current pins): {}\n",
            plan.unplaced.join(", ")
        )
    })
}

/// The libvirt URI `plan` was made through (`plan --connect URI` records it
/// as `host.source`), or `None` when it was made from a file, `host` or a
/// synthetic description. A URI is `SCHEME://…` with a scheme of letters,
/// digits and `+` (`qemu:///system`, `qemu+ssh://root@b1/system`).
pub fn recorded_uri(plan: &crate::plan::Plan) -> Option<&str> {
    uri_of_source(&plan.host.source)
}

/// `source` when it is a libvirt URI rather than a path or description.
fn uri_of_source(source: &str) -> Option<&str> {
    let (scheme, _) = source.split_once("://")?;
    let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+');
    is_scheme.then_some(source)
}

/// What `apply` prints after a successful apply: one line per VM, then the count.
pub fn summary(done: &[Applied]) -> String {
    let mut out = String::new();
    for a in done {
        let what = match (a.live, a.config) {
            (true, true) => "live + config",
            (true, false) => "live",
            (false, true) => "config (not running)",
            (false, false) => "nothing",
        };
        out.push_str(&format!(
            "  {:<16} {what:<20} {:>3} pin calls, read back and verified in {:.1} ms\n",
            a.vm,
            a.calls,
            a.elapsed.as_secs_f64() * 1000.0
        ));
        if a.memory {
            out.push_str(&format!(
                "  {:<16} memory placement (numatune, huge pages) written to its config: it takes effect at its next start\n",
                a.vm
            ));
        }
    }
    out.push_str(&format!(
        "applied: {} pinned as planned\n",
        crate::text::plural(done.len(), "VM", "VMs")
    ));
    out
}

/// The names of `targets`, comma-separated.
pub fn names(targets: &[Target]) -> String {
    targets
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A libvirt connection that applies plans.
pub struct Session {
    uri: String,
    conn: Connect,
    ncpus: u32,
}

/// `live` or `config`, for messages.
fn scope_name(flags: u32) -> &'static str {
    if flags == AFFECT_LIVE {
        "live"
    } else {
        "config"
    }
}

fn lv(e: &virt::error::Error) -> String {
    e.message().to_owned()
}

/// Why the hook called before each pin call refused it: fault injection's
/// message (the CLI builds the hook; without the `fault-injection` feature
/// it refuses nothing).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HookRefusal(pub String);

/// One step of pinning or restoring a VM that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// A pin call that libvirt refused.
    #[error("pinning {what} ({scope}): {cause}")]
    Pin {
        /// `vCPU 3`, `the emulator`, `I/O thread 1`.
        what: String,
        /// `live` or `config`.
        scope: &'static str,
        /// libvirt's answer.
        #[source]
        cause: LibvirtCause,
    },
    /// An interrupt request came before this pin call, which was not made.
    #[error("interrupted ({signal}) before pinning {what} ({scope})")]
    Interrupted {
        /// The request's signal.
        signal: Signal,
        /// The thread.
        what: String,
        /// `live` or `config`.
        scope: &'static str,
    },
    /// A pin call the fault-injection hook refused (tests only).
    #[error("pinning {what} ({scope}): {message}")]
    Injected {
        /// The thread.
        what: String,
        /// `live` or `config`.
        scope: &'static str,
        /// The hook's refusal.
        message: HookRefusal,
    },
    /// Reading the pinning back failed.
    #[error("reading back its {scope} pinning: {cause}")]
    ReadBack {
        /// `live` or `config`.
        scope: &'static str,
        /// libvirt's answer.
        #[source]
        cause: LibvirtCause,
    },
    /// The pinning read back is not what was set.
    #[error("read-back ({scope}) differs from {goal}: {difference}")]
    Differs {
        /// `live` or `config`.
        scope: &'static str,
        /// `the plan` or `the journal`.
        goal: &'static str,
        /// The first difference.
        difference: String,
    },
    /// Restoring: the journalled domain is gone.
    #[error("not found: {0}")]
    Gone(#[source] LibvirtCause),
    /// Restoring: libvirt refused a call (its UUID, redefining its config).
    #[error("{what}: {cause}")]
    Libvirt {
        /// What was being done.
        what: &'static str,
        /// libvirt's answer.
        #[source]
        cause: LibvirtCause,
    },
    /// The plan's memory placement could not be patched into its config.
    #[error("patching its config with the plan's memory: {0}")]
    Patch(String),
    /// Restoring: another domain has the name now.
    #[error("its UUID is now {now}, the journal's {journal}: another domain of the same name, not restored (`--rollback JOURNAL --redefine` puts the journal's definition on it, keeping its UUID)")]
    OtherDomain {
        /// Its UUID now.
        now: String,
        /// The journal's.
        journal: String,
    },
}

impl Session {
    /// The URI it is connected to.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Opens a read-write connection.
    pub fn open(uri: &str) -> Result<Session, LibvirtError> {
        let conn = super::connection::open(uri, false)?;
        let ncpus = ffi::host_cpu_count(&conn)
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::CountCpus, &e))?;
        Ok(Session {
            uri: uri.to_owned(),
            conn,
            ncpus,
        })
    }

    fn pins(&self, domain: &Domain, vcpus: u32, flags: u32) -> Result<Pins, virt::error::Error> {
        let vcpu_maps = ffi::vcpu_pin_info(domain, vcpus, self.ncpus, flags)?;
        let emulator = ffi::emulator_pin_info(domain, self.ncpus, flags)?;
        let iothreads = ffi::iothread_info(domain, flags)?
            .into_iter()
            .map(|(iothread, cpus)| IothreadPin { iothread, cpus })
            .collect();
        Ok(Pins {
            vcpus: vcpu_maps,
            emulator,
            iothreads,
        })
    }

    /// What the targets have now: the journal to write before any change.
    pub fn capture(&self, targets: &[Target]) -> Result<Journal, LibvirtError> {
        let mut vms = Vec::new();
        for t in targets {
            let n = u32::try_from(t.planned.vcpus.len()).unwrap_or(u32::MAX);
            let what = |e: &virt::error::Error| {
                LibvirtError::new(&self.uri, LibvirtAction::ReadPins(t.name.clone()), e)
            };
            let live = if t.running {
                Some(self.pins(&t.domain, n, AFFECT_LIVE).map_err(|e| what(&e))?)
            } else {
                None
            };
            vms.push(JournalVm {
                name: t.name.clone(),
                uuid: t.domain.uuid_string().map_err(|e| what(&e))?,
                live,
                config: self
                    .pins(&t.domain, n, AFFECT_CONFIG)
                    .map_err(|e| what(&e))?,
                config_xml: t
                    .domain
                    .xml_desc(XML_INACTIVE | XML_SECURE)
                    .map_err(|e| what(&e))?,
            });
        }
        Ok(Journal {
            uri: self.uri.clone(),
            status: JournalStatus::Applying,
            started: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs()),
            vms,
        })
    }

    /// Whether every target already has its planned pins in `scope`.
    pub fn in_effect(&self, targets: &[Target], journal: &Journal, scope: Scope) -> bool {
        targets.iter().zip(&journal.vms).all(|(t, j)| {
            let live_ok = !(scope.live && t.running)
                || j.live.as_ref().is_some_and(|p| {
                    p.restricted_to(&t.planned)
                        .describe_difference(&t.planned)
                        .is_none()
                });
            let config_ok = !scope.config
                || j.config
                    .restricted_to(&t.planned)
                    .describe_difference(&t.planned)
                    .is_none();
            // The memory placement is in effect when patching the config
            // changes nothing.
            let memory_ok = !scope.config
                || t.memory.as_ref().is_none_or(|vm| {
                    crate::libvirt::patch::Domain::read(&vm.name, &j.config_xml)
                        .and_then(|d| d.patch_memory(vm))
                        .is_ok_and(|patched| patched.text == j.config_xml)
                });
            live_ok && config_ok && memory_ok
        })
    }

    /// Pins every thread of `want` on `domain` in one scope (`flags`), calling
    /// `hook` before each pin call (fault injection may refuse it) and making
    /// none once `stop` gives a signal, then
    /// reads the pinning back and compares it with `want` (its I/O threads
    /// only). `why` names the goal in errors: "the plan", "the journal".
    #[allow(clippy::too_many_arguments)]
    fn set_and_verify(
        &self,
        domain: &Domain,
        want: &Pins,
        flags: u32,
        goal: &'static str,
        calls: &mut u32,
        hook: &mut dyn FnMut(u32) -> Result<(), HookRefusal>,
        stop: &dyn Fn() -> Option<Signal>,
    ) -> Result<(), StepError> {
        let scope = scope_name(flags);
        let mut pin = |what: String, call: &dyn Fn() -> Result<(), virt::error::Error>| {
            *calls += 1;
            if let Err(message) = hook(*calls) {
                return Err(StepError::Injected {
                    what,
                    scope,
                    message,
                });
            }
            // Checked after the hook: a signal the hook sends stops this call.
            if let Some(signal) = stop() {
                return Err(StepError::Interrupted {
                    signal,
                    what,
                    scope,
                });
            }
            call().map_err(|e| StepError::Pin {
                what,
                scope,
                cause: (&e).into(),
            })
        };
        for (vcpu, cpus) in want.vcpus.iter().enumerate() {
            let map = ffi::to_cpumap(cpus, self.ncpus);
            let vcpu = u32::try_from(vcpu).unwrap_or(u32::MAX);
            pin(format!("vCPU {vcpu}"), &|| {
                domain.pin_vcpu_flags(vcpu, &map, flags)
            })?;
        }
        let map = ffi::to_cpumap(&want.emulator, self.ncpus);
        pin("the emulator".to_owned(), &|| {
            domain.pin_emulator(&map, flags)
        })?;
        for io in &want.iothreads {
            pin(format!("I/O thread {}", io.iothread), &|| {
                ffi::pin_iothread(domain, io.iothread, &io.cpus, self.ncpus, flags)
            })?;
        }
        self.verify(domain, want, flags, goal)
    }

    /// Reads a domain's pinning in one scope back from libvirt and compares
    /// it with `want` (its I/O threads only).
    fn verify(
        &self,
        domain: &Domain,
        want: &Pins,
        flags: u32,
        goal: &'static str,
    ) -> Result<(), StepError> {
        let scope = scope_name(flags);
        let n = u32::try_from(want.vcpus.len()).unwrap_or(u32::MAX);
        let got = self
            .pins(domain, n, flags)
            .map_err(|e| StepError::ReadBack {
                scope,
                cause: (&e).into(),
            })?;
        match got.restricted_to(want).describe_difference(want) {
            None => Ok(()),
            Some(difference) => Err(StepError::Differs {
                scope,
                goal,
                difference,
            }),
        }
    }

    /// Applies the plan to every target in order, `hook` before each pin
    /// call. On the first failure, every VM touched so far is restored from
    /// `journal` (live and config) and the restore verified. A request on
    /// `interrupt` is a failure too ([`StepError::Interrupted`]): checked
    /// before each pin call and once more after the last VM (an apply is not
    /// done until it returns), it stops the apply and restores; a second
    /// request stops the restore ([`Failure::restore_interrupted`]).
    pub fn apply(
        &self,
        targets: &[Target],
        journal: &Journal,
        scope: Scope,
        hook: &mut dyn FnMut(u32) -> Result<(), HookRefusal>,
        interrupt: &Interrupt,
    ) -> Result<Vec<Applied>, Box<Failure>> {
        let mut done = Vec::new();
        let mut calls = 0;
        let stop = || interrupt.first();
        let fail = |i: usize, vm: &str, error: StepError, calls: u32| {
            // The failing call itself changed nothing.
            let failed_call = matches!(
                error,
                StepError::Pin { .. } | StepError::Injected { .. } | StepError::Interrupted { .. }
            );
            let changed = calls > u32::from(failed_call);
            let r = if changed {
                let touched = &journal.vms[..=i.min(journal.vms.len().saturating_sub(1))];
                self.restore(touched, false, interrupt)
            } else {
                Restored::default()
            };
            Box::new(Failure {
                vm: vm.to_owned(),
                error,
                restored: r.restored,
                restore_errors: r.errors,
                changed,
                restore_interrupted: r.interrupted,
            })
        };
        for (i, t) in targets.iter().enumerate() {
            let start = Instant::now();
            let before = calls;
            let live = scope.live && t.running;
            let mut result = Ok(());
            if live {
                result = self.set_and_verify(
                    &t.domain,
                    &t.planned,
                    AFFECT_LIVE,
                    "the plan",
                    &mut calls,
                    hook,
                    &stop,
                );
            }
            if result.is_ok() && scope.config {
                result = self.set_and_verify(
                    &t.domain,
                    &t.planned,
                    AFFECT_CONFIG,
                    "the plan",
                    &mut calls,
                    hook,
                    &stop,
                );
            }
            if let (true, true, Some(vm)) = (result.is_ok(), scope.config, &t.memory) {
                result = match stop() {
                    Some(signal) => {
                        calls += 1;
                        Err(StepError::Interrupted {
                            signal,
                            what: "the memory placement".to_owned(),
                            scope: "config",
                        })
                    }
                    None => self.define_memory(&t.domain, vm, &t.planned, &mut calls),
                };
            }
            if let Err(error) = result {
                return Err(fail(i, &t.name, error, calls));
            }
            done.push(Applied {
                vm: t.name.clone(),
                live,
                config: scope.config,
                calls: calls - before,
                elapsed: start.elapsed(),
                memory: scope.config && t.memory.is_some(),
            });
        }
        // Stopped after the last pin call, before the apply returned: it is
        // not done, so it is undone (calls + 1: every call made changed).
        if let (Some(signal), Some(last)) = (stop(), targets.last()) {
            let error = StepError::Interrupted {
                signal,
                what: "nothing more (every pin call was made)".to_owned(),
                scope: if scope.config { "config" } else { "live" },
            };
            return Err(fail(targets.len() - 1, &last.name, error, calls + 1));
        }
        Ok(done)
    }

    /// Redefines the domain's config with the plan's memory placement
    /// (`<numatune>`, `<memoryBacking><hugepages>`, `<memory>`), patched
    /// losslessly into its persistent definition; it takes effect at the next
    /// start (memory does not move under a running guest). The config pins
    /// are read back afterwards (`planned`: the plan's, under the domain's
    /// own I/O thread ids).
    fn define_memory(
        &self,
        domain: &Domain,
        vm: &crate::plan::VmPlan,
        planned: &Pins,
        calls: &mut u32,
    ) -> Result<(), StepError> {
        let failed = |what: &'static str| {
            move |e: virt::error::Error| StepError::Libvirt {
                what,
                cause: (&e).into(),
            }
        };
        let xml = domain
            .xml_desc(XML_INACTIVE | XML_SECURE)
            .map_err(failed("reading its config"))?;
        let patched = crate::libvirt::patch::Domain::read(&vm.name, &xml)
            .and_then(|d| d.patch_memory(vm))
            .map_err(|e| StepError::Patch(e.to_string()))?;
        *calls += 1;
        self.conn
            .define_domain_xml(&patched.text)
            .map_err(failed("redefining its config with the plan's memory"))?;
        self.verify(domain, planned, AFFECT_CONFIG, "the plan")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plan_source_is_a_uri_only_with_a_scheme() {
        for (source, uri) in [
            ("qemu:///system", true),
            ("test:///default", true),
            ("qemu+ssh://root@b1/system", true),
            ("examples/lab/b1-host.xml", false),
            ("host", false),
            ("synthetic:package:1 core:4 pu:1", false),
            ("dir/with ://odd name.xml", false),
            ("://nothing", false),
        ] {
            assert_eq!(super::uri_of_source(source).is_some(), uri, "{source}");
        }
    }
}
