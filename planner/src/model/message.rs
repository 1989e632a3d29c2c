//! Sentences of a plan that name VMs ([`Message`]), and the plan's warnings
//! ([`Warning`]): the names stay values, so a plan's VMs can be renamed (a
//! fleet's shared plan put under each host's names) without editing text.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// A type that is a sentence on the outside: compared with `&str`,
/// serialised as its text, and read back from text by `$from` (plain text:
/// the names it held are not told apart any more).
macro_rules! sentence {
    ($type:ty, $from:expr) => {
        impl PartialEq<&str> for $type {
            fn eq(&self, other: &&str) -> bool {
                *self == **other
            }
        }

        impl Serialize for $type {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $type {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<$type, D::Error> {
                String::deserialize(deserializer).map($from)
            }
        }
    };
}

/// One part of a [`Message`]: text, or a VM's name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Vm(String),
}

/// A sentence for people whose VM names are kept apart from its text: it
/// prints (and serialises) as the plain sentence, and [`Message::rename`]
/// changes the names and nothing else. Read back from JSON it is plain text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message(Vec<Part>);

impl Message {
    /// An empty message.
    pub fn new() -> Message {
        Message::default()
    }

    /// This message followed by `text`.
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Message {
        self.push_text(text);
        self
    }

    /// This message followed by the VM name `name`.
    #[must_use]
    pub fn vm(mut self, name: impl Into<String>) -> Message {
        self.0.push(Part::Vm(name.into()));
        self
    }

    /// This message followed by `other`, its VM names kept.
    #[must_use]
    pub fn then(mut self, other: Message) -> Message {
        for part in other.0 {
            match part {
                Part::Text(t) => self.push_text(t),
                Part::Vm(v) => self.0.push(Part::Vm(v)),
            }
        }
        self
    }

    /// `names` joined as `a, b and 3 more` (at most `shown` of them named),
    /// each a VM's name.
    pub fn some_names(names: &[&str], shown: usize) -> Message {
        let mut out = Message::new();
        let named = names.len().min(shown);
        for (i, name) in names.iter().take(named).enumerate() {
            if i > 0 {
                out = out.text(", ");
            }
            out = out.vm(*name);
        }
        if names.len() > named {
            out = out.text(format!(" and {} more", names.len() - named));
        }
        out
    }

    /// Every VM name put through `new` (the text is left as it is).
    pub fn rename(&mut self, new: &dyn Fn(&str) -> String) {
        for part in &mut self.0 {
            if let Part::Vm(name) = part {
                *name = new(name);
            }
        }
    }

    fn push_text(&mut self, text: impl Into<String>) {
        let text = text.into();
        match self.0.last_mut() {
            Some(Part::Text(last)) => last.push_str(&text),
            _ => self.0.push(Part::Text(text)),
        }
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in &self.0 {
            match part {
                Part::Text(t) | Part::Vm(t) => f.write_str(t)?,
            }
        }
        Ok(())
    }
}

impl From<String> for Message {
    fn from(text: String) -> Message {
        Message::new().text(text)
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Message {
        Message::new().text(text)
    }
}

impl Message {
    /// What is left of `text` after this message, if `text` starts with it.
    fn strip_from<'t>(&self, mut text: &'t str) -> Option<&'t str> {
        for part in &self.0 {
            let (Part::Text(t) | Part::Vm(t)) = part;
            text = text.strip_prefix(t.as_str())?;
        }
        Some(text)
    }
}

impl PartialEq<str> for Message {
    fn eq(&self, other: &str) -> bool {
        self.strip_from(other).is_some_and(str::is_empty)
    }
}

sentence!(Message, Message::from);

/// What a plan's warning is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WarningKind {
    /// A NIC's locality or a NIC the host does not show.
    Nic,
    /// How a VM was sized: its table, its demand, its memory.
    Sizing,
    /// A domain that runs on the host, planned around or kept.
    Running,
    /// The solver: its time limit, its backend, a fallback.
    Solver,
    /// The host's layout (dies of unequal size, hosts of a fleet).
    Host,
    /// A plan read back from JSON, whose warnings are plain text.
    #[default]
    Other,
}

/// A warning of a plan: about one VM or the whole plan. One about a VM is
/// printed `vm: text` ([`Warning::vm`]), or is a sentence that names it
/// itself ([`Warning::about`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The VM it is about, if one.
    pub vm: Option<String>,
    /// What it is about.
    pub kind: WarningKind,
    /// What it says (after `vm: ` when it is printed after the VM's name).
    pub text: Message,
    /// Whether it is printed after `vm: `.
    prefixed: bool,
}

impl Warning {
    /// A warning about VM `vm`.
    pub fn vm(vm: impl Into<String>, kind: WarningKind, text: impl Into<Message>) -> Warning {
        Warning {
            vm: Some(vm.into()),
            kind,
            text: text.into(),
            prefixed: true,
        }
    }

    /// A warning about VM `vm` in a sentence `text` that names it (as
    /// [`Message::vm`]): printed as it is.
    pub fn about(vm: impl Into<String>, kind: WarningKind, text: Message) -> Warning {
        Warning {
            vm: Some(vm.into()),
            kind,
            text,
            prefixed: false,
        }
    }

    /// A warning about the whole plan.
    pub fn plan(kind: WarningKind, text: impl Into<Message>) -> Warning {
        Warning {
            vm: None,
            kind,
            text: text.into(),
            prefixed: false,
        }
    }

    /// The same warning with every VM name (its own and those its text
    /// names) put through `new`.
    pub fn rename(&mut self, new: &dyn Fn(&str) -> String) {
        if let Some(vm) = &mut self.vm {
            *vm = new(vm);
        }
        self.text.rename(new);
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.vm {
            Some(vm) if self.prefixed => write!(f, "{vm}: {}", self.text),
            _ => write!(f, "{}", self.text),
        }
    }
}

impl PartialEq<str> for Warning {
    fn eq(&self, other: &str) -> bool {
        let text = match &self.vm {
            Some(vm) if self.prefixed => other
                .strip_prefix(vm.as_str())
                .and_then(|rest| rest.strip_prefix(": ")),
            _ => Some(other),
        };
        text.is_some_and(|t| self.text == *t)
    }
}

sentence!(Warning, |text: String| Warning::plan(
    WarningKind::Other,
    text
));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_message_changes_the_names_and_nothing_else() {
        let mut m = Message::new()
            .vm("#0")
            .text(" needs 4 cores; left after ")
            .then(Message::some_names(&["#1", "#2", "#3"], 2));
        assert_eq!(
            m.to_string(),
            "#0 needs 4 cores; left after #1, #2 and 1 more"
        );
        m.rename(&|n: &str| n.replace('#', "vm"));
        assert_eq!(
            m.to_string(),
            "vm0 needs 4 cores; left after vm1, vm2 and 1 more"
        );
    }

    #[test]
    fn text_that_looks_like_a_name_is_not_renamed() {
        let mut m = Message::new().text("#0 is text here: ").vm("#0");
        m.rename(&|_: &str| "a".to_owned());
        assert_eq!(m.to_string(), "#0 is text here: a");
    }

    #[test]
    fn a_warning_prints_and_serialises_as_its_sentence() {
        let mut w = Warning::vm("#1", WarningKind::Nic, "NIC locality unknown");
        assert_eq!(
            serde_json::to_string(&w).unwrap(),
            "\"#1: NIC locality unknown\""
        );
        w.rename(&|_: &str| "web".to_owned());
        assert_eq!(w.to_string(), "web: NIC locality unknown");
        let back: Warning = serde_json::from_str("\"web: NIC locality unknown\"").unwrap();
        assert_eq!(back.to_string(), w.to_string());
        assert_eq!(back.vm, None);
        let mut about = Warning::about(
            "#0",
            WarningKind::Running,
            Message::new()
                .vm("#0")
                .text(" runs with its vCPUs not pinned"),
        );
        about.rename(&|_: &str| "db".to_owned());
        assert_eq!(about.to_string(), "db runs with its vCPUs not pinned");
        assert_eq!(about.vm.as_deref(), Some("db"));
        assert!(about == "db runs with its vCPUs not pinned");
        assert!(about != "db runs with its vCPUs not pinned!");
        assert!(w == "web: NIC locality unknown" && w != "web NIC locality unknown");
    }
}
