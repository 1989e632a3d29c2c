//! Conflict outlines: solid red for an error, dashed orange for a warning,
//! on CPU cells and as samples in the legend.

use super::colour::{ERROR_RED, WARNING_ORANGE};
use super::layout::CELL_H;
use crate::report::Severity;

/// The conflict outline, drawn inside the cell so neighbours never cover it.
/// The 3-wide error stroke sits on half pixels, which keeps its edges sharp.
pub(super) fn outline(out: &mut String, x: i64, y: i64, w: i64, severity: Option<Severity>) {
    let Some(severity) = severity else {
        return;
    };
    let (class, half, inset) = match severity {
        Severity::Error => ("error", ".5", 3),
        Severity::Warning => ("warning", "", 2),
    };
    out.push_str(&format!(
        "<rect class=\"outline-{class}\" x=\"{}{half}\" y=\"{}{half}\" width=\"{}\" \
         height=\"{}\" fill=\"none\" {}/>\n",
        x + 1,
        y + 1,
        w - inset,
        CELL_H - inset,
        stroke(severity)
    ));
}

/// The legend's sample of an outline, on white, `w` by `h`.
pub(super) fn outline_sample(out: &mut String, x: i64, y: i64, w: i64, h: i64, severity: Severity) {
    out.push_str(&format!(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" {}/>\n",
        x + 1,
        y + 1,
        w - 2,
        h - 2,
        stroke(severity)
    ));
}

/// Solid red 3 wide for an error, dashed orange 2 wide for a warning.
fn stroke(severity: Severity) -> String {
    match severity {
        Severity::Error => format!("stroke=\"{ERROR_RED}\" stroke-width=\"3\""),
        Severity::Warning => {
            format!("stroke=\"{WARNING_ORANGE}\" stroke-width=\"2\" stroke-dasharray=\"4 2\"")
        }
    }
}
