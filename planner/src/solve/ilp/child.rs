//! Running a piece of work in a forked child process, so that an abort or a
//! hang inside it (CBC 2.10 asserts now and then: `CbcCutGenerator.cpp:1027
//! … Assertion 'nB' failed`) ends the child, never the caller: the system
//! calls std has no form of (`fork`, `_exit`, `poll`, `waitpid`, `kill`).
//!
//! The child sees the parent's memory copy-on-write, so the work's inputs
//! need no serialising; it sends its answer back as bytes over a pipe,
//! length first, and leaves with `_exit`, running no destructor and no
//! `atexit` handler (the parent's buffered output is never flushed twice).
//! The parent reads the pipe under a deadline and kills the child with
//! SIGKILL when it passes; the kernel kills it if the parent's thread ends
//! first (`PR_SET_PDEATHSIG`). Every child is reaped: at once when it died or
//! was killed, by a reaper thread when it answered (its exit, tearing down
//! its copy of the address space, then costs the solve nothing). What the
//! bytes mean is the caller's business ([`super::backend`]).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc::Sender;
use std::sync::OnceLock;
use std::time::Instant;

/// The exit status of a child whose work panicked (as Rust's own `main`).
pub(super) const PANICKED: i32 = 101;

/// The exit status of a child that could not write its answer (or whose
/// parent had ended).
const UNWRITTEN: i32 = 102;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    /// It exited with this status.
    Status(i32),
    /// A signal ended it.
    Signal(i32),
}

/// What a child gave back.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Its whole answer.
    Answered(Vec<u8>),
    /// It ended before its answer was whole: how.
    Died(Exit),
    /// It was still at work at the deadline: killed.
    Killed,
}

/// A system call that failed, with `errno`.
#[derive(Debug)]
pub(super) struct CallFailed {
    pub(super) call: &'static str,
    pub(super) error: io::Error,
}

/// The last OS error, as from `call`.
fn failed(call: &'static str) -> CallFailed {
    CallFailed {
        call,
        error: io::Error::last_os_error(),
    }
}

/// Runs `work` in a forked child and returns what it sent by `deadline`.
///
/// The child inherits only the calling thread: `work` must not need a lock
/// another thread may hold (the caller reads the environment before, for
/// instance). glibc makes `malloc` safe after `fork`, so `work` may allocate.
pub(super) fn run(
    deadline: Instant,
    work: impl FnOnce() -> Vec<u8>,
) -> Result<Outcome, CallFailed> {
    spawn(work)?.wait_until(deadline)
}

/// A child at work, and the pipe its answer comes through.
struct Running {
    child: Child,
    read_end: OwnedFd,
}

/// Starts `work` in a forked child.
fn spawn(work: impl FnOnce() -> Vec<u8>) -> Result<Running, CallFailed> {
    let mut fds: [RawFd; 2] = [-1; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(failed("pipe2"));
    }
    // SAFETY: pipe2 succeeded: both descriptors are open and owned by
    // nothing else.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let parent = std::process::id();
    // SAFETY: fork has no preconditions; the child runs `in_child` only,
    // which never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(failed("fork"));
    }
    if pid == 0 {
        in_child(parent, read_end.as_raw_fd(), write_end.as_raw_fd(), work);
    }
    // Only the child may hold the write end: the pipe ends when it does.
    drop(write_end);
    Ok(Running {
        child: Child { pid, reaped: false },
        read_end,
    })
}

impl Running {
    /// Reads the answer until it is whole (it may exceed the pipe's 64 KiB
    /// buffer) or the child closes the pipe; kills the child if `deadline`
    /// passes first.
    fn wait_until(mut self, deadline: Instant) -> Result<Outcome, CallFailed> {
        match read_until(&self.read_end, deadline) {
            Ok(Some(Some(answer))) => {
                self.child.reap_later();
                Ok(Outcome::Answered(answer))
            }
            Ok(Some(None)) => Ok(Outcome::Died(self.child.wait()?)),
            Ok(None) => {
                self.child.kill();
                Ok(Outcome::Killed)
            }
            Err(e) => {
                self.child.kill();
                Err(e)
            }
        }
    }
}

/// The child's side: sends `work`'s bytes, length first, and leaves.
fn in_child(parent: u32, read_end: RawFd, write_end: RawFd, work: impl FnOnce() -> Vec<u8>) -> ! {
    // SAFETY: asking for SIGKILL when the thread that forked this process
    // ends (it waits for this child meanwhile, unless the whole process
    // exits: a solver thread abandoned by `exact_with_watchdog` when
    // `pinplan plan` returns), then leaving if that happened already.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if std::os::unix::process::parent_id() != parent {
            libc::_exit(UNWRITTEN);
        }
    }
    // SAFETY: closing descriptors this process owns (the parent's copies are
    // its own) and making stdout a copy of stderr.
    unsafe {
        libc::close(read_end);
        // The parent's other threads may have pipes of their own solves open:
        // a copy held here would keep their pipes from ending with their
        // children. (Before Linux 5.9 close_range fails: such a parent then
        // waits for this child too, and is only slower.)
        if write_end > 3 {
            libc::close_range(3, (write_end - 1) as libc::c_uint, 0);
        }
        libc::close_range((write_end + 1).max(3) as libc::c_uint, libc::c_uint::MAX, 0);
        // What the work prints on stdout goes to stderr: stdout is where
        // pinplan writes its JSON.
        libc::dup2(2, 1);
    }
    let status = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(bytes) => {
            let length = (bytes.len() as u64).to_le_bytes();
            if write_all(write_end, &length) && write_all(write_end, &bytes) {
                0
            } else {
                UNWRITTEN
            }
        }
        Err(_) => PANICKED,
    };
    // SAFETY: _exit ends the process at once, without running the parent's
    // atexit handlers or flushing its stdio buffers (copies of the parent's).
    unsafe { libc::_exit(status) }
}

/// Writes all of `bytes` to `fd`; false when it cannot.
fn write_all(fd: RawFd, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        bytes = bytes.get(n.unsigned_abs()..).unwrap_or_default();
    }
    true
}

/// Reads `fd` until the length-prefixed answer is whole: `None` if
/// `deadline` passes first, `Some(None)` at an end of file before the
/// answer is whole.
fn read_until(fd: &OwnedFd, deadline: Instant) -> Result<Option<Option<Vec<u8>>>, CallFailed> {
    let mut got: Vec<u8> = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        if let Some(answer) = whole(&got) {
            return Ok(Some(Some(answer.to_vec())));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let mut pollfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Rounded up: a deadline 0.4 ms away is not polled with 0 ms.
        let ms = i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        // SAFETY: one pollfd, alive for the call.
        let ready = unsafe { libc::poll(&mut pollfd, 1, ms) };
        if ready < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(failed("poll"));
        }
        if ready == 0 {
            continue;
        }
        // SAFETY: `buffer` is writable for its whole length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
        match n {
            0 => return Ok(Some(None)),
            n if n > 0 => got.extend_from_slice(buffer.get(..n.unsigned_abs()).unwrap_or_default()),
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return Err(failed("read")),
        }
    }
}

/// The answer in `got` once it has all the bytes its prefix announces.
fn whole(got: &[u8]) -> Option<&[u8]> {
    let prefix: [u8; 8] = got.get(..8)?.try_into().ok()?;
    let length = usize::try_from(u64::from_le_bytes(prefix)).ok()?;
    got.get(8..).filter(|rest| rest.len() == length)
}

/// A child not reaped yet: killed and reaped when dropped, so that no path
/// out of [`run`] leaves a zombie or a stray solver behind.
struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

impl Child {
    /// Kills and reaps it.
    fn kill(&mut self) {
        // SAFETY: `pid` is this process's child, not reaped yet (so the
        // number cannot belong to another process).
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        // SIGKILL cannot be caught: the wait returns.
        let _ = self.wait();
    }

    /// Waits for it to end. Even when that fails (waitpid no longer knows
    /// it) it counts as reaped: its number may be another process's by now,
    /// never to be signalled.
    fn wait(&mut self) -> Result<Exit, CallFailed> {
        self.reaped = true;
        wait_for(self.pid)
    }

    /// Leaves it to the reaper thread (it has answered and is exiting);
    /// reaps it here if there is no such thread.
    fn reap_later(&mut self) {
        static REAPER: OnceLock<Option<Sender<libc::pid_t>>> = OnceLock::new();
        let reaper = REAPER.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("pinplan-reaper".to_owned())
                .spawn(move || {
                    for pid in rx {
                        let _ = wait_for(pid);
                    }
                })
                .ok()
                .map(|_| tx)
        });
        if reaper.as_ref().is_some_and(|tx| tx.send(self.pid).is_ok()) {
            self.reaped = true;
        } else {
            let _ = self.wait();
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill();
        }
    }
}

/// Waits for child `pid` to end and reaps it.
fn wait_for(pid: libc::pid_t) -> Result<Exit, CallFailed> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: `status` is a live c_int for waitpid to write.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            break;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(failed("waitpid"));
        }
    }
    Ok(if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Status(libc::WEXITSTATUS(status))
    })
}

/// Sends this process SIGKILL (fault injection: a child killed mid-solve).
#[cfg(any(test, feature = "fault-injection"))]
pub(super) fn kill_self() -> ! {
    // SAFETY: signalling this very process; SIGKILL ends it.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    // Not reached: a signal a process sends itself is delivered before kill
    // returns.
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(10)
    }

    /// An answer larger than the pipe's buffer arrives whole.
    #[test]
    fn answers_of_any_size_arrive_whole() {
        for size in [0, 1, 8, 65_535, 65_536, 200_000] {
            let answer: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let expected = answer.clone();
            let outcome = run(soon(), move || answer).unwrap();
            assert_eq!(outcome, Outcome::Answered(expected), "{size} bytes");
        }
    }

    fn aborts() -> Vec<u8> {
        std::process::abort()
    }

    fn panics() -> Vec<u8> {
        panic!("in the child")
    }

    fn is_killed() -> Vec<u8> {
        kill_self()
    }

    /// How a child ended is told apart: aborted, panicked, killed.
    #[test]
    fn how_a_child_ended_is_told() {
        for (work, exit) in [
            (aborts as fn() -> Vec<u8>, Exit::Signal(libc::SIGABRT)),
            (panics, Exit::Status(PANICKED)),
            (is_killed, Exit::Signal(libc::SIGKILL)),
        ] {
            assert_eq!(run(soon(), work).unwrap(), Outcome::Died(exit));
        }
    }

    /// Whether child `pid` is still to be reaped (running, or a zombie).
    /// WNOWAIT: asking reaps nothing.
    fn known(pid: libc::pid_t) -> bool {
        // SAFETY: a zeroed siginfo_t is valid (plain data).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        // SAFETY: `info` is a live siginfo_t for waitid to write.
        let found = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
        !(found == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
    }

    /// A child past its deadline is killed and reaped at once.
    #[test]
    fn a_child_past_its_deadline_is_killed_and_reaped() {
        let running = spawn(|| loop {
            std::thread::sleep(Duration::from_secs(3600));
        })
        .unwrap();
        let pid = running.child.pid;
        let started = Instant::now();
        let outcome = running
            .wait_until(started + Duration::from_millis(100))
            .unwrap();
        assert_eq!(outcome, Outcome::Killed);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(!known(pid), "a zombie is left");
    }

    /// A child whose parent thread ends without waiting for it (a solver
    /// thread abandoned as `pinplan plan` exits) is killed by the kernel.
    #[test]
    fn a_child_dies_with_the_thread_that_forked_it() {
        let pid = std::thread::spawn(|| {
            let running = spawn(|| loop {
                std::thread::sleep(Duration::from_secs(3600));
            })
            .unwrap();
            let pid = running.child.pid;
            // The child asks for the signal before its work starts: a thread
            // that ends before would hand it to another thread of this
            // process, which the child cannot tell from its parent (in
            // `run`, the thread waits for the child). So wait until it
            // sleeps in its work.
            let sleeping = [libc::SYS_nanosleep, libc::SYS_clock_nanosleep].map(|n| n.to_string());
            let started = Instant::now();
            loop {
                let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap();
                if sleeping
                    .iter()
                    .any(|n| call.split(' ').next() == Some(n.as_str()))
                {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "never slept: {call}"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            // Neither waited for nor killed: the thread just ends.
            std::mem::forget(running);
            pid
        })
        .join()
        .unwrap();
        assert_eq!(wait_for(pid).unwrap(), Exit::Signal(libc::SIGKILL));
    }

    /// A child that answered is reaped by the reaper thread, soon.
    #[test]
    fn a_child_that_answered_is_reaped() {
        let running = spawn(|| vec![1, 2, 3]).unwrap();
        let pid = running.child.pid;
        assert_eq!(
            running.wait_until(soon()).unwrap(),
            Outcome::Answered(vec![1, 2, 3])
        );
        let started = Instant::now();
        while known(pid) {
            assert!(started.elapsed() < Duration::from_secs(5), "never reaped");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
