//! `cuprof repair`: streams through the tolerant reader, writes a new file beside the input,
//! replaces the input only with `--in-place` and only with a file holding at least as many
//! events, and never reports success with fewer events than it read.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::analysis_support::*;
use flate2::write::GzEncoder;
use flate2::Compression;
use serde_json::Value;

fn gz(text: &str) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::fast());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

fn read_any(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        read_gz_json(path)
    } else {
        serde_json::from_slice(&bytes).unwrap()
    }
}

/// A trace of `n` kernels as torch.profiler writes it: two-space indentation, every member of
/// an event on its own line, `}, {` between events.
fn kineto(n: usize) -> (String, Vec<usize>) {
    let mut s = String::from(
        "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {\n      \"id\": 0, \"name\": \"NVIDIA H100\"\n    }\n  ],\n  \"traceEvents\": [\n",
    );
    let mut ends = Vec::new();
    for i in 0..n {
        if i > 0 {
            s.push_str(",\n");
        }
        s.push_str(&format!(
            "  {{\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"void gemm<{i}>\", \"pid\": 0, \"tid\": 7,\n    \"ts\": {}.500, \"dur\": 2.000,\n    \"args\": {{\n      \"device\": 0, \"stream\": 7, \"correlation\": {i}\n    }}\n  }}",
            1000 + i * 10
        ));
        ends.push(s.len());
    }
    s.push_str("\n  ],\n  \"traceName\": \"kineto.pt.trace.json\"\n}\n");
    (s, ends)
}

/// What the input is, and what repair must make of it.
struct Case {
    name: &'static str,
    file: &'static str,
    bytes: Vec<u8>,
    /// `Some(n)`: success, the new file holds exactly n events; `None`: refused.
    events: Option<usize>,
    /// Words the one line on stderr holds.
    says: &'static str,
}

fn cases() -> Vec<Case> {
    let t = sample();
    let n = t.events.len();
    let full = t.json();

    // One bare NaN in the second event of an otherwise complete trace.
    let second = full.find(",\n{").unwrap() + 2;
    let ts = second + full[second..].find("\"ts\": ").unwrap() + 6;
    let ts_end = ts + full[ts..].find(',').unwrap();
    let nan = format!("{}NaN{}", &full[..ts], &full[ts_end..]);

    let (k, ends) = kineto(200);
    let cut = k.len() * 6 / 10;
    let kept = ends.iter().filter(|&&e| e <= cut).count();

    let mut gz_nul = gz(&full);
    gz_nul.extend_from_slice(&[0; 4096]);
    let mut plain_nul = full.clone().into_bytes();
    plain_nul.extend_from_slice(&[0; 4096]);

    vec![
        Case {
            name: "a bare NaN near the start (plain)",
            file: "nan.trace.json",
            bytes: nan.clone().into_bytes(),
            events: None,
            says: "not valid JSON",
        },
        Case {
            name: "a bare NaN near the start (gzip)",
            file: "nan.trace.json.gz",
            bytes: gz(&nan),
            events: None,
            says: "not valid JSON",
        },
        Case {
            name: "Kineto's indented layout cut at 60%",
            file: "kineto.pt.trace.json",
            bytes: k.as_bytes()[..cut].to_vec(),
            events: Some(kept),
            says: "repaired",
        },
        Case {
            name: "Kineto's indented layout cut at 60% (gzip)",
            file: "kineto.pt.trace.json.gz",
            bytes: {
                // A sync-flushed stream of the first 60% of the text, no trailer.
                let mut z = flate2::Compress::new(Compression::fast(), false);
                let mut out = Vec::with_capacity(cut + 1024);
                z.compress_vec(&k.as_bytes()[..cut], &mut out, flate2::FlushCompress::Sync)
                    .unwrap();
                let mut file = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
                file.extend_from_slice(&out);
                file
            },
            events: Some(kept),
            says: "repaired",
        },
        Case {
            name: "NUL padding after a complete gzip stream",
            file: "nul.trace.json.gz",
            bytes: gz_nul,
            events: Some(n),
            says: "repaired",
        },
        Case {
            name: "NUL padding after complete plain JSON",
            file: "nul.trace.json",
            bytes: plain_nul,
            events: Some(n),
            says: "4096 bytes after the end of the trace dropped",
        },
        Case {
            name: "not a trace",
            file: "x.json",
            bytes: b"{\"a\": 1}".to_vec(),
            events: None,
            says: "no `traceEvents` array",
        },
        Case {
            name: "cut inside the header",
            file: "h.trace.json",
            bytes: full.as_bytes()[..40].to_vec(),
            events: None,
            says: "ends before `traceEvents` starts",
        },
        Case {
            name: "empty",
            file: "e.trace.json",
            bytes: Vec::new(),
            events: None,
            says: "the file is empty",
        },
    ]
}

#[test]
fn bad_inputs_are_refused_or_keep_every_event() {
    let dir = tempdir("repair-table");
    for c in cases() {
        let d = dir.join(c.name.replace(' ', "_"));
        std::fs::create_dir_all(&d).unwrap();
        let input = d.join(c.file);
        std::fs::write(&input, &c.bytes).unwrap();
        let o = cuprof(&["repair", input.to_str().unwrap()]);
        let err = stderr_of(&o);
        assert_eq!(err.lines().count(), 1, "{}: {err}", c.name);
        assert!(err.contains(c.says), "{}: {err}", c.name);
        assert_eq!(
            std::fs::read(&input).unwrap(),
            c.bytes,
            "{}: input changed",
            c.name
        );
        // TensorBoard's names keep `.pt.trace.json` last, so the plugin still lists a repair.
        let out = d.join(if c.file.contains(".pt.trace.json") {
            c.file
                .replacen(".pt.trace.json", ".repaired.pt.trace.json", 1)
        } else {
            c.file
                .replacen(".trace.json", ".repaired.trace.json", 1)
                .replacen("x.json", "x.repaired.json", 1)
        });
        match c.events {
            None => {
                assert_eq!(o.status.code(), Some(1), "{}: {err}", c.name);
                assert!(err.starts_with("cuprof: "), "{}: {err}", c.name);
                assert_eq!(listing(&d), [c.file], "{}", c.name);
            }
            Some(n) => {
                assert!(o.status.success(), "{}: {err}", c.name);
                let v = read_any(&out);
                assert_eq!(v["traceEvents"].as_array().unwrap().len(), n, "{}", c.name);
                let mut want = vec![
                    c.file.to_string(),
                    out.file_name().unwrap().to_string_lossy().into_owned(),
                ];
                want.sort();
                assert_eq!(listing(&d), want, "{}", c.name);
            }
        }
    }
}

#[test]
fn padding_after_a_complete_trace_keeps_the_footer() {
    let dir = tempdir("repair-nul");
    let t = sample();
    let mut bytes = gz(&t.json());
    bytes.extend_from_slice(&[0; 4096]);
    let input = dir.join("run-rank0.trace.json.gz");
    std::fs::write(&input, &bytes).unwrap();
    cuprof_ok(&["repair", input.to_str().unwrap()]);
    let v = read_gz_json(&dir.join("run-rank0.repaired.trace.json.gz"));
    let want: Value = serde_json::from_str(&t.json()).unwrap();
    assert_eq!(v, want);
    assert_eq!(v["cuprofStats"]["events"], 40);
    assert_eq!(v["cuprofStats"]["complete"], true);
}

#[test]
fn a_cut_trace_goes_to_a_new_file_and_the_input_stays() {
    let dir = tempdir("repair-cut");
    let t = sample();
    let input = dir.join("run-rank0.trace.json.gz");
    t.write_cut(&input, 10);
    let before = std::fs::read(&input).unwrap();
    // A user's file with the name the old repair used for its temporary file.
    let precious = dir.join("run-rank0.trace.json.repair-tmp");
    std::fs::write(&precious, "precious").unwrap();
    let o = cuprof(&["repair", input.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let out = dir.join("run-rank0.repaired.trace.json.gz");
    assert_eq!(
        stderr_of(&o),
        format!(
            "{}: repaired: 10 events kept, the trace was cut between events; {} is unchanged\n",
            out.display(),
            input.display()
        )
    );
    assert_eq!(std::fs::read(&input).unwrap(), before);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "precious");
    let v = read_gz_json(&out);
    assert_eq!(v["traceEvents"].as_array().unwrap().len(), 10);
    assert_eq!(v["cuprofStats"]["repaired"], true);
    assert_eq!(v["cuprof"]["hostname"], "node0");
    assert_eq!(
        listing(&dir),
        [
            "run-rank0.repaired.trace.json.gz",
            "run-rank0.trace.json.gz",
            "run-rank0.trace.json.repair-tmp"
        ]
    );
    // Again: the default output exists now, and is not overwritten.
    let kept = std::fs::read(&out).unwrap();
    let o = cuprof(&["repair", input.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr_of(&o),
        format!(
            "cuprof: {}: exists already; pass -o OUT to choose where the repaired trace goes\n",
            out.display()
        )
    );
    assert_eq!(std::fs::read(&out).unwrap(), kept);
    // -o naming the input is refused.
    let o = cuprof(&[
        "repair",
        input.to_str().unwrap(),
        "-o",
        input.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr_of(&o).contains("pass --in-place"),
        "{}",
        stderr_of(&o)
    );
    assert_eq!(std::fs::read(&input).unwrap(), before);
    // -o to plain JSON.
    let plain = dir.join("plain.json");
    cuprof_ok(&[
        "repair",
        input.to_str().unwrap(),
        "-o",
        plain.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_slice(&std::fs::read(&plain).unwrap()).unwrap();
    assert_eq!(v["traceEvents"].as_array().unwrap().len(), 10);
}

#[test]
fn a_complete_trace_is_left_alone() {
    let dir = tempdir("repair-complete");
    let input = dir.join("t.trace.json.gz");
    sample().write_gz(&input);
    let before = std::fs::read(&input).unwrap();
    for extra in [&[][..], &["--in-place"][..]] {
        let mut args = vec!["repair", input.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = cuprof(&args);
        assert!(o.status.success());
        assert_eq!(
            stderr_of(&o),
            format!(
                "{}: already complete ({} events); nothing written\n",
                input.display(),
                sample().events.len()
            )
        );
        assert_eq!(std::fs::read(&input).unwrap(), before);
        assert_eq!(listing(&dir), ["t.trace.json.gz"]);
    }
}

#[test]
fn in_place_replaces_only_a_plain_writable_file() {
    let dir = tempdir("repair-inplace");
    let t = sample();
    let input = dir.join("t.trace.json.gz");
    t.write_cut(&input, 12);
    std::fs::set_permissions(&input, std::fs::Permissions::from_mode(0o640)).unwrap();
    let o = cuprof(&["repair", "--in-place", input.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert_eq!(
        stderr_of(&o),
        format!(
            "{}: repaired: 12 events kept, the trace was cut between events\n",
            input.display()
        )
    );
    assert_eq!(
        read_gz_json(&input)["traceEvents"]
            .as_array()
            .unwrap()
            .len(),
        12
    );
    let mode = std::fs::metadata(&input).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    assert_eq!(listing(&dir), ["t.trace.json.gz"]);

    // A symlink: refused, the link and its target untouched.
    let target = dir.join("real.trace.json.gz");
    t.write_cut(&target, 5);
    let before = std::fs::read(&target).unwrap();
    let link = dir.join("link.trace.json.gz");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = cuprof(&["repair", "--in-place", link.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr_of(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("cuprof: {}: is a symlink", link.display())),
        "{err}"
    );
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), before);

    // Read-only: refused, permissions and bytes unchanged.
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = cuprof(&["repair", "--in-place", target.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr_of(&o);
    assert!(
        err.starts_with(&format!("cuprof: {}: is read-only", target.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o444
    );
    assert_eq!(std::fs::read(&target).unwrap(), before);
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();

    // -o and --in-place together make no sense.
    let o = cuprof(&[
        "repair",
        "--in-place",
        "-o",
        "x.json",
        target.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}
