//! Opening a libvirt connection, the one way pinplan does it: libvirt's own
//! printing to stderr off (we report its errors ourselves), and keepalive on,
//! so that a host that stops answering — a network gone, an ssh session
//! stalled — fails the call waiting on it within seconds instead of hanging
//! pinplan until TCP gives up.
//!
//! Keepalive needs libvirt's event loop: the default implementation is
//! registered before the first connection is opened and run on a thread of
//! its own for the life of the process (as `virsh` does). With it, libvirt
//! sends a keepalive request after `interval` seconds without traffic and
//! closes the connection after `count` unanswered ones, failing every call
//! on it ("connection closed due to keepalive timeout"). A program that
//! embeds this library and runs a libvirt event loop of its own should know
//! that the first connection opened here starts libvirt's default one.

use crate::error::{LibvirtAction, LibvirtError};
use std::sync::Once;
use virt::connect::Connect;

/// The environment variable the CLI sets keepalive from: `INTERVAL,COUNT`
/// (seconds, requests), `0,0` for none ([`Keepalive::from_setting`]).
pub const KEEPALIVE_VAR: &str = "PINPLAN_LIBVIRT_KEEPALIVE";

/// Keepalive by default, as `virsh`: a request after 5 s without traffic,
/// the connection closed after 6 unanswered (about 35 s).
pub const DEFAULT_KEEPALIVE: Keepalive = Keepalive {
    interval: 5,
    count: 6,
};

/// libvirt's keepalive settings for a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Seconds without traffic before a keepalive request; 0 for none.
    pub interval: u32,
    /// Unanswered requests before the connection is closed.
    pub count: u32,
}

/// A keepalive setting that is not `INTERVAL,COUNT` in range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{KEEPALIVE_VAR}={value}: expected INTERVAL,COUNT — seconds without traffic before a \
     keepalive request (1 to 3600) and unanswered requests before the connection is closed \
     (1 to 100), e.g. 5,6; or 0,0 for none"
)]
pub struct KeepaliveError {
    /// The value given (`(not UTF-8)` for one that is not text).
    pub value: String,
}

impl Keepalive {
    /// The setting from [`KEEPALIVE_VAR`]'s value as the program read it:
    /// [`DEFAULT_KEEPALIVE`] when it is unset, an error naming the variable
    /// and the form when it is set but not `INTERVAL,COUNT`.
    pub fn from_setting(value: Option<&std::ffi::OsStr>) -> Result<Keepalive, KeepaliveError> {
        let Some(value) = value else {
            return Ok(DEFAULT_KEEPALIVE);
        };
        let text = value.to_str().ok_or_else(|| KeepaliveError {
            value: "(not UTF-8)".to_owned(),
        })?;
        Self::parse(text).ok_or_else(|| KeepaliveError {
            value: text.to_owned(),
        })
    }

    /// `INTERVAL,COUNT`: both whole numbers, at most 3600 s and 100
    /// requests; `0,0` (no keepalive) or a count of at least 1.
    fn parse(value: &str) -> Option<Keepalive> {
        let (interval, count) = value.trim().split_once(',')?;
        let interval: u32 = interval.trim().parse().ok()?;
        let count: u32 = count.trim().parse().ok()?;
        let off = interval == 0 && count == 0;
        (off || ((1..=3600).contains(&interval) && (1..=100).contains(&count)))
            .then_some(Keepalive { interval, count })
    }
}

static KEEPALIVE: std::sync::OnceLock<Keepalive> = std::sync::OnceLock::new();

/// Sets keepalive for every connection this process opens, once, before the
/// first (the CLI reads it from [`KEEPALIVE_VAR`]); `false` when it was set
/// already. Unset, connections get [`DEFAULT_KEEPALIVE`].
pub fn set_keepalive(keepalive: Keepalive) -> bool {
    KEEPALIVE.set(keepalive).is_ok()
}

/// Registers libvirt's default event loop and runs it on its own thread,
/// once per process, before the first connection.
fn event_loop() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        if virt::event::event_register_default_impl().is_err() {
            return;
        }
        // Detached: it waits in poll() for the life of the process.
        let _ = std::thread::Builder::new()
            .name("libvirt-events".to_owned())
            .spawn(|| while virt::event::event_run_default_impl().is_ok() {});
    });
}

/// Opens `uri` (read-only or read-write) with the keepalive of
/// [`set_keepalive`] (a driver without keepalive, `test://`, goes without).
pub(crate) fn open(uri: &str, read_only: bool) -> Result<Connect, LibvirtError> {
    event_loop();
    virt::error::clear_error_callback();
    let conn = if read_only {
        Connect::open_read_only(Some(uri))
    } else {
        Connect::open(Some(uri))
    }
    .map_err(|e| LibvirtError::new(uri, LibvirtAction::Connect, &e))?;
    let keepalive = KEEPALIVE.get().copied().unwrap_or(DEFAULT_KEEPALIVE);
    if keepalive.interval > 0 {
        // The interval is at most 3600 (parse), so it fits.
        let interval = i32::try_from(keepalive.interval).unwrap_or(i32::MAX);
        let _ = conn.set_keep_alive(interval, keepalive.count);
    }
    Ok(conn)
}

/// Opens `uri` read-write for a long-running watcher of its domain events
/// (`libvirt::events::Events`), as every connection is opened: with keepalive, so that a
/// daemon that stops answering closes the connection (and its watcher hears
/// of it) instead of leaving it waiting.
pub fn open_watched(uri: &str) -> Result<Connect, LibvirtError> {
    open(uri, false)
}

#[cfg(test)]
mod tests {
    use super::{open, Keepalive, DEFAULT_KEEPALIVE};

    #[test]
    fn keepalive_is_two_whole_numbers_or_none() {
        let k = |interval, count| Some(Keepalive { interval, count });
        assert_eq!(Keepalive::parse("5,6"), k(5, 6));
        assert_eq!(Keepalive::parse(" 1 , 2 "), k(1, 2));
        assert_eq!(Keepalive::parse("0,0"), k(0, 0));
        assert_eq!(Keepalive::parse("3600,100"), k(3600, 100));
        for bad in [
            "", "5", "5,", ",6", "5,6,7", "-1,2", "5,0", "0,3", "3601,1", "1,101", "a,b", "1.5,2",
        ] {
            assert_eq!(Keepalive::parse(bad), None, "{bad:?}");
        }
        let bad = |value: &str| Keepalive::from_setting(Some(std::ffi::OsStr::new(value)));
        assert!(bad("x")
            .unwrap_err()
            .to_string()
            .contains("PINPLAN_LIBVIRT_KEEPALIVE=x: expected"));
        assert_eq!(bad("5,6").ok(), k(5, 6));
        assert_eq!(Keepalive::from_setting(None), Ok(DEFAULT_KEEPALIVE));
    }

    /// The test driver has no keepalive: the connection opens all the same,
    /// read-only and read-write, and works.
    #[test]
    fn a_driver_without_keepalive_still_opens() {
        for read_only in [true, false] {
            let conn = open("test:///default", read_only).expect("the test driver opens");
            assert!(conn.num_of_domains().unwrap() >= 1);
        }
    }
}
