//! What pinplan says on standard error besides errors, and how much:
//! `--quiet` silences warnings and notes, `--verbose` adds detail. Errors
//! ([`crate::error::Failure`]), standard output and the exit status never
//! depend on either.

use std::sync::atomic::{AtomicU8, Ordering};

/// How much to say on standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// `--quiet`: errors only.
    Quiet = 0,
    /// The default: errors, warnings and notes.
    Normal = 1,
    /// `--verbose`: also what was read, from where, and how long it took.
    Verbose = 2,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Normal as u8);

/// Sets the level for the rest of the process (once, from the global flags).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// The level set by [`set_level`].
pub fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        0 => Level::Quiet,
        1 => Level::Normal,
        _ => Level::Verbose,
    }
}

/// `warning: MESSAGE` on standard error, unless `--quiet`.
pub fn warn(message: &str) {
    if level() >= Level::Normal {
        eprintln!("warning: {message}");
    }
}

/// Text that reports progress or a note (`wrote FILE`, `waiting for …`),
/// printed as it is on standard error, unless `--quiet`.
pub fn note(text: &str) {
    if level() >= Level::Normal {
        eprint!("{text}");
        if !text.is_empty() && !text.ends_with('\n') {
            eprintln!();
        }
    }
}

/// `verbose: MESSAGE` on standard error with `--verbose`; `message` is only
/// made then.
pub fn verbose(message: impl FnOnce() -> String) {
    if level() >= Level::Verbose {
        eprintln!("verbose: {}", message());
    }
}
