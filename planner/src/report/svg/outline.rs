//! Conflict outlines: solid red for an error, dashed orange for a warning,
//! on CPU cells and as samples in the legend.

use super::colour::{ERROR_RED, WARNING_ORANGE};
use super::layout::CELL_H;
use crate::report::Severity;

/// The conflict outline, drawn inside the cell so neighbours never cover it.
pub(super) fn outline(out: &mut String, x: i64, y: i64, w: i64, severity: Option<Severity>) {
    match severity {
        Some(Severity::Error) => out.push_str(&format!(
            "<rect class=\"outline-error\" x=\"{}.5\" y=\"{}.5\" width=\"{}\" height=\"{}\" \
             fill=\"none\" stroke=\"{ERROR_RED}\" stroke-width=\"3\"/>\n",
            x + 1,
            y + 1,
            w - 3,
            CELL_H - 3
        )),
        Some(Severity::Warning) => out.push_str(&format!(
            "<rect class=\"outline-warning\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" \
             fill=\"none\" stroke=\"{WARNING_ORANGE}\" stroke-width=\"2\" \
             stroke-dasharray=\"4 2\"/>\n",
            x + 1,
            y + 1,
            w - 2,
            CELL_H - 2
        )),
        None => {}
    }
}

pub(super) fn outline_sample(out: &mut String, x: i64, y: i64, w: i64, h: i64, severity: Severity) {
    let (stroke, extra) = match severity {
        Severity::Error => (ERROR_RED, "stroke-width=\"3\""),
        Severity::Warning => (
            WARNING_ORANGE,
            "stroke-width=\"2\" stroke-dasharray=\"4 2\"",
        ),
    };
    out.push_str(&format!(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"{stroke}\" \
         {extra}/>\n",
        x + 1,
        y + 1,
        w - 2,
        h - 2
    ));
}
