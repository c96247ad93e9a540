//! One rank's events copied into the merged trace: each event's pid, ts, id and process
//! metadata moved into the rank's share of the merged timeline and id spaces, every other byte
//! copied as it stands.

use std::collections::BTreeSet;
use std::io::Write;
use std::ops::{ControlFlow, Range};
use std::path::Path;

use anyhow::Result;
use cuprof_core::reader::{for_each_member, Detail, Event, Id, TraceReader};

use crate::escape::terminal::Shown;

/// pid offset per rank.
pub const PID_STRIDE: i64 = 10_000_000;
/// Flow id offset per rank.
pub const ID_STRIDE: i64 = 1 << 32;

/// `value` moved into rank `rank`'s share of a merged id space (`rank * stride + value`),
/// saturating: a crafted rank or id near the 64-bit limit must not wrap onto another rank's.
fn offset(rank: i64, stride: i64, value: i64) -> i64 {
    rank.saturating_mul(stride).saturating_add(value)
}

/// `ns` as microseconds with three decimals (`-1.500`), exact, appended to `out`.
fn write_us(out: &mut Vec<u8>, ints: &mut itoa::Buffer, ns: i64) {
    if ns < 0 {
        out.push(b'-');
    }
    let a = ns.unsigned_abs();
    out.extend_from_slice(ints.format(a / 1000).as_bytes());
    let frac = a % 1000;
    out.extend_from_slice(&[
        b'.',
        b'0' + (frac / 100) as u8,
        b'0' + (frac / 10 % 10) as u8,
        b'0' + (frac % 10) as u8,
    ]);
}

pub(super) fn json_str(s: &str) -> String {
    crate::escape::json::to_string(s).expect("strings serialize")
}

/// A member whose value merge rewrites.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Rewritten {
    Pid,
    Ts,
    Id,
    /// A process name's or sort index's `args`.
    Args,
}

impl Rewritten {
    const ALL: [Rewritten; 4] = [
        Rewritten::Pid,
        Rewritten::Ts,
        Rewritten::Id,
        Rewritten::Args,
    ];

    /// Whether `e` gets a new value for this member: an integer `pid`, a `ts` outside metadata,
    /// any `id`, and the `args` of a process name or sort index.
    fn changes(self, e: &Event<'_>) -> bool {
        match self {
            Rewritten::Pid => matches!(e.pid, Some(Id::Int(_))),
            Rewritten::Ts => e.ts.is_some() && e.ph != "M",
            Rewritten::Id => e.id.is_some(),
            Rewritten::Args => {
                matches!(metadata_name(e), "process_name" | "process_sort_index")
            }
        }
    }

    /// The member a key (quotes included) names.
    fn of_key(key: &[u8]) -> Option<Self> {
        match key {
            b"\"pid\"" => Some(Rewritten::Pid),
            b"\"ts\"" => Some(Rewritten::Ts),
            b"\"id\"" => Some(Rewritten::Id),
            b"\"args\"" => Some(Rewritten::Args),
            _ => None,
        }
    }
}

/// One rank's rewrite of its events, and the processes it has seen.
struct RankRewrite {
    rank: i64,
    shift: i64,
    /// Processes with a `process_name` / `process_sort_index` of their own, and all seen.
    named: BTreeSet<i64>,
    sorted: BTreeSet<i64>,
    seen: BTreeSet<i64>,
    ints: itoa::Buffer,
}

impl RankRewrite {
    /// How many of `e`'s members get a new value (each appears once: the lean parse refuses a
    /// key it decodes twice).
    fn count(e: &Event<'_>) -> usize {
        Rewritten::ALL.iter().filter(|m| m.changes(e)).count()
    }

    /// Appends the new value of `e`'s `member` to `value`; nothing when it stays as it is
    /// ([`Rewritten::changes`]).
    fn value(&mut self, e: &Event<'_>, member: Rewritten, value: &mut Vec<u8>) {
        if !member.changes(e) {
            return;
        }
        let rank = self.rank;
        let meta_name = metadata_name(e);
        match (member, &e.pid, e.ts, &e.id) {
            (Rewritten::Pid, Some(Id::Int(p)), ..) => {
                self.seen.insert(*p);
                match meta_name {
                    "process_name" => self.named.insert(*p),
                    "process_sort_index" => self.sorted.insert(*p),
                    _ => false,
                };
                value.extend_from_slice(self.ints.format(offset(rank, PID_STRIDE, *p)).as_bytes());
            }
            (Rewritten::Ts, _, Some(ts), _) => {
                write_us(value, &mut self.ints, ts.saturating_add(self.shift));
            }
            (Rewritten::Id, _, _, Some(Id::Int(id))) => {
                value.extend_from_slice(self.ints.format(offset(rank, ID_STRIDE, *id)).as_bytes())
            }
            (Rewritten::Id, _, _, Some(Id::Str(s))) => {
                value.extend_from_slice(json_str(&format!("r{rank}:{s}")).as_bytes())
            }
            (Rewritten::Args, ..) if meta_name == "process_name" => {
                let n = e.args.name.as_deref().unwrap_or("");
                let named = json_str(&format!("rank {rank} {n}"));
                value.extend_from_slice(format!("{{\"name\": {named}}}").as_bytes());
            }
            (Rewritten::Args, ..) => {
                let s = e.args.sort_index.unwrap_or(0);
                let index = offset(rank, PID_STRIDE, s);
                value.extend_from_slice(format!("{{\"sort_index\": {index}}}").as_bytes());
            }
            // `changes` let through only the cases above.
            _ => {}
        }
    }

    /// Writes `e` with its rewritten members to `out`; false when its text is not an object
    /// (a corrupt file).
    fn write(
        &mut self,
        e: &Event<'_>,
        value: &mut Vec<u8>,
        out: &mut dyn Write,
    ) -> std::io::Result<bool> {
        let mut copied = 0;
        let mut written = Ok(());
        let mut put = |this: &mut Self, member: Rewritten, span: Range<usize>| {
            value.clear();
            this.value(e, member, value);
            if !value.is_empty() && written.is_ok() {
                written = out
                    .write_all(&e.raw[copied..span.start])
                    .and_then(|_| out.write_all(value));
                copied = span.end;
                true
            } else {
                false
            }
        };
        let well_formed = match &e.spans {
            // The reader found where the members stand: no second scan of the event.
            Some(spans) => {
                let mut at = [
                    (spans.pid.clone(), Rewritten::Pid),
                    (spans.ts.clone(), Rewritten::Ts),
                    (spans.id.clone(), Rewritten::Id),
                    (spans.args.clone(), Rewritten::Args),
                ];
                at.sort_unstable_by_key(|(span, _)| span.as_ref().map_or(0, |s| s.start));
                for (span, member) in at {
                    if let Some(span) = span {
                        put(self, member, span);
                    }
                }
                true
            }
            None => {
                // Once the members to rewrite are done, the rest (`args`, the longest member)
                // is copied without a scan.
                let mut to_rewrite = Self::count(e);
                for_each_member(e.raw, |key, span| {
                    if let Some(member) = Rewritten::of_key(&e.raw[key]) {
                        if put(self, member, span) {
                            to_rewrite = to_rewrite.saturating_sub(1);
                        }
                    }
                    if to_rewrite == 0 {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                })
            }
        };
        written?;
        if well_formed {
            out.write_all(&e.raw[copied..])?;
        }
        Ok(well_formed)
    }
}

/// A metadata event's name (`process_name`), or "" for other events.
fn metadata_name<'e>(e: &'e Event<'_>) -> &'e str {
    if e.ph == "M" {
        e.name.as_ref()
    } else {
        ""
    }
}

/// One rank's events being copied (the whole file, or one chunk of it): the rewrite, and what
/// the copy found.
pub(super) struct RankCopy {
    rewrite: RankRewrite,
    /// Replacement values are formatted here, and the event's other bytes go out as they
    /// are: no allocation per event (one each was a tenth of merge's time).
    value: Vec<u8>,
    /// An event that is not plain ASCII, rewritten before it is made UTF-8 and escaped.
    scratch: Vec<u8>,
    /// Events copied with U+FFFD in place of bytes that were not UTF-8.
    pub not_utf8: u64,
    /// Anything was written (the next event is preceded by `,\n`).
    pub wrote: bool,
}

impl RankCopy {
    pub fn new(rank: i64, shift: i64) -> Self {
        RankCopy {
            rewrite: RankRewrite {
                rank,
                shift,
                named: BTreeSet::new(),
                sorted: BTreeSet::new(),
                seen: BTreeSet::new(),
                ints: itoa::Buffer::new(),
            },
            value: Vec::with_capacity(64),
            scratch: Vec::new(),
            not_utf8: 0,
            wrote: false,
        }
    }

    /// Writes `e`, rewritten, to `w` (after `,\n` unless it is the first); false when its text
    /// is not a JSON object (a corrupt file).
    pub fn event(&mut self, e: &Event<'_>, w: &mut impl Write) -> std::io::Result<bool> {
        // ASCII first: it is nearly every event, and checked faster than UTF-8 (the full check
        // was 2% of `merge -j 1`'s samples on the small-events bench). An event the reader
        // found spans in is printable ASCII already.
        // Plain ASCII with no control, the same check: copied as it is. Anything else is
        // written to `scratch`, made UTF-8, and its active characters escaped (a C1 or
        // bidirectional control in a name reaches no viewer raw). JSON's own syntax is ASCII,
        // so every bad byte lies in a string and the replacement keeps the event valid JSON:
        // the merged file stays UTF-8, as JSON must be.
        let plain = e.spans.is_some() || !crate::escape::json::needs_raw_escape(e.raw);
        if self.wrote {
            w.write_all(b",\n")?;
        }
        let well_formed = if plain {
            self.rewrite.write(e, &mut self.value, &mut *w)?
        } else {
            self.scratch.clear();
            let well_formed = self.rewrite.write(e, &mut self.value, &mut self.scratch)?;
            if well_formed {
                let text = String::from_utf8_lossy(&self.scratch);
                if matches!(text, std::borrow::Cow::Owned(_)) {
                    self.not_utf8 += 1;
                }
                w.write_all(&crate::escape::json::escape_raw(text.as_bytes()))?;
            }
            well_formed
        };
        self.wrote |= well_formed;
        Ok(well_formed)
    }

    /// Takes in the copy of the chunk that follows this one: the processes it saw, named and
    /// sorted, and what it counted.
    pub fn absorb(&mut self, later: RankCopy) {
        let (mine, theirs) = (&mut self.rewrite, later.rewrite);
        mine.named.extend(theirs.named);
        mine.sorted.extend(theirs.sorted);
        mine.seen.extend(theirs.seen);
        self.not_utf8 += later.not_utf8;
        self.wrote |= later.wrote;
    }

    /// Ends the copy: a name and a sort index, prefixed by the rank, for each process seen
    /// without its own (after `,\n` unless nothing was written before).
    pub fn finish(&mut self, w: &mut impl Write) -> std::io::Result<()> {
        let rank = self.rewrite.rank;
        let mut extra = String::new();
        for &p in &self.rewrite.seen {
            let pid = offset(rank, PID_STRIDE, p);
            if !self.rewrite.named.contains(&p) {
                extra.push_str(&format!(
                    ",\n{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {pid}, \"tid\": 0, \"ts\": 0.000, \"args\": {{\"name\": {}}}}}",
                    json_str(&format!("rank {rank} pid {p}"))
                ));
            }
            if !self.rewrite.sorted.contains(&p) {
                extra.push_str(&format!(
                    ",\n{{\"ph\": \"M\", \"name\": \"process_sort_index\", \"pid\": {pid}, \"tid\": 0, \"ts\": 0.000, \"args\": {{\"sort_index\": {pid}}}}}"
                ));
            }
        }
        let extra = if self.wrote {
            &extra[..]
        } else {
            extra.trim_start_matches(",\n")
        };
        self.wrote |= !extra.is_empty();
        w.write_all(extra.as_bytes())
    }
}

/// What [`write_rank`] did.
pub(super) struct RankWritten {
    pub summary: cuprof_core::reader::ReadSummary,
    /// Anything was written.
    pub wrote: bool,
    /// Events copied with U+FFFD in place of bytes that were not UTF-8.
    pub not_utf8: u64,
}

/// Writes rank `rank`'s events from `path`, moved by `shift` ns, to `w` (`,\n` between them,
/// none before the first), reading the file front to back.
pub(super) fn write_rank(
    rank: i64,
    shift: i64,
    path: &Path,
    w: &mut impl Write,
    wr: &impl Fn(std::io::Error) -> anyhow::Error,
) -> Result<RankWritten> {
    let mut reader = TraceReader::open(path)?;
    // Only what is rewritten is decoded; the rest of each event is copied as it stands.
    reader.set_detail(Detail::Lean);
    let bar = crate::load::progress(&mut reader, path);
    let mut failure: Option<anyhow::Error> = None;
    let mut copy = RankCopy::new(rank, shift);
    let summary = reader.read_events(|e| match copy.event(e, w) {
        Ok(true) => ControlFlow::Continue(()),
        Ok(false) => {
            failure = Some(not_an_object(path, e.offset));
            ControlFlow::Break(())
        }
        Err(err) => {
            failure = Some(wr(err));
            ControlFlow::Break(())
        }
    })?;
    if let Some(pb) = bar.borrow_mut().take() {
        pb.finish_and_clear();
    }
    if let Some(f) = failure {
        return Err(f);
    }
    copy.finish(w).map_err(wr)?;
    Ok(RankWritten {
        summary,
        wrote: copy.wrote,
        not_utf8: copy.not_utf8,
    })
}

/// The error for an event at `offset` whose text is not a JSON object.
fn not_an_object(path: &Path, offset: u64) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: event at byte {offset} is not a JSON object; the file is corrupt",
        path.shown()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn microseconds_are_exact() {
        let us = |ns: i64| {
            let mut out = Vec::new();
            write_us(&mut out, &mut itoa::Buffer::new(), ns);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(us(-1500), "-1.500");
        assert_eq!(us(1_000_001), "1000.001");
        assert_eq!(us(7), "0.007");
        assert_eq!(us(i64::MIN), "-9223372036854775.808");
    }
}
