//! NVRTC output cached on disk, so that a new process loads the kernels it
//! compiled before instead of compiling them again.
//!
//! A module is compiled to a CUBIN for the device's exact architecture
//! (`sm_XY`) and stored as `<dir>/<key>.cubin`, the key a 128-bit hash of
//! the source text, the NVRTC options, the compute capability and the
//! driver and NVRTC versions; the file begins with a header line repeating
//! the options, capability and versions and the source's length, which a
//! read must match. `<dir>` is `$HORECON_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/horecon`, else `$HOME/.cache/horecon`. Files are written
//! to a temporary name and renamed, so concurrent processes never read half a
//! file. Any failure to read or write the cache (no directory, read-only,
//! full disk, a corrupt file) silently falls back to compiling; a CUBIN that
//! NVRTC cannot produce falls back to PTX (not cached; the driver's own JIT
//! cache keeps it). `HORECON_CACHE_DIR=` (empty) switches the cache off.

use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};
use std::collections::hash_map::DefaultHasher;
use std::ffi::{CStr, CString};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

/// The cache directory, or `None` when none can be named.
pub fn directory() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HORECON_CACHE_DIR") {
        return if dir.is_empty() {
            None
        } else {
            Some(PathBuf::from(dir))
        };
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(xdg).join("horecon"));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| PathBuf::from(home).join(".cache").join("horecon"))
}

/// What identifies a compiled module besides its source.
struct Identity {
    header: String,
    key: String,
}

fn versions() -> String {
    let mut driver = 0i32;
    // SAFETY: writes one integer; the driver library is loaded (probe()).
    let _ = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver) };
    let (mut major, mut minor) = (0i32, 0i32);
    // SAFETY: writes two integers; NVRTC is loaded (probe()).
    let _ = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
    format!("driver {driver} nvrtc {major}.{minor}")
}

fn identity(source: &str, options: &[String], capability: (i32, i32), versions: &str) -> Identity {
    let header = format!(
        "horecon module cache v1; sm_{}{}; {versions}; options {}; source {} bytes\n",
        capability.0,
        capability.1,
        options.join(" "),
        source.len()
    );
    let hash = |salt: u64| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        header.hash(&mut h);
        source.hash(&mut h);
        h.finish()
    };
    Identity {
        key: format!("{:016x}{:016x}", hash(0x9e37_79b9), hash(0x7f4a_7c15)),
        header,
    }
}

fn read(path: &PathBuf, header: &str) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let rest = bytes.strip_prefix(header.as_bytes())?;
    (!rest.is_empty()).then(|| rest.to_vec())
}

fn write(dir: &PathBuf, path: &PathBuf, header: &str, cubin: &[u8]) {
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let temporary = dir.join(format!(
        ".{}.{}.tmp",
        std::process::id(),
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("module")
    ));
    let mut contents = Vec::with_capacity(header.len() + cubin.len());
    contents.extend_from_slice(header.as_bytes());
    contents.extend_from_slice(cubin);
    if std::fs::write(&temporary, &contents).is_ok() && std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

/// Compiles `source` with `options` (the architecture option is set here)
/// for a device of compute capability `capability`: the cached CUBIN when
/// there is one, else a fresh CUBIN (stored), else PTX. `Err` carries
/// NVRTC's log.
pub fn compile(
    source: &str,
    name: &str,
    options: &[String],
    capability: (i32, i32),
) -> Result<Ptx, String> {
    let dump = std::env::var_os("HORECON_CUDA_DUMP_PTX").is_some();
    if !dump {
        let id = identity(source, options, capability, &versions());
        let dir = directory();
        let path = dir.as_ref().map(|d| d.join(format!("{}.cubin", id.key)));
        if let Some(cubin) = path.as_ref().and_then(|p| read(p, &id.header)) {
            return Ok(Ptx::from_binary(cubin));
        }
        let mut with_arch = options.to_vec();
        with_arch.push(format!(
            "--gpu-architecture=sm_{}{}",
            capability.0, capability.1
        ));
        if let Ok(cubin) = nvrtc_output(source, name, &with_arch, true) {
            if let (Some(dir), Some(path)) = (dir.as_ref(), path.as_ref()) {
                write(dir, path, &id.header, &cubin);
            }
            return Ok(Ptx::from_binary(cubin));
        }
    }
    let mut with_arch = options.to_vec();
    with_arch.push(format!(
        "--gpu-architecture=compute_{}{}",
        capability.0, capability.1
    ));
    let mut ptx = nvrtc_output(source, name, &with_arch, false)?;
    if ptx.last() != Some(&0) {
        ptx.push(0);
    }
    let text = CStr::from_bytes_until_nul(&ptx)
        .map_err(|e| format!("NVRTC returned malformed PTX ({e})"))?
        .to_string_lossy()
        .into_owned();
    Ok(Ptx::from_src(text))
}

/// One NVRTC compilation: the CUBIN (`cubin`) or the PTX bytes, or the log.
fn nvrtc_output(
    source: &str,
    name: &str,
    options: &[String],
    cubin: bool,
) -> Result<Vec<u8>, String> {
    let src = CString::new(source).map_err(|_| "kernel source holds a NUL byte".to_string())?;
    let label = CString::new(name).map_err(|_| "kernel name holds a NUL byte".to_string())?;
    let program = nvrtc::create_program(&src, Some(label.as_c_str()))
        .map_err(|e| format!("NVRTC could not create a program ({e:?})"))?;
    struct Program(nvrtc_sys::nvrtcProgram);
    impl Drop for Program {
        fn drop(&mut self) {
            // SAFETY: created above, destroyed once.
            let _ = unsafe { nvrtc::destroy_program(self.0) };
        }
    }
    let program = Program(program);
    // SAFETY: a live program; options are plain strings.
    if let Err(e) = unsafe { nvrtc::compile_program(program.0, options) } {
        // SAFETY: the program is live.
        let log = unsafe { nvrtc::get_program_log(program.0) }
            .map(|l| {
                let bytes: Vec<u8> = l.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            })
            .unwrap_or_default();
        return Err(format!("{e:?}: {log}"));
    }
    if !cubin {
        // SAFETY: the program compiled.
        return unsafe { nvrtc::get_ptx(program.0) }
            .map(|p| p.iter().map(|&c| c as u8).collect())
            .map_err(|e| format!("NVRTC gave no PTX ({e:?})"));
    }
    let mut size = 0usize;
    // SAFETY: the program compiled; writes the size.
    let status = unsafe { nvrtc_sys::nvrtcGetCUBINSize(program.0, &mut size) };
    if status != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return Err(format!("NVRTC gave no CUBIN ({status:?})"));
    }
    let mut bytes = vec![0u8; size];
    // SAFETY: `bytes` holds `size` bytes.
    let status = unsafe { nvrtc_sys::nvrtcGetCUBIN(program.0, bytes.as_mut_ptr().cast()) };
    if status != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(format!("NVRTC gave no CUBIN ({status:?})"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_source_options_and_device() {
        let opts = vec!["-DA=1".to_string()];
        let v = "driver 13000 nvrtc 13.0";
        let a = identity("kernel", &opts, (9, 0), v);
        assert_eq!(a.key, identity("kernel", &opts, (9, 0), v).key);
        assert_ne!(a.key, identity("kernel2", &opts, (9, 0), v).key);
        assert_ne!(a.key, identity("kernel", &[], (9, 0), v).key);
        assert_ne!(a.key, identity("kernel", &opts, (8, 0), v).key);
        assert_ne!(
            a.key,
            identity("kernel", &opts, (9, 0), "driver 12080 nvrtc 12.8").key
        );
        assert_eq!(a.key.len(), 32);
    }

    #[test]
    fn a_file_is_used_only_under_its_own_header() {
        let dir = std::env::temp_dir().join(format!("horecon-cache-test-{}", std::process::id()));
        let path = dir.join("k.cubin");
        write(&dir, &path, "header A\n", b"binary");
        assert_eq!(read(&path, "header A\n").as_deref(), Some(&b"binary"[..]));
        assert!(read(&path, "header B\n").is_none());
        let _ = std::fs::remove_dir_all(&dir);
        // An unwritable directory is silently skipped.
        write(
            &PathBuf::from("/proc/horecon-no"),
            &PathBuf::from("/proc/horecon-no/k"),
            "h",
            b"x",
        );
    }
}
