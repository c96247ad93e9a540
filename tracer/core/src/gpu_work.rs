//! The GPU-work span of a trace without steps, for a trace that was cut short: the writer
//! writes it when it closes a cycle ([`crate::trace_writer::TraceWriter::gpu_work_span`]), so
//! a file cut by SIGKILL lacks it and [`crate::repair`] adds it from the events it kept.

use crate::json::{push_str, push_u64, push_us};
use crate::trace_writer::{GPU_WORK, GPU_WORK_TID};

/// Watches a trace's events for what decides its span: its GPU operations, and any step (or
/// span already written), which makes a span unneeded.
#[derive(Debug, Default)]
pub struct GpuWorkWatch {
    window: Option<(i64, i64)>,
    has_steps: bool,
}

impl GpuWorkWatch {
    /// One event: `ts`/`dur` in nanoseconds after the base time.
    pub fn see(&mut self, ph: &str, cat: &str, name: &str, ts: Option<i64>, dur: Option<i64>) {
        if name.starts_with("ProfilerStep#") || (cat == "python" && name == GPU_WORK) {
            self.has_steps = true;
        }
        let gpu_op = matches!(cat, "kernel" | "gpu_memcpy" | "gpu_memset");
        if let (true, "X", Some(ts), Some(dur)) = (gpu_op, ph, ts, dur) {
            let end = ts.saturating_add(dur.max(0));
            self.window = Some(match self.window {
                Some((first, last)) => (first.min(ts), last.max(end)),
                None => (ts, end),
            });
        }
    }

    /// The span to add: the first GPU operation's start to the last one's end, when the trace
    /// has GPU work, no step and no span.
    pub fn missing_span(&self) -> Option<(i64, i64)> {
        self.window.filter(|_| !self.has_steps)
    }
}

/// Events [`span_events`] writes.
pub const SPAN_EVENTS: u64 = 3;

/// The span event and its row's name, as the writer writes them, each preceded by `",\n"`
/// (they follow other events).
pub fn span_events(pid: u64, start_ns: i64, end_ns: i64) -> Vec<u8> {
    let mut out = Vec::new();
    for (meta, key) in [("thread_name", "name"), ("thread_sort_index", "sort_index")] {
        out.extend_from_slice(b",\n{\"ph\": \"M\", \"name\": ");
        push_str(&mut out, meta);
        out.extend_from_slice(b", \"pid\": ");
        push_u64(&mut out, pid);
        out.extend_from_slice(b", \"tid\": ");
        push_u64(&mut out, u64::from(GPU_WORK_TID));
        out.extend_from_slice(b", \"ts\": 0.000, \"args\": {\"");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\": ");
        if key == "name" {
            push_str(&mut out, GPU_WORK);
        } else {
            push_u64(&mut out, u64::from(GPU_WORK_TID));
        }
        out.extend_from_slice(b"}}");
    }
    out.extend_from_slice(b",\n{\"ph\": \"X\", \"cat\": \"python\", \"name\": ");
    push_str(&mut out, GPU_WORK);
    out.extend_from_slice(b", \"pid\": ");
    push_u64(&mut out, pid);
    out.extend_from_slice(b", \"tid\": ");
    push_u64(&mut out, u64::from(GPU_WORK_TID));
    out.extend_from_slice(b", \"ts\": ");
    push_us(&mut out, start_ns);
    out.extend_from_slice(b", \"dur\": ");
    push_us(&mut out, end_ns.saturating_sub(start_ns));
    out.extend_from_slice(b"}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_span_covers_the_gpu_operations_of_a_trace_without_steps() {
        let mut w = GpuWorkWatch::default();
        w.see("X", "cuda_runtime", "cudaLaunchKernel", Some(100), Some(50));
        w.see("X", "kernel", "k", Some(2_000), Some(1_000));
        w.see("X", "gpu_memcpy", "Memcpy HtoD", Some(1_500), Some(100));
        w.see("X", "gpu_memset", "Memset", Some(3_500), Some(1_234));
        w.see("X", "cuda_sync", "Stream Sync", Some(0), Some(90_000));
        assert_eq!(w.missing_span(), Some((1_500, 4_734)));
        let text = String::from_utf8(span_events(42, 1_500, 4_734)).unwrap();
        assert_eq!(
            text,
            ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": 42, \"tid\": 0, \"ts\": 0.000, \"args\": {\"name\": \"GPU work (no steps recorded)\"}}\
             ,\n{\"ph\": \"M\", \"name\": \"thread_sort_index\", \"pid\": 42, \"tid\": 0, \"ts\": 0.000, \"args\": {\"sort_index\": 0}}\
             ,\n{\"ph\": \"X\", \"cat\": \"python\", \"name\": \"GPU work (no steps recorded)\", \"pid\": 42, \"tid\": 0, \"ts\": 1.500, \"dur\": 3.234}"
        );
    }

    #[test]
    fn a_span_across_the_whole_64_bit_range_saturates() {
        let text = String::from_utf8(span_events(1, i64::MIN, i64::MAX)).unwrap();
        assert!(
            text.ends_with("\"ts\": -9223372036854775.808, \"dur\": 9223372036854775.807}"),
            "{text}"
        );
    }

    #[test]
    fn a_trace_with_steps_or_a_span_needs_none() {
        for (cat, name) in [("user_annotation", "ProfilerStep#3"), ("python", GPU_WORK)] {
            let mut w = GpuWorkWatch::default();
            w.see("X", "kernel", "k", Some(2_000), Some(1_000));
            w.see("X", cat, name, Some(1_000), Some(5_000));
            assert_eq!(w.missing_span(), None, "{name}");
        }
        assert_eq!(GpuWorkWatch::default().missing_span(), None);
    }
}
