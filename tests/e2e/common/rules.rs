//! The Trace Event Format rules Perfetto applies when it imports a JSON trace, checked on a
//! cuprof trace's text (one event per line, times as written): what breaks them is silently
//! dropped or misdrawn by the viewer, never reported.
//!
//! - complete events (`X`) have `dur >= 0`, and two of them on one track (`pid`, `tid`) either
//!   nest or are disjoint: a partial overlap makes Perfetto drop the second one;
//! - of two complete events that start at the same ns on one track, the longer is written
//!   first: Perfetto nests such a tie in file order, so the other order puts the parent inside
//!   its child (and drops it when it ends later);
//! - flows are bound: every id has exactly one `s` and one `f`, with the same `cat` and `name`,
//!   the `s` no later than the `f`, and each end inside a complete event on its own track (the
//!   `s` binds to the enclosing slice, the `f` with `bp: "e"` too);
//! - metadata is present: every process with events is named, and every track with complete
//!   events is named.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// A track: `pid` and `tid` as JSON text.
type Track = (String, String);
/// A complete event: start and end (ns), name.
type Slice = (i64, i64, String);
/// One end of a flow: phase, track, time (ns), the event.
type FlowEnd = (String, Track, i64, Value);

/// Nanoseconds of a `ts`/`dur` as written (`123.456` µs), exactly.
fn ns(text: &str) -> i64 {
    let (neg, t) = match text.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, text),
    };
    let (whole, frac) = t.split_once('.').unwrap_or((t, "0"));
    let frac = format!("{frac:0<3}");
    let v = whole.parse::<i64>().unwrap() * 1000 + frac[..3].parse::<i64>().unwrap();
    if neg {
        -v
    } else {
        v
    }
}

fn raw_number(line: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\": ");
    let i = line.find(&pat)? + pat.len();
    Some(
        line[i..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
            .collect(),
    )
}

/// A track: `pid`/`tid` as JSON text (numbers, or strings for Kineto's named rows).
fn track(e: &Value) -> Track {
    (e["pid"].to_string(), e["tid"].to_string())
}

/// Panics naming the first rule `text` (a cuprof trace, as read from disk) breaks.
pub fn check_perfetto_rules(text: &str) {
    let start =
        text.find("\"traceEvents\": [\n").expect("traceEvents") + "\"traceEvents\": [\n".len();
    let end = text.rfind("\n]").expect("end of traceEvents");
    let mut slices: BTreeMap<Track, Vec<Slice>> = BTreeMap::new();
    let mut flows: BTreeMap<String, Vec<FlowEnd>> = BTreeMap::new();
    let mut named_processes = BTreeSet::new();
    let mut named_threads = BTreeSet::new();
    let mut processes = BTreeSet::new();
    for line in text[start..end].lines() {
        let line = line.strip_suffix(',').unwrap_or(line);
        let e: Value = serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {line}"));
        let ph = e["ph"].as_str().unwrap_or_default();
        if ph == "M" {
            match e["name"].as_str() {
                Some("process_name") => {
                    named_processes.insert(e["pid"].to_string());
                }
                Some("thread_name") => {
                    named_threads.insert(track(&e));
                }
                _ => {}
            }
            continue;
        }
        if e["pid"] != "" {
            processes.insert(e["pid"].to_string());
        }
        let ts = raw_number(line, "ts").map(|t| ns(&t));
        match ph {
            "X" => {
                let dur = ns(&raw_number(line, "dur").expect("X events have dur"));
                assert!(dur >= 0, "negative dur: {line}");
                let ts = ts.expect("X events have ts");
                let name = e["name"].as_str().unwrap_or_default().to_string();
                // Written in file order: a later slice at the same start must not be longer.
                if let Some(&(_, earlier_end, ref earlier)) = slices
                    .get(&track(&e))
                    .and_then(|v| v.iter().rev().find(|&&(s, _, _)| s == ts))
                {
                    assert!(
                        ts + dur <= earlier_end,
                        "on track {:?} at {ts} ns, {name:?} (ends {}) is written after \
                         {earlier:?} (ends {earlier_end}), which it encloses",
                        track(&e),
                        ts + dur
                    );
                }
                slices
                    .entry(track(&e))
                    .or_default()
                    .push((ts, ts + dur, name));
            }
            "s" | "f" => {
                let id = e["id"].to_string();
                flows.entry(id).or_default().push((
                    ph.to_string(),
                    track(&e),
                    ts.expect("flows have ts"),
                    e,
                ));
            }
            _ => {}
        }
    }

    for (t, evs) in slices.iter_mut() {
        evs.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
        // The slices open at each point, outermost first: a slice starting inside the last
        // open one must end inside it.
        let mut open: Vec<&Slice> = Vec::new();
        for ev in evs.iter() {
            while open.last().is_some_and(|o| o.1 <= ev.0) {
                open.pop();
            }
            if let Some(o) = open.last() {
                assert!(
                    ev.1 <= o.1,
                    "on track {t:?}: {o:?} and {ev:?} partly overlap"
                );
            }
            open.push(ev);
        }
    }
    let enclosed = |t: &Track, ts: i64| -> bool {
        slices
            .get(t)
            .is_some_and(|evs| evs.iter().any(|&(s, e, _)| s <= ts && ts <= e))
    };
    for (id, ends) in &flows {
        let phs: Vec<&str> = ends.iter().map(|(ph, ..)| ph.as_str()).collect();
        assert_eq!(phs.len(), 2, "flow {id}: ends {phs:?}");
        let s = ends.iter().find(|(ph, ..)| ph == "s");
        let f = ends.iter().find(|(ph, ..)| ph == "f");
        let (Some(s), Some(f)) = (s, f) else {
            panic!("flow {id}: ends {phs:?}, not one s and one f");
        };
        assert_eq!(
            (&s.3["cat"], &s.3["name"]),
            (&f.3["cat"], &f.3["name"]),
            "flow {id}"
        );
        assert!(s.2 <= f.2, "flow {id} ends before it starts");
        assert_eq!(
            f.3["bp"], "e",
            "flow {id}: its f binds to the enclosing slice"
        );
        assert!(
            enclosed(&s.1, s.2),
            "flow {id}: no slice around its s on {:?}",
            s.1
        );
        assert!(
            enclosed(&f.1, f.2),
            "flow {id}: no slice around its f on {:?}",
            f.1
        );
    }
    for p in &processes {
        assert!(
            named_processes.contains(p),
            "process {p} has no process_name"
        );
    }
    for t in slices.keys() {
        assert!(named_threads.contains(t), "track {t:?} has no thread_name");
    }
}
