//! `cuprof ARGS` for the figure tests, in-process: the arguments turned into the command's
//! options, the library's entry point called with buffers for stdout and stderr, and what the
//! binary would have given back (its stdout, its stderr with the error line of a failure, exit
//! status 0 or 1). The binary's own part (argument parsing, the exit status, the signals, a
//! closed stdout) is the CLI suite's, launcher/tests/cli, which spawns it.
//!
//! The arguments are those of launcher/src/analysis_args.rs, with the same defaults (the
//! library's constants, which clap shows too). One the figure tests do not use is a bug in
//! the test: it panics rather than guess what clap would make of it.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Output};

use cuprof_analysis::{
    compare, export, flame, merge, report, CompareOptions, ExportOptions, FlameOptions, Jobs,
    MergeOptions, ReportOptions,
};

/// `cuprof ARGS` as the binary gives it back, from a call of the library on this thread.
pub fn cuprof(args: &[&str]) -> Output {
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let code = match call(args, &mut stdout, &mut stderr) {
        Ok(()) => 0,
        Err(e) => {
            stderr.extend_from_slice(cuprof_analysis::io::console::error_line(&e).as_bytes());
            1
        }
    };
    Output {
        status: ExitStatus::from_raw(code << 8),
        stdout,
        stderr,
    }
}

fn call(args: &[&str], out: &mut Vec<u8>, err: &mut Vec<u8>) -> anyhow::Result<()> {
    let (command, rest) = args.split_first().expect("a command");
    let mut a = Args::parse(rest);
    match *command {
        "report" => {
            let mut o = ReportOptions::new(a.paths());
            o.out = a.value(&["-o", "--out"]).map(PathBuf::from);
            if let Some(top) = a.value(&["--top"]) {
                o.top = top.parse().expect("--top N");
            }
            o.html = a.value(&["--html"]).map(PathBuf::from);
            o.run = a.value(&["--run"]);
            o.bin = a
                .value(&["--bin"])
                .map(|b| b.parse().map_err(anyhow::Error::msg))
                .transpose()?;
            o.all_runs = a.switch("--all-runs");
            if let Some(by) = a.value(&["--module-by"]) {
                o.modules.by = by.parse().map_err(anyhow::Error::msg)?;
            }
            o.modules.depth = a
                .value(&["--module-depth"])
                .map(|d| d.parse().expect("--module-depth N"));
            o.jobs = a.jobs();
            a.done(command);
            report(&o, out, err)
        }
        "flame" => {
            let mut o = FlameOptions::new(a.paths());
            if let Some(svg) = a.value(&["-o", "--out"]) {
                o.out = svg.into();
            }
            o.cpu = a.switch("--cpu");
            o.memory = a.switch("--memory");
            assert!(
                !(o.memory && (o.cpu || a.has("--nvtx"))),
                "--memory with --cpu or --nvtx is clap's refusal: the CLI suite's"
            );
            o.folded = a.value(&["--folded"]).map(PathBuf::from);
            o.nvtx = a.switch("--nvtx");
            o.modules = a.switch("--modules");
            o.jobs = a.jobs();
            a.done(command);
            flame(&o, out, err)
        }
        "compare" => {
            let mut paths = a.paths();
            assert_eq!(paths.len(), 2, "compare A B");
            let b = paths.pop().unwrap();
            let mut o = CompareOptions::new(paths.pop().unwrap(), b);
            o.json = a.switch("--json");
            if let Some(top) = a.value(&["--top"]) {
                o.top = top.parse().expect("--top N");
            }
            o.all_runs = a.switch("--all-runs");
            o.jobs = a.jobs();
            a.done(command);
            compare(&o, out, err)
        }
        "merge" => {
            let mut o = MergeOptions::new(a.paths());
            if let Some(file) = a.value(&["-o", "--out"]) {
                o.out = file.into();
            }
            o.run = a.value(&["--run"]);
            o.jobs = a.jobs();
            a.done(command);
            merge(&o, out, err)
        }
        "export" => {
            let o = ExportOptions {
                paths: a.paths(),
                out: a.value(&["-o", "--out"]).expect("export -o DIR").into(),
                jobs: a.jobs(),
            };
            a.done(command);
            export(&o, out, err)
        }
        other => panic!("cuprof {other}: not an analysis command; spawn the binary (CLI suite)"),
    }
}

/// The arguments after the command: options (`-o X`, `--top N`, `--json`) and paths.
struct Args {
    paths: Vec<PathBuf>,
    /// Options not yet taken: (name, value if it takes one).
    options: Vec<(String, Option<String>)>,
}

/// The options that take a value.
const VALUED: [&str; 11] = [
    "-o",
    "--out",
    "--top",
    "--html",
    "--folded",
    "-j",
    "--jobs",
    "--run",
    "--bin",
    "--module-by",
    "--module-depth",
];

impl Args {
    fn parse(args: &[&str]) -> Args {
        let mut a = Args {
            paths: Vec::new(),
            options: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(&s) = it.next() {
            if VALUED.contains(&s) {
                let v = it.next().unwrap_or_else(|| panic!("{s} needs a value"));
                a.options.push((s.to_string(), Some(v.to_string())));
            } else if s.starts_with('-') {
                a.options.push((s.to_string(), None));
            } else {
                a.paths.push(s.into());
            }
        }
        a
    }

    fn paths(&mut self) -> Vec<PathBuf> {
        assert!(
            !self.paths.is_empty(),
            "at least one path (clap requires it)"
        );
        std::mem::take(&mut self.paths)
    }

    fn take(&mut self, names: &[&str]) -> Option<Option<String>> {
        let i = self
            .options
            .iter()
            .position(|(n, _)| names.contains(&&**n))?;
        let (_, v) = self.options.remove(i);
        assert!(
            !self.options.iter().any(|(n, _)| names.contains(&&**n)),
            "{names:?} given twice"
        );
        Some(v)
    }

    fn value(&mut self, names: &[&str]) -> Option<String> {
        self.take(names).map(|v| v.expect("a value"))
    }

    fn switch(&mut self, name: &str) -> bool {
        self.take(&[name]).is_some()
    }

    fn has(&self, name: &str) -> bool {
        self.options.iter().any(|(n, _)| n == name)
    }

    fn jobs(&mut self) -> Jobs {
        let jobs = self.value(&["-j", "--jobs"]).map(|n| {
            let n: u16 = n.parse().expect("-j N");
            assert!(n >= 1, "-j 0 is clap's refusal: the CLI suite's");
            n
        });
        Jobs { jobs }
    }

    /// Every option was one the command takes.
    fn done(self, command: &str) {
        assert!(
            self.options.is_empty(),
            "cuprof {command}: {:?} not taken in-process; add them here as \
             launcher/src/analysis_args.rs has them, or test them in the CLI suite",
            self.options
        );
    }
}
