//! How many files the offline commands read at once: one file per worker of a rayon pool, every
//! core by default (`RAYON_NUM_THREADS` sets it too), `-j N` to choose. Results come back in
//! input order, so what a command prints does not depend on the number of workers.

use anyhow::Result;
use rayon::prelude::*;

#[derive(Clone, Copy, Debug, Default)]
pub struct Jobs {
    /// Files read at once (default: every core, or RAYON_NUM_THREADS).
    pub jobs: Option<u16>,
}

impl Jobs {
    /// Runs `f` with its parallel work on `-j N` workers, or on rayon's global pool.
    pub fn install<R: Send>(self, f: impl FnOnce() -> R + Send) -> Result<R> {
        match self.jobs {
            None => Ok(f()),
            Some(n) => Ok(rayon::ThreadPoolBuilder::new()
                .num_threads(usize::from(n))
                .build()
                .map_err(|e| anyhow::anyhow!("cannot start {n} worker threads: {e}"))?
                .install(f)),
        }
    }
}

/// `f(item)` for every item, on the current pool's workers; the results in input order, or the
/// error of the first item (in input order) that failed.
pub fn map_in_order<I: Sync, T: Send>(
    items: &[I],
    f: impl Fn(&I) -> Result<T> + Sync + Send,
) -> Result<Vec<T>> {
    let results: Vec<Result<T>> = items.par_iter().map(f).collect();
    results.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_first_error_do_not_depend_on_workers() {
        for jobs in [1, 2, 5] {
            let j = Jobs { jobs: Some(jobs) };
            let v = j
                .install(|| map_in_order(&[3, 1, 2], |&x| Ok(x * 10)))
                .unwrap()
                .unwrap();
            assert_eq!(v, [30, 10, 20]);
            let e = j
                .install(|| {
                    map_in_order(&[0, 1, 2, 3], |&x| {
                        if x >= 1 {
                            anyhow::bail!("item {x}")
                        }
                        Ok(x)
                    })
                })
                .unwrap()
                .unwrap_err();
            assert_eq!(e.to_string(), "item 1");
        }
    }
}
