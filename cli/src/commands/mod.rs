//! One module per subcommand: its clap arguments and the library calls they
//! turn into. What the arguments share is here.

pub mod apply;
pub mod demand;
pub mod doctor;
pub mod plan;
pub mod report;
pub mod topology;
pub mod xml;

use clap::ValueEnum;
use pinplan::topology::Source;

/// `--format` for commands with a text and a JSON form.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// `--color`.
#[derive(Clone, Copy, ValueEnum)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

/// Colour when asked, or on `auto` when standard output is a terminal and
/// `NO_COLOR` is unset or empty.
pub fn use_colour(arg: ColorArg) -> bool {
    use std::io::IsTerminal as _;
    match arg {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

/// The topology source of `--connect URI` or else `--source SRC`.
pub fn source(connect: Option<&String>, source: &str) -> Source {
    match connect {
        Some(uri) => Source::Libvirt(uri.clone()),
        None => Source::from_arg(source),
    }
}
