"""horecon.nufft against pip finufft (the oracle: same sign, same mode order,
same shapes) and against numpy direct sums; adjointness; shapes; errors."""

import threading

import numpy as np
import pytest

import horecon
import horecon.nufft as hn


def points(rng, ndims, m):
    """m points per axis in [-3 pi, 3 pi), a tenth of them in one small cluster."""
    x = rng.uniform(-3 * np.pi, 3 * np.pi, (ndims, m))
    x[:, : m // 10] = rng.uniform(0.3, 0.301, (ndims, m // 10))
    return x


def direct1(x, c, n_modes, isign):
    """f[k] = sum_j c_j exp(isign i k.x_j), modes -N//2 ... (N-1)//2, FINUFFT's shapes."""
    ks = np.meshgrid(*[np.arange(-(n // 2), (n + 1) // 2) for n in n_modes], indexing="ij")
    phase = sum(np.multiply.outer(k, xi) for k, xi in zip(ks, x))
    return np.exp(isign * 1j * phase) @ c


def direct2(x, f, isign):
    ks = np.meshgrid(*[np.arange(-(n // 2), (n + 1) // 2) for n in f.shape], indexing="ij")
    phase = sum(np.multiply.outer(xi, k) for k, xi in zip(ks, x))
    return (np.exp(isign * 1j * phase) * f[None]).reshape(len(x[0]), -1).sum(axis=1)


def rel(a, b):
    return np.linalg.norm(np.ravel(a - b)) / np.linalg.norm(np.ravel(b))


SHAPES = [(37,), (16,), (12, 9), (1, 7), (6, 5, 4), (5, 1, 3)]


@pytest.mark.parametrize("n_modes", SHAPES)
@pytest.mark.parametrize("dtype,eps", [("complex64", 1e-6), ("complex64", 1e-3), ("complex128", 1e-10)])
def test_matches_direct_sums(rng, n_modes, dtype, eps):
    m = int(rng.integers(50, 300))
    x = points(rng, len(n_modes), m)
    c = rng.complex(m) + (1 + 1j)  # mean 1 + i: few-mode sums do not cancel by chance
    f = rng.complex(*n_modes)
    for isign in (1, -1):
        if dtype == "complex64":
            c, f = c.astype(np.complex64).astype(complex), f.astype(np.complex64).astype(complex)
        got1 = hn.nufft1(tuple(x), c.astype(dtype), n_modes, eps=eps, isign=isign)
        got2 = hn.nufft2(tuple(x), f.astype(dtype), eps=eps, isign=isign)
        assert got1.shape == n_modes and got1.dtype == dtype
        assert got2.shape == (m,) and got2.dtype == dtype
        e1, e2 = rel(got1, direct1(x, c, n_modes, isign)), rel(got2, direct2(x, f, isign))
        assert e1 <= eps and e2 <= eps, (n_modes, dtype, eps, isign, e1, e2)


@pytest.mark.parametrize("n_modes", [(64,), (40, 33), (12, 10, 9)])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("n_trans", [1, 3])
def test_matches_finufft(rng, n_modes, dtype, n_trans):
    finufft = pytest.importorskip("finufft")
    m = int(rng.integers(1000, 4000))
    x = points(rng, len(n_modes), m)
    eps = 1e-6 if dtype == "complex64" else 1e-9
    for nufft_type in (1, 2):
        isign = int(rng.choice([-1, 1]))
        ours = hn.Plan(nufft_type, n_modes, n_trans=n_trans, eps=eps, isign=isign, dtype=dtype,
                       backend="cpu")
        ours.setpts(*x)
        theirs = finufft.Plan(nufft_type, n_modes, n_trans=n_trans, eps=1e-14, isign=isign,
                              dtype="complex128")
        theirs.setpts(*x)
        shape = ((n_trans,) if n_trans > 1 else ()) + ((m,) if nufft_type == 1 else n_modes)
        data = rng.complex(*shape).astype(dtype)
        got, expect = ours.execute(data), theirs.execute(data.astype(np.complex128))
        assert got.shape == expect.shape and got.dtype == dtype
        err = rel(got, expect)
        assert err <= eps, (nufft_type, n_modes, dtype, n_trans, err)
        # FINUFFT's simple interface on the same points gives the same numbers
        if n_trans == 1 and len(n_modes) == 2:
            simple = (finufft.nufft2d1(x[0], x[1], data.astype(complex), n_modes, isign=isign, eps=1e-14)
                      if nufft_type == 1 else
                      finufft.nufft2d2(x[0], x[1], data.astype(complex), isign=isign, eps=1e-14))
            assert rel(got, simple) <= eps


@pytest.mark.parametrize("n_modes", [(33,), (12, 9), (6, 7, 5)])
def test_type1_and_type2_are_adjoint(rng, n_modes):
    m = 200
    x = points(rng, len(n_modes), m)
    c, f = rng.complex(m), rng.complex(*n_modes)
    a = hn.nufft1(tuple(x), c, n_modes, eps=1e-10, isign=-1)
    ah = hn.nufft2(tuple(x), f, eps=1e-10, isign=1)
    left, right = np.vdot(f, a), np.vdot(ah, c)
    assert abs(left - right) <= 1e-12 * np.linalg.norm(a) * np.linalg.norm(f)


def test_several_transforms_equal_one_at_a_time(rng):
    m, n_modes = 400, (20, 18)
    x = points(rng, 2, m)
    c = rng.complex(4, m).astype(np.complex64)
    plan = hn.Plan(1, n_modes, n_trans=4, eps=1e-6, dtype="complex64")
    plan.setpts(*x)
    batched = plan.execute(c)
    single = hn.Plan(1, n_modes, eps=1e-6, dtype="complex64")
    single.setpts(*x)
    for t in range(4):
        assert rel(batched[t], single.execute(c[t])) <= 1e-7
    # nufft1 with a leading shape of transforms
    many = hn.nufft1(tuple(x), c.reshape(2, 2, m), n_modes, eps=1e-6)
    assert many.shape == (2, 2) + n_modes and rel(many.reshape(4, *n_modes), batched) <= 1e-7


def test_out_argument_and_memory_order(rng):
    m, n_modes = 300, (9, 8, 7)
    x = points(rng, 3, m)
    f = rng.complex(*n_modes)
    plan = hn.Plan(2, n_modes, eps=1e-9)
    plan.setpts(*x)
    c = plan.execute(f)
    assert rel(plan.execute(np.asfortranarray(f)), c) == 0.0
    out = np.empty(m, dtype=complex)
    assert plan.execute(f, out=out) is out and rel(out, c) == 0.0
    with pytest.raises(horecon.HoreconValueError):
        plan.execute(f, out=np.empty(m + 1, dtype=complex))


def test_threads_share_a_plan(rng):
    m, n_modes = 2000, (64, 48)
    x = points(rng, 2, m)
    plan = hn.Plan(1, n_modes, eps=1e-6, dtype="complex64")
    plan.setpts(*x)
    inputs = [rng.complex(m).astype(np.complex64) for _ in range(6)]
    expect = [plan.execute(c) for c in inputs]
    results = [None] * 6

    def work(i):
        results[i] = plan.execute(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(r, e) for r, e in zip(results, expect))


def test_setpts_while_another_thread_executes(rng):
    """execute sizes its output from the point count of the plan it runs: a
    setpts in between (other points, another count) once made a type-2
    execute write the new count into a buffer sized for the old one."""
    plan = hn.Plan(2, (8,), eps=1e-6, dtype="complex64", backend="cpu")
    few, many = points(rng, 1, 4), points(rng, 1, 20000)
    plan.setpts(*few)
    f = rng.complex(8).astype(np.complex64)
    stop, sizes, errors = threading.Event(), set(), []

    def swap():
        while not stop.is_set():
            plan.setpts(*many)
            plan.setpts(*few)

    def run():
        try:
            while not stop.is_set():
                c = plan.execute(f)
                assert np.isfinite(c).all()
                sizes.add(c.size)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=swap), threading.Thread(target=run)]
    for t in threads:
        t.start()
    threading.Event().wait(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert not errors and sizes <= {4, 20000} and sizes, (errors, sizes)


def test_errors(rng):
    x = points(rng, 2, 50)
    with pytest.raises(horecon.HoreconValueError):
        hn.Plan(3, (8, 8))
    with pytest.raises(horecon.HoreconValueError):
        hn.Plan(1, (8, 8, 8, 8))
    with pytest.raises(TypeError):
        hn.Plan(1, (8, 8), dtype="float64")
    plan = hn.Plan(1, (8, 8), eps=1e-7, dtype="complex64")
    with pytest.raises(horecon.HoreconError) as err:
        plan.setpts(*x)  # float32 arithmetic: eps >= 1e-6
    assert err.value.name == "HORECON_ERR_INVALID_ARGUMENT" and "tolerance" in err.value.message
    plan = hn.Plan(1, (8, 8))
    with pytest.raises(horecon.HoreconValueError):
        plan.execute(np.ones(50))  # no points yet
    with pytest.raises(horecon.HoreconValueError):
        plan.setpts(x[0])  # one coordinate for 2D
    with pytest.raises(horecon.HoreconValueError):
        plan.setpts(x[0], x[1][:-1])
    bad = x.copy()
    bad[1, 7] = np.nan
    with pytest.raises(horecon.HoreconError) as err:
        plan.setpts(*bad)
    assert err.value.name == "HORECON_ERR_NOT_FINITE" and "points[57]" in err.value.message
    plan.setpts(*x)
    with pytest.raises(horecon.HoreconValueError):
        plan.execute(np.ones(49))
    c = rng.complex(50)
    c[3] = np.inf
    with pytest.raises(horecon.HoreconError) as err:
        plan.execute(c)
    assert err.value.name == "HORECON_ERR_NOT_FINITE" and "nonuniform[3]" in err.value.message
    with pytest.raises(horecon.HoreconError) as err:
        hn.Plan(1, (0, 8)).setpts(*x)
    assert err.value.name == "HORECON_ERR_INVALID_ARGUMENT"
    plan.close()
    plan.close()
    with pytest.raises(horecon.HoreconError) as err:
        plan.execute(rng.complex(50))
    assert err.value.name == "HORECON_ERR_NULL_POINTER"
    if horecon.cuda_device_count() == 0:
        with pytest.raises(horecon.HoreconError) as err:
            hn.Plan(1, (8, 8), backend="cuda").setpts(*x)
        assert err.value.name == "HORECON_ERR_BACKEND_UNAVAILABLE"
