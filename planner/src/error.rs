//! How every error reaches the user: each public error type implements
//! [`Diagnostic`], which says what to do about it ([`Diagnostic::hint`]) and
//! whether it means "the answer is no" or "bad input / something failed"
//! ([`Diagnostic::exit`]). Causes stay attached as `#[source]`, so the CLI
//! prints `error: …`, `Caused by: …` and `hint: …` from one path.
//!
//! [`LibvirtError`] lives here because the topology readers and the libvirt
//! stage both call libvirt.

use std::fmt;

/// What an error means for the command's exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The question was answered, and the answer is no (exit status 1): a
    /// demand the tables cannot reach, an apply that failed and was rolled back.
    No,
    /// Bad input or a failure to do the work (exit status 2).
    Error,
    /// Stopped by a signal, what was changed undone or the way to finish
    /// it said (exit status 128 + the signal: 130, 143).
    Interrupted(crate::interrupt::Signal),
}

impl Exit {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::No => 1,
            Exit::Error => 2,
            Exit::Interrupted(signal) => signal.exit_code(),
        }
    }
}

/// An error that knows how it should reach the user.
pub trait Diagnostic: std::error::Error + Send + Sync + 'static {
    /// What to do about it, when known.
    fn hint(&self) -> Option<String> {
        None
    }

    /// Whether it is a "no" (exit 1) or an error (exit 2, the default).
    fn exit(&self) -> Exit {
        Exit::Error
    }
}

/// A boxed error reads as the error (a large error kept small in a `Result`).
impl<T: Diagnostic> Diagnostic for Box<T> {
    fn hint(&self) -> Option<String> {
        (**self).hint()
    }

    fn exit(&self) -> Exit {
        (**self).exit()
    }
}

/// An error as people read it: its message, its causes (outermost first)
/// and its hint. The one reading of a [`Diagnostic`]: the CLI prints it
/// whole (`error:`, `Caused by:`, `hint:`), and where an error is a field of
/// an outcome (a fleet host's, a survey's) it is [`Rendered::one_line`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The error's own message.
    pub message: String,
    /// Its causes, outermost first.
    pub causes: Vec<String>,
    /// What to do about it.
    pub hint: Option<String>,
}

impl Rendered {
    /// How `error` reads.
    pub fn of(error: &dyn Diagnostic) -> Rendered {
        Rendered {
            message: error.to_string(),
            causes: causes(error).map(ToString::to_string).collect(),
            hint: error.hint(),
        }
    }

    /// `message: cause: cause (hint: hint)`.
    pub fn one_line(&self) -> String {
        let mut text = self.message.clone();
        for cause in &self.causes {
            text.push_str(": ");
            text.push_str(cause);
        }
        if let Some(hint) = &self.hint {
            text.push_str(&format!(" (hint: {hint})"));
        }
        text
    }
}

/// `error` on one line ([`Rendered::one_line`]): where an error is a field
/// of an outcome (a fleet host's, a survey's).
pub fn one_line(error: &dyn Diagnostic) -> String {
    Rendered::of(error).one_line()
}

/// The causes of `error` (its `source()` chain), outermost first.
pub fn causes<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'e (dyn std::error::Error + 'static)> {
    std::iter::successors(error.source(), |e| e.source())
}

/// [`Diagnostic`] for an error enum each of whose variants wraps one error
/// that is a [`Diagnostic`]: the hint and the exit status are the wrapped
/// error's. `diagnostic_by_variant!(PrepareError: Topology, Libvirt);`
macro_rules! diagnostic_by_variant {
    ($error:ident: $($variant:ident),+ $(,)?) => {
        impl $crate::error::Diagnostic for $error {
            fn hint(&self) -> Option<String> {
                match self {
                    $($error::$variant(e) => $crate::error::Diagnostic::hint(e),)+
                }
            }

            fn exit(&self) -> $crate::error::Exit {
                match self {
                    $($error::$variant(e) => $crate::error::Diagnostic::exit(e),)+
                }
            }
        }
    };
}
pub(crate) use diagnostic_by_variant;

/// Declares an error enum each of whose variants is another error passed
/// through whole: its message and source are the wrapped error's
/// (`#[error(transparent)]`), `?` converts into it (`#[from]`), and so are
/// its hint and exit status ([`diagnostic_by_variant!`]). The variants are
/// written once, as `Name(WrappedError)`.
macro_rules! transparent_error {
    (
        $(#[$attr:meta])*
        pub enum $error:ident {
            $($(#[$variant_attr:meta])* $variant:ident($wrapped:ty),)+
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, thiserror::Error)]
        pub enum $error {
            $(
                $(#[$variant_attr])*
                #[error(transparent)]
                $variant(#[from] $wrapped),
            )+
        }

        $crate::error::diagnostic_by_variant!($error: $($variant),+);
    };
}
pub(crate) use transparent_error;

/// What pinplan asked libvirt when it refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LibvirtAction {
    /// Opening the connection.
    Connect,
    /// Reading the host's capabilities.
    Capabilities,
    /// Counting the host's CPUs.
    CountCpus,
    /// Listing the domains.
    ListDomains,
    /// Reading a domain's name.
    DomainName,
    /// Looking a domain up by name.
    LookUp(String),
    /// Reading a domain's XML.
    DomainXml(String),
    /// Reading a domain's current pinning.
    ReadPins(String),
    /// Listing the host's PCI node devices.
    ListNodeDevices,
    /// Writing a domain's request into its metadata.
    SetMetadata(String),
    /// Registering for domain events or the connection's close.
    RegisterEvents,
}

impl fmt::Display for LibvirtAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LibvirtAction::Connect => f.write_str("cannot connect"),
            LibvirtAction::Capabilities => f.write_str("cannot read the capabilities"),
            LibvirtAction::CountCpus => f.write_str("cannot count the host's CPUs"),
            LibvirtAction::ListDomains => f.write_str("cannot list the domains"),
            LibvirtAction::DomainName => f.write_str("cannot read a domain's name"),
            LibvirtAction::LookUp(name) => write!(f, "there is no domain {name:?}"),
            LibvirtAction::DomainXml(name) => write!(f, "cannot read the XML of domain {name}"),
            LibvirtAction::ReadPins(name) => write!(f, "{name}: cannot read its pinning"),
            LibvirtAction::ListNodeDevices => f.write_str("cannot list the node devices"),
            LibvirtAction::SetMetadata(name) => {
                write!(f, "{name}: cannot write its request into its metadata")
            }
            LibvirtAction::RegisterEvents => f.write_str("cannot register for domain events"),
        }
    }
}

/// libvirt's own words for a failed call, and its error code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LibvirtCause {
    /// libvirt's message.
    pub message: String,
    /// libvirt's error code (`virErrorNumber`), e.g. `NoDomain`.
    pub code: virt::error::ErrorNumberEnum,
}

impl LibvirtCause {
    /// Whether libvirt refused this user (its authentication failed, was
    /// cancelled or is unavailable), by libvirt's error code.
    pub fn is_auth(&self) -> bool {
        use virt::error::ErrorNumber::{AuthCancelled, AuthFailed, AuthUnavailable};
        matches!(
            self.code,
            virt::enumutil::Enum::Known(AuthFailed | AuthUnavailable | AuthCancelled)
        )
    }
}

impl From<&virt::error::Error> for LibvirtCause {
    fn from(e: &virt::error::Error) -> Self {
        LibvirtCause {
            message: e.message().to_owned(),
            code: e.code(),
        }
    }
}

/// A libvirt call that failed: which URI, what was asked, and libvirt's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("libvirt at {uri}: {action}")]
pub struct LibvirtError {
    /// The connection URI.
    pub uri: String,
    /// What was asked.
    pub action: LibvirtAction,
    /// libvirt's answer.
    #[source]
    pub cause: LibvirtCause,
}

impl LibvirtError {
    /// The error of `action` at `uri`.
    pub fn new(uri: &str, action: LibvirtAction, e: &virt::error::Error) -> LibvirtError {
        LibvirtError {
            uri: uri.to_owned(),
            action,
            cause: e.into(),
        }
    }
}

impl Diagnostic for LibvirtError {
    fn hint(&self) -> Option<String> {
        // polkit or socket permissions: libvirtd runs, we may not talk to it.
        let message = self.cause.message.to_ascii_lowercase();
        let denied = self.cause.is_auth()
            || message.contains("permission denied")
            || message.contains("authentication")
            || message.contains("polkit")
            // Not root: libvirt asks polkit over D-Bus, absent on hosts without it.
            || message.contains("unable to get system bus connection");
        if denied {
            return Some(format!(
                "libvirt refused this user: run as root, or as a member of the libvirt group \
                 (`usermod -aG libvirt $USER`, then log in again); `virsh -c {}` fails the same way",
                self.uri
            ));
        }
        Some(match &self.action {
            LibvirtAction::LookUp(_) => {
                format!("the domain must be defined in libvirt under the VM's name (`virsh -c {} list --all`)", self.uri)
            }
            _ => format!(
                "check that libvirtd is running and the URI is right (e.g. `virsh -c {} capabilities`)",
                self.uri
            ),
        })
    }
}

/// Writing a file failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct WriteError {
    /// The file.
    pub path: std::path::PathBuf,
    /// What the OS said.
    #[source]
    pub source: std::io::Error,
}

impl Diagnostic for WriteError {
    fn hint(&self) -> Option<String> {
        match self.source.kind() {
            std::io::ErrorKind::NotFound => Some("check that its directory exists".to_owned()),
            std::io::ErrorKind::PermissionDenied => Some("give a path you may write to".to_owned()),
            std::io::ErrorKind::AlreadyExists => {
                Some("it exists and is never overwritten: give another name".to_owned())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with two causes reads the same whole and on one line.
    #[test]
    fn an_error_reads_as_its_message_causes_and_hint() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot plan host b1")]
        struct Outer(#[source] WriteError);
        impl Diagnostic for Outer {
            fn hint(&self) -> Option<String> {
                self.0.hint()
            }
        }
        let e = Outer(WriteError {
            path: "/x/plan.json".into(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such directory"),
        });
        let r = Rendered::of(&e);
        assert_eq!(r.message, "cannot plan host b1");
        assert_eq!(r.causes, ["cannot write /x/plan.json", "no such directory"]);
        assert_eq!(
            r.one_line(),
            "cannot plan host b1: cannot write /x/plan.json: no such directory \
             (hint: check that its directory exists)"
        );
    }

    /// Issue 15, item 13: a permission refusal says "run as root or as a
    /// member of the libvirt group", not "check that libvirtd is running".
    #[test]
    fn permission_errors_say_root_or_libvirt_group() {
        use virt::enumutil::Enum::Known;
        use virt::error::ErrorNumber;
        let refused = |message: &str, code: ErrorNumber| LibvirtError {
            uri: "qemu:///system".to_owned(),
            action: LibvirtAction::Connect,
            cause: LibvirtCause {
                message: message.to_owned(),
                code: Known(code),
            },
        };
        for (message, code) in [
            (
                "authentication unavailable: no polkit agent available",
                ErrorNumber::AuthUnavailable,
            ),
            (
                "Failed to connect socket to '/run/libvirt/libvirt-sock': Permission denied",
                ErrorNumber::SystemError,
            ),
            (
                "internal error: Unable to get system bus connection: Could not connect",
                ErrorNumber::InternalError,
            ),
        ] {
            let hint = refused(message, code).hint().unwrap_or_default();
            assert!(
                hint.contains("run as root, or as a member of the libvirt group"),
                "{hint}"
            );
        }
        let down = refused(
            "Failed to connect socket: No such file or directory",
            ErrorNumber::SystemError,
        );
        assert!(down
            .hint()
            .unwrap_or_default()
            .contains("check that libvirtd is running"));
        // By libvirt's code alone, whatever the words.
        let by_code = refused("no", ErrorNumber::AuthFailed);
        assert!(by_code.cause.is_auth());
        assert!(by_code
            .hint()
            .unwrap_or_default()
            .contains("run as root, or as a member of the libvirt group"));
    }
}
