//! Linear expressions over a model's variables: [`Var`] and [`Expr`] with `+`,
//! `-`, `*` by a constant and `sum()`, so that the models read like the algebra
//! they state (`m.le(n, most * u)` for `n ≤ most · u`).

use std::ops::{Add, AddAssign, Mul, Neg, Sub, SubAssign};

/// A variable of a [`super::backend::Model`]: its column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Var(usize);

impl Var {
    /// The variable of column `index`.
    pub(crate) fn new(index: usize) -> Var {
        Var(index)
    }

    /// Its column.
    pub(crate) fn index(self) -> usize {
        self.0
    }

    /// Its value at `values`, rounded to a count (0 when absent or negative).
    pub(crate) fn count(self, values: &[f64]) -> u32 {
        values.get(self.0).copied().unwrap_or(0.0).round().max(0.0) as u32
    }
}

/// `Σ coefficient · variable + constant`. Terms keep the order they were
/// written in; a variable may appear more than once (the backend adds them).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Expr {
    terms: Vec<(Var, f64)>,
    constant: f64,
}

impl Expr {
    /// Its terms, in the order written.
    pub(crate) fn terms(&self) -> &[(Var, f64)] {
        &self.terms
    }

    /// Its constant.
    pub(crate) fn constant(&self) -> f64 {
        self.constant
    }

    /// Whether it has no terms.
    pub(crate) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// How many terms it has.
    pub(crate) fn len(&self) -> usize {
        self.terms.len()
    }

    /// Its value at `values` (a variable not in `values` counts 0).
    pub(crate) fn value(&self, values: &[f64]) -> f64 {
        let linear: f64 = self
            .terms
            .iter()
            .map(|&(v, c)| c * values.get(v.0).copied().unwrap_or(0.0))
            .sum();
        // Adding a zero constant would turn -0.0 into 0.0, which `total_cmp`
        // orders differently: the callers compare values that way.
        if self.constant == 0.0 {
            linear
        } else {
            linear + self.constant
        }
    }
}

impl From<Var> for Expr {
    fn from(v: Var) -> Expr {
        Expr {
            terms: vec![(v, 1.0)],
            constant: 0.0,
        }
    }
}

impl From<f64> for Expr {
    fn from(constant: f64) -> Expr {
        Expr {
            terms: Vec::new(),
            constant,
        }
    }
}

impl<T: Into<Expr>> AddAssign<T> for Expr {
    fn add_assign(&mut self, rhs: T) {
        let rhs = rhs.into();
        self.terms.extend(rhs.terms);
        self.constant += rhs.constant;
    }
}

impl<T: Into<Expr>> SubAssign<T> for Expr {
    fn sub_assign(&mut self, rhs: T) {
        let rhs = rhs.into();
        self.terms
            .extend(rhs.terms.into_iter().map(|(v, c)| (v, -c)));
        self.constant -= rhs.constant;
    }
}

impl<T: Into<Expr>> Add<T> for Expr {
    type Output = Expr;

    fn add(mut self, rhs: T) -> Expr {
        self += rhs;
        self
    }
}

impl<T: Into<Expr>> Sub<T> for Expr {
    type Output = Expr;

    fn sub(mut self, rhs: T) -> Expr {
        self -= rhs;
        self
    }
}

impl<T: Into<Expr>> Add<T> for Var {
    type Output = Expr;

    fn add(self, rhs: T) -> Expr {
        Expr::from(self) + rhs
    }
}

impl<T: Into<Expr>> Sub<T> for Var {
    type Output = Expr;

    fn sub(self, rhs: T) -> Expr {
        Expr::from(self) - rhs
    }
}

impl Mul<f64> for Expr {
    type Output = Expr;

    fn mul(mut self, k: f64) -> Expr {
        for term in &mut self.terms {
            term.1 *= k;
        }
        self.constant *= k;
        self
    }
}

impl Mul<Expr> for f64 {
    type Output = Expr;

    fn mul(self, e: Expr) -> Expr {
        e * self
    }
}

impl Mul<f64> for Var {
    type Output = Expr;

    fn mul(self, k: f64) -> Expr {
        Expr {
            terms: vec![(self, k)],
            constant: 0.0,
        }
    }
}

impl Mul<Var> for f64 {
    type Output = Expr;

    fn mul(self, v: Var) -> Expr {
        v * self
    }
}

impl Neg for Expr {
    type Output = Expr;

    fn neg(self) -> Expr {
        Expr::default() - self
    }
}

impl Neg for Var {
    type Output = Expr;

    fn neg(self) -> Expr {
        self * -1.0
    }
}

impl std::iter::Sum<Expr> for Expr {
    fn sum<I: Iterator<Item = Expr>>(iter: I) -> Expr {
        iter.fold(Expr::default(), |acc, e| acc + e)
    }
}

impl std::iter::Sum<Var> for Expr {
    fn sum<I: Iterator<Item = Var>>(iter: I) -> Expr {
        Expr {
            terms: iter.map(|v| (v, 1.0)).collect(),
            constant: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algebra_keeps_terms_in_order() {
        let (x, y) = (Var::new(0), Var::new(1));
        let e = 2.0 * x - y * 3.0 + 1.0;
        assert_eq!(e.terms(), &[(x, 2.0), (y, -3.0)]);
        assert_eq!(e.constant(), 1.0);
        assert_eq!(e.value(&[1.0, 1.0]), 0.0);
        let s: Expr = [x, y, x].into_iter().sum();
        assert_eq!(s.value(&[2.0, 5.0]), 9.0);
        assert_eq!((-s).value(&[2.0, 5.0]), -9.0);
    }

    /// An expression of negative terms at zero is -0.0, as a plain sum is.
    #[test]
    fn a_zero_constant_keeps_the_sign_of_zero() {
        let e = -Var::new(0);
        assert!(e.value(&[0.0]).is_sign_negative());
    }
}
