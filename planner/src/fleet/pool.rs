//! Work over a fleet's hosts, a bounded number at a time: [`each`] runs a
//! closure per host on worker threads and keeps the results in host order;
//! [`within`] gives a call a time limit (a libvirt call cannot be
//! interrupted, so its thread is left to finish on its own).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

/// `f(i)` for every `i` in `0..n`, `concurrency` at a time; `done(k, n)` is
/// told after each. The results are in index order.
pub fn each<T, F>(
    n: usize,
    concurrency: usize,
    f: F,
    done: &(dyn Fn(usize, usize) + Sync),
) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, T)>> = Mutex::new(Vec::with_capacity(n));
    std::thread::scope(|scope| {
        for _ in 0..concurrency.clamp(1, n.max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                let result = f(i);
                results
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((i, result));
                let k = finished.fetch_add(1, Ordering::SeqCst) + 1;
                done(k, n);
            });
        }
    });
    // Every index ran once (a worker that panicked ends the scope with it).
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|&(i, _)| i);
    results.into_iter().map(|(_, t)| t).collect()
}

/// `f()` on a thread of its own; `None` when it has not answered within
/// `timeout` (the thread is left to finish, its answer dropped).
pub fn within<T, F>(timeout: Duration, f: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(timeout).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_keeps_order_and_counts_every_host() {
        let seen = AtomicUsize::new(0);
        let out = each(
            50,
            4,
            |i| {
                std::thread::sleep(Duration::from_millis(
                    u64::try_from(50 - i).unwrap_or(0) % 3,
                ));
                i * 2
            },
            &|_, n| {
                assert_eq!(n, 50);
                seen.fetch_add(1, Ordering::SeqCst);
            },
        );
        assert_eq!(out, (0..50).map(|i| i * 2).collect::<Vec<_>>());
        assert_eq!(seen.load(Ordering::SeqCst), 50);
        assert!(each(0, 4, |i| i, &|_, _| {}).is_empty());
    }

    #[test]
    fn within_gives_up_on_a_slow_call() {
        assert_eq!(within(Duration::from_secs(5), || 7), Some(7));
        let slow = within(Duration::from_millis(20), || {
            std::thread::sleep(Duration::from_millis(500));
            7
        });
        assert_eq!(slow, None);
    }
}
