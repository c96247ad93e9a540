//! What one pass over a trace's events builds: its columns ([`Builder`]), shared by the read
//! front to back and the read by chunks.

use std::path::Path;

use super::columns::*;
use super::python_frames::{self, PyFrame};
use crate::saturating::AddSat;
use cuprof_core::reader::{Event, Id, ReadSummary, TraceMeta};
use rustc_hash::FxHashMap;

/// Categories older Kineto traces use for CUDA activity (HTA reads them), as the current names.
pub fn cuda_category(cat: &str) -> &str {
    match cat {
        "Kernel" => "kernel",
        "Memcpy" => "gpu_memcpy",
        "Memset" => "gpu_memset",
        "Runtime" => "cuda_runtime",
        "Driver" => "cuda_driver",
        _ => cat,
    }
}

/// Host-side categories analysis skips on purpose: not counted as ignored device events.
pub fn is_known_host_category(cat: &str) -> bool {
    matches!(
        cat,
        "" | "gpu_user_annotation"
            | "python"
            | "python_function"
            | "cpu_instant_event"
            | "overhead"
            | "Trace"
            | "external_correlation"
            | "cuda_profiler_range"
            | "collective_comm"
            | "ac2g"
            | "fwdbwd"
    )
}

/// `R` of `...-rankR...` in a file name.
pub fn rank_from_name(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let at = name.find("rank")?;
    let digits: String = name[at + 4..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}

/// What every read ends with: operators' stacks from Python frames, the file's members, rank
/// and read figures.
pub(super) fn finish(
    mut data: FileData,
    mut frames: Vec<PyFrame>,
    names: &mut Interner,
    meta: TraceMeta,
    read: ReadSummary,
) -> FileData {
    data.stacks_from_functions = python_frames::attach(&mut data.cpu_ops, &mut frames, names);
    data.meta = meta;
    data.rank = data.meta.rank.or_else(|| rank_from_name(&data.path));
    data.read = read;
    data
}

pub(super) struct Builder<'n> {
    pub(super) names: &'n mut Interner,
    pub(super) data: FileData,
    threads: FxHashMap<(Id<'static>, Id<'static>), u32>,
    /// Per kernel name id: communication or compute (cached classification).
    kinds: Vec<Option<OpKind>>,
    /// Per API name id: is it a sync call (cached).
    syncs: Vec<Option<bool>>,
    /// torch.profiler's `python_function` events of Python code: the call stacks of operators
    /// that carry none.
    pub(super) frames: Vec<PyFrame>,
}

impl<'n> Builder<'n> {
    pub(super) fn new(names: &'n mut Interner, path: &Path) -> Self {
        Builder {
            names,
            data: FileData {
                path: path.to_owned(),
                ..FileData::default()
            },
            threads: FxHashMap::default(),
            kinds: Vec::new(),
            syncs: Vec::new(),
            frames: Vec::new(),
        }
    }

    fn thread(&mut self, pid: &Option<Id<'_>>, tid: &Option<Id<'_>>) -> u32 {
        let key = (
            pid.clone().unwrap_or(Id::Int(-1)).into_owned(),
            tid.clone().unwrap_or(Id::Int(-1)).into_owned(),
        );
        let next = self.data.threads.len() as u32;
        *self.threads.entry(key.clone()).or_insert_with(|| {
            self.data.threads.push(key);
            next
        })
    }

    fn kernel_kind(&mut self, name: u32) -> OpKind {
        let i = name as usize;
        if self.kinds.len() <= i {
            self.kinds.resize(i + 1, None);
        }
        *self.kinds[i].get_or_insert_with(|| {
            if is_comm_kernel(self.names.name(name)) {
                OpKind::Comm
            } else {
                OpKind::Compute
            }
        })
    }

    fn is_sync(&mut self, name: u32) -> bool {
        let i = name as usize;
        if self.syncs.len() <= i {
            self.syncs.resize(i + 1, None);
        }
        *self.syncs[i].get_or_insert_with(|| is_sync_call(self.names.name(name)))
    }

    /// The reader does not decode counter values (only these few events have any), so the
    /// sample's `args.reserved_bytes` is parsed from its raw text here.
    fn memory_sample(&mut self, e: &Event<'_>) {
        #[derive(serde::Deserialize)]
        struct Counter {
            args: Values,
        }
        #[derive(serde::Deserialize)]
        struct Values {
            reserved_bytes: Option<i64>,
        }
        let (Some(ts), Some(device)) = (e.ts, e.pid.as_ref().and_then(Id::as_int)) else {
            return;
        };
        if let Ok(Counter {
            args: Values {
                reserved_bytes: Some(b),
            },
        }) = serde_json::from_slice::<Counter>(e.raw)
        {
            self.data.memory.push((device, ts, b));
        }
    }

    /// A `[memory]` instant's `Bytes` and `Device Type`, parsed from its raw text (as
    /// [`Self::memory_sample`]); one without them, or on a device torch's tables do not count,
    /// is left out.
    fn tensor_memory(&mut self, e: &Event<'_>) {
        #[derive(serde::Deserialize)]
        struct Instant {
            args: Values,
        }
        #[derive(serde::Deserialize)]
        struct Values {
            #[serde(rename = "Bytes")]
            bytes: Option<i64>,
            #[serde(rename = "Device Type")]
            device_type: Option<i64>,
            // Read leniently: an odd `Device Id` or `Addr` leaves the event counted, unpaired.
            #[serde(rename = "Device Id")]
            device: Option<serde_json::Value>,
            #[serde(rename = "Addr")]
            addr: Option<serde_json::Value>,
        }
        let Some(ts) = e.ts.filter(|t| (-TIME_LIMIT_NS..TIME_LIMIT_NS).contains(t)) else {
            return;
        };
        let Ok(Instant {
            args:
                Values {
                    bytes: Some(bytes),
                    device_type: Some(device_type),
                    device,
                    addr,
                },
        }) = serde_json::from_slice::<Instant>(e.raw)
        else {
            return;
        };
        if let Some(on) = TensorMemoryOn::of(device_type) {
            let thread = self.thread(&e.pid, &e.tid);
            self.data.tensor_memory.push(TensorMemory {
                thread,
                ts,
                bytes,
                on,
                device: device.and_then(|d| d.as_i64()).unwrap_or(-1),
                addr: addr.and_then(|a| a.as_u64()),
            });
        }
    }

    /// An `nn.Module` call; its `Module path` (cuprof's) parsed from the raw text, as
    /// [`Self::memory_sample`] does (only these events carry one).
    fn module(&mut self, e: &Event<'_>, start: i64, end: i64, name: &str) {
        let path = ModuleArgs::of(e.raw).path.filter(|p| !p.is_empty());
        let thread = self.thread(&e.pid, &e.tid);
        let range = ModuleRange {
            thread,
            start,
            end,
            name: self.names.id(name),
            path: path.map_or(NO_NAME, |p| self.names.id(&p)),
        };
        self.data.modules.push(range);
    }

    // Called once per event from the reader's loop: left out of line (as the code around it
    // grew), it cost the parse 4-7% on a 2M-event trace (BENCHMARKS.md, session 11).
    #[inline(always)]
    pub(super) fn event(&mut self, e: &Event<'_>) {
        if !e.is_complete() {
            if e.ph == "C" && e.cat == "cuda_memory" {
                self.memory_sample(e);
            } else if e.ph == "i" && e.name == "[memory]" {
                self.tensor_memory(e);
            }
            return;
        }
        let (Some(start), Some(dur)) = (e.ts, e.dur) else {
            self.data.malformed_skipped += 1;
            return;
        };
        let dur = if dur < 0 {
            self.data.malformed_clamped += 1;
            0
        } else {
            dur
        };
        let end = start.saturating_add(dur);
        if !(-TIME_LIMIT_NS..TIME_LIMIT_NS).contains(&start)
            || !(-TIME_LIMIT_NS..TIME_LIMIT_NS).contains(&end)
        {
            self.data.malformed_skipped += 1;
            return;
        }
        let cat = cuda_category(&e.cat);
        match cat {
            "kernel" | "gpu_memcpy" | "gpu_memset" => {
                let name = self.names.id(&e.name);
                let kind = match cat {
                    "kernel" => self.kernel_kind(name),
                    "gpu_memcpy" => OpKind::Memcpy,
                    _ => OpKind::Memset,
                };
                let device = e
                    .args
                    .device
                    .or_else(|| e.pid.as_ref().and_then(Id::as_int))
                    .unwrap_or(0);
                if let Some(x) = e.args.external_id {
                    self.data.op_ext.push((self.data.ops.len() as u32, x));
                }
                let stream = e
                    .args
                    .stream
                    .or_else(|| e.tid.as_ref().and_then(Id::as_int))
                    .unwrap_or(-1);
                self.data.ops.push(GpuOp {
                    start,
                    end,
                    device,
                    stream,
                    name,
                    kind,
                    corr: e.args.correlation.unwrap_or(-1),
                    bytes: e.args.bytes.unwrap_or(0),
                });
            }
            "cuda_sync" => {
                let device = e
                    .args
                    .device
                    .or_else(|| e.pid.as_ref().and_then(Id::as_int))
                    .unwrap_or(0);
                self.data.gpu_syncs.push((device, start, end));
            }
            "cuda_runtime" | "cuda_driver" => {
                let name = self.names.id(&e.name);
                let thread = self.thread(&e.pid, &e.tid);
                let sync = self.is_sync(name);
                if let Some(x) = e.args.external_id {
                    self.data.api_ext.push((self.data.apis.len() as u32, x));
                }
                self.data.apis.push(ApiCall {
                    thread,
                    start,
                    end,
                    name,
                    corr: e.args.correlation.unwrap_or(-1),
                    sync,
                });
            }
            "user_annotation" => {
                if let Some(number) = step_number(&e.name) {
                    self.data.steps.push(Step {
                        number,
                        start,
                        dur: end - start,
                        work: e.args.work,
                        figures: e.args.figures.map(parse_figures).unwrap_or_default(),
                    });
                } else {
                    let name = self.names.id(&e.name);
                    let thread = self.thread(&e.pid, &e.tid);
                    self.data.ranges.push(Range {
                        thread,
                        start,
                        end,
                        name,
                    });
                }
            }
            "cpu_op" => {
                let name = self.names.id(&e.name);
                let thread = self.thread(&e.pid, &e.tid);
                let dims = match e.args.input_dims {
                    // Kineto writes `[[32], [8, 64]]`, cuprof `[[32],[8,64]]`: one key for both.
                    Some(d) if d.bytes().any(|b| b.is_ascii_whitespace()) => {
                        let compact: String = d.chars().filter(|c| !c.is_whitespace()).collect();
                        self.names.id(&compact)
                    }
                    Some(d) => self.names.id(d),
                    None => NO_NAME,
                };
                let stack = match &e.args.call_stack {
                    Some(s) if !s.is_empty() => self.names.id(s),
                    _ => NO_NAME,
                };
                self.data.cpu_ops.push(CpuOp {
                    thread,
                    start,
                    end,
                    name,
                    ext: e.args.external_id.unwrap_or(-1),
                    dims,
                    stack,
                    flops: e.args.flops.map_or(0, |f| f.max(0) as u64),
                });
                let c = &e.args.collective;
                if let Some(collective) = &c.name {
                    self.data.collectives.push(CollectiveCall {
                        op: self.data.cpu_ops.len() as u32 - 1,
                        name: self.names.id(collective),
                        dtype: c.dtype.as_deref().map_or(NO_NAME, |d| self.names.id(d)),
                        in_nelems: c.in_nelems.unwrap_or(-1),
                        out_nelems: c.out_nelems.unwrap_or(-1),
                        group_size: c.group_size.unwrap_or(-1),
                        group: c.group.as_deref().map_or(NO_NAME, |g| self.names.id(g)),
                        seq: c.seq.unwrap_or(-1),
                    });
                }
                let t = &e.args.triton;
                if let Some(file) = &t.file {
                    self.data.triton.push(TritonCall {
                        op: self.data.cpu_ops.len() as u32 - 1,
                        file: self.names.id(file),
                        num_gb: t.num_gb.unwrap_or(f64::NAN),
                        flop: t.flop.unwrap_or(-1),
                        num_warps: t.num_warps.unwrap_or(-1),
                        num_stages: t.num_stages.unwrap_or(-1),
                        config: t.config.as_deref().map_or(NO_NAME, |c| self.names.id(c)),
                    });
                }
            }
            "python_function" => {
                if let Some(name) = e.name.strip_prefix(MODULE_PREFIX) {
                    self.module(e, start, end, name);
                } else if python_frames::is_code_frame(&e.name) {
                    let thread = self.thread(&e.pid, &e.tid);
                    let name = self.names.id(&e.name);
                    self.frames.push(PyFrame {
                        thread,
                        start,
                        end,
                        name,
                    });
                }
            }
            "overhead" => {
                self.data.overhead.0 += 1;
                self.data.overhead.1.add_sat(end - start);
            }
            other => {
                if !is_known_host_category(other) {
                    *self.data.ignored.entry(other.to_owned()).or_default() += 1;
                }
            }
        }
    }
}
