//! The C API of the calibration chain (issue 12): noise whitening, coil
//! sensitivities (ESPIRiT, Walsh's adaptive combine), B0 maps from
//! multi-echo data, delay estimation, and the codes of preconditioned CG
//! and its stopping rule.

use super::{
    guard, horecon_c32, horecon_cg_info, horecon_cg_options, horecon_plan, horecon_status,
    non_null, plan_ref, read, read_c32, write_c32,
};
use crate::calib;
use crate::error::{try_vec, Error, Result};
use crate::plan::CgInfo;
use num_complex::{Complex32, Complex64};

pub const HORECON_PRECONDITIONER_NONE: i32 = 0;
pub const HORECON_PRECONDITIONER_DIAGONAL: i32 = 1;
pub const HORECON_PRECONDITIONER_CIRCULANT: i32 = 2;

pub const HORECON_STOP_TOLERANCE: i32 = 1;
pub const HORECON_STOP_MAX_ITERATIONS: i32 = 2;
pub const HORECON_STOP_DISCREPANCY: i32 = 3;
pub const HORECON_STOP_BREAKDOWN: i32 = 4;

/// sizeof(horecon_cg_options) of the header before `preconditioner`
/// (ending with `neighbours`, padded to the struct's alignment).
pub(super) const CG_OPTIONS_SIZE_V2: usize = {
    let end = std::mem::offset_of!(horecon_cg_options, neighbours) + 4;
    let align = std::mem::align_of::<horecon_cg_options>();
    end.div_ceil(align) * align
};

/// Bytes of an older caller's struct that are fields (its padding is not copied).
pub(super) fn cg_options_bytes(size: usize) -> usize {
    size.min(std::mem::offset_of!(horecon_cg_options, preconditioner))
}

/// Writes `info`: every field for a caller of the current header, only the
/// original four otherwise (an older caller's struct is smaller).
pub(super) unsafe fn write_cg_info(info: *mut horecon_cg_info, result: &CgInfo, current: bool) {
    if current {
        *info = horecon_cg_info {
            iterations: result.iterations as i32,
            converged: result.converged as i32,
            rel_residual: result.rel_residual,
            seconds: result.seconds,
            stop_reason: result.stop_reason as i32,
            data_residual: result.data_residual.unwrap_or(-1.0),
        };
    } else {
        std::ptr::addr_of_mut!((*info).iterations).write(result.iterations as i32);
        std::ptr::addr_of_mut!((*info).converged).write(result.converged as i32);
        std::ptr::addr_of_mut!((*info).rel_residual).write(result.rel_residual);
        std::ptr::addr_of_mut!((*info).seconds).write(result.seconds);
    }
}
