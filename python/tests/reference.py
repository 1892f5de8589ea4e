"""A float64 direct sum of design/MODEL.md, written independently of the
library and of shared/bench/cases.py, plus a random problem generator.

Arrays here use the binding's semantic shapes: positions (N, 3), basis (N, B),
coefficients (M, B), sensitivities (N, L), data (M, L), image (N,).
"""

from dataclasses import dataclass

import numpy as np

import horecon

FOV = 0.22  # m

# the backends to test: the CPU always, CUDA where a device is present
BACKENDS = ["cpu"] + (["cuda"] if horecon.cuda_device_count() > 0 else [])


def solid_harmonics(positions, nterms):
    """h_b(r_n), (N, nterms): the MODEL.md table (unnormalised, field-camera order)."""
    x, y, z = positions[:, 0], positions[:, 1], positions[:, 2]
    r2 = x**2 + y**2 + z**2
    table = [
        np.ones_like(x),
        x,
        y,
        z,
        x * y,
        z * y,
        3 * z**2 - r2,
        x * z,
        x**2 - y**2,
        3 * y * x**2 - y**3,
        x * y * z,
        (5 * z**2 - r2) * y,
        5 * z**3 - 3 * z * r2,
        (5 * z**2 - r2) * x,
        z * (x**2 - y**2),
        x**3 - 3 * x * y**2,
    ]
    return np.stack(table[:nterms], axis=1)


def grid_positions(dims, fov, center=(0.0, 0.0, 0.0)):
    """MODEL.md grid helper: x_i = c_x + (i - floor(nx/2)) fov_x/nx; (N, 3), x fastest."""
    axes = [
        c + (np.arange(n) - n // 2) * (f / n) if n > 1 else np.array([float(c)])
        for n, f, c in zip(dims, fov, center, strict=True)
    ]
    x, y, z = np.meshgrid(*axes, indexing="ij")
    return np.stack([a.ravel(order="F") for a in (x, y, z)], axis=1)


@dataclass
class Problem:
    """One encoding problem in MODEL.md terms."""

    dims: tuple
    ncoils: int
    nsamples: int
    positions: np.ndarray  # (N, 3)
    kind: str  # 'harmonics' | 'basis' | 'trajectory'
    coefficients: np.ndarray  # (M, B)
    basis: np.ndarray = None  # (N, B) for kind == 'basis'
    omega: np.ndarray = None  # (N,)
    times: np.ndarray = None  # (M,)
    sensitivities: np.ndarray = None  # (N, L) complex64

    @property
    def nvoxels(self):
        return int(np.prod(self.dims))

    def h(self):
        """The spatial basis, (N, B)."""
        b = self.coefficients.shape[1]
        if self.kind == "harmonics":
            return solid_harmonics(self.positions, b)
        if self.kind == "trajectory":
            return self.positions[:, :b]
        return self.basis

    def encoding(self):
        """exp(+i phi(j, n)), (M, N) complex128."""
        phase = self.coefficients @ self.h().T
        if self.omega is not None:
            phase = phase + np.outer(self.times, self.omega)
        return np.exp(1j * phase)

    def coil_maps(self):
        s = self.sensitivities
        return np.ones((self.nvoxels, 1)) if s is None else s.astype(np.complex128)

    def forward(self, image):
        """d_{j,c} = sum_n S_c(r_n) exp(+i phi(j,n)) rho_n, (M, L)."""
        x = np.asarray(image, dtype=np.complex128).reshape(-1, order="F")
        return self.encoding() @ (self.coil_maps() * x[:, None])

    def adjoint(self, data):
        """rho_n = sum_c conj(S_c(r_n)) sum_j exp(-i phi(j,n)) d_{j,c}, (N,)."""
        d = np.asarray(data, dtype=np.complex128).reshape(self.nsamples, self.ncoils)
        return (np.conj(self.coil_maps()) * (self.encoding().conj().T @ d)).sum(axis=1)

    def plan(self, precision="accurate", backend="cpu"):
        p = horecon.Plan(
            self.dims, ncoils=self.ncoils, nsamples=self.nsamples, backend=backend, precision=precision
        )
        if self.kind != "basis":
            p.set_positions(self.positions)
        if self.kind == "harmonics":
            p.set_solid_harmonics(self.coefficients)
        elif self.kind == "trajectory":
            p.set_trajectory(self.coefficients)
        else:
            p.set_basis(self.basis, self.coefficients)
        if self.omega is not None:
            p.set_off_resonance(self.omega, self.times)
        if self.sensitivities is not None:
            p.set_sensitivities(self.sensitivities)
        return p


ORDER = [0, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3]


def random_problem(rng, max_voxels=300, max_samples=200, max_cycles=40.0, kind=None):
    """Random sizes, positions in the field of view, phases of up to
    ~2*pi*max_cycles rad from each term, off-resonance in 60 % of draws."""
    nx = int(rng.integers(1, 16))
    ny = int(rng.integers(1, max(1, min(16, max_voxels // nx)) + 1))
    nz = int(rng.integers(1, max(1, min(5, max_voxels // (nx * ny))) + 1))
    dims = (nx, ny, nz)
    n = nx * ny * nz
    m = int(rng.integers(1, max_samples + 1))
    ncoils = int(rng.integers(1, 4))
    kind = kind or ["harmonics", "basis", "trajectory"][int(rng.integers(0, 3))]
    positions = rng.uniform(-FOV / 2, FOV / 2, (n, 3))
    kmax = max_cycles * 2 * np.pi / (FOV / 2)
    basis = None
    if kind == "harmonics":
        b = [1, 4, 9, 16][int(rng.integers(0, 4))]
        scale = np.array([[3.0, kmax, 300.0, 3000.0][ORDER[i]] for i in range(b)])
    elif kind == "trajectory":
        b = int(rng.integers(1, 4))
        scale = np.full(b, kmax)
    else:
        b = int(rng.integers(1, 7))
        scale = np.full(b, kmax)
        basis = rng.uniform(-FOV / 2, FOV / 2, (n, b))
    coefficients = scale * rng.uniform(-1, 1, (m, b))
    omega = times = None
    if rng.uniform() < 0.6:
        omega = 2 * np.pi * 200 * rng.uniform(-1, 1, n)
        times = np.linspace(0.0, 0.03, m)
    sensitivities = None
    if ncoils > 1 or rng.uniform() < 0.5:
        sensitivities = rng.complex(n, ncoils).astype(np.complex64)
    return Problem(dims, ncoils, m, positions, kind, coefficients, basis, omega, times, sensitivities)


def rel_rms(got, want):
    """Relative RMS error ||got - want|| / ||want||."""
    got = np.asarray(got, dtype=np.complex128).ravel(order="F")
    want = np.asarray(want, dtype=np.complex128).ravel(order="F")
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))
