//! What the environment sets, read once at the start of the command and
//! handed to the library, which reads no environment itself: libvirt
//! keepalive (`PINPLAN_LIBVIRT_KEEPALIVE`), pinplan's directories
//! (`PINPLAN_STATE_DIR`, `XDG_STATE_HOME`, `HOME`, `XDG_RUNTIME_DIR`), the
//! solver's experiments (`PINPLAN_CBC_PARAMS`) and faults (tests only:
//! `PINPLAN_FAULT_SOLVER`), and which of the library's `tracing` events
//! standard error shows (`RUST_LOG`, `PINPLAN_ILP_TRACE`).

use crate::error::Usage;
use pinplan::libvirt::connection::{self, Keepalive, KEEPALIVE_VAR};
use pinplan::solve::backend::{self, FaultPlan, SolverSettings};
use pinplan::state::{self, StateDirs};
use tracing_subscriber::EnvFilter;

/// Reads the settings from the environment and sets them in the library; a
/// keepalive that is not `INTERVAL,COUNT` is a usage error (checked before
/// any command, so that a typo is not a silent default).
pub fn configure() -> Result<(), Usage> {
    let keepalive = Keepalive::from_setting(std::env::var_os(KEEPALIVE_VAR).as_deref())
        .map_err(|e| Usage::new(e.to_string()))?;
    connection::set_keepalive(keepalive);
    state::configure(StateDirs::from_vars(|name| std::env::var_os(name)));
    backend::configure(SolverSettings {
        cbc_params: SolverSettings::parse_cbc_params(
            &std::env::var("PINPLAN_CBC_PARAMS").unwrap_or_default(),
        ),
        fault: std::env::var("PINPLAN_FAULT_SOLVER")
            .ok()
            .and_then(|text| FaultPlan::parse(&text)),
    });
    Ok(())
}

/// Shows the library's `tracing` events on standard error, as plain lines
/// (no time, level, target or colour: the ILP trace reads as it always
/// has). None by default; `-v` shows pinplan's info events, `-vv` its debug
/// events; `RUST_LOG` replaces that choice; `PINPLAN_ILP_TRACE` (any value)
/// adds the solver's trace whatever the rest says.
pub fn install_trace(verbose: u8) {
    let chosen = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => directives,
        _ => match verbose {
            0 => "off".to_owned(),
            1 => "pinplan=info".to_owned(),
            _ => "pinplan=debug".to_owned(),
        },
    };
    let mut filter = EnvFilter::builder().parse_lossy(chosen);
    if std::env::var_os("PINPLAN_ILP_TRACE").is_some() {
        if let Ok(ilp) = format!("{}=debug", pinplan::solve::ilp::TRACE).parse() {
            filter = filter.add_directive(ilp);
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_level(false)
        .with_target(false)
        .try_init();
}
