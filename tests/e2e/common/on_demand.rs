//! Processes started on-demand (CUPROF_ON_DEMAND=1, what `cuprof run --on-demand` sets) for
//! the tests of `cuprof ps`, `capture` and `top`: each job has its own XDG_RUNTIME_DIR, so the
//! processes of one test are the only ones its `cuprof` commands see.

use super::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Processes of one job, started on-demand, each running `on_demand.py`.
pub struct Job {
    pub dir: TempDir,
    pub children: Vec<Child>,
}

impl Job {
    /// `n` ranks named `name`, each running `on_demand.py STOP LIMIT STEP_MS`.
    pub fn start(tag: &str, name: &str, n: u32, limit: u32, step_ms: u32) -> Job {
        Job::start_with(tag, name, n, limit, step_ms, &[])
    }

    /// [`Job::start`] with `env` added to each process's environment.
    pub fn start_with(
        tag: &str,
        name: &str,
        n: u32,
        limit: u32,
        step_ms: u32,
        env: &[(&str, &str)],
    ) -> Job {
        let mut job = Job::empty(tag);
        for rank in 0..n {
            let stop = job.stop_file();
            let args = [
                stop.to_str().unwrap(),
                &limit.to_string(),
                &step_ms.to_string(),
            ];
            job.spawn("on_demand.py", &args, name, (rank, n), env);
        }
        job
    }

    /// A job with no process yet, and its private runtime directory.
    pub fn empty(tag: &str) -> Job {
        let dir = TempDir::new(tag);
        std::fs::create_dir(dir.path().join("rt")).unwrap();
        std::fs::set_permissions(dir.path().join("rt"), PermissionsExt::from_mode(0o700)).unwrap();
        Job {
            dir,
            children: Vec::new(),
        }
    }

    /// Starts `script ARGS` on-demand as rank `rank.0` of `rank.1`, named `name`, with `env`.
    pub fn spawn(
        &mut self,
        script: &str,
        args: &[&str],
        name: &str,
        rank: (u32, u32),
        env: &[(&str, &str)],
    ) {
        self.spawn_under(&[], script, args, name, rank, env);
    }

    /// [`Job::spawn`] through `wrapper` ([`Run::python_under`]).
    pub fn spawn_under(
        &mut self,
        wrapper: &[&str],
        script: &str,
        args: &[&str],
        name: &str,
        rank: (u32, u32),
        env: &[(&str, &str)],
    ) {
        let mut run = Run::python_under(wrapper, script, args, &self.dir.path().join("out"))
            .env("CUPROF_ON_DEMAND", "1")
            .env("CUPROF_NAME", name)
            .env("XDG_RUNTIME_DIR", self.runtime_dir())
            .env("RANK", rank.0.to_string())
            .env("WORLD_SIZE", rank.1.to_string());
        for (k, v) in env {
            run = run.env(k, v);
        }
        run.cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        self.children.push(run.cmd.spawn().expect("python3 runs"));
    }

    pub fn runtime_dir(&self) -> PathBuf {
        self.dir.path().join("rt")
    }

    pub fn socket_dir(&self) -> PathBuf {
        self.runtime_dir().join("cuprof")
    }

    pub fn stop_file(&self) -> PathBuf {
        self.dir.path().join("stop")
    }

    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Waits (bounded) until every process has its control socket.
    pub fn wait_ready(&self) {
        for _ in 0..600 {
            if self
                .pids()
                .iter()
                .all(|p| self.socket_dir().join(format!("{p}.sock")).exists())
            {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the processes never opened their control sockets");
    }

    /// `cuprof ARGS` with this job's runtime directory.
    pub fn cuprof(&self, args: &[&str]) -> Output {
        let out = Command::new(cuprof_bin())
            .args(args)
            .env("XDG_RUNTIME_DIR", self.runtime_dir())
            .output()
            .unwrap();
        if std::env::var_os("CUPROF_TEST_VERBOSE").is_some() {
            eprintln!("cuprof {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        out
    }

    pub fn ok(&self, args: &[&str]) -> (String, String) {
        let out = self.cuprof(args);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "cuprof {args:?}: {stderr}");
        (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
    }

    /// `cuprof capture --pid PID --steps N --dir CAPS`, which must write one file.
    pub fn capture_steps(&self, pid: &str, n: &str, caps: &Path) {
        self.capture_steps_with(pid, n, caps, &[]);
    }

    /// [`Job::capture_steps`] with the capture options `options`.
    pub fn capture_steps_with(&self, pid: &str, n: &str, caps: &Path, options: &[&str]) {
        let dir = caps.to_str().unwrap();
        let mut args = vec![
            "capture",
            "--pid",
            pid,
            "--steps",
            n,
            "--dir",
            dir,
            "--no-report",
        ];
        args.extend_from_slice(options);
        let (_, err) = self.ok(&args);
        assert_eq!(wrote_lines(&err), 1, "{err}");
    }

    /// `cuprof ARGS` run as `nobody` fails with one line: another user cannot even reach the
    /// socket directory.
    pub fn refused_to_nobody(&self, args: &[&str]) {
        let nobody = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(cuprof_bin())
            .args(args)
            .env("XDG_RUNTIME_DIR", self.runtime_dir())
            .output()
            .unwrap();
        assert!(!nobody.status.success());
        let err = String::from_utf8_lossy(&nobody.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("Permission denied"), "{err}");
    }

    /// Stops the processes and returns each one's printed result, checked unharmed, and its
    /// stderr.
    pub fn finish(&mut self) -> Vec<(Value, String)> {
        std::fs::write(self.stop_file(), "").unwrap();
        let mut results = Vec::new();
        for c in std::mem::take(&mut self.children) {
            let out = c.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{stderr}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            let v: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
            results.push((v, stderr.into_owned()));
        }
        for (v, _) in &results {
            let n = v["steps"].as_u64().unwrap();
            assert_eq!(
                v["sum"].as_u64().unwrap(),
                (0..n).map(|i| i * i).sum::<u64>()
            );
        }
        results
    }
}

impl Drop for Job {
    /// A test that failed midway leaves no process behind.
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `cuprof ps`'s rows: pid -> (rank, name, state, files).
pub fn ps_rows(stdout: &str) -> BTreeMap<u32, (String, String, String, String)> {
    let mut lines = stdout.lines();
    assert_eq!(lines.next(), Some("PID\tRANK\tNAME\tSTATE\tSTEPS\tFILES"));
    lines
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "{l}");
            (
                f[0].parse().unwrap(),
                (f[1].into(), f[2].into(), f[3].into(), f[5].into()),
            )
        })
        .collect()
}

pub fn wrote_lines(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.starts_with("cuprof: wrote "))
        .count()
}

/// Sends `request` to the socket at `socket` as uid 65534 (`nobody`), as if the socket were
/// reachable: opened as root through an O_PATH descriptor, then connected after the uid
/// change. Returns the reply.
pub fn as_nobody_through(socket: &Path, request: &str) -> String {
    let other = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(concat!(
            "import os, socket, sys\n",
            "fd = os.open(sys.argv[1], os.O_PATH)\n",
            "os.setgroups([]); os.setgid(65534); os.setuid(65534)\n",
            "s = socket.socket(socket.AF_UNIX)\n",
            "s.connect(f'/proc/self/fd/{fd}')\n",
            // The refusal may come (and the connection close) before the request is sent.
            "try: s.sendall(sys.argv[2].encode())\n",
            "except BrokenPipeError: pass\n",
            "print(s.recv(9000).decode(), end='')\n",
        ))
        .arg(socket)
        .arg(request)
        .output()
        .unwrap();
    assert!(
        other.status.success(),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    String::from_utf8_lossy(&other.stdout).into_owned()
}
