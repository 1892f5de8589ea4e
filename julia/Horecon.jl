# Horecon.jl: a thin `ccall` mirror of the Python binding (python/horecon/__init__.py,
# python/horecon/sim.py) over the C API of libhorecon (include/horecon.h).
#
# Tested by julia/test/runtests.jl (scripts/julia_tests.sh, a step of
# scripts/test) against float64 direct sums, on Julia 1.5 (Debian bullseye's,
# which .ci/run installs on Debian 12). The file is kept deliberately
# mechanical (one Julia function per C function, the same checks as the
# Python binding) so that it can be reviewed against the header by eye.
#
# Usage:
#     include("julia/Horecon.jl"); using .Horecon
#     p = Horecon.Plan((64, 64), 8, M)            # backend = "auto", precision = "accurate"
#     Horecon.set_grid_positions!(p, (0.22, 0.22, 0.005), (0.0, 0.0, 0.02))
#     Horecon.set_solid_harmonics!(p, coef)        # M x 16, rad/m^order
#     Horecon.set_sensitivities!(p, S)             # N x L ComplexF32
#     x, info = Horecon.cg(p, d; max_iterations = 20)
#
# Model (MODEL.md): phi(j,n) = sum_b coef[j,b] h_b(r_n) + omega_n t_j,
# E[(j,c),n] = S_c(r_n) exp(+i phi(j,n)); a user whose convention is
# exp(-i k.r) passes -k. Julia arrays are column-major, which is MODEL.md's
# layout (first index fastest): positions N x 3, coefficients M x B,
# sensitivities N x L, data M x L, images N (or nx x ny x nz).
#
# Library: ENV["HORECON_LIB"], else <repo>/target/release/libhorecon.so.
# The CG iteration callback is not exposed: the library calls it from a worker
# thread, which Julia supports only for adopted foreign threads (Julia >= 1.9).
# The progress of long calls is (issue 11): the library calls it on the
# calling thread, within the ccall (python/horecon/_progress.py):
#     x = Horecon.adjoint(p, d; progress = true)        # a text line on stderr after 1 s
#     x = Horecon.adjoint(p, d; progress = f -> false)  # f(fraction), true cancels
#     Horecon.cancel(p)                                  # from another task or thread
#     host, device = Horecon.memory(p, "cg")             # bytes the call needs
# Ctrl-C in a long call (an InterruptException in the callback) cancels it
# (HORECON_ERR_CANCELLED in the library) and is rethrown.
# Submodules: Horecon.Sim (simulation toolkit), Horecon.Calib (whitening,
# ESPIRiT, Walsh, B0 map, delay; python/horecon/calib.py) and Horecon.Nufft
# (the NUFFT engine; python/horecon/nufft.py).
module Horecon

export Plan, HoreconError, version, cuda_device_count, forward, adjoint, normal, cg, fhd, q, q_dims,
       gridding,
       set_positions!, set_grid_positions!, set_solid_harmonics!, set_basis!,
       set_trajectory!, set_off_resonance!, set_sensitivities!, set_toeplitz!, set_cartesian!,
       backend, close!, cancel, memory, set_approximation!, approximation_info, phase_terms

const LIB = get(ENV, "HORECON_LIB", joinpath(@__DIR__, "..", "target", "release", "libhorecon.so"))

const STATUS_NAMES = Dict{Int32,String}(
    1 => "HORECON_ERR_NULL_POINTER", 2 => "HORECON_ERR_INVALID_ARGUMENT",
    3 => "HORECON_ERR_SIZE_MISMATCH", 4 => "HORECON_ERR_NOT_FINITE",
    5 => "HORECON_ERR_INCOMPLETE_PLAN", 6 => "HORECON_ERR_OUT_OF_MEMORY",
    7 => "HORECON_ERR_BACKEND_UNAVAILABLE", 8 => "HORECON_ERR_BACKEND",
    9 => "HORECON_ERR_CANCELLED", 99 => "HORECON_ERR_INTERNAL")

const BACKENDS = Dict("auto" => Int32(0), "cpu" => Int32(1), "cuda" => Int32(2))
const PRECISIONS = Dict("accurate" => Int32(0), "fast" => Int32(1), "double" => Int32(2))
const REGULARIZERS = Dict("none" => Int32(0), "tikhonov" => Int32(1), "finite_difference" => Int32(2),
                          "total_variation" => Int32(3), "laplace" => Int32(4))

"""A failing library call: status code, its name and horecon_last_error()."""
struct HoreconError <: Exception
    status::Int32
    name::String
    message::String
end
Base.showerror(io::IO, e::HoreconError) = print(io, e.name, ": ", e.message)

last_error() = unsafe_string(ccall((:horecon_last_error, LIB), Cstring, ()))

function check(status::Int32)
    status == 0 && return nothing
    throw(HoreconError(status, get(STATUS_NAMES, status, "unknown status"), last_error()))
end

size_error(msg) = throw(HoreconError(Int32(3), "HORECON_ERR_SIZE_MISMATCH", msg))
"""A field of view, centre or other 3-vector from `a`: 3 entries, or 1 for all three axes."""
vec3(name, a) = (v = Vector{Float64}(vec(collect(a))); length(v) == 3 ? v :
                 length(v) == 1 ? fill(v[1], 3) : size_error("$(name) must have 3 entries (or 1), got $(length(v))"))
invalid(msg) = throw(HoreconError(Int32(2), "HORECON_ERR_INVALID_ARGUMENT", msg))

# ------------------------------------------------ progress and cancellation
# One trampoline (horecon_fraction_fn) for every plan and the toolkit; it hands
# the fraction to the handler of the call running on this task (task-local:
# the library calls it on the calling thread, inside the ccall).

"""The progress of one long call: `progress` nothing/false (none), true (a text
line on stderr for calls over a second) or f(fraction) -> true to cancel."""
mutable struct ProgressHandler
    progress::Any
    label::String
    started::Float64
    shown::Bool
    raised::Any  # an exception of the callback (Ctrl-C included), rethrown after the call
end

function progress_trampoline(::Ptr{Cvoid}, fraction::Float64)::Int32
    h = get(task_local_storage(), :horecon_progress, nothing)
    h === nothing && return Int32(0)
    try
        if h.progress === true
            if time() - h.started > 1.0
                print(stderr, "\rhorecon ", h.label, ": ", round(Int, 100 * fraction), " %")
                h.shown = true
            end
            return Int32(0)
        elseif h.progress === nothing || h.progress === false
            return Int32(0)
        end
        return Int32(h.progress(fraction) === true ? 1 : 0)
    catch e  # never unwinds into the library: stops the call, rethrown after it
        h.raised = e
        return Int32(1)
    end
end

const TRAMPOLINE = Ref{Ptr{Cvoid}}(C_NULL)

function __init__()
    TRAMPOLINE[] = @cfunction(progress_trampoline, Int32, (Ptr{Cvoid}, Float64))
end

"""Runs `call()` (a ccall returning a status) as the long call `label` with
`progress`; the callback's exception (Ctrl-C included) is rethrown after it."""
function long_call(call, label, progress)
    (progress === nothing || progress isa Bool || progress isa Function) ||
        invalid("$(label): progress must be nothing, true, false or f(fraction) -> Bool, got $(typeof(progress))")
    h = ProgressHandler(progress, label, time(), false, nothing)
    status = task_local_storage(call, :horecon_progress, h)
    h.shown && println(stderr)
    (status != 0 && h.raised !== nothing) && throw(h.raised)
    check(status)
end

"""The library version, "MAJOR.MINOR.PATCH"."""
version() = unsafe_string(ccall((:horecon_version, LIB), Cstring, ()))

"""Usable CUDA devices (0 without driver or GPU)."""
function cuda_device_count()
    n = Ref{Int32}(0)
    check(ccall((:horecon_cuda_device_count, LIB), Int32, (Ref{Int32},), n))
    return Int(n[])
end

# horecon_options, horecon_cg_options, horecon_cg_info: the C layouts.
struct Options
    struct_size::UInt32
    backend::Int32
    device::Int32
    num_devices::Int32
    num_threads::Int32
    precision::Int32
    verbosity::Int32
end

struct CgOptions
    struct_size::UInt32
    max_iterations::Int32
    tolerance::Float64
    regularizer::Int32
    lambda::Float64
    reweightings::Int32
    epsilon::Float64
    sigma::Float64
    sample_weights::Ptr{Float32}
    fd_weights::Ptr{Float32}
    warm_start::Int32
    progress::Ptr{Cvoid}
    progress_user::Ptr{Cvoid}
    neighbours::Int32
    # Added at the end (issue 12): mirrors include/horecon.h, whose
    # horecon_default_cg_options fills the whole struct.
    preconditioner::Int32
    discrepancy_tau::Float64
    noise_sigma::Float64
end

struct CgInfo
    iterations::Int32
    converged::Int32
    rel_residual::Float64
    seconds::Float64
    stop_reason::Int32
    data_residual::Float64
end

"""
    Plan(dims, ncoils, nsamples; backend="auto", precision="accurate", device=0, threads=0, verbosity=0)

A reconstruction plan for an image of size `dims` (1 to 3 entries), `ncoils`
coils and `nsamples` samples per coil. Freed by `close!` or the finalizer.
"""
mutable struct Plan
    handle::Ptr{Cvoid}
    dims::NTuple{3,Int}
    shape::Tuple
    ncoils::Int
    nsamples::Int
    function Plan(dims, ncoils::Integer, nsamples::Integer; backend = "auto", precision = "accurate",
                  device::Integer = 0, num_devices::Integer = 1, threads::Integer = 0, verbosity::Integer = 0)
        d = Tuple(Int.(collect(dims)))
        1 <= length(d) <= 3 || invalid("dims must have 1 to 3 entries, got $(dims)")
        d3 = (d..., ntuple(_ -> 1, 3 - length(d))...)
        haskey(BACKENDS, backend) || invalid("backend must be auto, cpu or cuda, got $(backend)")
        haskey(PRECISIONS, precision) || invalid("precision must be accurate, fast or double, got $(precision)")
        defaults = Ref{Options}()
        ccall((:horecon_default_options, LIB), Cvoid, (Ref{Options},), defaults)
        o = defaults[]
        opts = Ref(Options(o.struct_size, BACKENDS[backend], Int32(device), Int32(num_devices),
                           Int32(threads), PRECISIONS[precision], Int32(verbosity)))
        out = Ref{Ptr{Cvoid}}(C_NULL)
        check(ccall((:horecon_plan_create, LIB), Int32,
                    (Ref{Options}, Int64, Int64, Int64, Int64, Int64, Ref{Ptr{Cvoid}}),
                    opts, d3[1], d3[2], d3[3], ncoils, nsamples, out))
        shape = (length(d) == 3 && d3[3] == 1) ? d[1:2] : d
        p = new(out[], d3, shape, Int(ncoils), Int(nsamples))
        finalizer(close!, p)
        check(ccall((:horecon_set_progress, LIB), Int32, (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Cvoid}),
                    p.handle, TRAMPOLINE[], C_NULL))
        return p
    end
end

"""Clears `owner.handle` and hands the handle it held to `destroy` (once: idempotent)."""
function release!(destroy, owner)
    if owner.handle != C_NULL
        h = owner.handle
        owner.handle = C_NULL
        destroy(h)
    end
    return nothing
end

"""Destroys the plan (idempotent)."""
close!(p::Plan) = release!(h -> ccall((:horecon_plan_destroy, LIB), Int32, (Ptr{Cvoid},), h), p)

nvoxels(p::Plan) = prod(p.dims)

"""Cancels the calls running on the plan now, from any task or thread: they
throw HoreconError(HORECON_ERR_CANCELLED); the plan stays usable."""
function cancel(p::Plan)
    p.handle == C_NULL && return nothing
    check(ccall((:horecon_cancel, LIB), Int32, (Ptr{Cvoid},), p.handle))
end

"""The calls of `memory` (HORECON_CALL_*)."""
const CALLS = Dict("forward" => Int32(0), "adjoint" => Int32(1), "normal" => Int32(2), "cg" => Int32(3),
                   "fhd" => Int32(4), "q" => Int32(5), "gridding" => Int32(6))

"""
    memory(p, call = "cg") -> (host_bytes, device_bytes)

The memory `call` ("forward", "adjoint", "normal", "cg", "fhd", "q" or
"gridding") needs at most, asked before running it (horecon_plan_memory).
"""
function memory(p::Plan, call::AbstractString = "cg")
    haskey(CALLS, call) || invalid("memory: call must be one of $(join(sort(collect(keys(CALLS))), ", ")), got $(call)")
    host, device = Ref{Int64}(0), Ref{Int64}(0)
    check(ccall((:horecon_plan_memory, LIB), Int32, (Ptr{Cvoid}, Int32, Ref{Int64}, Ref{Int64}),
                live(p), CALLS[call], host, device))
    return (Int(host[]), Int(device[]))
end

function live(p::Plan)
    p.handle == C_NULL && throw(HoreconError(Int32(1), "HORECON_ERR_NULL_POINTER", "the plan is closed"))
    return p.handle
end

"""A Float64 array of `n` elements (column-major, MODEL.md layout)."""
function real_in(name, a, n)
    a isa AbstractArray{<:Complex} && throw(ArgumentError("$(name) must be real"))
    v = Vector{Float64}(vec(a))
    length(v) == n || size_error("$(name) has $(length(v)) elements, expected $(n)")
    return v
end

function complex_in(name, a, n)
    v = Vector{ComplexF32}(vec(a))
    length(v) == n || size_error("$(name) has $(length(v)) elements, expected $(n)")
    return v
end

"""
A matrix argument of `rows` rows, read column-major as the C API does: a
matrix shaped as its transpose (`rows` columns and another number of rows,
more than one) is a size error, not a wrong result. Anything else goes by
its length: vectors, arrays of more dimensions, an image of the plan's grid,
one coil's data as a matrix.
"""
function check_rows(name, a, rows)
    a isa AbstractMatrix || return nothing
    (size(a, 1) > 1 && size(a, 1) != rows && size(a, 2) == rows) || return nothing
    size_error("$(name) is $(size(a, 1)) x $(size(a, 2)), expected $(rows) rows (a transposed matrix?)")
end

"""The data of `p` (M x L) as the C API reads it."""
function data_in(p::Plan, d)
    check_rows("data", d, p.nsamples)
    return complex_in("data", d, p.nsamples * p.ncoils)
end

"""The number of columns of a rows x B matrix (`check_rows`)."""
function columns(name, a, rows)
    check_rows(name, a, rows)
    n = length(a)
    (n > 0 && n % rows == 0) || size_error("$(name) has $(n) elements, not a multiple of $(rows)")
    return n ÷ rows
end

function set_positions!(p::Plan, P)
    check_rows("positions", P, nvoxels(p))
    check(ccall((:horecon_set_positions, LIB), Int32, (Ptr{Cvoid}, Ptr{Float64}), live(p),
                real_in("positions", P, 3 * nvoxels(p))))
end

set_grid_positions!(p::Plan, fov, center = (0.0, 0.0, 0.0)) =
    check(ccall((:horecon_set_grid_positions, LIB), Int32, (Ptr{Cvoid}, Ptr{Float64}, Ptr{Float64}),
                live(p), real_in("fov", collect(fov), 3), real_in("center", collect(center), 3)))

"""
Cartesian FFT mode: the samples are the grid points where `mask` (nx x ny x nz,
Bool or numbers, != 0 = sampled) is set, column-major, so nsamples == count.
Needs grid positions; sets the trajectory k = 2pi (p - n÷2) ./ fov; E, E^H,
E^H E and cg are then computed exactly with FFTs. A later positions or
phase-model setter leaves Cartesian mode; off-resonance is refused.
"""
function set_cartesian!(p::Plan, mask)
    length(mask) == nvoxels(p) ||
        size_error("mask has $(length(mask)) elements, expected $(nvoxels(p))")
    m = UInt8[x != 0 ? 0x01 : 0x00 for x in vec(mask)]
    check(ccall((:horecon_set_cartesian, LIB), Int32, (Ptr{Cvoid}, Ptr{UInt8}), live(p), m))
end

function set_solid_harmonics!(p::Plan, coefficients)
    b = columns("coefficients", coefficients, p.nsamples)
    check(ccall((:horecon_set_solid_harmonics, LIB), Int32, (Ptr{Cvoid}, Int32, Ptr{Float64}), live(p),
                Int32(b), real_in("coefficients", coefficients, b * p.nsamples)))
end

function set_basis!(p::Plan, basis, coefficients)
    b = columns("basis", basis, nvoxels(p))
    check_rows("coefficients", coefficients, p.nsamples)
    check(ccall((:horecon_set_basis, LIB), Int32, (Ptr{Cvoid}, Int32, Ptr{Float64}, Ptr{Float64}), live(p),
                Int32(b), real_in("basis", basis, b * nvoxels(p)),
                real_in("coefficients", coefficients, b * p.nsamples)))
end

function set_trajectory!(p::Plan, k)
    d = columns("k", k, p.nsamples)
    check(ccall((:horecon_set_trajectory, LIB), Int32, (Ptr{Cvoid}, Int32, Ptr{Float64}), live(p),
                Int32(d), real_in("k", k, d * p.nsamples)))
end

"""Off-resonance omega (N, rad/s) with sample times (M, s); `nothing` clears it."""
function set_off_resonance!(p::Plan, omega, times = nothing)
    if omega === nothing
        return check(ccall((:horecon_set_off_resonance, LIB), Int32, (Ptr{Cvoid}, Ptr{Float64}, Ptr{Float64}),
                           live(p), C_NULL, C_NULL))
    end
    times === nothing && invalid("times are required with omega")
    check(ccall((:horecon_set_off_resonance, LIB), Int32, (Ptr{Cvoid}, Ptr{Float64}, Ptr{Float64}), live(p),
                real_in("omega", omega, nvoxels(p)), real_in("times", times, p.nsamples)))
end

"""Coil sensitivities N x L (or dims..., L); `nothing` means S = 1 (one coil only)."""
function set_sensitivities!(p::Plan, S)
    if S === nothing
        return check(ccall((:horecon_set_sensitivities, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}),
                           live(p), C_NULL))
    end
    check_rows("sensitivities", S, nvoxels(p))
    check(ccall((:horecon_set_sensitivities, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}), live(p),
                complex_in("sensitivities", S, nvoxels(p) * p.ncoils)))
end

"""Toeplitz normal operator for `normal` and `cg` (E^H W E by FFTs of the
2x-oversampled grid with exact kernels; forward and adjoint stay exact).
Needs a phase linear in position on a voxel grid, checked at the next
normal/cg. With off-resonance, `time_segments` segments (0 = automatic,
normal operator within 1e-3). `enable = false` restores the exact operator."""
function set_toeplitz!(p::Plan, enable::Bool = true, time_segments::Integer = 0)
    check(ccall((:horecon_set_toeplitz, LIB), Int32, (Ptr{Cvoid}, Int32, Int32), live(p),
                Int32(enable), Int32(time_segments)))
end

"""
    set_approximation!(p, tolerance)

The fast path: `tolerance` in [1e-5, 0.1] makes forward, adjoint, fhd, normal
and cg use a separable expansion of the higher-order and off-resonance phase on
top of a NUFFT (relative RMS error vs the exact operator <= tolerance); 0 (the
default) = exact. Needs voxels on a lattice, else the operators stay exact and
`approximation_info(p).reason` says why."""
function set_approximation!(p::Plan, tolerance::Real)
    check(ccall((:horecon_set_approximation, LIB), Int32, (Ptr{Cvoid}, Float64), live(p),
                Float64(tolerance)))
end

struct ApproximationInfoC
    struct_size::UInt32
    active::Int32
    rank::Int32
    estimated_error::Float64
    reason::NTuple{160, UInt8}
end

"""
    approximation_info(p) -> (active, rank, estimated_error, reason)

Whether the fast path is in use, its rank K, its error measured against the
exact operator on random probes when the plan is prepared, and why not."""
function approximation_info(p::Plan)
    info = Ref(ApproximationInfoC(UInt32(sizeof(ApproximationInfoC)), 0, 0, 0.0, ntuple(_ -> 0x00, 160)))
    check(ccall((:horecon_get_approximation_info, LIB), Int32,
                (Ptr{Cvoid}, Ref{ApproximationInfoC}), live(p), info))
    r = info[]
    bytes = collect(r.reason)
    reason = String(bytes[1:something(findfirst(==(0x00), bytes), 161) - 1])
    return (active = r.active != 0, rank = Int(r.rank), estimated_error = r.estimated_error,
            reason = reason)
end

"""d = E x: image (N or dims) -> data M x L (ComplexF32). `progress` (every long
call): nothing, true (a text line after 1 s) or f(fraction) -> true to cancel."""
function forward(p::Plan, x; progress = nothing)
    xin = complex_in("image", x, nvoxels(p))
    d = Matrix{ComplexF32}(undef, p.nsamples, p.ncoils)
    long_call("forward", progress) do
        ccall((:horecon_forward, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}, Ptr{ComplexF32}), live(p), xin, d)
    end
    return d
end

"""x = E^H d: data M x L -> image in the plan's shape."""
function adjoint(p::Plan, d; progress = nothing)
    din = data_in(p, d)
    x = Vector{ComplexF32}(undef, nvoxels(p))
    long_call("adjoint", progress) do
        ccall((:horecon_adjoint, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}, Ptr{ComplexF32}), live(p), din, x)
    end
    return reshape(x, p.shape)
end

"""y = E^H E x in the plan's image shape."""
function normal(p::Plan, x; progress = nothing)
    xin = complex_in("image", x, nvoxels(p))
    y = Vector{ComplexF32}(undef, nvoxels(p))
    long_call("normal", progress) do
        ccall((:horecon_normal, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}, Ptr{ComplexF32}), live(p), xin, y)
    end
    return reshape(y, p.shape)
end

"""
    gridding(p, d, dcf = nothing) -> image

The gridding reconstruction (Kaiser-Bessel width 6, 2x oversampling, FFT,
deapodization), the seeds' comparison method: approximates
x_c(r_n) = sum_j dcf_j d_jc exp(-i (k0_j + k_j . r_n)), combined as
sum_c conj(S_c) x_c / sum_c |S_c|^2 with sensitivities and as the
root-sum-of-squares for several coils without. Voxels on a regular grid;
phase model set_trajectory! or solid harmonics (orders 0 and 1 used); a user
basis is refused. `dcf` M non-negative weights or `nothing` (Pipe-Menon).
"""
function gridding(p::Plan, d, dcf = nothing; progress = nothing)
    din = data_in(p, d)
    # ccall converts a Vector{Float32} to a pointer kept alive for the call, C_NULL as is.
    w = dcf === nothing ? Ptr{Cfloat}(C_NULL) : Vector{Float32}(real_in("dcf", dcf, p.nsamples))
    x = Vector{ComplexF32}(undef, nvoxels(p))
    long_call("gridding", progress) do
        ccall((:horecon_gridding, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}, Ptr{Cfloat}, Ptr{ComplexF32}),
              live(p), din, w, x)
    end
    return reshape(x, p.shape)
end

"""
    fhd(p, d, phi=nothing)

Stone et al.'s F^H d (eq. 4) for a single-coil trajectory plan (Stone's k in
cycles/m given to the plan as -2π k): x_n = Σ_m conj(phi_m) d_m exp(+i2π k_m·x_n);
phi = nothing means 1.
"""
function fhd(p::Plan, d, phi = nothing; progress = nothing)
    din = complex_in("data", d, p.nsamples)
    pin = phi === nothing ? nothing : complex_in("phi", phi, p.nsamples)
    x = Vector{ComplexF32}(undef, nvoxels(p))
    GC.@preserve pin begin
        long_call("fhd", progress) do
            ccall((:horecon_fhd, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}, Ptr{ComplexF32}, Ptr{ComplexF32}),
                  live(p), din, pin === nothing ? Ptr{ComplexF32}(C_NULL) : pointer(pin), x)
        end
    end
    return reshape(x, p.shape)
end

"""The size of Stone's Q: 2n along every axis of more than one voxel, else 1."""
function q_dims(p::Plan)
    dims = Vector{Int64}(undef, 3)
    check(ccall((:horecon_q_dims, LIB), Int32, (Ptr{Cvoid}, Ptr{Int64}), live(p), dims))
    return (dims[1], dims[2], dims[3])
end

"""
    q(p, phi_mag2=nothing)

Stone et al.'s Q (eq. 3) on the 2×-oversampled grid of lattice offsets (size
`q_dims(p)`; index (nx+1, ny+1, nz+1) is offset 0); phi_mag2 = nothing means 1.
"""
function q(p::Plan, phi_mag2 = nothing; progress = nothing)
    w = phi_mag2 === nothing ? nothing : Vector{Float32}(real_in("phi_mag2", phi_mag2, p.nsamples))
    dims = q_dims(p)
    out = Vector{ComplexF32}(undef, prod(dims))
    GC.@preserve w begin
        long_call("q", progress) do
            ccall((:horecon_q, LIB), Int32, (Ptr{Cvoid}, Ptr{Float32}, Ptr{ComplexF32}),
                  live(p), w === nothing ? Ptr{Float32}(C_NULL) : pointer(w), out)
        end
    end
    return reshape(out, dims)
end

"""
    cg(p, d; max_iterations=50, tolerance=1e-6, regularizer="none", lambda=0.0,
       sample_weights=nothing, x0=nothing, reweightings=5, epsilon=1e-3, sigma=1.0,
       fd_weights=nothing, neighbours=6, progress=nothing) -> (image, info)

CG on (E^H W E + lambda R) x = E^H W d; info is a NamedTuple
(iterations, converged, rel_residual, seconds). The finite-difference
regularizers ("finite_difference", "total_variation", "laplace") take
`fd_weights` (N x ndirections, or nothing = 1) and `neighbours`: 6 =
differences along the grid axes (ndirections = axes of more than one voxel),
26 = to every neighbour, each edge once, weighted 1/|d|^2 (ndirections 13 in
3D, 4 in 2D, 1 in 1D; order in include/horecon.h at `neighbours`).
`progress`: of the whole solve, as for `forward` (Python's `bar=`).
"""
function cg(p::Plan, d; max_iterations::Integer = 50, tolerance::Real = 1e-6, regularizer = "none",
            lambda::Real = 0.0, sample_weights = nothing, x0 = nothing, reweightings = nothing,
            epsilon = nothing, sigma = nothing, fd_weights = nothing, neighbours::Integer = 6,
            progress = nothing)
    din = data_in(p, d)
    haskey(REGULARIZERS, regularizer) || invalid("unknown regularizer $(regularizer)")
    w = sample_weights === nothing ? nothing : Vector{Float32}(real_in("sample_weights", sample_weights, p.nsamples))
    axes = count(>(1), p.dims)
    ndirections = neighbours == 26 ? (axes == 3 ? 13 : axes == 2 ? 4 : 1) : max(axes, 1)
    u = fd_weights === nothing ? nothing :
        Vector{Float32}(real_in("fd_weights", fd_weights, nvoxels(p) * ndirections))
    x = x0 === nothing ? zeros(ComplexF32, nvoxels(p)) : complex_in("x0", x0, nvoxels(p))
    defaults = Ref{CgOptions}()
    ccall((:horecon_default_cg_options, LIB), Cvoid, (Ref{CgOptions},), defaults)
    o = defaults[]
    info = Ref{CgInfo}(CgInfo(0, 0, 0.0, 0.0, 0, -1.0))
    GC.@preserve w u din x begin
        opts = Ref(CgOptions(o.struct_size, Int32(max_iterations), Float64(tolerance), REGULARIZERS[regularizer],
                             Float64(lambda),
                             reweightings === nothing ? o.reweightings : Int32(reweightings),
                             epsilon === nothing ? o.epsilon : Float64(epsilon),
                             sigma === nothing ? o.sigma : Float64(sigma),
                             w === nothing ? Ptr{Float32}(C_NULL) : pointer(w),
                             u === nothing ? Ptr{Float32}(C_NULL) : pointer(u),
                             Int32(x0 === nothing ? 0 : 1), C_NULL, C_NULL, Int32(neighbours),
                             o.preconditioner, o.discrepancy_tau, o.noise_sigma))
        long_call("cg", progress) do
            ccall((:horecon_cg, LIB), Int32,
                  (Ptr{Cvoid}, Ptr{ComplexF32}, Ref{CgOptions}, Ptr{ComplexF32}, Ref{CgInfo}),
                  live(p), din, opts, x, info)
        end
    end
    i = info[]
    return reshape(x, p.shape), (iterations = Int(i.iterations), converged = i.converged != 0,
                                 rel_residual = i.rel_residual, seconds = i.seconds)
end

"""`"cpu"` or `"cuda"`: where the plan's operators run."""
function backend(p::Plan)
    b = Ref{Int32}(0)
    check(ccall((:horecon_plan_backend, LIB), Int32, (Ptr{Cvoid}, Ref{Int32}), live(p), b))
    return b[] == 2 ? "cuda" : "cpu"
end

"""The simulation toolkit (horecon_sim_*), mirroring python/horecon/sim.py."""
module Sim

import ..Horecon: LIB, check, size_error, invalid, long_call, TRAMPOLINE, vec3

# A toolkit call with `progress` (as a plan's long calls): the callback of
# horecon_sim_* calls is per thread, set around the call.
function sim_call(call, label, progress)
    set(f) = ccall((:horecon_sim_set_progress, LIB), Int32, (Ptr{Cvoid}, Ptr{Cvoid}), f, C_NULL)
    long_call(label, progress) do
        set(TRAMPOLINE[])
        try
            call()
        finally
            set(C_NULL)
        end
    end
end

points(name, P) = (size(P, 2) == 3 && size(P, 1) > 0) ? size(P, 1) : size_error("$(name) must be N x 3")
f64(a) = Vector{Float64}(vec(a))

"""Phantom values (N) at positions P (N x 3); ndims 2 (z ignored) or 3."""
function shepp_logan(ndims::Integer, fov, center, P; progress = nothing)
    n = points("positions", P)
    out = Vector{Float64}(undef, n)
    sim_call("shepp_logan", progress) do
        ccall((:horecon_sim_shepp_logan, LIB), Int32,
              (Int32, Ptr{Float64}, Ptr{Float64}, Int64, Ptr{Float64}, Ptr{Float64}),
              ndims, vec3("fov", fov), vec3("center", center), n, f64(P), out)
    end
    return out
end

"""Analytic F(k) = int rho(r) exp(+i k.r) dr at k (M x d), ComplexF64."""
function shepp_logan_kspace(ndims::Integer, fov, center, k::AbstractMatrix; progress = nothing)
    m, d = size(k)
    re, im = Vector{Float64}(undef, m), Vector{Float64}(undef, m)
    sim_call("shepp_logan_kspace", progress) do
        ccall((:horecon_sim_shepp_logan_kspace, LIB), Int32,
              (Int32, Ptr{Float64}, Ptr{Float64}, Int64, Int32, Ptr{Float64}, Ptr{Float64}, Ptr{Float64}),
              ndims, vec3("fov", fov), vec3("center", center), m, d, f64(k), re, im)
    end
    return complex.(re, im)
end

"""The 2D phantom through |k| <= kmax on a grid of field of view grid_fov (2)."""
function shepp_logan_band_limited(fov, center, P, grid_fov, kmax::Real; progress = nothing)
    n = points("positions", P)
    out = Vector{ComplexF32}(undef, n)
    sim_call("shepp_logan_band_limited", progress) do
        ccall((:horecon_sim_shepp_logan_band_limited, LIB), Int32,
              (Ptr{Float64}, Ptr{Float64}, Int64, Ptr{Float64}, Ptr{Float64}, Float64, Ptr{ComplexF32}),
              vec3("fov", fov), vec3("center", center), n, f64(P), f64(collect(grid_fov)), kmax, out)
    end
    return out
end

# Query the sample count (k, times NULL), then fill: the C API's protocol.
function trajectory(fn::Function, ndims::Int)
    m = Ref{Int64}(0)
    check(fn(m, Ptr{Float64}(C_NULL), Ptr{Float64}(C_NULL)))
    k = Matrix{Float64}(undef, m[], ndims)
    t = Vector{Float64}(undef, m[])
    check(fn(m, pointer(k), pointer(t)))
    return k, t
end

"""Single-shot spiral: (k (M x 2) rad/m, t (M) s)."""
spiral(n, fov, undersampling, dwell, t0 = 0.0) = trajectory(2) do m, k, t
    ccall((:horecon_sim_spiral, LIB), Int32, (Int64, Float64, Float64, Float64, Float64, Ref{Int64}, Ptr{Float64}, Ptr{Float64}),
          n, fov, undersampling, dwell, t0, m, k, t)
end

"""Radial spokes: (k (M x 2), t (M))."""
radial(n, fov, spokes, dwell, t0 = 0.0) = trajectory(2) do m, k, t
    ccall((:horecon_sim_radial, LIB), Int32, (Int64, Float64, Int64, Float64, Float64, Ref{Int64}, Ptr{Float64}, Ptr{Float64}),
          n, fov, spokes, dwell, t0, m, k, t)
end

"""Single-shot EPI: (k (M x 2), t (M))."""
epi(n, fov, undersampling, dwell, t0 = 0.0) = trajectory(2) do m, k, t
    ccall((:horecon_sim_epi, LIB), Int32, (Int64, Float64, Int64, Float64, Float64, Ref{Int64}, Ptr{Float64}, Ptr{Float64}),
          n, fov, undersampling, dwell, t0, m, k, t)
end

"""Cartesian grid: (k (M x 2), t (M))."""
cartesian(nx, ny, fov_x, fov_y, dwell, t0 = 0.0) = trajectory(2) do m, k, t
    ccall((:horecon_sim_cartesian, LIB), Int32,
          (Int64, Int64, Float64, Float64, Float64, Float64, Ref{Int64}, Ptr{Float64}, Ptr{Float64}),
          nx, ny, fov_x, fov_y, dwell, t0, m, k, t)
end

"""Stack of spirals: (k (M x 3), t (M))."""
stack_of_spirals(n, nz, fov, fov_z, undersampling, dwell, t0 = 0.0) = trajectory(3) do m, k, t
    ccall((:horecon_sim_stack_of_spirals, LIB), Int32,
          (Int64, Int64, Float64, Float64, Float64, Float64, Float64, Ref{Int64}, Ptr{Float64}, Ptr{Float64}),
          n, nz, fov, fov_z, undersampling, dwell, t0, m, k, t)
end

"""Density-compensation weights (M, Float32, mean 1) of a 2D readout k (M x 2)."""
function density_weights(k::AbstractMatrix)
    size(k, 2) == 2 || size_error("k must be M x 2")
    out = Vector{Float32}(undef, size(k, 1))
    check(ccall((:horecon_sim_density_weights, LIB), Int32, (Int64, Ptr{Float64}, Ptr{Float32}),
                size(k, 1), f64(k), out))
    return out
end

"""N x L ComplexF32 sensitivities of L coils on a circle of `radius` around `center`."""
function coil_sensitivities(P, ncoils::Integer, radius::Real, center = (0.0, 0.0, 0.0))
    n = points("positions", P)
    out = Matrix{ComplexF32}(undef, n, ncoils)
    check(ccall((:horecon_sim_coil_sensitivities, LIB), Int32,
                (Int64, Ptr{Float64}, Int32, Float64, Ptr{Float64}, Ptr{ComplexF32}),
                n, f64(P), ncoils, radius, vec3("center", center), out))
    return out
end

"""Smooth off-resonance map (N, rad/s) peaking at about max_hz."""
function off_resonance(P, fov, center, max_hz::Real)
    n = points("positions", P)
    out = Vector{Float64}(undef, n)
    check(ccall((:horecon_sim_off_resonance, LIB), Int32,
                (Int64, Ptr{Float64}, Ptr{Float64}, Ptr{Float64}, Float64, Ptr{Float64}),
                n, f64(P), vec3("fov", fov), vec3("center", center), max_hz, out))
    return out
end

"""M x 16 higher-order coefficients from a nominal trajectory k (M x d)."""
function field_coefficients(k::AbstractMatrix, dwell::Real, strength::Real = 1.0, seed::Integer = 2011)
    m, d = size(k)
    out = Matrix{Float64}(undef, m, 16)
    check(ccall((:horecon_sim_field_coefficients, LIB), Int32,
                (Int64, Int32, Ptr{Float64}, Float64, Float64, UInt64, Ptr{Float64}),
                m, d, f64(k), dwell, strength, seed, out))
    return out
end

"""(noisy copy of data, sigma) with rms(|d|)/rms(|noise|) = snr."""
function add_noise(data, snr::Real, seed::Integer = 1)
    d = Array{ComplexF32}(copy(data))
    sigma = Ref{Float64}(0.0)
    check(ccall((:horecon_sim_add_noise, LIB), Int32, (Int64, Ptr{ComplexF32}, Float64, UInt64, Ref{Float64}),
                length(d), d, snr, seed, sigma))
    return d, sigma[]
end

"""Positions of the grid `dims` refined by `factor` (N f^d x 3)."""
function refined_grid(dims, fov, center, factor::Integer)
    d = (Int.(collect(dims))..., ones(Int, 3 - length(dims))...)
    n = Ref{Int64}(0)
    check(ccall((:horecon_sim_refined_grid, LIB), Int32,
                (Int64, Int64, Int64, Ptr{Float64}, Ptr{Float64}, Int32, Ref{Int64}, Ptr{Float64}),
                d[1], d[2], d[3], vec3("fov", fov), vec3("center", center), factor, n, C_NULL))
    out = Matrix{Float64}(undef, n[], 3)
    check(ccall((:horecon_sim_refined_grid, LIB), Int32,
                (Int64, Int64, Int64, Ptr{Float64}, Ptr{Float64}, Int32, Ref{Int64}, Ptr{Float64}),
                d[1], d[2], d[3], vec3("fov", fov), vec3("center", center), factor, n, out))
    return out
end

"""A refined-grid image averaged back onto `dims` (ComplexF32, N)."""
function block_average(fine, dims, factor::Integer)
    d = (Int.(collect(dims))..., ones(Int, 3 - length(dims))...)
    expected = prod(x > 1 ? x * factor : 1 for x in d)
    x = Vector{ComplexF32}(vec(fine))
    length(x) == expected || size_error("fine has $(length(x)) elements, expected $(expected)")
    out = Vector{ComplexF32}(undef, prod(d))
    check(ccall((:horecon_sim_block_average, LIB), Int32,
                (Int64, Int64, Int64, Int32, Ptr{ComplexF32}, Ptr{ComplexF32}),
                d[1], d[2], d[3], factor, x, out))
    return out
end

function metric(sym::Symbol, x, ref)
    a, b = Vector{ComplexF32}(vec(x)), Vector{ComplexF32}(vec(ref))
    length(a) == length(b) || size_error("x has $(length(a)) elements, reference $(length(b))")
    out = Ref{Float64}(0.0)
    status = if sym === :nrmse
        ccall((:horecon_sim_nrmse, LIB), Int32, (Int64, Ptr{ComplexF32}, Ptr{ComplexF32}, Ref{Float64}), length(a), a, b, out)
    elseif sym === :psnr
        ccall((:horecon_sim_psnr, LIB), Int32, (Int64, Ptr{ComplexF32}, Ptr{ComplexF32}, Ref{Float64}), length(a), a, b, out)
    else
        ccall((:horecon_sim_percent_error, LIB), Int32, (Int64, Ptr{ComplexF32}, Ptr{ComplexF32}, Ref{Float64}), length(a), a, b, out)
    end
    check(status)
    return out[]
end

"""||x - ref|| / ||ref||."""
nrmse(x, ref) = metric(:nrmse, x, ref)
"""20 log10(max|ref| / sqrt(mean|x - ref|^2)) dB (Kirk-Hwu fig. 14.18)."""
psnr(x, ref) = metric(:psnr, x, ref)
"""100 ||x - ref|| / ||ref|| (Stone et al. 2008)."""
percent_error(x, ref) = metric(:percent_error, x, ref)

end # module Sim

"""B, the columns of the plan's phase-model coefficients (M x B), 0 when none is set."""
function phase_terms(p::Plan)
    terms = Ref{Int32}(0)
    check(ccall((:horecon_plan_phase_terms, LIB), Int32, (Ptr{Cvoid}, Ref{Int32}), live(p), terms))
    return Int(terms[])
end

"""
The calibration chain for real scans (src/ffi/calib.rs; python/horecon/calib.py):
noise whitening, ESPIRiT and Walsh coil maps, the B0 map from a multi-echo
reference, the delay of the field-monitoring coefficients, simulated references.
Reference scans are Cartesian k-space arrays [ix, iy, (iz,) coil (, echo)] on
MODEL.md's grid: voxel i at center + (i - n÷2)·fov/n, sample p at
k = 2π(p - n÷2)/fov. Maps and B0 maps come at the plan's positions:
`set_sensitivities!(p, maps)`, `set_off_resonance!(p, omega, times)`.
"""
module Calib

import ..Horecon: LIB, check, size_error, invalid, long_call, live, nvoxels, data_in, real_in, vec3,
                  check_rows, phase_terms, Plan

struct EspiritOptions
    struct_size::UInt32
    kernel::Int32
    calibration::Int32
    threshold::Float64
    crop::Float64
end

struct B0Options
    struct_size::UInt32
    max_iterations::Int32
    mask_threshold::Float64
    smoothness::Float64
end

struct DelayOptions
    struct_size::UInt32
    iterations::Int32
    range::Float64
    step::Float64
    tolerance::Float64
    lambda::Float64
    groups::UInt32
end

c32(a) = Vector{ComplexF32}(vec(a))
"""The reference grid of an array whose first `axes` dimensions are the grid (1 to 3)."""
function grid(name, a, axes)
    1 <= axes <= 3 || size_error("$(name) has $(ndims(a)) dimensions, expected (nx[, ny[, nz]], ...)")
    return Int64[i <= axes ? size(a, i) : 1 for i in 1:3]
end
"""A reference array [grid..., coil (, trailing...)] with the plan's coil count."""
function coil_array(name, a, p::Plan, trailing = 0)
    (ndims(a) >= 2 + trailing && size(a, ndims(a) - trailing) == p.ncoils) ||
        size_error("$(name) has size $(size(a)), expected (nx[, ny[, nz]], $(p.ncoils) coils" *
                   ", ..."^trailing * ")")
    return grid(name, a, ndims(a) - 1 - trailing)
end
"""The last dimension of `a` as the coils (L): (points, L)."""
function coil_rows(name, a, l)
    (ndims(a) >= 1 && size(a, ndims(a)) == l) ||
        size_error("$(name) has size $(size(a)), expected (..., $(l))")
    return length(a) ÷ max(l, 1)
end
function square(name, a)
    (ndims(a) == 2 && size(a, 1) == size(a, 2)) || size_error("$(name) has size $(size(a)), expected (L, L)")
    return size(a, 1)
end

"""Coil noise covariance Psi (L x L) from noise-only samples (nsamples x L)."""
function noise_covariance(noise::AbstractMatrix)
    m, l = size(noise)
    out = Matrix{ComplexF32}(undef, l, l)
    check(ccall((:horecon_noise_covariance, LIB), Int32, (Ptr{ComplexF32}, Int64, Int64, Ptr{ComplexF32}),
                c32(noise), m, l, out))
    return out
end

"""Whitened copy of `values` (..., L): every coil vector x becomes C^-1 x with
Psi = C C^H. Apply to the data (M x L) and the sensitivities (N x L) alike."""
function whiten(covariance::AbstractMatrix, values)
    l = square("covariance", covariance)
    n = coil_rows("values", values, l)
    out = c32(values)
    check(ccall((:horecon_whiten, LIB), Int32, (Ptr{ComplexF32}, Int64, Int64, Ptr{ComplexF32}),
                c32(covariance), l, n, out))
    return reshape(out, size(values))
end

"""Coil images (same size) from Cartesian k-space [ix, iy, (iz,) coil]."""
function cartesian_images(kspace, fov, center = (0.0, 0.0, 0.0))
    dims = grid("kspace", kspace, ndims(kspace) - 1)
    out = Vector{ComplexF32}(undef, length(kspace))
    check(ccall((:horecon_cartesian_images, LIB), Int32,
                (Ptr{Int64}, Ptr{Float64}, Ptr{Float64}, Int64, Ptr{ComplexF32}, Ptr{ComplexF32}),
                dims, vec3("fov", fov), vec3("center", center), size(kspace, ndims(kspace)), c32(kspace), out))
    return reshape(out, size(kspace))
end

"""
    espirit(p, kspace, fov, center = 0; kernel = 6, calibration = 24, threshold = 0.02, crop = 0.8)
        -> (maps N x L, eigenvalues N)

ESPIRiT maps at the plan's positions from reference k-space [ix, iy, (iz,) coil]
(L = the plan's coils): sum_c |S_c|^2 = 1, zero where the eigenvalue is below crop.
"""
function espirit(p::Plan, kspace, fov, center = (0.0, 0.0, 0.0); kernel::Integer = 6,
                 calibration::Integer = 24, threshold::Real = 0.02, crop::Real = 0.8, progress = nothing)
    dims = coil_array("kspace", kspace, p)
    defaults = Ref{EspiritOptions}()
    ccall((:horecon_default_espirit_options, LIB), Cvoid, (Ref{EspiritOptions},), defaults)
    o = Ref(EspiritOptions(defaults[].struct_size, Int32(kernel), Int32(calibration), Float64(threshold),
                           Float64(crop)))
    maps = Matrix{ComplexF32}(undef, nvoxels(p), p.ncoils)
    eig = Vector{Float32}(undef, nvoxels(p))
    y, f, c = c32(kspace), vec3("fov", fov), vec3("center", center)
    long_call("espirit", progress) do
        ccall((:horecon_espirit, LIB), Int32,
              (Ptr{Cvoid}, Ptr{Int64}, Ptr{Float64}, Ptr{Float64}, Ptr{ComplexF32}, Ref{EspiritOptions},
               Ptr{ComplexF32}, Ptr{Float32}), live(p), dims, f, c, y, o, maps, eig)
    end
    return maps, eig
end

"""Walsh adaptive-combine maps (N x L) at the plan's positions from coil images
[ix, iy, (iz,) coil] on the reference grid."""
function walsh(p::Plan, images, fov, center = (0.0, 0.0, 0.0); window::Integer = 5, progress = nothing)
    dims = coil_array("images", images, p)
    maps = Matrix{ComplexF32}(undef, nvoxels(p), p.ncoils)
    m, f, c = c32(images), vec3("fov", fov), vec3("center", center)
    long_call("walsh", progress) do
        ccall((:horecon_walsh, LIB), Int32,
              (Ptr{Cvoid}, Ptr{Int64}, Ptr{Float64}, Ptr{Float64}, Ptr{ComplexF32}, Int32, Ptr{ComplexF32}),
              live(p), dims, f, c, m, Int32(window), maps)
    end
    return maps
end

"""Off-resonance omega (N, rad/s) at the plan's positions from multi-echo
k-space [ix, iy, (iz,) coil, echo] and the echo times (s)."""
function b0_map(p::Plan, kspace, echo_times, fov, center = (0.0, 0.0, 0.0); mask_threshold::Real = 0.1,
                smoothness::Real = 1.0, max_iterations::Integer = 2000, progress = nothing)
    te = Vector{Float64}(vec(collect(echo_times)))
    (ndims(kspace) >= 3 && size(kspace, ndims(kspace)) == length(te)) ||
        size_error("kspace has size $(size(kspace)), expected (nx, ny[, nz], ncoils, $(length(te)) echoes)")
    dims = grid("kspace", kspace, ndims(kspace) - 2)
    defaults = Ref{B0Options}()
    ccall((:horecon_default_b0_options, LIB), Cvoid, (Ref{B0Options},), defaults)
    o = Ref(B0Options(defaults[].struct_size, Int32(max_iterations), Float64(mask_threshold), Float64(smoothness)))
    omega = Vector{Float64}(undef, nvoxels(p))
    y, f, c = c32(kspace), vec3("fov", fov), vec3("center", center)
    long_call("b0_map", progress) do
        ccall((:horecon_b0_map, LIB), Int32,
              (Ptr{Cvoid}, Ptr{Int64}, Ptr{Float64}, Ptr{Float64}, Int64, Int32, Ptr{Float64}, Ptr{ComplexF32},
               Ref{B0Options}, Ptr{Float64}),
              live(p), dims, f, c, size(kspace, ndims(kspace) - 1), Int32(length(te)), te, y, o, omega)
    end
    return omega
end

"""
    estimate_delay(p, data, times; coefficients = nothing, range = 20e-6, step = 4e-6,
                   tolerance = 0.05e-6, iterations = 10, lambda = 0.0, groups = 0)
        -> (delay, residual, curve K x 2 of (delay, residual) rows)

The delay (s) between the coefficients (M x B, the shape of the plan's phase
model; nothing = the plan's own) and the data (M x L), by short reconstructions
over a coarse grid, then golden-section refinement.
"""
function estimate_delay(p::Plan, data, times; coefficients = nothing, range::Real = 20e-6, step::Real = 4e-6,
                        tolerance::Real = 0.05e-6, iterations::Integer = 10, lambda::Real = 0.0,
                        groups::Integer = 0, progress = nothing)
    d = data_in(p, data)
    t = real_in("times", times, p.nsamples)
    k = nothing
    if coefficients !== nothing
        b = phase_terms(p)
        b == 0 && size_error("coefficients are shaped like the plan's phase model, and this plan has none: " *
                             "set_solid_harmonics!, set_trajectory! or set_basis! first")
        check_rows("coefficients", coefficients, p.nsamples)
        k = real_in("coefficients", coefficients, p.nsamples * b)
    end
    defaults = Ref{DelayOptions}()
    ccall((:horecon_default_delay_options, LIB), Cvoid, (Ref{DelayOptions},), defaults)
    o = Ref(DelayOptions(defaults[].struct_size, Int32(iterations), Float64(range), Float64(step),
                         Float64(tolerance), Float64(lambda), UInt32(groups)))
    capacity = 4096
    xs, rs = Vector{Float64}(undef, capacity), Vector{Float64}(undef, capacity)
    delay, residual, len = Ref(0.0), Ref(0.0), Ref{Int32}(0)
    GC.@preserve k begin
        long_call("estimate_delay", progress) do
            ccall((:horecon_estimate_delay, LIB), Int32,
                  (Ptr{Cvoid}, Ptr{ComplexF32}, Ptr{Float64}, Ptr{Float64}, Ref{DelayOptions}, Ref{Float64},
                   Ref{Float64}, Int32, Ptr{Float64}, Ptr{Float64}, Ref{Int32}),
                  live(p), d, k === nothing ? Ptr{Float64}(C_NULL) : pointer(k), t, o, delay, residual,
                  Int32(capacity), xs, rs, len)
        end
    end
    n = min(Int(len[]), capacity)
    return delay[], residual[], hcat(xs[1:n], rs[1:n])
end

"""Simulated Cartesian reference k-space (dims..., L, nechoes) of an object
`image` (npoints) at `positions` (npoints x 3) with `sensitivities`
(npoints x L), off-resonance `omega` (npoints, rad/s) or nothing, at the echo
times (s): the exact sum times `weight`, no noise."""
function sim_reference(dims, fov, center, positions, image, sensitivities; omega = nothing,
                       echo_times = [0.0], weight::Real = 1.0)
    d = Int64[collect(dims)..., ones(Int64, 3 - length(dims))...]
    length(d) == 3 || size_error("dims must have 1 to 3 entries")
    (ndims(positions) == 2 && size(positions, 2) == 3) || size_error("positions must be npoints x 3")
    n = size(positions, 1)
    x = c32(image)
    length(x) == n || size_error("image has $(length(x)) values, positions $(n) points")
    size(sensitivities, 1) == n || size_error("sensitivities has size $(size(sensitivities)), expected ($(n), ncoils)")
    l = length(sensitivities) ÷ max(n, 1)
    w = omega === nothing ? nothing : real_in("omega", omega, n)
    te = Vector{Float64}(vec(collect(echo_times)))
    out = Vector{ComplexF32}(undef, prod(d) * l * length(te))
    GC.@preserve w begin
        check(ccall((:horecon_sim_reference, LIB), Int32,
                    (Ptr{Int64}, Ptr{Float64}, Ptr{Float64}, Int64, Ptr{Float64}, Ptr{ComplexF32}, Int64,
                     Ptr{ComplexF32}, Ptr{Float64}, Int32, Ptr{Float64}, Float64, Ptr{ComplexF32}),
                    d, vec3("fov", fov), vec3("center", center), n, Vector{Float64}(vec(positions)), x, l,
                    c32(sensitivities), w === nothing ? Ptr{Float64}(C_NULL) : pointer(w), Int32(length(te)), te,
                    Float64(weight), out))
    end
    return reshape(out, (d..., l, length(te)))
end

"""A plausible coil noise covariance (L x L): standard deviations in [1, 1 + spread],
correlation^|a - b|, random phases."""
function sim_noise_covariance(ncoils::Integer; correlation::Real = 0.5, spread::Real = 1.0, seed::Integer = 1)
    out = Matrix{ComplexF32}(undef, ncoils, ncoils)
    check(ccall((:horecon_sim_noise_covariance, LIB), Int32, (Int64, Float64, Float64, UInt64, Ptr{ComplexF32}),
                ncoils, correlation, spread, seed, out))
    return out
end

"""`values` (..., L) plus complex Gaussian noise with covariance Psi (L x L)."""
function sim_correlated_noise(covariance::AbstractMatrix, values; seed::Integer = 1)
    l = square("covariance", covariance)
    n = coil_rows("values", values, l)
    out = c32(values)
    check(ccall((:horecon_sim_correlated_noise, LIB), Int32, (Ptr{ComplexF32}, Int64, Int64, UInt64, Ptr{ComplexF32}),
                c32(covariance), l, n, seed, out))
    return reshape(out, size(values))
end

end # module Calib

"""
Non-uniform FFTs (horecon_nufft_*), FINUFFT's conventions: type 1
f(k) = sum_j c_j exp(sign·i k·x_j) on the modes k = -n÷2 … (n-1)÷2 per axis,
type 2 its adjoint with the opposite sign; points in radians (M x ndims).

    plan = Horecon.Nufft.Plan(1, (64, 64), x; tolerance = 1e-6, ntransforms = 4)
    f = Horecon.Nufft.execute(plan, c)     # c: M x 4 -> f: 64 x 64 x 4
"""
module Nufft

import ..Horecon: LIB, check, size_error, invalid, HoreconError, BACKENDS, Options, release!

mutable struct Plan
    handle::Ptr{Cvoid}
    type::Int
    modes::Tuple
    npoints::Int
    ntransforms::Int
    double::Bool
    function Plan(type::Integer, modes, points::AbstractVecOrMat; sign::Integer = type == 1 ? 1 : -1,
                  tolerance::Real = 1e-6, ntransforms::Integer = 1, double::Bool = true, backend = "cpu",
                  threads::Integer = 0, device::Integer = 0)
        type in (1, 2) || invalid("type must be 1 or 2, got $(type)")
        m = Tuple(Int.(collect(modes)))
        1 <= length(m) <= 3 || invalid("modes must have 1 to 3 entries, got $(modes)")
        haskey(BACKENDS, backend) || invalid("backend must be auto, cpu or cuda, got $(backend)")
        x = points isa AbstractVector ? reshape(points, :, 1) : points
        size(x, 2) == length(m) || size_error("points has size $(size(points)), expected (M, $(length(m)))")
        defaults = Ref{Options}()
        ccall((:horecon_default_options, LIB), Cvoid, (Ref{Options},), defaults)
        o = defaults[]
        opts = Ref(Options(o.struct_size, BACKENDS[backend], Int32(device), o.num_devices, Int32(threads),
                           Int32(double ? 2 : 0), o.verbosity))
        out = Ref{Ptr{Cvoid}}(C_NULL)
        check(ccall((:horecon_nufft_create, LIB), Int32,
                    (Ref{Ptr{Cvoid}}, Int32, Int32, Ptr{Int64}, Int64, Ptr{Float64}, Int32, Float64, Int32,
                     Ref{Options}),
                    out, Int32(type), Int32(length(m)), Int64[m...], size(x, 1), Vector{Float64}(vec(x)),
                    Int32(sign), Float64(tolerance), Int32(ntransforms), opts))
        p = new(out[], Int(type), m, size(x, 1), Int(ntransforms), double)
        finalizer(close!, p)
        return p
    end
end

"""Destroys the plan (idempotent)."""
close!(p::Plan) = release!(h -> ccall((:horecon_nufft_destroy, LIB), Cvoid, (Ptr{Cvoid},), h), p)

"""Runs the transforms: type 1 takes c (M or M x T) and returns f (modes... [, T]);
type 2 takes f and returns c. ComplexF64 in and out for `double` plans, else ComplexF32."""
function execute(p::Plan, data)
    p.handle == C_NULL && throw(HoreconError(Int32(1), "HORECON_ERR_NULL_POINTER", "the NUFFT plan is closed"))
    T = p.double ? ComplexF64 : ComplexF32
    grid = prod(p.modes) * p.ntransforms
    nonuniform = p.npoints * p.ntransforms
    expected = p.type == 1 ? nonuniform : grid
    length(data) == expected ||
        size_error("data has $(length(data)) values, expected $(expected) " *
                   (p.type == 1 ? "(M x ntransforms)" : "(modes... x ntransforms)"))
    input = Vector{T}(vec(data))
    output = Vector{T}(undef, p.type == 1 ? grid : nonuniform)
    c, f = p.type == 1 ? (input, output) : (output, input)
    status = if p.double
        ccall((:horecon_nufft_execute_c64, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF64}, Ptr{ComplexF64}), p.handle, c, f)
    else
        ccall((:horecon_nufft_execute, LIB), Int32, (Ptr{Cvoid}, Ptr{ComplexF32}, Ptr{ComplexF32}), p.handle, c, f)
    end
    check(status)
    trans = p.ntransforms == 1 ? () : (p.ntransforms,)
    return p.type == 1 ? reshape(output, (p.modes..., trans...)) : reshape(output, (p.npoints, trans...))
end

"""One plan of `type` for the points x (M x ndims, or M) run once on `data`."""
function once(type, x, data, modes, per_transform; kwargs...)
    points = x isa AbstractVector ? reshape(x, :, 1) : x
    t = max(length(data) ÷ max(per_transform(points), 1), 1)
    p = Plan(type, modes, points; ntransforms = t, kwargs...)
    try
        return execute(p, data)
    finally
        close!(p)
    end
end

"""f = type 1 of the points x (M x ndims) and strengths c (M [x T]) on `modes`."""
nufft1(x, c, modes; tolerance::Real = 1e-6, sign::Integer = 1, kwargs...) =
    once(1, x, c, modes, points -> size(points, 1); tolerance = tolerance, sign = sign, kwargs...)

"""c = type 2 of the points x (M x ndims) and the grid f (modes... [x T])."""
nufft2(x, f, modes; tolerance::Real = 1e-6, sign::Integer = -1, kwargs...) =
    once(2, x, f, modes, _ -> prod(modes); tolerance = tolerance, sign = sign, kwargs...)

end # module Nufft

end # module Horecon
