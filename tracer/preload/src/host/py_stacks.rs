//! Python call stacks for `--with-stack`, interned per thread so that an operator pays for a
//! walk of its frames and a hash lookup, and a line-table walk only for a frame position never
//! seen before.
//!
//! A frame's line costs a walk over its code object's line table (CPython's
//! `PyCode_Addr2Line`): about 1,300 instructions for a model's `forward`, counted under
//! callgrind on a diffusers transformer, where the whole operator costs 6,400. Its last
//! instruction (`PyFrame_GetLasti`, Python 3.11+) is read in constant time, so a stack is
//! looked up by the (code object, last instruction) of each frame. A stack met for the first
//! time (the model called from another line of the program, another branch anywhere up the
//! stack) used to have every frame's line read; now each (code, instruction) is translated to
//! its line once and kept, so a new stack reads only the lines of positions never seen, and
//! stacks are shared by their lines (two instructions on one line make one stack).

use cuprof_core::event::{Name, PyFrame, PyStack};
use rustc_hash::FxHashMap;

/// Where one frame of the stack being read is: its code object's address and its position
/// (the last instruction where the interpreter says it, else its line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Site {
    pub code: usize,
    pub at: u32,
}

/// The interpreter's side of a read: what the cache asks of the frames being read, by their
/// index in the `sites` passed to [`StackCache::stack`].
pub trait Frames {
    /// The line frame `i` is executing (the costly part of a read).
    fn line(&mut self, i: usize) -> u32;
    /// The file and function of frame `i`'s code object. With `keep`, the code object is kept
    /// alive from now on, because its address becomes a key of the cache.
    fn names(&mut self, i: usize, keep: bool) -> (Name, Name);
}

/// Code objects whose names are kept (each one kept alive, so its address never names another).
const MAX_CODES: usize = 1 << 16;
/// (code, instruction) -> line translations kept.
const MAX_SITES: usize = 1 << 16;
/// Distinct stacks remembered under each key; past it that map starts over.
const MAX_STACKS: usize = 1 << 14;

/// One thread's stacks.
#[derive(Default)]
pub struct StackCache {
    /// Code object address -> (file, function).
    codes: FxHashMap<usize, (Name, Name)>,
    /// (code, instruction) -> line.
    lines: FxHashMap<Site, u32>,
    /// The sites of each frame, innermost first -> the shared stack.
    by_site: FxHashMap<Vec<Site>, PyStack>,
    /// (code, line) of each frame, innermost first -> the shared stack.
    by_line: FxHashMap<Vec<Site>, PyStack>,
    /// The line key being built (reused: no allocation per read).
    line_key: Vec<Site>,
}

impl StackCache {
    /// The stack whose frames are at `sites` (innermost first).
    pub fn stack(&mut self, sites: &[Site], frames: &mut impl Frames) -> PyStack {
        if let Some(s) = self.by_site.get(sites) {
            return s.clone();
        }
        // Cached only if every code object in it is kept alive (under MAX_CODES).
        let mut cacheable = true;
        self.line_key.clear();
        for (i, site) in sites.iter().enumerate() {
            let line = match self.lines.get(site) {
                Some(&line) => line,
                None => {
                    let line = frames.line(i);
                    if self.keep_code(site.code, i, frames) {
                        if self.lines.len() >= MAX_SITES {
                            self.lines.clear();
                        }
                        self.lines.insert(*site, line);
                    } else {
                        cacheable = false;
                    }
                    line
                }
            };
            self.line_key.push(Site {
                code: site.code,
                at: line,
            });
        }
        let stack = match self.by_line.get(&self.line_key) {
            Some(s) => s.clone(),
            None => {
                let stack: PyStack = (0..sites.len())
                    .map(|i| self.frame(sites[i].code, self.line_key[i].at, i, frames))
                    .collect::<Vec<PyFrame>>()
                    .into();
                if cacheable {
                    if self.by_line.len() >= MAX_STACKS {
                        self.by_line.clear();
                    }
                    self.by_line.insert(self.line_key.clone(), stack.clone());
                }
                stack
            }
        };
        if cacheable {
            if self.by_site.len() >= MAX_STACKS {
                self.by_site.clear();
            }
            self.by_site.insert(sites.to_vec(), stack.clone());
        }
        stack
    }

    /// Whether `code` (frame `i`'s) is kept alive by the cache, keeping it now if there is room.
    fn keep_code(&mut self, code: usize, i: usize, frames: &mut impl Frames) -> bool {
        if self.codes.contains_key(&code) {
            return true;
        }
        if self.codes.len() >= MAX_CODES {
            return false;
        }
        let names = frames.names(i, true);
        self.codes.insert(code, names);
        true
    }

    /// Frame `i`, at `line` of `code`.
    fn frame(&self, code: usize, line: u32, i: usize, frames: &mut impl Frames) -> PyFrame {
        let (file, function) = match self.codes.get(&code) {
            Some(names) => names.clone(),
            None => frames.names(i, false),
        };
        PyFrame {
            file,
            line,
            function,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// An interpreter whose frame `i` is at `lines[i]` of code `codes[i]`, counting what it is
    /// asked.
    #[derive(Default)]
    struct Fake {
        lines: Vec<u32>,
        codes: Vec<usize>,
        line_reads: usize,
        kept: Vec<usize>,
    }

    impl Frames for Fake {
        fn line(&mut self, i: usize) -> u32 {
            self.line_reads += 1;
            self.lines[i]
        }
        fn names(&mut self, i: usize, keep: bool) -> (Name, Name) {
            if keep {
                self.kept.push(self.codes[i]);
            }
            let code = self.codes[i];
            (
                Name::from(format!("f{code}.py")),
                Name::from(format!("fn{code}")),
            )
        }
    }

    fn read(cache: &mut StackCache, fake: &mut Fake, at: &[(usize, u32, u32)]) -> PyStack {
        fake.codes = at.iter().map(|a| a.0).collect();
        fake.lines = at.iter().map(|a| a.2).collect();
        let sites: Vec<Site> = at.iter().map(|&(code, at, _)| Site { code, at }).collect();
        cache.stack(&sites, fake)
    }

    #[test]
    fn a_stack_names_each_frames_file_line_and_function_innermost_first() {
        let (mut cache, mut fake) = (StackCache::default(), Fake::default());
        let s = read(&mut cache, &mut fake, &[(7, 40, 12), (9, 8, 3)]);
        let want = |file: &str, line, function: &str| PyFrame {
            file: Name::from(file),
            line,
            function: Name::from(function),
        };
        assert_eq!(&s[..], &[want("f7.py", 12, "fn7"), want("f9.py", 3, "fn9")]);
        assert_eq!(fake.kept, [7, 9]);
    }

    #[test]
    fn a_stack_read_again_reads_no_line() {
        let (mut cache, mut fake) = (StackCache::default(), Fake::default());
        let a = read(&mut cache, &mut fake, &[(7, 40, 12), (9, 8, 3)]);
        assert_eq!(fake.line_reads, 2);
        let b = read(&mut cache, &mut fake, &[(7, 40, 12), (9, 8, 3)]);
        assert_eq!(fake.line_reads, 2);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(fake.kept, [7, 9]);
    }

    #[test]
    fn one_line_reached_at_two_instructions_is_one_stack_and_one_line_read_each() {
        // Two calls on one line, at instructions 40 and 44: one line, one stack.
        let (mut cache, mut fake) = (StackCache::default(), Fake::default());
        let a = read(&mut cache, &mut fake, &[(7, 40, 12), (9, 8, 3)]);
        let b = read(&mut cache, &mut fake, &[(7, 44, 12), (9, 8, 3)]);
        assert!(Arc::ptr_eq(&a, &b));
        // Only the new instruction's line was read; the outer frame's came from the cache.
        assert_eq!(fake.line_reads, 3);
        // A new caller of known inner frames (the model called from another line) reads only
        // the caller's line.
        let c = read(&mut cache, &mut fake, &[(7, 44, 12), (9, 10, 3)]);
        assert!(Arc::ptr_eq(&a, &c));
        assert_eq!(fake.line_reads, 4);
        // Once seen, every combination is a hit.
        read(&mut cache, &mut fake, &[(7, 40, 12), (9, 10, 3)]);
        read(&mut cache, &mut fake, &[(7, 40, 12), (9, 10, 3)]);
        assert_eq!(fake.line_reads, 4);
    }

    #[test]
    fn stacks_differing_in_one_line_are_two_stacks() {
        let (mut cache, mut fake) = (StackCache::default(), Fake::default());
        let a = read(&mut cache, &mut fake, &[(7, 40, 12), (9, 8, 3)]);
        let b = read(&mut cache, &mut fake, &[(7, 52, 13), (9, 8, 3)]);
        assert_eq!(a[0].line, 12);
        assert_eq!(b[0].line, 13);
        assert_eq!(b[1].line, 3);
        assert_eq!(cache.by_line.len(), 2);
    }

    #[test]
    fn past_the_code_limit_stacks_are_read_whole_and_not_cached() {
        let (mut cache, mut fake) = (StackCache::default(), Fake::default());
        for code in 0..MAX_CODES {
            cache
                .codes
                .insert(code + 1000, (Name::from("x"), Name::from("y")));
        }
        let a = read(&mut cache, &mut fake, &[(7, 40, 12)]);
        let b = read(&mut cache, &mut fake, &[(7, 40, 12)]);
        assert_eq!(a, b);
        assert_eq!(&*a[0].file, "f7.py");
        // Nothing kept alive, nothing cached: the line is read each time.
        assert!(fake.kept.is_empty());
        assert_eq!(fake.line_reads, 2);
        assert!(cache.by_site.is_empty() && cache.by_line.is_empty() && cache.lines.is_empty());
    }
}
