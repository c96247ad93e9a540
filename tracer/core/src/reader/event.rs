//! One trace event as the reader hands it out: the fields analysis needs, parsed, with strings
//! borrowed from the read buffer whenever they hold no escapes.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::scan::micros_to_ns;

/// A `pid`, `tid` or flow `id`: an integer, or a string (Kineto's `"pid": ""` on global instants).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Id<'a> {
    Int(i64),
    Str(Cow<'a, str>),
}

impl Id<'_> {
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Id::Int(i) => Some(*i),
            Id::Str(_) => None,
        }
    }

    pub fn into_owned(self) -> Id<'static> {
        match self {
            Id::Int(i) => Id::Int(i),
            Id::Str(s) => Id::Str(Cow::Owned(s.into_owned())),
        }
    }
}

impl fmt::Display for Id<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Int(i) => write!(f, "{i}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// The `args` members that analysis uses; every other member is skipped unparsed.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Args<'a> {
    pub correlation: Option<i64>,
    pub stream: Option<i64>,
    pub device: Option<i64>,
    pub bytes: Option<i64>,
    /// Units of work in a `ProfilerStep#N` (tokens, samples), when the program reported them.
    pub work: Option<f64>,
    /// A `ProfilerStep#N`'s named figures (`{"kv_len": 1024, ...}`), the JSON text as it stands
    /// in the file.
    pub figures: Option<&'a str>,
    /// NVTX payload of a range.
    pub payload: Option<f64>,
    /// `process_name` / `thread_name` metadata.
    pub name: Option<Cow<'a, str>>,
    /// `process_sort_index` / `thread_sort_index` metadata.
    pub sort_index: Option<i64>,
    /// Kineto's `External id`: on a `cpu_op` its own id, on a CUDA call or a GPU operation the
    /// id of the innermost operator it ran in.
    pub external_id: Option<i64>,
    /// A `cpu_op`'s `Input Dims`, the JSON text as it stands in the file (nested arrays).
    pub input_dims: Option<&'a str>,
    /// A `cpu_op`'s `flops` (torch's count, with `--with-flops` or torch.profiler's own).
    pub flops: Option<i64>,
    /// A `cpu_op`'s `Call stack`: `file(line): function` frames, innermost first, `;` between.
    pub call_stack: Option<Cow<'a, str>>,
    /// A collective's metadata, on its `record_param_comms` operator.
    pub collective: Collective<'a>,
    /// What torch.compile says of a Triton kernel, on the operator that launched it.
    pub triton: TritonLaunch<'a>,
    /// Members found but not decoded (their JSON text), for tools that keep them.
    pub raw: RawMembers<'a>,
}

/// What a collective's `record_param_comms` operator says of it (torch's `saveNcclMeta`, in
/// torch.profiler's traces and cuprof's): enough to size it and to name it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Collective<'a> {
    /// `Collective name`: `allreduce`, `allgather_into_tensor_coalesced`, `broadcast`...
    pub name: Option<Cow<'a, str>>,
    /// `dtype`: the element type's name as torch prints it (`Float`, `BFloat16`...).
    pub dtype: Option<Cow<'a, str>>,
    /// `In msg nelems`: elements sent by this rank.
    pub in_nelems: Option<i64>,
    /// `Out msg nelems`: elements received by this rank.
    pub out_nelems: Option<i64>,
    /// `Group size`: ranks in the process group.
    pub group_size: Option<i64>,
    /// `Process Group Name`: the group's id, the same on each of its ranks.
    pub group: Option<Cow<'a, str>>,
    /// `Seq`: the collective's number in its group, the same on each of its ranks.
    pub seq: Option<i64>,
}

/// The keyword inputs torch.compile gives the operator it opens around each Triton kernel
/// launch (`triton_heuristics.py`'s profiler kwargs, in torch.profiler's traces with
/// record_shapes and in cuprof's): where the kernel's source is and inductor's estimates.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TritonLaunch<'a> {
    /// `kernel_file`: the generated Python module holding the kernel.
    pub file: Option<Cow<'a, str>>,
    /// `kernel_num_gb`: inductor's estimate of the GB one launch reads and writes.
    pub num_gb: Option<f64>,
    /// `kernel_flop`: inductor's count of one launch's floating-point operations.
    pub flop: Option<i64>,
    /// `num_warps`, `num_stages` and `kernel_kwargs` (`XBLOCK=128`...): the launch's config.
    pub num_warps: Option<i64>,
    pub num_stages: Option<i64>,
    pub config: Option<Cow<'a, str>>,
}

/// Members of `args` that the reader delimits but leaves as JSON text (`External id` and
/// `Input Dims` are in [`Args`]): `cuprof export` keeps
/// them as columns. Finding where a value ends costs what skipping it does, so reading them
/// this way adds nothing to a reader that does not look at them.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct RawMembers<'a> {
    pub sequence_number: Option<&'a str>,
    pub fwd_thread_id: Option<&'a str>,
    pub grid: Option<&'a str>,
    pub block: Option<&'a str>,
    pub registers_per_thread: Option<&'a str>,
    pub shared_memory: Option<&'a str>,
    pub graph_id: Option<&'a str>,
    /// `"memory bandwidth (GB/s)"` of a memcpy or memset.
    pub bandwidth: Option<&'a str>,
    pub cbid: Option<&'a str>,
    /// NVTX domain of a range.
    pub domain: Option<&'a str>,
}

/// One element of `traceEvents`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event<'a> {
    /// The event's JSON text exactly as in the file (see [`Event::raw_str`]).
    pub raw: &'a [u8],
    /// Uncompressed byte offset of the event in the file.
    pub offset: u64,
    pub ph: Cow<'a, str>,
    pub cat: Cow<'a, str>,
    pub name: Cow<'a, str>,
    pub pid: Option<Id<'a>>,
    pub tid: Option<Id<'a>>,
    /// Start, in nanoseconds after `baseTimeNanoseconds` (the file's `ts` is microseconds).
    pub ts: Option<i64>,
    /// Duration in nanoseconds.
    pub dur: Option<i64>,
    pub id: Option<Id<'a>>,
    pub args: Args<'a>,
    /// Where `pid`, `ts`, `id` and `args` stand in [`Self::raw`], when the reader found them
    /// on its way (the lean decode of a plain event): a tool that rewrites them (`cuprof
    /// merge`) need not scan the event again. `None` otherwise: [`super::for_each_member`]
    /// finds them.
    pub spans: Option<MemberSpans>,
}

/// Byte ranges of some members' values in an event's text (see [`Event::spans`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberSpans {
    pub pid: Option<Range<usize>>,
    pub ts: Option<Range<usize>>,
    pub id: Option<Range<usize>>,
    pub args: Option<Range<usize>>,
}

impl<'a> Event<'a> {
    /// Parses one event object (the bytes between and including its braces).
    pub fn parse(raw: &'a str, offset: u64) -> Result<Self, serde_json::Error> {
        let f: Fields<'a> = serde_json::from_str(raw)?;
        Ok(Event::from_fields(f, raw.as_bytes(), offset))
    }

    /// Parses the event at the start of `bytes` (more may follow): the event and its length,
    /// or `Ok(None)` when `bytes` ends before the event does.
    pub(crate) fn parse_prefix(
        bytes: &'a [u8],
        offset: u64,
    ) -> Result<Option<(Self, usize)>, serde_json::Error> {
        Self::parse_prefix_as::<Fields<'a>>(bytes, offset)
    }

    /// [`Self::parse_prefix`] decoding only what [`Lean`] names.
    pub(crate) fn parse_prefix_lean(
        bytes: &'a [u8],
        offset: u64,
    ) -> Result<Option<(Self, usize)>, serde_json::Error> {
        Self::parse_prefix_as::<LeanFields<'a>>(bytes, offset)
    }

    fn parse_prefix_as<T: Deserialize<'a> + Into<Fields<'a>>>(
        bytes: &'a [u8],
        offset: u64,
    ) -> Result<Option<(Self, usize)>, serde_json::Error> {
        let mut it = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
        match it.next() {
            Some(Ok(f)) => {
                let n = it.byte_offset();
                Ok(Some((Event::from_fields(f.into(), &bytes[..n], offset), n)))
            }
            None => Ok(None),
            // A number cut by the end of the buffer is "invalid", not "EOF": an error counts
            // only if the object is complete.
            Some(Err(e)) => match super::scan::container_end(bytes) {
                super::scan::Scan::NeedMore => Ok(None),
                super::scan::Scan::Complete(_) => Err(e),
            },
        }
    }

    fn from_fields(f: Fields<'a>, raw: &'a [u8], offset: u64) -> Self {
        Event {
            raw,
            offset,
            ph: f.ph.map(|t| t.0).unwrap_or(Cow::Borrowed("")),
            cat: f.cat.map(|t| t.0).unwrap_or(Cow::Borrowed("")),
            name: f.name.map(|t| t.0).unwrap_or(Cow::Borrowed("")),
            pid: f.pid.and_then(|i| i.0),
            tid: f.tid.and_then(|i| i.0),
            ts: f.ts.and_then(|m| m.0),
            dur: f.dur.and_then(|m| m.0),
            id: f.id.and_then(|i| i.0),
            args: f.args.map(|a| a.into_args()).unwrap_or_default(),
            spans: None,
        }
    }

    /// The event's text as a string: an error only if a member the reader skipped holds bytes
    /// that are not UTF-8 (the members it decodes are checked).
    pub fn raw_str(&self) -> Result<&'a str, std::str::Utf8Error> {
        std::str::from_utf8(self.raw)
    }

    /// `ts + dur`, when both are known.
    pub fn end(&self) -> Option<i64> {
        Some(self.ts? + self.dur.unwrap_or(0))
    }

    /// A complete (`"ph": "X"`) event.
    pub fn is_complete(&self) -> bool {
        self.ph == "X"
    }
}

#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(borrow, default)]
    ph: Option<Text<'a>>,
    #[serde(borrow, default)]
    cat: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(borrow, default)]
    pid: Option<LenientId<'a>>,
    #[serde(borrow, default)]
    tid: Option<LenientId<'a>>,
    #[serde(default)]
    ts: Option<Micros>,
    #[serde(default)]
    dur: Option<Micros>,
    #[serde(borrow, default)]
    id: Option<LenientId<'a>>,
    #[serde(borrow, default)]
    args: Option<RawArgs<'a>>,
}

/// What a reader in [`Lean`](super::Detail::Lean) mode decodes: the members that place an
/// event (`ph`, `name`, `pid`, `ts`, `id`) and a metadata event's `args.name` /
/// `args.sort_index`. The others are still checked to be JSON, but not decoded: `cuprof merge`
/// rewrites only these, and decoding every kernel's `args` was a sixth of its time.
///
/// The members the full decode ([`Fields`], [`RawArgs`]) reads are named here too, as
/// [`IgnoredAny`] (skipped at the cost of skipping an unknown member): the derive then refuses a
/// member that appears twice exactly where the full decode does, so an event the lean reader
/// passes on (to `cuprof merge`'s output) is never one `cuprof report` refuses.
#[derive(Deserialize)]
struct LeanFields<'a> {
    #[serde(borrow, default)]
    ph: Option<Text<'a>>,
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(borrow, default)]
    pid: Option<LenientId<'a>>,
    #[serde(default)]
    ts: Option<Micros>,
    #[serde(borrow, default)]
    id: Option<LenientId<'a>>,
    #[serde(borrow, default)]
    args: Option<LeanArgs<'a>>,
    #[serde(default, rename = "cat")]
    _cat: Option<IgnoredAny>,
    #[serde(default, rename = "tid")]
    _tid: Option<IgnoredAny>,
    #[serde(default, rename = "dur")]
    _dur: Option<IgnoredAny>,
}

/// A metadata event's `args` for [`LeanFields`]; the other members [`RawArgs`] decodes are
/// named only so that one appearing twice is refused as the full decode refuses it.
#[derive(Deserialize)]
struct LeanArgs<'a> {
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(default)]
    sort_index: Option<Int>,
    #[serde(default, rename = "correlation")]
    _correlation: Option<IgnoredAny>,
    #[serde(default, rename = "stream")]
    _stream: Option<IgnoredAny>,
    #[serde(default, rename = "device")]
    _device: Option<IgnoredAny>,
    #[serde(default, rename = "bytes")]
    _bytes: Option<IgnoredAny>,
    #[serde(default, rename = "work")]
    _work: Option<IgnoredAny>,
    #[serde(default, rename = "figures")]
    _figures: Option<IgnoredAny>,
    #[serde(default, rename = "payload")]
    _payload: Option<IgnoredAny>,
    #[serde(default, rename = "External id")]
    _external_id: Option<IgnoredAny>,
    #[serde(default, rename = "Input Dims")]
    _input_dims: Option<IgnoredAny>,
    #[serde(default, rename = "flops")]
    _flops: Option<IgnoredAny>,
    #[serde(default, rename = "Call stack")]
    _call_stack: Option<IgnoredAny>,
    #[serde(default, rename = "Sequence number")]
    _sequence_number: Option<IgnoredAny>,
    #[serde(default, rename = "Fwd thread id")]
    _fwd_thread_id: Option<IgnoredAny>,
    #[serde(default, rename = "grid")]
    _grid: Option<IgnoredAny>,
    #[serde(default, rename = "block")]
    _block: Option<IgnoredAny>,
    #[serde(default, rename = "registers per thread")]
    _registers_per_thread: Option<IgnoredAny>,
    #[serde(default, rename = "shared memory")]
    _shared_memory: Option<IgnoredAny>,
    #[serde(default, rename = "graph id")]
    _graph_id: Option<IgnoredAny>,
    #[serde(default, rename = "memory bandwidth (GB/s)")]
    _bandwidth: Option<IgnoredAny>,
    #[serde(default, rename = "cbid")]
    _cbid: Option<IgnoredAny>,
    #[serde(default, rename = "domain")]
    _domain: Option<IgnoredAny>,
    #[serde(default, rename = "Collective name")]
    _collective_name: Option<IgnoredAny>,
    #[serde(default, rename = "dtype")]
    _dtype: Option<IgnoredAny>,
    #[serde(default, rename = "In msg nelems")]
    _in_msg_nelems: Option<IgnoredAny>,
    #[serde(default, rename = "Out msg nelems")]
    _out_msg_nelems: Option<IgnoredAny>,
    #[serde(default, rename = "Group size")]
    _group_size: Option<IgnoredAny>,
    #[serde(default, rename = "Process Group Name")]
    _process_group_name: Option<IgnoredAny>,
    #[serde(default, rename = "Seq")]
    _seq: Option<IgnoredAny>,
    #[serde(default, rename = "kernel_file")]
    _kernel_file: Option<IgnoredAny>,
    #[serde(default, rename = "kernel_num_gb")]
    _kernel_num_gb: Option<IgnoredAny>,
    #[serde(default, rename = "kernel_flop")]
    _kernel_flop: Option<IgnoredAny>,
    #[serde(default, rename = "num_warps")]
    _num_warps: Option<IgnoredAny>,
    #[serde(default, rename = "num_stages")]
    _num_stages: Option<IgnoredAny>,
    #[serde(default, rename = "kernel_kwargs")]
    _kernel_kwargs: Option<IgnoredAny>,
}

impl<'a> From<LeanFields<'a>> for Fields<'a> {
    fn from(f: LeanFields<'a>) -> Self {
        Fields {
            ph: f.ph,
            cat: None,
            name: f.name,
            pid: f.pid,
            tid: None,
            ts: f.ts,
            dur: None,
            id: f.id,
            args: f.args.map(|a| RawArgs {
                name: a.name,
                sort_index: a.sort_index,
                ..RawArgs::default()
            }),
        }
    }
}

#[derive(Deserialize, Default)]
struct RawArgs<'a> {
    #[serde(default)]
    correlation: Option<Int>,
    #[serde(default)]
    stream: Option<Int>,
    #[serde(default)]
    device: Option<Int>,
    #[serde(default)]
    bytes: Option<Int>,
    #[serde(default)]
    work: Option<Float>,
    #[serde(borrow, default)]
    figures: Option<&'a RawValue>,
    #[serde(default)]
    payload: Option<Float>,
    #[serde(borrow, default)]
    name: Option<Text<'a>>,
    #[serde(default)]
    sort_index: Option<Int>,
    #[serde(rename = "External id", default)]
    external_id: Option<Int>,
    #[serde(rename = "Input Dims", borrow, default)]
    input_dims: Option<&'a RawValue>,
    #[serde(default)]
    flops: Option<Int>,
    #[serde(rename = "Call stack", borrow, default)]
    call_stack: Option<Text<'a>>,
    #[serde(borrow, default, rename = "Sequence number")]
    sequence_number: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "Fwd thread id")]
    fwd_thread_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    grid: Option<&'a RawValue>,
    #[serde(borrow, default)]
    block: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "registers per thread")]
    registers_per_thread: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "shared memory")]
    shared_memory: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "graph id")]
    graph_id: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "memory bandwidth (GB/s)")]
    bandwidth: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cbid: Option<&'a RawValue>,
    #[serde(borrow, default)]
    domain: Option<&'a RawValue>,
    #[serde(rename = "Collective name", borrow, default)]
    collective_name: Option<Text<'a>>,
    #[serde(borrow, default)]
    dtype: Option<Text<'a>>,
    #[serde(rename = "In msg nelems", default)]
    in_msg_nelems: Option<Int>,
    #[serde(rename = "Out msg nelems", default)]
    out_msg_nelems: Option<Int>,
    #[serde(rename = "Group size", default)]
    group_size: Option<Int>,
    #[serde(rename = "Process Group Name", borrow, default)]
    process_group_name: Option<Text<'a>>,
    #[serde(rename = "Seq", default)]
    seq: Option<Int>,
    #[serde(borrow, default)]
    kernel_file: Option<Text<'a>>,
    #[serde(default)]
    kernel_num_gb: Option<Float>,
    #[serde(default)]
    kernel_flop: Option<Int>,
    #[serde(default)]
    num_warps: Option<Int>,
    #[serde(default)]
    num_stages: Option<Int>,
    #[serde(borrow, default)]
    kernel_kwargs: Option<Text<'a>>,
}

impl<'a> RawArgs<'a> {
    fn into_args(self) -> Args<'a> {
        Args {
            correlation: self.correlation.and_then(|i| i.0),
            stream: self.stream.and_then(|i| i.0),
            device: self.device.and_then(|i| i.0),
            bytes: self.bytes.and_then(|i| i.0),
            work: self.work.and_then(|f| f.0),
            figures: self.figures.map(RawValue::get),
            payload: self.payload.and_then(|f| f.0),
            name: self.name.map(|t| t.0),
            sort_index: self.sort_index.and_then(|i| i.0),
            external_id: self.external_id.and_then(|i| i.0),
            input_dims: self.input_dims.map(RawValue::get),
            flops: self.flops.and_then(|i| i.0),
            call_stack: self.call_stack.map(|t| t.0),
            collective: Collective {
                name: self.collective_name.map(|t| t.0),
                dtype: self.dtype.map(|t| t.0),
                in_nelems: self.in_msg_nelems.and_then(|i| i.0),
                out_nelems: self.out_msg_nelems.and_then(|i| i.0),
                group_size: self.group_size.and_then(|i| i.0),
                group: self.process_group_name.map(|t| t.0),
                seq: self.seq.and_then(|i| i.0),
            },
            triton: TritonLaunch {
                file: self.kernel_file.map(|t| t.0),
                num_gb: self.kernel_num_gb.and_then(|f| f.0),
                flop: self.kernel_flop.and_then(|i| i.0),
                num_warps: self.num_warps.and_then(|i| i.0),
                num_stages: self.num_stages.and_then(|i| i.0),
                config: self.kernel_kwargs.map(|t| t.0),
            },
            raw: RawMembers {
                sequence_number: self.sequence_number.map(RawValue::get),
                fwd_thread_id: self.fwd_thread_id.map(RawValue::get),
                grid: self.grid.map(RawValue::get),
                block: self.block.map(RawValue::get),
                registers_per_thread: self.registers_per_thread.map(RawValue::get),
                shared_memory: self.shared_memory.map(RawValue::get),
                graph_id: self.graph_id.map(RawValue::get),
                bandwidth: self.bandwidth.map(RawValue::get),
                cbid: self.cbid.map(RawValue::get),
                domain: self.domain.map(RawValue::get),
            },
        }
    }
}

/// A string, borrowed when it has no escapes; numbers and booleans are turned into text.
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(""))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Cow::Borrowed(""))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Cow::Borrowed(""))
            }
        }
        d.deserialize_any(V).map(Text)
    }
}

/// Lenient visitor shared by the numeric wrappers: anything that is not a number (or a string
/// holding one) becomes `None` instead of failing the whole event.
macro_rules! lenient_number {
    ($name:ident, $t:ty, $from_i:expr, $from_u:expr, $from_f:expr) => {
        struct $name(Option<$t>);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = Option<$t>;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("a number")
                    }
                    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                        Ok($from_i(v))
                    }
                    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                        Ok($from_u(v))
                    }
                    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                        Ok($from_f(v))
                    }
                    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                        Ok(v.trim().parse::<f64>().ok().and_then($from_f))
                    }
                    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                        Ok(None)
                    }
                    fn visit_unit<E>(self) -> Result<Self::Value, E> {
                        Ok(None)
                    }
                    fn visit_seq<A: SeqAccess<'de>>(
                        self,
                        mut a: A,
                    ) -> Result<Self::Value, A::Error> {
                        while a.next_element::<IgnoredAny>()?.is_some() {}
                        Ok(None)
                    }
                    fn visit_map<A: MapAccess<'de>>(
                        self,
                        mut a: A,
                    ) -> Result<Self::Value, A::Error> {
                        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                        Ok(None)
                    }
                }
                d.deserialize_any(V).map($name)
            }
        }
    };
}

fn f64_to_i64(v: f64) -> Option<i64> {
    (v.is_finite() && v.fract() == 0.0 && v.abs() < 9.2e18).then_some(v as i64)
}

lenient_number!(Int, i64, Some, |v: u64| i64::try_from(v).ok(), f64_to_i64);
lenient_number!(
    Float,
    f64,
    |v: i64| Some(v as f64),
    |v: u64| Some(v as f64),
    |v: f64| v.is_finite().then_some(v)
);

/// `ts` / `dur`: microseconds in the file, exact integer nanoseconds here.
struct Micros(Option<i64>);

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &RawValue = Deserialize::deserialize(d)?;
        Ok(Micros(micros_to_ns(raw.get())))
    }
}

struct LenientId<'a>(Option<Id<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for LenientId<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<Id<'de>>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Some(Id::Int(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Some(match i64::try_from(v) {
                    Ok(i) => Id::Int(i),
                    Err(_) => Id::Str(Cow::Owned(v.to_string())),
                }))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Some(match f64_to_i64(v) {
                    Some(i) => Id::Int(i),
                    None => Id::Str(Cow::Owned(v.to_string())),
                }))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Id::Str(Cow::Borrowed(v))))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Id::Str(Cow::Owned(v.to_owned()))))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        d.deserialize_any(V).map(LenientId)
    }
}

/// The members of an event object in file order, values unparsed: what a tool that rewrites
/// events (`cuprof merge`) needs to change a few members and copy the rest byte for byte.
pub fn event_members(raw: &str) -> Result<Vec<(Cow<'_, str>, &RawValue)>, serde_json::Error> {
    struct Members<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);
    impl<'de> Deserialize<'de> for Members<'de> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Members<'de>;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("an event object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
                    let mut v = Vec::with_capacity(a.size_hint().unwrap_or(8));
                    while let Some(k) = a.next_key::<Text<'de>>()? {
                        let value: &'de RawValue = a.next_value()?;
                        v.push((k.0, value));
                    }
                    Ok(Members(v))
                }
            }
            d.deserialize_map(V)
        }
    }
    let m: Members<'_> = serde_json::from_str(raw)?;
    Ok(m.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_event_fields() {
        let raw = r#"{"ph": "X", "cat": "kernel", "name": "sm90_gemm", "pid": 0, "tid": 7, "ts": 125.500, "dur": 40.250, "args": {"device": 0, "context": 1, "stream": 7, "correlation": 10, "registers per thread": 168, "grid": [132, 1, 1], "block": [384, 1, 1], "est. achieved occupancy %": 25}}"#;
        let e = Event::parse(raw, 42).unwrap();
        assert_eq!(e.ph, "X");
        assert_eq!(e.cat, "kernel");
        assert!(matches!(e.name, Cow::Borrowed("sm90_gemm")));
        assert_eq!(e.pid, Some(Id::Int(0)));
        assert_eq!(e.tid, Some(Id::Int(7)));
        assert_eq!(e.ts, Some(125_500));
        assert_eq!(e.dur, Some(40_250));
        assert_eq!(e.end(), Some(165_750));
        assert_eq!(e.args.correlation, Some(10));
        assert_eq!(e.args.stream, Some(7));
        assert_eq!(e.args.device, Some(0));
        assert_eq!(e.args.raw.grid, Some("[132, 1, 1]"));
        assert_eq!(e.args.raw.registers_per_thread, Some("168"));
        assert_eq!(e.args.external_id, None);
        assert_eq!(e.offset, 42);
        assert_eq!(e.raw_str().unwrap(), raw);
    }

    #[test]
    fn operator_args() {
        let raw = r#"{"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 2, "ts": 1.000, "dur": 2.000, "args": {"External id": 5, "Sequence number": 1, "Record function id": 5, "Input Dims": [[32], [8, 64], []], "Call stack": "m.py(12): forward;t.py(40): <module>"}}"#;
        let e = Event::parse(raw, 0).unwrap();
        assert_eq!(e.args.external_id, Some(5));
        assert_eq!(e.args.input_dims, Some("[[32], [8, 64], []]"));
        assert_eq!(
            e.args.call_stack.as_deref(),
            Some("m.py(12): forward;t.py(40): <module>")
        );
        let k = Event::parse(r#"{"ph": "X", "args": {"correlation": 3}}"#, 0).unwrap();
        assert_eq!(k.args.external_id, None);
        assert_eq!(k.args.input_dims, None);
    }

    #[test]
    fn lenient_about_odd_types() {
        let raw = r#"{"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 400.000, "args": {"stream": "x", "correlation": 3.0, "work": 12, "figures": {"kv_len": 512}, "name": "a\"b"}}"#;
        let e = Event::parse(raw, 0).unwrap();
        assert_eq!(e.pid, Some(Id::Str(Cow::Borrowed(""))));
        assert_eq!(e.args.stream, None);
        assert_eq!(e.args.correlation, Some(3));
        assert_eq!(e.args.work, Some(12.0));
        assert_eq!(e.args.figures, Some(r#"{"kv_len": 512}"#));
        assert_eq!(e.args.name.as_deref(), Some("a\"b"));
        assert_eq!(e.cat, "");
        assert_eq!(e.dur, None);
    }

    #[test]
    fn prefix_parsing_needs_the_whole_object() {
        let full = r#"{"ph": "X", "ts": 1234.500, "dur": 1.000}, {"ph": "i"}"#;
        let (e, n) = Event::parse_prefix(full.as_bytes(), 0).unwrap().unwrap();
        assert_eq!(e.ts, Some(1_234_500));
        assert_eq!(&full[n..n + 2], ", ");
        for cut in 1..full.find('}').unwrap() {
            assert!(
                Event::parse_prefix(&full.as_bytes()[..cut], 0)
                    .unwrap()
                    .is_none(),
                "cut at {cut}: {}",
                &full[..cut]
            );
        }
        assert!(Event::parse_prefix(br#"{"ph": "X", "ts": 1..2}"#, 0).is_err());
    }

    #[test]
    fn members_keep_order_and_text() {
        let raw = r#"{"ph": "X", "pid": 3, "args": {"b": 1, "a": [1, 2]}, "ts": 1.500}"#;
        let m = event_members(raw).unwrap();
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["ph", "pid", "args", "ts"]);
        assert_eq!(m[2].1.get(), r#"{"b": 1, "a": [1, 2]}"#);
        assert_eq!(m[3].1.get(), "1.500");
    }

    #[test]
    fn lean_decodes_what_places_an_event_and_validates_the_rest() {
        let kernel = br#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "id": "a", "args": {"correlation": 5, "stream": 7, "name": "n"}},"#;
        let (e, n) = Event::parse_prefix_lean(kernel, 9).unwrap().unwrap();
        assert_eq!(n, kernel.len() - 1);
        assert_eq!(e.raw, &kernel[..n]);
        assert_eq!(
            (e.ph.as_ref(), e.name.as_ref(), e.cat.as_ref()),
            ("X", "k", "")
        );
        assert_eq!((e.pid, e.tid), (Some(Id::Int(0)), None));
        assert_eq!((e.ts, e.dur, e.offset), (Some(1500), None, 9));
        assert_eq!(e.id, Some(Id::Str(Cow::Borrowed("a"))));
        let named = Args {
            name: Some(Cow::Borrowed("n")),
            ..Args::default()
        };
        assert_eq!(e.args, named);
        let sort =
            br#"{"ph": "M", "name": "process_sort_index", "pid": 3, "args": {"sort_index": 4}}"#;
        let (e, _) = Event::parse_prefix_lean(sort, 0).unwrap().unwrap();
        assert_eq!(e.args.sort_index, Some(4));
        // Members it does not decode are still JSON or the event is an error.
        assert!(Event::parse_prefix_lean(br#"{"ph": "X", "args": {"a": nan}}"#, 0).is_err());
        assert!(Event::parse_prefix_lean(br#"{"ph": "X", "cat": tru}"#, 0).is_err());
    }
}
