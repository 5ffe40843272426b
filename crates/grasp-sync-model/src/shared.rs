//! [`Shared`]: a value two owners can hold as one copy while they agree, copied on the first
//! write to it while shared.
//!
//! A relay's targets and what was confirmed of them are equal once its sync caught up, and each
//! holds the relay's repositories and root events: thousands of B-tree entries per relay at ten
//! times the gitnostr size. [`Shared::share_if_equal`] lets the confirmed copy hold the targets'
//! one; the first change to either copies it again.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

/// A value behind an [`Arc`]: reads go through [`Deref`]; a write through [`DerefMut`] copies
/// the value first if another `Shared` holds it too (`Arc::make_mut`). Compared, hashed and
/// formatted as the value it holds.
///
/// ```
/// use std::collections::BTreeSet;
///
/// use grasp_sync_model::Shared;
///
/// let targets: Shared<BTreeSet<u32>> = [1, 2, 3].into_iter().collect();
/// let mut confirmed: Shared<BTreeSet<u32>> = [3, 2, 1].into_iter().collect();
/// assert!(confirmed.share_if_equal(&targets));
/// assert!(confirmed.is_shared_with(&targets));
///
/// // The first write copies: the targets do not change.
/// confirmed.insert(4);
/// assert!(!confirmed.is_shared_with(&targets));
/// assert_eq!(targets.len(), 3);
/// assert_eq!(confirmed.len(), 4);
/// ```
#[derive(Default, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    /// Holds `value` alone.
    pub fn new(value: T) -> Self {
        Self(Arc::new(value))
    }

    /// Whether `self` and `other` hold the same copy.
    pub fn is_shared_with(&self, other: &Shared<T>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The value, to change in place, if no other `Shared` holds it (as [`Arc::get_mut`]; an
    /// associated function, so the value's own `get_mut` stays a method).
    pub fn get_mut(this: &mut Self) -> Option<&mut T> {
        Arc::get_mut(&mut this.0)
    }
}

impl<T: PartialEq> Shared<T> {
    /// Gives up this copy for `other`'s when the two are equal (comparing them costs a pass
    /// over both unless they are one copy already); whether they now share one.
    pub fn share_if_equal(&mut self, other: &Shared<T>) -> bool {
        if self.is_shared_with(other) {
            return true;
        }
        if *self.0 != *other.0 {
            return false;
        }
        self.0 = Arc::clone(&other.0);
        true
    }
}

impl<T: Clone> Shared<T> {
    /// The value: this copy if no other `Shared` holds it, else a copy of it.
    pub fn into_inner(self) -> T {
        Arc::unwrap_or_clone(self.0)
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    /// The value, copied first if another `Shared` holds it too.
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T: PartialEq> PartialEq<T> for Shared<T> {
    fn eq(&self, other: &T) -> bool {
        *self.0 == *other
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T: FromIterator<A>, A> FromIterator<A> for Shared<T> {
    fn from_iter<I: IntoIterator<Item = A>>(iter: I) -> Self {
        Self::new(iter.into_iter().collect())
    }
}

impl<T: Extend<A> + Clone, A> Extend<A> for Shared<T> {
    fn extend<I: IntoIterator<Item = A>>(&mut self, iter: I) {
        (**self).extend(iter);
    }
}

impl<T: Clone + IntoIterator> IntoIterator for Shared<T> {
    type Item = T::Item;
    type IntoIter = T::IntoIter;

    /// Iterates over the value, copied first if another `Shared` holds it too.
    fn into_iter(self) -> Self::IntoIter {
        self.into_inner().into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Shared<T>
where
    &'a T: IntoIterator,
{
    type Item = <&'a T as IntoIterator>::Item;
    type IntoIter = <&'a T as IntoIterator>::IntoIter;

    fn into_iter(self) -> Self::IntoIter {
        (*self.0).into_iter()
    }
}

impl<T: fmt::Debug> fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn unequal_values_keep_their_own_copies() {
        let targets: Shared<BTreeMap<u8, u8>> = [(1, 1)].into_iter().collect();
        let mut confirmed: Shared<BTreeMap<u8, u8>> = [(1, 2)].into_iter().collect();
        assert!(!confirmed.share_if_equal(&targets));
        assert!(!confirmed.is_shared_with(&targets));
        assert_eq!(confirmed.get(&1), Some(&2));
    }

    #[test]
    fn a_write_to_either_copy_leaves_the_other_unchanged() {
        let mut targets: Shared<BTreeMap<u8, u8>> = [(1, 1), (2, 2)].into_iter().collect();
        let mut confirmed = Shared::new(BTreeMap::from([(2, 2), (1, 1)]));
        assert!(confirmed.share_if_equal(&targets));

        targets.remove(&1);
        assert_eq!(confirmed.len(), 2);
        assert!(!confirmed.is_shared_with(&targets));

        assert!(!confirmed.share_if_equal(&targets));
        confirmed.retain(|key, _| *key != 1);
        assert!(confirmed.share_if_equal(&targets));
        confirmed.extend([(3, 3)]);
        assert_eq!(targets.keys().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(confirmed.keys().copied().collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn it_compares_and_iterates_as_its_value() {
        let a: Shared<Vec<u8>> = vec![1, 2].into();
        let b: Shared<Vec<u8>> = [1, 2].into_iter().collect();
        assert_eq!(a, b);
        assert_eq!(format!("{a:?}"), "[1, 2]");
        assert_eq!((&a).into_iter().copied().sum::<u8>(), 3);
    }
}
