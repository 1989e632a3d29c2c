//! The index spaces of fleet planning, each its own type: a VM of the spec,
//! a host of the spec, a class of hosts alike, a kind of VMs alike and a bin
//! of the assignment are all positions in a list, and a [`Per`] list is
//! indexed by one of them only (a host's index can never pick a bin).

use std::marker::PhantomData;

/// A position in one of the fleet's lists.
pub trait Index: Copy {
    /// The index at position `i`.
    fn at(i: usize) -> Self;
    /// Its position.
    fn get(self) -> usize;
}

macro_rules! index_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(usize);

        impl Index for $name {
            fn at(i: usize) -> Self {
                $name(i)
            }
            fn get(self) -> usize {
                self.0
            }
        }
    };
}

index_type!(
    /// A VM of the fleet spec (its position in `spec.vms`).
    VmIx
);
index_type!(
    /// A host of the fleet spec (its position in `spec.hosts`).
    HostIx
);
index_type!(
    /// A class of hosts alike (one request read for all of them).
    ClassIx
);
index_type!(
    /// A kind of VMs alike for the assignment.
    KindIx
);
index_type!(
    /// A bin of the assignment: one host, or hosts alike counted together.
    BinIx
);

/// A list with one item per index of type `I`.
#[derive(Debug, Clone, PartialEq)]
pub struct Per<I, T> {
    items: Vec<T>,
    index: PhantomData<I>,
}

impl<I: Index, T> Per<I, T> {
    /// An empty list.
    pub fn new() -> Self {
        Per::from(Vec::new())
    }

    /// `n` items, the item of index `i` made by `make(i)`.
    pub fn from_fn(n: usize, make: impl FnMut(I) -> T) -> Self {
        (0..n).map(I::at).map(make).collect()
    }

    /// Adds `item` at the end; its index.
    pub fn push(&mut self, item: T) -> I {
        self.items.push(item);
        I::at(self.items.len() - 1)
    }

    /// How many items.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The item of index `i`, when there is one.
    pub fn get(&self, i: I) -> Option<&T> {
        self.items.get(i.get())
    }

    /// Every index, in order.
    pub fn ids(&self) -> std::iter::Map<std::ops::Range<usize>, fn(usize) -> I> {
        (0..self.items.len()).map(I::at as fn(usize) -> I)
    }

    /// The items, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// The items with their indexes, in order.
    pub fn enumerate(&self) -> impl Iterator<Item = (I, &T)> {
        self.items.iter().enumerate().map(|(i, t)| (I::at(i), t))
    }

    /// The items, in order, taken.
    pub fn into_vec(self) -> Vec<T> {
        self.items
    }
}

impl<I: Index, T> Default for Per<I, T> {
    fn default() -> Self {
        Per::new()
    }
}

impl<I, T> From<Vec<T>> for Per<I, T> {
    fn from(items: Vec<T>) -> Self {
        Per {
            items,
            index: PhantomData,
        }
    }
}

impl<I, T> FromIterator<T> for Per<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        Per::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<I: Index, T> std::ops::Index<I> for Per<I, T> {
    type Output = T;
    fn index(&self, i: I) -> &T {
        &self.items[i.get()]
    }
}

impl<I: Index, T> std::ops::IndexMut<I> for Per<I, T> {
    fn index_mut(&mut self, i: I) -> &mut T {
        &mut self.items[i.get()]
    }
}

impl<'a, I, T> IntoIterator for &'a Per<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}
