//! Running work in a child process, so that an abort or a hang inside it
//! (CBC 2.10 asserts now and then: `CbcCutGenerator.cpp:1027 … Assertion
//! 'nB' failed`) ends the child, never the caller: the system calls std has
//! no form of (`fork`, `socketpair`, `poll`, `waitpid`, `kill`).
//!
//! Each thread that asks keeps one worker: a child forked at its first
//! request, which then serves request after request over a Unix socket
//! (length first, then the bytes, both ways) until it dies, is killed, or
//! its thread ends. A fork per request cost 2.2–2.5 ms (copying the page
//! tables of a large process, then tearing the copy down); a request to a
//! worker costs a round trip on the socket (docs/benchmarks.md, "A solver
//! crash is an error"). The worker runs a [`Service`]'s handler, a plain
//! function of the request's bytes: the request carries everything the work
//! needs, read in the parent.
//!
//! The parent reads the answer under a deadline and kills the worker with
//! SIGKILL when it passes; a worker that died or was killed is reaped at
//! once and the thread's next request forks a new one. The kernel kills a
//! worker whose thread ends without dropping it (`PR_SET_PDEATHSIG`). The
//! worker leaves with `_exit`, running no destructor and no `atexit`
//! handler (the parent's buffered output is never flushed twice). An idle
//! worker costs a process and the pages of the parent's memory at its fork
//! that the parent has written since (copy-on-write). What the bytes mean is
//! the caller's business ([`super::backend`]).
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// The exit status of a worker whose work panicked (as Rust's own `main`).
pub(super) const PANICKED: i32 = 101;

/// The exit status of a worker that could not read a request or write its
/// answer (or whose parent had ended).
const UNWRITTEN: i32 = 102;

/// How a worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exit {
    /// It exited with this status.
    Status(i32),
    /// A signal ended it.
    Signal(i32),
}

/// What a request got back.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// The whole answer.
    Answered(Vec<u8>),
    /// The worker ended before its answer was whole: how.
    Died(Exit),
    /// The worker was still at work at the deadline: killed.
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

/// What a worker does with each request: `handler` maps its bytes to the
/// answer's. `name` tells services apart (a thread's worker serves one).
#[derive(Clone, Copy)]
pub(super) struct Service {
    pub(super) name: &'static str,
    pub(super) handler: fn(&[u8]) -> Vec<u8>,
}

thread_local! {
    /// This thread's worker, once it has asked.
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// Sends `request` to this thread's worker for `service` (forking one if it
/// has none) and returns what came back by `deadline`. A worker that died
/// or was killed is gone; the next request forks another.
///
/// The worker is forked from the calling thread alone: its handler must not
/// need a lock another thread may hold (the caller takes its settings
/// before, for instance). glibc makes `malloc` safe after `fork`, so the
/// handler may allocate.
pub(super) fn ask(
    deadline: Instant,
    service: Service,
    request: &[u8],
) -> Result<Outcome, CallFailed> {
    WORKER.with(|slot| {
        // The handler runs in the worker, never here: no request is asked
        // while another is, and the slot is free.
        let mut slot = slot.try_borrow_mut().map_err(|_| CallFailed {
            call: "ask",
            error: io::Error::from(io::ErrorKind::WouldBlock),
        })?;
        // Another service's worker (tests only) is killed and reaped when
        // dropped.
        let kept = slot.take().filter(|w| w.service == service.name);
        let reused = kept.is_some();
        let worker = match kept {
            Some(worker) => worker,
            None => Worker::spawn(service)?,
        };
        let (worker, outcome) = worker.ask(deadline, request);
        let outcome = match outcome {
            // A kept worker that ended before it took the request died
            // while idle (the OOM killer, a CPU-time limit, an admin's
            // kill): this request never reached it and is not its crash.
            // Once more, with a new worker.
            Err(Untaken(_)) if reused => {
                let (worker, outcome) = Worker::spawn(service)?.ask(deadline, request);
                *slot = worker;
                return outcome.unwrap_or_else(|Untaken(exit)| exit.map(Outcome::Died));
            }
            Err(Untaken(exit)) => exit.map(Outcome::Died),
            Ok(outcome) => outcome,
        };
        *slot = worker;
        outcome
    })
}

/// A request the worker ended before taking (before its acknowledgement):
/// how it ended.
struct Untaken(Result<Exit, CallFailed>);

/// What a worker sends once it has read a request whole, before its work:
/// a worker that ends before it has not started on the request.
const TAKEN: u8 = b'!';

/// A worker, and the parent's end of its socket.
struct Worker {
    child: Child,
    socket: OwnedFd,
    service: &'static str,
}

impl Worker {
    /// Forks a worker for `service`.
    fn spawn(service: Service) -> Result<Worker, CallFailed> {
        let mut fds: [RawFd; 2] = [-1; 2];
        // SAFETY: `fds` has room for the two descriptors socketpair writes.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made != 0 {
            return Err(failed("socketpair"));
        }
        // SAFETY: socketpair succeeded: both descriptors are open and owned
        // by nothing else.
        let (ours, theirs) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let parent = std::process::id();
        // SAFETY: fork has no preconditions; the child runs `serve` only,
        // which never returns.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(failed("fork"));
        }
        if pid == 0 {
            serve(parent, theirs.as_raw_fd(), service.handler);
        }
        // Only the worker holds its end: the socket ends when it does.
        drop(theirs);
        Ok(Worker {
            child: Child { pid, reaped: false },
            socket: ours,
            service: service.name,
        })
    }

    /// Sends `request` and reads the answer until it is whole (it may exceed
    /// the socket's buffer); kills the worker if `deadline` passes first.
    /// Gives the worker back if it is still of use; `Untaken` when it
    /// ended before it took the request (it is reaped).
    fn ask(
        mut self,
        deadline: Instant,
        request: &[u8],
    ) -> (Option<Worker>, Result<Result<Outcome, CallFailed>, Untaken>) {
        let length = (request.len() as u64).to_le_bytes();
        let sent = send_until(&self.socket, &length, deadline).and_then(|sent| match sent {
            Sent::All => send_until(&self.socket, request, deadline),
            other => Ok(other),
        });
        let outcome = match sent {
            Ok(Sent::All) => match read_until(&self.socket, deadline) {
                Ok(Read::Whole(answer)) => return (Some(self), Ok(Ok(Outcome::Answered(answer)))),
                Ok(Read::Ended { taken: true }) => self.child.wait().map(Outcome::Died),
                Ok(Read::Ended { taken: false }) => return (None, Err(Untaken(self.child.wait()))),
                Ok(Read::Late) => Ok(self.child.stop()),
                Err(e) => Err(e),
            },
            // The worker closed its end before it had the request whole.
            Ok(Sent::Closed) => return (None, Err(Untaken(self.child.wait()))),
            Ok(Sent::Late) => Ok(self.child.stop()),
            Err(e) => Err(e),
        };
        // Whatever happened, this worker is done: dropping it kills and
        // reaps it if it is not reaped yet.
        (None, Ok(outcome))
    }
}

/// The worker's side: answers request after request, and leaves when the
/// parent closes its end.
fn serve(parent: u32, socket: RawFd, handler: fn(&[u8]) -> Vec<u8>) -> ! {
    // SAFETY: asking for SIGKILL when the thread that forked this process
    // ends (its thread-local drop kills the worker first, unless the whole
    // process exits: a solver thread abandoned by `exact_with_watchdog` when
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
        // The parent's other threads have workers of their own: a copy of
        // their sockets held here would keep them from seeing their workers
        // end, for as long as this worker lives.
        let below = socket <= 3 || libc::close_range(3, (socket - 1) as libc::c_uint, 0) == 0;
        let above =
            libc::close_range((socket + 1).max(3) as libc::c_uint, libc::c_uint::MAX, 0) == 0;
        if !(below && above) {
            // Before Linux 5.9 (or under a seccomp filter that refuses it)
            // there is no close_range: each descriptor the limit allows.
            let mut limit = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            let most = RawFd::try_from(limit.rlim_cur.min(1 << 20)).unwrap_or(1 << 20);
            for fd in (3..most).filter(|&fd| fd != socket) {
                libc::close(fd);
            }
        }
        // What the work prints on stdout goes to stderr: stdout is where
        // pinplan writes its JSON.
        libc::dup2(2, 1);
    }
    // Nothing of the worker's may unwind into the parent's frames it was
    // forked in: a panic outside the handler's guard ends it too.
    let _ = std::panic::catch_unwind(|| serve_requests(socket, handler));
    // SAFETY: _exit ends the process at once (see below).
    unsafe { libc::_exit(PANICKED) }
}

/// Answers request after request on `socket`, and leaves when the parent
/// closes its end.
fn serve_requests(socket: RawFd, handler: fn(&[u8]) -> Vec<u8>) -> ! {
    loop {
        let Some(request) = read_request(socket) else {
            // SAFETY: _exit ends the process at once (see below).
            unsafe { libc::_exit(0) }
        };
        if !send_all(socket, &[TAKEN]) {
            // SAFETY: _exit ends the process at once (see below).
            unsafe { libc::_exit(UNWRITTEN) }
        }
        let status = match std::panic::catch_unwind(|| handler(&request)) {
            Ok(answer) => {
                let length = (answer.len() as u64).to_le_bytes();
                if send_all(socket, &length) && send_all(socket, &answer) {
                    continue;
                }
                UNWRITTEN
            }
            Err(_) => PANICKED,
        };
        // SAFETY: _exit ends the process at once, without running the
        // parent's atexit handlers or flushing its stdio buffers (copies of
        // the parent's).
        unsafe { libc::_exit(status) }
    }
}

/// Reads one length-prefixed request from `fd`, blocking; `None` at an end
/// of file or an error.
fn read_request(fd: RawFd) -> Option<Vec<u8>> {
    let mut prefix = [0u8; 8];
    read_exact(fd, &mut prefix)?;
    let length = usize::try_from(u64::from_le_bytes(prefix)).ok()?;
    let mut request = vec![0u8; length];
    read_exact(fd, &mut request)?;
    Some(request)
}

/// Fills `buffer` from `fd`, blocking; `None` if it ends first.
fn read_exact(fd: RawFd, buffer: &mut [u8]) -> Option<()> {
    let mut at = 0;
    while at < buffer.len() {
        let rest = buffer.get_mut(at..)?;
        // SAFETY: `rest` is writable for its whole length.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        match n {
            0 => return None,
            n if n > 0 => at += n.unsigned_abs(),
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return None,
        }
    }
    Some(())
}

/// Sends all of `bytes` on socket `fd`, blocking; false when it cannot (no
/// SIGPIPE when the other end is closed).
fn send_all(fd: RawFd, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
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

/// How far a request went out.
enum Sent {
    /// Whole.
    All,
    /// Not whole by the deadline.
    Late,
    /// The worker's end is closed.
    Closed,
}

/// Sends all of `bytes` on socket `fd` by `deadline`.
fn send_until(fd: &OwnedFd, mut bytes: &[u8], deadline: Instant) -> Result<Sent, CallFailed> {
    while !bytes.is_empty() {
        if !wait_for_fd(fd, libc::POLLOUT, deadline)? {
            return Ok(Sent::Late);
        }
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes.
        let n = unsafe {
            libc::send(
                fd.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EINTR | libc::EAGAIN) => continue,
                Some(libc::EPIPE | libc::ECONNRESET) => return Ok(Sent::Closed),
                _ => {
                    return Err(CallFailed {
                        call: "send",
                        error,
                    })
                }
            }
        }
        bytes = bytes.get(n.unsigned_abs()..).unwrap_or_default();
    }
    Ok(Sent::All)
}

/// Waits until `fd` is ready for `events` (or has hung up): false if
/// `deadline` passes first.
fn wait_for_fd(fd: &OwnedFd, events: libc::c_short, deadline: Instant) -> Result<bool, CallFailed> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let mut pollfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events,
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
        if ready > 0 {
            return Ok(true);
        }
    }
}

/// What came back for a request.
enum Read {
    /// The whole answer.
    Whole(Vec<u8>),
    /// The worker's end closed first; `taken`: after it took the request.
    Ended { taken: bool },
    /// Not whole by the deadline.
    Late,
}

/// Reads `fd` until the acknowledgement and the length-prefixed answer are
/// whole, the worker's end closes, or `deadline` passes.
fn read_until(fd: &OwnedFd, deadline: Instant) -> Result<Read, CallFailed> {
    let mut got: Vec<u8> = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        if let Some(answer) = whole(&got) {
            return Ok(Read::Whole(answer.to_vec()));
        }
        if !wait_for_fd(fd, libc::POLLIN, deadline)? {
            return Ok(Read::Late);
        }
        let ended = Read::Ended {
            taken: !got.is_empty(),
        };
        // SAFETY: `buffer` is writable for its whole length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len()) };
        match n {
            0 => return Ok(ended),
            n if n > 0 => got.extend_from_slice(buffer.get(..n.unsigned_abs()).unwrap_or_default()),
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            // A reset connection is a worker that died with bytes unread.
            _ if io::Error::last_os_error().raw_os_error() == Some(libc::ECONNRESET) => {
                return Ok(ended)
            }
            _ => return Err(failed("read")),
        }
    }
}

/// The answer in `got` once it has the acknowledgement and all the bytes
/// its prefix announces (anything else first: never whole, and the worker
/// is told dead when it ends).
fn whole(got: &[u8]) -> Option<&[u8]> {
    let (&TAKEN, got) = got.split_first()? else {
        return None;
    };
    let prefix: [u8; 8] = got.get(..8)?.try_into().ok()?;
    let length = usize::try_from(u64::from_le_bytes(prefix)).ok()?;
    got.get(8..).filter(|rest| rest.len() == length)
}

/// A worker not reaped yet: killed and reaped when dropped, so that no path
/// out of [`ask`], and no thread's end, leaves a zombie or a stray solver
/// behind.
struct Child {
    pid: libc::pid_t,
    reaped: bool,
}

impl Child {
    /// At a deadline: a worker that has died already (its end of file
    /// still on its way) is a crash; one still at work is killed.
    fn stop(&mut self) -> Outcome {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a live c_int for waitpid to write; WNOHANG:
        // no wait.
        if unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } == self.pid {
            self.reaped = true;
            return Outcome::Died(exit_of(status));
        }
        self.kill();
        Outcome::Killed
    }

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
    Ok(exit_of(status))
}

/// How a child ended, from its wait status.
fn exit_of(status: libc::c_int) -> Exit {
    if libc::WIFSIGNALED(status) {
        Exit::Signal(libc::WTERMSIG(status))
    } else {
        Exit::Status(libc::WEXITSTATUS(status))
    }
}

/// Sends this process SIGKILL (fault injection: a worker killed mid-solve).
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

    fn service(name: &'static str, handler: fn(&[u8]) -> Vec<u8>) -> Service {
        Service { name, handler }
    }

    fn echo(request: &[u8]) -> Vec<u8> {
        request.to_vec()
    }

    /// The worker's process id.
    fn pid(_: &[u8]) -> Vec<u8> {
        std::process::id().to_le_bytes().to_vec()
    }

    fn pid_of(outcome: Outcome) -> u32 {
        match outcome {
            Outcome::Answered(bytes) => u32::from_le_bytes(bytes.try_into().unwrap()),
            other => panic!("{other:?}"),
        }
    }

    const PID: Service = Service {
        name: "pid",
        handler: pid,
    };

    /// Requests and answers larger than the socket's buffer arrive whole,
    /// one after another, from one worker.
    #[test]
    fn requests_and_answers_of_any_size_arrive_whole() {
        for size in [0, 1, 8, 65_535, 65_536, 200_000, 3_000_000] {
            let request: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let outcome = ask(soon(), service("echo", echo), &request).unwrap();
            assert_eq!(outcome, Outcome::Answered(request), "{size} bytes");
        }
    }

    fn aborts(_: &[u8]) -> Vec<u8> {
        std::process::abort()
    }

    fn panics(_: &[u8]) -> Vec<u8> {
        panic!("in the worker")
    }

    fn is_killed(_: &[u8]) -> Vec<u8> {
        kill_self()
    }

    fn hangs(_: &[u8]) -> Vec<u8> {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }

    /// How a worker ended is told apart: aborted, panicked, killed; and the
    /// next request gets a new worker that answers.
    #[test]
    fn how_a_worker_ended_is_told_and_a_new_one_answers() {
        for (work, exit) in [
            (aborts as fn(&[u8]) -> Vec<u8>, Exit::Signal(libc::SIGABRT)),
            (panics, Exit::Status(PANICKED)),
            (is_killed, Exit::Signal(libc::SIGKILL)),
        ] {
            // One service: a worker that answered (pid) is the one that
            // then dies.
            let dies = service("dies", work);
            let outcome = ask(soon(), dies, &[]).unwrap();
            assert_eq!(outcome, Outcome::Died(exit));
            assert!(
                WORKER.with(|w| w.borrow().is_none()),
                "a dead worker is kept"
            );
            let next = pid_of(ask(soon(), PID, &[]).unwrap());
            assert!(known(next));
        }
    }

    /// A thread's requests go to one worker.
    #[test]
    fn a_thread_keeps_its_worker() {
        let first = pid_of(ask(soon(), PID, &[]).unwrap());
        for _ in 0..10 {
            assert_eq!(pid_of(ask(soon(), PID, &[]).unwrap()), first);
        }
        assert_ne!(first, std::process::id());
        // Another thread has another.
        let other = std::thread::spawn(|| pid_of(ask(soon(), PID, &[]).unwrap()))
            .join()
            .unwrap();
        assert_ne!(other, first);
    }

    /// A worker that died while idle (killed by someone else) is not this
    /// request's crash: the request goes to a new worker, and the dead one
    /// is reaped.
    #[test]
    fn a_worker_dead_while_idle_is_replaced() {
        for wait in [true, false] {
            let first = pid_of(ask(soon(), PID, &[]).unwrap());
            // SAFETY: signalling this thread's own worker.
            unsafe { libc::kill(first as libc::pid_t, libc::SIGKILL) };
            if wait {
                // Dead and its socket closed before the next request...
                let started = Instant::now();
                while std::fs::read_to_string(format!("/proc/{first}/stat"))
                    .is_ok_and(|stat| !stat.contains(") Z"))
                {
                    assert!(started.elapsed() < Duration::from_secs(10));
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            // ...or (without the wait) perhaps still dying as it is sent.
            let next = pid_of(ask(soon(), PID, &[]).unwrap());
            assert_ne!(next, first);
            assert!(!known(first), "the dead worker is left a zombie");
        }
    }

    /// Whether child `pid` is still to be reaped (running, or a zombie).
    /// WNOWAIT: asking reaps nothing.
    fn known(pid: u32) -> bool {
        // SAFETY: a zeroed siginfo_t is valid (plain data).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        // SAFETY: `info` is a live siginfo_t for waitid to write.
        let found = unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) };
        !(found == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD))
    }

    /// A worker past its deadline is killed and reaped at once; the next
    /// request gets a new one.
    #[test]
    fn a_worker_past_its_deadline_is_killed_and_reaped() {
        let before = pid_of(ask(soon(), PID, &[]).unwrap());
        let started = Instant::now();
        let outcome = ask(
            started + Duration::from_millis(100),
            service("hangs", hangs),
            &[],
        )
        .unwrap();
        assert_eq!(outcome, Outcome::Killed);
        assert!(started.elapsed() < Duration::from_secs(2));
        let after = pid_of(ask(soon(), PID, &[]).unwrap());
        assert!(!known(before), "the switched-from worker is left");
        assert_ne!(before, after);
        let hung = WORKER.with(|w| w.borrow().as_ref().map(|w| w.child.pid));
        assert_eq!(hung.map(|p| p as u32), Some(after));
    }

    /// A thread's worker ends with the thread: dropped with its
    /// thread-locals, or, when the thread never drops it, killed by the
    /// kernel (a worker asks for that before it serves).
    #[test]
    fn a_worker_dies_with_its_thread() {
        let dropped = std::thread::spawn(|| pid_of(ask(soon(), PID, &[]).unwrap()))
            .join()
            .unwrap();
        assert!(!known(dropped), "a worker outlives its thread");

        let pid = std::thread::spawn(|| {
            let worker = Worker::spawn(PID).unwrap();
            let pid = worker.child.pid;
            // Wait until it blocks reading its first request: it asked for
            // the signal before.
            let reading = libc::SYS_read.to_string();
            let started = Instant::now();
            loop {
                let call = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap();
                if call.split(' ').next() == Some(reading.as_str()) {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "never read: {call}"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            // Neither dropped nor killed: the thread just ends.
            std::mem::forget(worker);
            pid
        })
        .join()
        .unwrap();
        assert_eq!(wait_for(pid).unwrap(), Exit::Signal(libc::SIGKILL));
    }
}
