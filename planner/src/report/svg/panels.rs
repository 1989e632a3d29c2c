//! The two sides of a picture with a plan: the tenants now on the left, with
//! the plan on the right, each in its own `<g class="panel">` under its
//! heading and a line of counts, a rule between them.

use super::layout::Block;
use super::paint::Paint;
use super::text::px;
use super::text::{chars_fitting, text, wrap_phrases};
use super::{Picture, PlanSide, MARGIN};
use crate::text::plural;

/// Room between the two sides; the rule runs down its middle.
pub(super) const PANEL_GAP: i64 = 24;
const HEADING_FONT: i64 = 14;
const NOTE_FONT: i64 = 11;

impl Picture<'_> {
    /// Draws both sides of `topology` (laid out once, drawn twice) from `y`
    /// down, each `panel_w` wide; returns where they end.
    pub(super) fn panels(
        &self,
        out: &mut String,
        plan: &PlanSide<'_>,
        topology: &Block,
        panel_w: i64,
        y: i64,
    ) -> i64 {
        let sides: [(&str, &str, &Paint<'_>, String); 2] = [
            ("now", "now", &self.now, conflict_counts(&self.now)),
            (
                "plan",
                "with the plan",
                &plan.paint,
                format!(
                    "{} · {}",
                    plural(plan.moves, "move", "moves"),
                    conflict_counts(&plan.paint)
                ),
            ),
        ];
        let chars = chars_fitting(panel_w, NOTE_FONT);
        let notes: Vec<Vec<String>> = sides
            .iter()
            .map(|(_, _, _, note)| wrap_phrases(note, chars))
            .collect();
        let note_lines = notes.iter().map(Vec::len).max().unwrap_or(1);
        let head_h = 18 + px(note_lines) * 14 + 6;
        for (i, ((key, heading, paint, _), notes)) in sides.iter().zip(&notes).enumerate() {
            let x = MARGIN + px(i) * (panel_w + PANEL_GAP);
            out.push_str(&format!("<g class=\"panel\" data-panel=\"{key}\">\n"));
            text(
                out,
                x,
                y + 16,
                HEADING_FONT,
                "class=\"panel-heading\" font-weight=\"bold\" fill=\"#1f2a36\"",
                heading,
            );
            for (n, line) in notes.iter().enumerate() {
                text(
                    out,
                    x,
                    y + 16 + px(n + 1) * 14,
                    NOTE_FONT,
                    "class=\"panel-note\" fill=\"#3b4754\"",
                    line,
                );
            }
            for op in &topology.ops {
                let mut op = op.clone();
                op.shift(x, y + head_h);
                paint.op(out, &op);
            }
            out.push_str("</g>\n");
        }
        let rule_x = MARGIN + panel_w + PANEL_GAP / 2;
        out.push_str(&format!(
            "<path class=\"panel-rule\" d=\"M{rule_x} {y}V{}\" stroke=\"#c5ced8\" \
             stroke-width=\"1\"/>\n",
            y + head_h + topology.h
        ));
        y + head_h + topology.h
    }
}

/// `3 errors · 1 warning`: one side's conflicts.
fn conflict_counts(paint: &Paint<'_>) -> String {
    let errors = paint.errors();
    format!(
        "{} · {}",
        plural(errors, "error", "errors"),
        plural(paint.report.conflicts.len() - errors, "warning", "warnings")
    )
}
