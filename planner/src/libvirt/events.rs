//! libvirt's domain events as typed values: what `pinplan watch` reacts to.
//! [`Events::register`] registers for the lifecycle events of every domain
//! (defined, undefined, started, stopped), its device hot-plugs, and the
//! connection's close, and hands each to a sink as a [`Notice`]; dropping the
//! [`Events`] deregisters them all. The unsafe calls and the callbacks libvirt
//! calls are `ffi.rs`'s; this module owns what a notice means, not what the
//! watcher decides on it (`watch/`), nor the reconnection after a close.
//!
//! libvirt calls the callbacks on its event loop's thread, which
//! `connection::open` starts: the sink runs there, one notice at a time, and
//! should hand the notice on (to a channel) and return. A close may also be
//! reported on a thread that was waiting for an answer on the connection.

use super::ffi::{self, DomainEventId, RawEvent};
use crate::error::{LibvirtAction, LibvirtError};
use std::fmt;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;
use virt::connect::Connect;
use virt_sys as sys;

/// One domain event, as pinplan reacts to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainEvent {
    /// The domain's name.
    pub domain: String,
    /// What happened to it.
    pub kind: EventKind,
    /// When the callback ran (this process's clock).
    pub at: SystemTime,
}

/// What happened to a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// Defined: new (`updated` false, `VIR_DOMAIN_EVENT_DEFINED_ADDED`), or a
    /// definition changed (updated, renamed to this name, restored from a
    /// snapshot).
    Defined {
        /// Whether the domain was defined already (any detail but ADDED).
        updated: bool,
    },
    /// Undefined (removed, or renamed away from this name).
    Undefined,
    /// Started (booted, restored, migrated in, …: any detail).
    Started,
    /// Stopped (any detail), or crashed (`VIR_DOMAIN_EVENT_CRASHED`; a guest
    /// kept after a crash still holds its pins, and a crash that destroys the
    /// guest is reported as crashed, then stopped).
    Stopped,
    /// A device was attached to the running domain.
    DeviceAdded {
        /// The device's alias (`net1`, `hostdev0`, …).
        alias: String,
    },
    /// A device was detached from the running domain.
    DeviceRemoved {
        /// The device's alias.
        alias: String,
    },
    /// A running domain's pins (or other tunables) were changed live: by
    /// `virsh vcpupin`, `pinplan apply`, `repack`, or the watcher itself.
    Tuned,
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventKind::Defined { updated: false } => f.write_str("defined"),
            EventKind::Defined { updated: true } => f.write_str("redefined"),
            EventKind::Undefined => f.write_str("undefined"),
            EventKind::Started => f.write_str("started"),
            EventKind::Stopped => f.write_str("stopped"),
            EventKind::DeviceAdded { alias } => write!(f, "device {alias} attached"),
            EventKind::DeviceRemoved { alias } => write!(f, "device {alias} detached"),
            EventKind::Tuned => f.write_str("tuned"),
        }
    }
}

/// Why libvirt closed a connection (`virConnectCloseReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// A read or write on its socket failed.
    Error,
    /// The other end closed it: libvirtd stopped or restarted.
    Eof,
    /// libvirtd stopped answering keepalive requests.
    Keepalive,
    /// This process closed it.
    Client,
    /// A reason this build does not know, by number.
    Other(i32),
}

impl CloseReason {
    /// The reason libvirt reported, by number.
    fn from_raw(reason: c_int) -> CloseReason {
        match u32::try_from(reason) {
            Ok(sys::VIR_CONNECT_CLOSE_REASON_ERROR) => CloseReason::Error,
            Ok(sys::VIR_CONNECT_CLOSE_REASON_EOF) => CloseReason::Eof,
            Ok(sys::VIR_CONNECT_CLOSE_REASON_KEEPALIVE) => CloseReason::Keepalive,
            Ok(sys::VIR_CONNECT_CLOSE_REASON_CLIENT) => CloseReason::Client,
            _ => CloseReason::Other(reason),
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Error => f.write_str("the connection failed"),
            CloseReason::Eof => f.write_str("libvirtd closed the connection"),
            CloseReason::Keepalive => f.write_str("libvirtd stopped answering keepalives"),
            CloseReason::Client => f.write_str("the connection was closed here"),
            CloseReason::Other(n) => write!(f, "the connection closed (reason {n})"),
        }
    }
}

/// What a sink receives: a domain's event, or the connection's close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A domain's event.
    Domain(DomainEvent),
    /// The connection closed (libvirtd stopped or restarted, keepalive): no
    /// more events come through it; open a new one and register again.
    Closed {
        /// Why.
        reason: CloseReason,
    },
}

/// The kind of a lifecycle event (`virDomainEventType` and its detail), or
/// `None` for one pinplan does not react to (suspended, resumed, shut down
/// by the guest but not yet stopped, power management).
fn lifecycle_kind(event: c_int, detail: c_int) -> Option<EventKind> {
    match u32::try_from(event).ok()? {
        sys::VIR_DOMAIN_EVENT_DEFINED => Some(EventKind::Defined {
            updated: u32::try_from(detail) != Ok(sys::VIR_DOMAIN_EVENT_DEFINED_ADDED),
        }),
        sys::VIR_DOMAIN_EVENT_UNDEFINED => Some(EventKind::Undefined),
        sys::VIR_DOMAIN_EVENT_STARTED => Some(EventKind::Started),
        sys::VIR_DOMAIN_EVENT_STOPPED | sys::VIR_DOMAIN_EVENT_CRASHED => Some(EventKind::Stopped),
        _ => None,
    }
}

/// The notice of what a callback reported at `at`, if pinplan reacts to it.
fn notice_of(raw: RawEvent, at: SystemTime) -> Option<Notice> {
    let (domain, kind) = match raw {
        RawEvent::Lifecycle {
            domain,
            event,
            detail,
        } => (domain, lifecycle_kind(event, detail)?),
        RawEvent::Device {
            domain,
            alias,
            added: true,
        } => (domain, EventKind::DeviceAdded { alias }),
        RawEvent::Device {
            domain,
            alias,
            added: false,
        } => (domain, EventKind::DeviceRemoved { alias }),
        RawEvent::Tunable { domain } => (domain, EventKind::Tuned),
        RawEvent::Closed { reason } => {
            return Some(Notice::Closed {
                reason: CloseReason::from_raw(reason),
            })
        }
    };
    Some(Notice::Domain(DomainEvent { domain, kind, at }))
}

/// The callbacks of one [`Events`], deregistered when it is dropped.
struct Registration {
    /// Cleared first on drop: a callback that starts after it no longer
    /// calls the sink.
    live: Arc<AtomicBool>,
    /// Unregistered before the domain callbacks (fields drop in order).
    close: Option<ffi::CloseCallback>,
    domain: Vec<ffi::DomainCallback>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.live.store(false, Ordering::Release);
    }
}

/// A registration for domain events and the connection's close on one
/// connection; dropping it deregisters every callback. libvirt keeps one close
/// callback per connection: register one `Events` per connection.
pub struct Events {
    registration: Option<Registration>,
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let callbacks = self.registration.as_ref().map_or(0, |r| r.domain.len());
        f.debug_struct("Events")
            .field("domain_callbacks", &callbacks)
            .finish_non_exhaustive()
    }
}

impl Events {
    /// Registers for every domain's lifecycle and device events on `conn`
    /// (opened by the caller, e.g. with `connection::open_watched`; `uri`
    /// names it in errors) and for its close; `sink` is called on libvirt's
    /// event thread for each [`Notice`], in libvirt's order.
    ///
    /// The sink must not block (libvirt's events wait for it; a close waits
    /// for it while holding the connection's locks), must not own the
    /// connection, and should only pass the notice on. A panic in it is
    /// caught and logged, and loses that notice. Dropping the `Events` inside
    /// the sink is safe: the callbacks are then deregistered from a thread of
    /// their own once the sink returns.
    pub fn register(
        uri: &str,
        conn: &Connect,
        sink: impl Fn(Notice) + Send + Sync + 'static,
    ) -> Result<Events, LibvirtError> {
        let live = Arc::new(AtomicBool::new(true));
        let handler: ffi::Handler = {
            let live = Arc::clone(&live);
            Arc::new(move |raw| {
                let at = SystemTime::now();
                if !live.load(Ordering::Acquire) {
                    return;
                }
                if let Some(notice) = notice_of(raw, at) {
                    sink(notice);
                }
            })
        };
        let error =
            |e: virt::error::Error| LibvirtError::new(uri, LibvirtAction::RegisterEvents, &e);
        // On an error the callbacks registered so far drop with it.
        let mut registration = Registration {
            live,
            close: None,
            domain: Vec::with_capacity(4),
        };
        for id in [
            DomainEventId::Lifecycle,
            DomainEventId::DeviceAdded,
            DomainEventId::DeviceRemoved,
            DomainEventId::Tunable,
        ] {
            let callback = ffi::register_domain_event(conn, id, &handler).map_err(error)?;
            registration.domain.push(callback);
        }
        registration.close = Some(ffi::register_close(conn, &handler).map_err(error)?);
        Ok(Events {
            registration: Some(registration),
        })
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        let Some(registration) = self.registration.take() else {
            return;
        };
        registration.live.store(false, Ordering::Release);
        if !ffi::in_callback() {
            drop(registration);
            return;
        }
        // Inside a callback libvirt may hold the locks that deregistering
        // takes (a close callback runs under its own): deregister from
        // another thread, which waits for this callback to return.
        let slot = Arc::new(Mutex::new(Some(registration)));
        let theirs = Arc::clone(&slot);
        let spawned = std::thread::Builder::new()
            .name("libvirt-events-drop".to_owned())
            .spawn(move || {
                let registration = theirs.lock().unwrap_or_else(PoisonError::into_inner).take();
                drop(registration);
            });
        if let Err(e) = spawned {
            // Deregistering here could deadlock: leave the callbacks
            // registered (they no longer call the sink) until the process ends.
            let registration = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
            std::mem::forget(registration);
            tracing::warn!(
                "libvirt event callbacks left registered: no thread to deregister them: {e}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libvirt::connection::open_watched;
    use std::sync::atomic::AtomicUsize;
    use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
    use std::time::{Duration, Instant};

    /// Every `test:///default` connection of this process shares one driver,
    /// so each test names its domains apart and reads only their notices.
    const URI: &str = "test:///default";
    const WAIT: Duration = Duration::from_secs(5);

    /// One registration kept for the whole test process, so that the tests'
    /// registrations and drops never bring the shared driver's count of
    /// callbacks to zero and back: when they do, libvirt 9.0 now and then
    /// loses the next event (its event timer is removed and re-added; seen
    /// about once in a few hundred runs of these tests in parallel, with
    /// libvirt's event thread idle in poll and the event never dispatched).
    fn open() -> Connect {
        static ANCHOR: std::sync::OnceLock<Option<Events>> = std::sync::OnceLock::new();
        ANCHOR.get_or_init(|| {
            let conn = open_watched(URI).ok()?;
            Events::register(URI, &conn, |_| {}).ok()
        });
        open_watched(URI).expect("the test driver opens")
    }

    fn unique(what: &str) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        format!("pinplan-events-{what}-{}-{n}", std::process::id())
    }

    /// A test driver domain; `uuid` keeps the one of an earlier definition
    /// (a redefinition must, or it is another domain of the same name).
    fn xml(name: &str, vcpus: u32, uuid: Option<&str>) -> String {
        let uuid = uuid
            .map(|u| format!("<uuid>{u}</uuid>"))
            .unwrap_or_default();
        format!(
            "<domain type='test'><name>{name}</name>{uuid}<memory unit='MiB'>64</memory>\
             <vcpu>{vcpus}</vcpu><os><type arch='x86_64'>hvm</type></os></domain>"
        )
    }

    fn watch(conn: &Connect) -> (Events, Receiver<Notice>) {
        let (tx, rx) = mpsc::channel();
        let events = Events::register(URI, conn, move |notice| {
            let _ = tx.send(notice);
        })
        .expect("registers on the test driver");
        (events, rx)
    }

    /// The next notice about `domain` within [`WAIT`] (other domains'
    /// skipped), or why there was none.
    fn next_for(rx: &Receiver<Notice>, domain: &str) -> Result<DomainEvent, RecvTimeoutError> {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left)? {
                Notice::Domain(event) if event.domain == domain => return Ok(event),
                _ => {}
            }
        }
    }

    fn kind_for(rx: &Receiver<Notice>, domain: &str) -> EventKind {
        next_for(rx, domain).expect("a notice within 5 s").kind
    }

    #[test]
    fn lifecycle_details_map_to_kinds() {
        use EventKind::*;
        let cases = [
            (
                sys::VIR_DOMAIN_EVENT_DEFINED,
                sys::VIR_DOMAIN_EVENT_DEFINED_ADDED,
                Some(Defined { updated: false }),
            ),
            (
                sys::VIR_DOMAIN_EVENT_DEFINED,
                sys::VIR_DOMAIN_EVENT_DEFINED_UPDATED,
                Some(Defined { updated: true }),
            ),
            (
                sys::VIR_DOMAIN_EVENT_DEFINED,
                sys::VIR_DOMAIN_EVENT_DEFINED_RENAMED,
                Some(Defined { updated: true }),
            ),
            (
                sys::VIR_DOMAIN_EVENT_UNDEFINED,
                sys::VIR_DOMAIN_EVENT_UNDEFINED_RENAMED,
                Some(Undefined),
            ),
            (
                sys::VIR_DOMAIN_EVENT_STARTED,
                sys::VIR_DOMAIN_EVENT_STARTED_RESTORED,
                Some(Started),
            ),
            (
                sys::VIR_DOMAIN_EVENT_STOPPED,
                sys::VIR_DOMAIN_EVENT_STOPPED_DESTROYED,
                Some(Stopped),
            ),
            (
                sys::VIR_DOMAIN_EVENT_CRASHED,
                sys::VIR_DOMAIN_EVENT_CRASHED_PANICKED,
                Some(Stopped),
            ),
            (sys::VIR_DOMAIN_EVENT_SUSPENDED, 0, None),
            (sys::VIR_DOMAIN_EVENT_RESUMED, 0, None),
            (sys::VIR_DOMAIN_EVENT_SHUTDOWN, 0, None),
            (sys::VIR_DOMAIN_EVENT_PMSUSPENDED, 0, None),
            (99, 0, None),
        ];
        for (event, detail, expected) in cases {
            let kind = lifecycle_kind(event as c_int, detail as c_int);
            assert_eq!(kind, expected, "event {event} detail {detail}");
        }
        assert_eq!(lifecycle_kind(-1, 0), None);
        assert_eq!(CloseReason::from_raw(1), CloseReason::Eof);
        assert_eq!(CloseReason::from_raw(2), CloseReason::Keepalive);
        assert_eq!(CloseReason::from_raw(-4), CloseReason::Other(-4));
    }

    /// Defined, started, stopped, redefined, undefined through a second
    /// connection, heard in order, each at the time its callback ran.
    #[test]
    fn a_domains_life_is_heard_in_order() {
        let watched = open();
        let (events, rx) = watch(&watched);
        let conn = open();
        let name = unique("life");
        let before = SystemTime::now();
        let dom = conn
            .define_domain_xml(&xml(&name, 1, None))
            .expect("defines");
        let defined = next_for(&rx, &name).expect("a notice within 5 s");
        assert_eq!(defined.kind, EventKind::Defined { updated: false });
        assert!(before <= defined.at && defined.at <= SystemTime::now());
        dom.create().expect("starts");
        assert_eq!(kind_for(&rx, &name), EventKind::Started);
        dom.destroy().expect("stops");
        assert_eq!(kind_for(&rx, &name), EventKind::Stopped);
        let uuid = dom.uuid_string().expect("has a UUID");
        let dom = conn
            .define_domain_xml(&xml(&name, 2, Some(&uuid)))
            .expect("redefines");
        assert_eq!(kind_for(&rx, &name), EventKind::Defined { updated: true });
        dom.undefine().expect("undefines");
        assert_eq!(kind_for(&rx, &name), EventKind::Undefined);
        drop(events);
    }

    /// Once the `Events` is dropped no notice comes, and the sink is freed
    /// (the channel disconnects): libvirt freed every callback's handler.
    #[test]
    fn nothing_is_heard_after_drop() {
        let conn = open();
        let (events, rx) = watch(&conn);
        let name = unique("drop");
        let dom = conn
            .define_domain_xml(&xml(&name, 1, None))
            .expect("defines");
        assert_eq!(kind_for(&rx, &name), EventKind::Defined { updated: false });
        drop(events);
        dom.create().expect("starts");
        dom.destroy().expect("stops");
        dom.undefine().expect("undefines");
        assert_eq!(next_for(&rx, &name), Err(RecvTimeoutError::Disconnected));
    }

    /// Registering and dropping many times frees each sink exactly once (not
    /// twice: the count stays at 200) and leaves the event thread working.
    #[test]
    fn register_and_drop_200_times() {
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let conn = open();
        let freed = Arc::new(AtomicUsize::new(0));
        for _ in 0..200 {
            let counted = Counted(Arc::clone(&freed));
            let events = Events::register(URI, &conn, move |_| {
                let _ = &counted;
            })
            .expect("registers");
            drop(events);
        }
        // libvirt frees a handler at once, or once the dispatch under way
        // (another test's notice) has returned.
        let deadline = Instant::now() + WAIT;
        while freed.load(Ordering::SeqCst) < 200 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(freed.load(Ordering::SeqCst), 200);
        let (_events, rx) = watch(&conn);
        let name = unique("after-200");
        let dom = conn
            .define_domain_xml(&xml(&name, 1, None))
            .expect("defines");
        assert_eq!(kind_for(&rx, &name), EventKind::Defined { updated: false });
        dom.undefine().expect("undefines");
    }

    /// A sink that panics loses that notice only: the next ones come.
    #[test]
    fn a_panicking_sink_loses_one_notice() {
        let conn = open();
        let name = unique("panic");
        let (tx, rx) = mpsc::channel();
        let target = name.clone();
        let _events = Events::register(URI, &conn, move |notice| {
            if let Notice::Domain(DomainEvent {
                domain,
                kind: EventKind::Defined { .. },
                ..
            }) = &notice
            {
                if domain == &target {
                    // A panic without the panic hook: no message, no
                    // backtrace printed on libvirt's thread.
                    std::panic::resume_unwind(Box::new("on purpose"));
                }
            }
            let _ = tx.send(notice);
        })
        .expect("registers");
        let dom = conn
            .define_domain_xml(&xml(&name, 1, None))
            .expect("defines");
        dom.create().expect("starts");
        assert_eq!(kind_for(&rx, &name), EventKind::Started);
        dom.destroy().expect("stops");
        assert_eq!(kind_for(&rx, &name), EventKind::Stopped);
        dom.undefine().expect("undefines");
    }

    /// A sink may drop its own `Events` (here on its first notice): no
    /// deadlock, the sink is freed, and libvirt's event thread carries on.
    #[test]
    fn a_sink_may_drop_its_own_events() {
        let conn = open();
        let slot: Arc<Mutex<Option<Events>>> = Arc::new(Mutex::new(None));
        let (tx, rx) = mpsc::channel();
        let name = unique("self-drop");
        let (theirs, target) = (Arc::clone(&slot), name.clone());
        let events = Events::register(URI, &conn, move |notice| {
            if matches!(&notice, Notice::Domain(e) if e.domain == target) {
                let own = theirs.lock().unwrap_or_else(PoisonError::into_inner).take();
                drop(own);
            }
            let _ = tx.send(notice);
        })
        .expect("registers");
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(events);
        let dom = conn
            .define_domain_xml(&xml(&name, 1, None))
            .expect("defines");
        assert_eq!(kind_for(&rx, &name), EventKind::Defined { updated: false });
        dom.create().expect("starts");
        assert_eq!(next_for(&rx, &name), Err(RecvTimeoutError::Disconnected));
        let (_events, rx) = watch(&conn);
        dom.destroy().expect("stops");
        // The start may still have been queued when this one registered.
        let mut kind = kind_for(&rx, &name);
        if kind == EventKind::Started {
            kind = kind_for(&rx, &name);
        }
        assert_eq!(kind, EventKind::Stopped);
        dom.undefine().expect("undefines");
    }
}
