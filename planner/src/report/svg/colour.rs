//! Colours: the VM palette and the fixed colours (host, conflicts, unusable
//! CPUs), the hatch patterns of emulator threads, and the ink that reads on a
//! fill. Which tenant gets which colour is [`super::cast`]'s.

use super::cast::Cast;
use super::paint::{Occupant, Paint};

pub(super) use super::palette::{
    CHIP_FILL, ERROR_RED, HOST_GREY, PALETTE, UNUSABLE_FILL, UNUSABLE_INK, WARNING_ORANGE,
};

/// The two inks a CPU number can have.
const LIGHT_INK: &str = "#ffffff";
const DARK_INK: &str = "#111111";

impl Paint<'_> {
    /// Tenant `tenant`'s colour (by index in `report.tenants`).
    pub(super) fn colour(&self, tenant: usize) -> &'static str {
        self.colours.get(tenant).copied().unwrap_or(HOST_GREY)
    }

    /// The fill of tenant `tenant`'s (by index in `report.tenants`) segment
    /// of a CPU's floating band: its dashes.
    pub(super) fn float_fill(&self, tenant: usize) -> String {
        let member = self.cast_index.get(tenant).copied().unwrap_or(0);
        format!("url(#float-{member})")
    }

    /// A CPU's fill for one occupant: its colour, or its hatch pattern when
    /// only its emulator or I/O threads are there.
    pub(super) fn fill(&self, o: Occupant) -> String {
        if o.emulator_only {
            let member = self.cast_index.get(o.tenant).copied().unwrap_or(0);
            format!("url(#emu-{member})")
        } else {
            self.colour(o.tenant).to_owned()
        }
    }
}

/// Patterns: one hatch per cast member with pinned emulator or I/O threads
/// on any side (`emu-N`, N its index in the cast), dashes per cast member
/// with threads that float on any side (`float-N`), and one of each for the
/// legend's key.
pub(super) fn defs(out: &mut String, cast: &Cast, sides: &[&Paint<'_>]) {
    out.push_str("<defs>\n");
    let hatch = |out: &mut String, id: &str, colour: &str| {
        out.push_str(&format!(
            "<pattern id=\"{id}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" \
             patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffffff\"/>\
             <rect width=\"3\" height=\"6\" fill=\"{colour}\"/></pattern>\n"
        ));
    };
    for (i, member) in cast.members.iter().enumerate() {
        let hatched = sides
            .iter()
            .any(|side| side.tenant(i).is_some_and(|(_, h)| !h.cpus().is_empty()));
        if hatched {
            hatch(out, &format!("emu-{i}"), member.colour);
        }
    }
    hatch(out, "emu-key", PALETTE[0]);
    // Dashes for the band of VMs that may run on a CPU without a pin there.
    let dashes = |out: &mut String, id: &str, colour: &str| {
        out.push_str(&format!(
            "<pattern id=\"{id}\" width=\"6\" height=\"4\" patternUnits=\"userSpaceOnUse\">\
             <rect width=\"6\" height=\"4\" fill=\"#ffffff\"/><rect width=\"4\" height=\"4\" \
             fill=\"{colour}\"/></pattern>\n"
        ));
    };
    for (i, member) in cast.members.iter().enumerate() {
        let floats = sides.iter().any(|side| {
            side.floating_on
                .values()
                .flatten()
                .any(|(t, _)| side.cast_index.get(*t) == Some(&i))
        });
        if floats {
            dashes(out, &format!("float-{i}"), member.colour);
        }
    }
    dashes(out, "float-key", PALETTE[0]);
    out.push_str("</defs>\n");
}

/// White or black text, whichever contrasts more with `fill` (`#rrggbb`) by
/// the WCAG contrast ratio. On every colour of [`PALETTE`] that is at least
/// 4.5, the ratio WCAG asks of text this size.
pub(super) fn ink_on(fill: &str) -> &'static str {
    if contrast(fill, LIGHT_INK) >= contrast(fill, DARK_INK) {
        LIGHT_INK
    } else {
        DARK_INK
    }
}

/// The WCAG 2 contrast ratio of two `#rrggbb` colours, from 1 (the same) to
/// 21 (black on white).
pub(super) fn contrast(a: &str, b: &str) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// The WCAG 2 relative luminance of `#rrggbb` (anything unreadable counts
/// as white).
fn luminance(colour: &str) -> f64 {
    let channel = |i: usize| {
        let c = colour
            .get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .map_or(1.0, |v| f64::from(v) / 255.0);
        if c <= 0.040_45 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
}
