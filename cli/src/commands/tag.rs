//! `pinplan tag DOMAIN KEY=VALUE…`: write a domain's own request (the keys
//! of a spec's `[[vm]]`) into its libvirt metadata, checked first.

use crate::error::{print, Failure, Usage};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct TagArgs {
    /// The domain.
    domain: String,
    /// `KEY=VALUE` pairs: the keys of a spec's `[[vm]]` (see `pinplan help
    /// formats`), values as TOML (a bare word is a string); `KEY=` removes
    /// a key. None: show the domain's request.
    #[arg(value_name = "KEY=VALUE")]
    pairs: Vec<String>,
    /// The host's libvirt URI.
    #[arg(long, value_name = "URI")]
    connect: String,
    /// Check and show the request, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Remove the domain's whole request.
    #[arg(long, conflicts_with = "pairs")]
    clear: bool,
    /// Check the request as a [[vm]] of this spec (its [host] tables and
    /// [defaults]: a `profile` found there needs no `table` key).
    #[arg(long, value_name = "SPEC")]
    spec: Option<std::path::PathBuf>,
}

pub fn run(args: &TagArgs) -> Result<ExitCode, Failure> {
    let mut changes = Vec::new();
    for pair in &args.pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(Usage::new(format!(
                "{pair:?} is not KEY=VALUE: e.g. threads=prefer, vcpus=4, or threads= to remove the key"
            ))
            .into());
        };
        changes.push((key.trim().to_owned(), value.to_owned()));
    }
    // Without changes (and without --clear) the request is only shown.
    let dry_run = args.dry_run || (changes.is_empty() && !args.clear);
    if args.clear {
        changes = current_keys(&args.connect, &args.domain)?;
    }
    let spec = match &args.spec {
        Some(path) => Some(pinplan::spec::Spec::load(path)?),
        None => None,
    };
    let tagged = pinplan::libvirt::metadata::tag(
        &args.connect,
        &args.domain,
        &changes,
        dry_run,
        spec.as_ref(),
    )?;
    print(&tagged.to_text(&args.domain, dry_run))?;
    Ok(ExitCode::SUCCESS)
}

/// `KEY=` for every key of the domain's request: `--clear`.
fn current_keys(uri: &str, domain: &str) -> Result<Vec<(String, String)>, Failure> {
    let shown = pinplan::libvirt::metadata::tag(uri, domain, &[], true, None)?;
    Ok(shown
        .before
        .map(|r| {
            r.pairs
                .into_iter()
                .map(|(k, _)| (k, String::new()))
                .collect()
        })
        .unwrap_or_default())
}
