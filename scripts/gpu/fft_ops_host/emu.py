# Host emulation of the CUDA FFT operators (scripts/gpu/fft_ops_host/run.sh):
# Host emulation of the CUDA FFT operators: kernels/fft_ops.cu compiled as C++
# (serial grid-stride loops), the orchestration of src/backend/cuda/{toeplitz,
# cartesian}.rs transcribed, numpy FFTs in place of cuFFT (same conventions).
import ctypes as C, numpy as np, sys
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
P, I, LL, D = C.c_void_p, C.c_int, C.c_longlong, C.c_double

class Ops:
    def __init__(self, mode):
        self.lib = C.CDLL(f"./libk{mode}.so")
        self.real = np.float64 if mode == 2 else np.float32
        self.cplx = np.complex128 if mode == 2 else np.complex64
    def __getattr__(self, name):
        f = getattr(self.lib, name)
        def call(*args):
            conv = []
            for a in args:
                if isinstance(a, np.ndarray): conv.append(P(a.ctypes.data))
                elif a is None: conv.append(P(0))
                elif isinstance(a, tuple): conv.append(a[0](a[1]))
                else: raise TypeError(a)
            f(*conv)
        return call

def fft(a, dims, inverse):
    # a: grid b of prod(dims), column-major (x fastest) == C-order (z, y, x)
    g = a.reshape(dims[2], dims[1], dims[0])
    r = np.fft.ifftn(g) * g.size if inverse else np.fft.fftn(g)
    a[:] = r.reshape(-1).astype(a.dtype)

def idx(dims):
    n = np.prod(dims)
    v = np.arange(n)
    return np.stack([v % dims[0], (v // dims[0]) % dims[1], v // (dims[0] * dims[1])])

def fast_even(n):
    """nufft::params::next_fast_even: the smallest even m >= n that is 2^a 3^b,
    or q*c with c in {5, 7, 25}, 4 | q and q >= 8."""
    m = max(n, 2); m += m % 2
    while True:
        q = m
        for p in (2, 3):
            while q > 1 and q % p == 0: q //= p
        if q == 1 or (q in (5, 7, 25) and (m // q) % 4 == 0 and m // q >= 8): return m
        m += 2

def toeplitz(mode, dims, L, M, S, B):
    ops = Ops(mode)
    N = int(np.prod(dims)); kd = [fast_even(2 * d) if d > 1 else 1 for d in dims]; G = int(np.prod(kd))
    md = [2 * d if d > 1 else 1 for d in dims]; W = int(np.prod(md))
    kappa = rng.uniform(-0.5, 0.5, (3, M)); kappa[[a for a in range(3) if dims[a] == 1]] = 0
    w = rng.uniform(0.5, 1.5, M)
    sens = (rng.normal(size=(L, N)) + 1j * rng.normal(size=(L, N))).astype(np.complex64)
    x = rng.normal(size=N) + 1j * rng.normal(size=N)
    a_lt = rng.normal(size=(S, M)) + 1j * rng.normal(size=(S, M)) if S > 1 else np.ones((1, M))
    delta = rng.uniform(-50, 50, N); tau = np.linspace(0, 0.01, S)
    phases = np.exp(1j * np.outer(tau, delta)) if S > 1 else None
    # dense reference: E[(c,j), n] = S_c(n) e^{2πi κ_j·i_n} Σ_l a_l(t_j) P_l(n)
    i_n = idx(dims)
    base = np.exp(2j * np.pi * (kappa.T @ i_n))            # M x N
    seg = (a_lt.T @ phases) if S > 1 else np.ones((M, N))
    E = np.concatenate([sens[c][None, :].astype(complex) * base * seg for c in range(L)])
    Wd = np.tile(w, L)
    ref = E.conj().T @ (Wd * (E @ x))
    # the kernels' type-1 NUFFT by direct sums: modes Δ = −n … n − 1 (index Δ + n)
    pairs = [(l, lp) for l in range(S) for lp in range(l, S)]
    off = idx(md) - np.array([d if d > 1 else 0 for d in dims])[:, None]
    modes = np.zeros(len(pairs) * W, np.complex128)
    for pi, (l, lp) in enumerate(pairs):
        data = w * np.conj(a_lt[l]) * a_lt[lp]
        modes[pi * W:(pi + 1) * W] = np.exp(-2j * np.pi * (off.T @ kappa)) @ data
    spectra = np.zeros(len(pairs) * G, ops.cplx)
    ops.toeplitz_from_modes(modes, (D, 1.0 / G), (I, dims[0]), (I, dims[1]), (I, dims[2]), (I, kd[0]), (I, kd[1]), (I, kd[2]), (LL, G), (I, len(pairs)), spectra)
    for pi in range(len(pairs)):
        fft(spectra[pi * G:(pi + 1) * G], kd, False)
    # normal_with
    y = np.zeros(N, np.complex128)
    grids = np.zeros(S * B * G, ops.cplx)
    ssum = np.zeros(B * G, ops.cplx) if S > 1 else None
    ph = phases.astype(np.complex128).reshape(-1) if S > 1 else None
    def pview(l): return None if ph is None else ph[l * N:(l + 1) * N]
    def gview(l): return grids[l * B * G:(l + 1) * B * G]
    def pair_index(l, lp):
        a, b, cj = (l, lp, 0) if l <= lp else (lp, l, 1)
        return pairs.index((a, b)), cj
    for c0 in range(0, L, B):
        for lp in range(S):
            g = gview(lp)
            ops.pad_coils(x.astype(np.complex128), sens, pview(lp), (I, dims[0]), (I, dims[1]), (I, dims[2]), (I, kd[0]), (I, kd[1]), (LL, N), (LL, G), (I, L), (I, c0), (I, B), g)
            for b in range(B): fft(g[b * G:(b + 1) * G], kd, False)
        for l in range(S):
            target = ssum if ssum is not None else gview(0)
            for lp in range(S):
                p, cj = pair_index(l, lp)
                ops.kernel_multiply(spectra[p * G:(p + 1) * G], (I, cj), gview(lp), (LL, G), (I, B), (I, int(lp > 0)), target)
            for b in range(B): fft(target[b * G:(b + 1) * G], kd, True)
            ops.crop_accumulate(target, sens, pview(l), (I, dims[0]), (I, dims[1]), (I, kd[0]), (I, kd[1]), (LL, N), (LL, G), (I, L), (I, c0), (I, B), (I, int(c0 > 0 or l > 0)), y)
    # (weights: the Toeplitz kernels carry W)
    return np.linalg.norm(y - ref) / np.linalg.norm(ref)

def cartesian(mode, dims, L, B, weighted):
    ops = Ops(mode)
    N = int(np.prod(dims))
    fov = rng.uniform(0.1, 0.3, 3); ctr = rng.uniform(-0.05, 0.05, 3)
    mask = rng.uniform(size=N) < 0.4; mask[rng.integers(N)] = True
    points = np.nonzero(mask)[0]; M = len(points)
    h = [d // 2 for d in dims]
    ip = idx(dims)
    # model::cartesian: bin (p-h) mod n, theta/2π = k·c/2π − Σ (p−h)h/n (exact integers)
    bins = np.zeros(M, np.uint32); theta = np.zeros(M)
    stride = 1
    for a in range(3):
        n = dims[a]; p = ip[a][points]
        bins += (((p - h[a]) % n) * stride).astype(np.uint32); stride *= n
        if n > 1:
            theta += (p - h[a]) * ctr[a] / fov[a] - ((p - h[a]) * h[a] % n) / n
    theta_c = np.exp(2j * np.pi * (theta - np.round(theta)))
    # direct E
    r = np.stack([np.where(dims[a] == 1, ctr[a], ctr[a] + (ip[a] - h[a]) * fov[a] / dims[a]) for a in range(3)])
    k = np.stack([np.where(dims[a] == 1, 0.0, 2 * np.pi * (ip[a][points] - h[a]) / fov[a]) for a in range(3)])
    base = np.exp(1j * (k.T @ r))
    sens = (rng.normal(size=(L, N)) + 1j * rng.normal(size=(L, N))).astype(np.complex64)
    E = np.concatenate([sens[c][None, :].astype(complex) * base for c in range(L)])
    x = rng.normal(size=N) + 1j * rng.normal(size=N)
    d = rng.normal(size=M * L) + 1j * rng.normal(size=M * L)
    w = rng.uniform(0.2, 2.0, M) if weighted else None
    grid = np.zeros(B * N, ops.cplx)
    # forward
    out = np.zeros(M * L, np.complex128)
    for c0 in range(0, L, B):
        ops.cart_spread(x, sens, (LL, N), (I, L), (I, c0), (I, B), grid)
        for b in range(B): fft(grid[b * N:(b + 1) * N], dims, True)
        ops.cart_gather(grid, bins, theta_c, (LL, N), (LL, M), (I, L), (I, c0), (I, B), w, out)
    e_f = np.linalg.norm(out - (np.tile(w, L) if weighted else 1) * (E @ x)) / np.linalg.norm(E @ x)
    # adjoint
    y = np.zeros(N, np.complex128)
    for c0 in range(0, L, B):
        grid[:] = 0
        ops.cart_scatter(d, bins, theta_c, (LL, N), (LL, M), (I, L), (I, c0), (I, B), grid)
        for b in range(B): fft(grid[b * N:(b + 1) * N], dims, False)
        ops.cart_collect(grid, sens, (LL, N), (I, L), (I, c0), (I, B), (I, int(c0 > 0)), y)
    ref = E.conj().T @ d
    e_a = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    # normal
    wgrid = np.zeros(N, ops.real)
    ops.cart_weights(w, bins, (LL, M), wgrid)
    y = np.zeros(N, np.complex128)
    for c0 in range(0, L, B):
        ops.cart_spread(x, sens, (LL, N), (I, L), (I, c0), (I, B), grid)
        for b in range(B): fft(grid[b * N:(b + 1) * N], dims, True)
        ops.grid_weight(wgrid, (LL, N), (I, B), grid)
        for b in range(B): fft(grid[b * N:(b + 1) * N], dims, False)
        ops.cart_collect(grid, sens, (LL, N), (I, L), (I, c0), (I, B), (I, int(c0 > 0)), y)
    ref = E.conj().T @ ((np.tile(w, L) if weighted else 1) * (E @ x))
    e_n = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    return e_f, e_a, e_n

worst = {0: 0, 2: 0}
for mode in (0, 2):
    for dims, L, M, S, B in [([6, 5, 1], 1, 40, 1, 1), ([7, 8, 1], 3, 60, 1, 2), ([1, 9, 1], 2, 30, 1, 2),
                             ([4, 3, 5], 3, 50, 1, 3), ([5, 4, 2], 2, 50, 2, 1), ([3, 1, 4], 3, 40, 3, 2),
                             ([6, 7, 1], 4, 70, 3, 3), ([25, 1, 1], 2, 40, 1, 2), ([11, 5, 1], 2, 60, 2, 2)]:
        e = toeplitz(mode, dims, L, M, S, B)
        worst[mode] = max(worst[mode], e)
        print(f"toeplitz MODE {mode} {dims} L={L} M={M} S={S} B={B}: {e:.2e}")
    for dims, L, B, wt in [([6, 5, 1], 1, 1, False), ([7, 4, 1], 2, 2, True), ([8, 8, 1], 3, 2, True),
                           ([4, 3, 5], 3, 3, False), ([5, 6, 3], 2, 1, True), ([1, 6, 5], 3, 2, True)]:
        es = cartesian(mode, dims, L, B, wt)
        worst[mode] = max(worst[mode], *es)
        print(f"cartesian MODE {mode} {dims} L={L} B={B} weighted={wt}: E {es[0]:.2e} EH {es[1]:.2e} EHWE {es[2]:.2e}")
print("worst", worst)
assert worst[0] < 1e-5 and worst[2] < 1e-12
