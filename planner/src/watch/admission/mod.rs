//! The admission protocol: the running `pinplan watch` owns a Unix stream
//! socket ([`Server`]), and the libvirt hook (`pinplan watch --admit
//! DOMAIN`, started at `prepare begin`) asks it there whether a domain may
//! start ([`ask`]). This module owns the socket, the wire format and its
//! bounds, and what a hook does when no watcher answers
//! ([`when_no_answer`]); what the watcher answers is the watcher's.
//!
//! # Wire format
//!
//! One JSON object on one newline-terminated line each way, then both sides
//! close:
//!
//! - the hook sends an [`Ask`]:
//!   `{"version":1,"domain":"vm1","xml":"<domain type='kvm'>…</domain>"}`;
//! - the watcher answers with an [`Answer`]:
//!   `{"allow":false,"reason":"…","fix":"…"}`, or, when it could not read
//!   the question (not JSON, another [`VERSION`], too long), with
//!   `{"error":"…"}`, which the hook reads as [`AskError::Protocol`] (not as
//!   a refusal: [`when_no_answer`] decides).
//!
//! # Bounds
//!
//! The socket is mode 0600 (root's, on a hypervisor). A question is read
//! whole within [`READ_TIMEOUT`] and is at most [`MAX_QUESTION`] bytes (its
//! XML at most [`MAX_XML`]); at most [`MAX_READERS`] questions are read at
//! once, each on a thread of its own, so a client that says nothing never
//! delays the next. An answer line is at most [`MAX_ANSWER`] bytes. The
//! hook waits at most the time it is given, the connection included.

use crate::error::Diagnostic;
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod server;
#[cfg(test)]
mod tests;

pub use server::{AdmissionError, Pending, Server, Serving};

/// The socket's file name inside pinplan's runtime directory ([`default_socket`]).
pub const DEFAULT_SOCKET: &str = "watch.sock";
/// The protocol's version: an [`Ask`] of another version gets an error reply.
pub const VERSION: u32 = 1;
/// The longest domain XML a question may carry (4 MiB).
pub const MAX_XML: usize = 4 << 20;
/// The longest question line: its XML escaped in JSON (quotes double in size), and the rest.
pub const MAX_QUESTION: usize = 2 * MAX_XML + (64 << 10);
/// The longest answer line the hook reads.
pub const MAX_ANSWER: usize = 64 << 10;
/// How long the watcher waits for a whole question after a client connects.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the watcher waits to hand an answer to the socket.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How many questions are read at once; a client beyond gets an error reply.
pub const MAX_READERS: usize = 16;
/// How long the hook waits for an answer unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The socket's default path: [`DEFAULT_SOCKET`] in pinplan's runtime
/// directory (`/run/pinplan`, created when missing).
pub fn default_socket() -> Result<PathBuf, crate::state::StateError> {
    Ok(crate::state::runtime_dir()?.join(DEFAULT_SOCKET))
}

/// What the hook asks: the domain's name and the XML libvirt is about to start.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Ask {
    /// The protocol's [`VERSION`].
    pub version: u32,
    /// The domain's name.
    pub domain: String,
    /// The domain XML libvirt handed the hook on standard input.
    pub xml: String,
}

/// The watcher's answer. `allow = false` carries why and the smallest fix
/// (one line each); `allow = true` may carry a reason too (a warning: let
/// through without a watcher's word, [`when_no_answer`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Answer {
    /// Whether the domain may start.
    pub allow: bool,
    /// Why not (or why it was let through unchecked).
    pub reason: Option<String>,
    /// The smallest change that lets it start.
    pub fix: Option<String>,
}

impl Answer {
    /// The domain may start.
    pub fn allowed() -> Answer {
        Answer {
            allow: true,
            reason: None,
            fix: None,
        }
    }

    /// The domain may not start, for `reason`, until `fix`.
    pub fn refused(reason: impl Into<String>, fix: impl Into<String>) -> Answer {
        Answer {
            allow: false,
            reason: Some(reason.into()),
            fix: Some(fix.into()),
        }
    }
}

/// The watcher's reply when it could not read a question.
#[derive(Serialize, Deserialize)]
struct ErrorReply {
    error: String,
}

/// What the hook reads back: an answer, or why there is none.
#[derive(Deserialize)]
#[serde(untagged)]
enum Reply {
    Answer(Answer),
    Error(ErrorReply),
}

/// Why the hook got no answer.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    /// No socket, or nothing listens on it.
    #[error("no pinplan watch listens on {}", path.display())]
    NoWatcher {
        /// The socket.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The watcher did not answer in time.
    #[error("no pinplan watch answered on {} within {} ms", path.display(), timeout.as_millis())]
    Timeout {
        /// The socket.
        path: PathBuf,
        /// How long the hook waited.
        timeout: Duration,
    },
    /// The watcher's reply could not be read as an answer.
    #[error("the reply of pinplan watch on {} is no answer", path.display())]
    Protocol {
        /// The socket.
        path: PathBuf,
        /// What was wrong with it.
        #[source]
        problem: Problem,
    },
    /// The OS refused the connection or the exchange for another reason.
    #[error("cannot ask pinplan watch on {}", path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// What was wrong with a reply.
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The watcher closed the connection without answering.
    #[error("the watcher closed the connection without an answer")]
    Closed,
    /// The reply was longer than [`MAX_ANSWER`].
    #[error("the reply is longer than {MAX_ANSWER} bytes")]
    TooLong,
    /// The reply is not JSON of an answer.
    #[error("the reply is not an answer in JSON")]
    Json(#[source] serde_json::Error),
    /// The watcher could not read the question.
    #[error("the watcher could not read the question: {0}")]
    Refused(String),
}

impl Diagnostic for AskError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            AskError::NoWatcher { .. } => {
                "start it (systemctl start pinplan-watch), or give the --socket it listens on"
                    .to_owned()
            }
            AskError::Timeout { .. } => "the watcher is busy or stuck: see journalctl -u \
                pinplan-watch; a longer --timeout-ms waits longer"
                .to_owned(),
            AskError::Protocol { .. } => "the hook and the watcher may be different pinplan \
                versions: restart pinplan-watch after an upgrade"
                .to_owned(),
            AskError::Io { source, .. } if source.kind() == ErrorKind::PermissionDenied => {
                "the socket is root's (mode 0600): ask as root".to_owned()
            }
            AskError::Io { .. } => return None,
        })
    }
}

/// What the hook does when no watcher answered: without `strict` the
/// domain starts (the default, with `reason` saying why, for a warning),
/// with `strict` it is refused, with the fix. Letting it through is the
/// default because a watcher that is down or being upgraded must not stop
/// every VM on the host from starting, and a domain defined while the
/// watcher ran carries its pins in its configuration already.
pub fn when_no_answer(strict: bool, err: &AskError) -> Answer {
    let what = crate::error::Rendered::of(err);
    let mut why = what.message;
    for cause in what.causes {
        why.push_str(": ");
        why.push_str(&cause);
    }
    if strict {
        Answer::refused(
            format!("{why}, and the hook is --strict"),
            "start the watcher (systemctl start pinplan-watch), or reinstall the hook \
             without --strict to let starts through when no watcher answers",
        )
    } else {
        Answer {
            allow: true,
            reason: Some(format!("{why}: start let through unchecked")),
            fix: None,
        }
    }
}

/// Asks the watcher on `path` about `ask` and waits at most `timeout` for
/// its answer, connecting included.
pub fn ask(path: &Path, ask: &Ask, timeout: Duration) -> Result<Answer, AskError> {
    let deadline = Instant::now() + timeout;
    let io = |source: std::io::Error| match source.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => AskError::Timeout {
            path: path.to_owned(),
            timeout,
        },
        _ => AskError::Io {
            path: path.to_owned(),
            source,
        },
    };
    let mut stream = match connect_within(path, timeout) {
        Ok(stream) => stream,
        Err(source) if no_listener(&source) => {
            return Err(AskError::NoWatcher {
                path: path.to_owned(),
                source,
            })
        }
        Err(source) => return Err(io(source)),
    };
    let mut line = serde_json::to_vec(ask).map_err(|e| AskError::Protocol {
        path: path.to_owned(),
        problem: Problem::Json(e),
    })?;
    line.push(b'\n');
    let left = remaining(deadline).ok_or_else(|| io(ErrorKind::TimedOut.into()))?;
    stream.set_write_timeout(Some(left)).map_err(io)?;
    stream.write_all(&line).map_err(io)?;
    let protocol = |problem| AskError::Protocol {
        path: path.to_owned(),
        problem,
    };
    let reply = match read_line(&mut stream, MAX_ANSWER, deadline) {
        Ok(reply) => reply,
        Err(LineError::Closed) => return Err(protocol(Problem::Closed)),
        Err(LineError::TooLong) => return Err(protocol(Problem::TooLong)),
        Err(LineError::Io(source)) => return Err(io(source)),
    };
    match serde_json::from_slice(&reply) {
        Ok(Reply::Answer(answer)) => Ok(answer),
        Ok(Reply::Error(e)) => Err(protocol(Problem::Refused(e.error))),
        Err(e) => Err(protocol(Problem::Json(e))),
    }
}

/// Whether a connection failed because nothing listens (no socket file, or
/// a socket nobody accepts on).
fn no_listener(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused)
}

/// The time left before `deadline`, none when it passed.
fn remaining(deadline: Instant) -> Option<Duration> {
    Some(deadline.saturating_duration_since(Instant::now())).filter(|d| !d.is_zero())
}

/// Connects to `path` within `timeout`. `connect` on a Unix socket blocks
/// while the listener's backlog is full (a watcher that stopped
/// accepting), and std offers no timeout for it: it runs on a thread of its
/// own, which is left to finish alone when the time is up.
fn connect_within(path: &Path, timeout: Duration) -> Result<UnixStream, std::io::Error> {
    let (sent, received) = mpsc::sync_channel(1);
    let target = path.to_owned();
    std::thread::Builder::new()
        .name("pinplan-connect".to_owned())
        .spawn(move || {
            let _ = sent.send(UnixStream::connect(target));
        })?;
    match received.recv_timeout(timeout) {
        Ok(connected) => connected,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(ErrorKind::TimedOut.into()),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(std::io::Error::other(
            "the connecting thread ended without a word",
        )),
    }
}

/// Why a line was not read.
#[derive(Debug)]
enum LineError {
    /// The peer closed before a newline.
    Closed,
    /// More than the limit came before a newline.
    TooLong,
    /// A read failed or timed out (`WouldBlock`/`TimedOut`).
    Io(std::io::Error),
}

/// Reads one newline-terminated line of at most `max` bytes (the newline
/// and anything after it left out) before `deadline`.
fn read_line(stream: &mut UnixStream, max: usize, deadline: Instant) -> Result<Vec<u8>, LineError> {
    let mut line = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let left = remaining(deadline).ok_or(LineError::Io(ErrorKind::TimedOut.into()))?;
        stream.set_read_timeout(Some(left)).map_err(LineError::Io)?;
        let read = match stream.read(&mut chunk) {
            Ok(0) => return Err(LineError::Closed),
            Ok(read) => read,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(LineError::Io(e)),
        };
        let got = &chunk[..read];
        let end = got.iter().position(|&b| b == b'\n');
        line.extend_from_slice(&got[..end.unwrap_or(read)]);
        if line.len() > max {
            return Err(LineError::TooLong);
        }
        if end.is_some() {
            return Ok(line);
        }
    }
}
