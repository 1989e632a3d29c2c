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

/// The environment variable that sets keepalive: `INTERVAL,COUNT`
/// (seconds, requests), `0,0` for none.
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

impl Keepalive {
    /// [`KEEPALIVE_VAR`]'s value, or [`DEFAULT_KEEPALIVE`] when it is unset;
    /// an error (naming the variable and the form) when it is set but not
    /// `INTERVAL,COUNT`.
    pub fn from_env() -> Result<Keepalive, String> {
        match std::env::var(KEEPALIVE_VAR) {
            Err(std::env::VarError::NotPresent) => Ok(DEFAULT_KEEPALIVE),
            Err(std::env::VarError::NotUnicode(_)) => Err(Self::bad("(not UTF-8)")),
            Ok(value) => Self::parse(&value).ok_or_else(|| Self::bad(&value)),
        }
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

    fn bad(value: &str) -> String {
        format!(
            "{KEEPALIVE_VAR}={value}: expected INTERVAL,COUNT — seconds without traffic before \
             a keepalive request (1 to 3600) and unanswered requests before the connection is \
             closed (1 to 100), e.g. 5,6; or 0,0 for none"
        )
    }
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

/// Opens `uri` (read-only or read-write) with keepalive set from the
/// environment (a driver without keepalive, `test://`, goes without).
pub(crate) fn open(uri: &str, read_only: bool) -> Result<Connect, LibvirtError> {
    event_loop();
    virt::error::clear_error_callback();
    let conn = if read_only {
        Connect::open_read_only(Some(uri))
    } else {
        Connect::open(Some(uri))
    }
    .map_err(|e| LibvirtError::new(uri, LibvirtAction::Connect, &e))?;
    let keepalive = Keepalive::from_env().unwrap_or(DEFAULT_KEEPALIVE);
    if keepalive.interval > 0 {
        // The interval is at most 3600 (parse), so it fits.
        let interval = i32::try_from(keepalive.interval).unwrap_or(i32::MAX);
        let _ = conn.set_keep_alive(interval, keepalive.count);
    }
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::{open, Keepalive};

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
        assert!(Keepalive::bad("x").contains("PINPLAN_LIBVIRT_KEEPALIVE=x: expected"));
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
