//! Bounded maps from a CUPTI correlation id to what is known about the call: the id that was on
//! an external-correlation stack when it was made (an NVTX range, a PyTorch operator), or the
//! cycle that recorded it.

use std::collections::HashMap;

/// Correlation id -> value, holding at most `bound` entries: past it the older half goes
/// (correlation ids grow with every call, wrapping at 2^32, and GPU work arrives soon after its
/// call, so old entries are no longer asked for).
#[derive(Debug)]
pub(super) struct Links<V = u64> {
    map: HashMap<u32, V>,
    /// The newest correlation id in `map`.
    newest: u32,
    bound: usize,
}

impl<V> Links<V> {
    pub(super) fn new(bound: usize) -> Links<V> {
        Links {
            map: HashMap::new(),
            newest: 0,
            bound,
        }
    }

    pub(super) fn insert(&mut self, corr: u32, value: V) {
        if self.map.len() >= self.bound {
            let newest = self.newest;
            let keep = (self.bound / 2) as u32;
            self.map.retain(|&c, _| newest.wrapping_sub(c) < keep);
        }
        if self.map.is_empty() || corr.wrapping_sub(self.newest) < 1 << 31 {
            self.newest = corr;
        }
        self.map.insert(corr, value);
    }

    pub(super) fn get(&self, corr: &u32) -> Option<&V> {
        self.map.get(corr)
    }

    pub(super) fn remove(&mut self, corr: &u32) -> Option<V> {
        self.map.remove(corr)
    }

    #[cfg(test)]
    pub(super) fn contains_key(&self, corr: &u32) -> bool {
        self.map.contains_key(corr)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
