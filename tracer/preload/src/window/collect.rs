//! What the window collects while it records: the process's own options, or those of the
//! on-demand capture being recorded (`cuprof capture --activities GPU --with-stack ...`), which
//! hold for that capture only.
//!
//! [`start`] and [`stop`] are the window's collection switches: CUPTI's activity kinds, the
//! PyTorch operator recorder's level, and the flags the NVTX and operator paths read on every
//! range ([`cpu`], [`stacks`]).

use crate::pipe::tracer::Tracer;
use cuprof_core::capture_options::CaptureOptions;
use cuprof_core::collect::{Collect, TorchOptions};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;

/// The options of the capture asked last; cleared when its recording ends.
static ASKED: Mutex<Option<CaptureOptions>> = Mutex::new(None);
/// While collecting: CPU activity (API records, NVTX ranges, operators) is on.
pub(crate) static CPU: AtomicBool = AtomicBool::new(false);
/// While collecting: Python stacks of operators are wanted.
pub(crate) static STACKS: AtomicBool = AtomicBool::new(false);
/// The operator recorder was turned on by [`start`].
static OPERATORS: AtomicBool = AtomicBool::new(false);

/// The next recording (an on-demand capture's) collects with `options` over the process's.
pub fn ask(options: CaptureOptions) {
    if let Ok(mut a) = ASKED.lock() {
        *a = Some(options);
    }
}

/// What to collect: the process's options, with the asked capture's over them.
fn resolve(own: Collect, asked: Option<CaptureOptions>) -> Collect {
    let Some(o) = asked else { return own };
    Collect {
        cpu: o.cpu.unwrap_or(own.cpu),
        gpu: o.gpu.unwrap_or(own.gpu),
        torch_ops: o.torch_ops.unwrap_or(own.torch_ops),
        torch: TorchOptions {
            shapes: o.record_shapes.unwrap_or(own.torch.shapes),
            all_threads: own.torch.all_threads,
            flops: o.with_flops.unwrap_or(own.torch.flops),
            memory: own.torch.memory,
            modules: o.with_modules.unwrap_or(own.torch.modules),
        },
        with_stack: o.with_stack.unwrap_or(own.with_stack),
    }
}

/// Collection begins.
pub fn start(t: &Tracer) {
    let asked = ASKED.lock().ok().and_then(|a| *a);
    let c = resolve(t.options, asked);
    CPU.store(c.cpu, Relaxed);
    STACKS.store(c.with_stack, Relaxed);
    t.set_kinds(&t.kinds(&c));
    let operators = c.cpu && c.torch_ops;
    if operators {
        crate::host::python::operators(c.torch.level(true));
    } else if OPERATORS.load(Relaxed) {
        crate::host::python::operators(0);
    }
    OPERATORS.store(operators, Relaxed);
}

/// The asked capture was cancelled before it began: its options go.
pub fn forget_asked() {
    if let Ok(mut a) = ASKED.lock() {
        *a = None;
    }
}

/// Collection ends; `capture_over`: an on-demand capture's recording ended, its options go.
pub fn stop(t: &Tracer, capture_over: bool) {
    t.set_kinds(&[]);
    if OPERATORS.swap(false, Relaxed) {
        crate::host::python::operators(0);
    }
    if capture_over {
        forget_asked();
    }
}

/// CPU activity is collected (read with the window's own collecting flag).
pub fn cpu() -> bool {
    CPU.load(Relaxed)
}

/// Python stacks of operators are collected (read with the window's own collecting flag).
pub fn stacks() -> bool {
    STACKS.load(Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_replaces_only_the_options_it_gives() {
        let own = Collect {
            cpu: true,
            gpu: true,
            torch_ops: true,
            torch: TorchOptions {
                shapes: true,
                all_threads: true,
                flops: false,
                memory: true,
                modules: false,
            },
            with_stack: false,
        };
        assert_eq!(resolve(own, None), own);
        assert_eq!(resolve(own, Some(CaptureOptions::default())), own);
        let asked = CaptureOptions {
            cpu: Some(false),
            with_stack: Some(true),
            record_shapes: Some(false),
            with_flops: Some(true),
            with_modules: Some(true),
            ..CaptureOptions::default()
        };
        assert_eq!(
            resolve(own, Some(asked)),
            Collect {
                cpu: false,
                gpu: true,
                torch_ops: true,
                torch: TorchOptions {
                    shapes: false,
                    all_threads: true,
                    flops: true,
                    memory: true,
                    modules: true,
                },
                with_stack: true,
            }
        );
    }
}
