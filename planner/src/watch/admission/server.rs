//! The watcher's side of the admission socket: binding it ([`Server::bind`]),
//! reading questions within the module's bounds, and handing each on as a
//! [`Pending`] that the watcher answers.

use super::{
    connect_within, read_line, Answer, Ask, ErrorReply, LineError, MAX_QUESTION, MAX_READERS,
    MAX_XML, READ_TIMEOUT, VERSION, WRITE_TIMEOUT,
};
use crate::error::Diagnostic;
use crate::host::lock::{self, FileLock, LockFailure};
use std::io::{ErrorKind, Write as _};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Why the watcher's side failed.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// Another process answers on the socket (or holds its lock).
    #[error("another pinplan watch answers on {}", path.display())]
    Live {
        /// The socket.
        path: PathBuf,
    },
    /// The path is something else than a socket.
    #[error("{} is {kind}, not a socket: not replaced", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
        /// `a symbolic link`, `a regular file`, …
        kind: &'static str,
    },
    /// The socket's directory is not a directory.
    #[error("{} is not a directory: the socket cannot be made in it", path.display())]
    NoDirectory {
        /// The parent directory.
        path: PathBuf,
    },
    /// The OS refused a step.
    #[error("{what} {}", path.display())]
    Io {
        /// `cannot bind`, `cannot lock`, …
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The answer could not be handed to the hook.
    #[error("cannot send the answer about {domain} to its hook")]
    Send {
        /// The domain asked about.
        domain: String,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The answer could not be written as JSON.
    #[error("cannot write the answer about {domain} as JSON")]
    Encode {
        /// The domain asked about.
        domain: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
}

impl Diagnostic for AdmissionError {
    fn hint(&self) -> Option<String> {
        Some(match self {
            AdmissionError::Live { .. } => "one watcher per host: stop the other (systemctl stop \
                pinplan-watch), or give this one another --socket"
                .to_owned(),
            AdmissionError::NotASocket { .. } => {
                "move it away, or give another --socket: pinplan replaces only a socket \
                 nothing listens on"
                    .to_owned()
            }
            AdmissionError::NoDirectory { .. } => {
                "create the directory, or give a --socket in one that exists".to_owned()
            }
            AdmissionError::Send { .. } => "the hook stopped waiting (its --timeout-ms) \
                or was killed; libvirt went on by the hook's rule"
                .to_owned(),
            AdmissionError::Io { .. } | AdmissionError::Encode { .. } => return None,
        })
    }
}

/// A question received, waiting for the watcher's answer.
#[derive(Debug)]
pub struct Pending {
    /// The question.
    pub ask: Ask,
    stream: UnixStream,
}

impl Pending {
    /// Hands `answer` to the hook that asked. Dropping a `Pending` instead
    /// closes the connection: the hook reads [`super::Problem::Closed`].
    pub fn answer(mut self, answer: &Answer) -> Result<(), AdmissionError> {
        let domain = || self.ask.domain.clone();
        let mut line = serde_json::to_vec(answer).map_err(|source| AdmissionError::Encode {
            domain: domain(),
            source,
        })?;
        line.push(b'\n');
        self.stream
            .set_write_timeout(Some(WRITE_TIMEOUT))
            .and_then(|()| self.stream.write_all(&line))
            .map_err(|source| AdmissionError::Send {
                domain: domain(),
                source,
            })
    }
}

/// Why a line is no question: the text of the error reply.
#[derive(Debug, thiserror::Error)]
enum BadQuestion {
    #[error("not a question: {0}")]
    Json(serde_json::Error),
    #[error("protocol version {0} asked, this watcher speaks {VERSION}")]
    Version(u32),
    #[error("the question names no domain")]
    NoDomain,
    #[error("the domain XML is longer than {MAX_XML} bytes")]
    TooLong,
}

/// The question on `line`.
fn parse_question(line: &[u8]) -> Result<Ask, BadQuestion> {
    let ask: Ask = serde_json::from_slice(line).map_err(BadQuestion::Json)?;
    if ask.version != VERSION {
        return Err(BadQuestion::Version(ask.version));
    }
    if ask.domain.is_empty() {
        return Err(BadQuestion::NoDomain);
    }
    if ask.xml.len() > MAX_XML {
        return Err(BadQuestion::TooLong);
    }
    Ok(ask)
}

/// Writes an error reply, as far as the client takes it.
fn reply_error(mut stream: UnixStream, error: String) {
    tracing::warn!("admission socket: {error}");
    let Ok(mut line) = serde_json::to_vec(&ErrorReply { error }) else {
        return;
    };
    line.push(b'\n');
    let _ = stream
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .and_then(|()| stream.write_all(&line));
}

/// Reads the question of one client: a `Pending`, or nothing (the client
/// was answered with an error, or dropped).
fn read_question(mut stream: UnixStream) -> Option<Pending> {
    let limit = Instant::now() + READ_TIMEOUT;
    match read_line(&mut stream, MAX_QUESTION, limit) {
        Ok(line) => match parse_question(&line) {
            Ok(ask) => Some(Pending { ask, stream }),
            Err(error) => {
                reply_error(stream, error.to_string());
                None
            }
        },
        Err(LineError::TooLong) => {
            reply_error(
                stream,
                format!("a question is at most {MAX_QUESTION} bytes"),
            );
            None
        }
        Err(LineError::Closed) => None,
        Err(LineError::Io(e)) => {
            tracing::warn!(
                "admission socket: no question read from a client (it has {READ_TIMEOUT:?}): {e}"
            );
            None
        }
    }
}

/// The listening socket, bound but not answering yet ([`Server::serve`]).
#[derive(Debug)]
pub struct Server {
    listener: UnixListener,
    bound: Bound,
}

/// The socket file while it is ours: removed when dropped (if it is still
/// the one bound), with the lock that keeps a second watcher off it.
#[derive(Debug)]
struct Bound {
    path: PathBuf,
    inode: (u64, u64),
    _lock: FileLock,
}

impl Drop for Bound {
    fn drop(&mut self) {
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.inode);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What is at a path that is not a socket, in words.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "neither a file nor a socket"
    }
}

impl Server {
    /// Binds the socket at `path`, mode 0600: refused while another process
    /// answers on it or holds its lock (`PATH.lock`, held while the socket
    /// lives), a stale socket (nothing listens) replaced, anything else at
    /// `path` (a link, a file) left alone and refused. The socket is bound
    /// under a temporary name, made private, then renamed into place: it is
    /// never reachable by others, even for an instant.
    pub fn bind(path: &Path) -> Result<Server, AdmissionError> {
        let failed = |what, path: &Path| {
            let path = path.to_owned();
            move |source| AdmissionError::Io { what, path, source }
        };
        let dir = crate::host::write::parent_dir(path);
        let name = path
            .file_name()
            .filter(|_| std::fs::metadata(dir).is_ok_and(|m| m.is_dir()));
        let Some(name) = name else {
            return Err(AdmissionError::NoDirectory {
                path: dir.to_owned(),
            });
        };
        let mut lock_name = name.to_owned();
        lock_name.push(".lock");
        let wait = lock::Wait {
            limit: Duration::ZERO,
            poll: Duration::ZERO,
        };
        let lock = lock::acquire(&dir.join(&lock_name), wait, &mut || {}).map_err(|e| match e {
            LockFailure::Busy => AdmissionError::Live {
                path: path.to_owned(),
            },
            LockFailure::Open(source) => failed("cannot lock", &dir.join(&lock_name))(source),
        })?;
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_socket() => {
                if connect_within(path, READ_TIMEOUT).is_ok() {
                    return Err(AdmissionError::Live {
                        path: path.to_owned(),
                    });
                }
                tracing::info!("replacing the stale socket {}", path.display());
            }
            Ok(meta) => {
                return Err(AdmissionError::NotASocket {
                    path: path.to_owned(),
                    kind: kind(&meta),
                })
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(source) => return Err(failed("cannot inspect", path)(source)),
        }
        // Unique in this process too: two sockets may be bound in one directory.
        static BOUND: AtomicUsize = AtomicUsize::new(0);
        let n = BOUND.fetch_add(1, Ordering::SeqCst);
        let temp = dir.join(format!(".pinplan-{}-{n}.sock", std::process::id()));
        // A leftover of a killed process that had our pid (no living one has it).
        let _ = std::fs::remove_file(&temp);
        let listener = UnixListener::bind(&temp).map_err(failed("cannot bind", &temp))?;
        let placed = std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o600))
            .and_then(|()| std::fs::rename(&temp, path));
        if let Err(source) = placed {
            let _ = std::fs::remove_file(&temp);
            return Err(failed("cannot place the socket at", path)(source));
        }
        let meta = std::fs::symlink_metadata(path).map_err(failed("cannot inspect", path))?;
        let bound = Bound {
            path: path.to_owned(),
            inode: (meta.dev(), meta.ino()),
            _lock: lock,
        };
        Ok(Server { listener, bound })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.bound.path
    }

    /// Accepts questions on a thread of its own until the [`Serving`] is
    /// dropped; each is read on a thread of its own (the bounds of the
    /// module doc) and handed to `sink`, one at a time in the order read,
    /// on one more thread. A malformed question gets an error reply and
    /// never reaches `sink`.
    pub fn serve(self, sink: impl Fn(Pending) + Send + 'static) -> Result<Serving, AdmissionError> {
        let Server { listener, bound } = self;
        let spawn_failed = |source| AdmissionError::Io {
            what: "cannot start a thread to answer on",
            path: bound.path.clone(),
            source,
        };
        let (questions, received) = mpsc::channel::<Pending>();
        std::thread::Builder::new()
            .name("pinplan-admit".to_owned())
            .spawn(move || received.into_iter().for_each(sink))
            .map_err(spawn_failed)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ended, ended_rx) = mpsc::sync_channel(1);
        let flag = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("pinplan-accept".to_owned())
            .spawn(move || {
                accept(&listener, &flag, &questions);
                let _ = ended.send(());
            })
            .map_err(spawn_failed)?;
        Ok(Serving {
            stop,
            ended: ended_rx,
            bound,
        })
    }
}

/// Accepts clients until `stop` is set, each read on a thread of its own.
fn accept(listener: &UnixListener, stop: &AtomicBool, questions: &mpsc::Sender<Pending>) {
    let readers = Arc::new(AtomicUsize::new(0));
    for client in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let stream = match client {
            Ok(stream) => stream,
            Err(e) => {
                // Out of file descriptors, say: no busy loop.
                tracing::warn!("admission socket: cannot accept a client: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if readers.fetch_add(1, Ordering::SeqCst) >= MAX_READERS {
            readers.fetch_sub(1, Ordering::SeqCst);
            reply_error(
                stream,
                format!("busy: {MAX_READERS} questions are being read"),
            );
            continue;
        }
        let (count, questions) = (Arc::clone(&readers), questions.clone());
        let spawned = std::thread::Builder::new()
            .name("pinplan-question".to_owned())
            .spawn(move || {
                let pending = read_question(stream);
                count.fetch_sub(1, Ordering::SeqCst);
                if let Some(pending) = pending {
                    let _ = questions.send(pending);
                }
            });
        if let Err(e) = spawned {
            readers.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!("admission socket: cannot start a thread to read a question: {e}");
        }
    }
}

/// The socket, answering. Dropping it stops accepting (at once), removes
/// the socket file and releases its lock; questions being read are handed
/// on or dropped within [`READ_TIMEOUT`], and the thread calling the sink
/// ends after the last of them.
#[derive(Debug)]
pub struct Serving {
    stop: Arc<AtomicBool>,
    ended: mpsc::Receiver<()>,
    bound: Bound,
}

impl Serving {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.bound.path
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // The accept thread sleeps in accept(2): a connection of our own
        // wakes it to see the flag.
        match connect_within(&self.bound.path, READ_TIMEOUT) {
            Ok(_) => {
                if self.ended.recv_timeout(READ_TIMEOUT).is_err() {
                    tracing::warn!("admission socket: the accepting thread did not end");
                }
            }
            Err(e) => tracing::warn!(
                "admission socket {}: cannot wake the accepting thread ({e}); it ends with the process",
                self.bound.path.display()
            ),
        }
    }
}
