"""Anderson acceleration's incremental step (admm's mode): the compiled passes, threads, float32."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernelforms as kf
from kernelforms.solvers import _anderson


def _run(aa, xs, fxs, out_dtype=None):
    """The candidates, residual norms and Gram matrices of ``aa`` fed the pairs ``(x, F(x))``."""
    got = []
    for x, fx in zip(xs, fxs):
        out = None if out_dtype is None else np.empty(fx.shape, dtype=out_dtype)
        c = aa.candidate(x, fx, out=out)
        got.append((None if c is None else c.copy(), aa.residual_norm, aa.gram.copy()))
    return got


def _pairs(N, calls=9, seed=0, dtype=np.float64):
    """Iterates of a contraction with noise on a wide range of scales (so that sums in another
    order round differently)."""
    rng = np.random.default_rng(seed)
    scale = np.exp(rng.uniform(-8, 8, N))
    x = rng.standard_normal(N) * scale
    xs, fxs = [], []
    for _ in range(calls):
        fx = 0.8 * x + 0.05 * np.sin(x) + 1e-3 * scale * rng.standard_normal(N)
        xs.append(x.astype(dtype))
        fxs.append(fx.astype(dtype))
        x = fx
    return xs, fxs


def test_threads_and_ranges_do_not_change_the_step(monkeypatch):
    """The sums are kept per block of BLOCK values aligned to absolute indices (7 here, the
    last block short) and the blocks added in one order: 1, 2 and 3 threads give the same
    candidates, residual norms and Gram matrices bit for bit."""
    monkeypatch.setattr(_anderson, "BLOCK", 7)
    monkeypatch.setattr(_anderson, "MIN_PARALLEL", 0)
    N = 201
    xs, fxs = _pairs(N)
    runs = []
    for t in (1, 2, 3):
        aa = _anderson.Anderson(4, threads=t)
        assert len(aa._ranges(N, 7)) == t
        runs.append(_run(aa, xs, fxs, out_dtype=np.float64))
    assert sum(c is not None for c, _, _ in runs[0]) == len(xs) - 1
    for other in runs[1:]:
        for (ca, na, ga), (cb, nb, gb) in zip(runs[0], other):
            assert na == nb
            np.testing.assert_array_equal(ga, gb)
            if ca is None:
                assert cb is None
            else:
                np.testing.assert_array_equal(ca, cb)


def test_per_thread_sums_would_change_the_step():
    """The check above can fail: on its data, the sums kept per thread range (the ranges of
    3 threads summed as single blocks) differ in the last bits from the per-block sums."""
    from kernelforms.solvers import _anderson_kernels as kern

    N, w, k = 201, 7, 4
    xs, fxs = _pairs(N, calls=k + 1)

    def sums(ranges, per_range):
        """The last call's totals; ``per_range``: one sum per range (as a per-thread sum would)
        instead of one per block of ``w`` values."""
        fp, rp = fxs[0].copy(), (fxs[0] - xs[0]).copy()
        dF, dR = np.zeros((k, N)), np.zeros((k, N))
        for p in range(k):  # fill the history: k calls
            x, f = xs[p + 1], fxs[p + 1]
            tot = 0.0
            for a, b in ranges:
                block = N if per_range else w  # (block N: the range is one block, row 0)
                parts = np.zeros((-(-N // block), 1 + 2 * (p + 1)))
                kern.fit_pass(a, b, block, x, f, fp, rp, dF, dR, p, p + 1, parts)
                tot = tot + (parts[0] if per_range else parts)
            tot = tot if per_range else tot.sum(axis=0)
        return tot

    nb = -(-N // w)
    cuts = [min(N, (nb * i // 3) * w) for i in range(4)]
    three = list(zip(cuts[:-1], cuts[1:]))
    per_block = sums(three, False)
    np.testing.assert_array_equal(per_block, sums([(0, N)], False))
    per_thread = sums(three, True)
    np.testing.assert_allclose(per_thread, per_block, rtol=1e-12)
    assert np.any(per_thread != per_block)


def test_the_passes_against_numpy():
    """fit_pass and candidate_pass against whole-vector numpy, on a range of whole blocks."""
    from kernelforms.solvers import _anderson_kernels as kern

    rng = np.random.default_rng(1)
    N, w, k, p = 60, 8, 3, 1
    x, f, fp, rp = (rng.standard_normal(N) for _ in range(4))
    dF, dR = rng.standard_normal((k, N)), rng.standard_normal((k, N))
    fp0, rp0, dR0 = fp.copy(), rp.copy(), dR.copy()
    parts = np.full((-(-N // w), 1 + 2 * k), np.nan)
    kern.fit_pass(16, N, w, x, f, fp, rp, dF, dR, p, k, parts)
    s = slice(16, N)
    r = f - x
    np.testing.assert_array_equal(rp[s], r[s])
    np.testing.assert_array_equal(fp[s], f[s])
    np.testing.assert_array_equal(dF[p, s], f[s] - fp0[s])
    np.testing.assert_array_equal(dR[p, s], r[s] - rp0[s])
    np.testing.assert_array_equal(rp[:16], rp0[:16])  # outside the range: untouched
    np.testing.assert_array_equal(dR[p, :16], dR0[p, :16])
    assert np.isnan(parts[:2]).all()
    tot = parts[2:].sum(axis=0)
    np.testing.assert_allclose(tot[0], r[s] @ r[s], rtol=1e-13)
    np.testing.assert_allclose(tot[1:1 + k], dR[:, s] @ dR[p, s], rtol=1e-12)
    np.testing.assert_allclose(tot[1 + k:], dR[:, s] @ r[s], rtol=1e-12)
    c, res = rng.standard_normal(k), np.empty(N)
    assert kern.candidate_pass(0, N, f, dF, c, res) == 0
    np.testing.assert_allclose(res, f - c @ dF, rtol=0, atol=1e-13)
    f[[3, 50]] = [np.inf, np.nan]
    assert kern.candidate_pass(0, N, f, dF, c, res) == 2


def test_a_non_finite_candidate_is_refused():
    aa = _anderson.Anderson(2)
    x = np.ones(10)
    assert aa.candidate(x, 0.5 * x) is None  # the first call only records
    fx = 0.25 * x
    fx[4] = np.inf
    assert aa.candidate(0.5 * x, fx) is None


def test_float32_state_keeps_its_precision():
    """float32 vectors (admm's dtype="float32"): the candidate is float32 and agrees with the
    float64 whole-vector fit on the same float32 inputs to float32 rounding."""
    xs, fxs = _pairs(300, seed=2, dtype=np.float32)
    a = _run(_anderson.Anderson(3, incremental=False),
             [x.astype(np.float64) for x in xs], [f.astype(np.float64) for f in fxs])
    b = _run(_anderson.Anderson(3, threads=2), xs, fxs, out_dtype=np.float32)
    for (ca, na, _), (cb, nb, _) in zip(a, b):
        assert nb == pytest.approx(na, rel=1e-6)
        assert (ca is None) == (cb is None)
        if ca is not None:
            assert cb.dtype == np.float32
            np.testing.assert_allclose(cb, ca, rtol=0, atol=1e-4 * np.abs(ca).max())


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_admm_threads_do_not_change_the_accelerated_iterates(dtype, monkeypatch):
    """admm passes its thread count to Anderson: with the passes split over 3 threads (blocks
    of 5 values here) the accelerated run gives the one-thread run's factor bit for bit."""
    from kernelforms.solvers import admm

    monkeypatch.setattr(admm, "SUM_ROWS", 4)
    monkeypatch.setattr(_anderson, "BLOCK", 5)
    monkeypatch.setattr(_anderson, "MIN_PARALLEL", 0)
    X, y = kf.datasets.two_gaussians(40, d=4, seed=0)
    p = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, 24, 24, seed=1))
    kw = dict(max_iter=80, seed=5, polish=False, rank=4, anderson_start=1.0, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kf.ConvergenceWarning)
        a = kf.solve(p, "admm", threads=1, **kw)
        b = kf.solve(p, "admm", threads=3, block_rows=12, **kw)
    assert a.extras["anderson"]["accepted"] > 0 and b.extras["threads"] == 3
    assert b.extras["anderson"] == a.extras["anderson"]
    np.testing.assert_array_equal(b.factor, a.factor)
    assert b.history["primal"] == a.history["primal"]


def test_streamed_buffers_are_ordinary_pages(monkeypatch):
    """From STREAMED_BYTES up, ``streamed`` maps its own page-aligned memory, writable, marked
    for no huge pages where the platform can say so (Linux: ``nh`` among the mapping's flags
    in /proc/self/smaps); below, it is ``np.empty``."""
    import mmap
    import os

    from kernelforms import _pages

    monkeypatch.setattr(_pages, "STREAMED_BYTES", 1 << 16)
    small = _pages.streamed((10, 3), np.float32)
    assert small.shape == (10, 3) and small.dtype == np.float32 and small.base is None
    one = _pages.streamed((1 << 14,))
    assert one.shape == (1 << 14,) and one.base.obj.__class__ is mmap.mmap
    assert _pages.owns_memory(one) and _pages.owns_memory(small)
    assert not _pages.owns_memory(one[1:])
    big = _pages.streamed((2, 1 << 13))
    assert big.shape == (2, 1 << 13) and big.dtype == np.float64 and big.flags.writeable
    assert not _pages.owns_memory(big)  # (a reshaped view: not handed to a pool)
    owner = big
    while isinstance(owner, (np.ndarray, memoryview)):
        owner = owner.base if isinstance(owner, np.ndarray) else owner.obj
    assert isinstance(owner, mmap.mmap) and big.ctypes.data % mmap.PAGESIZE == 0
    big[...] = np.arange(big.size).reshape(big.shape)
    assert big[1, -1] == big.size - 1
    if not hasattr(mmap, "MADV_NOHUGEPAGE") or not os.path.exists("/proc/self/smaps"):
        return
    start = big.ctypes.data
    flags = None
    with open("/proc/self/smaps") as fh:
        inside = False
        for line in fh:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= start < hi
            elif inside and head == "VmFlags:":
                flags = line.split()[1:]
                break
    assert flags is not None and "nh" in flags


def test_fresh_buffers_are_written_before_they_are_read(monkeypatch):
    """admm's saved states and Anderson's history come uninitialised (``streamed``): filled
    with NaN instead, the accelerated run (with a rejected candidate, so that the saved plain
    step is restored) gives the same factor bit for bit."""
    from kernelforms.solvers import admm

    X, y = kf.datasets.two_gaussians(60, d=2, seed=0)
    p = kf.PCP.from_data(X, kf.pairs.sample_pairs(y, 20, 20, seed=1))
    kw = dict(max_iter=150, seed=1, polish=False, rank=3, anderson_start=1.0, anderson_depth=3,
              threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kf.ConvergenceWarning)
        a = kf.solve(p, "admm", **kw)

        def poisoned(shape, dtype=np.float64):
            return np.full(shape, np.nan, dtype=dtype)

        monkeypatch.setattr(_anderson, "streamed", poisoned)
        monkeypatch.setattr(admm, "streamed", poisoned)
        b = kf.solve(p, "admm", **kw)
    assert a.extras["anderson"]["accepted"] > 0 and a.extras["anderson"]["rejected"] > 0
    assert b.extras["anderson"] == a.extras["anderson"]
    np.testing.assert_array_equal(b.factor, a.factor)
