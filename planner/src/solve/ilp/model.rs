//! The small, backend-neutral model every integer program is written in
//! (columns, rows, an objective's terms), and what comes back from a solve:
//! the backend's raw values, or its refusal in its own words. The backend
//! (`backend.rs`) solves it; the worker's wire format (`wire.rs`) carries it.

use super::expr::{Expr, Var};

/// The sense of a constraint.
#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    Le,
    Ge,
    Eq,
}

/// A variable's definition: integer or not, and its bounds.
#[derive(Debug, Clone)]
pub(super) struct Column {
    pub(super) integer: bool,
    pub(super) min: f64,
    pub(super) max: f64,
}

/// `terms op rhs`.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) terms: Vec<(Var, f64)>,
    pub(super) op: Op,
    pub(super) rhs: f64,
}

/// A backend-neutral model: rebuilt into good_lp for every solve, with its
/// variables and constraints in the order they were added (the backend's
/// search, and so which optimum it returns, depends on that order).
#[derive(Debug, Clone, Default)]
pub(crate) struct Model {
    pub(super) columns: Vec<Column>,
    pub(super) rows: Vec<Row>,
}

impl Model {
    /// A new integer variable in `0..=max`.
    pub(crate) fn int(&mut self, max: f64) -> Var {
        self.columns.push(Column {
            integer: true,
            min: 0.0,
            max,
        });
        Var::new(self.columns.len() - 1)
    }

    /// A new 0/1 variable.
    pub(crate) fn binary(&mut self) -> Var {
        self.int(1.0)
    }

    /// Whether `e` takes integer values only: integer coefficients of
    /// integer variables (then a value below `x` is at most `x - 1`).
    pub(crate) fn integral(&self, e: &Expr) -> bool {
        let whole = |x: f64| (x - x.round()).abs() < 1e-9;
        whole(e.constant())
            && e.terms().iter().all(|&(v, c)| {
                whole(c) && self.columns.get(v.index()).is_some_and(|col| col.integer)
            })
    }

    /// The upper bound of `v`.
    pub(crate) fn upper(&self, v: Var) -> f64 {
        self.columns.get(v.index()).map_or(0.0, |c| c.max)
    }

    /// How many variables it has.
    pub(crate) fn vars(&self) -> usize {
        self.columns.len()
    }

    /// How many constraints it has.
    pub(crate) fn cons(&self) -> usize {
        self.rows.len()
    }

    /// The point with every variable 0.
    pub(crate) fn zeros(&self) -> Vec<f64> {
        vec![0.0; self.columns.len()]
    }

    /// `lhs ≤ rhs`.
    pub(crate) fn le(&mut self, lhs: impl Into<Expr>, rhs: impl Into<Expr>) {
        self.add(lhs.into(), Op::Le, rhs.into());
    }

    /// `lhs ≥ rhs`.
    pub(crate) fn ge(&mut self, lhs: impl Into<Expr>, rhs: impl Into<Expr>) {
        self.add(lhs.into(), Op::Ge, rhs.into());
    }

    /// `lhs = rhs`.
    pub(crate) fn eq(&mut self, lhs: impl Into<Expr>, rhs: impl Into<Expr>) {
        self.add(lhs.into(), Op::Eq, rhs.into());
    }

    /// `lhs − rhs`'s terms against the constants' difference.
    fn add(&mut self, lhs: Expr, op: Op, rhs: Expr) {
        let bound = rhs.constant() - lhs.constant();
        let mut terms = lhs.terms().to_vec();
        terms.extend(rhs.terms().iter().map(|&(v, c)| (v, -c)));
        self.rows.push(Row {
            terms,
            op,
            rhs: bound,
        });
    }

    /// Whether `values` satisfy every constraint and bound.
    pub(crate) fn feasible(&self, values: &[f64]) -> bool {
        const EPS: f64 = 1e-6;
        values.len() == self.columns.len()
            && self
                .columns
                .iter()
                .zip(values)
                .all(|(v, &x)| x >= v.min - EPS && x <= v.max + EPS)
            && self.rows.iter().all(|c| {
                let lhs = value_of(values, &c.terms);
                match c.op {
                    Op::Le => lhs <= c.rhs + EPS,
                    Op::Ge => lhs >= c.rhs - EPS,
                    Op::Eq => (lhs - c.rhs).abs() <= EPS,
                }
            })
    }
}

impl Model {
    /// `values` with each variable of `objective` moved in turn (in the
    /// order of the variables) as far toward the objective's minimum as its
    /// bounds and every row allow, the others held: a point no worse, and
    /// feasible wherever `values` is. A start the solve before left with
    /// a needless 1 (a VM left out that still marks a node) then meets a
    /// lower bound without a solve.
    pub(crate) fn polished(&self, values: &[f64], objective: &Expr) -> Vec<f64> {
        const EPS: f64 = 1e-9;
        let mut x = values.to_vec();
        if x.len() != self.columns.len() {
            return x;
        }
        let mut cost: std::collections::BTreeMap<usize, f64> = std::collections::BTreeMap::new();
        for &(v, c) in objective.terms() {
            *cost.entry(v.index()).or_default() += c;
        }
        // Per variable of the objective: the rows it is in, its coefficient
        // in each summed.
        let mut rows_of: std::collections::BTreeMap<usize, std::collections::BTreeMap<usize, f64>> =
            std::collections::BTreeMap::new();
        for (r, row) in self.rows.iter().enumerate() {
            for &(v, c) in &row.terms {
                if cost.contains_key(&v.index()) {
                    *rows_of.entry(v.index()).or_default().entry(r).or_default() += c;
                }
            }
        }
        let mut lhs: Vec<f64> = self.rows.iter().map(|r| value_of(&x, &r.terms)).collect();
        for (&j, &c) in &cost {
            let (Some(col), Some(&now)) = (self.columns.get(j), x.get(j)) else {
                continue;
            };
            if c.abs() < EPS {
                continue;
            }
            // The way down the objective, and how far the bounds allow.
            let (dir, mut step) = if c > 0.0 {
                (-1.0, now - col.min)
            } else {
                (1.0, col.max - now)
            };
            let none = std::collections::BTreeMap::new();
            let rows = rows_of.get(&j).unwrap_or(&none);
            for (&r, &a) in rows {
                let (Some(row), Some(&l)) = (self.rows.get(r), lhs.get(r)) else {
                    continue;
                };
                let moves = a * dir;
                if moves.abs() < EPS {
                    continue;
                }
                let room = match row.op {
                    Op::Le if moves > 0.0 => (row.rhs - l) / moves,
                    Op::Ge if moves < 0.0 => (l - row.rhs) / -moves,
                    Op::Eq => 0.0,
                    _ => continue,
                };
                step = step.min(room);
            }
            if col.integer {
                step = (step + EPS).floor();
            }
            if !step.is_finite() || step <= EPS {
                continue;
            }
            if let Some(xj) = x.get_mut(j) {
                *xj += dir * step;
            }
            for (&r, &a) in rows {
                if let Some(l) = lhs.get_mut(r) {
                    *l += a * dir * step;
                }
            }
        }
        x
    }
}

/// The value of `terms` at `values`.
pub(super) fn value_of(values: &[f64], terms: &[(Var, f64)]) -> f64 {
    terms
        .iter()
        .map(|&(v, c)| c * values.get(v.index()).copied().unwrap_or(0.0))
        .sum()
}

/// Why the backend stopped without an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// It proved, before its time limit, that no point satisfies the model.
    #[error("no point satisfies the model (proven)")]
    Infeasible,
    /// Anything else, in the backend's own words: they cross the worker's
    /// socket as text, so no error value of the backend's survives the trip.
    #[error("{0}")]
    Other(String),
}

/// The backend's answer as it gave it: the values (not rounded) and whether
/// it proved them optimal.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Raw {
    pub(super) values: Vec<f64>,
    pub(super) proven: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `x ≤ y` (a VM's core marks its node): with `x` at 0 the `y` the
    /// solve before left at 1 falls to 0; with `x` at 1 it stays.
    #[test]
    fn an_indicator_no_row_holds_up_falls() {
        let mut m = Model::default();
        let (x, y) = (m.binary(), m.binary());
        m.le(x, y);
        let goal = Expr::from(y);
        assert_eq!(m.polished(&[0.0, 1.0], &goal), vec![0.0, 0.0]);
        assert_eq!(m.polished(&[1.0, 1.0], &goal), vec![1.0, 1.0]);
    }

    /// An integer falls by whole units only as far as every row allows
    /// (`2z ≥ 3` keeps `z` at 2), and no further than its bound; an
    /// equality holds it where it is.
    #[test]
    fn a_variable_falls_as_far_as_its_rows_allow() {
        let mut m = Model::default();
        let z = m.int(5.0);
        m.ge(2.0 * z, 3.0);
        assert_eq!(m.polished(&[5.0], &Expr::from(z)), vec![2.0]);
        let mut m = Model::default();
        let z = m.int(5.0);
        m.eq(Expr::from(z), 4.0);
        assert_eq!(m.polished(&[4.0], &Expr::from(z)), vec![4.0]);
        let mut m = Model::default();
        let z = m.int(5.0);
        m.ge(Expr::from(z) - 1.0, 0.0);
        assert_eq!(m.polished(&[3.0], &Expr::from(z)), vec![1.0]);
    }

    /// A negative coefficient moves its variable up, as far as its bound
    /// and the rows allow (`w + x ≤ 3` with `x` at 1: `w` to 2), one
    /// variable after the other: `v`'s rise leaves `w` less room.
    #[test]
    fn a_negative_coefficient_rises_and_the_next_sees_it() {
        let mut m = Model::default();
        let (v, w, x) = (m.int(1.0), m.int(3.0), m.binary());
        m.le(v + w + x, 3.0);
        let goal = -(1.0 * v) - 1.0 * w;
        let p = m.polished(&[0.0, 0.0, 1.0], &goal);
        assert_eq!(p, vec![1.0, 1.0, 1.0]);
        assert!(m.feasible(&p));
    }
}
