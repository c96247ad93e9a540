//! Which NVTX ranges a GPU operation is attributed to: the ranges open on the thread of its
//! launching API call (matched by correlation id) at that call's start.

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::load::{FileData, NO_NAME};

/// Bucket of GPU work whose launching API call was not found in the trace.
pub const NO_LAUNCH: &str = "(no launch record)";
/// Bucket of GPU work launched outside every NVTX range.
pub const NO_RANGE: &str = "(no NVTX range)";

/// NVTX range paths (outermost first), interned: id 0 is the empty path.
pub struct Paths {
    map: FxHashMap<Vec<u32>, u32>,
    pub paths: Vec<Vec<u32>>,
}

impl Default for Paths {
    fn default() -> Self {
        let mut map = FxHashMap::default();
        map.insert(Vec::new(), 0);
        Paths {
            map,
            paths: vec![Vec::new()],
        }
    }
}

impl Paths {
    pub fn id(&mut self, key: &[u32]) -> u32 {
        if let Some(&i) = self.map.get(key) {
            return i;
        }
        let i = self.paths.len() as u32;
        self.paths.push(key.to_vec());
        self.map.insert(key.to_vec(), i);
        i
    }

    /// Innermost range of a path, `NO_NAME` for the empty path.
    pub fn innermost(&self, id: u32) -> u32 {
        self.paths[id as usize].last().copied().unwrap_or(NO_NAME)
    }
}

/// API calls per piece: a thread's calls are cut into pieces whose paths are found each on a
/// worker of its own (one thread launches nearly everything in most programs).
const PIECE: usize = 1 << 16;

/// The ranges open on one thread, swept in time order: those started are pushed in start
/// order, and those ended are popped from the top as calls come.
#[derive(Clone, Default)]
struct Sweep {
    stack: Vec<u32>,
    /// The next range (index into the thread's ranges, sorted) to start.
    next: usize,
}

impl Sweep {
    /// Moves to a call at `t`. `ranges` are the thread's, sorted by start (longer first).
    fn advance(&mut self, f: &FileData, ranges: &[u32], t: i64) {
        let range = |i: u32| &f.ranges[i as usize];
        while self.next < ranges.len() && range(ranges[self.next]).start <= t {
            // Ranges that ended by the time this one starts are its siblings, not its
            // parents, and contain no later call.
            let s = range(ranges[self.next]).start;
            while self.stack.last().is_some_and(|&top| range(top).end <= s) {
                self.stack.pop();
            }
            self.stack.push(ranges[self.next]);
            self.next += 1;
        }
        while self.stack.last().is_some_and(|&top| range(top).end < t) {
            self.stack.pop();
        }
    }

    /// The names of the ranges open at `t`, outermost first, into `key`.
    fn key(&self, f: &FileData, t: i64, key: &mut Vec<u32>) {
        key.clear();
        key.extend(
            self.stack
                .iter()
                .map(|&r| &f.ranges[r as usize])
                .filter(|r| r.end >= t)
                .map(|r| r.name),
        );
    }
}

/// [`PIECE`] calls of one thread, and the sweep as it stands before the first of them.
struct Piece {
    thread: usize,
    calls: std::ops::Range<usize>,
    sweep: Sweep,
}

/// For each API call of `f` (same index as `f.apis`), the path of NVTX ranges open on its thread
/// at its start: range `[s, e]` is open at `t` when `s <= t <= e`; nesting is by start time
/// (a range that starts later is inside), ties broken by the longer range being outside.
///
/// The paths are numbered in the order a single pass over the threads and their calls meets
/// them, whatever the number of workers: each piece numbers its own, and they are renumbered
/// into `paths` piece by piece in that order.
pub fn api_paths(f: &FileData, paths: &mut Paths) -> Vec<u32> {
    let nthreads = f.threads.len();
    let mut apis_by: Vec<Vec<u32>> = vec![Vec::new(); nthreads];
    for (i, a) in f.apis.iter().enumerate() {
        apis_by[a.thread as usize].push(i as u32);
    }
    let mut ranges_by: Vec<Vec<u32>> = vec![Vec::new(); nthreads];
    for (i, r) in f.ranges.iter().enumerate() {
        ranges_by[r.thread as usize].push(i as u32);
    }
    for (apis, ranges) in apis_by.iter_mut().zip(ranges_by.iter_mut()) {
        if apis.is_empty() {
            continue;
        }
        apis.par_sort_by_key(|&i| f.apis[i as usize].start);
        ranges.par_sort_by_key(|&i| {
            let r = &f.ranges[i as usize];
            (r.start, std::cmp::Reverse(r.end))
        });
    }
    // Where each piece starts: the sweep alone, call by call (a few comparisons each), so that
    // the pieces start from exactly the state one pass reaches there.
    let mut pieces: Vec<Piece> = Vec::new();
    for (thread, (apis, ranges)) in apis_by.iter().zip(&ranges_by).enumerate() {
        let mut sweep = Sweep::default();
        for first in (0..apis.len()).step_by(PIECE) {
            let calls = first..apis.len().min(first + PIECE);
            pieces.push(Piece {
                thread,
                calls: calls.clone(),
                sweep: sweep.clone(),
            });
            for &ai in &apis[calls] {
                sweep.advance(f, ranges, f.apis[ai as usize].start);
            }
        }
    }
    // Each piece's paths, numbered in its own `Paths` in the order it meets them.
    let found: Vec<(Vec<u32>, Vec<Vec<u32>>)> = pieces
        .par_iter()
        .map(|p| {
            let (apis, ranges) = (&apis_by[p.thread], &ranges_by[p.thread]);
            let mut sweep = p.sweep.clone();
            let mut own = Paths::default();
            let mut key: Vec<u32> = Vec::new();
            // The path of the call before: calls in a row mostly share it, and comparing a
            // few names is cheaper than a hash lookup.
            let mut last: (Vec<u32>, u32) = (Vec::new(), 0);
            let ids = apis[p.calls.clone()]
                .iter()
                .map(|&ai| {
                    let t = f.apis[ai as usize].start;
                    sweep.advance(f, ranges, t);
                    sweep.key(f, t, &mut key);
                    if key != last.0 {
                        last.1 = own.id(&key);
                        std::mem::swap(&mut last.0, &mut key);
                    }
                    last.1
                })
                .collect();
            (ids, own.paths)
        })
        .collect();
    let mut out = vec![0u32; f.apis.len()];
    for (p, (ids, own)) in pieces.iter().zip(found) {
        let renumbered: Vec<u32> = own.iter().map(|k| paths.id(k)).collect();
        for (&ai, id) in apis_by[p.thread][p.calls.clone()].iter().zip(ids) {
            out[ai as usize] = renumbered[id as usize];
        }
    }
    out
}

/// For each GPU op of `f`, the range path of its launch: `Some(path)` when an API call with its
/// correlation id is in the file, `None` otherwise.
pub fn op_paths(f: &FileData, api_path: &[u32]) -> Vec<Option<u32>> {
    let mut by_corr: FxHashMap<i64, u32> = FxHashMap::default();
    by_corr.reserve(f.apis.len());
    for (i, a) in f.apis.iter().enumerate() {
        if a.corr >= 0 {
            by_corr.entry(a.corr).or_insert(i as u32);
        }
    }
    f.ops
        .iter()
        .map(|o| {
            if o.corr < 0 {
                return None;
            }
            by_corr.get(&o.corr).map(|&i| api_path[i as usize])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call at `start` on `thread` (index into the file's threads).
    fn call(thread: u32, start: i64) -> crate::load::ApiCall {
        crate::load::ApiCall {
            thread,
            start,
            end: start + 1,
            name: 99,
            corr: -1,
            sync: false,
        }
    }

    /// Calls on two threads, three pieces' worth on the first, under ranges that nest, touch
    /// and cross, whose names change along the run (paths first met in later pieces).
    #[test]
    fn pieces_find_and_number_the_paths_of_one_pass() {
        use crate::load::Range;
        use cuprof_core::reader::Id;
        let mut ranges = Vec::new();
        for k in 0..2_000i64 {
            let (at, name) = (k * 1_000, 10 + (k / 300) as u32);
            ranges.push(Range {
                thread: 0,
                start: at,
                end: at + 900,
                name,
            });
            if k % 2 == 1 {
                ranges.push(Range {
                    thread: 0,
                    start: at + 100,
                    end: at + 300,
                    name: name + 100,
                });
            }
            if k % 5 == 0 {
                // Crosses the end of its outer range.
                ranges.push(Range {
                    thread: 0,
                    start: at + 800,
                    end: at + 1_200,
                    name: 7,
                });
            }
        }
        ranges.push(Range {
            thread: 1,
            start: 0,
            end: 50,
            name: 3,
        });
        let mut apis: Vec<crate::load::ApiCall> =
            (0..3 * PIECE as i64 - 5).map(|i| call(0, i * 10)).collect();
        apis.extend([call(1, 10), call(1, 60)]);
        let f = FileData {
            ranges,
            apis,
            threads: vec![(Id::Int(1), Id::Int(1)), (Id::Int(1), Id::Int(2))],
            ..FileData::default()
        };
        let mut paths = Paths::default();
        let got = api_paths(&f, &mut paths);

        // One pass: every call of each thread in time order, numbered as met.
        let mut one = Paths::default();
        let mut want = vec![0u32; f.apis.len()];
        for thread in 0..2u32 {
            let mut calls: Vec<u32> = (0..f.apis.len() as u32)
                .filter(|&i| f.apis[i as usize].thread == thread)
                .collect();
            calls.sort_by_key(|&i| f.apis[i as usize].start);
            let mut ranges: Vec<u32> = (0..f.ranges.len() as u32)
                .filter(|&i| f.ranges[i as usize].thread == thread)
                .collect();
            ranges.sort_by_key(|&i| {
                let r = &f.ranges[i as usize];
                (r.start, std::cmp::Reverse(r.end))
            });
            let (mut sweep, mut key) = (Sweep::default(), Vec::new());
            for i in calls {
                let t = f.apis[i as usize].start;
                sweep.advance(&f, &ranges, t);
                sweep.key(&f, t, &mut key);
                want[i as usize] = one.id(&key);
            }
        }
        assert_eq!(got, want);
        assert_eq!(paths.paths, one.paths);
        // Outer names 10..=16, inner ones 110..=116, the crossing range alone and after an
        // outer one, thread 1's range, and the empty path.
        // Per outer name n (one every 300 ranges, the last first met in the third piece): n
        // alone, then the crossing range (7) inside it, 7 alone past its end, the next outer
        // range inside 7, and the inner range (n + 100) inside both, then inside n alone.
        let mut expected: Vec<Vec<u32>> = vec![vec![]];
        for n in 10..=16 {
            expected.extend([vec![n], vec![n, 7]]);
            if n == 10 {
                expected.push(vec![7]);
            }
            expected.extend([vec![7, n], vec![7, n, n + 100], vec![n, n + 100]]);
        }
        expected.push(vec![3]);
        assert_eq!(paths.paths, expected);
        assert!(f.apis[2 * PIECE].start < 1_800_000);
    }

    #[test]
    fn innermost_range_at_launch() {
        use crate::load::Range;
        use cuprof_core::reader::Id;
        let range = |thread, start, end, name| Range {
            thread,
            start,
            end,
            name,
        };
        let f = FileData {
            rank: Some(0),
            // Thread 0: P [0,100] holds C1 [10,20] and C2 [20,30] (touching siblings), then
            // X [90,150] crosses P's end. Thread 1: Q [0,1000].
            ranges: vec![
                range(0, 20, 30, 3),
                range(0, 0, 100, 1),
                range(0, 10, 20, 2),
                range(0, 90, 150, 4),
                range(1, 0, 1000, 5),
            ],
            apis: vec![
                call(0, 5),
                call(0, 15),
                call(0, 20),
                call(0, 25),
                call(0, 50),
                call(0, 95),
                call(0, 120),
                call(0, 200),
                call(1, 200),
            ],
            threads: vec![(Id::Int(1), Id::Int(1)), (Id::Int(1), Id::Int(2))],
            ..FileData::default()
        };
        let mut paths = Paths::default();
        let got: Vec<Vec<u32>> = api_paths(&f, &mut paths)
            .into_iter()
            .map(|p| paths.paths[p as usize].clone())
            .collect();
        assert_eq!(
            got,
            [
                vec![1],
                vec![1, 2],
                vec![1, 3],
                vec![1, 3],
                vec![1],
                vec![1, 4],
                vec![4],
                vec![],
                vec![5],
            ]
        );
    }
}
