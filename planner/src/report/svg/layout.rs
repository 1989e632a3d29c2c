//! Layout: sizes [`tree`](super::tree) items into blocks of drawing operations
//! at integer coordinates, wrapping cores into rows and boxes into columns
//! within a width.

use super::text::{fit, px, text_w};
use super::tree::Item;
use crate::topology::HostTopology;

pub(super) const CELL_H: i64 = 20;
pub(super) const CELL_FONT: i64 = 12;
/// Baseline of a CPU number in its cell.
pub(super) const CELL_TEXT_Y: i64 = 14;
pub(super) const CELL_GAP: i64 = 2;
pub(super) const CORE_PAD: i64 = 3;
pub(super) const CORE_HEAD: i64 = 12;
pub(super) const CORE_GAP: i64 = 4;
pub(super) const BOX_PAD: i64 = 6;
pub(super) const BOX_HEAD: i64 = 19;
pub(super) const BOX_GAP: i64 = 8;

/// Width of a CPU cell: room for the longest CPU number of `host`.
pub(super) fn cell_width(host: &HostTopology) -> i64 {
    let digits = host
        .pus
        .iter()
        .map(|p| p.cpu.0.to_string().len())
        .max()
        .unwrap_or(1);
    (text_w(&"0".repeat(digits), CELL_FONT) + 12).max(34)
}

/// Something laid out: its size and what to draw, relative to its corner.
#[derive(Debug, Clone, Default)]
pub(super) struct Block {
    pub(super) w: i64,
    pub(super) h: i64,
    pub(super) ops: Vec<Op>,
}

/// One thing to draw, at absolute coordinates once placed.
#[derive(Debug, Clone)]
pub(super) enum Op {
    Group {
        x: i64,
        y: i64,
        w: i64,
        h: i64,
        class: &'static str,
        label: String,
    },
    Core {
        x: i64,
        y: i64,
        w: i64,
        h: i64,
        label: String,
    },
    /// A PU, by index in `host.pus`.
    Pu { x: i64, y: i64, pu: usize },
}

impl Op {
    /// Moves the operation by `dx`, `dy`.
    pub(super) fn shift(&mut self, dx: i64, dy: i64) {
        let (x, y) = match self {
            Op::Group { x, y, .. } | Op::Core { x, y, .. } | Op::Pu { x, y, .. } => (x, y),
        };
        *x += dx;
        *y += dy;
    }
}

/// Lays an item out within `max_w`.
fn layout(item: &Item, max_w: i64, cell_w: i64) -> Block {
    match item {
        Item::Core { label, pus } => {
            let rows = px(pus.len().max(1));
            let w = cell_w + 2 * CORE_PAD;
            let h = CORE_HEAD + rows * CELL_H + (rows - 1) * CELL_GAP + CORE_PAD;
            let mut ops = vec![Op::Core {
                x: 0,
                y: 0,
                w,
                h,
                label: label.clone(),
            }];
            for (row, pu) in pus.iter().enumerate() {
                ops.push(Op::Pu {
                    x: CORE_PAD,
                    y: CORE_HEAD + px(row) * (CELL_H + CELL_GAP),
                    pu: *pu,
                });
            }
            Block { w, h, ops }
        }
        Item::Group(group) => {
            let inner = max_w - 2 * BOX_PAD;
            let content = arrange(&group.children, inner, cell_w);
            let label = if text_w(&group.label, 12) <= inner {
                group.label.clone()
            } else {
                fit(&group.short, inner, 12)
            };
            let w = content.w.max(text_w(&label, 12)) + 2 * BOX_PAD;
            let h = BOX_HEAD + content.h + BOX_PAD;
            let mut ops = vec![Op::Group {
                x: 0,
                y: 0,
                w,
                h,
                class: group.class,
                label,
            }];
            for mut op in content.ops {
                op.shift(BOX_PAD, BOX_HEAD);
                ops.push(op);
            }
            Block { w, h, ops }
        }
    }
}

/// Lays `items` out side by side within `max_w`. Boxes of boxes (packages,
/// nodes, L3 domains) are tried in 1 to 8 columns, each column narrowing the
/// boxes (which then wrap their cores into more rows); the lowest result
/// wins, the fewest columns on a tie. Six L3 domains of 16 cores thus sit
/// three abreast with two rows of cores each, not one under the other.
pub(super) fn arrange(items: &[Item], max_w: i64, cell_w: i64) -> Block {
    let all_groups = items.iter().all(|i| !i.is_core());
    if !all_groups || items.len() < 2 {
        return flow(
            items
                .iter()
                .map(|c| (c.is_core(), layout(c, max_w, cell_w)))
                .collect(),
            max_w,
            None,
        );
    }
    // Narrower than this, a box could not hold one core.
    let narrowest = cell_w + 2 * CORE_PAD + 2 * BOX_PAD;
    let mut best: Option<(i64, Block)> = None;
    for columns in 1..=items.len().min(8) {
        let k = px(columns);
        let each = (max_w - (k - 1) * BOX_GAP) / k;
        if columns > 1 && each < narrowest {
            break;
        }
        let block = flow(
            items
                .iter()
                .map(|c| (false, layout(c, each, cell_w)))
                .collect(),
            max_w,
            Some(columns),
        );
        if best.as_ref().is_none_or(|(h, _)| block.h < *h) {
            best = Some((block.h, block));
        }
    }
    best.map(|(_, b)| b).unwrap_or_default()
}

/// Places blocks left to right, wrapping into rows within `max_w` (and after
/// `columns` blocks, when given). A run of cores alone is wrapped into rows
/// of equal length, so 24 cores in room for 22 make two rows of 12, not 22
/// and 2.
fn flow(blocks: Vec<(bool, Block)>, max_w: i64, columns: Option<usize>) -> Block {
    if blocks.is_empty() {
        return Block::default();
    }
    let all_cores = blocks.iter().all(|(core, _)| *core);
    let per_row = if all_cores {
        let w = blocks.iter().map(|(_, b)| b.w).max().unwrap_or(1);
        let fits = usize::try_from((max_w + CORE_GAP) / (w + CORE_GAP).max(1))
            .unwrap_or(1)
            .max(1);
        let rows = blocks.len().div_ceil(fits);
        blocks.len().div_ceil(rows.max(1))
    } else {
        columns.unwrap_or(usize::MAX).max(1)
    };
    let gap = |a: bool, b: bool| if a && b { CORE_GAP } else { BOX_GAP };
    let row_gap = if all_cores { CORE_GAP } else { BOX_GAP };

    let mut ops = Vec::new();
    let (mut x, mut y, mut row_h, mut in_row) = (0, 0, 0, 0usize);
    let mut width = 0;
    let mut previous_core = false;
    for (core, block) in blocks {
        let step = if in_row == 0 {
            0
        } else {
            gap(previous_core, core)
        };
        if in_row > 0 && (in_row >= per_row || x + step + block.w > max_w) {
            y += row_h + row_gap;
            x = 0;
            row_h = 0;
            in_row = 0;
        } else {
            x += step;
        }
        for mut op in block.ops {
            op.shift(x, y);
            ops.push(op);
        }
        x += block.w;
        width = width.max(x);
        row_h = row_h.max(block.h);
        in_row += 1;
        previous_core = core;
    }
    Block {
        w: width,
        h: y + row_h,
        ops,
    }
}
