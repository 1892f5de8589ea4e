//! The options of a plan (the Rust mirror of `horecon_options`): where the
//! operators run and in which precision. The backends read them and the plan
//! holds them, so they sit below both (re-exported by [`crate::plan`]).

use crate::op::Precision;

/// Where the operators run.
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// CUDA when a usable GPU, driver and NVRTC are present, else the CPU.
    #[default]
    Auto = 0,
    Cpu = 1,
    Cuda = 2,
}

impl BackendKind {
    pub fn from_code(code: i32) -> Option<BackendKind> {
        [BackendKind::Auto, BackendKind::Cpu, BackendKind::Cuda]
            .into_iter()
            .find(|b| *b as i32 == code)
    }
}

/// "auto", "cpu" or "cuda" (the bindings' and examples' names).
impl std::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(name: &str) -> std::result::Result<BackendKind, String> {
        match name {
            "auto" => Ok(BackendKind::Auto),
            "cpu" => Ok(BackendKind::Cpu),
            "cuda" => Ok(BackendKind::Cuda),
            other => Err(format!("backend must be auto, cpu or cuda, got {other}")),
        }
    }
}

/// Plan options (the Rust mirror of `horecon_options`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub backend: BackendKind,
    pub device: i32,
    pub num_devices: i32,
    /// CPU threads; 0 = all.
    pub num_threads: usize,
    pub precision: Precision,
    /// 0 silent, 1 one line per solve, 2 one line per iteration (stderr).
    pub verbosity: i32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            backend: BackendKind::Auto,
            device: 0,
            num_devices: 1,
            num_threads: 0,
            precision: Precision::Accurate,
            verbosity: 0,
        }
    }
}
