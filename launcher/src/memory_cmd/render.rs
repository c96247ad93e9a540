//! The text `cuprof memory` prints: per device, the peak and what reached it, what is live at
//! the end, and the trace's entries by action.

use std::fmt::Write as _;

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
