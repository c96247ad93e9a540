//! What the user sees of a failing or piped command: one-line errors, and a stdout closed
//! early (`| head`) that ends the printing quietly.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::analysis_support::*;

#[test]
fn report_into_a_closed_pipe_exits_quietly_and_still_writes_its_files() {
    let dir = tempdir("out-pipe");
    let t = dir.join("t.trace.json.gz");
    sample().write_gz(&t);
    let rd = dir.join("rep");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuprof"))
        .args(["report", t.to_str().unwrap(), "-o", rd.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -0`: the reader goes away before anything is printed.
    drop(child.stdout.take());
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err, "");
    assert_eq!(listing(&rd), ["report.html", "report.md", "summary.json"]);

    // `| head -1` through a shell, as a user types it.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} report {} | head -1",
            env!("CARGO_BIN_EXE_cuprof"),
            t.display()
        ))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1);
    assert_eq!(stderr_of(&o), "");
}

#[test]
fn errors_are_one_line() {
    let dir = tempdir("out-errors");
    let missing = dir.join("missing.trace.json.gz");
    let bad = dir.join("bad.trace.json");
    std::fs::write(&bad, "not json").unwrap();
    let table: [(&[&str], &str); 4] = [
        (&["report", missing.to_str().unwrap()], "cannot read it"),
        (&["report", bad.to_str().unwrap()], "not a Chrome trace"),
        (&["flame", bad.to_str().unwrap()], "not a Chrome trace"),
        (&["repair", missing.to_str().unwrap()], "No such file"),
    ];
    for (args, says) in table {
        let o = cuprof(args);
        let err = stderr_of(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("cuprof: "), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
