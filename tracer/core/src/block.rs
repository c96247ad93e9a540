//! A Python `profile()` block's window as the C ABI carries it (`cuprof_begin_window`): its
//! text form, `wait=1 warmup=1 active=2 repeat=0 skip_first=0 skip_first_wait=0
//! options=cpu=1,shapes=1`, and its parsing. No schedule key: the whole block is recorded.

use crate::capture_options::CaptureOptions;
use crate::window::Schedule;

/// What a block records: its schedule's steps, or (`None`) everything from its start to its
/// end; what it collects over the process's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    pub schedule: Option<Schedule>,
    pub options: CaptureOptions,
}

const SCHEDULE_KEYS: [&str; 6] = [
    "wait",
    "warmup",
    "active",
    "repeat",
    "skip_first",
    "skip_first_wait",
];

impl Block {
    /// The text form [`Block::parse`] reads.
    pub fn to_text(&self) -> String {
        let mut parts = Vec::new();
        if let Some(s) = self.schedule {
            parts.push(format!(
                "wait={} warmup={} active={} repeat={} skip_first={} skip_first_wait={}",
                s.wait(),
                s.warmup(),
                s.active(),
                s.repeat(),
                s.skip_first(),
                u8::from(s.skip_first_wait())
            ));
        }
        let options = self.options.to_field();
        if !options.is_empty() {
            parts.push(format!("options={options}"));
        }
        parts.join(" ")
    }

    /// Reads [`Block::to_text`]'s form. A schedule needs `active` (at least 1); its other keys
    /// default as torch's `schedule` (0; `repeat=0`: cycles until the block ends). An unknown
    /// key, a key given twice, or a value that is not a count is refused, naming it.
    pub fn parse(text: &str) -> Result<Block, String> {
        let mut counts: [Option<u64>; 6] = [None; 6];
        let mut options = None;
        for pair in text.split_ascii_whitespace() {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` has no value (KEY=VALUE)"))?;
            if key == "options" {
                if options.is_some() {
                    return Err("`options` given twice".into());
                }
                options = Some(
                    CaptureOptions::parse(value).map_err(|e| format!("options={value}: {e}"))?,
                );
                continue;
            }
            let i = SCHEDULE_KEYS
                .iter()
                .position(|&k| k == key)
                .ok_or_else(|| format!("unknown key `{key}`"))?;
            let n = value
                .parse::<u64>()
                .map_err(|_| format!("{key}={value} is not a count (0, 1, 2, ...)"))?;
            if counts[i].replace(n).is_some() {
                return Err(format!("`{key}` given twice"));
            }
        }
        let options = options.unwrap_or_default();
        if counts.iter().all(Option::is_none) {
            return Ok(Block {
                schedule: None,
                options,
            });
        }
        let [wait, warmup, active, repeat, skip_first, skip_first_wait] = counts;
        let active = active.ok_or("a schedule needs `active`")?;
        if skip_first_wait.is_some_and(|v| v > 1) {
            return Err("skip_first_wait is 0 or 1".into());
        }
        let schedule = Schedule::new(wait.unwrap_or(0), warmup.unwrap_or(0), active)
            .map_err(|e| e.to_string())?
            .with_repeat(repeat.unwrap_or(0))
            .with_skip_first(skip_first.unwrap_or(0))
            .with_skip_first_wait(skip_first_wait == Some(1));
        Ok(Block {
            schedule: Some(schedule),
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_round_trips_through_its_text() {
        let whole = Block::parse("").unwrap();
        assert_eq!(whole.schedule, None);
        assert_eq!(whole.options, CaptureOptions::default());
        assert_eq!(whole.to_text(), "");
        let text = "wait=1 warmup=2 active=3 repeat=0 skip_first=4 skip_first_wait=1 options=cpu=1,shapes=0";
        let b = Block::parse(text).unwrap();
        let s = b.schedule.unwrap();
        assert_eq!(
            (
                s.wait(),
                s.warmup(),
                s.active(),
                s.repeat(),
                s.skip_first(),
                s.skip_first_wait()
            ),
            (1, 2, 3, 0, 4, true)
        );
        assert_eq!(b.options.cpu, Some(true));
        assert_eq!(b.options.record_shapes, Some(false));
        assert_eq!(b.to_text(), text);
        // Defaults as torch's schedule.
        let s = Block::parse("active=2").unwrap().schedule.unwrap();
        assert_eq!(
            (s.wait(), s.warmup(), s.repeat(), s.skip_first()),
            (0, 0, 0, 0)
        );
    }

    #[test]
    fn a_bad_block_is_refused_naming_what_is_wrong() {
        let err = |t: &str| Block::parse(t).unwrap_err();
        assert_eq!(err("wait"), "`wait` has no value (KEY=VALUE)");
        assert_eq!(err("pause=1"), "unknown key `pause`");
        assert_eq!(
            err("wait=1.7 active=1"),
            "wait=1.7 is not a count (0, 1, 2, ...)"
        );
        assert_eq!(
            err("wait=-1 active=1"),
            "wait=-1 is not a count (0, 1, 2, ...)"
        );
        assert_eq!(err("active=1 active=2"), "`active` given twice");
        assert_eq!(err("wait=1"), "a schedule needs `active`");
        assert_eq!(
            err("active=1 skip_first_wait=2"),
            "skip_first_wait is 0 or 1"
        );
        assert_eq!(
            err("active=1 options=cpu=2"),
            "options=cpu=2: a capture option is 0 or 1"
        );
        assert_eq!(
            err("active=0"),
            "active must be at least 1 (torch.profiler.schedule requires active > 0)"
        );
    }
}
