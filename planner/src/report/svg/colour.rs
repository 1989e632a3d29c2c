//! Colours: the VM palette and the fixed colours (host, conflicts, unusable
//! CPUs), the hatch patterns of emulator threads, and the ink that reads on a
//! fill.

use super::paint::Paint;

/// VM colours, in tenant order. Red and orange are left out (they mean
/// conflicts), and so is grey (the host's).
pub(super) const PALETTE: [&str; 13] = [
    "#4e79a7", "#59a14f", "#b07aa1", "#499894", "#b6992d", "#9d7660", "#6a51a3", "#a0cbe8",
    "#8cd17d", "#d4a6c8", "#86bcb6", "#f1ce63", "#d7b5a6",
];
pub(super) const HOST_GREY: &str = "#b0b0b0";
pub(super) const ERROR_RED: &str = "#d62728";
pub(super) const WARNING_ORANGE: &str = "#ff7f0e";
pub(super) const UNUSABLE_FILL: &str = "#e6e6e6";

impl Paint<'_> {
    /// Patterns: one hatch per tenant with pinned emulator threads, and one
    /// for the legend's key.
    pub(super) fn defs(&self, out: &mut String) {
        out.push_str("<defs>\n");
        let hatch = |out: &mut String, id: &str, colour: &str| {
            out.push_str(&format!(
                "<pattern id=\"{id}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
                 patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffffff\"/>\
                 <rect width=\"3\" height=\"6\" fill=\"{colour}\"/></pattern>\n"
            ));
        };
        for (i, h) in self.helpers.iter().enumerate() {
            if !h.cpus().is_empty() {
                hatch(out, &format!("emu-{i}"), self.colour(i));
            }
        }
        hatch(out, "emu-key", PALETTE[0]);
        out.push_str("</defs>\n");
    }
}

/// Black or white text, whichever reads better on `fill` (`#rrggbb`).
pub(super) fn ink_on(fill: &str) -> &'static str {
    let channel = |i: usize| {
        fill.get(i..i + 2)
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .unwrap_or(255)
    };
    let luma = 299 * channel(1) + 587 * channel(3) + 114 * channel(5);
    if luma < 140_000 {
        "#ffffff"
    } else {
        "#111111"
    }
}
