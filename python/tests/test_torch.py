"""lshk.torch: TopKHead against the dense layer's exact top k, and
SampledSoftmax's loss and gradients proven three ways: gradcheck of the
float64 path (the same formulas as the lshk path, backward written out),
the float32 lshk gradients against a dense float64 PyTorch reference
restricted to the same candidate sets within a bound derived from the
kernels' documented error bounds, and one SGD step. Skipped where torch
is not installed (tests/python.rs installs it into the test venv when pip
can)."""

import math
import os
import subprocess
import sys
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import lshk

torch = pytest.importorskip("torch")
import lshk.torch as lt  # noqa: E402

U = 2.0**-24


def gamma(n):
    n = np.asarray(n, np.float64)
    return n * U / (1 - n * U)


# ---------------------------------------------------------------------------
# import


def test_import_lshk_does_not_need_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import lshk; assert 'Index' in dir(lshk)\n"
        "try:\n    import lshk.torch\nexcept ImportError:\n    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# ---------------------------------------------------------------------------
# TopKHead


def dense_f64(h, w, b):
    h, w = h.detach(), w.detach()
    b = None if b is None else b.detach()
    z = h.double() @ w.double().T
    return z if b is None else z + b.double()


def logit_bound(h, w, b):
    """|z~ - z| for every (query, row): gamma(dim + 1) (sum |w h| + |b|),
    any summation order of the dim products and the bias."""
    a = h.detach().double().abs() @ w.detach().double().abs().T
    if b is not None:
        a = a + b.detach().double().abs()
    return gamma(w.shape[1] + 1) * a


def check_topk(head, h, w, b, k):
    ids, logits = head(h)
    assert ids.dtype == torch.int64 and logits.dtype == torch.float32
    assert ids.shape == (*h.shape[:-1], k) and logits.shape == ids.shape
    h2 = h.reshape(-1, h.shape[-1])
    ids2, lg2 = ids.reshape(-1, k), logits.reshape(-1, k)
    ref = dense_f64(h2, w, b)
    bound = logit_bound(h2, w, b)
    kth = ref.topk(k, dim=1).values[:, -1]
    for i in range(h2.shape[0]):
        got = ids2[i]
        assert (got >= 0).all()
        assert len(set(got.tolist())) == k
        # the logits: exact for their ids, within the f32 bound
        err = (lg2[i].double() - ref[i, got]).abs()
        assert (err <= bound[i, got]).all(), (err, bound[i, got])
        # the ids: the exact top k, up to ties within the bound
        assert (ref[i, got] >= kth[i] - 2 * bound[i, got]).all()
        exact = ref[i].topk(k).indices
        clear = ref[i, exact] > ref[i].topk(k + 1).values[-1] + 2 * bound[i, exact]
        assert set(exact[clear].tolist()) <= set(got.tolist())
        # best first
        assert (lg2[i][:-1] >= lg2[i][1:]).all()


@pytest.fixture(scope="module")
def linear():
    torch.manual_seed(3)
    lin = torch.nn.Linear(40, 2500)
    with torch.no_grad():
        lin.bias.mul_(3.0)
    return lin


EXHAUSTIVE = [
    ("ivf", dict(nlist=16, codes="none"), dict(nprobe=16, reach=0.0)),
    ("ivf", dict(nlist=16, codes="i8"), dict(nprobe=16, reach=0.0, rerank=2500)),
    ("forest", dict(trees=2), dict(set_size=2500)),
]


@pytest.mark.parametrize("source,build,query", EXHAUSTIVE, ids=["ivf-flat", "ivf-i8", "forest-all"])
def test_topk_head_exact(linear, source, build, query):
    head = lt.TopKHead.from_linear(linear, k=7, source=source, query=query, **build)
    h = torch.randn(3, 5, 40)
    check_topk(head, h, linear.weight, linear.bias, 7)
    check_topk(head, torch.randn(40), linear.weight, linear.bias, 7)


def test_topk_head_weight_and_no_bias():
    torch.manual_seed(5)
    w = torch.randn(1500, 24)
    head = lt.TopKHead(w, k=4, nlist=8, query=dict(nprobe=8, reach=0.0, rerank=1500))
    check_topk(head, torch.randn(9, 24), w, None, 4)
    ids, _ = head(torch.randn(2, 24), k=3)
    assert ids.shape == (2, 3)


def test_topk_head_pads_when_fewer_than_k():
    w = torch.randn(5, 8)
    head = lt.TopKHead(w, k=8, nlist=1, query=dict(nprobe=1, reach=0.0, rerank=8))
    ids, lg = head(torch.randn(2, 8))
    assert (ids[:, 5:] == -1).all() and torch.isinf(lg[:, 5:]).all()
    assert (ids[:, :5] >= 0).all()


def test_topk_head_uses_tensors_in_place(linear):
    head = lt.TopKHead.from_linear(linear, k=5, nlist=16, query=dict(nprobe=4))
    # W: the index reads the Linear's weight memory itself (storage borrowed)
    view = head.index.weights()
    assert view["storage"] == "borrowed"
    assert view["w"].__array_interface__["data"][0] == linear.weight.data_ptr()
    # h: a large batch, a row-strided view of a wider tensor; the query
    # allocates its outputs only (ids, logits), never a copy of h
    big = torch.randn(20000, 48)
    h = big[:, :40]
    head(h[:10])
    tracemalloc.start()
    head(h)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # ids (uint32, then int64), the padding mask and the logits: 17 bytes
    # per result; h itself is 160 bytes per row
    outputs = h.shape[0] * 5 * 17
    assert peak <= outputs + 65536 < h.shape[0] * 40 * 4, (peak, outputs)


def test_topk_head_inference_mode_and_threads(linear):
    head = lt.TopKHead.from_linear(linear, k=6, nlist=16, query=dict(nprobe=3))
    torch.manual_seed(11)
    batches = [torch.randn(int(n), 40) for n in torch.randint(1, 40, (32,))]
    with torch.inference_mode():
        single = [head(b) for b in batches]

    def run(b):
        with torch.inference_mode():
            return head(b)

    with ThreadPoolExecutor(4) as ex:
        for _ in range(3):
            multi = list(ex.map(run, batches))
            for (i1, l1), (i2, l2) in zip(single, multi):
                assert torch.equal(i1, i2)
                assert torch.equal(l1.view(torch.int32), l2.view(torch.int32))


def test_topk_head_refuses_bad_input_and_a_changed_weight():
    torch.manual_seed(2)
    lin = torch.nn.Linear(16, 300)
    head = lt.TopKHead.from_linear(lin, k=3, nlist=4)
    h = torch.randn(4, 16)
    before = head(h)
    with pytest.raises(TypeError, match="float32"):
        head(h.double())
    with pytest.raises(ValueError, match="16"):
        head(torch.randn(4, 15))
    with pytest.raises(ValueError, match="CPU"):
        head(torch.empty(4, 16, device="meta"))
    with pytest.raises(TypeError, match="Tensor"):
        head(h.numpy())
    bad = h.clone()
    bad[1, 3] = float("nan")
    with pytest.raises(lshk.LshkError) as e:
        head(bad)
    assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
    with pytest.raises(TypeError):
        lt.TopKHead(torch.randn(10, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="bias"):
        lt.TopKHead(torch.randn(10, 4), torch.randn(9))
    # the answers did not change
    again = head(h)
    assert torch.equal(before[0], again[0]) and torch.equal(before[1], again[1])
    # an optimizer-style in-place change is caught, refresh() follows it
    with torch.no_grad():
        lin.weight[7] += 1.0
    with pytest.raises(RuntimeError, match="refresh"):
        head(h)
    head.refresh()
    check_topk(
        lt.TopKHead.from_linear(lin, k=3, nlist=4, query=dict(nprobe=4, reach=0.0, rerank=300)),
        h, lin.weight, lin.bias, 3,
    )
    head(h)


# ---------------------------------------------------------------------------
# SampledSoftmax: candidate sets


ROWS, DIM, NB = 600, 12, 16


def make(sampler, **kw):
    kw.setdefault("num_samples", 48)
    kw.setdefault("seed", 1)
    if sampler == "unigram":
        kw.setdefault("counts", np.arange(ROWS, dtype=np.float64) % 37 + 1)
    if sampler.startswith("lsh"):
        kw.setdefault("bits_per_table", 6)
        kw.setdefault("tables", 8)
    if sampler == "forest":
        kw.setdefault("forest_set_size", 8)
        kw.setdefault("forest_rebuild", 3)
    m = lt.SampledSoftmax(ROWS, DIM, sampler=sampler, **kw)
    with torch.no_grad():
        m.weight.mul_(30.0)  # logits of order 1: informative gradients
        if m.bias is not None:
            g = torch.Generator().manual_seed(kw["seed"] + 100)
            m.bias.copy_(torch.randn(ROWS, generator=g) * 0.5)
    return m


def batch(seed=0, nb=NB):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(nb, DIM, generator=g), torch.randint(0, ROWS, (nb,), generator=g)


CANDIDATE_CASES = [(s, {}) for s in lt.SAMPLERS] + [
    ("uniform", dict(shared_negatives=True)),
    ("unigram", dict(shared_negatives=True)),
]


@pytest.mark.parametrize(
    "sampler,kw", CANDIDATE_CASES,
    ids=list(lt.SAMPLERS) + ["uniform-shared", "unigram-shared"],
)
def test_candidate_sets_hold_the_label_once(sampler, kw):
    m = make(sampler, **kw)
    for step in range(4):
        h, y = batch(step)
        ids, off = m.candidates(h, y)
        assert off.dtype == np.uint64 and ids.dtype == np.uint32
        assert len(off) == NB + 1 and off[0] == 0 and off[-1] == len(ids)
        for b in range(NB):
            seg = ids[off[b]:off[b + 1]]
            assert int(y[b]) in seg.tolist()
            assert len(np.unique(seg)) == len(seg)
            assert len(seg) <= (ROWS if sampler == "full" else 48)
        m.step += 1


def test_negatives_follow_their_distribution():
    # uniform, one sample's own draws: each other class with probability
    # (S - 1) / (rows - 1); 4,000 samples, 4 standard deviations
    m = make("uniform", num_samples=48)
    lab = torch.zeros(4000, dtype=torch.int64)
    ids, off = m.candidates(torch.zeros(4000, DIM), lab)
    assert np.all(np.diff(off) == 48)
    freq = np.bincount(ids, minlength=ROWS)[1:] / 4000
    p = 47 / (ROWS - 1)
    assert np.abs(freq - p).max() < 4 * math.sqrt(p * (1 - p) / 4000) + 1e-9
    # unigram: a class of count 0 is never drawn, and a frequent class is
    # drawn more often than a rare one
    counts = np.ones(ROWS)
    counts[:100] = 0
    counts[100:110] = 1000
    m = make("unigram", counts=counts, num_samples=48)
    ids, off = m.candidates(torch.zeros(1000, DIM), torch.full((1000,), 300))
    negs = np.bincount(ids, minlength=ROWS)
    assert negs[:100].sum() == 0 and negs[300] == 1000
    rare = np.delete(negs[110:], 300 - 110)
    assert negs[100:110].min() > rare.max()


# ---------------------------------------------------------------------------
# the loss and its gradients


def reference(h, w, b, ids, off, y):
    """Dense PyTorch autograd on each sample's candidates (float64)."""
    loss = 0.0
    nb = h.shape[0]
    for i in range(nb):
        c = torch.from_numpy(ids[off[i]:off[i + 1]].astype(np.int64))
        z = w[c] @ h[i]
        if b is not None:
            z = z + b[c]
        tgt = (c == y[i]).nonzero()
        if len(tgt):
            loss = loss + torch.logsumexp(z, 0) - z[tgt[0, 0]]
    return loss / nb


def f64_leaves(m, h):
    h64 = h.detach().double().requires_grad_()
    w64 = m.weight.detach().double().requires_grad_()
    b64 = None if m.bias is None else m.bias.detach().double().requires_grad_()
    return h64, w64, b64


@pytest.mark.parametrize("sampler", lt.SAMPLERS)
def test_gradcheck_float64_path(sampler):
    m = make(sampler, num_samples=10)
    h, y = batch(5, nb=4)
    ids, off = m.candidates(h, y)
    if sampler == "full":  # 600 classes x 12 dims: keep gradcheck short
        keep = np.concatenate([ids[off[i]:off[i] + 40] for i in range(4)])
        ids, off = keep, np.arange(5, dtype=np.uint64) * 40
        y = torch.from_numpy(ids[off[:-1].astype(np.int64) + 3].astype(np.int64))
    h64, w64, b64 = f64_leaves(m, h)
    used = torch.from_numpy(np.unique(ids).astype(np.int64))
    wsub = w64.detach()[used].clone().requires_grad_()
    bsub = b64.detach()[used].clone().requires_grad_()
    remap = np.searchsorted(used.numpy(), ids).astype(np.uint32)
    ysub = torch.from_numpy(np.searchsorted(used.numpy(), y.numpy()))

    def f(h_, w_, b_):
        return lt.sampled_softmax_loss(h_, w_, b_, remap, off, ysub)

    assert torch.autograd.gradcheck(f, (h64, wsub, bsub), eps=1e-6, atol=1e-7)
    # the hand-written backward equals PyTorch's autograd of the forward
    loss = f(h64, wsub, bsub)
    g1 = torch.autograd.grad(loss, (h64, wsub, bsub))
    g2 = torch.autograd.grad(reference(h64, wsub, bsub, remap, off, ysub), (h64, wsub, bsub))
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-15)


def xent_bounds(h, w, b, ids, off, y):
    """Per-quantity error bounds (float64 arrays) of the lshk float32 loss
    and gradients against the exact values, for grad_out = 1:

    * logits: |z~_j - z_j| <= d_j = gamma(dim + 1) (sum_k |w_jk h_k| + |b_j|)
      (any order of the dim products and the bias); D_b = max over the
      segment; softmax and loss move by at most e^(2 D_b) - 1 relative and
      2 D_b (both are 1-Lipschitz in the max norm of the logits);
    * the softmax cross-entropy kernel on the rounded logits (its bounds
      in docs/training.md): gradient 1.01 (2^-18 + gamma(n) + 3u) p_j +
      1.01 (gamma(n) + 2u) t_j + u |p_j - t_j| + 2^-125, loss 1.01 (2^-19 +
      gamma(n)) + 2n 2^-125 + 1.01 (gamma(n+2) + gamma(n+1) + 2u)(m - z_y)
      + 2u ln n;
    * the scale 1/nb: two roundings (2u);
    * dq, G_r: gamma(c + 1) sum |g w| (resp. |g h|) over the c terms,
      plus the propagated gradient error sum E_j |w| (resp. |h|);
    * the bias gradient: f64 sums of the f32 gradients, one rounding."""
    hn, wn = h.detach().double().numpy(), w.detach().double().numpy()
    bn = None if b is None else b.detach().double().numpy()
    nb, dim = hn.shape
    cnt = np.diff(off).astype(np.int64)
    seg = np.repeat(np.arange(nb), cnt)
    idl = ids.astype(np.int64)
    z = np.einsum("jk,jk->j", wn[idl], hn[seg])
    a = np.einsum("jk,jk->j", np.abs(wn[idl]), np.abs(hn[seg]))
    if bn is not None:
        z += bn[idl]
        a += np.abs(bn[idl])
    d = gamma(dim + 1) * a
    big_d = np.zeros(nb)
    np.maximum.at(big_d, seg, d)
    m = np.full(nb, -np.inf)
    np.maximum.at(m, seg, z)
    e = np.exp(z - m[seg])
    s = np.bincount(seg, weights=e, minlength=nb)
    p = e / s[seg]
    t = (idl == y.numpy()[seg]).astype(np.float64)
    has = np.bincount(seg, weights=t, minlength=nb) > 0
    g = np.where(has[seg], p - t, 0.0)
    n = cnt[seg]
    grow = np.exp(2 * big_d[seg])
    eg = (
        p * (grow - 1)
        + grow * p * 1.01 * (2.0**-18 + gamma(n) + 3 * U)
        + 1.01 * (gamma(n) + 2 * U) * t
        + U * (np.abs(g) + p * (grow - 1))
        + 2.0**-125
    )
    eg = np.where(has[seg], eg, 0.0)
    gz, egz = g / nb, (1.001 * eg + 2.001 * U * np.abs(g)) / nb
    dh = np.zeros((nb, dim))
    np.add.at(dh, seg, (egz + gamma(cnt[seg] + 1) * (np.abs(gz) + egz))[:, None] * np.abs(wn[idl]))
    c_r = np.bincount(idl, minlength=wn.shape[0])
    dw = np.zeros_like(wn)
    np.add.at(dw, idl, (egz + gamma(c_r[idl] + 1) * (np.abs(gz) + egz))[:, None] * np.abs(hn[seg]))
    db = np.bincount(idl, weights=egz, minlength=wn.shape[0])
    db += U * np.abs(np.bincount(idl, weights=gz, minlength=wn.shape[0])) + 1e-15
    zy = np.where(t > 0, z, -np.inf)
    my = np.full(nb, -np.inf)
    np.maximum.at(my, seg, zy)
    lb = 2 * big_d + 1.01 * (2.0**-19 + gamma(cnt)) + 2 * cnt * 2.0**-125
    lb += 1.01 * (gamma(cnt + 2) + gamma(cnt + 1) + 2 * U) * np.where(has, m - my, 0)
    lb += 2 * U * np.log(np.maximum(cnt, 1))
    lb = np.where(has, lb, 0.0)
    lossv = np.where(has, np.log(s) + m - np.where(has, my, 0), 0.0)
    loss_bound = lb.sum() / nb + U * abs(lossv.mean()) + 1e-15
    return loss_bound, dh, dw, db


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("sampler", lt.SAMPLERS)
def test_float32_gradients_within_the_derived_bound(sampler, sparse, bias):
    m = make(sampler, sparse=sparse, bias=bias)
    h, y = batch(9)
    h = h.requires_grad_()
    ids, off = m.candidates(h, y)
    loss = lt.sampled_softmax_loss(h, m.weight, m.bias, ids, off, y, sparse=sparse)
    loss.backward()
    h64, w64, b64 = f64_leaves(m, h)
    ref = reference(h64, w64, b64, ids, off, y)
    ref.backward()
    lb, bdh, bdw, bdb = xent_bounds(h, m.weight, m.bias, ids, off, y)
    assert abs(loss.item() - ref.item()) <= lb
    assert (np.abs(h.grad.double().numpy() - h64.grad.numpy()) <= bdh).all()
    gw = m.weight.grad
    assert gw.is_sparse == sparse
    touched = np.unique(ids).astype(np.int64)
    if sparse:
        gw = gw.coalesce()
        assert np.array_equal(gw.indices()[0].numpy(), touched)
        gw = gw.to_dense()
    assert (np.abs(gw.double().numpy() - w64.grad.numpy()) <= bdw).all()
    untouched = np.setdiff1d(np.arange(ROWS), touched)
    assert (gw[untouched] == 0).all()
    if bias:
        gb = m.bias.grad
        assert gb.is_sparse == sparse
        gb = gb.to_dense() if sparse else gb
        assert (np.abs(gb.double().numpy() - b64.grad.numpy()) <= bdb).all()


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("sampler", ["uniform", "lsh-embedding", "full"])
def test_one_sgd_step_matches_the_dense_reference(sampler, sparse):
    lr = 0.5
    m = make(sampler, sparse=sparse)
    w0 = m.weight.detach().clone()
    b0 = m.bias.detach().clone()
    h, y = batch(4)
    ids, off = m.candidates(h, y)
    opt = torch.optim.SGD(m.parameters(), lr=lr)
    loss = lt.sampled_softmax_loss(h, m.weight, m.bias, ids, off, y, sparse=sparse)
    opt.zero_grad()
    loss.backward()
    opt.step()
    h64 = h.double()
    w64 = w0.double().requires_grad_()
    b64 = b0.double().requires_grad_()
    reference(h64, w64, b64, ids, off, y).backward()
    w1 = w64.detach() - lr * w64.grad
    b1 = b64.detach() - lr * b64.grad
    _, _, bdw, bdb = xent_bounds(h, w0, b0, ids, off, y)
    # the step: lr times the gradient's bound, plus the update's roundings
    tol_w = lr * bdw + gamma(2) * (w0.double().abs().numpy() + lr * w64.grad.abs().numpy())
    tol_b = lr * bdb + gamma(2) * (b0.double().abs().numpy() + lr * b64.grad.abs().numpy())
    assert (np.abs(m.weight.detach().double().numpy() - w1.numpy()) <= tol_w).all()
    assert (np.abs(m.bias.detach().double().numpy() - b1.numpy()) <= tol_b).all()


@pytest.mark.parametrize("sampler", lt.SAMPLERS)
def test_training_with_sparse_adam_and_sgd(sampler):
    h, y = batch(7)
    for opt_cls, lr in ((torch.optim.SparseAdam, 0.05), (torch.optim.SGD, 2.0)):
        m = make(sampler, sparse=True)
        opt = opt_cls(list(m.parameters()), lr=lr)
        first = None
        for _ in range(12):
            loss = m(h, y)
            first = loss.item() if first is None else first
            opt.zero_grad()
            loss.backward()
            opt.step()
        assert m.step == 12
        with torch.no_grad():
            full = torch.nn.functional.cross_entropy(m.logits(h), y)
        assert loss.item() < first and full.item() < math.log(ROWS)


def test_lsh_index_follows_w_on_the_schedule():
    m = make("lsh-embedding", rehash_period=2.0, rehash_lambda=0.0, sparse=True)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    for step in range(5):
        h, y = batch(step)
        loss = m(h, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    # rehashed at steps 2 and 4: the index holds W as of step 4's forward
    h, y = batch(5)
    w_before = m.weight.detach().clone()
    m(h, y)  # step 5: not due; step 6 is
    held = m.index.weights()
    assert not np.array_equal(held["w"], w_before.numpy())
    h, y = batch(6)
    ids, off = m.candidates(h, y)  # step 5 again (m.step == 6): due now
    assert m.rehashed_rows > 0
    held = m.index.weights()
    # the index holds the centred rows (centre_rows, the default)
    wc = (m.weight.detach().numpy() - m._mu).astype(np.float32)
    bc = (m.bias.detach().numpy() - np.float32(m._mub)).astype(np.float32)
    assert np.array_equal(held["w"], wc)
    assert np.array_equal(held["bias"], bc)
    assert m.index.dirty_rows() == 0
    # the rehashed index gives the candidate sets of a fresh build over them
    fresh = lshk.Index(
        wc, bc, source="simhash",
        transform="bias_aug", seed=m.seed + 1, bits_per_table=6, tables=8,
    )
    q = np.hstack([h.numpy(), np.ones((NB, 1), np.float32)])
    c1 = m.index.tables().gather(m.index.simhash().hash(q))
    c2 = fresh.tables().gather(fresh.simhash().hash(q))
    assert all(np.array_equal(a, b) for a, b in zip(c1, c2))


def _mean_set_size(m, h, y):
    ids, off = m.candidates(h, y)
    return float(np.mean(np.diff(off.astype(np.int64))))


@pytest.mark.parametrize("sampler", ["lsh-embedding", "lsh-label"])
def test_centred_lsh_rows_ignore_a_shift_shared_by_every_row(sampler):
    """A shift shared by every row (what Adam's normalised steps build up)
    changes every logit of a query alike. With centre_rows the index is
    rebuilt around the new mean at the next rehash and the candidate sets
    stay those of the unshifted rows (up to hash bits flipped by the
    shift's rounding); without it the rows pile into a few buckets that the
    queries miss, and the sets shrink to little more than the label."""
    h, y = batch(3)
    split = lambda c: np.split(c[0], c[1][1:-1].astype(np.int64))  # noqa: E731
    size = lambda c: float(np.mean(np.diff(c[1].astype(np.int64))))  # noqa: E731
    for centre in (True, False):
        plain = make(sampler, centre_rows=centre, rehash_period=2.0, rehash_lambda=0.0)
        moved = make(sampler, centre_rows=centre, rehash_period=2.0, rehash_lambda=0.0)
        plain.candidates(h, y)  # both indexes built at step 0
        moved.candidates(h, y)
        with torch.no_grad():
            v = -h.mean(0)  # against the queries, as Adam's drift was
            moved.weight.add_(v / v.norm() * 20.0 * moved.weight.norm(dim=1).mean())
        plain.step = moved.step = 2  # the next rehash is due
        a, b = plain.candidates(h, y), moved.candidates(h, y)
        if centre:
            assert moved.rehashed_rows == ROWS  # rebuilt around the new mean
            same = np.mean([
                len(np.intersect1d(x, z)) / len(np.union1d(x, z))
                for x, z in zip(split(a), split(b))
            ])
            assert same >= 0.9, same
            assert size(b) >= 0.9 * size(a), (size(a), size(b))
        else:
            assert size(b) <= 0.5 * size(a), (size(a), size(b))


def test_forest_rebuilt_every_t_steps():
    m = make("forest", forest_rebuild=3, sparse=True)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    for step in range(4):
        h, y = batch(step)
        loss = m(h, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    # rebuilt at step 3 from W after 3 updates; W changed once more since
    aug = m._aug
    assert not np.array_equal(aug[:, :DIM], m.weight.detach().numpy())
    for step in range(4, 7):
        m(*batch(step))  # eval-free training-mode forwards: steps 4, 5, 6
    assert np.array_equal(aug[:, :DIM], m.weight.detach().numpy())
    assert np.array_equal(aug[:, DIM], m.bias.detach().numpy())


def test_forest_confidence_shrinks_the_sets():
    """HF-A's threshold: each sample keeps fewer of its forest classes, so
    the batch's union (before the label) is no larger than without it."""
    sizes = {}
    for conf in (0.0, 0.5):
        m = make("forest", forest_set_size=32, forest_confidence=conf)
        h, y = batch(0)
        hn = h.detach().numpy().astype(np.float32)
        m._sync_forest()
        ones = np.ones((hn.shape[0], 1), np.float32)
        _, offs = m.index.candidates(np.hstack([hn, ones]), set_size=32, confidence=conf)
        sizes[conf] = np.diff(offs)
        m(h, y)
    assert np.all(sizes[0.0] == 32)
    assert np.all(sizes[0.5] >= 1) and sizes[0.5].mean() < 24
    with pytest.raises(ValueError, match="forest_confidence"):
        make("forest", forest_confidence=1.5)


def test_sampled_softmax_refuses_bad_input_and_changes_nothing():
    m = make("lsh-embedding")
    h, y = batch(1)
    m(h, y)
    step, w = m.step, m.weight.detach().clone()
    with pytest.raises(TypeError, match="float32"):
        m(h.double(), y)
    with pytest.raises(ValueError, match="12"):
        m(torch.randn(NB, DIM + 1), y)
    with pytest.raises(ValueError, match="labels"):
        m(h, torch.full((NB,), ROWS))
    with pytest.raises(ValueError, match="labels"):
        m(h, torch.full((NB,), -1))
    with pytest.raises(ValueError, match="labels"):
        m(h, y[:-1])
    with pytest.raises(TypeError, match="integer"):
        m(h, y.float())
    with pytest.raises(ValueError, match="CPU"):
        m(torch.empty(NB, DIM, device="meta"), y)
    bad = h.clone()
    bad[3, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        m(bad, y)
    assert m.step == step and torch.equal(m.weight.detach(), w)
    with pytest.raises(ValueError, match="sampler"):
        lt.SampledSoftmax(10, 4, sampler="nope")
    with pytest.raises(ValueError, match="counts"):
        lt.SampledSoftmax(10, 4, sampler="unigram")
    ids, off = m.candidates(h, y)
    with pytest.raises(ValueError, match="ids"):
        lt.sampled_softmax_loss(h, m.weight, m.bias, ids.astype(np.int64) + ROWS, off, y)
    with pytest.raises(ValueError, match="offsets"):
        lt.sampled_softmax_loss(h, m.weight, m.bias, ids, off[:-1], y)
    with pytest.raises(TypeError):
        lt.sampled_softmax_loss(h, m.weight.double(), m.bias, ids, off, y)


@pytest.mark.parametrize("sampler", ["uniform", "lsh-label", "forest"])
def test_fused_sgd_step_equals_autograd_and_sgd(sampler):
    lr = 0.7
    a, b = make(sampler), make(sampler)
    opt = torch.optim.SGD(b.parameters(), lr=lr)
    for step in range(4):
        h, y = batch(step)
        hb = h.clone().requires_grad_()
        la, dha = a.sgd_step(h, y, lr)
        lb = b(hb, y)
        opt.zero_grad()
        lb.backward()
        w_before = b.weight.detach().clone()
        opt.step()
        assert la.item() == lb.item()
        assert torch.equal(dha, hb.grad)
        # the fused update applies lr g_j h_b position by position (within
        # gamma(2) lr S + gamma(c) (|w| + 2 lr S) of w - lr G, S = sum |g h|
        # over the row's c <= nb positions: docs/training.md), SGD subtracts
        # lr G~ once (G~ within gamma(c + 1) S of G, then two roundings);
        # |g_j| <= 1 / nb, so S <= max_b |h_b| elementwise
        s = h.abs().max(0).values.double()
        w0 = w_before.double().abs()
        tol = (gamma(2) * lr * s + gamma(NB) * (w0 + 2 * lr * s)
               + lr * gamma(NB + 1) * s + gamma(2) * (w0 + lr * s))
        assert ((a.weight.detach().double() - b.weight.detach().double()).abs() <= tol).all()
        with torch.no_grad():  # continue from the same W
            a.weight.copy_(b.weight)
            a.bias.copy_(b.bias)
    assert a.step == b.step == 4


def test_train_w2v_example_skips_without_data(tmp_path):
    # a copy of the example whose ../shared/data does not exist
    ex = tmp_path / "repo" / "python" / "examples"
    ex.mkdir(parents=True)
    src = os.path.join(os.path.dirname(__file__), "..", "examples", "train_w2v.py")
    (ex / "train_w2v.py").write_text(open(src).read())
    out = subprocess.run([sys.executable, str(ex / "train_w2v.py")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "skipped: ../shared/data not found"


def test_train_w2v_example_runs_on_the_real_data():
    d = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "w2v-gutenberg")
    if not os.path.exists(os.path.join(d, "train_pairs.i32")):
        pytest.skip("skipped: ../shared/data not found")
    src = os.path.join(os.path.dirname(__file__), "..", "examples", "train_w2v.py")
    out = subprocess.run(
        [sys.executable, src, "--pairs", "1280", "--heldout", "500", "--s", "256",
         "--methods", "full,lsh-embedding,forest,uniform,unigram,lsh-label"],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ") and "method" not in ln]
    assert len(rows) == 6
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        p1, p5, ll = float(cells[2]), float(cells[3]), float(cells[4])
        assert 0 <= p1 <= 1 and 0 <= p5 <= 1 and -20 < ll < 0
