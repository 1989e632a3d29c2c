//! `pinplan man [--out DIR]`: the man pages, generated from the clap
//! definitions (clap_mangen) with each command's examples and exit status:
//! pinplan(1) on standard output, or with `--out DIR` pinplan.1 and a
//! pinplan-COMMAND.1 per subcommand written into DIR (created if needed),
//! each file atomically.

use crate::error::{print, Failure};
use crate::pages;
use crate::ui;
use pinplan::error::WriteError;
use pinplan::output;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ManArgs {
    /// Write pinplan.1 and pinplan-COMMAND.1 for every command into DIR
    /// (e.g. /usr/local/share/man/man1) instead of printing pinplan.1.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Prints or writes the pages; `command` is pinplan's whole clap command.
pub fn run(args: &ManArgs, command: &mut clap::Command) -> Result<ExitCode, Failure> {
    command.build();
    let Some(dir) = &args.out else {
        print(&page(command, ""))?;
        return Ok(ExitCode::SUCCESS);
    };
    let mut pages = vec![("pinplan.1".to_owned(), page(command, ""))];
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        // After build(), a subcommand's display name is `pinplan-NAME`.
        let name = sub.get_display_name().unwrap_or(sub.get_name());
        pages.push((format!("{name}.1"), page(sub, sub.get_name())));
    }
    std::fs::create_dir_all(dir).map_err(|source| WriteError {
        path: dir.clone(),
        source,
    })?;
    for (name, text) in &pages {
        let path = dir.join(name);
        output::write_atomically(&path, text, 0o644)?;
        ui::note(&format!("wrote {}\n", path.display()));
    }
    Ok(ExitCode::SUCCESS)
}

/// The page of `command` (the subcommand `name`, or `""` for pinplan), in
/// roff: clap_mangen's sections, then the exit status, examples and see
/// also of [`pages::man_sections`] (in place of the help's plain text).
fn page(command: &clap::Command, name: &str) -> String {
    let man = clap_mangen::Man::new(command.clone().after_help(None::<&str>))
        .source(format!("pinplan {}", env!("CARGO_PKG_VERSION")))
        .manual("pinplan manual");
    let mut roff = Vec::new();
    // Rendering into memory cannot fail.
    let _ = man.render(&mut roff);
    let mut text = String::from_utf8_lossy(&roff).into_owned();
    text.push_str(&pages::man_sections(name));
    text
}
