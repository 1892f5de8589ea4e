//! Status codes of the C API and the crate's error type.
//!
//! The numeric values are part of the stable C API (design/C-API.md): never
//! renumber or reuse them.

use rayon::prelude::*;
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

/// Allocations from this size on are first checked against the memory the
/// system can give ([`check_available`]): with overcommit, a too-large
/// allocation can succeed and the process be killed later, when its pages are
/// touched (MATLAB and Python die with it).
const CHECKED_ALLOCATION: u64 = 256 << 20;

/// An empty vector with room for `len` elements, or `OutOfMemory` naming the bytes asked for.
fn try_with_capacity<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let size = std::mem::size_of::<T>();
    let bytes = (len as u64).saturating_mul(size as u64);
    let failed = || {
        // The message itself may find no memory left (a worker thread's
        // malloc arena under an address-space limit): it is written into
        // room reserved fallibly, or left empty, never by an allocation
        // that aborts the process.
        let mut message = String::new();
        if message.try_reserve(what.len() + 160).is_ok() {
            use std::fmt::Write;
            let _ = write!(
                message,
                "could not allocate {what}: {len} elements of {size} bytes = {bytes} bytes ({:.2} GiB)",
                bytes as f64 / GIB
            );
        }
        Error::out_of_memory(message)
    };
    if bytes >= CHECKED_ALLOCATION {
        if let Some(available) = available_bytes() {
            if bytes > available {
                let mut e = failed();
                e.message += &format!(
                    "; only {available} bytes ({:.2} GiB) are available (MemAvailable + SwapFree)",
                    available as f64 / GIB
                );
                return Err(e);
            }
        }
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| failed())?;
    if bytes >= HUGE_PAGE_BYTES {
        advise_huge_pages(v.as_mut_ptr() as usize, bytes as usize);
    }
    Ok(v)
}

/// Allocations from this size on ask for transparent huge pages.
const HUGE_PAGE_BYTES: u64 = 4 << 20;

/// Asks Linux to back the 2 MiB-aligned part of [start, start + bytes) with
/// transparent huge pages where the system allows them on request
/// (`/sys/kernel/mm/transparent_hugepage/enabled` = madvise or always): the
/// first touch then faults once per 2 MiB instead of once per 4 KiB, which
/// on virtual machines costs ~1 µs each (0.3 s per GB). A hint only: its
/// failure changes nothing.
fn advise_huge_pages(start: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let (first, end) = (start.next_multiple_of(HUGE), (start + bytes) / HUGE * HUGE);
        if end > first {
            // SAFETY: [first, end) lies inside the allocation just reserved;
            // MADV_HUGEPAGE changes how its pages are backed, not its contents.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

/// `count` elements of `size` bytes, or `InvalidArgument` naming `what` when
/// the product overflows (the checked size product of every user size).
pub fn checked_bytes(count: usize, size: usize, what: &str) -> Result<usize> {
    count.checked_mul(size).ok_or_else(|| {
        Error::invalid(format!(
            "{what}: {count} elements of {size} bytes overflow the address space"
        ))
    })
}

/// The element count `a`·`b` of a table, or `InvalidArgument` naming `what`
/// when the product overflows.
pub fn checked_len(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| {
        Error::invalid(format!(
            "{what}: {a} x {b} elements overflow the address space"
        ))
    })
}

/// Vectors of at least this many bytes are filled by all threads of the
/// calling pool (the page faults of a large first touch are the cost, e.g.
/// 0.3 s per GB on one thread).
const PARALLEL_FILL_BYTES: usize = 8 << 20;
/// Elements per task of a parallel fill.
const FILL_CHUNK: usize = 1 << 16;

/// Whether to fill `len` values of T in parallel: large ones, and only on a
/// thread of a rayon pool (a plan's, built fallibly), never by starting
/// rayon's global pool: when its threads cannot be created (address-space
/// limits) it fails once and then panics on every later use in the process.
fn parallel<T>(len: usize) -> bool {
    len.saturating_mul(std::mem::size_of::<T>()) >= PARALLEL_FILL_BYTES
        && crate::call_pool::on_a_pool()
}

/// A vector of `value(i)` for i < `len`, written by the calling pool's
/// threads in chunks of [`FILL_CHUNK`] (only when [`parallel`] says so).
fn filled_in_parallel<T: Send>(
    len: usize,
    value: impl Fn(usize) -> T + Sync,
    what: &str,
) -> Result<Vec<T>> {
    let mut v = try_with_capacity(len, what)?;
    v.spare_capacity_mut()[..len]
        .par_chunks_mut(FILL_CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            for (i, x) in chunk.iter_mut().enumerate() {
                x.write(value(c * FILL_CHUNK + i));
            }
        });
    // SAFETY: the capacity is at least `len` and its first `len` elements were written above.
    unsafe { v.set_len(len) };
    Ok(v)
}

/// Allocates a vector of `len` copies of `value`, reporting failure as
/// `OutOfMemory` instead of aborting the process.
pub fn try_vec<T: Clone + Send + Sync>(len: usize, value: T, what: &str) -> Result<Vec<T>> {
    if parallel::<T>(len) {
        return filled_in_parallel(len, |_| value.clone(), what);
    }
    let mut v = try_with_capacity(len, what)?;
    v.resize(len, value);
    Ok(v)
}

/// Copies `values` into a new vector (a fallible `to_vec`): failure is
/// `OutOfMemory`, never an abort of the caller's process.
pub fn try_copy<T: Clone + Send + Sync>(values: &[T], what: &str) -> Result<Vec<T>> {
    if parallel::<T>(values.len()) {
        return filled_in_parallel(values.len(), |i| values[i].clone(), what);
    }
    let mut v = try_with_capacity(values.len(), what)?;
    v.extend_from_slice(values);
    Ok(v)
}

/// Collects `values` (of known length) into a new vector (a fallible
/// `collect`): failure is `OutOfMemory` naming `what`, never an abort.
pub fn try_collect<T>(values: impl ExactSizeIterator<Item = T>, what: &str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(values.len(), what)?;
    v.extend(values);
    Ok(v)
}

/// Available memory: MemAvailable + SwapFree of /proc/meminfo, capped by a
/// cgroup v2 limit; `None` where the system does not say.
pub fn available_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib.saturating_mul(1024))
    };
    let mut available = field("MemAvailable:")?.saturating_add(field("SwapFree:").unwrap_or(0));
    let read = |p: &str| std::fs::read_to_string(p).ok()?.trim().parse::<u64>().ok();
    if let (Some(max), Some(current)) = (
        read("/sys/fs/cgroup/memory.max"),
        read("/sys/fs/cgroup/memory.current"),
    ) {
        available = available.min(max.saturating_sub(current));
    }
    Some(available)
}

/// `OutOfMemory` when `bytes` is more than the system can give now.
pub fn check_available(bytes: u64, what: &str) -> Result<()> {
    match available_bytes() {
        Some(available) if bytes > available => Err(Error::out_of_memory(format!(
            "{what} needs about {bytes} bytes ({:.2} GiB) but only {available} bytes ({:.2} GiB) \
             are available (MemAvailable + SwapFree); use a smaller problem, fewer coils or time \
             segments, or a machine with more memory",
            bytes as f64 / GIB,
            available as f64 / GIB
        ))),
        _ => Ok(()),
    }
}

const GIB: f64 = (1u64 << 30) as f64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_vectors_are_filled_and_copied_in_parallel_like_small_ones() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let large = (PARALLEL_FILL_BYTES / 8) + 12_345;
        assert!(!parallel::<f64>(large), "parallel outside a pool");
        pool.install(|| assert!(parallel::<f64>(large)));
        pool.install(fill_and_copy);
        fill_and_copy();
    }

    fn fill_and_copy() {
        for len in [0usize, 1, 1000, (PARALLEL_FILL_BYTES / 8) + 12_345] {
            let v = try_vec(len, 1.5f64, "test").unwrap();
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&x| x == 1.5));
            let source: Vec<u64> = (0..len as u64)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect();
            assert_eq!(try_copy(&source, "test").unwrap(), source);
        }
        // Values that own memory: every element its own clone.
        let big = try_vec(PARALLEL_FILL_BYTES / 24 + 1, vec![7u8; 2], "vectors");
        assert!(big.unwrap().iter().all(|v| v == &[7, 7]));
    }
}
