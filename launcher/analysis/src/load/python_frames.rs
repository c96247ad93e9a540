//! Call stacks for operators from torch.profiler's Python function events.
//!
//! torch.profiler's `with_stack` in torch 2.x records every Python call as a `python_function`
//! event (`model.py(8): forward`, `nn.Module: Linear_0`, `<built-in method relu ...>`) and
//! writes no `Call stack` on the operators, which is what cuprof's traces (and older
//! torch.profiler's) carry. An operator without one gets the Python functions open on its
//! thread when it started, innermost first, in `Call stack`'s form (`file(line): function`
//! frames, `;` between), so that call sites, flame graphs and findings read both kinds of trace
//! alike. Built-ins and modules are not frames of code and are left out. torch names each
//! function by the line it is defined on and records no line inside it, so a call site read
//! this way names the function that called into PyTorch, not the line.

use rustc_hash::FxHashMap;

use crate::load::columns::{CpuOp, Interner, NO_NAME};

/// A `python_function` event of Python code, on a thread of the file.
#[derive(Debug, Clone, Copy)]
pub struct PyFrame {
    pub thread: u32,
    pub start: i64,
    pub end: i64,
    /// Its name (`file(line): function`), interned.
    pub name: u32,
}

/// Whether a `python_function` event's name is a frame of Python code (`file(line): function`),
/// not a module's (`nn.Module: Linear_0`) or a built-in's (`<built-in method ...>`).
pub fn is_code_frame(name: &str) -> bool {
    let Some(at) = name.find("): ") else {
        return false;
    };
    name[..at].rsplit_once('(').is_some_and(|(file, line)| {
        !file.is_empty() && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Gives each operator of `ops` that has no `Call stack` the code frames of `frames` open on
/// its thread when it started (a frame is open from its start to its end; Python calls nest).
/// Whether any operator got one.
pub fn attach(ops: &mut [CpuOp], frames: &mut [PyFrame], names: &mut Interner) -> bool {
    if frames.is_empty() {
        return false;
    }
    // Enclosing frames first among those starting together.
    frames.sort_unstable_by_key(|f| (f.thread, f.start, std::cmp::Reverse(f.end)));
    let mut order: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].stack == NO_NAME)
        .collect();
    order.sort_unstable_by_key(|&i| (ops[i].thread, ops[i].start));
    // A stack per innermost frame: the frames under it are the same for every operator in it.
    let mut stacks: FxHashMap<usize, u32> = FxHashMap::default();
    let mut open: Vec<usize> = Vec::new();
    let (mut next, mut thread) = (0, None);
    let mut text = String::new();
    let mut attached = false;
    for i in order {
        let op = ops[i];
        if thread != Some(op.thread) {
            thread = Some(op.thread);
            open.clear();
            while next < frames.len() && frames[next].thread < op.thread {
                next += 1;
            }
        }
        while next < frames.len()
            && frames[next].thread == op.thread
            && frames[next].start <= op.start
        {
            let start = frames[next].start;
            while open.last().is_some_and(|&f| frames[f].end <= start) {
                open.pop();
            }
            open.push(next);
            next += 1;
        }
        while open.last().is_some_and(|&f| frames[f].end <= op.start) {
            open.pop();
        }
        let Some(&innermost) = open.last() else {
            continue;
        };
        attached = true;
        ops[i].stack = *stacks.entry(innermost).or_insert_with(|| {
            text.clear();
            for &f in open.iter().rev() {
                if !text.is_empty() {
                    text.push(';');
                }
                text.push_str(names.name(frames[f].name));
            }
            names.id(&text)
        });
    }
    attached
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_frames_are_file_line_function() {
        assert!(is_code_frame("gen.py(8): forward"));
        assert!(is_code_frame(
            "torch/nn/modules/module.py(1791): _call_impl"
        ));
        assert!(is_code_frame("<frozen runpy>(88): _run_code"));
        assert!(!is_code_frame("nn.Module: Linear_0"));
        assert!(!is_code_frame(
            "<built-in method relu of type object at 0x7f35d98bc100>"
        ));
        assert!(!is_code_frame("f(x): g"));
        assert!(!is_code_frame("(12): g"));
    }

    fn op(thread: u32, start: i64, end: i64, stack: u32) -> CpuOp {
        CpuOp {
            thread,
            start,
            end,
            name: 0,
            ext: -1,
            dims: NO_NAME,
            stack,
            flops: 0,
        }
    }

    #[test]
    fn operators_get_the_frames_open_on_their_thread() {
        let mut names = Interner::default();
        let mut frame = |thread, start, end, name: &str| PyFrame {
            thread,
            start,
            end,
            name: names.id(name),
        };
        let mut frames = vec![
            frame(0, 30, 60, "m.py(8): forward"),
            frame(0, 0, 100, "t.py(1): <module>"),
            frame(0, 70, 90, "t.py(4): helper"),
            frame(1, 0, 50, "w.py(2): worker"),
        ];
        let own = names.id("x.py(3): own");
        let mut ops = vec![
            op(0, 35, 50, NO_NAME),
            op(0, 40, 45, NO_NAME),
            op(0, 65, 68, NO_NAME),
            op(0, 75, 80, own),
            op(1, 10, 20, NO_NAME),
            op(1, 60, 70, NO_NAME),
            op(2, 10, 20, NO_NAME),
        ];
        assert!(attach(&mut ops, &mut frames, &mut names));
        let stacks: Vec<&str> = ops
            .iter()
            .map(|o| {
                if o.stack == NO_NAME {
                    ""
                } else {
                    names.name(o.stack)
                }
            })
            .collect();
        assert_eq!(
            stacks,
            [
                "m.py(8): forward;t.py(1): <module>",
                "m.py(8): forward;t.py(1): <module>",
                "t.py(1): <module>",
                "x.py(3): own",
                "w.py(2): worker",
                "",
                ""
            ]
        );
        // Operators with stacks of their own, or in no frame: none attached.
        let mut ops = vec![op(0, 75, 80, own), op(0, 200, 210, NO_NAME)];
        assert!(!attach(&mut ops, &mut frames, &mut names));
        assert!(!attach(&mut ops, &mut [], &mut names));
    }
}
