//! `pinplan help [TOPIC|COMMAND]`: a reference topic (`formats`,
//! `policies`, `exit-codes`, see [`crate::pages`]), a command's help (as
//! `pinplan COMMAND --help`), or pinplan's own. It replaces clap's help
//! subcommand, which knows commands only.

use crate::error::{print, Failure, Stdout, Usage};
use crate::pages;
use clap::error::ErrorKind;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct HelpArgs {
    /// A topic (formats, policies, exit-codes) or a command; without it,
    /// pinplan's own help.
    #[arg(value_name = "TOPIC|COMMAND")]
    topic: Option<String>,
}

/// Prints the topic's text or the help; `command` is pinplan's whole clap
/// command.
pub fn run(args: &HelpArgs, command: &clap::Command) -> Result<ExitCode, Failure> {
    if let Some(text) = args.topic.as_deref().and_then(pages::topic) {
        print(&text)?;
        return Ok(ExitCode::SUCCESS);
    }
    // Exactly what `pinplan [COMMAND] --help` prints: clap chooses the
    // short or long layout as it does for the flag.
    let mut argv = vec!["pinplan"];
    argv.extend(args.topic.as_deref());
    argv.push("--help");
    match command.clone().try_get_matches_from(argv) {
        Err(help) if help.kind() == ErrorKind::DisplayHelp => {
            help.print().map_err(Stdout)?;
            Ok(ExitCode::SUCCESS)
        }
        // clap lets only topics and command names through to here.
        _ => {
            let topics: Vec<&str> = pages::TOPICS.iter().map(|t| t.name).collect();
            Err(Usage {
                message: format!(
                    "no help topic or command {:?}",
                    args.topic.as_deref().unwrap_or("")
                ),
                hint: Some(format!("topics: {}; or a command", topics.join(", "))),
                cause: None,
            }
            .into())
        }
    }
}
