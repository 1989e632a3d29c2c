//! Stopping a change of the host part-way, cleanly. An [`Interrupt`] is a
//! token shared between whoever wants the work to stop (the CLI's signal
//! handler, a UI's cancel button) and the work, which checks it between two
//! changes — never inside one: `apply` before each pin call, `isolate` before
//! each value it writes. The first request stops new changes and undoes the
//! ones made (from the journal); a second one stops that undo too, so that a
//! user can always get out (the journal then says how to finish).
//!
//! The library installs no signal handler: a caller that wants Ctrl-C to
//! mean this calls [`Interrupt::request`] from its own.
//!
//! ```
//! use pinplan::interrupt::{Interrupt, Signal};
//! let stop = Interrupt::new();
//! let worker = stop.clone();
//! assert_eq!(worker.first(), None);
//! stop.request(Signal::Int);
//! assert_eq!(worker.first(), Some(Signal::Int));
//! assert!(!worker.again());
//! stop.request(Signal::Term);
//! assert!(worker.again());
//! assert_eq!(worker.last().map(Signal::exit_code), Some(143));
//! ```

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// What asked the work to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `SIGINT` (Ctrl-C).
    Int,
    /// `SIGTERM` (`kill`, systemd stopping a unit).
    Term,
}

impl Signal {
    /// Its number (Linux).
    pub fn number(self) -> i32 {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
        }
    }

    /// `SIGINT`, `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    /// The exit status a shell expects of a process it stopped: 128 + the
    /// signal's number (130, 143).
    pub fn exit_code(self) -> u8 {
        match self {
            Signal::Int => 130,
            Signal::Term => 143,
        }
    }

    /// The signal of a number (`None` for one this module does not handle).
    pub fn from_number(number: i32) -> Option<Signal> {
        match number {
            libc::SIGINT => Some(Signal::Int),
            libc::SIGTERM => Some(Signal::Term),
            _ => None,
        }
    }
}

impl std::fmt::Display for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Default)]
struct Requests {
    count: AtomicU32,
    /// The first request's signal number (0: none yet).
    first: AtomicU32,
    /// The latest request's.
    last: AtomicU32,
}

/// A shared request to stop; cloning shares it. Lock-free: safe to set from
/// a signal-handling thread while the work reads it.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<Requests>);

fn signal_of(stored: u32) -> Option<Signal> {
    i32::try_from(stored).ok().and_then(Signal::from_number)
}

impl Interrupt {
    /// A token nobody has set.
    pub fn new() -> Interrupt {
        Interrupt::default()
    }

    /// Asks the work to stop; returns how many times it has been asked.
    pub fn request(&self, signal: Signal) -> u32 {
        let number = u32::try_from(signal.number()).unwrap_or(0);
        let _ = self
            .0
            .first
            .compare_exchange(0, number, Ordering::SeqCst, Ordering::SeqCst);
        self.0.last.store(number, Ordering::SeqCst);
        self.0.count.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The first request's signal: the work stops making changes and undoes
    /// those it made.
    pub fn first(&self) -> Option<Signal> {
        signal_of(self.0.first.load(Ordering::SeqCst))
    }

    /// The latest request's signal.
    pub fn last(&self) -> Option<Signal> {
        signal_of(self.0.last.load(Ordering::SeqCst))
    }

    /// Whether it was asked twice or more: an undo under way stops too.
    pub fn again(&self) -> bool {
        self.0.count.load(Ordering::SeqCst) >= 2
    }
}

/// Work stopped by an [`Interrupt`] before it changed anything more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted ({signal})")]
pub struct Interrupted {
    /// The request that stopped it.
    pub signal: Signal,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_the_shells() {
        for (signal, number, code, name) in [
            (Signal::Int, 2, 130, "SIGINT"),
            (Signal::Term, 15, 143, "SIGTERM"),
        ] {
            assert_eq!(signal.number(), number);
            assert_eq!(signal.exit_code(), code);
            assert_eq!(signal.to_string(), name);
            assert_eq!(Signal::from_number(number), Some(signal));
        }
        assert_eq!(Signal::from_number(9), None);
    }

    #[test]
    fn the_first_request_is_kept() {
        let stop = Interrupt::new();
        assert_eq!(
            (stop.first(), stop.last(), stop.again()),
            (None, None, false)
        );
        assert_eq!(stop.request(Signal::Term), 1);
        assert_eq!(stop.request(Signal::Int), 2);
        assert_eq!(stop.first(), Some(Signal::Term));
        assert_eq!(stop.last(), Some(Signal::Int));
        assert!(stop.again());
    }
}
