//! The text host map that `pinplan plan` and `pinplan report` print: one row
//! per physical core, each CPU with its tenant, optionally in ANSI colour.
//! Callers decide what each CPU's cell says; this module lays the rows out.

use crate::ids::CpuId;
use crate::topology::HostTopology;
use std::fmt::Write as _;

/// How a cell is coloured on a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    /// Default colours (free CPUs).
    Plain,
    /// The n-th tenant's colour.
    Tenant(usize),
    /// The host's own CPUs.
    Host,
    /// Not usable (offline or not allowed).
    Dim,
    /// Part of an error conflict.
    Error,
    /// Part of a warning.
    Warning,
}

/// One CPU's cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Who is there, e.g. `vm1/3`, `host`, `-`.
    pub text: String,
    /// Its colour.
    pub paint: Paint,
    /// A one-character mark after the text (`!` error, `?` warning).
    pub mark: Option<char>,
}

/// Foreground colours for tenants, in order (green, blue, magenta, cyan,
/// yellow, then the bright ones).
const TENANT_COLOURS: [&str; 10] = ["32", "34", "35", "36", "33", "92", "94", "95", "96", "93"];

fn sgr(paint: Paint) -> Option<&'static str> {
    match paint {
        Paint::Plain => None,
        Paint::Tenant(i) => Some(TENANT_COLOURS[i % TENANT_COLOURS.len()]),
        Paint::Host => Some("90"),
        Paint::Dim => Some("2"),
        Paint::Error => Some("1;97;41"),
        Paint::Warning => Some("30;43"),
    }
}

/// The map: `core N (node M)` then each CPU of the core as `CPU:cell`. Cells
/// are padded to the widest (at least `min_width`); with `colour`, each cell
/// is wrapped in its ANSI colour after padding, so columns line up on screen.
pub fn render(
    host: &HostTopology,
    min_width: usize,
    colour: bool,
    cell: impl Fn(CpuId) -> Cell,
) -> String {
    let rows: Vec<(String, Vec<(CpuId, Cell)>)> = host
        .cores
        .iter()
        .map(|core| {
            let label = format!(
                "core {} (node {})",
                core.id,
                core.numa_node
                    .map_or_else(|| "?".to_owned(), |n| n.to_string())
            );
            (label, core.cpus.iter().map(|c| (c, cell(c))).collect())
        })
        .collect();
    let label_width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let width = rows
        .iter()
        .flat_map(|(_, cells)| cells.iter())
        .map(|(_, c)| c.text.chars().count() + usize::from(c.mark.is_some()))
        .max()
        .unwrap_or(0)
        .max(min_width);
    let mut out = String::new();
    for (label, cells) in rows {
        let mut line = format!("  {label:<label_width$} ");
        for (cpu, c) in cells {
            let mut text = c.text.clone();
            if let Some(m) = c.mark {
                text.push(m);
            }
            let _ = write!(line, " {:>3}:", cpu.0);
            // Colour the text, not the padding after it.
            let pad = " ".repeat(width - text.chars().count());
            match sgr(c.paint).filter(|_| colour) {
                Some(code) => {
                    let _ = write!(line, "\x1b[{code}m{text}\x1b[0m{pad}");
                }
                None => {
                    let _ = write!(line, "{text}{pad}");
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{self, Source};

    #[test]
    fn one_row_per_core_with_siblings_side_by_side() -> Result<(), topology::TopologyError> {
        let host = topology::load(&Source::Synthetic(
            "package:1 core:2 pu:2(indexes=2*2:1*2)".into(),
        ))?;
        let cell = |cpu: CpuId| Cell {
            text: if cpu.0 == 3 { "vm1".into() } else { "-".into() },
            paint: if cpu.0 == 3 {
                Paint::Error
            } else {
                Paint::Plain
            },
            mark: (cpu.0 == 3).then_some('!'),
        };
        let plain = render(&host, 4, false, cell);
        assert_eq!(
            plain,
            "  core 0 (node 0)    0:-      2:-\n  core 1 (node 0)    1:-      3:vm1!\n"
        );
        let coloured = render(&host, 4, true, cell);
        assert!(
            coloured.contains("3:\x1b[1;97;41mvm1!\x1b[0m"),
            "{coloured:?}"
        );
        Ok(())
    }
}
