//! The NUFFT's device kernels (kernels/nufft_*.cu, one NVRTC module per
//! precision, dimension and kernel width) and how they are launched:
//! every kernel takes the plan's [`Geometry`] by value first.

use super::layout::{Layout, SHARED_BUDGET, SM_THREADS};
use crate::backend::cuda::context::{driver_error, Device};
use crate::backend::cuda::memory::Stream;
use crate::error::Result;
use cudarc::driver::{result, sys, CudaFunction};
use std::ffi::c_void;

const SOURCE: &str = concat!(
    include_str!("../../../../kernels/nufft_common.cu"),
    "\n",
    include_str!("../../../../kernels/nufft_sort.cu"),
    "\n",
    include_str!("../../../../kernels/nufft_spread.cu"),
    "\n",
    include_str!("../../../../kernels/nufft_deconv.cu")
);
const TOEPLITZ: &str = include_str!("../../../../kernels/nufft_toeplitz.cu");
const SPREAD_OUT: &str = concat!(
    include_str!("../../../../kernels/nufft_common.cu"),
    "\n",
    include_str!("../../../../kernels/nufft_spread_out.cu")
);

/// Threads per block of the one-thread-per-item kernels.
pub(crate) const THREADS: u32 = 256;
/// Blocks of the grid-stride kernels at most.
const MAX_BLOCKS: usize = 4096;

/// kernels/nufft_common.cu's `struct Geometry`, field by field (104 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Geometry {
    pub points: i64,
    pub modes_total: i64,
    pub fine_total: i64,
    pub beta: f64,
    pub fine: [i32; 3],
    pub modes: [i32; 3],
    pub nbins: [i32; 3],
    pub bins: [i32; 3],
    pub modes_offset: [i32; 3],
    pub transforms: i32,
    pub subproblems: i32,
    pub reserved: i32,
}

const _: () = assert!(std::mem::size_of::<Geometry>() == 104);

/// The kernels of one plan's module.
pub struct Kernels {
    pub bin_count: CudaFunction,
    pub bin_scatter: CudaFunction,
    pub spread_tiles: CudaFunction,
    pub interp_tiles: CudaFunction,
    pub spread_points: CudaFunction,
    pub interp_points: CudaFunction,
    pub modes_from_fine: CudaFunction,
    pub fine_from_modes: CudaFunction,
}

impl Kernels {
    pub fn new(device: &Device, layout: &Layout, double: bool) -> Result<Kernels> {
        let defines = [
            ("DOUBLE", i64::from(double)),
            ("DIM", layout.dim as i64),
            ("WIDTH", layout.width as i64),
            ("SM_THREADS", SM_THREADS as i64),
            ("PRECISE", i64::from(layout.precise)),
        ];
        let f = |name: &str| device.function("nufft", SOURCE, &defines, name);
        let kernels = Kernels {
            bin_count: f("nufft_bin_count")?,
            bin_scatter: f("nufft_bin_scatter")?,
            spread_tiles: f("nufft_spread_sm")?,
            interp_tiles: f("nufft_interp_sm")?,
            spread_points: f("nufft_spread_gm")?,
            interp_points: f("nufft_interp_gm")?,
            modes_from_fine: f("nufft_modes_from_fine")?,
            fine_from_modes: f("nufft_fine_from_modes")?,
        };
        if layout.tiles_fit {
            // The same for every plan of the module (a smaller value set by one
            // plan would fail another's launch).
            let limit = shared_limit(device)?;
            for k in [&kernels.spread_tiles, &kernels.interp_tiles] {
                // SAFETY: a loaded function; the size is the device's own opt-in limit or less.
                unsafe {
                    result::function::set_function_attribute(
                        k.cu_function(),
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        limit as i32,
                    )
                }
                .map_err(|e| driver_error("reserving shared memory for the NUFFT tiles", e))?;
            }
        }
        Ok(kernels)
    }
}

/// The output-driven spreading kernel (kernels/nufft_spread_out.cu, its own
/// module: compiled only for plans that use it), with the tile kernels'
/// dynamic shared memory reserved; its batch arrays are static.
pub fn spread_output(device: &Device, layout: &Layout, double: bool) -> Result<CudaFunction> {
    let defines = [
        ("DOUBLE", i64::from(double)),
        ("DIM", layout.dim as i64),
        ("WIDTH", layout.width as i64),
        ("SM_THREADS", SM_THREADS as i64),
        ("PRECISE", i64::from(layout.precise)),
        ("SPREAD_BATCH", layout.spread_batch() as i64),
        ("FLUSH_PAIRS", i64::from(layout.flush_pairs(double))),
        ("FIXED_POINT", i64::from(layout.fixed_point)),
    ];
    let f = device.function("nufft_spread_out", SPREAD_OUT, &defines, "nufft_spread_out")?;
    let limit = shared_limit(device)?;
    // SAFETY: a loaded function; the size is the device's own opt-in limit or less.
    unsafe {
        result::function::set_function_attribute(
            f.cu_function(),
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            limit as i32,
        )
    }
    .map_err(|e| driver_error("reserving shared memory for the NUFFT tiles", e))?;
    Ok(f)
}

/// Dynamic shared memory a tile kernel may use on `device`: [`SHARED_BUDGET`]
/// or the device's opt-in limit if lower.
pub fn shared_limit(device: &Device) -> Result<usize> {
    let optin = device
        .ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(|e| driver_error("querying the shared memory limit", e))?;
    Ok(SHARED_BUDGET.min(optin.max(0) as usize))
}

/// kernels/nufft_toeplitz.cu for a NUFFT precision and a Toeplitz grid mode.
pub fn toeplitz_from_modes(device: &Device, nufft_double: bool, mode: i64) -> Result<CudaFunction> {
    device.function(
        "nufft_toeplitz",
        TOEPLITZ,
        &[("DOUBLE", i64::from(nufft_double)), ("MODE", mode)],
        "toeplitz_from_modes",
    )
}

/// One kernel argument: the geometry by value or an 8-byte scalar/pointer.
pub enum Arg {
    Geometry(Geometry),
    Ptr(sys::CUdeviceptr),
}

/// Launches `f` on `grid` blocks of `block` threads with `shared` bytes of
/// dynamic shared memory; nothing is launched for an empty grid.
pub fn launch(
    f: &CudaFunction,
    grid: (u32, u32),
    block: u32,
    shared: usize,
    stream: Stream,
    args: &[Arg],
) -> Result<()> {
    if grid.0 == 0 || grid.1 == 0 {
        return Ok(());
    }
    let mut geometries: Vec<Geometry> = Vec::new();
    let mut pointers: Vec<u64> = Vec::new();
    for a in args {
        match a {
            Arg::Geometry(g) => geometries.push(*g),
            Arg::Ptr(p) => pointers.push(*p),
        }
    }
    let (mut gi, mut pi) = (0, 0);
    let mut params: Vec<*mut c_void> = Vec::with_capacity(args.len());
    for a in args {
        match a {
            Arg::Geometry(_) => {
                params.push(&mut geometries[gi] as *mut Geometry as *mut c_void);
                gi += 1;
            }
            Arg::Ptr(_) => {
                params.push(&mut pointers[pi] as *mut u64 as *mut c_void);
                pi += 1;
            }
        }
    }
    // SAFETY: the arguments match the kernels' signatures (kernels/nufft_*.cu);
    // `geometries` and `pointers` outlive the call (the driver copies them).
    unsafe {
        result::launch_kernel(
            f.cu_function(),
            (grid.0, grid.1, 1),
            (block, 1, 1),
            shared as u32,
            stream.0,
            &mut params,
        )
    }
    .map_err(|e| driver_error("launching a NUFFT kernel", e))
}

/// Blocks for a grid-stride loop over `n` items.
pub fn blocks(n: usize) -> u32 {
    n.div_ceil(THREADS as usize).clamp(1, MAX_BLOCKS) as u32
}
