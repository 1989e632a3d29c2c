//! The admission hook's question, answered on a thread of its own: the
//! event loop may be waiting on libvirt (which, while a domain waits in its
//! `prepare` hook, holds every call that lists domains) when a second start
//! asks. So the answer comes from a [`Judge`] the loop shares: the host as
//! the last decision read it, the domains admitted since, and the
//! [`Frame`], and the CPUs a live change is moving VMs onto (claimed before
//! the first pin call, so that no start is let onto them meanwhile).
//! Nothing here calls libvirt; the lock is held only while a question is
//! decided or the loop hands over what it read.

use super::admission::{Answer, Ask};
use super::decide::{Moment, Snapshot};
use super::frame::Frame;
use super::WatchError;
use crate::libvirt::domain::tenant_from_domain;
use crate::plan::Plan;
use crate::spec::DomainRequest;
use crate::tenant::{Tenant, TenantState};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// How long a domain admitted but not seen running counts as running: a
/// start takes seconds (minutes with a huge memory to prepare); one that
/// failed before libvirt called the domain started leaves no stop event.
const ADMITTED_FOR: Duration = Duration::from_secs(300);

/// How long a question waits for the watcher's first reading of the host
/// (at its start, libvirtd's autostart domains may ask before it has read
/// anything): well inside the hook's own wait (5 s by default).
const FIRST_READING: Duration = Duration::from_secs(3);

/// What the admission question is answered from.
pub(super) struct Judge {
    /// The ground of every decision.
    pub(super) frame: Arc<Frame>,
    /// The host as the last decision read it.
    pub(super) seen: Option<Snapshot>,
    /// Domains admitted to start, counted as running until libvirt says
    /// they run (or stopped), with when they were admitted.
    pub(super) admitted: BTreeMap<String, (Tenant, SystemTime)>,
    /// Running VMs as a live change in progress is pinning them: held
    /// (beside where `seen` has them) until the next reading of the host.
    pub(super) claims: Vec<Tenant>,
}

/// The watcher's answers to the admission hook, for the thread that
/// serves its socket: a handle on the judge the event loop shares (the
/// host as last read, the domains admitted since, the claims of a change).
#[derive(Clone)]
pub struct Admissions(Arc<(Mutex<Judge>, Condvar)>);

impl Admissions {
    pub(super) fn new(frame: Arc<Frame>) -> Admissions {
        let judge = Judge {
            frame,
            seen: None,
            admitted: BTreeMap::new(),
            claims: Vec::new(),
        };
        Admissions(Arc::new((Mutex::new(judge), Condvar::new())))
    }

    /// The judge, locked. A thread that panicked holding it left no half
    /// change behind (each change is one assignment), so a poisoned lock
    /// is taken as it is.
    pub(super) fn lock(&self) -> MutexGuard<'_, Judge> {
        self.0 .0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `snap` (a reading of the host, `now`) with the domains admitted
    /// since counted as running: until libvirt says one runs (its start
    /// event ends the wait), stopped, or [`ADMITTED_FOR`] has passed.
    pub(super) fn with_admitted(&self, snap: &mut Snapshot, now: SystemTime) {
        let mut judge = self.lock();
        judge.admitted.retain(|name, (_, when)| {
            let runs = snap
                .tenants
                .iter()
                .any(|t| &t.name == name && t.state == TenantState::Running);
            let waited = now.duration_since(*when).unwrap_or_default();
            !runs && waited < ADMITTED_FOR
        });
        for (name, (t, _)) in &judge.admitted {
            snap.tenants.retain(|x| &x.name != name);
            snap.tenants.push(t.clone());
        }
    }

    /// Hands over a reading of the host: what questions are answered from
    /// now on (a question waiting for the first reading goes on). The
    /// claims of a change are over: the reading shows it done.
    pub(super) fn read(&self, seen: Snapshot) {
        let mut judge = self.lock();
        judge.seen = Some(seen);
        judge.claims.clear();
        self.0 .1.notify_all();
    }

    /// Before a live change: the CPUs `plan` gives those of the running VMs
    /// `names`, held for the admission question from now on (beside where
    /// they run) until the next reading of the host — or [`Self::unclaim`]
    /// when the change failed (and was put back) or changed nothing.
    pub(super) fn claim(&self, plan: &Plan, names: &[String]) {
        let mut judge = self.lock();
        let running: Vec<Tenant> = judge
            .seen
            .iter()
            .flat_map(|s| s.tenants.iter())
            .filter(|t| t.state == TenantState::Running && names.contains(&t.name))
            .cloned()
            .collect();
        for mut t in running {
            if let Some(vm) = plan.vms.iter().find(|v| v.name == t.name) {
                t.cpus = vm.vcpus.iter().map(|p| p.cpu).collect();
                t.emulator_cpus = vm.emulator_cpus.clone();
                t.iothreads.clear();
                judge.claims.push(t);
            }
        }
    }

    /// The claims of a change that did not happen.
    pub(super) fn unclaim(&self) {
        self.lock().claims.clear();
    }

    /// `domain` stopped (libvirt's event, `at`): no longer counted as
    /// admitted — unless it was admitted again after the event (stopped and
    /// started again while the event waited in the loop).
    pub(super) fn stopped(&self, domain: &str, at: SystemTime) {
        let mut judge = self.lock();
        if judge
            .admitted
            .get(domain)
            .is_some_and(|(_, when)| *when <= at)
        {
            judge.admitted.remove(domain);
        }
    }

    /// May `ask.domain` start? The answer, and (for a refused start whose
    /// plan fits) the config pins the event loop writes once the hook has
    /// its answer ([`super::Watcher::after_admission`]). Never libvirt; a
    /// question before the watcher's first reading of the host waits for it
    /// (3 s at most).
    pub fn admit(&self, ask: &Ask) -> (Answer, Option<AfterAdmission>) {
        let mut judge = self.lock();
        let until = Instant::now() + FIRST_READING;
        while judge.seen.is_none() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            judge = match self.0 .1.wait_timeout(judge, left) {
                Ok((judge, _)) => judge,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        match judge.decide(ask) {
            Ok(a) => (
                a.answer,
                a.repin.map(|plan| AfterAdmission {
                    domain: ask.domain.clone(),
                    plan,
                }),
            ),
            // A watcher that cannot decide does not stop the start: it says why.
            Err(e) => (
                Answer {
                    allow: true,
                    reason: Some(format!(
                        "pinplan watch could not decide: {}",
                        crate::error::one_line(&e)
                    )),
                    fix: None,
                },
                None,
            ),
        }
    }
}

/// A refused start's config pins, written once the hook has its answer
/// (libvirt holds the domain until then).
pub struct AfterAdmission {
    pub(super) domain: String,
    pub(super) plan: Plan,
}

impl Judge {
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
    fn decide(&mut self, ask: &Ask) -> Result<Admission, WatchError> {
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
        // A live change in progress holds the CPUs it moves VMs onto.
        snap.tenants.extend(self.claims.iter().cloned());
        let origin = format!("{} domain {} (start)", self.frame.uri, ask.domain);
        let mut me = tenant_from_domain(&origin, &ask.xml, &self.frame.host)?;
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
            me.cpus = self.frame.host.usable_cpus();
        }
        let ours = self.frame.ours(&snap, &ask.domain);
        let Some((core, other)) = self.frame.clash(&snap, &me, ours) else {
            // Running from now on, for the next question before its event.
            me.state = TenantState::Running;
            self.admitted
                .insert(ask.domain.clone(), (me.clone(), SystemTime::now()));
            if let Some(seen) = &mut self.seen {
                seen.tenants.retain(|t| t.name != ask.domain);
                seen.tenants.push(me);
            }
            return Ok(Admission::answer(true, None, None));
        };
        let whose = if other == super::frame::HOST {
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
        let plan =
            self.frame
                .plan_with(&snap, &ask.domain, Moment::Define, Some(ask.xml.clone()))?;
        if plan.vms.iter().any(|v| v.name == ask.domain) {
            let fix = format!(
                "pinplan watch pins its config onto free cores now: start {} again",
                ask.domain
            );
            return Ok(self.refusal(what, fix, Some(plan)));
        }
        let (why, fix) = super::pin::unplaced_words(&plan, &ask.domain);
        let movable = self
            .frame
            .spec
            .with_domains(&snap.requests)
            .map(|(s, _)| s.movable_vms())
            .unwrap_or_default();
        let fix = match (movable.is_empty(), fix) {
            (false, _) => format!(
                "make room by moving movable VMs ({}): pinplan repack --connect {} --for {}",
                movable.join(", "),
                self.frame.uri,
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
                self.frame.check_request(r)?;
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
        if self.frame.dry_run && !self.frame.refuse_in_dry_run {
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

/// The watcher's answer to the hook, and the plan whose config pins it
/// writes after answering (libvirt holds the domain while the hook waits).
struct Admission {
    answer: Answer,
    repin: Option<Plan>,
}

impl Admission {
    fn answer(allow: bool, reason: Option<String>, fix: Option<String>) -> Admission {
        Admission {
            answer: Answer { allow, reason, fix },
            repin: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::{Admissions, Snapshot};
    use crate::libvirt::domain::tenant_from_domain;
    use crate::tenant::{Tenant, TenantState};
    use crate::topology::{HostTopology, Source};
    use crate::watch::admission::Ask;
    use crate::watch::frame::Frame;
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    /// A 4-core host (CPU 0 the host's) and a judge of it.
    fn judge() -> (Admissions, HostTopology) {
        let host = crate::topology::load(&Source::Synthetic("numa:1 core:4 pu:1".into())).unwrap();
        let spec = crate::spec::Spec::parse(
            std::path::Path::new("spec.toml"),
            "[host]\nreserved_cpus = \"0\"\n",
        )
        .unwrap();
        let frame = Frame {
            uri: "test:///judge".to_owned(),
            reserved: spec.reserved_cpus(&host).unwrap(),
            spec,
            host: host.clone(),
            dry_run: false,
            refuse_in_dry_run: false,
            time_limit: Duration::from_secs(5),
        };
        (Admissions::new(Arc::new(frame)), host)
    }

    /// A domain whose one vCPU is pinned to `cpu` (no pinplan request).
    fn xml(name: &str, cpu: u32) -> String {
        format!(
            "<domain><name>{name}</name><vcpu>1</vcpu><cputune>\
             <vcpupin vcpu='0' cpuset='{cpu}'/><emulatorpin cpuset='0'/></cputune></domain>"
        )
    }

    fn running(host: &HostTopology, name: &str, cpu: u32) -> Tenant {
        let mut t = tenant_from_domain(name, &xml(name, cpu), host).unwrap();
        t.state = TenantState::Running;
        t
    }

    fn ask(name: &str, cpu: u32) -> Ask {
        Ask {
            version: crate::watch::admission::VERSION,
            domain: name.to_owned(),
            xml: xml(name, cpu),
        }
    }

    fn reading(tenants: Vec<Tenant>) -> Snapshot {
        Snapshot {
            tenants,
            requests: Vec::new(),
            invalid: std::collections::BTreeMap::new(),
        }
    }

    #[test]
    fn a_start_on_a_running_tenants_core_is_refused_and_an_admitted_one_counts() {
        let (judge, host) = judge();
        judge.read(reading(vec![running(&host, "vm1", 1)]));
        let (no, _) = judge.admit(&ask("x", 1));
        assert!(!no.allow);
        let why = no.reason.unwrap();
        assert!(
            why.contains("its pins 0-1 take core 1 of vm1, which runs"),
            "{why}"
        );
        // x on CPU 2 is let through, and counts as running from then on.
        assert!(judge.admit(&ask("x", 2)).0.allow);
        let (no, _) = judge.admit(&ask("y", 2));
        assert!(!no.allow, "y was let onto x's core");
        assert!(no.reason.unwrap().contains("core 2 of x"));
        assert!(judge.admit(&ask("y", 3)).0.allow);
    }

    #[test]
    fn a_live_change_holds_the_cores_it_moves_vms_onto_until_the_host_is_read() {
        let (judge, host) = judge();
        judge.read(reading(vec![running(&host, "vm1", 1)]));
        // vm1 being moved onto CPU 2: claimed before the first pin call.
        judge.lock().claims.push(running(&host, "vm1", 2));
        let (no, _) = judge.admit(&ask("x", 2));
        assert!(!no.allow, "x was let onto the core vm1 is moving to");
        assert!(no.reason.unwrap().contains("core 2 of vm1"));
        // A change that failed (and was put back) holds nothing.
        judge.unclaim();
        assert!(judge.admit(&ask("z", 3)).0.allow);
        // A reading after the change ends its claims: the host as it is.
        judge.lock().claims.push(running(&host, "vm1", 2));
        judge.read(reading(vec![running(&host, "vm1", 1)]));
        assert!(judge.lock().claims.is_empty());
    }

    #[test]
    fn a_stop_told_before_an_admission_does_not_undo_it() {
        let (judge, host) = judge();
        judge.read(reading(vec![running(&host, "vm1", 1)]));
        let before = SystemTime::now() - Duration::from_secs(1);
        assert!(judge.admit(&ask("x", 2)).0.allow);
        judge.stopped("x", before);
        assert!(
            judge.lock().admitted.contains_key("x"),
            "a late stop event undid x's admission"
        );
        judge.stopped("x", SystemTime::now());
        assert!(!judge.lock().admitted.contains_key("x"));
    }

    #[test]
    fn an_admitted_domain_counts_as_running_until_it_runs_or_for_five_minutes() {
        let (judge, host) = judge();
        judge.read(reading(vec![running(&host, "vm1", 1)]));
        assert!(judge.admit(&ask("x", 2)).0.allow);
        // Read again before x runs: x counts, on CPU 2.
        let mut snap = reading(vec![running(&host, "vm1", 1)]);
        judge.with_admitted(&mut snap, SystemTime::now());
        assert!(snap
            .tenants
            .iter()
            .any(|t| t.name == "x" && t.cpus.iter().eq([crate::ids::CpuId(2)])));
        // Read once x runs: its own reading stands, the admission is over.
        let mut snap = reading(vec![running(&host, "vm1", 1), running(&host, "x", 2)]);
        judge.with_admitted(&mut snap, SystemTime::now());
        assert_eq!(snap.tenants.iter().filter(|t| t.name == "x").count(), 1);
        assert!(judge.lock().admitted.is_empty());
        // A start that failed with no stop event: forgotten after 5 minutes.
        assert!(judge.admit(&ask("y", 3)).0.allow);
        let mut snap = reading(vec![running(&host, "vm1", 1)]);
        judge.with_admitted(&mut snap, SystemTime::now() + Duration::from_secs(301));
        assert!(!snap.tenants.iter().any(|t| t.name == "y"));
    }

    #[test]
    fn a_question_before_the_first_reading_waits_for_it() {
        let (judge, host) = judge();
        let reader = judge.clone();
        let tenants = vec![running(&host, "vm1", 1)];
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            reader.read(reading(tenants));
        });
        // Answered from the reading, not "not read the host yet".
        let (no, _) = judge.admit(&ask("x", 1));
        t.join().unwrap();
        assert!(!no.allow, "{:?}", no.reason);
    }
}
