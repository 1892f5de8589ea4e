//! Status codes of the C API and the crate's error type.
//!
//! The numeric values are part of the stable C API (design/C-API.md): never
//! renumber or reuse them.

use std::fmt;

/// A C API status code (`horecon_status`).
#[repr(i32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// A required pointer is NULL.
    NullPointer = 1,
    /// Bad count, size, enum or option value, or wrong `struct_size`.
    InvalidArgument = 2,
    /// Array sizes disagree with the plan.
    SizeMismatch = 3,
    /// NaN or Inf in an input array.
    NotFinite = 4,
    /// An operator was applied before positions and phase model were set.
    IncompletePlan = 5,
    /// Host or device allocation failed (after trying to chunk).
    OutOfMemory = 6,
    /// CUDA requested but no driver, GPU or NVRTC.
    BackendUnavailable = 7,
    /// A CUDA, NVRTC or cuFFT call failed.
    Backend = 8,
    /// The progress callback asked to stop.
    Cancelled = 9,
    /// A caught panic or a broken invariant (a bug).
    Internal = 99,
}

impl Status {
    /// The fixed, human-readable name of a status (`horecon_status_string`).
    pub fn description(self) -> &'static str {
        match self {
            Status::Ok => "HORECON_OK: success",
            Status::NullPointer => "HORECON_ERR_NULL_POINTER: a required pointer is NULL",
            Status::InvalidArgument => {
                "HORECON_ERR_INVALID_ARGUMENT: bad count, size, enum or option value"
            }
            Status::SizeMismatch => "HORECON_ERR_SIZE_MISMATCH: array sizes disagree with the plan",
            Status::NotFinite => "HORECON_ERR_NOT_FINITE: NaN or Inf in an input array",
            Status::IncompletePlan => {
                "HORECON_ERR_INCOMPLETE_PLAN: positions and phase model must be set first"
            }
            Status::OutOfMemory => "HORECON_ERR_OUT_OF_MEMORY: host or device allocation failed",
            Status::BackendUnavailable => {
                "HORECON_ERR_BACKEND_UNAVAILABLE: CUDA requested but no driver, GPU or NVRTC"
            }
            Status::Backend => "HORECON_ERR_BACKEND: a CUDA, NVRTC or cuFFT call failed",
            Status::Cancelled => "HORECON_ERR_CANCELLED: the progress callback asked to stop",
            Status::Internal => "HORECON_ERR_INTERNAL: internal error (a bug, please report it)",
        }
    }

    /// The status for a raw code, if it is one.
    pub fn from_code(code: i32) -> Option<Status> {
        use Status::*;
        [
            Ok,
            NullPointer,
            InvalidArgument,
            SizeMismatch,
            NotFinite,
            IncompletePlan,
            OutOfMemory,
            BackendUnavailable,
            Backend,
            Cancelled,
            Internal,
        ]
        .into_iter()
        .find(|s| *s as i32 == code)
    }
}

/// An error: a status plus a message that names the argument and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Error {
            status,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(Status::InvalidArgument, message)
    }
    pub fn null(argument: &str) -> Self {
        Self::new(Status::NullPointer, format!("{argument} is NULL"))
    }
    pub fn size(message: impl Into<String>) -> Self {
        Self::new(Status::SizeMismatch, message)
    }
    pub fn incomplete(message: impl Into<String>) -> Self {
        Self::new(Status::IncompletePlan, message)
    }
    pub fn out_of_memory(message: impl Into<String>) -> Self {
        Self::new(Status::OutOfMemory, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Status::Internal, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// An empty vector with room for `len` elements, or `OutOfMemory`.
fn try_with_capacity<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::out_of_memory(format!(
            "could not allocate {what}: {len} elements of {} bytes",
            std::mem::size_of::<T>()
        ))
    })?;
    Ok(v)
}

/// Allocates a vector of `len` copies of `value`, reporting failure as
/// `OutOfMemory` instead of aborting the process.
pub fn try_vec<T: Clone>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// Copies `values` into a new vector (a fallible `to_vec`): failure is
/// `OutOfMemory`, never an abort of the caller's process.
pub fn try_copy<T: Clone>(values: &[T], what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(values.len(), what)?;
    v.extend_from_slice(values);
    Ok(v)
}
