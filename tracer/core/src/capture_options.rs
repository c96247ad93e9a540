//! What one on-demand capture records when it is not what the process started with
//! (`cuprof capture --activities GPU --with-stack ...`): each option given replaces the
//! process's own for that capture only; an option not given keeps the process's.
//!
//! On the control protocol it is one field, `key=0|1` pairs separated by commas (empty: the
//! process's options), so that it never holds a tab.

/// Options of one capture; `None`: as the process started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CaptureOptions {
    /// Runtime/driver API records, NVTX ranges, PyTorch operators (`CPU`).
    pub cpu: Option<bool>,
    /// Kernels, copies, memsets, syncs (`GPU`).
    pub gpu: Option<bool>,
    /// Python call stacks of PyTorch operators.
    pub with_stack: Option<bool>,
    /// Input shapes of PyTorch operators.
    pub record_shapes: Option<bool>,
    /// FLOP counts of PyTorch operators.
    pub with_flops: Option<bool>,
    /// PyTorch operators at all (with CPU).
    pub torch_ops: Option<bool>,
    /// `nn.Module` calls (`--with-modules`).
    pub with_modules: Option<bool>,
}

const KEYS: [&str; 7] = ["cpu", "gpu", "stack", "shapes", "flops", "ops", "modules"];

impl CaptureOptions {
    fn slots(&self) -> [Option<bool>; 7] {
        [
            self.cpu,
            self.gpu,
            self.with_stack,
            self.record_shapes,
            self.with_flops,
            self.torch_ops,
            self.with_modules,
        ]
    }

    fn slots_mut(&mut self) -> [&mut Option<bool>; 7] {
        [
            &mut self.cpu,
            &mut self.gpu,
            &mut self.with_stack,
            &mut self.record_shapes,
            &mut self.with_flops,
            &mut self.torch_ops,
            &mut self.with_modules,
        ]
    }

    /// The protocol field: `cpu=0,gpu=1,...` for the options given, empty for none.
    pub fn to_field(&self) -> String {
        KEYS.iter()
            .zip(self.slots())
            .filter_map(|(k, v)| v.map(|v| format!("{k}={}", u8::from(v))))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Reads [`CaptureOptions::to_field`]'s form; an unknown key, a value other than 0 or 1,
    /// or a key given twice is refused.
    pub fn parse(field: &str) -> Result<CaptureOptions, &'static str> {
        let mut o = CaptureOptions::default();
        for pair in field.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or("capture option without a value")?;
            let i = KEYS
                .iter()
                .position(|&key| key == k)
                .ok_or("unknown capture option")?;
            let v = match v {
                "0" => false,
                "1" => true,
                _ => return Err("a capture option is 0 or 1"),
            };
            let slot = o.slots_mut().into_iter().nth(i).expect("one slot per key");
            if slot.replace(v).is_some() {
                return Err("a capture option given twice");
            }
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_round_trip_through_their_field() {
        let none = CaptureOptions::default();
        assert_eq!(none.to_field(), "");
        assert_eq!(CaptureOptions::parse(""), Ok(none));
        let some = CaptureOptions {
            cpu: Some(false),
            gpu: Some(true),
            with_stack: Some(true),
            record_shapes: Some(false),
            with_flops: None,
            torch_ops: Some(false),
            with_modules: Some(true),
        };
        assert_eq!(
            some.to_field(),
            "cpu=0,gpu=1,stack=1,shapes=0,ops=0,modules=1"
        );
        assert_eq!(CaptureOptions::parse(&some.to_field()), Ok(some));
    }

    #[test]
    fn bad_fields_are_refused() {
        assert_eq!(
            CaptureOptions::parse("cpu"),
            Err("capture option without a value")
        );
        assert_eq!(
            CaptureOptions::parse("mem=1"),
            Err("unknown capture option")
        );
        assert_eq!(
            CaptureOptions::parse("gpu=yes"),
            Err("a capture option is 0 or 1")
        );
        assert_eq!(
            CaptureOptions::parse("gpu=1,gpu=0"),
            Err("a capture option given twice")
        );
    }
}
