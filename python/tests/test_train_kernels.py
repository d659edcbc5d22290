"""The training kernels' bindings (softmax_xent_csr, gather_dq,
rows_update_sgd, rehash_next) against the C API bit for bit, the mutable
LSH index (update_rows, rehash_rows, rehash_dirty, dirty_rows) and the
budget rules of Tables.gather. No torch needed."""

import numpy as np
import pytest

import lshk


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(21)
    rows, dim, nb = 700, 33, 9
    w = rng.standard_normal((rows, dim)).astype(np.float32)
    q = rng.standard_normal((nb, dim)).astype(np.float32)
    counts = rng.integers(0, 60, nb)
    counts[2] = 0  # an empty segment
    offs = np.zeros(nb + 1, np.uint64)
    np.cumsum(counts, out=offs[1:])
    ids = rng.integers(0, rows, int(offs[-1])).astype(np.uint32)
    ids[:5] = 3  # a repeated row
    z = (rng.standard_normal(len(ids)) * 4).astype(np.float32)
    t = np.zeros(len(ids), np.float32)
    t[offs[:-1][counts > 0].astype(np.int64)] = 1.0
    return w, q, ids, offs, z, t


def test_softmax_xent_csr_matches_c(capi, batch):
    _, _, _, offs, z, t = batch
    for threads in (0, 1, 2):
        loss, grad = lshk.softmax_xent_csr(z, t, offs, threads=threads)
        cl, cg = capi.softmax_xent_csr(z, t, offs)
        assert np.array_equal(bits(loss), bits(cl)) and np.array_equal(bits(grad), bits(cg))


def test_gather_dq_matches_c(capi, batch):
    w, _, ids, offs, z, _ = batch
    for threads in (0, 1):
        dq = lshk.gather_dq(w, z, ids, offs, threads=threads)
        assert dq.shape == (len(offs) - 1, w.shape[1])
        assert np.array_equal(bits(dq), bits(capi.gather_dq(w, z, ids, offs)))
    # a row-strided w is used in place
    wide = np.zeros((w.shape[0], 40), np.float32)
    wide[:, :33] = w
    assert np.array_equal(bits(lshk.gather_dq(wide[:, :33], z, ids, offs)), bits(dq))


def test_rows_update_sgd_matches_c(capi, batch):
    w, q, ids, offs, z, _ = batch
    a, b = w.copy(), w.copy()
    lshk.rows_update_sgd(a, q, z, ids, offs, 0.125)
    capi.rows_update_sgd(b, q, z, ids, offs, 0.125)
    assert np.array_equal(bits(a), bits(b))
    assert not np.array_equal(a, w)
    untouched = np.setdiff1d(np.arange(w.shape[0]), ids)
    assert np.array_equal(a[untouched], w[untouched])


def test_training_kernels_refuse_bad_input(batch):
    w, q, ids, offs, z, t = batch
    with pytest.raises(TypeError, match="float32"):
        lshk.softmax_xent_csr(z.astype(np.float64), t, offs)
    with pytest.raises(ValueError, match="targets"):
        lshk.softmax_xent_csr(z, t[:-1], offs)
    with pytest.raises(ValueError, match="offsets"):
        lshk.softmax_xent_csr(z, t, offs[:-1])
    bad = z.copy()
    bad[4] = np.nan
    with pytest.raises(lshk.LshkError) as e:
        lshk.softmax_xent_csr(bad, t, offs)
    assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
    with pytest.raises(lshk.LshkError) as e:
        lshk.softmax_xent_csr(z, -t, offs)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    big = ids.copy()
    big[7] = w.shape[0]
    with pytest.raises(lshk.LshkError) as e:
        lshk.gather_dq(w, z, big, offs)
    assert e.value.status_name == "LSHK_STATUS_INDEX_OUT_OF_RANGE"
    with pytest.raises(ValueError, match="ids"):
        lshk.gather_dq(w, z, ids[:-1], offs)
    # the SGD update writes w in place: a copy or a read-only w is refused
    before = w.copy()
    with pytest.raises(ValueError, match="in place"):
        lshk.rows_update_sgd(np.asfortranarray(w), q, z, ids, offs, 0.1)
    ro = w.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        lshk.rows_update_sgd(ro, q, z, ids, offs, 0.1)
    with pytest.raises(ValueError, match="q"):
        lshk.rows_update_sgd(w, q[:-1], z, ids, offs, 0.1)
    with pytest.raises(lshk.LshkError) as e:
        lshk.rows_update_sgd(w, q, bad, ids, offs, 0.1)
    assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
    assert np.array_equal(w, before)


def test_rehash_next_is_lns_schedule():
    t, seen = 0, []
    for _ in range(6):
        t = lshk.rehash_next(t)
        seen.append(t)
    assert seen == [50, 100, 150, 200, 251, 302]
    assert lshk.rehash_next(10, 3.0, 0.0) == 13
    with pytest.raises(lshk.LshkError):
        lshk.rehash_next(0, 0.5)


def test_update_rows_and_rehash_equal_a_fresh_build(layer):
    w, b, q = layer
    kw = dict(source="simhash", transform="bias_aug", bits_per_table=9, tables=12, seed=5)
    idx = lshk.Index(w, b, **kw)
    w2, b2 = w.copy(), b.copy()
    rng = np.random.default_rng(3)
    changed = np.unique(rng.integers(0, w.shape[0], 200)).astype(np.uint32)
    w2[changed] += rng.standard_normal((len(changed), w.shape[1])).astype(np.float32)
    b2[changed] -= 0.5
    assert idx.dirty_rows() == 0
    idx.update_rows(changed, w2[changed], bias=b2[changed])
    assert idx.dirty_rows() == len(changed)
    assert np.array_equal(idx.weights()["w"], w2)
    assert idx.rehash_dirty() == len(changed)
    assert idx.dirty_rows() == 0 and idx.rehash_dirty() == 0
    fresh = lshk.Index(w2, b2, **kw)
    for a, c in zip(idx.candidates(q), fresh.candidates(q)):
        assert np.array_equal(a, c)
    assert idx.rehash_rows(changed[:5]) == 5
    # refusals change nothing
    with pytest.raises(lshk.LshkError) as e:
        idx.update_rows([w.shape[0]], w2[:1])
    assert e.value.status_name == "LSHK_STATUS_INDEX_OUT_OF_RANGE"
    with pytest.raises(ValueError, match="rows"):
        idx.update_rows([1, 2], w2[:1])
    with pytest.raises(ValueError, match="bias"):
        idx.update_rows([1, 2], w2[1:3], bias=b2[:1])
    bad = w2[1:2].copy()
    bad[0, 0] = np.inf
    with pytest.raises(lshk.LshkError):
        idx.update_rows([1], bad)
    assert idx.dirty_rows() == 0 and np.array_equal(idx.weights()["w"], w2)
    with pytest.raises(lshk.UnsupportedError):
        lshk.Index(w, b, source="ivf", nlist=8).update_rows([1], w[1:2])


def test_gather_budget_rules(layer):
    w, b, q = layer
    idx = lshk.Index(w, b, source="simhash", transform="bias_aug", bits_per_table=6, tables=10)
    qa = np.hstack([q, np.ones((len(q), 1), np.float32)])
    codes = idx.simhash().hash(qa)
    tabs = idx.tables()
    # no budget: the same sets with and without a rule
    plain = tabs.gather(codes)
    for rule in ("mid_bucket", "whole_buckets", 2):
        got = tabs.gather(codes, rule=rule)
        assert all(np.array_equal(x, y) for x, y in zip(plain, got))
    labels = np.arange(len(q), dtype=np.uint32) * 7
    forced = np.arange(len(q) + 1, dtype=np.uint64)
    ids, offs = tabs.gather(codes, max_candidates=150, forced_offsets=forced, forced_ids=labels,
                            rule="whole_buckets", budget_seed=9)
    for i in range(len(q)):
        seg = ids[offs[i]:offs[i + 1]]
        assert labels[i] in seg and len(seg) <= 150
        assert set(seg.tolist()) <= set(plain[0][plain[1][i]:plain[1][i + 1]].tolist()) | {labels[i]}
    again = tabs.gather(codes, max_candidates=150, forced_offsets=forced, forced_ids=labels,
                        rule="whole_buckets", budget_seed=9)
    assert all(np.array_equal(x, y) for x, y in zip((ids, offs), again))
    with pytest.raises(ValueError, match="rule"):
        tabs.gather(codes, rule="nope")
    with pytest.raises(lshk.LshkError):
        tabs.gather(codes, rule=7)
