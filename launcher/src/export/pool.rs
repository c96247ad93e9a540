//! Runs one job per input file on a few threads: each thread takes the next file when it is
//! done with one, so a large file does not hold up the small ones behind it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::Result;

/// `f(0..n)` on `threads` threads; the results in index order, or the error of the lowest
/// index that failed (no new job starts once one has failed).
pub fn map<T: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(usize) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<T>>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = f(i);
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                results.lock().expect("no panics while held")[i] = Some(r);
            });
        }
    });
    let mut out = Vec::with_capacity(n);
    for r in results.into_inner().expect("no panics while held") {
        match r {
            Some(Ok(v)) => out.push(v),
            Some(Err(e)) => return Err(e),
            // Not started because an earlier job failed: that error comes first, or a later
            // one that failed while this was waiting.
            None => continue,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_in_order_and_first_error() {
        let v = map(10, 3, |i| Ok(i * 2)).unwrap();
        assert_eq!(v, (0..10).map(|i| i * 2).collect::<Vec<_>>());
        let e = map(5, 1, |i| {
            if i >= 2 {
                anyhow::bail!("job {i}")
            }
            Ok(i)
        })
        .unwrap_err();
        assert_eq!(e.to_string(), "job 2");
        assert!(map(0, 4, Ok::<usize, anyhow::Error>).unwrap().is_empty());
    }
}
