//! Which NVTX ranges a GPU operation is attributed to: the ranges open on the thread of its
//! launching API call (matched by correlation id) at that call's start.

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

/// For each API call of `f` (same index as `f.apis`), the path of NVTX ranges open on its thread
/// at its start: range `[s, e]` is open at `t` when `s <= t <= e`; nesting is by start time
/// (a range that starts later is inside), ties broken by the longer range being outside.
pub fn api_paths(f: &FileData, paths: &mut Paths) -> Vec<u32> {
    let mut out = vec![0u32; f.apis.len()];
    let nthreads = f.threads.len();
    let mut apis_by: Vec<Vec<u32>> = vec![Vec::new(); nthreads];
    for (i, a) in f.apis.iter().enumerate() {
        apis_by[a.thread as usize].push(i as u32);
    }
    let mut ranges_by: Vec<Vec<u32>> = vec![Vec::new(); nthreads];
    for (i, r) in f.ranges.iter().enumerate() {
        ranges_by[r.thread as usize].push(i as u32);
    }
    let mut stack: Vec<u32> = Vec::new();
    let mut key: Vec<u32> = Vec::new();
    // The path of the call before on the same thread: calls in a row mostly share it, and
    // comparing a few names is cheaper than a hash lookup (this loop runs on one core).
    let mut last: (Vec<u32>, u32) = (Vec::new(), 0);
    for (apis, ranges) in apis_by.iter_mut().zip(ranges_by.iter_mut()) {
        if apis.is_empty() {
            continue;
        }
        apis.sort_by_key(|&i| f.apis[i as usize].start);
        ranges.sort_by_key(|&i| {
            let r = &f.ranges[i as usize];
            (r.start, std::cmp::Reverse(r.end))
        });
        stack.clear();
        let mut next = 0;
        for &ai in apis.iter() {
            let t = f.apis[ai as usize].start;
            while next < ranges.len() && f.ranges[ranges[next] as usize].start <= t {
                // Ranges that ended by the time this one starts are its siblings, not its
                // parents, and contain no later call.
                let s = f.ranges[ranges[next] as usize].start;
                while stack
                    .last()
                    .is_some_and(|&top| f.ranges[top as usize].end <= s)
                {
                    stack.pop();
                }
                stack.push(ranges[next]);
                next += 1;
            }
            while let Some(&top) = stack.last() {
                if f.ranges[top as usize].end < t {
                    stack.pop();
                } else {
                    break;
                }
            }
            key.clear();
            key.extend(
                stack
                    .iter()
                    .map(|&r| &f.ranges[r as usize])
                    .filter(|r| r.end >= t)
                    .map(|r| r.name),
            );
            if key != last.0 {
                last.1 = paths.id(&key);
                std::mem::swap(&mut last.0, &mut key);
            }
            out[ai as usize] = last.1;
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

    #[test]
    fn innermost_range_at_launch() {
        use crate::load::{ApiCall, Range};
        use cuprof_core::reader::Id;
        let range = |thread, start, end, name| Range {
            thread,
            start,
            end,
            name,
        };
        let api = |thread, start| ApiCall {
            thread,
            start,
            end: start + 1,
            name: 99,
            corr: -1,
            sync: false,
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
                api(0, 5),
                api(0, 15),
                api(0, 20),
                api(0, 25),
                api(0, 50),
                api(0, 95),
                api(0, 120),
                api(0, 200),
                api(1, 200),
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
