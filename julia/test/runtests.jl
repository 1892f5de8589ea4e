# Tests of the Julia binding (julia/Horecon.jl) against float64 direct sums of
# MODEL.md, on fresh random problems (the seed is printed; HORECON_TEST_SEED
# replays one). Run: julia julia/test/runtests.jl (scripts/julia_tests.sh),
# with HORECON_LIB naming libhorecon.so (default target/release).
using Test, Random, LinearAlgebra

include(joinpath(@__DIR__, "..", "Horecon.jl"))
using .Horecon

const SEED = haskey(ENV, "HORECON_TEST_SEED") ? parse(UInt64, ENV["HORECON_TEST_SEED"]) : rand(RandomDevice(), UInt64)
println("julia tests: seed $(SEED) (HORECON_TEST_SEED=$(SEED) replays)")
const RNG = MersenneTwister(SEED)

relerr(a, b) = norm(vec(a) .- vec(b)) / norm(vec(b))

"""A random problem: a user basis of B terms (N x B), its coefficients
(M x B), off-resonance and coil maps, on a dims grid of `fov`."""
function problem(dims, L, M, B)
    N = prod(dims)
    basis = randn(RNG, N, B)
    coef = randn(RNG, M, B) .* 2.0
    omega = randn(RNG, N) .* 300.0
    times = collect(range(0.0, 4e-3; length = M))
    S = randn(RNG, ComplexF32, N, L)
    return (; N, M, L, basis, coef, omega, times, S)
end

"""E as a dense float64 matrix (M·L x N): E[(j,c), n] = S_c(n) exp(+i φ(j,n))."""
function dense(pr)
    phi = pr.coef * pr.basis' .+ pr.times * pr.omega'          # M x N
    phasor = exp.(im .* phi)
    return vcat([phasor .* transpose(ComplexF64.(pr.S[:, c])) for c in 1:pr.L]...)
end

function plan_for(dims, pr; kwargs...)
    p = Horecon.Plan(dims, pr.L, pr.M; backend = "cpu", kwargs...)
    Horecon.set_grid_positions!(p, (0.2, 0.2, 0.01))
    Horecon.set_basis!(p, pr.basis, pr.coef)
    Horecon.set_off_resonance!(p, pr.omega, pr.times)
    Horecon.set_sensitivities!(p, pr.S)
    return p
end

@testset "Horecon.jl" begin
    @testset "library" begin
        @test occursin(r"^\d+\.\d+\.\d+$", Horecon.version())
        @test Horecon.cuda_device_count() >= 0
    end

    @testset "operators against float64 direct sums (odd sizes)" begin
        for _ in 1:3
            dims = (rand(RNG, 3:9), rand(RNG, 2:7))
            pr = problem(dims, rand(RNG, 1:3), rand(RNG, 5:40), rand(RNG, 1:4))
            p = plan_for(dims, pr)
            E = dense(pr)
            x = randn(RNG, ComplexF32, pr.N)
            d = randn(RNG, ComplexF32, pr.M, pr.L)
            @test size(Horecon.forward(p, x)) == (pr.M, pr.L)
            @test relerr(Horecon.forward(p, x), E * ComplexF64.(x)) < 1e-4
            y = Horecon.adjoint(p, d)
            @test size(y) == dims
            @test relerr(y, E' * vec(ComplexF64.(d))) < 1e-4
            @test relerr(Horecon.normal(p, x), E' * (E * ComplexF64.(x))) < 1e-4
            # Adjointness of the pair.
            lhs = dot(vec(ComplexF64.(Horecon.forward(p, x))), vec(ComplexF64.(d)))
            rhs = dot(ComplexF64.(x), vec(ComplexF64.(Horecon.adjoint(p, d))))
            @test abs(lhs - rhs) <= 1e-4 * abs(lhs)
            # The image in the plan's shape and as a vector give the same data.
            @test Horecon.forward(p, reshape(x, dims)) == Horecon.forward(p, x)
            Horecon.close!(p)
        end
    end

    @testset "sign convention: one voxel, one sample" begin
        p = Horecon.Plan((1,), 1, 1; backend = "cpu")
        r0 = [0.013, -0.021, 0.004]
        Horecon.set_positions!(p, reshape(r0, 1, 3))
        k = [37.0 -11.0 5.0]
        Horecon.set_trajectory!(p, k)
        d = Horecon.forward(p, ComplexF32[1])
        @test abs(d[1] - exp(im * dot(vec(k), r0))) < 1e-5
    end

    @testset "CG recovers an image from its data" begin
        dims = (8, 7)
        pr = problem(dims, 2, 150, 2)
        p = plan_for(dims, pr)
        truth = randn(RNG, ComplexF32, pr.N)
        d = Horecon.forward(p, truth)
        x, info = Horecon.cg(p, d; max_iterations = 200, tolerance = 1e-7)
        @test size(x) == dims
        @test relerr(x, truth) < 1e-3
        @test info.iterations > 0
        # A warm start at the solution stops at once.
        x2, info2 = Horecon.cg(p, d; x0 = x, max_iterations = 200, tolerance = 1e-3)
        @test info2.iterations <= 1
        @test relerr(x2, truth) < 1e-3
        x3, _ = Horecon.cg(p, d; regularizer = "tikhonov", lambda = 1e-3, max_iterations = 50)
        @test all(isfinite, x3)
    end

    @testset "bad input is an error naming the argument" begin
        dims = (5, 4)
        pr = problem(dims, 2, 12, 2)
        p = plan_for(dims, pr)
        err(f) = try
            f()
            nothing
        catch e
            e
        end
        e = err(() -> Horecon.forward(p, zeros(ComplexF32, 7)))
        @test e isa Horecon.HoreconError && e.status == 3 && occursin("image", e.message)
        e = err(() -> Horecon.adjoint(p, zeros(ComplexF32, 5)))
        @test e isa Horecon.HoreconError && e.status == 3
        # A transposed data matrix (L x M) is a size error, not a wrong result.
        e = err(() -> Horecon.adjoint(p, zeros(ComplexF32, 2, 12)))
        @test e isa Horecon.HoreconError && e.status == 3 && occursin("transposed", e.message)
        x = randn(RNG, ComplexF32, pr.N)
        x[3] = NaN32
        e = err(() -> Horecon.forward(p, x))
        @test e isa Horecon.HoreconError && e.status == 4 && e.name == "HORECON_ERR_NOT_FINITE"
        bad = copy(pr.omega)
        bad[1] = Inf
        e = err(() -> Horecon.set_off_resonance!(p, bad, pr.times))
        @test e isa Horecon.HoreconError && e.status == 4
        e = err(() -> Horecon.Plan((4, 4), 1, 10; backend = "gpu"))
        @test e isa Horecon.HoreconError && e.status == 2
        e = err(() -> Horecon.Plan((0, 4), 1, 10; backend = "cpu"))
        @test e isa Horecon.HoreconError && e.status == 2 && !isempty(e.message)
        e = err(() -> Horecon.set_approximation!(p, -1.0))
        @test e isa Horecon.HoreconError && e.status == 2
        e = err(() -> Horecon.set_approximation!(p, NaN))
        @test e isa Horecon.HoreconError
        # A plan without sensitivities for 2 coils is incomplete.
        q = Horecon.Plan(dims, 2, 12; backend = "cpu")
        Horecon.set_grid_positions!(q, (0.2, 0.2, 0.01))
        Horecon.set_basis!(q, pr.basis, pr.coef)
        e = err(() -> Horecon.forward(q, zeros(ComplexF32, pr.N)))
        @test e isa Horecon.HoreconError && e.status == 5
        # The plan still works after the errors; a closed one is refused.
        @test all(isfinite, Horecon.forward(p, randn(RNG, ComplexF32, pr.N)))
        Horecon.close!(p)
        Horecon.close!(p)
        e = err(() -> Horecon.forward(p, zeros(ComplexF32, pr.N)))
        @test e isa Horecon.HoreconError && e.status == 1
    end

    @testset "fast path: error within the tolerance, its certificate" begin
        dims = (24, 22, 5)
        N, M, L = prod(dims), 900, 2
        p = Horecon.Plan(dims, L, M; backend = "cpu")
        Horecon.set_grid_positions!(p, (0.22, 0.2, 0.05))
        # A spiral-like trajectory with second-order terms (solid harmonics, 9 terms).
        t = range(0.0, 1.0; length = M)
        coef = zeros(M, 9)
        coef[:, 2] .= 300 .* t .* cos.(40 .* t)
        coef[:, 3] .= 300 .* t .* sin.(40 .* t)
        coef[:, 4] .= 20 .* t
        coef[:, 5:9] .= 200 .* t .* randn(RNG, 1, 5)
        Horecon.set_solid_harmonics!(p, coef)
        Horecon.set_sensitivities!(p, randn(RNG, ComplexF32, N, L))
        x = randn(RNG, ComplexF32, N)
        exact = Horecon.forward(p, x)
        @test Horecon.approximation_info(p).active == false
        for tolerance in (1e-2, 1e-3)
            Horecon.set_approximation!(p, tolerance)
            info = Horecon.approximation_info(p)
            @test info.active
            @test info.rank >= 1
            @test 0 < info.estimated_error <= tolerance
            err = relerr(Horecon.forward(p, x), exact)
            @test err <= tolerance
            @test err <= 3 * info.estimated_error + 1e-6
        end
        Horecon.set_approximation!(p, 0.0)
        @test Horecon.forward(p, x) == exact
        Horecon.close!(p)
    end

    @testset "progress, cancelling and an exception in the callback" begin
        dims = (10, 9)
        pr = problem(dims, 2, 400, 3)
        p = plan_for(dims, pr)
        d = randn(RNG, ComplexF32, pr.M, pr.L)
        fractions = Float64[]
        Horecon.adjoint(p, d; progress = f -> (push!(fractions, f); false))
        @test all(f -> 0 <= f <= 1, fractions)
        e = try
            Horecon.cg(p, d; max_iterations = 100, tolerance = 1e-12, progress = f -> true)
            nothing
        catch e
            e
        end
        @test e isa Horecon.HoreconError && e.status == 9
        e = try
            Horecon.cg(p, d; max_iterations = 100, tolerance = 1e-12, progress = f -> error("stop here"))
            nothing
        catch e
            e
        end
        @test e isa ErrorException && e.msg == "stop here"
        # Usable afterwards; a wrong progress argument is refused.
        @test all(isfinite, Horecon.adjoint(p, d))
        @test_throws Horecon.HoreconError Horecon.adjoint(p, d; progress = 3)
        host, device = Horecon.memory(p, "cg")
        @test host > 0 && device >= 0
        @test_throws Horecon.HoreconError Horecon.memory(p, "nothing")
        @test Horecon.backend(p) == "cpu"
    end

    @testset "Stone's F^H d and Q, gridding, Toeplitz and Cartesian modes" begin
        dims = (9, 8)
        N, M = prod(dims), 60
        p = Horecon.Plan(dims, 1, M; backend = "cpu")
        X = hcat(vec([x for x in (0:8) .* 0.02 .- 0.08, _ in 1:8]),
                 vec([y for _ in 1:9, y in (0:7) .* 0.022 .- 0.07]), zeros(N))
        Horecon.set_positions!(p, X)
        kc = randn(RNG, M, 2) .* 15.0                      # Stone's k, cycles/m
        Horecon.set_trajectory!(p, -2pi .* kc)
        d = randn(RNG, ComplexF32, M)
        phi = randn(RNG, ComplexF32, M)
        x = Horecon.fhd(p, d, phi)
        want = [sum(conj(ComplexF64(phi[m])) * d[m] * exp(im * 2pi * dot(kc[m, :], X[n, 1:2])) for m in 1:M) for n in 1:N]
        @test size(x) == dims
        @test relerr(x, want) < 1e-3
        qd = Horecon.q_dims(p)
        @test qd == (18, 16, 1)
        Q = Horecon.q(p, abs2.(phi))
        @test size(Q) == qd
        @test abs(Q[10, 9, 1] - sum(abs2.(ComplexF64.(phi)))) <= 1e-4 * sum(abs2.(phi))
        # Toeplitz: E^H E by FFTs equals the exact normal operator.
        img = randn(RNG, ComplexF32, N)
        exact = Horecon.normal(p, img)
        Horecon.set_toeplitz!(p, true)
        @test relerr(Horecon.normal(p, img), exact) < 1e-3
        Horecon.set_toeplitz!(p, false)
        g = Horecon.gridding(p, d)
        @test size(g) == dims && all(isfinite, g)
        @test_throws Horecon.HoreconError Horecon.gridding(p, d, -ones(M))
        Horecon.close!(p)
        # Cartesian mode: the same E by FFTs as by direct sums.
        c = Horecon.Plan((6, 5), 1, 18; backend = "cpu")
        Horecon.set_grid_positions!(c, (0.2, 0.2, 0.01))
        mask = falses(6, 5)
        mask[randperm(RNG, 30)[1:18]] .= true
        Horecon.set_cartesian!(c, mask)
        img = randn(RNG, ComplexF32, 30)
        fft_data = Horecon.forward(c, img)
        @test size(fft_data) == (18, 1)
        @test_throws Horecon.HoreconError Horecon.set_cartesian!(c, trues(5, 5))
        Horecon.close!(c)
    end

    @testset "NUFFT engine against float64 direct sums" begin
        for dims in ((11,), (6, 5), (4, 5, 3))
            M, T = 37, 2
            x = (rand(RNG, M, length(dims)) .- 0.5) .* 2pi
            modes = [collect(-(n ÷ 2):((n - 1) ÷ 2)) for n in dims]
            ks = vec(collect(Iterators.product(modes...)))          # first axis fastest
            A = [exp(im * sum(x[j, a] * k[a] for a in 1:length(dims))) for j in 1:M, k in ks]
            c = randn(RNG, ComplexF64, M, T)
            f = Horecon.Nufft.nufft1(x, c, dims; tolerance = 1e-9)
            @test size(f) == (dims..., T)
            @test relerr(reshape(f, :, T), transpose(A) * c) < 1e-8
            g = randn(RNG, ComplexF64, dims..., T)
            d = Horecon.Nufft.nufft2(x, g, dims; tolerance = 1e-9)
            @test size(d) == (M, T)
            @test relerr(d, conj(A) * reshape(g, :, T)) < 1e-8
            # Single precision plans take and give ComplexF32.
            p = Horecon.Nufft.Plan(1, dims, x; tolerance = 1e-4, ntransforms = T, double = false)
            f32 = Horecon.Nufft.execute(p, c)
            @test eltype(f32) == ComplexF32 && relerr(reshape(f32, :, T), transpose(A) * c) < 1e-4
            @test_throws Horecon.HoreconError Horecon.Nufft.execute(p, c[1:end-1, :])
            Horecon.Nufft.close!(p)
            Horecon.Nufft.close!(p)
            @test_throws Horecon.HoreconError Horecon.Nufft.execute(p, c)
        end
        @test_throws Horecon.HoreconError Horecon.Nufft.Plan(3, (4,), zeros(3, 1))
        @test_throws Horecon.HoreconError Horecon.Nufft.Plan(1, (4, 4), zeros(3, 1))
        @test_throws Horecon.HoreconError Horecon.Nufft.Plan(1, (4,), [0.1, NaN, 0.2])
        @test_throws Horecon.HoreconError Horecon.Nufft.Plan(1, (4,), [0.1, 0.2]; tolerance = 0.0)
    end

    @testset "calibration: whitening, ESPIRiT, Walsh, B0 map, delay" begin
        n, coils, fov, center = 24, 4, 0.22, (0.0, 0.0, 0.02)
        fov3 = (fov, fov, fov / n)
        @test Horecon.phase_terms(Horecon.Plan((2, 2), 1, 1; backend = "cpu")) == 0
        # Whitening: the whitened noise's covariance is the identity.
        psi = Horecon.Calib.sim_noise_covariance(coils; correlation = 0.5, spread = 1.0, seed = 3)
        @test psi ≈ psi' && all(real.(diag(psi)) .>= 1)
        noise = Horecon.Calib.sim_correlated_noise(psi, zeros(ComplexF32, 20000, coils); seed = 4)
        est = Horecon.Calib.noise_covariance(noise)
        @test est ≈ transpose(noise) * conj(noise) ./ 20000 rtol = 1e-4
        @test maximum(abs.(est .- psi)) < 0.1 * maximum(abs.(psi))
        white = Horecon.Calib.whiten(est, noise)
        @test size(white) == size(noise)
        @test maximum(abs.(Horecon.Calib.noise_covariance(white) .- Matrix(I, coils, coils))) < 1e-3
        @test_throws Horecon.HoreconError Horecon.Calib.whiten(ones(ComplexF32, 2, 2), ones(ComplexF32, 4, 2))
        @test_throws Horecon.HoreconError Horecon.Calib.whiten(psi, ones(ComplexF32, 4, coils + 1))
        # A reference scan of a phantom with smooth coils and B0, simulated on a 2x finer grid.
        fine = Horecon.Sim.refined_grid((n, n, 1), fov3, center, 2)
        # One number is every axis's; two are a size error that names the argument.
        @test Horecon.Sim.refined_grid((n, n, 1), fov, center, 1) ==
              Horecon.Sim.refined_grid((n, n, 1), (fov, fov, fov), center, 1)
        bad = try
            Horecon.Sim.refined_grid((n, n, 1), (fov, fov), center, 1)
            nothing
        catch e
            e
        end
        @test bad isa Horecon.HoreconError && bad.status == 3 && occursin("fov", bad.message)
        rho = ComplexF32.(Horecon.Sim.shepp_logan(2, (0.2, 0.2, 0.0), center, fine))
        S = Horecon.Sim.coil_sensitivities(fine, coils, 0.15, center)
        omega = Horecon.Sim.off_resonance(fine, fov3, center, 60.0)
        echo_times = [2.0e-3, 4.5e-3, 7.0e-3]
        reference = Horecon.Calib.sim_reference((n, n, 1), fov3, center, fine, rho, S; omega = omega,
                                                echo_times = echo_times, weight = 0.25)
        @test size(reference) == (n, n, 1, coils, 3)
        kspace = reshape(reference[:, :, :, :, 1], n, n, coils)
        # Cartesian images invert the reference's exact sums on its own grid.
        images = Horecon.Calib.cartesian_images(kspace, fov3, center)
        @test size(images) == (n, n, coils)
        grid_positions = Horecon.Sim.refined_grid((n, n, 1), fov3, center, 1)
        onegrid = Horecon.Calib.sim_reference((n, n, 1), fov3, center, grid_positions,
                                              ones(ComplexF32, n * n), S[1:n*n, :])
        back = Horecon.Calib.cartesian_images(reshape(onegrid, n, n, coils), fov3, center)
        @test relerr(back, S[1:n*n, :]) < 1e-4
        p = Horecon.Plan((n, n), coils, 10; backend = "cpu")
        Horecon.set_grid_positions!(p, fov3, center)
        truth = Horecon.Sim.coil_sensitivities(grid_positions, coils, 0.15, center)
        inside = vec(abs.(Horecon.Sim.block_average(rho, (n, n, 1), 2)) .> 0.05)
        function map_error(maps)
            tn = truth ./ sqrt.(sum(abs2.(truth); dims = 2))
            phase = sum(conj.(maps) .* tn; dims = 2)
            phase = phase ./ max.(abs.(phase), 1e-30)
            return norm(((maps .* phase) .- tn)[inside, :]) / norm(tn[inside, :])
        end
        maps, eig = Horecon.Calib.espirit(p, kspace, fov3, center)
        @test size(maps) == (n * n, coils) && length(eig) == n * n
        @test all(s -> s == 0 || abs(s - 1) < 1e-3, vec(sum(abs2.(maps); dims = 2)))
        @test map_error(maps) < 0.05
        walsh = Horecon.Calib.walsh(p, images, fov3, center; window = 5)
        @test size(walsh) == (n * n, coils)
        @test map_error(walsh) < 0.1
        @test_throws Horecon.HoreconError Horecon.Calib.espirit(p, kspace, fov3, center; calibration = 4)
        @test_throws Horecon.HoreconError Horecon.Calib.espirit(p, zeros(ComplexF32, n, n, coils), fov3, center)
        @test_throws Horecon.HoreconError Horecon.Calib.espirit(p, kspace[:, :, 1:2], fov3, center)
        w = Horecon.Calib.b0_map(p, reshape(reference, n, n, coils, 3), echo_times, fov3, center)
        truth_omega = Horecon.Sim.off_resonance(grid_positions, fov3, center, 60.0)
        @test length(w) == n * n
        @test sqrt(sum(abs2, (w .- truth_omega)[inside]) / count(inside)) / 2pi < 2.0   # Hz
        @test_throws Horecon.HoreconError Horecon.Calib.b0_map(p, reshape(reference, n, n, coils, 3)[:, :, :, 1:1],
                                                               [2e-3], fov3, center)
        Horecon.close!(p)
        # The delay between monitored coefficients and the data.
        k, times = Horecon.Sim.spiral(n, fov, 1.0, 4e-6, 2e-3)
        M = size(k, 1)
        delay = 6.3e-6
        q = Horecon.Plan((n, n), coils, M; backend = "cpu")
        Horecon.set_grid_positions!(q, fov3, center)
        Horecon.set_sensitivities!(q, truth)
        Horecon.set_trajectory!(q, k)
        @test Horecon.phase_terms(q) == 2
        data = Horecon.forward(q, Horecon.Sim.block_average(rho, (n, n, 1), 2))
        # numpy.interp: linear, held at the ends.
        function interp(c, t)
            map(t) do s
                i = clamp(searchsortedlast(times, s), 1, M - 1)
                u = clamp((s - times[i]) / (times[i + 1] - times[i]), 0.0, 1.0)
                c[i] + u * (c[i + 1] - c[i])
            end
        end
        monitored = hcat(interp(k[:, 1], times .- delay), interp(k[:, 2], times .- delay))
        Horecon.set_trajectory!(q, monitored)
        estimate, residual, curve = Horecon.Calib.estimate_delay(q, data, times; iterations = 6, step = 3e-6,
                                                                  range = 12e-6)
        @test abs(estimate - delay) < 0.5e-6
        @test residual >= 0 && size(curve, 2) == 2 && size(curve, 1) > 3 && issorted(curve[:, 1])
        estimate2, _, _ = Horecon.Calib.estimate_delay(q, data, times; coefficients = monitored, iterations = 6,
                                                       step = 3e-6, range = 12e-6)
        @test estimate2 == estimate
        @test_throws Horecon.HoreconError Horecon.Calib.estimate_delay(q, data, times; coefficients = monitored[:, 1:1])
        @test_throws Horecon.HoreconError Horecon.Calib.estimate_delay(q, data, times[1:end-1])
        Horecon.close!(q)
    end

    @testset "simulation toolkit" begin
        k, times = Horecon.Sim.spiral(32, 0.22, 2.0, 4e-6)
        @test size(k, 2) == 2 && size(k, 1) == length(times) > 0
        @test all(isfinite, k) && issorted(times)
        w = Horecon.Sim.density_weights(k)
        @test length(w) == size(k, 1) && abs(sum(w) / length(w) - 1) < 1e-3
        P = hcat(vec([x for x in range(-0.1, 0.1; length = 8), _ in 1:8]),
                 vec([y for _ in 1:8, y in range(-0.1, 0.1; length = 8)]), zeros(64))
        rho = Horecon.Sim.shepp_logan(2, (0.22, 0.22, 0.01), (0.0, 0.0, 0.0), P)
        @test length(rho) == 64 && maximum(rho) > 0
        @test Horecon.Sim.nrmse(rho, rho) == 0
        noisy, sigma = Horecon.Sim.add_noise(ComplexF32.(rho), 20.0, 3)
        @test sigma > 0 && isapprox(Horecon.Sim.nrmse(noisy, rho), 0.05; rtol = 0.2)
        @test Horecon.Sim.percent_error(noisy, rho) ≈ 100 * Horecon.Sim.nrmse(noisy, rho) rtol = 1e-6
        @test isfinite(Horecon.Sim.psnr(noisy, rho))
        for (k, t) in (Horecon.Sim.radial(16, 0.2, 8, 4e-6), Horecon.Sim.epi(16, 0.2, 2, 4e-6),
                       Horecon.Sim.cartesian(8, 6, 0.2, 0.2, 4e-6))
            @test size(k, 2) == 2 && size(k, 1) == length(t) > 0 && all(isfinite, k)
        end
        k3, t3 = Horecon.Sim.stack_of_spirals(16, 4, 0.2, 0.05, 2.0, 4e-6)
        @test size(k3, 2) == 3 && size(k3, 1) == length(t3)
        coef = Horecon.Sim.field_coefficients(k, 4e-6)
        @test size(coef) == (size(k, 1), 16) && all(isfinite, coef)
        S = Horecon.Sim.coil_sensitivities(P, 4, 0.15)
        @test size(S) == (64, 4) && all(isfinite, S)
        w0 = Horecon.Sim.off_resonance(P, (0.22, 0.22, 0.01), (0.0, 0.0, 0.0), 100.0)
        @test length(w0) == 64 && all(isfinite, w0)
        fine = Horecon.Sim.refined_grid((4, 3), (0.2, 0.15, 0.01), (0.0, 0.0, 0.0), 2)
        @test size(fine) == (48, 3)
        @test Horecon.Sim.block_average(fill(ComplexF32(2 - 1im), 48), (4, 3), 2) ≈ fill(ComplexF32(2 - 1im), 12)
        @test_throws Horecon.HoreconError Horecon.Sim.block_average(zeros(ComplexF32, 47), (4, 3), 2)
        @test_throws Horecon.HoreconError Horecon.Sim.density_weights(zeros(10, 3))
    end
end
