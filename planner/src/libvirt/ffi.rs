//! The few libvirt calls that the `virt` crate does not wrap, made safe:
//! reading back vCPU, emulator and I/O thread pinning
//! (`virDomainGetVcpuPinInfo`, `virDomainGetEmulatorPinInfo`,
//! `virDomainGetIOThreadInfo`), pinning I/O threads (`virDomainPinIOThread`)
//! and counting the host's CPUs (`virNodeGetCPUMap`); registering for
//! domain events and the connection's close
//! (`virConnectDomainEventRegisterAny`, `virConnectRegisterCloseCallback`),
//! with the callbacks libvirt calls. One of the three
//! modules of pinplan with `unsafe` code (with `isolate/sys.rs` and
//! `solve/ilp/child.rs`); every block says why it is sound.
#![allow(unsafe_code)]

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use virt::connect::Connect;
use virt::domain::Domain;
use virt::error::Error;
use virt_sys as sys;

/// Bytes in a libvirt CPU map for `ncpus` host CPUs (one bit per CPU).
pub fn map_len(ncpus: u32) -> usize {
    (ncpus as usize).div_ceil(8).max(1)
}

/// A libvirt CPU map of `set` for a host of `ncpus` CPUs.
pub fn to_cpumap(set: &CpuSet, ncpus: u32) -> Vec<u8> {
    let mut map = vec![0u8; map_len(ncpus)];
    for cpu in set.iter() {
        let i = cpu.0 as usize;
        if let Some(byte) = map.get_mut(i / 8) {
            *byte |= 1 << (i % 8);
        }
    }
    map
}

/// The CPUs set in a libvirt CPU map.
pub fn from_cpumap(map: &[u8]) -> CpuSet {
    let mut set = CpuSet::new();
    for (i, byte) in map.iter().enumerate() {
        for bit in 0..8 {
            if byte & (1 << bit) != 0 {
                // A map is at most a few KiB: the index fits in u32.
                set.insert(CpuId(u32::try_from(i * 8 + bit).unwrap_or(u32::MAX)));
            }
        }
    }
    set
}

fn int(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// How many CPUs the host has (online or not): the size of its CPU maps.
pub fn host_cpu_count(conn: &Connect) -> Result<u32, Error> {
    // SAFETY: conn.as_ptr() is a live connection for the duration of the call;
    // with cpumap and online NULL libvirt only returns the count.
    let n = unsafe {
        sys::virNodeGetCPUMap(conn.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
    };
    u32::try_from(n).map_err(|_| Error::last_error())
}

/// Each vCPU's CPUs (`flags`: `VIR_DOMAIN_AFFECT_LIVE` or `_CONFIG`).
pub fn vcpu_pin_info(
    domain: &Domain,
    vcpus: u32,
    ncpus: u32,
    flags: u32,
) -> Result<Vec<CpuSet>, Error> {
    let len = map_len(ncpus);
    let mut maps = vec![0u8; len * vcpus as usize];
    // SAFETY: `maps` holds `vcpus` maps of `len` bytes each, as the call
    // requires (ncpumaps * maplen); the domain pointer is live.
    let n = unsafe {
        sys::virDomainGetVcpuPinInfo(
            domain.as_ptr(),
            int(vcpus as usize),
            maps.as_mut_ptr(),
            int(len),
            flags as c_uint,
        )
    };
    let n = usize::try_from(n).map_err(|_| Error::last_error())?;
    Ok(maps.chunks(len).take(n).map(from_cpumap).collect())
}

/// The emulator threads' CPUs.
pub fn emulator_pin_info(domain: &Domain, ncpus: u32, flags: u32) -> Result<CpuSet, Error> {
    let len = map_len(ncpus);
    let mut map = vec![0u8; len];
    // SAFETY: `map` has `len` bytes, the maplen passed; the domain is live.
    let n = unsafe {
        sys::virDomainGetEmulatorPinInfo(
            domain.as_ptr(),
            map.as_mut_ptr(),
            int(len),
            flags as c_uint,
        )
    };
    if n < 0 {
        return Err(Error::last_error());
    }
    Ok(from_cpumap(&map))
}

/// Each I/O thread's id and CPUs, by id.
pub fn iothread_info(domain: &Domain, flags: u32) -> Result<Vec<(u32, CpuSet)>, Error> {
    let mut info: *mut sys::virDomainIOThreadInfoPtr = std::ptr::null_mut();
    // SAFETY: libvirt allocates an array of `n` info pointers into `info`;
    // the domain is live.
    let n = unsafe { sys::virDomainGetIOThreadInfo(domain.as_ptr(), &mut info, flags as c_uint) };
    let n = usize::try_from(n).map_err(|_| Error::last_error())?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: i < n, the array's length; each element is a valid
        // virDomainIOThreadInfo whose cpumap has cpumaplen bytes. Each is
        // freed exactly once with virDomainIOThreadInfoFree, as documented.
        unsafe {
            let item = *info.add(i);
            if item.is_null() {
                continue;
            }
            let len = usize::try_from((*item).cpumaplen).unwrap_or(0);
            let map = if (*item).cpumap.is_null() || len == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts((*item).cpumap, len).to_vec()
            };
            out.push(((*item).iothread_id, from_cpumap(&map)));
            sys::virDomainIOThreadInfoFree(item);
        }
    }
    if !info.is_null() {
        // SAFETY: the array itself is malloc'ed by libvirt and freed with free().
        unsafe { libc::free(info.cast()) };
    }
    out.sort_by_key(|(id, _)| *id);
    Ok(out)
}

/// Pins I/O thread `id` to `cpus`.
pub fn pin_iothread(
    domain: &Domain,
    id: u32,
    cpus: &CpuSet,
    ncpus: u32,
    flags: u32,
) -> Result<(), Error> {
    let mut map = to_cpumap(cpus, ncpus);
    // SAFETY: `map` has map.len() bytes, the maplen passed; libvirt only
    // reads it; the domain is live.
    let n = unsafe {
        sys::virDomainPinIOThread(
            domain.as_ptr(),
            id as c_uint,
            map.as_mut_ptr(),
            int(map.len()),
            flags as c_uint,
        )
    };
    if n < 0 {
        return Err(Error::last_error());
    }
    Ok(())
}

// Domain events and the connection's close (`virConnectDomainEventRegisterAny`,
// `virConnectRegisterCloseCallback`): the callbacks libvirt calls, and guards
// that deregister them when dropped. `events.rs` turns what they report into
// typed notices.

/// A domain event or a close as libvirt reported it to a callback, copied out
/// of libvirt's memory before the callback returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawEvent {
    /// `VIR_DOMAIN_EVENT_ID_LIFECYCLE`: libvirt's event and detail numbers.
    Lifecycle {
        /// The domain's name.
        domain: String,
        /// A `virDomainEventType`.
        event: c_int,
        /// The event's detail (`virDomainEvent*DetailType`).
        detail: c_int,
    },
    /// `VIR_DOMAIN_EVENT_ID_DEVICE_ADDED` (`added`) or `_DEVICE_REMOVED`.
    Device {
        /// The domain's name.
        domain: String,
        /// The device's alias.
        alias: String,
        /// Added, or removed.
        added: bool,
    },
    /// `VIR_DOMAIN_EVENT_ID_TUNABLE`: a running domain's tunables changed
    /// (its pins among them); what changed is not kept.
    Tunable {
        /// The domain's name.
        domain: String,
    },
    /// The connection closed: a `virConnectCloseReason`.
    Closed {
        /// libvirt's reason number.
        reason: c_int,
    },
}

/// What the callbacks hand their events to, shared by the registrations of
/// one watcher. It runs on libvirt's event thread (a close may also be
/// reported on a thread that was waiting on the connection), so it must
/// return promptly; a panic in it is caught and logged.
pub type Handler = Arc<dyn Fn(RawEvent) + Send + Sync>;

/// The domain events a [`DomainCallback`] can be registered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DomainEventId {
    /// Defined, undefined, started, stopped, … (`VIR_DOMAIN_EVENT_ID_LIFECYCLE`).
    Lifecycle,
    /// A device attached to a running domain (`VIR_DOMAIN_EVENT_ID_DEVICE_ADDED`).
    DeviceAdded,
    /// A device detached from a running domain (`VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED`).
    DeviceRemoved,
    /// A running domain's pins or other tunables changed (`VIR_DOMAIN_EVENT_ID_TUNABLE`).
    Tunable,
}

thread_local! {
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running one of this module's callbacks (or a
/// handler's free): libvirt may hold locks here that deregistering takes.
pub fn in_callback() -> bool {
    IN_CALLBACK.with(Cell::get)
}

/// Runs a callback's body marked as [`in_callback`], catching a panic so that
/// it never unwinds into libvirt's C frames.
fn callback_body(what: &str, body: impl FnOnce()) {
    let was = IN_CALLBACK.with(|flag| flag.replace(true));
    if std::panic::catch_unwind(AssertUnwindSafe(body)).is_err() {
        tracing::error!("a libvirt {what} callback panicked: its notice is lost");
    }
    IN_CALLBACK.with(|flag| flag.set(was));
}

/// The string at `ptr`, copied (lossily, as the `virt` crate reads names);
/// `None` for NULL.
///
/// # Safety
/// `ptr` is NULL or a NUL-terminated string that stays valid for the call.
unsafe fn copied(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated, valid for the call (the caller's promise).
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// The name of the domain a callback was handed, and the handler its opaque
/// pointer is; `None` if either is NULL.
///
/// # Safety
/// `dom` is NULL or the domain libvirt passed to the running callback;
/// `opaque` is NULL or a `*const Handler` that outlives the call.
unsafe fn target<'a>(dom: sys::virDomainPtr, opaque: *mut c_void) -> Option<(String, &'a Handler)> {
    if dom.is_null() {
        return None;
    }
    // SAFETY: the domain is live for the callback and only borrowed: its name
    // belongs to it and is copied here, never freed.
    let name = unsafe { copied(sys::virDomainGetName(dom)) }?;
    // SAFETY: the caller's promise on `opaque`.
    let handler = unsafe { opaque.cast::<Handler>().cast_const().as_ref() }?;
    Some((name, handler))
}

extern "C" fn on_lifecycle(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    event: c_int,
    detail: c_int,
    opaque: *mut c_void,
) -> c_int {
    callback_body("domain lifecycle event", || {
        // SAFETY: libvirt passes the domain of this event, live for the call,
        // and the opaque given at registration: a Box<Handler> freed only by
        // `free_handler`, which libvirt calls after the last callback.
        if let Some((domain, handler)) = unsafe { target(dom, opaque) } {
            handler(RawEvent::Lifecycle {
                domain,
                event,
                detail,
            });
        }
    });
    0
}

/// The body of both device callbacks.
fn on_device(dom: sys::virDomainPtr, alias: *const c_char, opaque: *mut c_void, added: bool) {
    callback_body("domain device event", || {
        // SAFETY: as in `on_lifecycle`; the alias is libvirt's string for
        // the call, copied here.
        let (Some((domain, handler)), Some(alias)) =
            (unsafe { target(dom, opaque) }, unsafe { copied(alias) })
        else {
            return;
        };
        handler(RawEvent::Device {
            domain,
            alias,
            added,
        });
    });
}

extern "C" fn on_device_added(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    alias: *const c_char,
    opaque: *mut c_void,
) {
    on_device(dom, alias, opaque, true);
}

extern "C" fn on_device_removed(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    alias: *const c_char,
    opaque: *mut c_void,
) {
    on_device(dom, alias, opaque, false);
}

extern "C" fn on_tunable(
    _conn: sys::virConnectPtr,
    dom: sys::virDomainPtr,
    _params: sys::virTypedParameterPtr,
    _nparams: c_int,
    opaque: *mut c_void,
) {
    callback_body("domain tunable event", || {
        // SAFETY: as in `on_lifecycle`; the parameters are not read.
        if let Some((domain, handler)) = unsafe { target(dom, opaque) } {
            handler(RawEvent::Tunable { domain });
        }
    });
}

extern "C" fn on_close(_conn: sys::virConnectPtr, reason: c_int, opaque: *mut c_void) {
    callback_body("connection close", || {
        // SAFETY: the opaque is the Handler boxed in the CloseCallback, which
        // unregisters before freeing it (see its Drop).
        if let Some(handler) = unsafe { opaque.cast::<Handler>().cast_const().as_ref() } {
            handler(RawEvent::Closed { reason });
        }
    });
}

/// libvirt's free callback of a domain event registration's opaque pointer.
extern "C" fn free_handler(opaque: *mut c_void) {
    if opaque.is_null() {
        return;
    }
    // SAFETY: `opaque` is the Box::into_raw of `register_domain_event`, handed
    // to libvirt with this function as its free callback: libvirt calls it
    // once, after the last callback with it has returned.
    let handler = unsafe { Box::from_raw(opaque.cast::<Handler>()) };
    // The last Arc drops the sink with what it owns: a panic there is caught
    // too (libvirt forbids calling it back from here: see `in_callback`).
    callback_body("free", move || drop(handler));
}

type GenericCallback = unsafe extern "C" fn(sys::virConnectPtr, sys::virDomainPtr, *mut c_void);
type LifecycleCallback =
    unsafe extern "C" fn(sys::virConnectPtr, sys::virDomainPtr, c_int, c_int, *mut c_void) -> c_int;
type DeviceCallback =
    unsafe extern "C" fn(sys::virConnectPtr, sys::virDomainPtr, *const c_char, *mut c_void);
type TunableCallback = unsafe extern "C" fn(
    sys::virConnectPtr,
    sys::virDomainPtr,
    sys::virTypedParameterPtr,
    c_int,
    *mut c_void,
);

/// libvirt's id of `id`, and our callback for it in the generic type that
/// `virConnectDomainEventRegisterAny` takes.
fn callback_of(id: DomainEventId) -> (c_uint, GenericCallback) {
    // SAFETY: libvirt calls a callback registered for an event id with that
    // id's own signature (the C macro VIR_DOMAIN_EVENT_CALLBACK casts the
    // same way): the lifecycle one for LIFECYCLE, the device one for
    // DEVICE_ADDED and DEVICE_REMOVED, the tunable one (conn, dom, params,
    // nparams, opaque) for TUNABLE. Function pointers have one size.
    unsafe {
        match id {
            DomainEventId::Lifecycle => (
                sys::VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                std::mem::transmute::<LifecycleCallback, GenericCallback>(on_lifecycle),
            ),
            DomainEventId::DeviceAdded => (
                sys::VIR_DOMAIN_EVENT_ID_DEVICE_ADDED,
                std::mem::transmute::<DeviceCallback, GenericCallback>(on_device_added),
            ),
            DomainEventId::DeviceRemoved => (
                sys::VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
                std::mem::transmute::<DeviceCallback, GenericCallback>(on_device_removed),
            ),
            DomainEventId::Tunable => (
                sys::VIR_DOMAIN_EVENT_ID_TUNABLE,
                std::mem::transmute::<TunableCallback, GenericCallback>(on_tunable),
            ),
        }
    }
}

/// A domain event callback registered on a connection, for every domain;
/// dropping it deregisters it (libvirt then frees its handler once no
/// callback runs with it).
#[derive(Debug)]
pub struct DomainCallback {
    conn: Connect,
    id: c_int,
}

/// Registers `handler` for `id`'s events of every domain on `conn`.
pub fn register_domain_event(
    conn: &Connect,
    id: DomainEventId,
    handler: &Handler,
) -> Result<DomainCallback, Error> {
    let (event_id, callback) = callback_of(id);
    let opaque = Box::into_raw(Box::new(Arc::clone(handler)));
    // SAFETY: the connection is live; `callback` has the signature libvirt
    // calls for `event_id`; `opaque` stays valid until libvirt calls
    // `free_handler` with it, which frees it.
    let rc = unsafe {
        sys::virConnectDomainEventRegisterAny(
            conn.as_ptr(),
            std::ptr::null_mut(),
            int(event_id as usize),
            Some(callback),
            opaque.cast(),
            Some(free_handler),
        )
    };
    if rc < 0 {
        let error = Error::last_error();
        // SAFETY: a failed registration keeps nothing and never calls the free
        // callback: the box is still ours, freed once, here.
        drop(unsafe { Box::from_raw(opaque) });
        return Err(error);
    }
    Ok(DomainCallback {
        conn: conn.clone(),
        id: rc,
    })
}

impl Drop for DomainCallback {
    fn drop(&mut self) {
        // SAFETY: the connection is live (we hold a reference); the id is the
        // one its registration returned, deregistered only here.
        let rc = unsafe { sys::virConnectDomainEventDeregisterAny(self.conn.as_ptr(), self.id) };
        if rc < 0 {
            tracing::warn!(
                "cannot deregister libvirt domain event callback {}: {}",
                self.id,
                Error::last_error()
            );
        }
    }
}

/// The connection's close callback; dropping it unregisters it, then frees
/// its handler. libvirt keeps one close callback per connection, and only
/// on drivers with a connection that can close (the remote one); the test
/// driver keeps none (and would never call a free callback), which is why
/// the handler is ours to free and not libvirt's.
pub struct CloseCallback {
    conn: Connect,
    // Read by libvirt only, through the pointer registered; freed after
    // `drop` has unregistered it.
    _handler: Box<Handler>,
}

/// Registers `handler` to hear that `conn` closed.
pub fn register_close(conn: &Connect, handler: &Handler) -> Result<CloseCallback, Error> {
    let handler = Box::new(Arc::clone(handler));
    let opaque: *const Handler = &*handler;
    // SAFETY: the connection is live; `opaque` points into the box that the
    // returned guard owns and frees only after unregistering; no free
    // callback, so libvirt never frees it.
    let rc = unsafe {
        sys::virConnectRegisterCloseCallback(
            conn.as_ptr(),
            Some(on_close),
            opaque.cast_mut().cast(),
            None,
        )
    };
    if rc < 0 {
        return Err(Error::last_error());
    }
    Ok(CloseCallback {
        conn: conn.clone(),
        _handler: handler,
    })
}

impl Drop for CloseCallback {
    fn drop(&mut self) {
        // SAFETY: the connection is live. libvirt runs the close callback
        // under the lock that unregistering takes, and runs it at most once:
        // when this returns, `on_close` is not running and will not run with
        // our handler, whether it was registered (now cleared), already
        // called (libvirt reset it) or never kept (the test driver).
        let rc =
            unsafe { sys::virConnectUnregisterCloseCallback(self.conn.as_ptr(), Some(on_close)) };
        if rc < 0 {
            tracing::debug!(
                "libvirt close callback not unregistered: {}",
                Error::last_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumaps_round_trip() {
        let set: CpuSet = "0,3,8-9,15".parse().unwrap_or_default();
        let map = to_cpumap(&set, 16);
        assert_eq!(map, vec![0b0000_1001, 0b1000_0011]);
        assert_eq!(from_cpumap(&map), set);
        assert_eq!(map_len(1), 1);
        assert_eq!(map_len(9), 2);
    }
}
