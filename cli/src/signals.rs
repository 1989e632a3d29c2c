//! SIGINT and SIGTERM for the commands that change a host (`apply`, its
//! `--rollback`, `isolate` and its `--undo`). A thread receives them
//! (signal-hook; no unsafe code here):
//!
//! - before the command starts changing the host ([`changing`]), the first
//!   one ends the process at once: `interrupted (SIGINT): nothing was
//!   changed`, exit 130 (143 for SIGTERM);
//! - after, it asks the library to stop ([`Interrupt::request`]): the
//!   command makes no new change, restores what it changed from its journal,
//!   says so and exits 130/143; a second signal stops that restore too, and
//!   the command says how to finish it. Should the command not have ended
//!   [`GRACE`] after that second signal (a libvirt call that hangs), this
//!   thread says it and ends the process itself.

use pinplan::interrupt::{Interrupt, Signal};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// How long a second signal waits for the command to stop by itself.
pub const GRACE: Duration = Duration::from_secs(3);

const IDLE: u8 = 0;
const CHANGING: u8 = 1;
const EXITING: u8 = 2;

/// Whether the command has started changing the host.
static PHASE: AtomicU8 = AtomicU8::new(IDLE);
/// The command that finishes what an interrupted restore left.
static RESUME: Mutex<String> = Mutex::new(String::new());
static INTERRUPT: OnceLock<Interrupt> = OnceLock::new();

/// Starts receiving SIGINT and SIGTERM (once per process) and gives the
/// token the library checks. Should the handlers not install, the signals
/// keep their default action, as before.
pub fn install() -> Interrupt {
    INTERRUPT
        .get_or_init(|| {
            let interrupt = Interrupt::new();
            match signal_hook::iterator::Signals::new([
                signal_hook::consts::SIGINT,
                signal_hook::consts::SIGTERM,
            ]) {
                Ok(mut signals) => {
                    let shared = interrupt.clone();
                    std::thread::spawn(move || {
                        for number in signals.forever() {
                            if let Some(signal) = Signal::from_number(number) {
                                received(&shared, signal);
                            }
                        }
                    });
                }
                Err(e) => crate::ui::warn(&format!(
                    "cannot handle SIGINT and SIGTERM ({e}): a signal ends pinplan at once"
                )),
            }
            interrupt
        })
        .clone()
}

/// From now on a signal stops the command between two changes instead of
/// ending the process; `resume` is the command that finishes an
/// interrupted restore (`pinplan apply --rollback J --connect URI`). When a
/// signal is ending the process already, this waits for it.
pub fn changing(resume: String) {
    if let Ok(mut r) = RESUME.lock() {
        *r = resume;
    }
    if PHASE
        .compare_exchange(IDLE, CHANGING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
        && PHASE.load(Ordering::SeqCst) == EXITING
    {
        // The signal thread is ending the process: change nothing more.
        loop {
            std::thread::park();
        }
    }
}

fn received(interrupt: &Interrupt, signal: Signal) {
    if PHASE
        .compare_exchange(IDLE, EXITING, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        eprintln!("interrupted ({signal}): nothing was changed");
        std::process::exit(i32::from(signal.exit_code()));
    }
    if interrupt.request(signal) == 2 {
        std::thread::sleep(GRACE);
        let resume = RESUME.lock().map(|r| r.clone()).unwrap_or_default();
        eprintln!(
            "interrupted again: the host is partly restored (a call did not come back in {} s); finish with: {resume}",
            GRACE.as_secs()
        );
        std::process::exit(i32::from(signal.exit_code()));
    }
}
