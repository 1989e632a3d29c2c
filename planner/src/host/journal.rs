//! The one envelope every journal is written in — `apply`'s, `apply
//! --fleet`'s and `isolate`'s — with its one atomic write ([`write()`]) and
//! its one checked read ([`read`]): one JSON object whose `tool` says which
//! command wrote it and `version` the format of that command's journal,
//! the command's own fields beside them ([`Envelope`]):
//!
//! ```json
//! {"tool": "pinplan apply", "version": 2, "uri": "qemu:///system", "status": "applied", …}
//! ```
//!
//! A pinplan reads every version of a tool's journal up to its own
//! ([`Tool::version`]): a user may upgrade between `apply` and `apply
//! --rollback`. Version 1 of `apply`'s journal said `"pinplan_journal": 1`
//! and version 1 of `apply --fleet`'s `"pinplan_fleet_journal": 1` instead
//! of `tool` and `version`, and are read as such; `isolate`'s journal has
//! always been in the envelope. Whatever is wrong with a file — missing,
//! unreadable, too large, not JSON, another tool's, a version from the
//! future, fields that do not match — is one [`ReadError`] naming it.
//!
//! What the fields mean, and what a stage checks beyond them (that an
//! apply journal is for the URI given, that an isolate journal names only
//! files isolation changes), is the stage's business.

use crate::error::{Diagnostic, WriteError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The command that writes a journal, as the journal's `tool` field names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tool {
    /// `pinplan apply PLAN`: one host's VMs as they were.
    #[serde(rename = "pinplan apply")]
    Apply,
    /// `pinplan apply --fleet DIR`: which host journals one run wrote.
    #[serde(rename = "pinplan apply --fleet")]
    FleetApply,
    /// `pinplan isolate`: every value an isolation changed.
    #[serde(rename = "pinplan isolate")]
    Isolate,
}

impl Tool {
    /// The version of its journal this pinplan writes; it reads every
    /// version from 1 up to it.
    pub const fn version(self) -> u32 {
        match self {
            // 2: the envelope; 1 had `pinplan_journal` / `pinplan_fleet_journal`.
            Tool::Apply | Tool::FleetApply => 2,
            Tool::Isolate => 1,
        }
    }

    /// The command, as the `tool` field says it: `pinplan apply`.
    pub const fn name(self) -> &'static str {
        match self {
            Tool::Apply => "pinplan apply",
            Tool::FleetApply => "pinplan apply --fleet",
            Tool::Isolate => "pinplan isolate",
        }
    }

    /// What a default journal's file name says after `pinplan-`:
    /// `STATE/pinplan-KIND-SECONDS-PID.json`.
    pub const fn file_kind(self) -> &'static str {
        match self {
            Tool::Apply => "journal",
            Tool::FleetApply => "fleet-journal",
            Tool::Isolate => "isolate",
        }
    }

    /// `(an `apply` journal is undone with pinplan apply --rollback)`.
    fn undone_with(self) -> &'static str {
        match self {
            Tool::Apply | Tool::FleetApply => {
                "an `apply` journal is undone with pinplan apply --rollback"
            }
            Tool::Isolate => "an `isolate` journal is undone with pinplan isolate --undo",
        }
    }

    /// Which file to give instead of one that is not its journal.
    fn give(self) -> &'static str {
        match self {
            Tool::Apply | Tool::FleetApply => "give the journal file that `pinplan apply` printed",
            Tool::Isolate => "give the journal `pinplan isolate` wrote, unchanged",
        }
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A tool's own fields of its journal, inside the envelope. Every version
/// the tool reads ([`Tool::version`]) parses into the same body.
pub trait Body {
    /// The tool whose journal this is.
    const TOOL: Tool;
}

/// A journal: which tool wrote it, the version of its format, and the
/// tool's fields, written beside `tool` and `version` in one JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Envelope<T> {
    /// The command that wrote it.
    pub tool: Tool,
    /// The format of that command's journal.
    pub version: u32,
    /// The command's own fields.
    #[serde(flatten)]
    pub body: T,
}

impl<'a, T: Body + Serialize> Envelope<&'a T> {
    /// `body` as this pinplan writes it: its tool, that tool's version.
    pub fn of(body: &'a T) -> Envelope<&'a T> {
        Envelope {
            tool: T::TOOL,
            version: T::TOOL.version(),
            body,
        }
    }
}

/// A journal's text: one JSON object, pretty, ending in a newline.
pub fn to_text<T: Body + Serialize>(body: &T) -> String {
    let mut text = serde_json::to_string_pretty(&Envelope::of(body)).unwrap_or_default();
    text.push('\n');
    text
}

/// Whether a journal is written for the first time or again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Before the first change it records: the file must not exist (a
    /// journal may be the only record of the state before, and is never
    /// overwritten).
    New,
    /// As its run goes on (a status, what became of a change): over itself.
    Update,
}

/// Writes `body`'s journal to `path` atomically and durably (a temporary
/// file in the same directory, fsync, rename, fsync of the directory; mode
/// 0600: a journal may hold whole domain definitions).
pub fn write<T: Body + Serialize>(path: &Path, body: &T, how: Write) -> Result<(), WriteError> {
    let text = to_text(body);
    match how {
        Write::New => super::write::write_new(path, &text, 0o600),
        Write::Update => super::write::write_atomically(path, &text, 0o600),
    }
}

/// The largest file read as a journal: one holds a few hundred KiB of
/// domain definitions at most.
pub const MAX_JOURNAL: u64 = 64 << 20;

/// Why a file cannot be read as a tool's journal.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file cannot be read: missing, a directory, not UTF-8.
    #[error("cannot read the journal {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than any journal ([`MAX_JOURNAL`]).
    #[error("{}: larger than {}: not a pinplan journal", path.display(), crate::text::bytes(MAX_JOURNAL))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The tool whose journal was wanted.
        expected: Tool,
    },
    /// Not JSON, or the fields are not the tool's.
    #[error("{}:{line}: not a pinplan journal", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The tool whose journal was wanted.
        expected: Tool,
        /// 1-based line.
        line: usize,
        /// What the JSON reader said.
        #[source]
        source: serde_json::Error,
    },
    /// Another tool's journal, or a JSON object that is no journal.
    #[error("{}: not a journal of `{expected}`{}", path.display(), found.map(|t| format!(" ({})", t.undone_with())).unwrap_or_default())]
    OtherTool {
        /// The file.
        path: PathBuf,
        /// The tool whose journal was wanted.
        expected: Tool,
        /// The tool that wrote it, when a pinplan did.
        found: Option<Tool>,
    },
    /// A version of the tool's journal this pinplan does not read: one
    /// from a newer pinplan.
    #[error("{}: journal version {version}, this pinplan reads version {reads}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The tool whose journal it is.
        expected: Tool,
        /// Its version.
        version: u32,
        /// The newest version this pinplan reads.
        reads: u32,
    },
}

impl Diagnostic for ReadError {
    fn hint(&self) -> Option<String> {
        match self {
            ReadError::Read { source, .. } => (source.kind()
                == std::io::ErrorKind::PermissionDenied)
                .then(|| "run as root on the host itself".to_owned()),
            ReadError::Version { version, reads, .. } if version > reads => {
                Some("a newer pinplan wrote it: use that one".to_owned())
            }
            ReadError::TooLarge { expected, .. }
            | ReadError::Parse { expected, .. }
            | ReadError::OtherTool { expected, .. }
            | ReadError::Version { expected, .. } => Some(expected.give().to_owned()),
        }
    }
}

/// Reads the journal at `path` as `T`'s tool's: at most [`MAX_JOURNAL`]
/// bytes of a regular file, in any version that tool reads.
pub fn read<T: Body + DeserializeOwned>(path: &Path) -> Result<Envelope<T>, ReadError> {
    parse(path, &read_text(path, T::TOOL)?)
}

/// [`read`] for a journal's text, read from `path`.
pub fn parse<T: Body + DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<Envelope<T>, ReadError> {
    let expected = T::TOOL;
    let parse_error = |source: serde_json::Error| ReadError::Parse {
        path: path.to_owned(),
        expected,
        line: source.line(),
        source,
    };
    let stamp: Stamp = serde_json::from_str(text).map_err(parse_error)?;
    let (tool, version) = match stamp.tool_and_version() {
        Some((tool, version)) if tool == expected => (tool, version),
        other => {
            return Err(ReadError::OtherTool {
                path: path.to_owned(),
                expected,
                found: other.map(|(tool, _)| tool),
            })
        }
    };
    if !(1..=tool.version()).contains(&version) {
        return Err(ReadError::Version {
            path: path.to_owned(),
            expected,
            version,
            reads: tool.version(),
        });
    }
    // The body's own reader, not through the envelope's `flatten`: its
    // errors keep the line and column of the field at fault.
    let body = serde_json::from_str(text).map_err(parse_error)?;
    Ok(Envelope {
        tool,
        version,
        body,
    })
}

/// Which tool wrote the journal at `path`; `None` for a file that cannot be
/// read or is no pinplan journal.
pub fn tool_of(path: &Path) -> Option<Tool> {
    // The tool wanted only words a refusal, and this one is dropped.
    let text = read_text(path, Tool::Apply).ok()?;
    serde_json::from_str::<Stamp>(&text)
        .ok()?
        .tool_and_version()
        .map(|(tool, _)| tool)
}

/// What says which tool wrote a journal, and in which version: the
/// envelope's `tool` and `version`, or the key of a version 1 journal of
/// `apply` or `apply --fleet`. Read from any JSON object (the other fields
/// are the body's); anything but an object is refused.
#[derive(Default)]
struct Stamp {
    tool: Option<String>,
    version: Option<u32>,
    pinplan_journal: Option<u32>,
    pinplan_fleet_journal: Option<u32>,
}

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: serde::Deserializer<'de>>(reader: D) -> Result<Stamp, D::Error> {
        reader.deserialize_map(StampFields)
    }
}

/// Reads a [`Stamp`] out of a JSON object, passing over the other fields.
struct StampFields;

impl<'de> serde::de::Visitor<'de> for StampFields {
    type Value = Stamp;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut fields: M) -> Result<Stamp, M::Error> {
        let mut stamp = Stamp::default();
        while let Some(key) = fields.next_key::<String>()? {
            match key.as_str() {
                "tool" => stamp.tool = fields.next_value()?,
                "version" => stamp.version = fields.next_value()?,
                "pinplan_journal" => stamp.pinplan_journal = fields.next_value()?,
                "pinplan_fleet_journal" => stamp.pinplan_fleet_journal = fields.next_value()?,
                _ => {
                    fields.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(stamp)
    }
}

impl Stamp {
    /// The tool and version, when a pinplan wrote it (a missing version is 0,
    /// which no pinplan reads).
    fn tool_and_version(&self) -> Option<(Tool, u32)> {
        if let Some(version) = self.pinplan_journal {
            return Some((Tool::Apply, version));
        }
        if let Some(version) = self.pinplan_fleet_journal {
            return Some((Tool::FleetApply, version));
        }
        let tool = [Tool::Apply, Tool::FleetApply, Tool::Isolate]
            .into_iter()
            .find(|t| self.tool.as_deref() == Some(t.name()))?;
        Some((tool, self.version.unwrap_or(0)))
    }
}

/// At most [`MAX_JOURNAL`] bytes of the regular file `path`, as text. A FIFO
/// or a device is refused, never waited on or read without end.
fn read_text(path: &Path, expected: Tool) -> Result<String, ReadError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let failed = |source| ReadError::Read {
        path: path.to_owned(),
        source,
    };
    let too_large = || ReadError::TooLarge {
        path: path.to_owned(),
        expected,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(failed)?;
    let meta = file.metadata().map_err(failed)?;
    if meta.is_dir() {
        return Err(failed(std::io::Error::from_raw_os_error(libc::EISDIR)));
    }
    if !meta.is_file() {
        return Err(failed(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        )));
    }
    if meta.len() > MAX_JOURNAL {
        return Err(too_large());
    }
    let mut text = String::new();
    file.take(MAX_JOURNAL + 1)
        .read_to_string(&mut text)
        .map_err(failed)?;
    if text.len() as u64 > MAX_JOURNAL {
        return Err(too_large());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    struct Note {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        when: Option<u64>,
    }

    impl Body for Note {
        const TOOL: Tool = Tool::Apply;
    }

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    struct Other {
        text: String,
    }

    impl Body for Other {
        const TOOL: Tool = Tool::Isolate;
    }

    fn note() -> Note {
        Note {
            text: "hello".to_owned(),
            when: Some(7),
        }
    }

    /// The envelope's shape: `tool` and `version` first, the body's fields
    /// beside them; written new once, then updated; read back the same.
    #[test]
    fn a_journal_is_written_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.json");
        assert_eq!(
            to_text(&note()),
            "{\n  \"tool\": \"pinplan apply\",\n  \"version\": 2,\n  \"text\": \"hello\",\n  \"when\": 7\n}\n"
        );
        write(&path, &note(), Write::New).unwrap();
        assert!(write(&path, &note(), Write::New).is_err(), "overwritten");
        let mut later = note();
        later.when = None;
        write(&path, &later, Write::Update).unwrap();
        let back = read::<Note>(&path).unwrap();
        assert_eq!(
            back,
            Envelope {
                tool: Tool::Apply,
                version: 2,
                body: later
            }
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(tool_of(&path), Some(Tool::Apply));
    }

    /// Each way a file is not the journal wanted is its own error, naming
    /// the file, with a hint where one helps.
    #[test]
    fn every_failure_is_one_typed_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.json");
        let shown = path.display().to_string();
        let cases: [(&str, &str, Option<&str>); 9] = [
            ("{", ":1: not a pinplan journal", Some("printed")),
            ("3", ":1: not a pinplan journal", Some("printed")),
            ("{}", ": not a journal of `pinplan apply`", Some("printed")),
            (
                r#"{"tool": "pinplan isolate", "version": 1, "text": "x"}"#,
                ": not a journal of `pinplan apply` (an `isolate` journal is undone with pinplan isolate --undo)",
                Some("printed"),
            ),
            (
                r#"{"tool": "pinplan apply", "version": 3, "text": "x"}"#,
                ": journal version 3, this pinplan reads version 2",
                Some("newer pinplan"),
            ),
            (
                r#"{"pinplan_journal": 9, "text": "x"}"#,
                ": journal version 9, this pinplan reads version 2",
                Some("newer pinplan"),
            ),
            (
                r#"{"tool": "pinplan apply", "text": "x"}"#,
                ": journal version 0, this pinplan reads version 2",
                Some("printed"),
            ),
            (
                r#"{"tool": "pinplan apply", "version": 2, "text": 3}"#,
                ":1: not a pinplan journal",
                Some("printed"),
            ),
            (
                r#"{"tool": "pinplan apply", "version": 2}"#,
                ":1: not a pinplan journal",
                Some("printed"),
            ),
        ];
        for (text, message, hint) in cases {
            std::fs::write(&path, text).unwrap();
            let e = read::<Note>(&path).unwrap_err();
            assert_eq!(e.to_string(), format!("{shown}{message}"), "{text}");
            assert_eq!(
                e.hint().map(|h| hint.is_some_and(|w| h.contains(w))),
                Some(true),
                "{text}: {:?}",
                e.hint()
            );
        }
        let missing = dir.path().join("missing.json");
        let e = read::<Note>(&missing).unwrap_err();
        assert!(matches!(e, ReadError::Read { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("cannot read the journal {}", missing.display())
        );
        assert!(std::error::Error::source(&e).is_some());
        let e = read::<Note>(dir.path()).unwrap_err();
        assert_eq!(
            std::error::Error::source(&e).map(ToString::to_string),
            Some("Is a directory (os error 21)".to_owned())
        );
    }

    /// Version 1 of `apply`'s and `apply --fleet`'s journals, keyed by their
    /// own field, are read as those tools' journals.
    #[test]
    fn version_1_journals_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.json");
        std::fs::write(&path, r#"{"pinplan_journal": 1, "text": "old"}"#).unwrap();
        let old = read::<Note>(&path).unwrap();
        assert_eq!(
            (old.tool, old.version, old.body.text.as_str()),
            (Tool::Apply, 1, "old")
        );
        std::fs::write(&path, r#"{"pinplan_fleet_journal": 1, "text": "old"}"#).unwrap();
        assert_eq!(tool_of(&path), Some(Tool::FleetApply));
        assert!(matches!(
            read::<Note>(&path),
            Err(ReadError::OtherTool {
                found: Some(Tool::FleetApply),
                ..
            })
        ));
        std::fs::write(
            &path,
            r#"{"tool": "pinplan isolate", "version": 1, "text": "i"}"#,
        )
        .unwrap();
        assert_eq!(read::<Other>(&path).unwrap().body.text, "i");
    }

    /// A FIFO is refused at once, not waited on; a file over the cap is
    /// refused unread.
    #[test]
    fn a_fifo_or_a_huge_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.json");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = read::<Note>(&fifo).unwrap_err();
            assert!(matches!(e, ReadError::Read { .. }), "{e:?}");
        }
        let huge = dir.path().join("huge.json");
        let file = std::fs::File::create(&huge).unwrap();
        file.set_len(MAX_JOURNAL + 1).unwrap();
        let e = read::<Note>(&huge).unwrap_err();
        assert!(matches!(e, ReadError::TooLarge { .. }), "{e:?}");
        assert!(e.to_string().starts_with(&huge.display().to_string()));
    }
}
