//! The one path from any error to the user: `error: …`, the causes under
//! `Caused by:`, `hint: …`, and the exit status, all from the error's
//! [`Diagnostic`]. The CLI's own errors (arguments that do not fit together,
//! standard output) are [`Usage`] and [`Stdout`].

use pinplan::error::{Diagnostic, Exit, Rendered};
use std::process::ExitCode;

/// Any error on its way out of a command.
pub struct Failure(Box<dyn Diagnostic>);

impl<E: Diagnostic> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure(Box::new(error))
    }
}

impl Failure {
    /// Prints the error, its causes and its hint to standard error and gives
    /// the exit status; a closed standard output (`pinplan … | head`) is
    /// success, silently.
    pub fn report(&self) -> ExitCode {
        let error: &dyn std::error::Error = &*self.0;
        let broken_pipe = std::iter::once(error)
            .chain(pinplan::error::causes(error))
            .filter_map(|e| e.downcast_ref::<std::io::Error>())
            .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
        if broken_pipe {
            return ExitCode::SUCCESS;
        }
        let rendered = Rendered::of(&*self.0);
        eprintln!("error: {}", rendered.message);
        if !rendered.causes.is_empty() {
            eprintln!("\nCaused by:");
            for cause in &rendered.causes {
                eprintln!("    {cause}");
            }
        }
        if let Some(hint) = &rendered.hint {
            eprintln!("\nhint: {hint}");
        }
        ExitCode::from(self.0.exit().code())
    }
}

/// Arguments that do not fit together, or a value clap cannot check.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Usage {
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub hint: Option<String>,
    /// The underlying error (a CPU list that does not parse).
    #[source]
    pub cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl Usage {
    /// A usage error without a hint.
    pub fn new(message: impl Into<String>) -> Usage {
        Usage {
            message: message.into(),
            hint: None,
            cause: None,
        }
    }
}

impl Diagnostic for Usage {
    fn hint(&self) -> Option<String> {
        self.hint.clone()
    }
}

/// Standard output could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write to standard output")]
pub struct Stdout(#[source] pub std::io::Error);

impl Diagnostic for Stdout {}

/// Whether the answer was yes (exit 0) or no (exit 1).
pub fn verdict(yes: bool) -> ExitCode {
    if yes {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(Exit::No.code())
    }
}

/// Prints `text` to standard output.
pub fn print(text: &str) -> Result<(), Failure> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Stdout(e).into())
}
