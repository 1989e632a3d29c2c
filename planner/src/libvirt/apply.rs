//! Applying a plan to libvirt domains: preconditions for every VM before
//! anything changes, a journal of what was there, the pin calls
//! (`virDomainPinVcpuFlags`, `virDomainPinEmulator`, `virDomainPinIOThread`,
//! live and/or config), a read-back after each VM, and all-or-nothing
//! rollback from the journal. Writing the journal file and printing are the
//! caller's business; [`Session::apply`] takes a hook called before each pin
//! call, which is where tests inject faults.

use super::ffi;
use crate::cpuset::CpuSet;
use crate::error::{Diagnostic, Exit, LibvirtAction, LibvirtError};
use crate::plan::{IothreadPin, Plan, VmPlan};
use crate::tenant::Tenant;
use crate::topology::HostTopology;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use virt::connect::Connect;
use virt::domain::Domain;

use virt_sys::{
    VIR_DOMAIN_AFFECT_CONFIG as AFFECT_CONFIG, VIR_DOMAIN_AFFECT_LIVE as AFFECT_LIVE,
    VIR_DOMAIN_VCPU_CONFIG as VCPU_CONFIG, VIR_DOMAIN_VCPU_LIVE as VCPU_LIVE,
    VIR_DOMAIN_XML_INACTIVE as XML_INACTIVE, VIR_DOMAIN_XML_SECURE as XML_SECURE,
};

/// The version of the journal format.
pub const JOURNAL_VERSION: u32 = 1;

/// A VM's pinning in one scope (live or config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pins {
    /// Each vCPU's CPUs, by vCPU number.
    pub vcpus: Vec<CpuSet>,
    /// The emulator threads' CPUs.
    pub emulator: CpuSet,
    /// Each I/O thread's CPUs.
    pub iothreads: Vec<IothreadPin>,
}

impl Pins {
    fn planned(vm: &VmPlan) -> Pins {
        let mut vcpus = vec![CpuSet::new(); vm.vcpus.len()];
        for pin in &vm.vcpus {
            if let Some(slot) = vcpus.get_mut(pin.vcpu as usize) {
                slot.insert(pin.cpu);
            }
        }
        Pins {
            vcpus,
            emulator: vm.emulator_cpus.clone(),
            iothreads: vm.iothreads.clone(),
        }
    }

    /// The planned I/O threads only (a domain may have more than the plan).
    fn restricted_to(&self, planned: &Pins) -> Pins {
        Pins {
            vcpus: self.vcpus.clone(),
            emulator: self.emulator.clone(),
            iothreads: self
                .iothreads
                .iter()
                .filter(|t| planned.iothreads.iter().any(|p| p.iothread == t.iothread))
                .cloned()
                .collect(),
        }
    }

    fn describe_difference(&self, want: &Pins) -> Option<String> {
        for (i, (got, want)) in self.vcpus.iter().zip(&want.vcpus).enumerate() {
            if got != want {
                return Some(format!("vCPU {i} is on {got}, not {want}"));
            }
        }
        if self.vcpus.len() != want.vcpus.len() {
            return Some(format!(
                "libvirt reports {} vCPUs, not {}",
                self.vcpus.len(),
                want.vcpus.len()
            ));
        }
        if self.emulator != want.emulator {
            return Some(format!(
                "the emulator is on {}, not {}",
                self.emulator, want.emulator
            ));
        }
        for w in &want.iothreads {
            match self.iothreads.iter().find(|g| g.iothread == w.iothread) {
                Some(g) if g.cpus == w.cpus => {}
                Some(g) => {
                    return Some(format!(
                        "I/O thread {} is on {}, not {}",
                        w.iothread, g.cpus, w.cpus
                    ))
                }
                None => return Some(format!("I/O thread {} is missing", w.iothread)),
            }
        }
        None
    }
}

/// What a VM had before `apply` touched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalVm {
    /// Domain name.
    pub name: String,
    /// Domain UUID (a domain of the same name but another UUID is not restored).
    pub uuid: String,
    /// Live pinning, when the domain was running.
    pub live: Option<Pins>,
    /// Config (persistent) pinning.
    pub config: Pins,
    /// The whole persistent definition (`virsh dumpxml --inactive
    /// --security-info`): restoring the config redefines exactly this.
    pub config_xml: String,
}

/// Everything needed to put the VMs back: written before the first change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version ([`JOURNAL_VERSION`]).
    pub pinplan_journal: u32,
    /// The libvirt URI.
    pub uri: String,
    /// The VMs, in the order they are applied.
    pub vms: Vec<JournalVm>,
}

impl Journal {
    /// The JSON form written to the journal file.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Why a journal file cannot be used for a rollback.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file could not be read.
    #[error("cannot read the journal {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a journal.
    #[error("{}:{line}: not a pinplan journal", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// A journal format this pinplan does not read.
    #[error("{}: journal version {version}, this pinplan reads version {JOURNAL_VERSION}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
    /// The journal is of another libvirt host.
    #[error("{} was written for {written_for}, not {uri}", path.display())]
    OtherHost {
        /// The file.
        path: PathBuf,
        /// The URI it was written for.
        written_for: String,
        /// The URI given.
        uri: String,
    },
}

impl Diagnostic for JournalError {
    fn hint(&self) -> Option<String> {
        match self {
            JournalError::Parse { .. } => {
                Some("give the journal file that `pinplan apply` printed".to_owned())
            }
            JournalError::OtherHost { written_for, .. } => {
                Some(format!("use --connect {written_for}"))
            }
            JournalError::Read { .. } | JournalError::Version { .. } => None,
        }
    }
}

impl Journal {
    /// Reads the journal at `path`, checking its version and that it was
    /// written for `uri`.
    pub fn load(path: &Path, uri: &str) -> Result<Journal, JournalError> {
        let text = std::fs::read_to_string(path).map_err(|source| JournalError::Read {
            path: path.to_owned(),
            source,
        })?;
        let journal: Journal =
            serde_json::from_str(&text).map_err(|source| JournalError::Parse {
                path: path.to_owned(),
                line: source.line(),
                source,
            })?;
        if journal.pinplan_journal != JOURNAL_VERSION {
            return Err(JournalError::Version {
                path: path.to_owned(),
                version: journal.pinplan_journal,
            });
        }
        if journal.uri != uri {
            return Err(JournalError::OtherHost {
                path: path.to_owned(),
                written_for: journal.uri,
                uri: uri.to_owned(),
            });
        }
        Ok(journal)
    }
}

/// Why `apply` (or its rollback) did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A precondition failed: nothing was changed.
    #[error("{} cannot be applied to {uri}; nothing was changed:\n{}", plan.display(), problems.iter().map(|p| format!("  {}: {}", p.vm, p.reason)).collect::<Vec<_>>().join("\n"))]
    Refused {
        /// The plan file.
        plan: PathBuf,
        /// The libvirt URI.
        uri: String,
        /// Every precondition that failed.
        problems: Vec<Problem>,
    },
    /// The journal could not be written: nothing was changed.
    #[error("cannot write the journal; nothing was changed")]
    Journal(#[source] crate::error::WriteError),
    /// A pin call or read-back failed; what was touched was restored.
    #[error("{}: {}\n{}", failure.vm, failure.error, restore_state(failure, &retry(journal, uri)))]
    Failed {
        /// What happened.
        failure: Failure,
        /// The journal written before the first change.
        journal: PathBuf,
        /// The libvirt URI.
        uri: String,
    },
    /// A rollback that could not restore every VM.
    #[error("the rollback did not restore everything:\n  {}\nrestored: {}", errors.join("\n  "), restored.join(", "))]
    Rollback {
        /// The journal.
        journal: PathBuf,
        /// The libvirt URI.
        uri: String,
        /// VMs restored.
        restored: Vec<String>,
        /// What could not be restored.
        errors: Vec<String>,
    },
}

/// The command that puts the journalled VMs back.
pub fn retry(journal: &Path, uri: &str) -> String {
    format!(
        "pinplan apply --rollback {} --connect {uri}",
        journal.display()
    )
}

/// How the host stands after a failed apply.
fn restore_state(failure: &Failure, retry: &str) -> String {
    if failure.restore_errors.is_empty() {
        format!(
            "restored {} from the journal and verified: the host is back as it was",
            failure.restored.join(", ")
        )
    } else {
        format!(
            "the restore failed too, so these are NOT as they were:\n  {}\nrestored: {}\nretry with: {retry}",
            failure.restore_errors.join("\n  "),
            if failure.restored.is_empty() {
                "none".to_owned()
            } else {
                failure.restored.join(", ")
            }
        )
    }
}

impl Diagnostic for ApplyError {
    fn hint(&self) -> Option<String> {
        match self {
            ApplyError::Journal(_) => Some("give a writable path with --journal FILE".to_owned()),
            ApplyError::Rollback { journal, uri, .. } => Some(format!(
                "fix the cause and run again: {}",
                retry(journal, uri)
            )),
            ApplyError::Refused { .. } | ApplyError::Failed { .. } => None,
        }
    }

    fn exit(&self) -> Exit {
        match self {
            ApplyError::Refused { .. } | ApplyError::Journal(_) => Exit::Error,
            ApplyError::Failed { .. } | ApplyError::Rollback { .. } => Exit::No,
        }
    }
}

/// Which definitions to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// The running domain (ignored for domains that are not running).
    pub live: bool,
    /// The persistent definition.
    pub config: bool,
}

/// A precondition that failed for one VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The VM.
    pub vm: String,
    /// Why it cannot be applied.
    pub reason: String,
}

/// A VM that passed the preconditions.
pub struct Target {
    /// Its name.
    pub name: String,
    domain: Domain,
    running: bool,
    planned: Pins,
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
}

/// How a failed apply ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The VM being pinned when it failed.
    pub vm: String,
    /// What failed.
    pub error: String,
    /// VMs restored from the journal (and verified).
    pub restored: Vec<String>,
    /// What the restore could not do, if anything (then the host is not as it was).
    pub restore_errors: Vec<String>,
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

impl Session {
    /// Opens a read-write connection.
    pub fn open(uri: &str) -> Result<Session, LibvirtError> {
        virt::error::clear_error_callback();
        let conn = Connect::open(Some(uri))
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::Connect, &e))?;
        let ncpus = ffi::host_cpu_count(&conn)
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::CountCpus, &e))?;
        Ok(Session {
            uri: uri.to_owned(),
            conn,
            ncpus,
        })
    }

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
        let mut targets = Vec::new();
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
        let selected: Vec<&VmPlan> = if names.is_empty() {
            plan.vms.iter().collect()
        } else {
            names
                .iter()
                .filter_map(|n| {
                    let found = plan.vms.iter().find(|v| &v.name == n);
                    if found.is_none() {
                        let known: Vec<&str> = plan.vms.iter().map(|v| v.name.as_str()).collect();
                        problems.push(Problem {
                            vm: n.clone(),
                            reason: format!(
                                "not a placed VM of the plan (it has {})",
                                known.join(", ")
                            ),
                        });
                    }
                    found
                })
                .collect()
        };
        let online = host.online_cpus();
        let others = self.others(plan, host);
        for vm in selected {
            let mut bad = |reason: String| {
                problems.push(Problem {
                    vm: vm.name.clone(),
                    reason,
                })
            };
            let planned = Pins::planned(vm);
            if let Some(i) = planned.vcpus.iter().position(|s| s.len() != 1) {
                bad(format!("the plan gives vCPU {i} no CPU or several"));
                continue;
            }
            let mut wanted = vm.cpus.union(&vm.emulator_cpus);
            for t in &vm.iothreads {
                wanted = wanted.union(&t.cpus);
            }
            for p in &vm.vcpus {
                wanted.insert(p.cpu);
            }
            let missing = wanted.difference(&online);
            if !missing.is_empty() {
                bad(format!(
                    "planned CPUs {missing} do not exist or are offline on {} (online: {online})",
                    self.uri
                ));
            }
            match &others {
                Ok(others) if !force => {
                    for t in others {
                        let overlap = t.cpus.intersection(&vm.cpus);
                        if t.pinned && !overlap.is_empty() {
                            bad(format!(
                                "domain {} (not in the plan) is pinned onto its planned CPUs {overlap}: move it first or pass --force",
                                t.name
                            ));
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => bad(e.clone()),
            }
            let domain = match self.conn.lookup_domain_by_name(&vm.name) {
                Ok(d) => d,
                Err(e) => {
                    bad(format!(
                        "no domain {:?} at {}: {} (virsh list --all shows the names)",
                        vm.name,
                        self.uri,
                        lv(&e)
                    ));
                    continue;
                }
            };
            let running = domain.is_active().unwrap_or(false);
            let want = vm.vcpus.len();
            let mut counts = vec![("config", domain.vcpus_flags(VCPU_CONFIG))];
            if running {
                counts.push(("live", domain.vcpus_flags(VCPU_LIVE)));
            }
            let mut ok = true;
            for (scope, count) in counts {
                match count {
                    Ok(n) if n as usize == want => {}
                    Ok(n) => {
                        ok = false;
                        bad(format!(
                            "it has {n} vCPUs ({scope}), the plan {want}: resize it (virsh setvcpus) or re-plan"
                        ));
                    }
                    Err(e) => {
                        ok = false;
                        bad(format!("cannot read its vCPU count ({scope}): {}", lv(&e)));
                    }
                }
            }
            if !planned.iothreads.is_empty() {
                let have = ffi::iothread_info(&domain, AFFECT_CONFIG).unwrap_or_default();
                for t in &planned.iothreads {
                    if !have.iter().any(|(id, _)| *id == t.iothread) {
                        ok = false;
                        bad(format!(
                            "it has no I/O thread {} (the plan pins it)",
                            t.iothread
                        ));
                    }
                }
            }
            if ok {
                targets.push(Target {
                    name: vm.name.clone(),
                    domain,
                    running,
                    planned,
                });
            }
        }
        if problems.is_empty() {
            Ok(targets)
        } else {
            Err(problems)
        }
    }

    /// Every domain at the URI that the plan does not place, as a tenant.
    fn others(&self, plan: &Plan, host: &HostTopology) -> Result<Vec<Tenant>, String> {
        let mut all = super::tenants::domain_tenants(&self.uri, host).map_err(|e| e.to_string())?;
        all.retain(|t| !plan.vms.iter().any(|v| v.name == t.name));
        Ok(all)
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
            pinplan_journal: JOURNAL_VERSION,
            uri: self.uri.clone(),
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
            live_ok && config_ok
        })
    }

    /// Pins every thread of `want` on `domain` in one scope (`flags`), calling
    /// `hook` before each pin call (fault injection may refuse it), then
    /// reads the pinning back and compares it with `want` (its I/O threads
    /// only). `why` names the goal in errors: "the plan", "the journal".
    fn set_and_verify(
        &self,
        domain: &Domain,
        want: &Pins,
        flags: u32,
        why: &str,
        calls: &mut u32,
        hook: &mut dyn FnMut(u32) -> Result<(), String>,
    ) -> Result<(), String> {
        let scope = scope_name(flags);
        let mut pin = |what: String, call: &dyn Fn() -> Result<(), virt::error::Error>| {
            *calls += 1;
            hook(*calls).map_err(|e| format!("pinning {what} ({scope}): {e}"))?;
            call().map_err(|e| format!("pinning {what} ({scope}): {}", lv(&e)))
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
        self.verify(domain, want, flags, why)
    }

    /// Reads a domain's pinning in one scope back from libvirt and compares
    /// it with `want` (its I/O threads only).
    fn verify(&self, domain: &Domain, want: &Pins, flags: u32, why: &str) -> Result<(), String> {
        let scope = scope_name(flags);
        let n = u32::try_from(want.vcpus.len()).unwrap_or(u32::MAX);
        let got = self
            .pins(domain, n, flags)
            .map_err(|e| format!("reading back its {scope} pinning: {}", lv(&e)))?;
        match got.restricted_to(want).describe_difference(want) {
            None => Ok(()),
            Some(diff) => Err(format!("read-back ({scope}) differs from {why}: {diff}")),
        }
    }

    /// Applies the plan to every target in order, `hook` before each pin
    /// call. On the first failure, every VM touched so far is restored from
    /// `journal` (live and config) and the restore verified.
    pub fn apply(
        &self,
        targets: &[Target],
        journal: &Journal,
        scope: Scope,
        hook: &mut dyn FnMut(u32) -> Result<(), String>,
    ) -> Result<Vec<Applied>, Failure> {
        let mut done = Vec::new();
        let mut calls = 0;
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
                );
            }
            if let Err(error) = result {
                let touched = &journal.vms[..=i.min(journal.vms.len().saturating_sub(1))];
                let (restored, restore_errors) = self.restore(touched);
                return Err(Failure {
                    vm: t.name.clone(),
                    error,
                    restored,
                    restore_errors,
                });
            }
            done.push(Applied {
                vm: t.name.clone(),
                live,
                config: scope.config,
                calls: calls - before,
                elapsed: start.elapsed(),
            });
        }
        Ok(done)
    }

    /// Puts every VM of `journal` back (used by `apply --rollback`).
    pub fn rollback(&self, journal: &Journal) -> (Vec<String>, Vec<String>) {
        self.restore(&journal.vms)
    }

    /// Restores VMs from the journal and verifies them: live pins by pin
    /// calls (when the domain is still running), the config by redefining the
    /// journalled definition. Returns the VMs restored and the errors.
    fn restore(&self, vms: &[JournalVm]) -> (Vec<String>, Vec<String>) {
        let mut restored = Vec::new();
        let mut errors = Vec::new();
        for j in vms {
            match self.restore_one(j) {
                Ok(()) => restored.push(j.name.clone()),
                Err(e) => errors.push(format!("{}: {e}", j.name)),
            }
        }
        (restored, errors)
    }

    fn restore_one(&self, j: &JournalVm) -> Result<(), String> {
        let domain = self
            .conn
            .lookup_domain_by_name(&j.name)
            .map_err(|e| format!("not found: {}", lv(&e)))?;
        let uuid = domain.uuid_string().map_err(|e| lv(&e))?;
        if uuid != j.uuid {
            return Err(format!(
                "its UUID is now {uuid}, the journal's {}: another domain of the same name, not restored",
                j.uuid
            ));
        }
        if let Some(live) = &j.live {
            if domain.is_active().unwrap_or(false) {
                // Restoring is never fault-injected.
                self.set_and_verify(
                    &domain,
                    live,
                    AFFECT_LIVE,
                    "the journal",
                    &mut 0,
                    &mut |_| Ok(()),
                )?;
            }
        }
        self.conn
            .define_domain_xml(&j.config_xml)
            .map_err(|e| format!("redefining its config: {}", lv(&e)))?;
        self.verify(&domain, &j.config, AFFECT_CONFIG, "the journal")?;
        Ok(())
    }
}
