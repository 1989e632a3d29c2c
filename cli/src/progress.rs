//! The progress line of a long solve: on a terminal, once the solve has run
//! for a second, standard error shows one line — the stage, the best so far,
//! the time against the limit — redrawn every quarter second and erased when
//! the solve ends. Nothing when standard error is not a terminal or with
//! `--quiet`.

use pinplan::solve::{ProgressHook, Snapshot};
use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a solve runs before the line appears.
const QUIET_FOR: Duration = Duration::from_secs(1);
/// How often it is redrawn.
const EVERY: Duration = Duration::from_millis(250);

/// A running progress line; [`Line::finish`] (or dropping it) erases it.
pub struct Line {
    done: Arc<AtomicBool>,
    drawer: Option<std::thread::JoinHandle<()>>,
}

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
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&done);
        let started = Instant::now();
        let drawer = std::thread::Builder::new()
            .name("pinplan-progress".to_owned())
            .spawn(move || {
                let mut drawn = false;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EVERY);
                    if started.elapsed() < QUIET_FOR || stop.load(Ordering::Relaxed) {
                        continue;
                    }
                    let snapshot = latest.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    let text = line(snapshot.as_ref(), started.elapsed(), limit);
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[K{text}");
                    let _ = err.flush();
                    drawn = true;
                }
                if drawn {
                    let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
                }
            })
            .ok();
        (Some(Line { done, drawer }), Some(hook))
    }

    /// Erases the line.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(drawer) = self.drawer.take() {
            let _ = drawer.join();
        }
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        self.stop();
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
