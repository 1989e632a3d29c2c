//! The progress line of a long solve: on a terminal, once the solve has run
//! for a second, standard error shows one line — the stage, the best so far,
//! the time against the limit — redrawn every quarter second (by
//! `indicatif`) and erased when the solve ends. Nothing when standard error
//! is not a terminal or with `--quiet`.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use pinplan::solve::{ProgressHook, Snapshot};
use std::io::IsTerminal as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a solve runs before the line appears.
const QUIET_FOR: Duration = Duration::from_secs(1);
/// How often it is redrawn.
const EVERY: Duration = Duration::from_millis(250);

/// A running progress line, drawn by indicatif's ticker thread from the
/// solver's latest snapshot; [`Line::finish`] (or dropping it) erases it.
pub struct Line(ProgressBar);

impl Line {
    /// Starts the line for a solve of at most `limit`, and the hook to give
    /// the solver; `None` for both when there is nothing to draw on.
    pub fn start(limit: Duration) -> (Option<Line>, Option<ProgressHook>) {
        if crate::ui::level() == crate::ui::Level::Quiet || !std::io::stderr().is_terminal() {
            return (None, None);
        }
        let latest: Arc<Mutex<Option<Snapshot>>> = Arc::default();
        let seen = Arc::clone(&latest);
        let hook = ProgressHook(Arc::new(move |s: &Snapshot| {
            *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(s.clone());
        }));
        let style = ProgressStyle::with_template("{line}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner())
            .with_key(
                "line",
                move |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    if state.elapsed() >= QUIET_FOR {
                        let snapshot = latest.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = w.write_str(&line(snapshot.as_ref(), state.elapsed(), limit));
                    }
                },
            );
        let bar =
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style);
        bar.enable_steady_tick(EVERY);
        (Some(Line(bar)), Some(hook))
    }

    /// Erases the line.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        self.0.finish_and_clear();
    }
}

/// `solving: objectives 1-5 … · best so far 12 of 20 VMs · 3.2 s of 8.0 s`.
fn line(snapshot: Option<&Snapshot>, elapsed: Duration, limit: Duration) -> String {
    let time = format!(
        "{:.1} s of {:.1} s",
        elapsed.as_secs_f64(),
        limit.as_secs_f64()
    );
    match snapshot {
        None => format!("solving · {time}"),
        Some(s) => format!(
            "solving: {} · best so far {} of {} VMs · {time}",
            s.stage, s.vms_placed, s.vms
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_stage_best_and_time() {
        let s = Snapshot {
            stage: "objectives 1-5 (VMs, vCPUs, cores, nodes, NIC) on NUMA nodes",
            vms_placed: 12,
            vms: 20,
        };
        assert_eq!(
            line(
                Some(&s),
                Duration::from_millis(3210),
                Duration::from_secs(8)
            ),
            "solving: objectives 1-5 (VMs, vCPUs, cores, nodes, NIC) on NUMA nodes · best so \
             far 12 of 20 VMs · 3.2 s of 8.0 s"
        );
        assert_eq!(
            line(None, Duration::from_secs(1), Duration::from_secs(10)),
            "solving · 1.0 s of 10.0 s"
        );
    }
}
