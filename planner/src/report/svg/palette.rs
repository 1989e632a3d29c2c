//! The picture's fixed colours: the VM palette, the host's grey, the
//! conflicts' red and orange, unusable CPUs, and the chip under a CPU
//! number. Pure values: who gets which is [`super::cast`]'s, the ink that
//! reads on a fill [`super::colour`]'s.

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
/// The chip under a CPU number on stripes, hatching or a cross.
pub(super) const CHIP_FILL: &str = "#ffffff";
/// A CPU number on an unusable CPU's chip: greyer than the others.
pub(super) const UNUSABLE_INK: &str = "#333333";
