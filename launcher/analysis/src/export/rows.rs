//! One trace file's events, each turned into a row of its table as it streams past.
//!
//! Which events count, and their times, are those of `cuprof report` (`analysis::load`):
//! complete (`"ph": "X"`) events with a `ts` and a `dur`, ending at `ts + max(dur, 0)`, both
//! within ±2^62 ns;
//! `ProfilerStep#N` annotations are steps, other `user_annotation` events ranges; a GPU
//! operation's device is `args.device`, else its `pid`. So a query over the tables gives the
//! report's figures to the nanosecond.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cuprof_core::reader::{event_members, Event, Id, ReadSummary, TraceMeta, TraceReader};

use super::args::{self, dim3, float, int, text};
use super::schema::{self, Col};
use super::table::{ParquetFile, Sink, Table};
use crate::escape::terminal::Shown;
use crate::load::{
    cuda_category, is_known_host_category, module_class, progress, step_number, ModuleArgs,
    MODULE_PREFIX, TIME_LIMIT_NS,
};
use crate::model::links::AttributionRule;

/// What a file held that no table took, for the warnings `export` prints as `report` does.
#[derive(Debug, Default)]
pub struct Skipped {
    /// Complete events without a usable `ts` or `dur`, or starting or ending beyond ±2^62 ns.
    pub malformed: u64,
    /// Complete events with a negative `dur`, exported as lasting 0.
    pub clamped: u64,
    /// Complete events of categories that are neither CUDA activity nor host events (another
    /// accelerator's), by category.
    pub ignored: std::collections::BTreeMap<String, u64>,
}

impl Skipped {
    /// Adds what a later part of the same file skipped.
    pub fn add(&mut self, later: Skipped) {
        self.malformed += later.malformed;
        self.clamped += later.clamped;
        for (cat, n) in later.ignored {
            *self.ignored.entry(cat).or_default() += n;
        }
    }
}

/// Launches carrying both a correlation and an `External id`, and those of them whose two ids
/// are equal: which attribution rule the file's producer followed.
#[derive(Debug, Default, Clone, Copy)]
pub struct Launches {
    pub carried: usize,
    pub own: usize,
}

impl Launches {
    pub fn add(&mut self, later: Launches) {
        self.carried += later.carried;
        self.own += later.own;
    }

    pub fn rule(self) -> AttributionRule {
        AttributionRule::from_launches(self.own, self.carried)
    }
}

/// What exporting one trace file gave: what the read found, the rows per table and what no
/// table took, its attribution rule and its header (and footer).
pub struct Exported {
    pub read: ReadSummary,
    pub counts: Counts,
    pub skipped: Skipped,
    pub rule: AttributionRule,
    pub meta: TraceMeta,
}

/// The tables of one trace file, in the order of [`schema::TABLES`] (less `files`), their rows
/// going to their files ([`ParquetFile`]) or another [`Sink`].
pub struct FileTables<S = ParquetFile> {
    kernels: Table<S>,
    copies: Table<S>,
    api_calls: Table<S>,
    operators: Table<S>,
    ranges: Table<S>,
    steps: Table<S>,
    memory: Table<S>,
    modules: Table<S>,
    skipped: Skipped,
    launches: Launches,
}

/// Rows written per table, by table name.
pub type Counts = Vec<(&'static str, u64)>;

fn pid_or_tid(id: &Option<Id<'_>>) -> Option<i64> {
    id.as_ref().and_then(Id::as_int)
}

/// `DIR/TABLE/PARTITION/NAME`, its directories created.
pub fn table_path(dir: &Path, table: &str, partition: &str, name: &str) -> Result<PathBuf> {
    let d = dir.join(table).join(partition);
    std::fs::create_dir_all(&d)
        .with_context(|| format!("{}: cannot create the directory", d.shown()))?;
    Ok(d.join(name))
}

impl FileTables {
    /// Creates `DIR/TABLE/PARTITION/NAME` for every table (directories included).
    pub fn create(dir: &Path, partition: &str, name: &str) -> Result<Self> {
        FileTables::build(|table, cols| {
            Table::create(&table_path(dir, table, partition, name)?, cols)
        })
    }

    /// Streams `reader`'s events into the tables, then finishes every file. A progress bar
    /// appears when the read takes more than a second, as in `report`.
    pub fn fill(mut self, reader: &mut TraceReader<'_>) -> Result<Exported> {
        let mut failed = None;
        let path = reader.path().to_owned();
        let bar = progress(reader, &path);
        let read = reader.read_events(|e| match self.event(e) {
            Ok(()) => ControlFlow::Continue(()),
            Err(err) => {
                failed = Some(err);
                ControlFlow::Break(())
            }
        });
        if let Some(pb) = bar.borrow_mut().take() {
            pb.finish_and_clear();
        }
        // The reader's errors name the file already: no context, so the message stays one line.
        let read = read?;
        if let Some(e) = failed {
            return Err(e);
        }
        let (tables, skipped, launches) = self.into_parts();
        let mut counts = Counts::new();
        for (name, t) in tables {
            counts.push((name, t.finish()?));
        }
        Ok(Exported {
            read,
            counts,
            skipped,
            rule: launches.rule(),
            meta: reader.meta().clone(),
        })
    }
}

impl<S: Sink> FileTables<S> {
    /// Every table, made by `open(TABLE, COLUMNS)`.
    pub fn build(
        mut open: impl FnMut(&'static str, &'static [Col]) -> Result<Table<S>>,
    ) -> Result<Self> {
        Ok(FileTables {
            kernels: open("kernels", schema::KERNELS)?,
            copies: open("copies", schema::COPIES)?,
            api_calls: open("api_calls", schema::API_CALLS)?,
            operators: open("operators", schema::OPERATORS)?,
            ranges: open("ranges", schema::RANGES)?,
            steps: open("steps", schema::STEPS)?,
            memory: open("memory", schema::MEMORY)?,
            modules: open("modules", schema::MODULES)?,
            skipped: Skipped::default(),
            launches: Launches::default(),
        })
    }

    /// The tables by name, in order, what no table took, and the launches counted.
    pub fn into_parts(self) -> (Vec<(&'static str, Table<S>)>, Skipped, Launches) {
        let tables = vec![
            ("kernels", self.kernels),
            ("copies", self.copies),
            ("api_calls", self.api_calls),
            ("operators", self.operators),
            ("ranges", self.ranges),
            ("steps", self.steps),
            ("memory", self.memory),
            ("modules", self.modules),
        ];
        (tables, self.skipped, self.launches)
    }

    /// One event's rows (none, one, or a row per memory counter).
    pub fn event(&mut self, e: &Event<'_>) -> Result<()> {
        if e.ph == "C" || (e.ph == "i" && e.name == "[memory]") {
            return self.memory(e);
        }
        if !e.is_complete() {
            return Ok(());
        }
        let (Some(start), Some(dur)) = (e.ts, e.dur) else {
            self.skipped.malformed += 1;
            return Ok(());
        };
        if dur < 0 {
            self.skipped.clamped += 1;
        }
        let end = start.saturating_add(dur.max(0));
        // As the report: an event starting or ending past ±2^62 ns is no time at all.
        let limits = -TIME_LIMIT_NS..TIME_LIMIT_NS;
        if !limits.contains(&start) || !limits.contains(&end) {
            self.skipped.malformed += 1;
            return Ok(());
        }
        let x = &e.args.raw;
        let device = || e.args.device.or_else(|| pid_or_tid(&e.pid)).unwrap_or(0);
        // Older Kineto traces say `Kernel`, `Runtime`, ...: the same tables as the current names.
        let cat = cuda_category(&e.cat);
        match cat {
            "kernel" => {
                let [gx, gy, gz] = dim3(x.grid);
                let [bx, by, bz] = dim3(x.block);
                self.kernels
                    .row()
                    .text(Some(&e.name))
                    .int(device())
                    .int(e.args.stream.or_else(|| pid_or_tid(&e.tid)))
                    .int(start)
                    .int(end)
                    .int(e.args.correlation)
                    .int(e.args.external_id)
                    .int(gx)
                    .int(gy)
                    .int(gz)
                    .int(bx)
                    .int(by)
                    .int(bz)
                    .int(int(x.registers_per_thread))
                    .int(int(x.shared_memory))
                    .int(int(x.graph_id))
                    .end()
            }
            "gpu_memcpy" | "gpu_memset" => {
                let kind = if cat == "gpu_memcpy" {
                    "memcpy"
                } else {
                    "memset"
                };
                self.copies
                    .row()
                    .text(Some(kind))
                    .text(Some(&e.name))
                    .int(device())
                    .int(e.args.stream.or_else(|| pid_or_tid(&e.tid)))
                    .int(start)
                    .int(end)
                    .int(e.args.bytes)
                    .float(float(x.bandwidth))
                    .int(e.args.correlation)
                    .int(e.args.external_id)
                    .end()
            }
            "cuda_runtime" | "cuda_driver" => {
                if let (Some(c), Some(x)) = (e.args.correlation, e.args.external_id) {
                    if c >= 0 {
                        self.launches.carried += 1;
                        self.launches.own += (c == x) as usize;
                    }
                }
                let kind = if cat == "cuda_runtime" {
                    "runtime"
                } else {
                    "driver"
                };
                self.api_calls
                    .row()
                    .text(Some(kind))
                    .text(Some(&e.name))
                    .int(pid_or_tid(&e.pid))
                    .int(pid_or_tid(&e.tid))
                    .int(start)
                    .int(end)
                    .int(e.args.correlation)
                    .int(e.args.external_id)
                    .int(int(x.cbid))
                    .end()
            }
            "cpu_op" => self
                .operators
                .row()
                .text(Some(&e.name))
                .int(pid_or_tid(&e.pid))
                .int(pid_or_tid(&e.tid))
                .int(start)
                .int(end)
                .int(e.args.external_id)
                .int(int(x.sequence_number))
                .int(int(x.fwd_thread_id))
                .text(e.args.input_dims)
                .text(e.args.call_stack.as_deref())
                .int(e.args.flops)
                .text(e.args.collective.name.as_deref())
                .text(e.args.collective.dtype.as_deref())
                .int(e.args.collective.in_nelems)
                .int(e.args.collective.out_nelems)
                .int(e.args.collective.group_size)
                .text(e.args.triton.file.as_deref())
                .float(e.args.triton.num_gb)
                .int(e.args.triton.flop)
                .int(e.args.triton.num_warps)
                .int(e.args.triton.num_stages)
                .text(e.args.triton.config.as_deref())
                .end(),
            "user_annotation" | "gpu_user_annotation" => {
                let gpu = cat == "gpu_user_annotation";
                if !gpu {
                    if let Some(n) = step_number(&e.name) {
                        return self
                            .steps
                            .row()
                            .int(n)
                            .int(pid_or_tid(&e.pid))
                            .int(pid_or_tid(&e.tid))
                            .int(start)
                            .int(end)
                            .float(e.args.work)
                            .end();
                    }
                }
                self.ranges
                    .row()
                    .text(Some(if gpu { "gpu" } else { "cpu" }))
                    .text(Some(&e.name))
                    .int(pid_or_tid(&e.pid))
                    .int(pid_or_tid(&e.tid))
                    .int(start)
                    .int(end)
                    .text(text(x.domain).as_deref())
                    .float(e.args.payload)
                    .end()
            }
            "python_function" => match e.name.strip_prefix(MODULE_PREFIX) {
                Some(name) => {
                    let args = ModuleArgs::of(e.raw);
                    self.modules
                        .row()
                        .text(Some(name))
                        .text(Some(module_class(name)))
                        .text(args.path.as_deref().filter(|p| !p.is_empty()))
                        .int(pid_or_tid(&e.pid))
                        .int(pid_or_tid(&e.tid))
                        .int(start)
                        .int(end)
                        .int(args.id())
                        .int(args.parent_id())
                        .end()
                }
                // Python frames: the operators' call stacks, not rows of their own.
                None => Ok(()),
            },
            // Read by `report` (sync intervals), no table of its own.
            "cuda_sync" => Ok(()),
            other => {
                if !is_known_host_category(other) {
                    *self.skipped.ignored.entry(other.to_owned()).or_default() += 1;
                }
                Ok(())
            }
        }
    }

    /// A counter event (every numeric member of `args` is a counter) or a Kineto `[memory]`
    /// instant (its byte counts; `Device Id` and `Addr` describe it).
    fn memory(&mut self, e: &Event<'_>) -> Result<()> {
        let Some(ts) = e.ts else {
            return Ok(());
        };
        let Some(a) = e.raw_str().ok().and_then(args::args_of) else {
            return Ok(());
        };
        let Ok(members) = event_members(a.get()) else {
            return Ok(());
        };
        let kineto = e.ph == "i";
        let find = |k: &str| members.iter().find(|(n, _)| n == k).map(|(_, v)| v.get());
        let (device, addr) = if kineto {
            (int(find("Device Id")), int(find("Addr")))
        } else {
            (e.args.device.or_else(|| pid_or_tid(&e.pid)), None)
        };
        for (counter, v) in &members {
            if kineto
                && !matches!(
                    counter.as_ref(),
                    "Bytes" | "Total Allocated" | "Total Reserved"
                )
            {
                continue;
            }
            let Some(value) = int(Some(v.get())) else {
                continue;
            };
            self.memory
                .row()
                .text(Some(&e.name))
                .int(device)
                .int(ts)
                .text(Some(counter))
                .int(value)
                .int(addr)
                .end()?;
        }
        Ok(())
    }
}
