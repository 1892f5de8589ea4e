# Compiles the NUFFT and fast-path kernels with NVRTC (no GPU needed: libnvrtc from the
# pip wheel nvidia-cuda-nvrtc) for sm_90 cubins in every configuration the
# executor uses, printing errors and ptxas's resource report.
# Usage: NVRTC_LIB=/path/libnvrtc.so.13 python3 nvrtc_check.py [filter]
import ctypes as C, os, sys, itertools
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
lib = C.CDLL(os.environ.get("NVRTC_LIB", "libnvrtc.so.13"))
def src(*names):
    return "\n".join(open(os.path.join(root, "kernels", n)).read() for n in names)
NUFFT = src("nufft_common.cu", "nufft_sort.cu", "nufft_spread.cu", "nufft_deconv.cu")
TOEP = src("nufft_toeplitz.cu")
def compile(source, opts, label):
    prog = C.c_void_p()
    assert lib.nvrtcCreateProgram(C.byref(prog), source.encode(), label.encode(), 0, None, None) == 0
    arr = (C.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
    n = C.c_size_t(); lib.nvrtcGetProgramLogSize(prog, C.byref(n))
    log = C.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, log)
    print(f"== {label} {' '.join(o for o in opts if o.startswith('-D'))}: rc={rc}")
    text = log.value.decode(errors="replace")
    for line in text.splitlines():
        if "error" in line or "warning" in line or "registers" in line or "spill" in line or "Compiling" in line:
            print("   ", line.strip())
    return rc
flt = sys.argv[1] if len(sys.argv) > 1 else ""
bad = 0
base = ["--gpu-architecture=sm_90", "-std=c++17", "--ptxas-options=-v"]
SPREAD_OUT = src("nufft_common.cu", "nufft_spread_out.cu")
for double, precise, dim, w in itertools.product([0, 1], [0, 1], [1, 2, 3], [2, 4, 7, 13, 16]):
    if double == 0 and w > 8: continue
    if double == 1 and precise: continue
    label = f"nufft_d{double}_p{precise}_dim{dim}_w{w}"
    if flt not in label: continue
    opts = base + [f"-DDOUBLE={double}", f"-DPRECISE={precise}", f"-DDIM={dim}", f"-DWIDTH={w}", "-DSM_THREADS=256"]
    bad += compile(NUFFT, opts, label) != 0
    bad += compile(SPREAD_OUT, opts + ["-DSPREAD_BATCH=64", f"-DFLUSH_PAIRS={1 - double}"], label + "_out") != 0
for double, mode in [(0, 1), (1, 0), (1, 2)]:
    if flt and flt not in "toeplitz": continue
    bad += compile(TOEP, base + [f"-DDOUBLE={double}", f"-DMODE={mode}"], "nufft_toeplitz") != 0
FAST = src("complex.cu", "fast.cu")
for mode in [0, 2]:
    if flt and flt not in "fast":
        continue
    bad += compile(FAST, base + [f"-DMODE={mode}"], "fast") != 0
print("failures:", bad)
sys.exit(1 if bad else 0)
