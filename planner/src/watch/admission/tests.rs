//! The admission socket on real sockets in a scratch directory.

use super::*;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixListener;
use std::sync::{Arc, Mutex};

fn question(domain: &str) -> Ask {
    Ask {
        version: VERSION,
        domain: domain.to_owned(),
        xml: format!("<domain type=\"kvm\"><name>{domain}</name></domain>"),
    }
}

/// A watcher on `dir/watch.sock` that refuses `vm-no` and lets others
/// start, recording what it was asked.
fn watcher(dir: &Path) -> (Serving, Arc<Mutex<Vec<Ask>>>) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let server = Server::bind(&dir.join(DEFAULT_SOCKET)).unwrap();
    let serving = server
        .serve(move |pending: Pending| {
            seen.lock().unwrap().push(pending.ask.clone());
            let answer = if pending.ask.domain == "vm-no" {
                Answer::refused("CPUs 2-3 are vm1's", "stop vm1")
            } else {
                Answer::allowed()
            };
            pending.answer(&answer).unwrap();
        })
        .unwrap();
    (serving, asked)
}

/// What the watcher replies to `bytes` sent raw.
fn raw(path: &Path, bytes: &[u8]) -> String {
    let mut stream = UnixStream::connect(path).unwrap();
    // The watcher may close before taking all of an over-long question.
    let _ = stream.write_all(bytes);
    let mut reply = String::new();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let _ = stream.read_to_string(&mut reply);
    reply
}

#[test]
fn a_question_gets_its_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (serving, asked) = watcher(dir.path());
    let path = serving.path().to_owned();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let timeout = Duration::from_secs(5);
    let started = Instant::now();
    assert_eq!(
        ask(&path, &question("vm-yes"), timeout).unwrap(),
        Answer::allowed()
    );
    println!("one question answered in {:?}", started.elapsed());
    assert_eq!(
        ask(&path, &question("vm-no"), timeout).unwrap(),
        Answer::refused("CPUs 2-3 are vm1's", "stop vm1")
    );
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked, [question("vm-yes"), question("vm-no")]);
}

#[test]
fn a_watcher_that_never_answers_times_out_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let kept = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&kept);
    let server = Server::bind(&dir.path().join(DEFAULT_SOCKET)).unwrap();
    let serving = server
        .serve(move |pending| keep.lock().unwrap().push(pending))
        .unwrap();
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let err = ask(serving.path(), &question("vm1"), timeout).unwrap_err();
    let took = started.elapsed();
    println!("ask timed out after {took:?} (bound {timeout:?})");
    assert!(matches!(err, AskError::Timeout { .. }), "{err:?}");
    assert!(
        took >= timeout && took < timeout + Duration::from_millis(500),
        "{took:?}"
    );
    assert_eq!(kept.lock().unwrap().len(), 1);
}

#[test]
fn a_question_dropped_unanswered_reads_as_closed() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::bind(&dir.path().join(DEFAULT_SOCKET)).unwrap();
    let serving = server.serve(drop).unwrap();
    let err = ask(serving.path(), &question("vm1"), Duration::from_secs(5)).unwrap_err();
    assert!(
        matches!(
            err,
            AskError::Protocol {
                problem: Problem::Closed,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn no_socket_or_a_stale_one_is_no_watcher() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(DEFAULT_SOCKET);
    let timeout = Duration::from_secs(1);
    let err = ask(&path, &question("vm1"), timeout).unwrap_err();
    assert!(matches!(err, AskError::NoWatcher { .. }), "{err:?}");
    drop(UnixListener::bind(&path).unwrap());
    let err = ask(&path, &question("vm1"), timeout).unwrap_err();
    assert!(matches!(err, AskError::NoWatcher { .. }), "{err:?}");
    // A stale socket is replaced by the next watcher.
    let (serving, _) = watcher(dir.path());
    assert_eq!(
        ask(&path, &question("vm1"), timeout).unwrap(),
        Answer::allowed()
    );
    drop(serving);
}

#[test]
fn a_live_socket_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (serving, _) = watcher(dir.path());
    let err = Server::bind(serving.path()).unwrap_err();
    assert!(matches!(err, AdmissionError::Live { .. }), "{err:?}");
    // Another program listening there, without pinplan's lock.
    let other = tempfile::tempdir().unwrap();
    let path = other.path().join("x.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    let err = Server::bind(&path).unwrap_err();
    assert!(matches!(err, AdmissionError::Live { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn links_files_and_missing_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "mine").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path().join("elsewhere"), &link).unwrap();
    for (path, kind) in [(&file, "a regular file"), (&link, "a symbolic link")] {
        match Server::bind(path) {
            Err(AdmissionError::NotASocket { kind: got, .. }) => assert_eq!(got, kind),
            other => panic!("{path:?}: {other:?}"),
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");
    let err = Server::bind(&file.join("watch.sock")).unwrap_err();
    assert!(matches!(err, AdmissionError::NoDirectory { .. }), "{err:?}");
}

#[test]
fn bad_clients_never_stop_the_next_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (serving, asked) = watcher(dir.path());
    let path = serving.path().to_owned();
    let timeout = Duration::from_secs(5);
    // A client that says nothing does not delay the next one.
    let silent = UnixStream::connect(&path).unwrap();
    let started = Instant::now();
    assert_eq!(
        ask(&path, &question("vm1"), timeout).unwrap(),
        Answer::allowed()
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let mut other = question("vm1");
    other.version = VERSION + 1;
    let mut wrong_version = serde_json::to_vec(&other).unwrap();
    wrong_version.push(b'\n');
    for (bytes, expected) in [
        (&b"garbage\n"[..], "not a question"),
        (&wrong_version[..], "protocol version 2 asked"),
        (&vec![b'x'; MAX_QUESTION + 2][..], "at most"),
    ] {
        let reply = raw(&path, bytes);
        assert!(
            reply.starts_with("{\"error\":") && reply.contains(expected),
            "{reply}"
        );
    }
    let big = Ask {
        xml: "x".repeat(MAX_XML + 1),
        ..question("vm1")
    };
    let err = ask(&path, &big, timeout).unwrap_err();
    assert!(
        matches!(
            err,
            AskError::Protocol {
                problem: Problem::Refused(_),
                ..
            }
        ),
        "{err:?}"
    );
    // The silent client is dropped after READ_TIMEOUT; the watcher answers on.
    let mut silent = silent;
    let mut rest = Vec::new();
    silent.set_read_timeout(Some(READ_TIMEOUT * 2)).unwrap();
    assert_eq!(silent.read_to_end(&mut rest).unwrap(), 0);
    assert!(!ask(&path, &question("vm-no"), timeout).unwrap().allow);
    assert_eq!(
        asked.lock().unwrap().len(),
        2,
        "only good questions reach the sink"
    );
}

#[test]
fn dropping_the_watcher_removes_its_socket() {
    let dir = tempfile::tempdir().unwrap();
    let (serving, _) = watcher(dir.path());
    let path = serving.path().to_owned();
    let started = Instant::now();
    drop(serving);
    println!("the watcher stopped in {:?}", started.elapsed());
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!path.exists());
    let err = ask(&path, &question("vm1"), Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, AskError::NoWatcher { .. }), "{err:?}");
    // The socket is free for the next watcher at once.
    let (_again, _) = watcher(dir.path());
    // A bound server never served removes its socket too.
    drop(_again);
    let server = Server::bind(&path).unwrap();
    drop(server);
    assert!(!path.exists());
}

#[test]
fn no_answer_lets_through_unless_strict() {
    let err = AskError::Timeout {
        path: PathBuf::from("/run/pinplan/watch.sock"),
        timeout: Duration::from_millis(5000),
    };
    let lenient = when_no_answer(false, &err);
    assert!(lenient.allow);
    assert_eq!(
        lenient.reason.as_deref(),
        Some(
            "no pinplan watch answered on /run/pinplan/watch.sock within 5000 ms: \
             start let through unchecked"
        )
    );
    let strict = when_no_answer(true, &err);
    assert!(!strict.allow);
    assert!(strict
        .reason
        .unwrap()
        .contains("/run/pinplan/watch.sock within 5000 ms"));
    assert!(strict
        .fix
        .unwrap()
        .contains("systemctl start pinplan-watch"));
}
