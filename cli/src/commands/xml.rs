//! `pinplan xml`: a planned VM's pinning as domain XML, alone or patched
//! into a domain (a file, or the defined domain read through libvirt).

use crate::error::{print, Failure};
use pinplan::libvirt::{self, patch, patch::PatchOptions};
use pinplan::output;
use pinplan::plan::Plan;
use pinplan::topology::{self, Source};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct XmlArgs {
    /// The plan (`pinplan plan --out DIR` writes DIR/plan.json).
    #[arg(long, value_name = "PLAN.json")]
    plan: PathBuf,
    /// The plan's VM (default: the patched domain's name, or the plan's only VM).
    #[arg(long, value_name = "NAME")]
    vm: Option<String>,
    /// Patch this domain XML (virsh dumpxml --inactive) and print it whole.
    #[arg(long, value_name = "DOMAIN.xml", conflicts_with = "connect")]
    patch: Option<PathBuf>,
    /// Read the defined domain named like the VM from libvirt and print it patched.
    #[arg(long, value_name = "URI")]
    connect: Option<String>,
    /// Write to FILE (atomically) instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Change the domain's vCPU count to the plan's instead of refusing.
    #[arg(long)]
    set_vcpus: bool,
    /// With --connect: patch even though the plan was made for another host
    /// topology (the CPUs and NUMA nodes it uses must still exist).
    #[arg(long, requires = "connect")]
    force: bool,
    /// Print the guest side instead: vCPU roles, guest kernel arguments, the
    /// DPDK EAL core list and lcore maps (every VM, or --vm NAME).
    #[arg(long, conflicts_with_all = ["patch", "connect", "set_vcpus"])]
    guest: bool,
    /// With --guest: text, or a JSON array.
    #[arg(long, value_enum, default_value = "text", requires = "guest")]
    format: super::Format,
}

pub fn run(args: &XmlArgs) -> Result<ExitCode, Failure> {
    let plan = Plan::load(&args.plan)?;
    if args.guest {
        return guest(args, &plan);
    }
    let input: Option<(String, String)> = match (&args.patch, &args.connect) {
        (Some(path), _) => Some((
            path.display().to_string(),
            output::read_domain("--patch", path)?,
        )),
        (None, Some(uri)) => {
            let name = match &args.vm {
                Some(name) => name.clone(),
                None => output::only_vm(&plan)?,
            };
            let host = topology::load(&Source::Libvirt(uri.clone()))?;
            plan.check_host(&args.plan, &host, args.force)?;
            let xml = libvirt::inactive_xml(uri, &name)?;
            Some((format!("{uri} domain {name}"), xml))
        }
        (None, None) => None,
    };
    // Read once: for its name and for the patch.
    let domain = input
        .as_ref()
        .map(|(source_name, xml)| patch::Domain::read(source_name, xml))
        .transpose()?;
    let name = output::xml_vm(&plan, &args.plan, args.vm.as_deref(), domain.as_ref())?;
    let options = PatchOptions {
        set_vcpus: args.set_vcpus,
        name_given: args.vm.is_some(),
    };
    let patched = output::xml_text(&plan, &args.plan, &name, domain.as_ref(), &options)?;
    let source = input
        .as_ref()
        .map_or("", |(source_name, _)| source_name.as_str());
    for note in &patched.notes {
        crate::ui::note(&format!("note: {source}: {note}\n"));
    }
    let text = patched.text;
    if !plan.unplaced.is_empty() {
        crate::ui::note(&format!(
            "note: the plan does not place {} (see its explanations); this XML is {name}'s\n",
            plan.unplaced.join(", ")
        ));
    }
    match &args.out {
        Some(path) => output::write_atomically(path, &text, 0o644)?,
        None => print(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `--guest`: the guest side of every VM (or the one named).
fn guest(args: &XmlArgs, plan: &Plan) -> Result<ExitCode, Failure> {
    use pinplan::guest::GuestMap;
    let maps: Vec<GuestMap> = match &args.vm {
        Some(name) => vec![GuestMap::of(plan.vm(name, &args.plan)?)],
        None => plan.vms.iter().map(GuestMap::of).collect(),
    };
    if maps.is_empty() {
        output::only_vm(plan)?;
    }
    let text = match args.format {
        super::Format::Text => maps
            .iter()
            .map(GuestMap::to_text)
            .collect::<Vec<_>>()
            .join("\n"),
        super::Format::Json => serde_json::to_string_pretty(&maps).unwrap_or_default() + "\n",
    };
    match &args.out {
        Some(path) => output::write_atomically(path, &text, 0o644)?,
        None => print(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
