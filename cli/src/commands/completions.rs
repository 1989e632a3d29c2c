//! `pinplan completions SHELL`: the shell's completion script for every
//! command, flag and value, generated from the clap definitions
//! (clap_complete).

use crate::error::{print, Failure};
use clap_complete::Shell;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    shell: Shell,
}

/// Prints the script; `command` is pinplan's whole clap command.
pub fn run(args: &CompletionsArgs, command: &mut clap::Command) -> Result<ExitCode, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, command, "pinplan", &mut script);
    print(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}
