//! Randomness.

use super::*;

/// The harness's generator with the helpers the grammar uses.
pub(super) struct Rng(pub(super) harness::Rng);

impl Rng {
    pub(super) fn new(seed: u64) -> Self {
        Rng(harness::Rng::new(seed))
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0.next()
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(super) fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }

    /// A number in `lo..=hi`.
    pub(super) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }

    pub(super) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub(super) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub(super) fn copy_of<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}
