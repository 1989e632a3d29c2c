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
