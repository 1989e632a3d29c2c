//! What every solve of the process is told besides its model: more CBC
//! parameters, and (tests only) a fault to strike. The program sets them
//! once with [`configure`] (the CLI reads them from `PINPLAN_CBC_PARAMS` and
//! `PINPLAN_FAULT_SOLVER`); the library reads no environment. Each solve
//! takes its [`Settings`] in the parent, before the worker is forked, and
//! sends them with the request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The solver's settings for this process, set once with [`configure`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SolverSettings {
    /// More CBC parameters, `key=value` pairs, for experiments (CLI:
    /// `PINPLAN_CBC_PARAMS`, docs/plan.md).
    pub cbc_params: Vec<(String, String)>,
    /// Solves whose worker is to fail (tests only: nothing without the
    /// `fault-injection` feature).
    pub fault: Option<FaultPlan>,
}

impl SolverSettings {
    /// `key=value,…` as CBC parameters; a pair without `=` is skipped.
    pub fn parse_cbc_params(text: &str) -> Vec<(String, String)> {
        text.split(',')
            .filter_map(|pair| pair.split_once('='))
            .map(|(key, value)| (key.to_owned(), value.to_owned()))
            .collect()
    }
}

/// Which solves of the process strike a fault in their worker (tests only),
/// after the backend's model is built and before it is solved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    /// What the worker does.
    pub fault: Fault,
    /// The solve it strikes, counted from 1 in this process.
    pub nth: u64,
    /// That solve and every later one, not that one alone.
    pub onwards: bool,
}

impl FaultPlan {
    /// `abort:N` (or `kill:N`, `hang:N`): the N-th solve; `abort:N+` the
    /// N-th and every later one. `None` for anything else.
    pub fn parse(text: &str) -> Option<FaultPlan> {
        let (mode, n) = text.split_once(':')?;
        let (n, onwards) = match n.trim().strip_suffix('+') {
            Some(n) => (n, true),
            None => (n.trim(), false),
        };
        let nth = n.parse::<u64>().ok()?;
        let fault = match mode {
            "abort" => Fault::Abort,
            "kill" => Fault::Kill,
            "hang" => Fault::Hang,
            _ => return None,
        };
        Some(FaultPlan {
            fault,
            nth,
            onwards,
        })
    }

    /// Whether the `this`-th solve strikes.
    fn strikes(self, this: u64) -> bool {
        this == self.nth || (self.onwards && this > self.nth)
    }
}

/// A fault injected into the worker of a solve (tests only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `libc::abort()`, as CBC's failed assertions do.
    Abort = 1,
    /// SIGKILL, as the kernel's OOM killer does.
    Kill,
    /// Sleep forever, as a backend that ignores its time limit.
    Hang,
}

impl Fault {
    /// The fault of a wire code (0 is none: not a fault).
    fn from_code(code: u8) -> Option<Fault> {
        [Fault::Abort, Fault::Kill, Fault::Hang]
            .into_iter()
            .find(|f| *f as u8 == code)
    }

    /// Does it, in the worker.
    #[cfg(any(test, feature = "fault-injection"))]
    pub(super) fn strike(self) {
        match self {
            Fault::Abort => std::process::abort(),
            Fault::Kill => super::child::kill_self(),
            Fault::Hang => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
        }
    }
}

static CONFIGURED: OnceLock<SolverSettings> = OnceLock::new();

/// Sets the solver's settings for the rest of the process, once, before the
/// first solve. `false` when they were set already (the first stay).
pub fn configure(settings: SolverSettings) -> bool {
    CONFIGURED.set(settings).is_ok()
}

/// What one solve is sent with: the settings the parent has, for the worker.
#[derive(Debug, Default)]
pub(super) struct Settings {
    /// CBC parameters.
    #[cfg_attr(not(all(feature = "cbc", not(feature = "highs"))), allow(dead_code))]
    pub(super) cbc_params: Vec<(String, String)>,
    /// What to make the worker do (tests only).
    pub(super) fault: Option<Fault>,
}

impl Settings {
    /// The next solve's settings: the configured ones, with the fault when
    /// the plan strikes this solve (every call counts as a solve).
    pub(super) fn next() -> Settings {
        static SOLVES: AtomicU64 = AtomicU64::new(0);
        let this = SOLVES.fetch_add(1, Ordering::SeqCst) + 1;
        let Some(configured) = CONFIGURED.get() else {
            return Settings::default();
        };
        let fault = configured
            .fault
            .filter(|plan| cfg!(feature = "fault-injection") && plan.strikes(this))
            .map(|plan| plan.fault);
        Settings {
            cbc_params: configured.cbc_params.clone(),
            fault,
        }
    }

    /// The fault to strike, as one byte on the wire: 0 for none.
    pub(super) fn fault_code(&self) -> u8 {
        self.fault.map_or(0, |f| f as u8)
    }

    /// The settings a worker solves with: the parameters and the fault sent
    /// (`None` for a fault code it does not know, or any fault in a build
    /// without fault injection).
    pub(super) fn in_worker(cbc_params: Vec<(String, String)>, code: u8) -> Option<Settings> {
        let fault = match code {
            0 => None,
            _ if !cfg!(any(test, feature = "fault-injection")) => return None,
            code => Some(Fault::from_code(code)?),
        };
        Some(Settings { cbc_params, fault })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_plan_names_the_fault_and_the_solves() {
        let plan = |fault, nth, onwards| {
            Some(FaultPlan {
                fault,
                nth,
                onwards,
            })
        };
        for (text, expected) in [
            ("abort:1", plan(Fault::Abort, 1, false)),
            ("kill: 3 ", plan(Fault::Kill, 3, false)),
            ("hang:2+", plan(Fault::Hang, 2, true)),
            ("abort", None),
            ("burn:1", None),
            ("abort:x", None),
        ] {
            assert_eq!(FaultPlan::parse(text), expected, "{text}");
        }
        let onwards = FaultPlan::parse("abort:2+").unwrap();
        assert_eq!(
            (1..=4).map(|n| onwards.strikes(n)).collect::<Vec<_>>(),
            [false, true, true, true]
        );
        let once = FaultPlan::parse("abort:2").unwrap();
        assert!(!once.strikes(3));
    }

    #[test]
    fn cbc_params_are_pairs() {
        assert_eq!(
            SolverSettings::parse_cbc_params("cuts=off,bad,a=b=c"),
            vec![
                ("cuts".to_owned(), "off".to_owned()),
                ("a".to_owned(), "b=c".to_owned())
            ]
        );
        assert!(SolverSettings::parse_cbc_params("").is_empty());
    }
}
