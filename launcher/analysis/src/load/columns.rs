//! The compact columns one trace file loads into ([`FileData`]: GPU operations, API calls,
//! NVTX ranges, steps, PyTorch operators, ...), and the names they share ([`Interner`]).

use std::path::PathBuf;

use cuprof_core::reader::{Id, ReadSummary, TraceMeta};
use rustc_hash::FxHashMap;

/// Times (ns) an event may start and end at, exclusive: 2^62 ns is the year 2116 on the Unix
/// clock, and within it the difference of any two times fits in 64 bits, so windows and
/// durations cannot wrap (sums of many saturate instead: [`crate::saturating`]).
pub const TIME_LIMIT_NS: i64 = 1 << 62;

/// Name id of "no name".
pub const NO_NAME: u32 = u32::MAX;

/// Distinct strings (kernel, API, range names), each stored once.
#[derive(Default)]
pub struct Interner {
    map: FxHashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl Interner {
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.map.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.into());
        self.map.insert(s.into(), i);
        i
    }

    pub fn name(&self, id: u32) -> &str {
        if id == NO_NAME {
            ""
        } else {
            &self.names[id as usize]
        }
    }

    /// Adds `other`'s names, in their order; what each of `other`'s ids is here. Absorbing
    /// files' interners in file order gives every name the id one interner reading the files
    /// one after the other would have given it.
    pub fn absorb(&mut self, other: Interner) -> Vec<u32> {
        other.names.iter().map(|n| self.id(n)).collect()
    }
}

/// What a GPU operation counts as in the time breakdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    Compute = 0,
    Comm = 1,
    Memcpy = 2,
    Memset = 3,
}

impl OpKind {
    pub fn is_kernel(self) -> bool {
        matches!(self, OpKind::Compute | OpKind::Comm)
    }
}

/// Communication kernels: the name contains `nccl` in any case (`ncclKernel_AllReduce...`,
/// `ncclDevKernel_AllGather_RING_LL`, ...).
pub fn is_comm_kernel(name: &str) -> bool {
    name.as_bytes()
        .windows(4)
        .any(|w| w.eq_ignore_ascii_case(b"nccl"))
}

#[derive(Debug, Clone, Copy)]
pub struct GpuOp {
    pub start: i64,
    pub end: i64,
    pub device: i64,
    /// `args.stream`, else the event's `tid` (Kineto's stream row), else -1.
    pub stream: i64,
    pub name: u32,
    pub kind: OpKind,
    /// Correlation id of the launching API call (-1: none).
    pub corr: i64,
    pub bytes: i64,
}

#[derive(Debug, Clone, Copy)]
pub struct ApiCall {
    pub thread: u32,
    pub start: i64,
    pub end: i64,
    pub name: u32,
    pub corr: i64,
    /// `cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize` and the driver's
    /// `cuCtxSynchronize`, `cuStreamSynchronize`, `cuEventSynchronize`.
    pub sync: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub thread: u32,
    pub start: i64,
    pub end: i64,
    pub name: u32,
}

#[derive(Debug, Clone, Default)]
pub struct Step {
    pub number: i64,
    pub start: i64,
    pub dur: i64,
    /// `args.work`: the step's tokens (or other units of work).
    pub work: Option<f64>,
    /// `args.figures`: named numbers the program attached, by name.
    pub figures: Vec<(String, f64)>,
}

impl Step {
    /// Figure `name` of this step: `tokens` is its work.
    pub fn figure(&self, name: &str) -> Option<f64> {
        if name == cuprof_core::figures::TOKENS {
            return self.work;
        }
        self.figures.iter().find(|(n, _)| n == name).map(|f| f.1)
    }
}

/// A step's `args.figures` (JSON object text): its finite numbers, by name; anything else in
/// it is skipped.
pub fn parse_figures(text: &str) -> Vec<(String, f64)> {
    let Ok(map) =
        serde_json::from_str::<std::collections::BTreeMap<String, serde_json::Value>>(text)
    else {
        return Vec::new();
    };
    map.into_iter()
        .filter_map(|(k, v)| Some((k, v.as_f64().filter(|x| x.is_finite())?)))
        .collect()
}

/// A PyTorch operator (`cpu_op`), as Kineto and cuprof write it.
#[derive(Debug, Clone, Copy)]
pub struct CpuOp {
    pub thread: u32,
    pub start: i64,
    pub end: i64,
    pub name: u32,
    /// `External id` (-1: none): what launches and GPU operations inside it point at.
    pub ext: i64,
    /// `Input Dims` without whitespace, interned (`NO_NAME`: shapes not recorded).
    pub dims: u32,
    /// `Call stack`, interned (`NO_NAME`: none).
    pub stack: u32,
    /// torch's FLOP count for the call (`flops`; 0: none recorded).
    pub flops: u64,
}

/// A collective's `record_param_comms` operator with its metadata (torch's `saveNcclMeta`).
#[derive(Debug, Clone, Copy)]
pub struct CollectiveCall {
    /// The collective's operator (index of `FileData::cpu_ops`): its span, and its kernels
    /// (those attributed to it).
    pub op: u32,
    /// `Collective name`, interned.
    pub name: u32,
    /// `dtype`, interned (`NO_NAME`: not written).
    pub dtype: u32,
    /// `In msg nelems` and `Out msg nelems` (-1: not written).
    pub in_nelems: i64,
    pub out_nelems: i64,
    /// `Group size` (-1: not written).
    pub group_size: i64,
    /// `Process Group Name`, interned (`NO_NAME`: not written), and `Seq` (-1: not written):
    /// together they name the same collective on every rank of its group.
    pub group: u32,
    pub seq: i64,
}

/// A Triton kernel's launch as torch.compile opens it: its operator (named after the kernel)
/// with the keyword inputs inductor gives the profiler.
#[derive(Debug, Clone, Copy)]
pub struct TritonCall {
    /// The launch's operator (index of `FileData::cpu_ops`): its name and its kernels.
    pub op: u32,
    /// `kernel_file`, interned: the generated module holding the kernel.
    pub file: u32,
    /// `kernel_num_gb` and `kernel_flop`: inductor's estimates for one launch (NaN, -1: none).
    pub num_gb: f64,
    pub flop: i64,
    /// `num_warps` and `num_stages` (-1: none), `kernel_kwargs` interned (`NO_NAME`: none).
    pub num_warps: i64,
    pub num_stages: i64,
    pub config: u32,
}

/// Where a PyTorch allocation lives, as torch's tables count it (`Device Type` of a `[memory]`
/// event: c10's `DeviceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TensorMemoryOn {
    /// CPU, MKLDNN, IDEEP: torch's "CPU Mem".
    Cpu,
    /// CUDA, HIP, XPU, PrivateUse1: torch's "CUDA Mem" (`device_memory_usage`).
    Device,
}

impl TensorMemoryOn {
    /// The column torch counts `device_type`'s bytes in, if any (other devices count nowhere).
    pub fn of(device_type: i64) -> Option<TensorMemoryOn> {
        match device_type {
            0 | 2 | 5 => Some(TensorMemoryOn::Cpu),
            1 | 6 | 12 | 20 => Some(TensorMemoryOn::Device),
            _ => None,
        }
    }
}

/// A PyTorch allocation or free: a `[memory]` event (torch.profiler's `profile_memory`, cuprof's
/// `MEM` with the native observer).
#[derive(Debug, Clone, Copy)]
pub struct TensorMemory {
    pub thread: u32,
    pub ts: i64,
    /// Allocated (positive) or freed (negative).
    pub bytes: i64,
    pub on: TensorMemoryOn,
    /// `Device Id` (-1: none, as on the CPU).
    pub device: i64,
    /// `Addr`: what pairs an allocation with its free (`None`: not written).
    pub addr: Option<u64>,
}

/// An `nn.Module` forward call: torch.profiler's `python_function` event named
/// `nn.Module: CLASS_N` (`with_stack`), or cuprof's (`--with-modules`), which adds the module's
/// path as `args["Module path"]`.
#[derive(Debug, Clone, Copy)]
pub struct ModuleRange {
    pub thread: u32,
    pub start: i64,
    pub end: i64,
    /// The name without `nn.Module: ` (`GPT2Attention_3`), interned.
    pub name: u32,
    /// `Module path` (`GPT2LMHeadModel.transformer.h.3.attn`), interned (`NO_NAME`: not
    /// written, as in torch's own traces).
    pub path: u32,
}

/// The prefix of a module's `python_function` event name.
pub const MODULE_PREFIX: &str = "nn.Module: ";

/// What a module call's `args` say beyond its span: cuprof's `Module path` and torch's
/// `Python id` and `Python parent id` (the enclosing call's).
#[derive(Debug, Default, serde::Deserialize)]
pub struct ModuleArgs<'a> {
    #[serde(rename = "Module path", borrow, default)]
    pub path: Option<std::borrow::Cow<'a, str>>,
    /// Left as JSON text: a value of another type leaves the path readable.
    #[serde(rename = "Python id", borrow, default)]
    id: Option<&'a serde_json::value::RawValue>,
    #[serde(rename = "Python parent id", borrow, default)]
    parent_id: Option<&'a serde_json::value::RawValue>,
}

impl<'a> ModuleArgs<'a> {
    /// The `args` of the event whose JSON text is `raw`; none where they do not parse (only
    /// module events are parsed a second time, so the reader's pass pays nothing for them).
    pub fn of(raw: &'a [u8]) -> ModuleArgs<'a> {
        #[derive(serde::Deserialize)]
        struct Module<'a> {
            #[serde(borrow, default)]
            args: Option<ModuleArgs<'a>>,
        }
        serde_json::from_slice::<Module<'_>>(raw)
            .ok()
            .and_then(|m| m.args)
            .unwrap_or_default()
    }

    /// `Python id`, where it is an integer.
    pub fn id(&self) -> Option<i64> {
        self.id.and_then(|v| v.get().parse().ok())
    }

    /// `Python parent id`, where it is an integer.
    pub fn parent_id(&self) -> Option<i64> {
        self.parent_id.and_then(|v| v.get().parse().ok())
    }
}

/// A module's class from its event name without [`MODULE_PREFIX`]: `GPT2Attention_3` ->
/// `GPT2Attention` (torch numbers each class's instances `_N`).
pub fn module_class(name: &str) -> &str {
    match name.rsplit_once('_') {
        Some((class, n))
            if !class.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            class
        }
        _ => name,
    }
}

/// API calls that block the CPU until the GPU has finished something.
pub fn is_sync_call(name: &str) -> bool {
    matches!(
        name,
        "cudaDeviceSynchronize"
            | "cudaStreamSynchronize"
            | "cudaEventSynchronize"
            | "cuCtxSynchronize"
            | "cuStreamSynchronize"
            | "cuEventSynchronize"
    ) || name.starts_with("cudaDeviceSynchronize_v")
        || name.starts_with("cudaStreamSynchronize_v")
        || name.starts_with("cudaEventSynchronize_v")
        || name.starts_with("cuStreamSynchronize_v")
        || name.starts_with("cuEventSynchronize_v")
}

/// `N` of `ProfilerStep#N`.
pub fn step_number(name: &str) -> Option<i64> {
    name.strip_prefix("ProfilerStep#")?.trim().parse().ok()
}

/// Everything analysis keeps of one file.
#[derive(Default)]
pub struct FileData {
    pub path: PathBuf,
    pub meta: TraceMeta,
    pub read: ReadSummary,
    /// From `distributedInfo.rank`, else `-rankN` in the file name.
    pub rank: Option<i64>,
    pub ops: Vec<GpuOp>,
    pub apis: Vec<ApiCall>,
    pub ranges: Vec<Range>,
    pub steps: Vec<Step>,
    /// `cuda_sync` events: (device, start, end).
    pub gpu_syncs: Vec<(i64, i64, i64)>,
    /// (pid, tid) of each thread index used by `apis`, `ranges` and `cpu_ops`.
    pub threads: Vec<(Id<'static>, Id<'static>)>,
    pub cpu_ops: Vec<CpuOp>,
    /// Collectives, from their `record_param_comms` operators.
    pub collectives: Vec<CollectiveCall>,
    /// Triton kernel launches, from torch.compile's operators around them.
    pub triton: Vec<TritonCall>,
    /// `nn.Module` forward calls, in file order.
    pub modules: Vec<ModuleRange>,
    /// (index in `apis`, `External id`) of the API calls that carry one. Kept apart from
    /// `ApiCall` so that traces without operators pay nothing for it.
    pub api_ext: Vec<(u32, i64)>,
    /// (index in `ops`, `External id`) of the GPU operations that carry one.
    pub op_ext: Vec<(u32, i64)>,
    /// Device memory counter samples (`ph: C`, `cat: cuda_memory`): (device, time,
    /// `reserved_bytes`), in file order.
    pub memory: Vec<(i64, i64, i64)>,
    /// PyTorch's allocations and frees (`[memory]` instants) on the devices torch's tables count.
    pub tensor_memory: Vec<TensorMemory>,
    /// Complete events dropped because `ts` or `dur` is missing, not a number, not finite, or
    /// starts or ends beyond ±[`TIME_LIMIT_NS`].
    pub malformed_skipped: u64,
    /// Complete events with a negative `dur`, read as lasting 0.
    pub malformed_clamped: u64,
    /// Complete events of categories that are neither CUDA activity nor host events analysis
    /// knows (another accelerator's device events), by category.
    pub ignored: std::collections::BTreeMap<String, u64>,
    /// The profiler's own work recorded in the trace (`cat: overhead`, CUPTI's overhead
    /// records as Kineto writes them: buffer flushes, instrumentation): count and total ns.
    pub overhead: (u64, i64),
    /// Whether operators' call stacks were made from torch's `python_function` events
    /// (`python_frames`): their frames name functions by the line they are defined on.
    pub stacks_from_functions: bool,
}

impl FileData {
    /// Appends what a later part of the same file loaded (its names already renamed into this
    /// part's interner): its threads are unified with these (new ones numbered after them, in
    /// their order) and its indices into `ops`, `apis` and `cpu_ops` moved past these; the
    /// result is what one read of both parts in a row gives. What each of `later`'s thread
    /// indices is here.
    pub fn append(&mut self, later: FileData) -> Vec<u32> {
        let mut known: FxHashMap<(Id<'static>, Id<'static>), u32> = self
            .threads
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i as u32))
            .collect();
        let threads: Vec<u32> = later
            .threads
            .into_iter()
            .map(|k| {
                let next = self.threads.len() as u32;
                *known.entry(k.clone()).or_insert_with(|| {
                    self.threads.push(k);
                    next
                })
            })
            .collect();
        let t = |i: u32| threads[i as usize];
        let (ops, apis, cpu_ops) = (
            self.ops.len() as u32,
            self.apis.len() as u32,
            self.cpu_ops.len() as u32,
        );
        self.ops.extend(later.ops);
        self.apis.extend(later.apis.into_iter().map(|a| ApiCall {
            thread: t(a.thread),
            ..a
        }));
        self.ranges.extend(later.ranges.into_iter().map(|r| Range {
            thread: t(r.thread),
            ..r
        }));
        self.steps.extend(later.steps);
        self.gpu_syncs.extend(later.gpu_syncs);
        self.cpu_ops
            .extend(later.cpu_ops.into_iter().map(|c| CpuOp {
                thread: t(c.thread),
                ..c
            }));
        self.collectives
            .extend(later.collectives.into_iter().map(|c| CollectiveCall {
                op: c.op + cpu_ops,
                ..c
            }));
        self.triton
            .extend(later.triton.into_iter().map(|c| TritonCall {
                op: c.op + cpu_ops,
                ..c
            }));
        self.modules
            .extend(later.modules.into_iter().map(|m| ModuleRange {
                thread: t(m.thread),
                ..m
            }));
        self.api_ext
            .extend(later.api_ext.into_iter().map(|(i, x)| (i + apis, x)));
        self.op_ext
            .extend(later.op_ext.into_iter().map(|(i, x)| (i + ops, x)));
        self.memory.extend(later.memory);
        self.tensor_memory
            .extend(later.tensor_memory.into_iter().map(|m| TensorMemory {
                thread: t(m.thread),
                ..m
            }));
        self.malformed_skipped += later.malformed_skipped;
        self.malformed_clamped += later.malformed_clamped;
        for (cat, n) in later.ignored {
            *self.ignored.entry(cat).or_default() += n;
        }
        self.overhead.0 += later.overhead.0;
        self.overhead.1 = self.overhead.1.saturating_add(later.overhead.1);
        threads
    }

    /// Renames every name id through `map` (from [`Interner::absorb`]); `NO_NAME` stays.
    pub fn rename(&mut self, map: &[u32]) {
        let m = |id: &mut u32| {
            if *id != NO_NAME {
                *id = map[*id as usize];
            }
        };
        self.ops.iter_mut().for_each(|o| m(&mut o.name));
        self.apis.iter_mut().for_each(|a| m(&mut a.name));
        self.ranges.iter_mut().for_each(|r| m(&mut r.name));
        for c in &mut self.cpu_ops {
            m(&mut c.name);
            m(&mut c.dims);
            m(&mut c.stack);
        }
        for c in &mut self.collectives {
            m(&mut c.name);
            m(&mut c.dtype);
            m(&mut c.group);
        }
        for t in &mut self.triton {
            m(&mut t.file);
            m(&mut t.config);
        }
        for r in &mut self.modules {
            m(&mut r.name);
            m(&mut r.path);
        }
    }
}
