//! What the injected library's window collects while it records ([`Collect`]) and how it
//! records PyTorch operators ([`TorchOptions`]): plain data, shared by the library's stages (set
//! up at start, merged with an on-demand capture's [`crate::capture_options`], read by the window
//! and the operator recorder).

/// What the window collects while recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Collect {
    pub cpu: bool,
    pub gpu: bool,
    /// Record PyTorch operators (with CPU), with these options.
    pub torch_ops: bool,
    pub torch: TorchOptions,
    /// Python call stacks on operators (`--with-stack`).
    pub with_stack: bool,
}

/// How operators are recorded (the configuration's `record_shapes`, `all_threads`,
/// `with_flops`, `memory`: the `MEM` activity, torch.profiler's `profile_memory`, and
/// `modules`: `--with-modules`, each `nn.Module` call as a range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TorchOptions {
    pub shapes: bool,
    pub all_threads: bool,
    pub flops: bool,
    pub memory: bool,
    pub modules: bool,
}

impl TorchOptions {
    /// The recorder's `level` (recorder.py): 0 off, else 1 plus a bit per option.
    pub fn level(self, on: bool) -> u8 {
        if !on {
            return 0;
        }
        1 | (self.shapes as u8) << 1
            | (self.all_threads as u8) << 2
            | (self.flops as u8) << 3
            | (self.memory as u8) << 4
            | (self.modules as u8) << 5
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_carry_each_option_as_recorder_py_reads_them() {
        let none = TorchOptions {
            shapes: false,
            all_threads: false,
            flops: false,
            memory: false,
            modules: false,
        };
        assert_eq!(none.level(false), 0);
        assert_eq!(none.level(true), 1);
        let all = TorchOptions {
            shapes: true,
            all_threads: true,
            flops: true,
            memory: true,
            modules: true,
        };
        assert_eq!(all.level(true), 1 | 2 | 4 | 8 | 16 | 32);
        assert_eq!(all.level(false), 0);
        let shapes = TorchOptions {
            shapes: true,
            ..none
        };
        assert_eq!(shapes.level(true), 3);
    }
}
