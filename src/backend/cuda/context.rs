//! Device discovery, one context per device (the primary context, shared by
//! all plans on it) and the NVRTC module cache (per process and device).
//!
//! cudarc panics when libcuda or libnvrtc is absent, so [`probe`] checks for
//! both libraries before anything else touches them.

use crate::error::{Error, Result, Status};
use cudarc::driver::{result, sys, CudaContext, CudaFunction, CudaModule};
use once_cell::sync::Lazy;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// An error from the driver as a `Backend` status.
pub fn driver_error(what: &str, e: result::DriverError) -> Error {
    if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
        return Error::out_of_memory(format!("{what}: the GPU is out of memory ({e})"));
    }
    Error::new(Status::Backend, format!("{what}: CUDA error {e}"))
}

/// Number of CUDA devices, or why there are none usable (cached: the
/// libraries are looked for once per process).
pub fn probe() -> std::result::Result<usize, String> {
    static PROBE: Lazy<std::result::Result<usize, String>> = Lazy::new(|| {
        // SAFETY: only tries to dlopen the libraries.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err("the CUDA driver library (libcuda.so) was not found".into());
        }
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err("the NVRTC library (libnvrtc.so) was not found".into());
        }
        result::init().map_err(|e| format!("the CUDA driver did not initialise ({e})"))?;
        let count = result::device::get_count()
            .map_err(|e| format!("could not count CUDA devices ({e})"))?;
        if count < 1 {
            return Err("no CUDA device is present".into());
        }
        Ok(count as usize)
    });
    PROBE.clone()
}

/// One GPU: its context, properties and compiled modules.
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub ordinal: usize,
    pub name: String,
    pub multiprocessors: usize,
    pub capability: (i32, i32),
    modules: Mutex<HashMap<String, Arc<CudaModule>>>,
}

static DEVICES: Lazy<Mutex<HashMap<usize, Arc<Device>>>> = Lazy::new(Default::default);

/// The device `ordinal`, opened on first use; `Err(reason)` when unusable.
pub fn device(ordinal: usize) -> std::result::Result<Arc<Device>, String> {
    let count = probe()?;
    if ordinal >= count {
        return Err(format!(
            "device {ordinal} does not exist ({count} CUDA device(s) present)"
        ));
    }
    let mut devices = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = devices.get(&ordinal) {
        return Ok(d.clone());
    }
    let ctx = CudaContext::new(ordinal)
        .map_err(|e| format!("could not create a context on device {ordinal} ({e})"))?;
    let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
    let multiprocessors = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| format!("could not query device {ordinal} ({e})"))?
        .max(1) as usize;
    let capability = ctx
        .compute_capability()
        .map_err(|e| format!("could not query device {ordinal} ({e})"))?;
    let d = Arc::new(Device {
        ctx,
        ordinal,
        name,
        multiprocessors,
        capability,
        modules: Mutex::new(HashMap::new()),
    });
    devices.insert(ordinal, d.clone());
    Ok(d)
}

impl Device {
    /// Binds the context to the calling thread (every driver call needs it).
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("binding the CUDA context", e))
    }

    /// Free and total device memory in bytes.
    pub fn memory(&self) -> Result<(usize, usize)> {
        self.bind()?;
        result::mem_get_info().map_err(|e| driver_error("querying device memory", e))
    }

    /// The function `name` of `source` compiled with `defines` for this
    /// device's architecture (compiled once per process and device).
    pub fn function(
        &self,
        label: &str,
        source: &str,
        defines: &[(&str, i64)],
        name: &str,
    ) -> Result<CudaFunction> {
        let mut key = label.to_string();
        let mut options = Vec::with_capacity(defines.len());
        for (k, v) in defines {
            key.push_str(&format!(" {k}={v}"));
            options.push(format!("-D{k}={v}"));
        }
        let module = {
            let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
            match modules.get(&key) {
                Some(m) => m.clone(),
                None => {
                    let ptx = super::module_cache::compile(
                        source,
                        &format!("{label}.cu"),
                        &options,
                        self.capability,
                    )
                    .map_err(|detail| {
                        Error::new(
                            Status::Backend,
                            format!("NVRTC could not compile kernels/{label}.cu ({key}): {detail}"),
                        )
                    })?;
                    if let Ok(dir) = std::env::var("HORECON_CUDA_DUMP_PTX") {
                        let file = key.replace([' ', '='], "_").replace('-', "m");
                        let _ = std::fs::write(format!("{dir}/{file}.ptx"), ptx.to_src());
                    }
                    self.bind()?;
                    let m = self
                        .ctx
                        .load_module(ptx)
                        .map_err(|e| driver_error("loading a compiled module", e))?;
                    modules.insert(key.clone(), m.clone());
                    m
                }
            }
        };
        module
            .load_function(name)
            .map_err(|e| driver_error(&format!("finding kernel {name}"), e))
    }
}

/// The status for a failed device lookup.
pub fn unavailable(reason: String) -> Error {
    Error::new(
        Status::BackendUnavailable,
        format!("the CUDA backend is unavailable: {reason}"),
    )
}

/// Lets `a` and `b` access each other's memory directly where the GPUs
/// allow it (NVLink or PCIe peer-to-peer): true when they can (or are one
/// device). Copies between them work either way; without it the driver
/// stages them through the host.
pub fn enable_peer_access(a: &Device, b: &Device) -> Result<bool> {
    if a.ordinal == b.ordinal {
        return Ok(true);
    }
    let mut can = 0;
    // SAFETY: two valid device handles and a local out-parameter.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, a.ctx.cu_device(), b.ctx.cu_device()) }
        .result()
        .map_err(|e| driver_error("asking for peer access between GPUs", e))?;
    if can == 0 {
        return Ok(false);
    }
    for (from, to) in [(a, b), (b, a)] {
        from.bind()?;
        // SAFETY: `to`'s primary context is alive (held by its Device).
        match unsafe { sys::cuCtxEnablePeerAccess(to.ctx.cu_ctx(), 0) } {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
            }
            e => {
                return Err(driver_error(
                    "enabling peer access between GPUs",
                    result::DriverError(e),
                ))
            }
        }
    }
    Ok(true)
}
