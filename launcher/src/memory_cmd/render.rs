//! The text `cuprof memory` prints for a pickle: per device, the peak and what reached it, what
//! is live at the end, and the trace's entries by action; then the blocks the trace leaked and
//! those alive at the peak of allocated blocks, by stack.

use std::fmt::Write as _;

use super::blocks::{Blocks, Group};
use super::snapshot::{DeviceSummary, Frame};
use cuprof_core::byte_size::with_exact;

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Frames that say nothing about the program (the capture machinery, the interpreter
/// loop), as torch's `_memory_viz` and MemoryViz leave them out.
fn interesting(f: &Frame) -> bool {
    const OMIT_NAMES: [&str; 8] = [
        "unwind::unwind",
        "CapturedTraceback::gather",
        "gather_with_cpp",
        "_start",
        "__libc_start_main",
        "PyEval_",
        "PyObject_",
        "PyFunction_",
    ];
    const OMIT_FILES: [&str; 10] = [
        "core/boxing",
        "/Register",
        "/Redispatch",
        "pythonrun.c",
        "Modules/main.c",
        "Objects/call.c",
        "Objects/methodobject.c",
        "pycore_ceval.h",
        "ceval.c",
        "cpython/abstract.h",
    ];
    !OMIT_NAMES.iter().any(|o| f.name.contains(o))
        && !OMIT_FILES.iter().any(|o| f.filename.contains(o))
}

pub fn render(file: &str, devices: &[DeviceSummary], max_frames: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "memory snapshot {file}");
    if devices.is_empty() {
        let _ = writeln!(
            s,
            "no device memory recorded (no segments, no trace entries)"
        );
        return s;
    }
    for d in devices {
        let _ = writeln!(s, "device {}", d.device);
        let _ = writeln!(s, "  peak reserved:  {}", with_exact(d.peak));
        match (&d.peak_entry, d.first_time_us) {
            (Some(e), Some(first)) => {
                let offset = e.time_us.saturating_sub(first) as f64 / 1000.0;
                let _ = writeln!(
                    s,
                    "  when:           time_us {} (+{offset:.3} ms after the first trace entry)",
                    e.time_us
                );
                let _ = writeln!(
                    s,
                    "  by:             {} of {} at {:#x}",
                    e.action,
                    with_exact(e.size),
                    e.addr
                );
                let frames = &d.peak_frames;
                let shown: Vec<&Frame> = frames.iter().filter(|f| interesting(f)).collect();
                if frames.is_empty() {
                    let _ = writeln!(
                        s,
                        "  stack:          no stacks recorded (run with --with-stack)"
                    );
                } else {
                    let _ = writeln!(s, "  stack:");
                    for f in shown.iter().take(max_frames) {
                        let _ = writeln!(s, "    {} ({}:{})", f.name, f.filename, f.line);
                    }
                    let hidden = frames.len() - shown.len().min(max_frames);
                    if hidden > 0 {
                        let _ = writeln!(s, "    ... {} not shown", plural(hidden, "more frame"));
                    }
                }
            }
            _ => {
                let _ = writeln!(
                    s,
                    "  when:           before the first trace entry (segments allocated before recording started)"
                );
            }
        }
        if d.start > 0 {
            let _ = writeln!(
                s,
                "  reserved before the first entry: {}",
                with_exact(d.start)
            );
        }
        let _ = writeln!(
            s,
            "  live at end:    {}, {}; {}, {}",
            plural(d.live_segments, "segment"),
            with_exact(d.live_bytes),
            plural(d.active_blocks, "active block"),
            with_exact(d.active_bytes)
        );
        let actions: Vec<String> = d
            .by_action
            .iter()
            .map(|(a, n)| format!("{a} {n}"))
            .collect();
        if actions.is_empty() {
            let _ = writeln!(s, "  trace entries:  0");
        } else {
            let _ = writeln!(
                s,
                "  trace entries:  {} ({})",
                d.entries,
                actions.join(", ")
            );
        }
    }
    s
}

/// Per device: the blocks allocated in the trace and not freed (leaks) and the peak of
/// allocated blocks with what was alive then, each group with its first `max_frames` frames;
/// at most `top` groups per list.
pub fn blocks(
    devices: &[DeviceSummary],
    blocks: &[Blocks],
    max_frames: usize,
    top: usize,
) -> String {
    let mut s = String::new();
    for (d, b) in devices.iter().zip(blocks) {
        let _ = writeln!(
            s,
            "device {} blocks (allocated in the trace, freed by free_requested or free_completed)",
            d.device
        );
        let _ = writeln!(
            s,
            "  allocated:      {}",
            plural(b.allocations as usize, "block")
        );
        if b.allocations == 0 {
            continue;
        }
        let _ = writeln!(
            s,
            "  leaked:         {}, {} (not freed by the last entry)",
            plural(b.leaked_count as usize, "block"),
            with_exact(b.leaked_bytes)
        );
        groups(&mut s, &b.leaks, max_frames, top);
        if let (Some(t), Some(first)) = (b.peak_time_us, d.first_time_us) {
            let offset = t.saturating_sub(first) as f64 / 1000.0;
            let _ = writeln!(
                s,
                "  peak allocated: {} at time_us {t} (+{offset:.3} ms after the first trace entry)",
                with_exact(b.peak_bytes)
            );
            groups(&mut s, &b.at_peak, max_frames, top);
        }
    }
    s
}

fn groups(s: &mut String, groups: &[Group], max_frames: usize, top: usize) {
    for g in groups.iter().take(top) {
        let _ = writeln!(
            s,
            "    {} in {}: {}{}",
            with_exact(g.bytes),
            plural(g.count as usize, "block"),
            g.operator,
            g.line
                .as_ref()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default()
        );
        for f in g.frames.iter().filter(|f| interesting(f)).take(max_frames) {
            let _ = writeln!(s, "      {} ({}:{})", f.name, f.filename, f.line);
        }
    }
    if groups.len() > top {
        let _ = writeln!(
            s,
            "    ... {} not shown",
            plural(groups.len() - top, "more group")
        );
    }
}
