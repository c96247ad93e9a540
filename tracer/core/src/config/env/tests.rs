use super::*;
use crate::window::{Capture, RangeSource, Schedule};
use std::ffi::OsString;
use std::path::PathBuf;

const START: u64 = 1_700_000_000;

fn parse(vars: &[(&str, &str)]) -> (Config, Vec<String>) {
    Config::from_vars(vars.iter().copied(), START)
}

fn on(extra: &[(&str, &str)]) -> (Config, Vec<String>) {
    let mut v = vec![("CUPROF_ENABLED", "1")];
    v.extend_from_slice(extra);
    parse(&v)
}

#[test]
fn api_choices_by_name_ignoring_case() {
    for (v, want) in [
        ("filtered", ApiFilter::Filtered),
        ("Runtime", ApiFilter::Runtime),
        ("ALL", ApiFilter::All),
    ] {
        let (c, w) = on(&[("CUPROF_API", v)]);
        assert!(w.is_empty(), "{w:#?}");
        assert_eq!(c.api, want, "{v}");
    }
}

fn one_warning(w: &[String], needles: &[&str]) {
    assert_eq!(w.len(), 1, "{w:#?}");
    assert!(!w[0].contains('\n'));
    assert!(w[0].starts_with("cuprof: "), "{}", w[0]);
    for n in needles {
        assert!(w[0].contains(n), "{:?} lacks {n:?}", w[0]);
    }
}

#[test]
fn enabled_values() {
    for v in ["1", "true", "YES", "on", " 1 "] {
        let (c, w) = parse(&[("CUPROF_ENABLED", v)]);
        assert!(c.enabled && c.traces_this_process(), "{v}");
        assert!(w.is_empty());
    }
    for v in ["0", "false", "no", "off", ""] {
        let (c, w) = parse(&[("CUPROF_ENABLED", v)]);
        assert!(!c.enabled, "{v}");
        assert!(w.is_empty());
    }
    let (c, w) = parse(&[]);
    assert_eq!(c, Config::default());
    assert!(w.is_empty());
    let (c, w) = parse(&[("CUPROF_ENABLED", "maybe")]);
    assert!(!c.enabled);
    one_warning(
        &w,
        &[
            "CUPROF_ENABLED",
            "\"maybe\"",
            "1/true/yes",
            "tracing is off",
        ],
    );
    // Disabled: the other variables are not looked at, even invalid ones.
    let (_, w) = parse(&[("CUPROF_WAIT", "abc")]);
    assert!(w.is_empty());
}

#[test]
fn defaults_when_enabled() {
    let (c, w) = on(&[]);
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(c.dir, PathBuf::from("/tmp/cache_dit_profiles"));
    assert_eq!(c.name, "profile_1700000000");
    assert_eq!(
        c.activities,
        Activities {
            cpu: true,
            gpu: true,
            mem: false
        }
    );
    assert_eq!(c.api, ApiFilter::Filtered);
    assert!(!c.with_stack && !c.quiet);
    assert!(c.torch_ops && c.record_shapes);
    assert_eq!(c.capture, Capture::WholeRun);
    assert_eq!(c.step_nvtx, None);
    assert_eq!(
        c.rank,
        RankInfo {
            rank: 0,
            world_size: 1,
            local_rank: 0
        }
    );
    assert_eq!(c.max_mem_events, 100_000);
    assert_eq!(c.buffer_size, 2 << 20);
    assert_eq!(c.buffers, 32);
    assert_eq!(c.flush_interval, Duration::from_secs(1));
    assert_eq!(c.gzip_level, 1);
    assert_eq!(c.shutdown_wait, Duration::from_secs(10));
    assert_eq!(
        (&c.cupti_path, &c.dump_buffers, &c.report_file),
        (&None, &None, &None)
    );
    assert_eq!(
        c.trace_file_name(1),
        "profile_1700000000-rank0.trace.json.gz"
    );
}

#[test]
fn every_variable_valid() {
    let (c, w) = on(&[
        ("CUPROF_DIR", "/data/prof"),
        ("CACHE_DIT_TORCH_PROFILER_DIR", "/ignored"),
        ("CUPROF_NAME", "run1"),
        ("CUPROF_ACTIVITIES", "cpu gpu,MEM"),
        ("CUPROF_API", "ALL"),
        ("CUPROF_WITH_STACK", "yes"),
        ("CUPROF_QUIET", "1"),
        ("CUPROF_WAIT", "1"),
        ("CUPROF_WARMUP", "2"),
        ("CUPROF_ACTIVE", "3"),
        ("CUPROF_REPEAT", "4"),
        ("CUPROF_SKIP_FIRST", "5"),
        ("CUPROF_SKIP_FIRST_WAIT", "1"),
        ("CUPROF_STEP_NVTX", "ProfilerStep*"),
        ("CUPROF_RANKS", "0,3"),
        ("CUPROF_CUPTI_PATH", "/opt/cuda/libcupti.so.12"),
        ("CUPROF_MAX_MEM_EVENTS", "500"),
        ("CUPROF_DUMP_BUFFERS", "/tmp/dump"),
        ("CUPROF_BUFFER_SIZE", "4MiB"),
        ("CUPROF_BUFFERS", "16"),
        ("CUPROF_FLUSH_MS", "250"),
        ("CUPROF_GZIP_LEVEL", "6"),
        ("CUPROF_SHUTDOWN_WAIT", "60"),
        ("CUPROF_REPORT_FILE", "/tmp/report"),
        ("RANK", "3"),
        ("WORLD_SIZE", "4"),
        ("LOCAL_RANK", "1"),
    ]);
    assert!(w.is_empty(), "{w:#?}");
    assert_eq!(c.dir, PathBuf::from("/data/prof"));
    assert_eq!(c.name, "run1");
    assert_eq!(
        c.activities,
        Activities {
            cpu: true,
            gpu: true,
            mem: true
        }
    );
    assert_eq!(c.api, ApiFilter::All);
    assert!(c.with_stack && c.quiet);
    let s = Schedule::new(1, 2, 3)
        .unwrap()
        .with_repeat(4)
        .with_skip_first(5)
        .with_skip_first_wait(true);
    assert_eq!(c.capture, Capture::Steps(s));
    assert_eq!(c.step_nvtx.as_deref(), Some("ProfilerStep*"));
    assert_eq!(c.ranks, Some(vec![0, 3]));
    assert_eq!(
        c.rank,
        RankInfo {
            rank: 3,
            world_size: 4,
            local_rank: 1
        }
    );
    assert!(c.traces_this_process());
    assert_eq!(
        c.cupti_path,
        Some(PathBuf::from("/opt/cuda/libcupti.so.12"))
    );
    assert_eq!(c.max_mem_events, 500);
    assert_eq!(c.dump_buffers, Some(PathBuf::from("/tmp/dump")));
    assert_eq!(c.buffer_size, 4 << 20);
    assert_eq!(c.buffers, 16);
    assert_eq!(c.flush_interval, Duration::from_millis(250));
    assert_eq!(c.gzip_level, 6);
    assert_eq!(c.shutdown_wait, Duration::from_secs(60));
    assert_eq!(c.report_file, Some(PathBuf::from("/tmp/report")));
    assert_eq!(c.trace_file_name(2), "run1-rank3-cycle2.trace.json.gz");
}

#[test]
fn tensorboard_names_the_traces_for_its_plugin() {
    let (c, w) = on(&[
        ("CUPROF_TENSORBOARD", "1"),
        ("CUPROF_NAME", "run1"),
        ("RANK", "3"),
    ]);
    assert!(w.is_empty(), "{w:#?}");
    assert!(c.tensorboard);
    assert_eq!(c.trace_file_name(1), "run1-rank3.pt.trace.json.gz");
    let (c, _) = on(&[
        ("CUPROF_TENSORBOARD", "1"),
        ("CUPROF_NAME", "run1"),
        ("CUPROF_REPEAT", "4"),
        ("RANK", "3"),
    ]);
    assert_eq!(c.trace_file_name(2), "run1-rank3.2.pt.trace.json.gz");
}

/// The trace header's `cuprof.window`, as docs/trace-format.md writes it.
#[test]
fn the_window_reads_as_the_docs_write_it() {
    let window = |vars: &[(&str, &str)]| {
        let (c, w) = on(vars);
        assert!(w.is_empty(), "{w:#?}");
        c.window_text()
    };
    assert_eq!(
        window(&[
            ("CUPROF_WAIT", "1"),
            ("CUPROF_WARMUP", "1"),
            ("CUPROF_ACTIVE", "2"),
            ("CUPROF_REPEAT", "2"),
            ("CUPROF_STEP_NVTX", "step"),
        ]),
        "wait=1 warmup=1 active=2 repeat=2 source=nvtx:step"
    );
    assert_eq!(
        window(&[
            ("CUPROF_ACTIVE", "3"),
            ("CUPROF_SKIP_FIRST", "2"),
            ("CUPROF_SKIP_FIRST_WAIT", "1"),
        ]),
        "wait=0 warmup=0 active=3 repeat=1 skip_first=2 skip_first_wait=1 source=cuprof_step"
    );
    assert_eq!(
        window(&[("CUPROF_CAPTURE_RANGE", "cudaProfilerApi")]),
        "capture_range=cudaProfilerApi repeat=1"
    );
    assert_eq!(
        window(&[("CUPROF_CAPTURE_RANGE", "cuprof"), ("CUPROF_REPEAT", "0")]),
        "capture_range=cuprof repeat=0"
    );
    assert_eq!(
        window(&[("CUPROF_DELAY", "30"), ("CUPROF_DURATION", "5")]),
        "delay=30s duration=5s"
    );
    assert_eq!(
        window(&[("CUPROF_DELAY", "2.5")]),
        "delay=2.5s duration=exit"
    );
    assert_eq!(window(&[]), "whole run");
    assert_eq!(window(&[("CUPROF_ON_DEMAND", "1")]), "on demand");
}

#[test]
fn operator_switches_turn_off() {
    let (c, w) = on(&[("CUPROF_TORCH_OPS", "0"), ("CUPROF_RECORD_SHAPES", "off")]);
    assert!(w.is_empty(), "{w:?}");
    assert!(!c.torch_ops && !c.record_shapes);
}

#[test]
fn directory_fallbacks() {
    let (c, _) = on(&[("CACHE_DIT_TORCH_PROFILER_DIR", "/cd")]);
    assert_eq!(c.dir, PathBuf::from("/cd"));
    let (c, _) = on(&[("CUPROF_DIR", ""), ("CACHE_DIT_TORCH_PROFILER_DIR", "/cd")]);
    assert_eq!(c.dir, PathBuf::from("/cd"));
}

#[test]
fn invalid_values_warn_and_fall_back() {
    // (variable, value, words the warning must hold, check of the fallback)
    type Check = fn(&Config) -> bool;
    let cases: &[(&str, &str, &[&str], Check)] = &[
        (
            "CUPROF_WAIT",
            "abc",
            &["non-negative integer", "default (0)"],
            |c| c.capture == Capture::Steps(Schedule::new(0, 0, 1).unwrap().with_repeat(1)),
        ),
        (
            "CUPROF_WARMUP",
            "-1",
            &["non-negative integer"],
            |c| matches!(c.capture, Capture::Steps(s) if s.warmup() == 0),
        ),
        (
            "CUPROF_ACTIVE",
            "0",
            &["positive integer", "default (1)"],
            |c| matches!(c.capture, Capture::Steps(s) if s.active() == 1),
        ),
        (
            "CUPROF_REPEAT",
            "x",
            &["default (1)"],
            |c| matches!(c.capture, Capture::Steps(s) if s.repeat() == 1),
        ),
        (
            "CUPROF_SKIP_FIRST",
            "1.5",
            &["non-negative integer"],
            |c| matches!(c.capture, Capture::Steps(s) if s.skip_first() == 0),
        ),
        (
            "CUPROF_ACTIVITIES",
            "CPU,GPX",
            &["\"GPX\"", "CPU, GPU, MEM", "default (CPU,GPU)"],
            |c| c.activities == Activities::default(),
        ),
        (
            "CUPROF_ACTIVITIES",
            ",",
            &["empty", "default (CPU,GPU)"],
            |c| c.activities == Activities::default(),
        ),
        ("CUPROF_API", "some", &["filtered, runtime or all"], |c| {
            c.api == ApiFilter::Filtered
        }),
        ("CUPROF_WITH_STACK", "maybe", &["1/true/yes/on"], |c| {
            !c.with_stack
        }),
        ("CUPROF_QUIET", "2", &["default (off)"], |c| !c.quiet),
        ("CUPROF_TORCH_OPS", "sometimes", &["default (on)"], |c| {
            c.torch_ops
        }),
        ("CUPROF_RECORD_SHAPES", "2", &["default (on)"], |c| {
            c.record_shapes
        }),
        (
            "CUPROF_CAPTURE_RANGE",
            "nvtx",
            &["cudaProfilerApi or cuprof", "no capture range"],
            |c| c.capture == Capture::WholeRun,
        ),
        ("CUPROF_DELAY", "soon", &["seconds"], |c| {
            c.capture == Capture::WholeRun
        }),
        (
            "CUPROF_DURATION",
            "-3",
            &["non-negative number of seconds"],
            |c| c.capture == Capture::WholeRun,
        ),
        ("CUPROF_DURATION", "inf", &["seconds"], |c| {
            c.capture == Capture::WholeRun
        }),
        (
            "CUPROF_RANKS",
            "0,x",
            &["\"x\"", "0,3", "tracing is off"],
            |c| !c.enabled && !c.traces_this_process(),
        ),
        (
            "CUPROF_RANKS",
            "3-1",
            &["empty range", "tracing is off"],
            |c| !c.traces_this_process(),
        ),
        (
            "CUPROF_NAME",
            "a/b",
            &["no '/'", "default (profile_1700000000)"],
            |c| c.name == "profile_1700000000",
        ),
        (
            "CUPROF_MAX_MEM_EVENTS",
            "0",
            &["positive integer", "default (100000)"],
            |c| c.max_mem_events == 100_000,
        ),
        (
            "CUPROF_BUFFER_SIZE",
            "128M",
            &["1 MiB to 64 MiB", "default (2 MiB)"],
            |c| c.buffer_size == 2 << 20,
        ),
        ("CUPROF_BUFFER_SIZE", "lots", &["1 MiB to 64 MiB"], |c| {
            c.buffer_size == 2 << 20
        }),
        (
            "CUPROF_BUFFERS",
            "0",
            &["from 1 to 1024", "default (32)"],
            |c| c.buffers == 32,
        ),
        (
            "CUPROF_FLUSH_MS",
            "0",
            &["positive integer", "default (1000)"],
            |c| c.flush_interval == Duration::from_secs(1),
        ),
        (
            "CUPROF_GZIP_LEVEL",
            "10",
            &["from 0 to 9", "default (1)"],
            |c| c.gzip_level == 1,
        ),
        (
            "CUPROF_SHUTDOWN_WAIT",
            "0",
            &["positive number of seconds", "default (10)"],
            |c| c.shutdown_wait == Duration::from_secs(10),
        ),
        ("CUPROF_SHUTDOWN_WAIT", "later", &["seconds"], |c| {
            c.shutdown_wait == Duration::from_secs(10)
        }),
        ("RANK", "zero", &["RANK", "ignoring it"], |c| {
            c.rank.rank == 0
        }),
        ("WORLD_SIZE", "0", &["positive integer"], |c| {
            c.rank.world_size == 1
        }),
    ];
    for (var, value, needles, check) in cases {
        let (c, w) = on(&[(var, value)]);
        let mut needles = needles.to_vec();
        needles.push(var);
        let quoted = format!("{value:?}");
        needles.push(&quoted);
        one_warning(&w, &needles);
        assert!(check(&c), "{var}={value}: {c:#?}");
    }
}

#[test]
fn non_utf8_value_is_invalid() {
    use std::os::unix::ffi::OsStrExt;
    let bad = OsStr::from_bytes(b"\xff1");
    let (c, w) = Config::from_vars(
        [
            (OsStr::new("CUPROF_ENABLED"), OsStr::new("1")),
            (OsStr::new("CUPROF_WAIT"), bad),
        ],
        START,
    );
    one_warning(&w, &["CUPROF_WAIT", "UTF-8"]);
    assert!(c.enabled);
    // A path may be any bytes.
    let (c, w) = Config::from_vars(
        [
            (OsStr::new("CUPROF_ENABLED"), OsStr::new("1")),
            (OsStr::new("CUPROF_DIR"), bad),
        ],
        START,
    );
    assert!(w.is_empty());
    assert_eq!(c.dir.as_os_str(), bad);
}

#[test]
fn sizes() {
    assert_eq!(parse_size("8388608"), Some(8 << 20));
    assert_eq!(parse_size("8M"), Some(8 << 20));
    assert_eq!(parse_size("8mib"), Some(8 << 20));
    assert_eq!(parse_size("2048K"), Some(2 << 20));
    assert_eq!(parse_size("1048576B"), Some(1 << 20));
    assert_eq!(parse_size("M"), None);
    let (c, _) = on(&[("CUPROF_BUFFER_SIZE", "1048580")]);
    assert_eq!(c.buffer_size, 1048576, "rounded down to a multiple of 8");
}

#[test]
fn step_sources() {
    let sched = |w, u, a, r| Capture::Steps(Schedule::new(w, u, a).unwrap().with_repeat(r));
    // A schedule alone: steps from cuprof_step().
    let (c, w) = on(&[("CUPROF_ACTIVE", "3")]);
    assert!(w.is_empty());
    assert_eq!(c.capture, sched(0, 0, 3, 1));
    assert_eq!(c.step_nvtx, None);
    let (c, _) = on(&[("CUPROF_REPEAT", "0")]);
    assert_eq!(c.capture, sched(0, 0, 1, 0));
    // NVTX with the default schedule.
    let (c, w) = on(&[("CUPROF_STEP_NVTX", "train_step")]);
    assert!(w.is_empty());
    assert_eq!(c.capture, sched(0, 0, 1, 1));
    assert_eq!(c.step_nvtx.as_deref(), Some("train_step"));
    // Capture ranges.
    let (c, w) = on(&[("CUPROF_CAPTURE_RANGE", "cudaProfilerApi")]);
    assert!(w.is_empty());
    assert_eq!(
        c.capture,
        Capture::Range {
            source: RangeSource::CudaProfilerApi,
            repeat: 1
        }
    );
    let (c, w) = on(&[("CUPROF_CAPTURE_RANGE", "CUPROF"), ("CUPROF_REPEAT", "0")]);
    assert!(w.is_empty());
    assert_eq!(
        c.capture,
        Capture::Range {
            source: RangeSource::Cuprof,
            repeat: 0
        }
    );
    assert_eq!(
        c.trace_file_name(3),
        "profile_1700000000-rank0-cycle3.trace.json.gz"
    );
    // Time.
    let (c, w) = on(&[("CUPROF_DELAY", "2.5"), ("CUPROF_DURATION", "10")]);
    assert!(w.is_empty());
    assert_eq!(
        c.capture,
        Capture::Time {
            delay: Duration::from_millis(2500),
            duration: Some(Duration::from_secs(10))
        }
    );
    let (c, _) = on(&[("CUPROF_DELAY", "5"), ("CUPROF_DURATION", "0")]);
    assert_eq!(
        c.capture,
        Capture::Time {
            delay: Duration::from_secs(5),
            duration: None
        }
    );
    let (c, _) = on(&[("CUPROF_DURATION", "3")]);
    assert_eq!(
        c.capture,
        Capture::Time {
            delay: Duration::ZERO,
            duration: Some(Duration::from_secs(3))
        }
    );
    assert_eq!(
        c.trace_file_name(1),
        "profile_1700000000-rank0.trace.json.gz"
    );
}

#[test]
fn conflicting_step_sources() {
    let (c, w) = on(&[("CUPROF_STEP_NVTX", "step"), ("CUPROF_DELAY", "3")]);
    one_warning(
        &w,
        &["CUPROF_STEP_NVTX", "CUPROF_DELAY", "CUPROF_STEP_NVTX wins"],
    );
    assert!(matches!(c.capture, Capture::Steps(_)));
    let (c, w) = on(&[
        ("CUPROF_STEP_NVTX", "step"),
        ("CUPROF_CAPTURE_RANGE", "cuprof"),
    ]);
    one_warning(&w, &["CUPROF_CAPTURE_RANGE", "CUPROF_STEP_NVTX wins"]);
    assert_eq!(c.step_nvtx.as_deref(), Some("step"));
    let (c, w) = on(&[("CUPROF_CAPTURE_RANGE", "cuprof"), ("CUPROF_DURATION", "3")]);
    one_warning(&w, &["CUPROF_CAPTURE_RANGE wins", "CUPROF_DURATION"]);
    assert!(matches!(c.capture, Capture::Range { .. }));
    let (c, w) = on(&[
        ("CUPROF_CAPTURE_RANGE", "cuprof"),
        ("CUPROF_ACTIVE", "3"),
        ("CUPROF_REPEAT", "2"),
    ]);
    one_warning(&w, &["CUPROF_ACTIVE is ignored", "CUPROF_CAPTURE_RANGE"]);
    assert_eq!(
        c.capture,
        Capture::Range {
            source: RangeSource::Cuprof,
            repeat: 2
        }
    );
    let (c, w) = on(&[
        ("CUPROF_DELAY", "1"),
        ("CUPROF_DURATION", "2"),
        ("CUPROF_ACTIVE", "3"),
    ]);
    one_warning(
        &w,
        &[
            "CUPROF_DELAY/CUPROF_DURATION wins",
            "CUPROF_ACTIVE is ignored",
        ],
    );
    assert!(matches!(c.capture, Capture::Time { .. }));
}

#[test]
fn rank_detection() {
    let rank = |v: &[(&str, &str)]| on(v).0.rank;
    assert_eq!(
        rank(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "8"),
            ("SLURM_LOCALID", "1")
        ]),
        RankInfo {
            rank: 5,
            world_size: 8,
            local_rank: 1
        }
    );
    assert_eq!(
        rank(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0")
        ]),
        RankInfo {
            rank: 2,
            world_size: 4,
            local_rank: 0
        }
    );
    assert_eq!(
        rank(&[("PMI_RANK", "7"), ("PMI_SIZE", "9")]),
        RankInfo {
            rank: 7,
            world_size: 9,
            local_rank: 7
        }
    );
    // RANK wins over the launcher-specific ones.
    assert_eq!(
        rank(&[
            ("RANK", "1"),
            ("SLURM_PROCID", "5"),
            ("WORLD_SIZE", "2"),
            ("SLURM_NTASKS", "8")
        ]),
        RankInfo {
            rank: 1,
            world_size: 2,
            local_rank: 1
        }
    );
    // An invalid one is skipped (with a warning) for the next.
    let (c, w) = on(&[("RANK", "x"), ("SLURM_PROCID", "4")]);
    assert_eq!(c.rank.rank, 4);
    one_warning(&w, &["RANK=\"x\""]);
}

#[test]
fn rank_filter() {
    let (c, _) = on(&[("CUPROF_RANKS", "0,3"), ("RANK", "1")]);
    assert!(c.enabled && !c.traces_this_process());
    let (c, _) = on(&[("CUPROF_RANKS", "0-2, 5"), ("RANK", "2")]);
    assert_eq!(c.ranks, Some(vec![0, 1, 2, 5]));
    assert!(c.traces_this_process());
    assert_eq!(parse_ranks("3,1,1"), Ok(vec![1, 3]));
    assert!(parse_ranks("").is_err());
    assert!(parse_ranks("-1").is_err());
}

#[test]
fn activities_parse() {
    assert_eq!(
        Activities::parse("CPU"),
        Ok(Activities {
            cpu: true,
            gpu: false,
            mem: false
        })
    );
    assert_eq!(
        Activities::parse(" gpu  mem "),
        Ok(Activities {
            cpu: false,
            gpu: true,
            mem: true
        })
    );
    assert_eq!(
        Activities::parse("CUDA,cpu").map(|a| a.to_list()),
        Ok("CPU,GPU".to_owned())
    );
    assert!(Activities::parse("CPU;GPU").is_err());
}

/// The settings `settings.to_env()` gives back when parsed, with no warning other than the
/// step-source conflicts; and the configuration is the one the settings resolve to.
fn round_trip(settings: &Settings) {
    let env = settings.to_env();
    let map: std::collections::HashMap<&str, OsString> = env.iter().cloned().collect();
    assert_eq!(map.len(), env.len(), "each variable once: {env:?}");
    let lookup = |k: &str| map.get(k).cloned();
    let mut p = Parser {
        lookup: &lookup,
        warnings: Vec::new(),
    };
    let parsed = p.parse(START).expect("CUPROF_ENABLED=1");
    assert!(p.warnings.is_empty(), "{:#?}", p.warnings);
    assert_eq!(&parsed.settings, settings, "{env:?}");
    let (config, warnings) = Config::from_vars(env, START);
    let (want, conflicts) = settings.resolve(RankInfo::default(), START);
    assert_eq!(config, want);
    assert_eq!(warnings, conflicts);
}

#[test]
fn settings_round_trip_through_the_environment() {
    round_trip(&Settings::default());
    round_trip(&Settings {
        dir: Some("/data/prof".into()),
        name: Some("run1".into()),
        run_id: Some("slurm-7.1".into()),
        activities: Some(Activities {
            cpu: false,
            gpu: true,
            mem: true,
        }),
        api: Some(ApiFilter::Runtime),
        with_stack: Some(true),
        queued: Some(true),
        torch_ops: Some(false),
        record_shapes: Some(false),
        all_threads: Some(true),
        with_flops: Some(true),
        with_modules: Some(true),
        tensorboard: Some(true),
        quiet: Some(true),
        // Every step source at once: kept as said, resolved (with warnings) by the library.
        steps: StepSettings {
            wait: Some(1),
            warmup: Some(2),
            active: Some(3),
            repeat: Some(0),
            skip_first: Some(5),
            skip_first_wait: Some(true),
            step_nvtx: Some("train_*".into()),
            capture_range: Some(RangeSource::CudaProfilerApi),
            delay: Some(Duration::from_millis(1500)),
            duration: Some(Duration::ZERO),
            on_demand: Some(true),
        },
        ranks: Some(vec![0, 3, 4]),
        cupti_path: Some("/opt/cupti/libcupti.so.12".into()),
        max_mem_events: Some(77),
        dump_buffers: Some("/tmp/dump".into()),
        buffer_size: Some(4 << 20),
        buffers: Some(16),
        flush_ms: Some(250),
        gzip_level: Some(0),
        shutdown_wait: Some(Duration::from_millis(30_500)),
        report_file: Some("/tmp/report".into()),
    });
    round_trip(&Settings {
        steps: StepSettings {
            delay: Some(Duration::new(2, 123_456_789)),
            duration: Some(Duration::from_nanos(1)),
            ..StepSettings::default()
        },
        with_stack: Some(false),
        torch_ops: Some(true),
        ..Settings::default()
    });
}

#[test]
fn settings_to_env_spells_the_variables() {
    let s = Settings {
        activities: Some(Activities::parse("mem,gpu").unwrap()),
        steps: StepSettings {
            delay: Some(Duration::from_millis(2500)),
            capture_range: Some(RangeSource::Cuprof),
            ..StepSettings::default()
        },
        ranks: Some(vec![0, 1, 3]),
        ..Settings::default()
    };
    let env: Vec<(&str, String)> = s
        .to_env()
        .into_iter()
        .map(|(k, v)| (k, v.into_string().unwrap()))
        .collect();
    let get = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
    assert_eq!(get("CUPROF_ENABLED"), Some("1"));
    assert_eq!(get("CUPROF_ACTIVITIES"), Some("GPU,MEM"));
    assert_eq!(get("CUPROF_DELAY"), Some("2.5"));
    assert_eq!(get("CUPROF_CAPTURE_RANGE"), Some("cuprof"));
    assert_eq!(get("CUPROF_RANKS"), Some("0,1,3"));
    assert_eq!(env.len(), 5, "{env:?}");
}

#[test]
fn on_demand_wins_over_every_other_step_source() {
    let (c, w) = on(&[("CUPROF_ON_DEMAND", "1")]);
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(c.capture, Capture::OnDemand);
    assert!(c.capture.multi_cycle());
    let (c, w) = on(&[
        ("CUPROF_ON_DEMAND", "1"),
        ("CUPROF_STEP_NVTX", "step"),
        ("CUPROF_DELAY", "3"),
        ("CUPROF_ACTIVE", "2"),
    ]);
    assert_eq!(
        w,
        ["cuprof: CUPROF_STEP_NVTX, CUPROF_DELAY, CUPROF_ACTIVE ignored with CUPROF_ON_DEMAND=1 (each cuprof capture says what to record)"]
    );
    assert_eq!(c.capture, Capture::OnDemand);
    assert_eq!(c.step_nvtx, None);
    let (c, _) = on(&[("CUPROF_ON_DEMAND", "0"), ("CUPROF_ACTIVE", "2")]);
    assert!(matches!(c.capture, Capture::Steps(_)));
}
