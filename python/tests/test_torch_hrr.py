"""lshk.torch.HrrOutput: the J_p + J_n loss proven two ways (gradcheck of
the float64 path, whose backward is written out as on the lshk path; the
float32 lshk gradients against a float64 PyTorch autograd reference within
a bound derived from the kernels' error bounds), `predict` against the
exact top k, and bad input. Skipped where torch is not installed."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import lshk

torch = pytest.importorskip("torch")
import lshk.torch as lt  # noqa: E402

U = 2.0**-24


def gamma(n):
    n = np.asarray(n, np.float64)
    return n * U / (1 - n * U)


def e_fft(d):
    return 5 * U * 3 * math.ceil(math.log2(2 * d))


def bind_bound(x, y):
    """docs/hrr.md's bound on |fl(x ⊛ y) - x ⊛ y|_2 per row (also the
    approximate unbind's): x, y float64 arrays of the float32 arguments."""
    d = x.shape[-1]
    ef = e_fft(d)
    X, Y = np.fft.fft(x), np.fft.fft(y)
    xi, yi = np.abs(X).max(-1), np.abs(Y).max(-1)
    x2, y2 = np.linalg.norm(X, axis=-1), np.linalg.norm(Y, axis=-1)
    xy2 = np.linalg.norm(X * Y, axis=-1)
    return (((2 * ef + 4 * U) * (xi * y2 + yi * x2) / 2 + (ef + 4 * U) * xy2)
            * (1 + 2 * ef) / math.sqrt(d) + U * xy2 / math.sqrt(d))


def ragged(rng, nb, m, most=4):
    """Positive label sets of 1..most distinct labels, as a (nb, most)
    tensor padded with -1."""
    lab = -np.ones((nb, most), np.int64)
    for b in range(nb):
        n = rng.integers(1, most + 1)
        lab[b, :n] = rng.choice(m, n, replace=False)
    return torch.from_numpy(lab)


def reference(s, C, p, m, rows, absolute=True):
    """The loss in float64 by PyTorch's autograd, term by term: rows is a
    list of (sample, key 'p' or 'm', label, positive under p)."""
    d = s.shape[1]

    def unbind(k, v):
        return torch.fft.irfft(torch.conj(torch.fft.rfft(k)) * torch.fft.rfft(v), n=d)

    yp = unbind(p, s)
    ym = unbind(m, s)
    yp = yp / (yp.norm(dim=1, keepdim=True) + 1e-8)
    ym = ym / (ym.norm(dim=1, keepdim=True) + 1e-8)
    total = s.new_zeros(())
    for b, key, j, pos in rows:
        z = (C[j] * (yp[b] if key == "p" else ym[b])).sum()
        total = total + ((1 - (z.abs() if absolute else z)) if pos else z.abs())
    return total / s.shape[0]


def terms(layer, lab):
    """The (sample, key, label, positive) terms of the module's loss for the
    padded labels `lab`, negatives drawn as the module draws them."""
    pid, poff = lt._multi_labels(lab, None, lab.shape[0], layer.classes)
    nid, noff = layer.negatives(pid, poff)
    rows = []
    for b in range(lab.shape[0]):
        for j in pid[poff[b]:poff[b + 1]]:
            rows.append((b, "p", int(j), True))
            if layer.use_absent:
                rows.append((b, "m", int(j), False))
        for j in nid[noff[b]:noff[b + 1]]:
            rows.append((b, "p", int(j), False))
    return rows


@pytest.mark.parametrize("absent,neg,absolute", [
    (True, 0, True), (True, 3, True), (False, 4, True), (True, 3, False)])
def test_gradcheck_float64_path(absent, neg, absolute):
    rng = np.random.default_rng(1)
    layer = lt.HrrOutput(40, 16, seed=3, absent=absent, num_negatives=neg, absolute=absolute)
    lab = ragged(rng, 3, 40)
    s = torch.randn(3, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2),
                    requires_grad=True)

    def f(x):
        layer.step = 0  # the same negatives on every evaluation
        return layer(x, lab)

    assert torch.autograd.gradcheck(f, (s,), eps=1e-6, atol=1e-8)
    # the written-out backward equals autograd of the same loss
    layer.step = 0
    rows = terms(layer, lab)
    C = layer.class_vectors.double()
    p, m = layer.present.double(), layer.absent.double()
    s1 = s.detach().clone().requires_grad_()
    ref = reference(s1, C, p, m, rows, absolute)
    ref.backward()
    s2 = s.detach().clone().requires_grad_()
    got = f(s2)
    got.backward()
    assert abs(got.item() - ref.item()) <= 1e-12
    assert torch.allclose(s2.grad, s1.grad, rtol=0, atol=1e-12)


@pytest.mark.parametrize("d", [64, 100, 256])
@pytest.mark.parametrize("absent,neg,absolute", [
    (True, 0, True), (True, 8, True), (False, 8, True), (True, 8, False)])
def test_float32_gradients_within_the_derived_bound(d, absent, neg, absolute):
    rng = np.random.default_rng(d + neg)
    nb, classes = 8, 500
    layer = lt.HrrOutput(classes, d, seed=11, absent=absent, num_negatives=neg, absolute=absolute)
    lab = ragged(rng, nb, classes)
    s32 = torch.from_numpy((rng.standard_normal((nb, d)) * 0.3).astype(np.float32)).requires_grad_()
    layer.step = 0
    loss32 = layer(s32, lab)
    loss32.backward()
    layer.step = 0
    rows = terms(layer, lab)
    C = layer.class_vectors.double()
    p, m = layer.present.double(), layer.absent.double()
    s64 = s32.detach().double().requires_grad_()
    loss64 = reference(s64, C, p, m, rows, absolute)
    loss64.backward()

    # The bound, row by row (2-norms; docs/hrr.md's FFT bound for unbind
    # and bind, gamma(n) = n u / (1 - n u) for sums of n products):
    sn = s32.detach().double().numpy()
    Cn = C.numpy()
    keys = {"p": p.numpy(), "m": m.numpy()}
    y, n, dy_u, yh, dyh = {}, {}, {}, {}, {}
    for k, key in keys.items():
        kk = np.broadcast_to(key, sn.shape)
        y[k] = np.real(np.fft.ifft(np.conj(np.fft.fft(kk)) * np.fft.fft(sn)))
        n[k] = np.linalg.norm(y[k], axis=1)
        dy_u[k] = bind_bound(kk, sn)  # the unbind's error
        assert (dy_u[k] < n[k] / 4).all()
        yh[k] = y[k] / (n[k] + 1e-8)[:, None]
        # y / |y| moves by at most 2 |dy| / |y|; then one f32 rounding
        dyh[k] = 2 * dy_u[k] / n[k] + 2 * U
    # the dot products z_j = c_j . yhat (gathered matmul: gamma(d) sum |c y|)
    dz, G, eG = [], {k: np.zeros((nb, d)) for k in keys}, {k: np.zeros((nb, d)) for k in keys}
    for b, k, j, pos in rows:
        c = Cn[j]
        z = c @ yh[k][b]
        cn = np.linalg.norm(c)
        err = cn * dyh[k][b] + gamma(d) * cn * (1 + dyh[k][b])
        # the gradient's sign must be clear of the error for a fair test
        assert abs(z) > err, (z, err)
        dz.append(err)
        g = -(np.sign(z) if absolute else 1.0) / nb if pos else np.sign(z) / nb
        G[k][b] += g * c
        eG[k][b] += np.abs(g * c)
    # the loss: the sum of the dz over nb, the f32 result's rounding
    l32, l64 = loss32.item(), loss64.item()
    assert abs(l32 - l64) <= sum(dz) / nb + U * abs(l64) + 1e-12
    # dL/dyhat by gather_dq: gamma(c + 1) sum |g c| plus each g's rounding (u)
    count = np.zeros(nb, np.int64)
    for b, k, j, pos in rows:
        count[b] += 1
    ds_bound = U * np.linalg.norm(s64.grad.numpy(), axis=1)
    for k, key in keys.items():
        dG = np.linalg.norm((gamma(count + 1)[:, None] + U) * eG[k], axis=1)
        Gn = np.linalg.norm(G[k], axis=1)
        # dL/dy = (G - yhat (yhat . G)) / |y|: moves by dG / |y| and by
        # 3 |G| |dy| / |y|^2 (first order, 10 % for the second), then one
        # f32 rounding
        gy = (G[k] - yh[k] * (yh[k] * G[k]).sum(1)[:, None]) / n[k][:, None]
        dgy = (1.1 * (dG / n[k] + 3 * Gn * dy_u[k] / n[k] ** 2)
               + U * np.linalg.norm(gy, axis=1))
        # ds = key ⊛ dL/dy: |key ⊛ v| <= max|K| |v|, plus the bind's own bound
        kk = np.broadcast_to(key, sn.shape)
        kmax = np.abs(np.fft.fft(key)).max()
        ds_bound = ds_bound + kmax * dgy + bind_bound(kk, gy)
    err = np.linalg.norm((s32.grad.double() - s64.grad).numpy(), axis=1)
    assert (err <= ds_bound).all(), (err, ds_bound)
    # the bound is tight enough to mean something: far below the gradient
    print("measured / bound:", (err / ds_bound).max(), "bound / |grad|:",
          (ds_bound / np.linalg.norm(s64.grad.numpy(), axis=1)).max())
    assert (ds_bound < 1e-3 * np.linalg.norm(s64.grad.numpy(), axis=1)).all()


def test_negatives_are_distinct_outside_the_positives_and_seeded():
    rng = np.random.default_rng(4)
    layer = lt.HrrOutput(30, 16, num_negatives=20)
    lab = ragged(rng, 50, 30)
    pid, poff = lt._multi_labels(lab, None, 50, 30)
    nid, noff = layer.negatives(pid, poff)
    assert list(np.diff(noff)) == [20] * 50
    for b in range(50):
        neg = set(nid[noff[b]:noff[b + 1]].tolist())
        assert len(neg) == 20
        assert not neg & set(pid[poff[b]:poff[b + 1]].tolist())
    assert np.array_equal(layer.negatives(pid, poff)[0], nid)
    layer.step = 1
    assert not np.array_equal(layer.negatives(pid, poff)[0], nid)
    # roughly uniform over a large set
    big = lt.HrrOutput(100, 16, num_negatives=10)
    one = torch.zeros(4000, dtype=torch.int64)
    pid, poff = lt._multi_labels(one, None, 4000, 100)
    nid, _ = big.negatives(pid, poff)
    cnt = np.bincount(nid, minlength=100)
    assert cnt[0] == 0
    e = 40000 / 99
    assert (np.abs(cnt[1:] - e) < 6 * math.sqrt(e)).all()


def test_label_formats_agree():
    layer = lt.HrrOutput(50, 32, num_negatives=2)
    s = torch.randn(3, 32)
    pad = torch.tensor([[1, 4, -1], [7, -1, -1], [2, 3, 9]])
    csr = torch.tensor([1, 4, 7, 2, 3, 9])
    off = torch.tensor([0, 2, 3, 6])
    a = layer(s, pad)
    layer.step = 0
    b = layer(s, csr, offsets=off)
    assert float(a) == float(b)
    layer.step = 0
    one = layer(s, torch.tensor([1, 7, 2]))
    layer.step = 0
    assert float(one) == float(layer(s, torch.tensor([[1], [7], [2]])))


def test_training_recovers_the_bound_labels():
    # s itself is the parameter: a few hundred Adam steps on J_p + J_n make
    # p† ⊛ s point at each sample's labels
    torch.manual_seed(0)
    layer = lt.HrrOutput(2000, 256, seed=5, source=None)
    lab = ragged(np.random.default_rng(9), 16, 2000, most=3)
    s = torch.nn.Parameter(torch.randn(16, 256) * 0.1)
    opt = torch.optim.Adam([s], lr=0.05)
    first = None
    for _ in range(150):
        opt.zero_grad()
        loss = layer(s, lab)
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < 0.5 * first
    ids, _ = layer.predict(s.detach(), 3)
    for b in range(16):
        want = set(x for x in lab[b].tolist() if x >= 0)
        assert want <= set(ids[b].tolist())


def exact_topk_check(layer, s, ids, scores, k):
    y = layer.unbind(s).reshape(-1, layer.dim).double()
    ref = y @ layer.class_vectors.double().T
    if layer.absolute:
        ref = ref.abs()
    # f32 dot products of unit vectors: gamma(d) sum |c y|
    bound = gamma(layer.dim) * (y.abs() @ layer.class_vectors.double().abs().T)
    ids2, sc2 = ids.reshape(-1, k), scores.reshape(-1, k)
    kth = ref.topk(k, dim=1).values[:, -1]
    for i in range(ref.shape[0]):
        got = ids2[i]
        assert (got >= 0).all() and len(set(got.tolist())) == k
        assert ((sc2[i].double() - ref[i, got]).abs() <= bound[i, got]).all()
        assert (ref[i, got] >= kth[i] - 2 * bound[i, got]).all()
        assert (sc2[i][:-1] >= sc2[i][1:]).all()


@pytest.mark.parametrize("absolute", [True, False])
@pytest.mark.parametrize("source,knobs,query", [
    ("ivf", dict(nlist=16, codes="none"), dict(nprobe=16, reach=0.0)),
    ("ivf", dict(nlist=16, codes="i8"), dict(nprobe=16, reach=0.0, rerank=3000)),
    (None, {}, None),
], ids=["ivf-flat", "ivf-i8", "dense"])
def test_predict_is_the_exact_top_k(source, knobs, query, absolute):
    layer = lt.HrrOutput(3000, 128, seed=2, source=source, query=query, absolute=absolute, **knobs)
    rng = np.random.default_rng(3)
    # s = sum of p ⊛ c over a few labels, plus noise: the top k is clear
    h = lshk.Hrr(128)
    C = layer.class_vectors.numpy()
    s = np.zeros((6, 128), np.float32)
    for b in range(6):
        for i, j in enumerate(rng.choice(3000, 3, replace=False)):
            # signed labels: one of them negative where signs count not
            sign = -1.0 if (absolute and i == 1) else 1.0
            s[b] += sign * h.bind(layer.present.numpy(), C[j])
    s += 0.05 * rng.standard_normal(s.shape).astype(np.float32)
    st = torch.from_numpy(s)
    ids, scores = layer.predict(st, 5)
    assert ids.shape == (6, 5) and ids.dtype == torch.int64 and scores.dtype == torch.float32
    exact_topk_check(layer, st, ids, scores, 5)
    # leading dims
    ids3, _ = layer.predict(st.reshape(2, 3, 128), 5)
    assert torch.equal(ids3.reshape(6, 5), ids)
    # k beyond the classes: every class once, then padding
    small = lt.HrrOutput(6, 128, seed=2, source=source, query=query, absolute=absolute, **(
        dict(nlist=2, codes=knobs.get("codes", "none")) if source else {}))
    if source:
        small.query_knobs = dict(query, nprobe=2)
    ids8, sc8 = small.predict(st[:2], 8)
    for i in range(2):
        assert sorted(ids8[i, :6].tolist()) == list(range(6))
        assert (ids8[i, 6:] == -1).all() and torch.isinf(sc8[i, 6:]).all()


def test_unbind_is_lshks_kernel():
    layer = lt.HrrOutput(10, 64, seed=1)
    s = torch.randn(5, 64)
    y = lshk.Hrr(64).unbind(layer.present.numpy(), s.numpy()).astype(np.float64)
    y /= (np.linalg.norm(y, axis=1) + 1e-8)[:, None]
    assert np.array_equal(layer.unbind(s).numpy(), y.astype(np.float32))
    # the class vectors, p and m: rows of lshk's generator
    c = lshk.hrr_class_vectors(1, 64, 12)
    assert np.array_equal(layer.class_vectors.numpy(), c[:10])
    assert np.array_equal(layer.present.numpy(), c[10])
    assert np.array_equal(layer.absent.numpy(), c[11])


def test_bad_input_raises_and_changes_nothing():
    layer = lt.HrrOutput(20, 16, num_negatives=3)
    s = torch.randn(2, 16)
    lab = torch.tensor([[1, 2], [3, -1]])
    with pytest.raises(TypeError, match="float32"):
        layer(s.half(), lab)
    with pytest.raises(ValueError, match="CPU"):
        layer(torch.empty(2, 16, device="meta"), lab)
    with pytest.raises(ValueError, match=r"\(\.\.\., 16\)"):
        layer(torch.randn(2, 15), lab)
    bad = s.clone()
    bad[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        layer(bad, lab)
    with pytest.raises(ValueError, match="0..19"):
        layer(s, torch.tensor([[1, 20], [3, -1]]))
    with pytest.raises(ValueError, match="0..19"):
        layer(s, torch.tensor([[1, -2], [3, -1]]))
    with pytest.raises(TypeError, match="integer"):
        layer(s, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    with pytest.raises(ValueError, match="twice"):
        layer(s, torch.tensor([[1, 1], [3, -1]]))
    with pytest.raises(ValueError, match="one row per sample"):
        layer(s, torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="offsets"):
        layer(s, torch.tensor([1, 2, 3]), offsets=torch.tensor([0, 2, 2]))
    with pytest.raises(ValueError, match="num_negatives"):
        lt.HrrOutput(4, 16, num_negatives=3)(torch.randn(1, 16), torch.tensor([[0, 1]]))
    assert layer.step == 0
    with pytest.raises(ValueError):
        lt.HrrOutput(0, 16)
    with pytest.raises(ValueError):
        lt.HrrOutput(10, 16, absent=False)
    with pytest.raises(ValueError, match="k"):
        layer.predict(s, 0)
    with pytest.raises(TypeError, match="float32"):
        layer.predict(s.double(), 2)
    # hrr_loss: mismatched shapes and dtypes
    with pytest.raises(ValueError, match="do not match"):
        lt.hrr_loss(s, layer.class_vectors[:, :8].contiguous(), layer.present, None,
                    [0, 1], [0, 1, 2])
    with pytest.raises(TypeError):
        lt.hrr_loss(s, layer.class_vectors.double(), layer.present, None, [0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="ids"):
        lt.hrr_loss(s, layer.class_vectors, layer.present, None, [0, 99], [0, 1, 2])


def _example(name):
    return os.path.join(os.path.dirname(__file__), "..", "examples", name)


def test_hrr_xml_example_skips_without_data(tmp_path):
    ex = tmp_path / "repo" / "python" / "examples"
    ex.mkdir(parents=True)
    (ex / "hrr_xml.py").write_text(open(_example("hrr_xml.py")).read())
    out = subprocess.run([sys.executable, str(ex / "hrr_xml.py")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "skipped: ../shared/data not found"


def test_hrr_xml_example_runs_on_the_real_data():
    d = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "w2v-gutenberg")
    if not os.path.exists(os.path.join(d, "train_pairs.i32")):
        pytest.skip("skipped: ../shared/data not found")
    out = subprocess.run(
        [sys.executable, _example("hrr_xml.py"), "--centres", "600", "--heldout", "2000",
         "--epochs", "1", "--dim", "128", "--hidden", "64"],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ") and "method" not in ln
            and "---" not in ln]
    assert len(rows) >= 2, out.stdout
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        p1, p5 = float(cells[1]), float(cells[2])
        assert 0 <= p1 <= 1 and 0 <= p5 <= 1


def test_decode_example_skips_without_the_model_package():
    out = subprocess.run(
        [sys.executable, _example("decode.py"), "--package", "lshk_no_such_model_package"],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("skipped: ")
