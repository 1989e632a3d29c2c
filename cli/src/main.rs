//! `pinplan`: turns command-line arguments into planner calls and prints the
//! results. Exit status: 0 success, 1 "the answer is no", 2 error.

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use planner::topology::{self, Source, TopologyError};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pinplan",
    version,
    about = "Plans CPU pinning for packet-processing libvirt/KVM VMs"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the host's CPU topology: packages, NUMA nodes, L3 domains, cores, NICs.
    Topology(TopologyArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
struct TopologyArgs {
    /// Where to read the topology: `host` (live, through hwloc), a file (hwloc XML
    /// from `lstopo --of xml`, or `virsh capabilities`), or `synthetic:DESC`.
    #[arg(
        long,
        value_name = "SRC",
        default_value = "host",
        conflicts_with = "connect"
    )]
    source: String,
    /// Read the topology through libvirt instead (`qemu:///system`,
    /// `qemu+ssh://host/system`, `test:///default`).
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

/// An error with a known fix: printed as `hint:` after the cause chain.
struct Hinted {
    error: anyhow::Error,
    hint: Option<String>,
}

impl From<TopologyError> for Hinted {
    fn from(error: TopologyError) -> Self {
        let hint = error.hint();
        Hinted {
            error: error.into(),
            hint,
        }
    }
}

fn topology_command(args: &TopologyArgs) -> Result<(), Hinted> {
    let source = match &args.connect {
        Some(uri) => Source::Libvirt(uri.clone()),
        None => Source::from_arg(&args.source),
    };
    let host = topology::load(&source)?;
    let text = match args.format {
        Format::Text => host.to_text(),
        Format::Json => host.to_json(),
    };
    write_stdout(&text)
        .context("cannot write to standard output")
        .map_err(|error| Hinted { error, hint: None })
}

fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

fn report(failure: &Hinted) {
    eprintln!("error: {}", failure.error);
    let mut causes = failure.error.chain().skip(1).peekable();
    if causes.peek().is_some() {
        eprintln!("\nCaused by:");
        for cause in causes {
            eprintln!("    {cause}");
        }
    }
    if let Some(hint) = &failure.hint {
        eprintln!("\nhint: {hint}");
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Topology(args) => topology_command(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // A closed pipe (`pinplan topology | head`) is not an error worth a message.
            let broken_pipe = failure
                .error
                .chain()
                .filter_map(|e| e.downcast_ref::<std::io::Error>())
                .any(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
            if broken_pipe {
                return ExitCode::SUCCESS;
            }
            report(&failure);
            ExitCode::from(2)
        }
    }
}
