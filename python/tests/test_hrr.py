"""lshk.Hrr and lshk.hrr_class_vectors: against a numpy FFT reference in
float64 within the FFT error bound of docs/hrr.md, and bit for bit against
the C library (liblshk.so through ctypes)."""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import lshk

U = 2.0**-24
DIMS = [1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 64, 100, 257, 400, 1024]


def e_fft(d):
    """docs/hrr.md: one transform's relative 2-norm error, 5 u L with
    L = 3 ceil(log2(2d)) (Higham's Cooley-Tukey bound, with room for
    mixed-radix, Rader and Bluestein plans)."""
    return 5 * U * 3 * math.ceil(math.log2(2 * d))


def bind_bound(x, y):
    """docs/hrr.md's bound on |fl(x ⊛ y) - x ⊛ y|_2 per row (float64 inputs
    that are the float32 arguments), for bind and the approximate unbind
    (same spectra magnitudes)."""
    d = x.shape[-1]
    ef = e_fft(d)
    X, Y = np.fft.fft(x), np.fft.fft(y)
    xi, yi = np.abs(X).max(-1), np.abs(Y).max(-1)
    x2, y2 = np.linalg.norm(X, axis=-1), np.linalg.norm(Y, axis=-1)
    xy2 = np.linalg.norm(X * Y, axis=-1)
    z2 = xy2 / math.sqrt(d)
    return (((2 * ef + 4 * U) * (xi * y2 + yi * x2) / 2 + (ef + 4 * U) * xy2)
            * (1 + 2 * ef) / math.sqrt(d) + U * z2)


def conv(x, y):
    return np.real(np.fft.ifft(np.fft.fft(x) * np.fft.fft(y)))


def corr(key, s):
    return np.real(np.fft.ifft(np.conj(np.fft.fft(key)) * np.fft.fft(s)))


def rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def tiers():
    out = []
    for t in ("scalar", "portable", "avx2", "avx512"):
        try:
            lshk.Hrr(8, isa=t)
        except lshk.LshkError as e:
            assert e.status_name == "LSHK_STATUS_UNSUPPORTED_ISA", e
            continue
        out.append(t)
    return out


@pytest.mark.parametrize("d", DIMS)
def test_bind_is_circular_convolution(d, capi):
    rng = np.random.default_rng(d)
    x, y = rand(rng, 5, d), rand(rng, 5, d)
    h = lshk.Hrr(d)
    z = h.bind(x, y)
    assert z.dtype == np.float32 and z.shape == (5, d)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    err = np.linalg.norm(z - conv(x64, y64), axis=1)
    assert (err <= bind_bound(x64, y64)).all(), (err, bind_bound(x64, y64))
    # one key row for every row
    z1 = h.bind(x[:1], y)
    err1 = np.linalg.norm(z1 - conv(x64[:1], y64), axis=1)
    assert (err1 <= bind_bound(np.broadcast_to(x64[:1], y64.shape), y64)).all()
    # the C library's bits
    ch = capi.hrr_new(d)
    try:
        assert np.array_equal(z.view(np.uint32), capi.hrr_bind(ch, x, y).view(np.uint32))
        assert np.array_equal(z1.view(np.uint32), capi.hrr_bind(ch, x[:1].copy(), y).view(np.uint32))
    finally:
        capi.hrr_free(ch)
    # a 1-D pair gives a 1-D row, the same bits as the batch's row
    assert np.array_equal(h.bind(x[2], y[2]), z[2])


@pytest.mark.parametrize("d", DIMS)
def test_unbind_approx_is_circular_correlation(d, capi):
    rng = np.random.default_rng(100 + d)
    key, s = rand(rng, 4, d), rand(rng, 4, d)
    h = lshk.Hrr(d)
    y = h.unbind(key, s)
    assert np.array_equal(y, h.unbind(key, s, "approx"))
    k64, s64 = key.astype(np.float64), s.astype(np.float64)
    # key† ⊛ s with key†_i = key_{-i mod d}: the circular correlation
    kdag = np.roll(k64[:, ::-1], 1, axis=1)
    assert np.allclose(conv(kdag, s64), corr(k64, s64))
    err = np.linalg.norm(y - corr(k64, s64), axis=1)
    assert (err <= bind_bound(k64, s64)).all(), (err, bind_bound(k64, s64))
    ch = capi.hrr_new(d)
    try:
        assert np.array_equal(y.view(np.uint32), capi.hrr_unbind(ch, key, s, 0).view(np.uint32))
    finally:
        capi.hrr_free(ch)


@pytest.mark.parametrize("d", [2, 7, 16, 100, 400])
def test_unbind_exact_and_roundtrip_with_projected_keys(d, capi):
    rng = np.random.default_rng(200 + d)
    h = lshk.Hrr(d)
    key = h.project(rand(rng, 3, d))
    y = rand(rng, 3, d)
    s = h.bind(key, y)
    ex = h.unbind(key, s, "exact")
    ap = h.unbind(key, s, inverse=0)
    k64, s64 = key.astype(np.float64), s.astype(np.float64)
    K = np.fft.fft(k64)
    ref = np.real(np.fft.ifft(np.fft.fft(s64) / K))
    # the exact inverse's spectrum 1 / K: the approximate unbind's bound with
    # that spectrum, times the conditioning max|K| / min|K| (docs/hrr.md)
    kinv = np.real(np.fft.ifft(1.0 / K))
    cond = np.abs(K).max(1) / np.abs(K).min(1)
    err = np.linalg.norm(ex - ref, axis=1)
    assert (err <= cond * bind_bound(kinv, s64)).all(), (err, cond * bind_bound(kinv, s64))
    # for projected keys both inverses give back y, within the bind's and
    # unbind's bounds and, for the approximate one, |K|^2 - 1 (the
    # projection's 1e-5 leaves |K| just below 1)
    y64 = y.astype(np.float64)
    off = np.abs(np.abs(K) ** 2 - 1).max(1)
    tol = bind_bound(k64, y64) * 2 + off * np.linalg.norm(y64, axis=1)
    assert (np.linalg.norm(ap - y64, axis=1) <= tol).all()
    assert (np.linalg.norm(ex - y64, axis=1) <= cond * tol).all()
    ch = capi.hrr_new(d)
    try:
        assert np.array_equal(ex.view(np.uint32), capi.hrr_unbind(ch, key, s, 1).view(np.uint32))
    finally:
        capi.hrr_free(ch)


@pytest.mark.parametrize("d", [1, 3, 8, 17, 64, 400])
def test_project(d, capi):
    rng = np.random.default_rng(300 + d)
    x = rand(rng, 6, d)
    h = lshk.Hrr(d)
    p = h.project(x)
    x64 = x.astype(np.float64)
    X = np.fft.fft(x64)
    ref = np.real(np.fft.ifft(X / (np.abs(X) + 1e-5)))
    # per frequency |fl(X_k) - X_k| <= e_F |X|_2, and a -> a / (|a| + eps)
    # moves by at most 2 |da| / |a|; then the division's roundings (4u), the
    # inverse transform (e_F) and the output's rounding
    ef = e_fft(d)
    dP = 2 * ef * np.linalg.norm(X, axis=1, keepdims=True) / np.abs(X) + 4 * U
    tol = (np.linalg.norm(dP, axis=1) * (1 + ef) / math.sqrt(d)
           + ef * np.linalg.norm(ref, axis=1) + U * np.linalg.norm(ref, axis=1))
    err = np.linalg.norm(p - ref, axis=1)
    assert (err <= tol).all(), (err, tol)
    ch = capi.hrr_new(d)
    try:
        assert np.array_equal(p.view(np.uint32), capi.hrr_project(ch, x).view(np.uint32))
    finally:
        capi.hrr_free(ch)


@pytest.mark.parametrize("d", [1, 2, 3, 8, 17, 400])
def test_class_vectors(d, capi):
    c = lshk.hrr_class_vectors(42, d, 16)
    assert c.dtype == np.float32 and c.shape == (16, d)
    assert np.array_equal(c.view(np.uint32), capi.hrr_class_vectors(42, d, 16).view(np.uint32))
    # any row range, any thread count: the same rows
    assert np.array_equal(lshk.hrr_class_vectors(42, d, 5, first=7, threads=1), c[7:12])
    assert np.array_equal(lshk.hrr_class_vectors(42, d, 16, threads=2), c)
    assert not np.array_equal(lshk.hrr_class_vectors(43, d, 16), c)
    # unit magnitude at every frequency, up to the f32 rounding of each
    # entry (|dc|_2 <= u |c|_2 = u, so |dF_k| <= sqrt(d) u) and numpy's f64 FFT
    mag = np.abs(np.fft.fft(c.astype(np.float64)))
    assert (np.abs(mag - 1) <= math.sqrt(d) * U + 1e-12).all()
    assert (np.abs(np.linalg.norm(c.astype(np.float64), axis=1) - 1) <= math.sqrt(d) * U).all()


def test_every_tier_gives_the_same_bits():
    rng = np.random.default_rng(5)
    for d in (17, 64, 400):
        x, y = rand(rng, 3, d), rand(rng, 3, d)
        want = None
        for t in tiers():
            h = lshk.Hrr(d, isa=t)
            got = (h.bind(x, y), h.unbind(x, y), h.unbind(x, y, "exact"), h.project(x))
            if want is None:
                want = got
            for a, b in zip(got, want):
                assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), t


def test_layouts_and_threads():
    rng = np.random.default_rng(6)
    d = 64
    h = lshk.Hrr(d)
    wide = rand(rng, 40, 2 * d)
    x, y = wide[:, :d], wide[:, d:]  # rows not adjacent: copied for the C call
    assert np.array_equal(h.bind(x, y), h.bind(x.copy(), y.copy()))
    assert np.array_equal(h.unbind(x[:, :], np.asfortranarray(y)), h.unbind(x.copy(), y.copy()))
    # one object from several threads: its lock serialises the calls
    want = [h.bind(x[i:i + 1], y) for i in range(len(x))]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda i: h.bind(x[i:i + 1], y), range(len(x))))
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


def test_bad_input():
    h = lshk.Hrr(8)
    x = np.ones((3, 8), np.float32)
    with pytest.raises(TypeError, match="float32"):
        h.bind(x.astype(np.float64), x)
    with pytest.raises(ValueError, match="dim = 8"):
        h.bind(x, np.ones((3, 9), np.float32))
    with pytest.raises(ValueError, match="1 row"):
        h.unbind(np.ones((2, 8), np.float32), x)
    with pytest.raises(ValueError, match="1-D or 2-D"):
        h.project(np.ones((2, 2, 8), np.float32))
    bad = x.copy()
    bad[1, 3] = np.nan
    for f in (lambda: h.bind(x, bad), lambda: h.unbind(bad, x), lambda: h.project(bad)):
        with pytest.raises(lshk.LshkError) as e:
            f()
        assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
        assert e.value.message.startswith("lshk_hrr_")
    with pytest.raises(ValueError, match="inverse"):
        h.unbind(x, x, "pseudo")
    with pytest.raises(lshk.LshkError) as e:
        h.unbind(x, x, 7)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    with pytest.raises(lshk.LshkError) as e:
        lshk.Hrr(0)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    with pytest.raises(ValueError, match="isa"):
        lshk.Hrr(8, isa="sse9")
    with pytest.raises(ValueError, match="dim"):
        lshk.hrr_class_vectors(1, 0, 4)
    # n = 0 rows: empty outputs
    assert h.bind(x[:1], np.zeros((0, 8), np.float32)).shape == (0, 8)
    assert lshk.hrr_class_vectors(1, 8, 0).shape == (0, 8)
    assert h.dim == 8 and "dim=8" in repr(h)
