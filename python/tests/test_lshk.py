"""The Python package against the C API (liblshk.so through ctypes, see
capi.py) bit for bit, bad inputs, threads, and files shared with C++."""

import base64
import os
import re
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import lshk
from capi import ROOT


def bits(a):
    """Exact comparison of float arrays (NaN / -inf / signed zeros included)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def same(py_out, c_out):
    assert np.array_equal(py_out[0], c_out[0])
    assert np.array_equal(bits(py_out[1]), bits(c_out[1]))


def cfg_id(c):
    return ",".join(f"{k}={v}" for k, v in c.items()) or "defaults"


# ---------------------------------------------------------------- the LSH sources

INDEX_CONFIGS = [
    dict(),
    dict(source="dwta", bits_per_table=4, tables=12, storage="bf16"),
    dict(transform="bias_aug", storage="i8", bits_per_table=9, tables=20, seed=5),
    dict(transform="mips", storage="f16", bucket_cap=40, range_bits=10),
    dict(storage="borrowed", sparsity=3, bits_per_table=8, tables=24),
]


@pytest.mark.parametrize("cfg", INDEX_CONFIGS, ids=cfg_id)
def test_index_matches_c_api(capi, layer, cfg):
    w, b, q = layer
    idx = lshk.Index(w, b, **cfg)
    h = capi.index_build(w, b, **cfg)
    try:
        for k in (1, 10, 64):
            same(idx.query(q, k), capi.index_query(h, q, k))
        same(idx.query(q, 5, max_candidates=100, min_count=2),
             capi.index_query(h, q, 5, max_candidates=100, min_count=2))
        if cfg.get("source", "simhash") == "simhash":
            same(idx.query(q, 7, probes=3), capi.index_query(h, q, 7, probes=3))
        # 1-D query = one row of the 2-D result
        ids1, sc1 = idx.query(q[3], 10)
        ids2, sc2 = capi.index_query(h, q[3:4], 10)
        assert ids1.shape == (10,) and np.array_equal(ids1, ids2[0])
        assert np.array_equal(bits(sc1), bits(sc2[0]))
        # the candidate sets the scorer ranks
        ci, co = idx.candidates(q, 10, max_candidates=100)
        di, do = capi.index_candidates(h, q, 10, max_candidates=100)
        assert np.array_equal(ci, di) and np.array_equal(co, do)
        assert idx.describe()["source"] == cfg.get("source", "simhash")
    finally:
        capi.index_free(h)


def test_index_query_stats_and_describe(layer):
    w, b, q = layer
    idx = lshk.Index(w, b, bits_per_table=10, tables=16)
    ids, sc, st = idx.query(q, 10, stats=True)
    assert st["queries"] == len(q)
    assert st["candidates_min"] <= st["candidates_total"] / len(q) <= st["candidates_max"]
    assert st["lists"] == st["scanned"] == st["reranked"] == 0
    assert idx.describe() == dict(source="simhash", storage="f32", transform="none", rows=3000, dim=48,
                                  bits_per_table=10, tables=16, nlist=0, codes=None, labelled=False)
    assert (idx.source, idx.storage, idx.rows, idx.dim) == ("simhash", "f32", 3000, 48)
    assert repr(idx) == "lshk.Index(source='simhash', rows=3000, dim=48, storage='f32', K=10, L=16)"
    assert idx.memory_bytes() > w.nbytes
    # every candidate of a query is a row it scores; the top k come from them
    ci, co = idx.candidates(q, 10)
    assert co[-1] == st["candidates_total"] and len(ci) == co[-1]
    for i in range(len(q)):
        assert set(ids[i][ids[i] != 2**32 - 1]) <= set(ci[co[i]:co[i + 1]])


# ---------------------------------------------------------------- the IVF source

IVF_CONFIGS = [
    (dict(), dict()),
    (dict(codes="pq4"), dict(rerank=64)),
    (dict(codes="pq4_i8"), dict(refine=64)),
    (dict(codes="none", storage="borrowed"), dict()),
    (dict(storage="borrowed", nlist=40, iters=4), dict(rerank=0)),
    (dict(storage="bf16", nlist=30, seed=9), dict()),
]


@pytest.mark.parametrize("cfg,qkw", IVF_CONFIGS, ids=[cfg_id(c) + "/" + cfg_id(k) for c, k in IVF_CONFIGS])
def test_ivf_matches_c_api(capi, layer, cfg, qkw):
    w, b, q = layer
    iv = lshk.Index(w, b, source="ivf", **cfg)
    h = capi.index_build(w, b, source="ivf", **cfg)
    try:
        for k in (1, 10):
            same(iv.query(q, k, **qkw), capi.index_query(h, q, k, **qkw))
        same(iv.query(q, 10, nprobe=3, reach=0.0), capi.index_query(h, q, 10, nprobe=3, reach=0.0))
        same(iv.query(q, 10, rerank=0), capi.index_query(h, q, 10, rerank=0))
        ids, sc, st = iv.query(q, 10, stats=True, **qkw)
        cst = capi.index_query(h, q, 10, stats=True, **qkw)[2]
        assert st == cst and st["lists"] >= len(q) and st["scanned"] > 0
        ci, co = iv.candidates(q, 10, **qkw)
        di, do = capi.index_candidates(h, q, 10, **qkw)
        assert np.array_equal(ci, di) and np.array_equal(co, do)
        d = iv.describe()
        assert d["source"] == "ivf" and d["codes"] == cfg.get("codes", "i8") and d["nlist"] > 0
        assert d["storage"] == cfg.get("storage", "f32")
    finally:
        capi.index_free(h)


def test_ivf_exact_when_everything_is_scanned(layer):
    w, b, q = layer
    iv = lshk.Index(w, b, source="ivf", nlist=16)
    ids, sc = iv.query(q, 10, nprobe=16, reach=0.0, rerank=len(w))
    exact = np.argsort(-(q @ w.T + b), axis=1, kind="stable")[:, :10]
    assert np.array_equal(ids, exact)


def test_ivf_holds_w_once(layer):
    """With 'f32' storage the lists re-rank from the index's copy of W and
    with 'borrowed' from the caller's: W is held once, so the borrowed index
    is one W smaller (and answers the same)."""
    w, b, q = layer
    own = lshk.Index(w, b, source="ivf")
    lent = lshk.Index(w, b, source="ivf", storage="borrowed")
    assert own.memory_bytes() - lent.memory_bytes() == w.nbytes
    assert own.memory_bytes() < 2 * w.nbytes
    same(own.query(q, 10), lent.query(q, 10))
    assert np.shares_memory(lent.weights()["w"], w)
    # bf16 storage: the lists re-rank from the index's bf16 rows, with no
    # f32 copy: half of W's bytes below the f32 index.
    half = lshk.Index(w, b, source="ivf", storage="bf16")
    assert own.memory_bytes() - half.memory_bytes() >= w.nbytes // 2


@pytest.mark.parametrize("source", ["simhash", "ivf", "graph", "forest"])
def test_query_threads_give_the_same_answers(layer, source):
    """threads splits the batch over threads; the answers are the same bits
    for every count."""
    w, b, q = layer
    ix = lshk.Index(w, b, source=source)
    want = ix.query(q, 10)
    for t in (1, 2, 3, 2**32 - 1):
        same(ix.query(q, 10, threads=t), want)


def test_ivf_row_weights_match_c_api(capi, layer):
    w, b, q = layer
    rw = np.linspace(0.1, 2.0, len(w), dtype=np.float32)
    iv = lshk.Index(w, b, source="ivf", nlist=30, row_weights=rw)
    h = capi.index_build(w, b, source="ivf", nlist=30, row_weights=rw)
    try:
        same(iv.query(q, 10), capi.index_query(h, q, 10))
    finally:
        capi.index_free(h)
    with pytest.raises(ValueError):
        lshk.Index(w, b, source="ivf", row_weights=rw[:-1])
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(w, b, source="ivf", row_weights=-rw)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"


def test_ivf_calibrate(capi, layer):
    w, b, q = layer
    iv = lshk.Index(w, b, source="ivf", nlist=40)
    c = iv.calibrate(q, 10, 0.9)
    assert c["met"] and np.float32(c["recall_lower"]) >= np.float32(0.9)
    assert c["recall_lower"] <= c["recall"]
    assert set(c) == {"query", "recall", "recall_lower", "scanned", "met", "fixed", "adaptive"}
    assert set(c["query"]) == {"nprobe", "rerank", "reach", "refine"}
    # the C API's calibration, field for field
    h = capi.index_build(w, b, source="ivf", nlist=40)
    try:
        cc = capi.index_calibrate(h, q, 10, 0.9)
        assert (cc.query.ivf.nprobe, cc.query.ivf.rerank, cc.query.ivf.reach, cc.query.ivf.refine) == \
            tuple(c["query"].values())
        assert (np.float32(cc.recall), cc.scanned, bool(cc.met)) == (np.float32(c["recall"]), c["scanned"], c["met"])
    finally:
        capi.index_free(h)
    # the reported recall is a query's with those knobs
    exact, _ = iv.query(q, 10, nprobe=40, reach=0.0, rerank=len(w))
    ids, _ = iv.query(q, 10, **c["query"])
    hit = sum(len(set(a) & set(e)) for a, e in zip(ids, exact))
    assert np.float32(hit / exact.size) == np.float32(c["recall"])
    assert iv.calibrate(q, 10, 0.9, threads=1) == c
    with pytest.raises(lshk.LshkError) as e:
        iv.calibrate(q, 10, 1.5)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    with pytest.raises(ValueError):
        iv.calibrate(q[:, :5], 10, 0.9)


# ---------------------------------------------------------------- the forest source

def test_forest_matches_c_api_and_rebuilds(capi, layer):
    """The forest source: queries and candidate sets bit for bit as in C;
    rebuild() after a change of the borrowed W equals a fresh build on the
    changed W (and the C API's rebuild), a new seed a fresh build with it."""
    w0, b, q = layer
    w = w0.copy()
    cfg = dict(source="forest", storage="borrowed", trees=6, leaf_size=32, seed=4)
    idx = lshk.Index(w, b, **cfg)
    h = capi.index_build(w, b, **cfg)
    try:
        assert idx.describe()["tables"] == 6 and "trees=6" in repr(idx)
        for kw in (dict(), dict(set_size=64), dict(set_size=1000)):
            same(idx.query(q, 10, **kw), capi.index_query(h, q, 10, **kw))
            ci, co = idx.candidates(q, 10, **kw)
            di, do = capi.index_candidates(h, q, 10, **kw)
            assert np.array_equal(ci, di) and np.array_equal(co, do)
            assert np.all(np.diff(co) == max(kw.get("set_size", 256), 10))
        # HF-A's confidence threshold trims each set (never below k), as in C
        for conf in (0.5, 0.99, 1.0):
            kw = dict(set_size=200, confidence=conf)
            same(idx.query(q, 10, **kw), capi.index_query(h, q, 10, **kw))
            ci, co = idx.candidates(q, 10, **kw)
            di, do = capi.index_candidates(h, q, 10, **kw)
            assert np.array_equal(ci, di) and np.array_equal(co, do)
            assert np.all(np.diff(co) >= 10) and np.all(np.diff(co) <= 200)
        with pytest.raises(lshk.LshkError) as e:
            idx.query(q, 10, confidence=1.5)
        assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
        with pytest.raises(ValueError):
            lshk.Index(w0, b, source="ivf", nlist=8).query(q, 10, confidence=0.5)
        # training changes W in place, then rebuilds the trees
        w[::3] *= np.float32(-1.5)
        idx.rebuild()
        capi.index_rebuild(h)
        fresh = lshk.Index(w.copy(), b, **dict(cfg, storage="f32"))
        same(idx.query(q, 10), fresh.query(q, 10))
        same(idx.query(q, 10), capi.index_query(h, q, 10))
        idx.rebuild(seed=11)
        capi.index_rebuild(h, seed=11)
        same(idx.query(q, 10), lshk.Index(w.copy(), b, **dict(cfg, storage="f32", seed=11)).query(q, 10))
        same(idx.query(q, 10), capi.index_query(h, q, 10))
    finally:
        capi.index_free(h)
    # normalize_rows is the forest's; storage must be f32 or borrowed
    lshk.Index(w0, b, source="forest", normalize_rows=True)
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(w0, b, source="forest", storage="i8")
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    # a NaN in the borrowed W is refused by rebuild, and the index is unchanged
    w[5, 5] = np.nan
    ref = idx.query(q, 10)
    with pytest.raises(lshk.LshkError) as e:
        idx.rebuild()
    assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
    w[5, 5] = 0.0
    same(idx.query(q, 10), ref)


# ---------------------------------------------------------------- row codes

@pytest.mark.parametrize("cfg", [dict(), dict(source="graph", m=8), dict(source="forest", trees=4),
                                 dict(storage="borrowed", bits_per_table=8, tables=24)], ids=cfg_id)
def test_row_codes_match_c_api(capi, tmp_path, layer, cfg):
    """set_codes: the same answers as the C API's lshk_index_set_codes, bit
    for bit; every answer is its exact logit; describe and files keep the
    codes; 'none' answers as before them."""
    w, b, q = layer
    idx = lshk.Index(w, b, **cfg)
    h = capi.index_build(w, b, **cfg)
    try:
        plain = idx.query(q, 10)
        assert idx.describe()["codes"] is None
        idx.set_codes("i8", rerank=16)
        capi.index_set_codes(h, 1, 16)  # LSHK_IVF_CODES_I8
        got = idx.query(q, 10)
        same(got, capi.index_query(h, q, 10))
        assert idx.describe()["codes"] == "i8"
        ids, sc = got
        ok = ids != np.uint32(0xFFFFFFFF)
        exact = np.einsum("qd,qkd->qk", q.astype(np.float64), w[np.where(ok, ids, 0)].astype(np.float64))
        exact += b[np.where(ok, ids, 0)]
        assert np.allclose(sc[ok], exact[ok], rtol=1e-5, atol=1e-5)
        _, _, st = idx.query(q, 10, stats=True)
        assert 0 < st["reranked"] <= 16 * len(q)
        path = str(tmp_path / "codes.lshk")
        idx.save(path)
        back = lshk.Index.load(path, w=w if cfg.get("storage") == "borrowed" else None)
        assert back.describe()["codes"] == "i8"
        same(back.query(q, 10), got)
        idx.set_codes("none")
        assert idx.describe()["codes"] is None
        same(idx.query(q, 10), plain)
    finally:
        capi.index_free(h)


def test_row_codes_refusals(layer):
    w, b, q = layer
    idx = lshk.Index(w, b)
    with pytest.raises(ValueError):
        idx.set_codes("int8")
    for kw in (dict(codes="pq4"), dict(codes="i8", rerank=0)):
        with pytest.raises(lshk.LshkError) as e:
            idx.set_codes(**kw)
        assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    with pytest.raises(lshk.LshkError):
        lshk.Index(w, b, storage="i8").set_codes()
    with pytest.raises(lshk.UnsupportedError):
        lshk.Index(w, b, source="ivf", nlist=8).set_codes()
    assert idx.describe()["codes"] is None


def test_union_matches_c_api(capi, layer):
    w, b, q = layer
    idx = lshk.Index(w, b, source="forest", trees=4)
    ids, _ = idx.candidates(q, 10, set_size=100)
    h = capi.index_build(w, b, source="forest", trees=4)
    try:
        for cap, seed in ((0, 0), (150, 3), (150, 4), (10**6, 0)):
            u, c = idx.union(ids, cap=cap, seed=seed, counts=True)
            cu, cc = capi.index_union(h, ids, cap, seed)
            assert np.array_equal(u, cu) and np.array_equal(c, cc)
            assert np.array_equal(idx.union(ids, cap=cap, seed=seed), u)
            if cap == 0:
                vals, cnt = np.unique(ids, return_counts=True)
                assert np.array_equal(u, vals) and np.array_equal(c, cnt)
            else:
                assert len(u) == min(cap, len(np.unique(ids)))
    finally:
        capi.index_free(h)
    assert lshk.Index(w, b).union(np.array([], np.uint32)).size == 0
    with pytest.raises(lshk.LshkError) as e:
        idx.union(np.array([3000], np.uint32))
    assert e.value.status_name == "LSHK_STATUS_INDEX_OUT_OF_RANGE"


# ---------------------------------------------------------------- every source: knobs and refusals

def test_knobs_of_another_source_raise_value_error(layer):
    w, b, q = layer
    cases = [
        dict(nlist=4), dict(codes="pq4"), dict(row_weights=np.ones(len(w), np.float32)),
        dict(m=8), dict(graph_storage="bf16"), dict(trees=2), dict(normalize_rows=True),
    ]
    for kw in cases:
        with pytest.raises(ValueError, match="applies to source="):
            lshk.Index(w, b, **kw)
    for kw in (dict(tables=4), dict(bits_per_table=4), dict(nlist=4)):
        with pytest.raises(ValueError):
            lshk.Index(w, b, source="forest", **kw)
    with pytest.raises(ValueError):
        lshk.Index(w, b, source="ivf", bucket_cap=3)
    lsh, ivf = lshk.Index(w, b, tables=8), lshk.Index(w, b, source="ivf", nlist=20)
    graph = lshk.Index(w, b, source="graph", m=8, ef_construction=20)
    forest = lshk.Index(w, b, source="forest", trees=2)
    bad = [(lsh, dict(nprobe=2)), (lsh, dict(ef=10)), (lsh, dict(walk="int8")), (lsh, dict(rerank=5)),
           (lsh, dict(set_size=5)), (ivf, dict(min_count=2)), (ivf, dict(ef=10)), (graph, dict(reach=1.0)),
           (graph, dict(probes=1)), (forest, dict(rerank=5)), (forest, dict(nprobe=1))]
    for idx, kw in bad:
        with pytest.raises(ValueError, match="applies to source="):
            idx.query(q, 10, **kw)
        with pytest.raises(ValueError):
            idx.candidates(q, 10, **kw)
    with pytest.raises(ValueError):
        lshk.Index(w, b, source="hnsw")
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(w, b, source=9)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"


def test_calls_a_source_lacks_raise_unsupported(layer):
    """UnsupportedError (LSHK_STATUS_UNSUPPORTED, a subclass of LshkError)
    for the calls only some sources have; nothing changes."""
    w, b, q = layer
    offs, labs = np.arange(len(q) + 1), np.arange(len(q))
    lsh, ivf = lshk.Index(w, b, tables=8), lshk.Index(w, b, source="ivf", nlist=20)
    graph = lshk.Index(w, b, source="graph", m=8, ef_construction=20)
    forest = lshk.Index(w, b, source="forest", trees=2)
    cases = [
        (lsh, lambda i: i.calibrate(q, 10), "lshk_index_calibrate"),
        (graph, lambda i: i.calibrate(q, 10), "lshk_index_calibrate"),
        (lsh, lambda i: i.rebuild(), "lshk_index_rebuild"),
        (ivf, lambda i: i.rebuild(seed=3), "lshk_index_rebuild"),
        (ivf, lambda i: i.tables(), "lshk_index_tables"),
        (forest, lambda i: i.tables(), "lshk_index_tables"),
        (graph, lambda i: i.train_labels(q, offs, labs), "lshk_index_train_labels"),
        (forest, lambda i: i.train_labels(q, offs, labs), "lshk_index_train_labels"),
        (ivf, lambda i: i.train_iul(q, offs, labs, rounds=1), "lshk_index_train_iul"),
        (graph, lambda i: i.train_iul(q, offs, labs, rounds=1), "lshk_index_train_iul"),
    ]
    for idx, call, fn in cases:
        ref = idx.query(q, 10)
        with pytest.raises(lshk.UnsupportedError) as e:
            call(idx)
        assert isinstance(e.value, lshk.LshkError)
        assert e.value.status == lshk.STATUS["LSHK_STATUS_UNSUPPORTED"] == 13
        assert e.value.status_name == "LSHK_STATUS_UNSUPPORTED"
        assert e.value.message.startswith(fn + ": ") and str(e.value) == e.value.message
        same(idx.query(q, 10), ref)
        assert idx.label_info() is None
    for idx in (ivf, graph, forest):
        assert idx.simhash() is None and idx.dwta() is None


# ---------------------------------------------------------------- kernels, storages, layouts

def test_kernels_match_c_api(capi, layer):
    w, b, q = layer
    sh = lshk.SimHash(48, 10, 16, seed=4)
    codes = sh.hash(w)
    assert np.array_equal(codes, capi.simhash_hash(48, 10, 16, w, seed=4))
    qc = sh.hash(q)
    t = lshk.Tables(codes, 10)
    ids, offs = t.gather(qc)
    cids, coffs = capi.tables_gather(codes, qc, 10)
    assert np.array_equal(ids, cids) and np.array_equal(offs, coffs)
    assert t.memory_bytes() > ids.nbytes // len(q)
    sc = lshk.gathered_matmul(w, q, ids, offs, bias=b)
    assert np.array_equal(bits(sc), bits(capi.gathered_matmul(w, b, q, ids, offs)))
    same(lshk.topk(sc, 10, offs, ids), capi.topk(sc, ids, offs, 10))
    p, lse = lshk.softmax(sc, offs, return_lse=True)
    cp, clse = capi.softmax(sc, offs)
    assert np.array_equal(bits(p), bits(cp)) and np.array_equal(bits(lse), bits(clse))
    x = np.array([1.0, -2.0, 1.00390625, 3e38, np.inf], np.float32)
    assert np.array_equal(lshk.to_bf16(x), capi.convert(x, "f32", "bf16"))
    # the kernels end to end give the index's answer (same family, tables, weights)
    idx = lshk.Index(w, b, bits_per_table=10, tables=16, range_bits=10, seed=4)
    ii, _ = idx.query(q, 10)
    ti, _ = lshk.topk(sc, 10, offs, ids)
    assert np.array_equal(ii, ti)
    assert np.array_equal(idx.simhash().planes(), sh.planes())
    assert np.array_equal(idx.tables().gather(qc)[0], ids)
    assert np.array_equal(idx.candidates(q)[0], ids)


def test_other_storages_through_the_weights_view(capi, layer):
    w, b, q = layer
    for storage in ("bf16", "f16", "i8", "f32"):
        idx = lshk.Index(w, b, storage=storage)
        v = idx.weights()
        assert v["storage"] == storage and v["rows"] == len(w) and v["dim"] == 48
        assert not v["w"].flags.writeable
        assert np.array_equal(v["bias"], b)
        ids = np.arange(0, 3000, 7, dtype=np.uint32)
        kw = dict(bias=v["bias"], scales=v["scales"], bf16=storage == "bf16")
        sc = lshk.gathered_matmul(v["w"], q[0], ids, **kw)
        ref = w[ids] @ q[0] + b[ids]
        assert np.allclose(sc, ref, rtol=0.05, atol=0.3)
        offs = np.array([0, len(ids)], np.uint64)
        wv = v["w"].view(np.uint16) if storage == "f16" else v["w"]
        c_sc = capi.gathered_matmul(wv, v["bias"], q[:1], ids, offs, storage=storage, scales=v["scales"])
        assert np.array_equal(bits(sc), bits(c_sc))
    bw = lshk.Index(w, b, storage="borrowed").weights()
    assert np.shares_memory(bw["w"], w) and bw["storage"] == "borrowed"  # zero-copy


def test_dwta_and_helpers():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 64)).astype(np.float32)
    d = lshk.Dwta(64, 4, 8, bin_size=8, seed=2)
    codes = d.hash(x)
    assert codes.shape == (50, 8)
    d2 = lshk.Dwta.from_map(d.map(), 64, 4, 8, 8)
    assert np.array_equal(d2.hash(x), codes)
    sh = lshk.SimHash(64, 8, 4)
    assert np.array_equal(lshk.SimHash.from_planes(sh.planes(), 8, 4).hash(x), sh.hash(x))
    assert sh.project(x).shape == (50, 32)
    # sparse rows: all columns given = the dense hash
    indptr = np.arange(0, 51 * 64, 64)
    indices = np.tile(np.arange(64), 50)
    assert np.array_equal(d.hash_sparse(indptr, indices, x.ravel()), codes)
    qi, sc = lshk.quantize_rows_i8(x)
    assert qi.dtype == np.int8 and sc.shape == (50,)
    assert lshk.to_bf16(np.array([1.0, -2.0], np.float32)).tolist() == [0x3F80, 0xC000]


def test_layouts_zero_copy_or_copied(layer):
    w, b, q = layer
    ref = lshk.Index(w, b).query(q, 10)
    wide = np.zeros((3000, 64), np.float32)
    wide[:, :48] = w
    sub = wide[:, :48]  # rows contiguous, stride 64: used in place
    same(lshk.Index(sub, b).query(q, 10), ref)
    same(lshk.Index(np.asfortranarray(w), b).query(np.asfortranarray(q), 10), ref)  # copied
    same(lshk.Index(w, b).query(q[::-1][::-1], 10), ref)
    same(lshk.Index(w, b).query(q.tolist(), 10), ref)  # a list of lists
    bw = lshk.Index(sub, b, storage="borrowed")
    assert np.shares_memory(bw.weights()["w"], wide)
    same(bw.query(q, 10), ref)
    # a borrowed W is used in place or not at all: one that needs a copy
    # would leave the caller's later changes unseen
    for bad in (np.asfortranarray(w), w[:, ::2], w.tolist()):
        with pytest.raises(ValueError, match="in place"):
            lshk.Index(bad, storage="borrowed")
    assert lshk.Index(w, storage="borrowed_f32").storage == "borrowed"


def test_save_load_roundtrip_and_borrowed(tmp_path, layer):
    w, b, q = layer
    for source, storage in (("simhash", "f32"), ("simhash", "i8"), ("simhash", "borrowed"), ("ivf", "f32"),
                            ("ivf", "borrowed"), ("graph", "bf16"), ("graph", "borrowed"),
                            ("forest", "f32"), ("forest", "borrowed")):
        kw = dict(bits_per_table=9, tables=12) if source == "simhash" else {}
        idx = lshk.Index(w, b, source=source, storage=storage, **kw)
        path = tmp_path / f"{source}-{storage}.lshk"
        idx.save(path)
        back = lshk.Index.load(str(path), w=w if storage == "borrowed" else None)
        assert back.describe() == idx.describe()
        same(back.query(q, 10), idx.query(q, 10))
        if storage == "borrowed":
            assert np.shares_memory(back.weights()["w"], w)
            same(lshk.Index.load(path, w, w_stride=48).query(q, 10), idx.query(q, 10))
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load(tmp_path / "simhash-borrowed.lshk")  # W needed
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    # a W of another shape or row stride is refused before the C loader
    # would read it (it reads the file's rows x dim at its stride)
    wide = np.zeros((3000, 64), np.float32)
    wide[:, :48] = w
    for name in ("simhash-borrowed", "ivf-borrowed", "forest-borrowed"):
        for bad in (w[:100], w[:, :40], wide[:, :48]):
            with pytest.raises(ValueError):
                lshk.Index.load(tmp_path / f"{name}.lshk", w=bad)
    with pytest.raises(ValueError, match="w_stride"):
        lshk.Index.load(tmp_path / "ivf-borrowed.lshk", w, w_stride=64)
    with pytest.raises(ValueError):  # the file holds its weights
        lshk.Index.load(tmp_path / "simhash-i8.lshk", w=w[:10])
    with pytest.raises(lshk.LshkError) as e:  # the same, W of the file's shape
        lshk.Index.load(tmp_path / "simhash-i8.lshk", w=w)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    # a W goes to the loader that checks its length
    assert e.value.message.startswith("lshk_index_load_borrowed: ")


def test_files_shared_with_c_api(capi, tmp_path, layer):
    w, b, q = layer
    for kw in (dict(storage="bf16"), dict(source="ivf", codes="pq4"), dict(source="forest", trees=3)):
        idx = lshk.Index(w, b, **kw)
        idx.save(tmp_path / "py.lshk")
        h = capi.index_load(tmp_path / "py.lshk")
        same(idx.query(q, 10), capi.index_query(h, q, 10))
        capi.index_save(h, tmp_path / "c.lshk")
        capi.index_free(h)
        same(lshk.Index.load(tmp_path / "c.lshk").query(q, 10), idx.query(q, 10))
        assert (tmp_path / "c.lshk").read_bytes() == (tmp_path / "py.lshk").read_bytes()
        h = capi.index_build(w, b, **kw)
        capi.index_save(h, tmp_path / "c-built.lshk")
        capi.index_free(h)
        assert (tmp_path / "c-built.lshk").read_bytes() == (tmp_path / "py.lshk").read_bytes()


# ---------------------------------------------------------------- the files of lshk 0.2

LR, LD, LWS = 24, 4, 5  # ffi_tests/bad_input_index_load02.c's W02: 24 x 4 at stride 5


def files_02():
    """The 0.2 files embedded (base64) in ffi_tests/bad_input_index_load02.c,
    by name, or None when that file is not in this checkout."""
    path = os.path.join(ROOT, "ffi_tests", "bad_input_index_load02.c")
    if not os.path.exists(path):
        return None
    src = open(path).read()
    out = {}
    for name, body in re.findall(r"static const char \*const f02_(\w+)\[\] = \{(.*?)\};", src, re.S):
        out[name] = base64.b64decode("".join(re.findall(r'"([^"]*)"', body)))
    return out


def test_files_of_lshk_02_load_as_in_c(capi, tmp_path):
    """0.2's IVF, graph and forest files load as indexes of their source,
    as lshk_index_load loads them (the W they were built from at its stride;
    none for an IVF file holding its rows); a W of another shape is refused
    before the loader reads it."""
    files = files_02()
    if not files:
        pytest.skip("ffi_tests/bad_input_index_load02.c (the embedded 0.2 files) not found")
    w5 = np.full((LR, LWS), 9.0, np.float32)
    r, j = np.meshgrid(np.arange(LR), np.arange(LD), indexing="ij")
    w5[:, :LD] = ((r * 7 + j * 3) % 11).astype(np.float32) / np.float32(5.0) - np.float32(1.0)
    w02 = w5[:, :LD]  # rows contiguous at stride 5: used in place
    q = np.array([[0.5, -1.0, 0.25, 1.0], [-0.5, 0.75, 0.0, 1.0]], np.float32)
    want = {"ivf_borrowed": ("ivf", "borrowed", True), "ivf_owned": ("ivf", "f32", False),
            "graph_f32": ("graph", "borrowed", True), "forest": ("forest", "borrowed", True)}
    for name, (source, storage, needs_w) in want.items():
        path = tmp_path / f"{name}.lshk02"
        path.write_bytes(files[name])
        idx = lshk.Index.load(path, w02 if needs_w else None)
        d = idx.describe()
        assert (d["source"], d["storage"], d["rows"], d["dim"]) == (source, storage, LR, LD), name
        h = capi.index_load(path, w02 if needs_w else None, LWS if needs_w else 0)
        try:
            for k in (1, 4, 30):
                same(idx.query(q, k), capi.index_query(h, q, k))
        finally:
            capi.index_free(h)
        if needs_w:
            assert np.shares_memory(idx.weights()["w"], w5)
            for bad in (w02[:10], w5[:, :3]):
                with pytest.raises(ValueError):
                    lshk.Index.load(path, bad)
            with pytest.raises(lshk.LshkError) as e:
                lshk.Index.load(path)
            assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
        else:
            with pytest.raises(ValueError, match="holds its weights"):
                lshk.Index.load(path, w02[:3])
        # saved again, it is a 0.3 index file
        idx.save(tmp_path / "again.lshk")
        same(lshk.Index.load(tmp_path / "again.lshk", w02 if needs_w else None).query(q, 4), idx.query(q, 4))
    # a graph of bf16 rows holds its bias rounded: refused, as in C
    path = tmp_path / "graph_bf16.lshk02"
    path.write_bytes(files["graph_bf16"])
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load(path, w02)
    with pytest.raises(RuntimeError) as ce:
        capi.index_load(path, w02, LWS)
    assert str(ce.value).startswith(e.value.status_name)


# ---------------------------------------------------------------- the graph source

GRAPH_CONFIGS = [
    dict(source="graph"),
    dict(source="graph", m=8, ef_construction=40, graph_storage="bf16", storage="bf16", build_threads=2, seed=3),
    dict(source="graph", m=12, ef_construction=60, graph_storage="i8", storage="i8", build_threads=1),
]
GRAPH_QUERIES = [dict(), dict(ef=20), dict(ef=5, walk="exact"), dict(ef=200, walk="int8", rerank=30),
                 dict(ef=50, walk="int8"), dict(ef=64, walk=1, rerank=0)]


@pytest.mark.parametrize("cfg", GRAPH_CONFIGS, ids=cfg_id)
def test_graph_index_matches_c_api(capi, layer, cfg):
    """source='graph': lshk_index_build / lshk_index_query with the graph's
    knobs, bit for bit."""
    w, b, q = layer
    idx = lshk.Index(w, b, **cfg)
    h = capi.index_build(w, b, **cfg)
    try:
        assert idx.source == "graph" and idx.describe()["tables"] == 0
        assert idx.simhash() is None and idx.dwta() is None
        assert "source='graph'" in repr(idx)
        for kw in GRAPH_QUERIES:
            for k in (1, 10, 64):
                same(idx.query(q, k, **kw), capi.index_query(h, q, k, **kw))
        ids1, sc1 = idx.query(q[3], 10, ef=30, walk="int8")
        ids2, sc2 = capi.index_query(h, q[3:4], 10, ef=30, walk="int8")
        assert ids1.shape == (10,) and np.array_equal(ids1, ids2[0])
        assert np.array_equal(bits(sc1), bits(sc2[0]))
        _, _, st = idx.query(q, 10, ef=50, stats=True)
        assert st["queries"] == len(q) and 10 <= st["candidates_min"] <= st["candidates_max"] <= 50
        ci, co = idx.candidates(q, 10, ef=50, walk="int8", rerank=20)
        di, do = capi.index_candidates(h, q, 10, ef=50, walk="int8", rerank=20)
        assert np.array_equal(ci, di) and np.array_equal(co, do) and np.all(np.diff(co) == 20)
    finally:
        capi.index_free(h)


def test_graph_index_exact_when_the_pool_holds_every_row(layer):
    """ef >= rows: the walk reaches every row (every node is reachable), so
    both walks return the exact top-k of W q + b."""
    w, b, q = layer
    s = q.astype(np.float64) @ w.astype(np.float64).T + b
    want = np.argsort(-s, axis=1, kind="stable")[:, :10]
    idx = lshk.Index(w, b, source="graph", m=8, ef_construction=40)
    for walk in ("exact", "int8"):
        ids, sc = idx.query(q, 10, ef=3000, walk=walk)
        assert np.array_equal(ids, want)
        np.testing.assert_allclose(sc, np.take_along_axis(s, want.astype(np.int64), 1), rtol=1e-5, atol=1e-4)


def test_graph_index_files_and_refusals(capi, tmp_path, layer):
    w, b, q = layer
    w0, b0, q0 = w.copy(), b.copy(), q.copy()
    idx = lshk.Index(w, b, source="graph", m=8, ef_construction=50, build_threads=2)
    ref = idx.query(q, 10, ef=40, walk="int8", rerank=20)
    idx.save(tmp_path / "py.lshk")
    back = lshk.Index.load(tmp_path / "py.lshk")
    assert back.source == "graph"
    same(back.query(q, 10, ef=40, walk="int8", rerank=20), ref)
    # the same file from the C API's own build (the graph does not depend on
    # the thread count) and the C API reading the package's file
    h = capi.index_build(w, b, source="graph", m=8, ef_construction=50, build_threads=1)
    capi.index_save(h, tmp_path / "c.lshk")
    capi.index_free(h)
    assert (tmp_path / "c.lshk").read_bytes() == (tmp_path / "py.lshk").read_bytes()
    h = capi.index_load(tmp_path / "py.lshk")
    same(capi.index_query(h, q, 10, ef=40, walk="int8", rerank=20), ref)
    capi.index_free(h)
    cases = [
        (ValueError, lambda: idx.query(q, 10, walk="bogus")),
        (ValueError, lambda: lshk.Index(w, b, source="graph", graph_storage="f16")),
        (lshk.LshkError, lambda: idx.query(q, 10, ef=0)),
        (lshk.LshkError, lambda: idx.query(q, 10, walk=7)),
        (lshk.LshkError, lambda: lshk.Index(w, b, source="graph", m=1)),
        (lshk.LshkError, lambda: lshk.Index(w, b, source="graph", m=300)),
        (lshk.LshkError, lambda: lshk.Index(w, b, source="graph", ef_construction=0)),
        (lshk.LshkError, lambda: lshk.Index(w, b, source="graph", graph_storage=9)),
        (lshk.LshkError, lambda: lshk.Index(w, b, source="graph", transform="mips")),
        (lshk.UnsupportedError, lambda: idx.tables()),
        (lshk.UnsupportedError, lambda: idx.train_labels(q, np.arange(len(q) + 1), np.arange(len(q)))),
        (lshk.UnsupportedError, lambda: idx.train_iul(q, np.arange(len(q) + 1), np.arange(len(q)), rounds=1)),
    ]
    for exc, call in cases:
        with pytest.raises(exc):
            call()
    with pytest.raises(lshk.LshkError) as e:
        idx.query(q, 10, ef=0)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_index_query: ")
    with pytest.raises(lshk.LshkError) as e:
        idx.tables()
    assert "graph" in e.value.message.lower()
    # nothing changed
    assert np.array_equal(w, w0) and np.array_equal(b, b0) and np.array_equal(q, q0)
    same(idx.query(q, 10, ef=40, walk="int8", rerank=20), ref)
    assert idx.label_info() is None


def test_files_shared_with_cpp(interop, tmp_path, layer):
    w, b, q = layer
    rows, dim = w.shape
    w.tofile(tmp_path / "w.bin")
    q.tofile(tmp_path / "q.bin")
    k = 10

    def cpp_query(mode, path):
        out = tmp_path / "out.bin"
        subprocess.run([interop, mode, str(path), str(tmp_path / "q.bin"), str(len(q)), str(dim), str(k),
                        str(out)], check=True)
        raw = out.read_bytes()
        n = len(q) * k
        ids = np.frombuffer(raw[: 4 * n], np.uint32).reshape(len(q), k)
        sc = np.frombuffer(raw[4 * n:], np.float32).reshape(len(q), k)
        return ids, sc

    # Python saves, C++ loads (interop.cpp's parameters)
    idx = lshk.Index(w, bits_per_table=10, tables=16, seed=3)
    idx.save(tmp_path / "py-index.lshk")
    same(idx.query(q, k), cpp_query("query-index", tmp_path / "py-index.lshk"))
    iv = lshk.Index(w, source="ivf", nlist=32)
    iv.save(tmp_path / "py-ivf.lshk")
    same(iv.query(q, k), cpp_query("query-ivf", tmp_path / "py-ivf.lshk"))
    # C++ saves, Python loads
    for mode, ours in (("build-index", idx), ("build-ivf", iv)):
        kind = mode.split("-")[1]
        path = tmp_path / f"cpp-{kind}.lshk"
        subprocess.run([interop, mode, str(tmp_path / "w.bin"), str(rows), str(dim), str(path)], check=True)
        loaded = lshk.Index.load(path)
        same(loaded.query(q, k), cpp_query("query-" + kind, path))
        same(loaded.query(q, k), ours.query(q, k))
        # the C++ file is the Python file, byte for byte (same inputs, same parameters)
        assert path.read_bytes() == (tmp_path / f"py-{kind}.lshk").read_bytes()


# ---------------------------------------------------------------- training

def labels_for(q, w, b, per=3):
    scores = q @ w.T + b
    lab = np.argsort(-scores, axis=1)[:, :per].astype(np.uint32)
    return np.arange(0, per * len(q) + 1, per, dtype=np.uint64), lab.ravel()


def test_train_labels_and_iul_match_c_api(capi, layer, tmp_path):
    w, b, q = layer
    rng = np.random.default_rng(3)
    tq = rng.standard_normal((200, 48)).astype(np.float32)
    offs, labs = labels_for(tq, w, b)
    idx = lshk.Index(w, b, bits_per_table=10, tables=8)
    h = capi.index_build(w, b, bits_per_table=10, tables=8)
    assert idx.label_info() is None
    idx.train_labels(tq, offs, labs, label_cap=8)
    capi.train_labels(h, tq, offs, labs, label_cap=8)
    assert idx.label_info() == {"label_cap": 8, "policy": "beside"}
    assert idx.describe()["labelled"]
    same(idx.query(q, 10), capi.index_query(h, q, 10))
    capi.index_free(h)
    idx.save(tmp_path / "labelled.lshk")
    assert lshk.Index.load(tmp_path / "labelled.lshk").label_info() == {"label_cap": 8, "policy": "beside"}

    idx = lshk.Index(w, b, bits_per_table=10, tables=8)
    h = capi.index_build(w, b, bits_per_table=10, tables=8)
    reports = idx.train_iul(tq, offs, labs, rounds=2, epochs=2)
    capi.train_iul(h, tq, offs, labs, rounds=2, epochs=2)
    assert len(reports) == 2 and reports[0]["round"] == 0
    same(idx.query(q, 10), capi.index_query(h, q, 10))
    capi.index_free(h)
    # the training-to-convergence and collision-loss flags, as in C
    idx = lshk.Index(w, b, bits_per_table=10, tables=8)
    h = capi.index_build(w, b, bits_per_table=10, tables=8)
    idx.train_iul(tq, offs, labs, rounds=2, epochs=20, to_convergence=True, collision_loss=True)
    capi.train_iul(h, tq, offs, labs, rounds=2, epochs=20, flags=4 | 8)
    same(idx.query(q, 10), capi.index_query(h, q, 10))
    capi.index_free(h)


@pytest.mark.parametrize("policy", ["beside", "instead"])
def test_ivf_train_labels_matches_c_api(capi, layer, policy, tmp_path):
    w, b, q = layer
    rng = np.random.default_rng(5)
    tq = rng.standard_normal((150, 48)).astype(np.float32)
    offs, labs = labels_for(tq, w, b)
    ivf = lshk.Index(w, b, source="ivf")
    h = capi.index_build(w, b, source="ivf")
    assert ivf.label_info() is None
    ivf.train_labels(tq, offs, labs, label_cap=4, policy=policy)
    capi.train_labels(h, tq, offs, labs, label_cap=4, policy=policy)
    assert ivf.label_info() == {"label_cap": 4, "policy": policy}
    for kw in ({}, {"nprobe": 1, "reach": 0.0, "rerank": 8}):
        same(ivf.query(q, 10, **kw), capi.index_query(h, q, 10, **kw))
    with pytest.raises(lshk.LshkError) as e:
        ivf.train_labels(tq, offs, labs)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_index_train_labels: ")
    capi.index_free(h)
    ivf.save(tmp_path / "ivf.lshk")
    back = lshk.Index.load(tmp_path / "ivf.lshk")
    assert back.label_info() == {"label_cap": 4, "policy": policy}
    same(back.query(q, 10), ivf.query(q, 10))
    with pytest.raises(lshk.LshkError):  # not with 4-bit codes
        lshk.Index(w, b, source="ivf", codes="pq4").train_labels(tq, offs, labs)


# ---------------------------------------------------------------- bad inputs

def test_lshk_errors_carry_status_and_message(layer):
    w, b, q = layer
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(w, b, bits_per_table=40)
    assert e.value.status == lshk.STATUS["LSHK_STATUS_INVALID_ARGUMENT"] == 2
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_index_build: ") and str(e.value) == e.value.message
    assert not isinstance(e.value, lshk.UnsupportedError)
    assert type(e.value).__module__ == "lshk" and issubclass(lshk.UnsupportedError, lshk.LshkError)
    bad = w.copy()
    bad[5, 3] = np.nan
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(bad, source="ivf")
    assert e.value.status_name == "LSHK_STATUS_NON_FINITE" and e.value.message.startswith("lshk_index_build")
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load("/nonexistent/dir/x.lshk")
    assert e.value.status_name == "LSHK_STATUS_IO_ERROR"
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(w, source="dwta", bits_per_table=4).query(q, 5, probes=2)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_index_query: ")


def test_bad_inputs_raise_and_change_nothing(tmp_path, layer):
    w, b, q = layer
    w0, b0, q0 = w.copy(), b.copy(), q.copy()
    idx = lshk.Index(w, b, bits_per_table=10, tables=8)
    iv = lshk.Index(w, b, source="ivf", nlist=20)
    ref = idx.query(q, 10)
    ref_iv = iv.query(q, 10)
    qn = q.copy()
    qn[2, 2] = np.inf
    cases = [
        (TypeError, lambda: idx.query(q.astype(np.float64), 10)),
        (TypeError, lambda: idx.query(q.astype(np.int32), 10)),
        (ValueError, lambda: idx.query(q[None], 10)),
        (ValueError, lambda: idx.query(np.float32(1.0), 10)),
        (ValueError, lambda: idx.query(q[:, :40], 10)),  # dim 40 != 48
        (ValueError, lambda: iv.query(q[:, :40], 10)),
        (ValueError, lambda: idx.query(q[0, :47], 10)),
        (ValueError, lambda: idx.candidates(q[:, :40])),
        (lshk.LshkError, lambda: idx.query(qn, 10)),
        (lshk.LshkError, lambda: idx.candidates(qn)),
        (lshk.LshkError, lambda: iv.query(qn, 10)),
        (lshk.LshkError, lambda: iv.query(q, 10, nprobe=0)),
        (lshk.LshkError, lambda: iv.query(q, 10, reach=-1.0)),
        (lshk.LshkError, lambda: iv.candidates(q, 10, reach=float("nan"))),
        (ValueError, lambda: lshk.Index(w, b[:-1])),
        (TypeError, lambda: lshk.Index(w.astype(np.float16))),
        (ValueError, lambda: lshk.Index(w, storage="f64")),
        (lshk.LshkError, lambda: lshk.Index(w, storage=17)),
        (OverflowError, lambda: idx.query(q, -1)),
        (ValueError, lambda: idx.train_labels(q, np.array([0, 1], np.uint64), np.array([1], np.uint32))),
        (lshk.LshkError, lambda: idx.train_labels(q, np.array([0] * len(q) + [1], np.uint64),
                                                   np.array([999999], np.uint32))),
        (ValueError, lambda: idx.train_labels(q, np.arange(len(q) + 1), np.arange(len(q)) - 1)),
        (lshk.LshkError, lambda: iv.train_labels(q, np.array([0] * len(q) + [1], np.uint64),
                                                  np.array([999999], np.uint32))),
        (lshk.LshkError, lambda: idx.train_iul(q, np.arange(len(q) + 1), np.arange(len(q)), rounds=1,
                                               learning_rate=-1.0)),
        (lshk.LshkError, lambda: idx.train_iul(q, np.arange(len(q) + 1), np.full(len(q), 5000), rounds=1)),
        (lshk.LshkError, lambda: idx.save(tmp_path / "no" / "such" / "dir.lshk")),
        (lshk.LshkError, lambda: lshk.gathered_matmul(w, q[0], np.array([3000], np.uint32))),
        (ValueError, lambda: lshk.topk(np.zeros(4, np.float32), 2, np.array([0, 5], np.uint64))),
        (lshk.LshkError, lambda: lshk.softmax(np.zeros(4, np.float32), np.array([0, 3, 2], np.uint64))),
    ]
    for exc, call in cases:
        with pytest.raises(exc):
            call()
    # nothing changed: inputs, the indexes' answers, no label training
    assert np.array_equal(w, w0) and np.array_equal(b, b0) and np.array_equal(q, q0)
    same(idx.query(q, 10), ref)
    same(iv.query(q, 10), ref_iv)
    assert idx.label_info() is None and iv.label_info() is None
    assert not (tmp_path / "no").exists()


def test_progress_callback(layer):
    w, b, _ = layer
    for source in ("simhash", "ivf", "graph", "forest"):
        calls = []
        lshk.Index(w, b, source=source, progress=lambda done, total: calls.append((done, total)))
        assert calls and calls[-1] == (len(w), len(w)), source

    def boom(done, total):
        raise KeyError("stop")

    with pytest.raises(KeyError):
        lshk.Index(w, b, progress=boom)


# ---------------------------------------------------------------- huge outputs, k beyond the rows

# Run in a child process whose address space is capped at 3 GiB (after the
# imports and builds): each call's outputs need 4-16 GiB, so numpy cannot
# allocate them. Each must raise MemoryError, an Exception, never pyo3's
# PanicException (a BaseException that `except Exception` misses).
HUGE_OUTPUTS = r"""
import resource
import numpy as np
import lshk

rng = np.random.default_rng(3)
w = rng.standard_normal((300, 16)).astype(np.float32)
q = rng.standard_normal((2, 16)).astype(np.float32)
index = lshk.Index(w, bits_per_table=6, tables=4)
ivf = lshk.Index(w, source="ivf", nlist=4)
graph = lshk.Index(w, source="graph", m=8, ef_construction=20)
forest = lshk.Index(w, source="forest", trees=2)
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
calls = {
    "ivf query 1-D": lambda: ivf.query(w[0], k=2**30),
    "ivf query 2-D": lambda: ivf.query(q, k=2**31 - 1),
    "lsh query 1-D": lambda: index.query(w[0], k=2**31 - 1),
    "lsh query 2-D stats": lambda: index.query(q, 2**31 - 1, stats=True),
    "graph query": lambda: graph.query(q, 2**31 - 1, ef=10),
    "forest query": lambda: forest.query(q, 2**31 - 1),
    "topk": lambda: lshk.topk(w[0], 2**31 - 1),
    "topk segments": lambda: lshk.topk(w[0], 2**32 - 1, np.array([0, 8, 16], np.uint64)),
    "train_iul reports": lambda: index.train_iul(q, np.arange(3), np.arange(2), rounds=2**32 - 1),
}
for name, call in calls.items():
    try:
        call()
        print(name, "| returned")
    except MemoryError:
        print(name, "| MemoryError")
    except Exception as e:
        print(name, "| other Exception", type(e).__name__, e)
    except BaseException as e:
        print(name, "| BaseException", type(e).__name__, e)
ids, _ = index.query(w[0], 3)
print("still answers |", ids.shape, ivf.query(w[0], 3)[0].shape)
"""


def test_huge_outputs_raise_memory_error_not_panic():
    r = subprocess.run([sys.executable, "-c", HUGE_OUTPUTS], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "panicked" not in r.stderr, r.stderr
    got = dict(line.split(" | ", 1) for line in r.stdout.splitlines())
    assert got.pop("still answers") == "(3,) (3,)"
    assert got and all(v == "MemoryError" for v in got.values()), r.stdout


def test_k_beyond_the_rows_pads_as_in_c(capi, layer):
    """The package keeps the C API's documented padding for a k that
    cannot be met (k > rows): the rows found, then id 2**32-1 / score
    -inf, bit for bit as lshk_index_query; not a ValueError."""
    w, b, q = layer
    w, b = w[:20], b[:20]
    k = 25
    pad = np.uint32(2**32 - 1)
    exact = np.argsort(-(q @ w.T + b), axis=1, kind="stable")
    idx = lshk.Index(w, b, bits_per_table=2, tables=40)  # every row a candidate
    h = capi.index_build(w, b, bits_per_table=2, tables=40)
    iv = lshk.Index(w, b, source="ivf", nlist=2)
    hi = capi.index_build(w, b, source="ivf", nlist=2)
    try:
        same(idx.query(q, k), capi.index_query(h, q, k))
        same(iv.query(q, k, nprobe=2, reach=0.0, rerank=20),
             capi.index_query(hi, q, k, nprobe=2, reach=0.0, rerank=20))
    finally:
        capi.index_free(h)
        capi.index_free(hi)
    graph = lshk.Index(w, b, source="graph", m=8)
    forest = lshk.Index(w, b, source="forest", trees=2, leaf_size=4)
    for ids, sc in (idx.query(q, k), iv.query(q, k, nprobe=2, reach=0.0, rerank=20), graph.query(q, k, ef=40),
                    forest.query(q, k, set_size=20)):
        assert ids.shape == sc.shape == (len(q), k)
        assert np.array_equal(ids[:, :20], exact)
        assert np.all(ids[:, 20:] == pad) and np.all(sc[:, 20:] == -np.inf)
    ids, sc = lshk.topk(np.arange(5, dtype=np.float32), 8)
    assert ids.tolist() == [4, 3, 2, 1, 0] + [2**32 - 1] * 3
    assert sc.tolist() == [4, 3, 2, 1, 0] + [-np.inf] * 3


# ---------------------------------------------------------------- defaults that depend on other arguments

def test_dwta_default_bits_per_table(layer):
    """source='dwta' without bits_per_table: 12 // log2(bin_size) bins per
    table (the C default K = 12 breaks DWTA's K*log2(B) <= 32)."""
    w, b, q = layer
    idx = lshk.Index(w, b, source="dwta")
    assert idx.source == "dwta" and idx.describe()["bits_per_table"] == 4 and idx.dwta().shape[3] == 8
    same(idx.query(q, 10), lshk.Index(w, b, source="dwta", bits_per_table=4).query(q, 10))
    for bin_size, bins in ((2, 12), (4, 6), (16, 3), (32, 2), (256, 1)):
        assert lshk.Index(w, b, source="dwta", bin_size=bin_size).describe()["bits_per_table"] == bins
    assert lshk.Index(w, b).describe()["bits_per_table"] == 12  # SimHash keeps the C default
    with pytest.raises(lshk.LshkError) as e:  # a given K is passed through
        lshk.Index(w, b, source="dwta", bits_per_table=12)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    with pytest.raises(lshk.LshkError) as e:  # a bad bin size is the C API's to report
        lshk.Index(w, b, source="dwta", bin_size=3)
    assert "bin_size" in e.value.message


def test_seed_is_the_sources_own(capi, layer):
    """seed= sets the seed of the index's source (lsh, ivf, graph or forest
    in lshk_index_params), as in C."""
    w, b, q = layer
    for source, kw in (("simhash", dict(tables=8)), ("ivf", dict(nlist=30)), ("graph", dict(m=8)),
                       ("forest", dict(trees=3))):
        a = lshk.Index(w, b, source=source, seed=7, **kw)
        h = capi.index_build(w, b, source=source, seed=7, **kw)
        try:
            same(a.query(q, 10), capi.index_query(h, q, 10))
        finally:
            capi.index_free(h)
        # a seed-dependent candidate set (IVF: the first list alone, the
        # graph: a pool of one) differs with another seed
        ckw = dict(ivf=dict(nprobe=1, reach=0.0, rerank=1000), graph=dict(ef=1)).get(source, {})
        ca = a.candidates(q, 1, **ckw)
        cb = lshk.Index(w, b, source=source, seed=8, **kw).candidates(q, 1, **ckw)
        assert not (np.array_equal(ca[0], cb[0]) and np.array_equal(ca[1], cb[1])), source


# ---------------------------------------------------------------- corrupt files

def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), the checksum of lshk's file sections."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def patch_section(path, tag, patch):
    """Rewrites section `tag` of an lshk file with patch(bytearray) and
    recomputes its checksum and the header's, so that only the content is
    wrong (the layout is src/format.rs's)."""
    b = bytearray(path.read_bytes())
    count = int.from_bytes(b[24:28], "little")
    for i in range(count):
        e = 64 + 32 * i
        if bytes(b[e:e + 8]).rstrip(b"\0") == tag.encode():
            off = int.from_bytes(b[e + 8:e + 16], "little")
            n = int.from_bytes(b[e + 16:e + 24], "little")
            data = bytearray(b[off:off + n])
            patch(data)
            b[off:off + n] = data
            b[e + 24:e + 28] = crc32c(data).to_bytes(4, "little")
            break
    else:
        raise AssertionError(f"no {tag} section")
    b[28:32] = crc32c(bytes(b[:28]) + bytes(b[64:64 + 32 * count])).to_bytes(4, "little")
    path.write_bytes(bytes(b))


def test_corrupt_files_of_borrowed_weights_raise_bad_file_format(tmp_path, layer):
    """A borrowed-W file whose params cannot be right raises the C loader's
    LSHK_STATUS_BAD_FILE_FORMAT, not a ValueError about W's shape."""
    w, b, q = layer
    idx = lshk.Index(w, b, storage="borrowed", bits_per_table=9, tables=12)
    good = tmp_path / "good.lshk"
    idx.save(good)
    same_bytes = tmp_path / "same.lshk"
    same_bytes.write_bytes(good.read_bytes())
    patch_section(same_bytes, "PARAMS", lambda d: None)
    assert same_bytes.read_bytes() == good.read_bytes()  # the checksums are lshk's
    lshk.Index(w, b, source="ivf", storage="borrowed").save(tmp_path / "good-ivf.lshk")

    def zero(lo, hi):
        def patch(d):
            d[lo:hi] = bytes(hi - lo)
        return patch

    cases = [
        ("rows0.lshk", "good.lshk", "PARAMS", zero(48, 64)),  # rows = dim = 0
        ("version.lshk", "good.lshk", "PARAMS", lambda d: d.__setitem__(slice(0, 4), (99).to_bytes(4, "little"))),
        ("ivf-rows0.lshk", "good-ivf.lshk", "PARAMS", zero(48, 64)),
        ("ivf-lists0.lshk", "good-ivf.lshk", "IVFPARAM", zero(4, 16)),
    ]
    for name, base, tag, patch in cases:
        path = tmp_path / name
        path.write_bytes((tmp_path / base).read_bytes())
        patch_section(path, tag, patch)
        with pytest.raises(lshk.LshkError) as e:
            lshk.Index.load(path, w=w)
        assert e.value.status_name == "LSHK_STATUS_BAD_FILE_FORMAT", (name, e.value.message)
        # without W: the loader's verdict on the file (a W-less load of a
        # sound PARAMS record stops at the missing W before the source's
        # sections are read)
        want = "LSHK_STATUS_BAD_FILE_FORMAT" if tag == "PARAMS" else "LSHK_STATUS_INVALID_ARGUMENT"
        with pytest.raises(lshk.LshkError) as e:
            lshk.Index.load(path)
        assert e.value.status_name == want, (name, e.value.message)
    # a damaged header (checksum not matching) is the loader's to report too
    b2 = bytearray(good.read_bytes())
    b2[40] ^= 1
    (tmp_path / "header.lshk").write_bytes(bytes(b2))
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load(tmp_path / "header.lshk", w=w[:10])
    assert e.value.status_name == "LSHK_STATUS_BAD_FILE_FORMAT"
    # a sound file and a W of another shape: ValueError, and W is not read
    with pytest.raises(ValueError):
        lshk.Index.load(good, w=w[:10])
    with pytest.raises(ValueError):
        lshk.Index.load(tmp_path / "good-ivf.lshk", w[:, :40])
    # a file that stores its weights refuses any W
    lshk.Index(w, b, storage="f32").save(tmp_path / "stored.lshk")
    with pytest.raises(ValueError):
        lshk.Index.load(tmp_path / "stored.lshk", w=w[:10])
    same(lshk.Index.load(good, w=w).query(q, 10), idx.query(q, 10))


# ---------------------------------------------------------------- threads

def test_threads_querying_one_index_agree(layer):
    w, b, _ = layer
    rng = np.random.default_rng(11)
    qs = rng.standard_normal((400, 48)).astype(np.float32)
    indexes = [lshk.Index(w, b, storage="i8"), lshk.Index(w, b, source="ivf"),
               lshk.Index(w, b, source="graph", m=8, ef_construction=40), lshk.Index(w, b, source="forest")]
    ref = [[i.query(x, 10) for i in indexes] for x in qs]
    ref_batch = [i.query(qs, 10) for i in indexes]
    errors = []

    def worker(seed):
        order = np.random.default_rng(seed).permutation(len(qs))
        try:
            for _ in range(2):
                for i in order:
                    for j, idx in enumerate(indexes):
                        same(idx.query(qs[i], 10), ref[i][j])
                for j, idx in enumerate(indexes):
                    same(idx.query(qs, 10), ref_batch[j])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_training_while_querying_is_refused(layer):
    """train_* and rebuild need exclusive access: a query running in another
    thread holds a shared borrow, so they raise meanwhile instead of racing."""
    w, b, q = layer
    big = np.random.default_rng(0).standard_normal((20000, 48)).astype(np.float32)
    for idx, change in ((lshk.Index(w, b, bits_per_table=10, tables=8),
                         lambda i: i.train_labels(q, np.arange(len(q) + 1), np.arange(len(q)))),
                        (lshk.Index(w, b, source="forest"), lambda i: i.rebuild())):
        started = threading.Event()
        result = {}

        def run():
            started.set()
            result["q"] = idx.query(big, 10)

        t = threading.Thread(target=run)
        t.start()
        started.wait()
        try:
            change(idx)
            outcome = "changed"  # the query had already finished
        except RuntimeError:
            outcome = "refused"
        t.join()
        assert outcome in ("changed", "refused")
        assert "q" in result


def test_builds_and_queries_release_the_gil():
    """While another thread is inside a long build (or a large query
    batch), this thread keeps running Python code: the call released the
    GIL. (Were it held, the sleep below could only return after the call.)"""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((200_000, 32)).astype(np.float32)
    q = rng.standard_normal((4000, 32)).astype(np.float32)
    box = {}
    for name, call in (("build", lambda: box.setdefault("idx", lshk.Index(w, tables=50, build_threads=1))),
                       ("query", lambda: box["idx"].query(q, 10))):
        entered = threading.Event()
        took = {}

        def run():
            entered.set()
            t0 = time.perf_counter()
            call()
            took["s"] = time.perf_counter() - t0

        t = threading.Thread(target=run)
        t.start()
        entered.wait()
        time.sleep(0.02)
        alive = t.is_alive()
        t.join()
        if took["s"] < 0.1:
            pytest.skip(f"the {name} took {took['s'] * 1e3:.0f} ms here: too short to observe")
        assert alive, f"this thread could not run during the {took['s']:.2f} s {name}: the GIL was held"


def test_values_that_overflow_f32_get_non_finite(tmp_path, layer):
    """Finite W and q whose scores overflow f32: a NON_FINITE LshkError at
    build or query, never a panic or padding; NaN in a float section of an
    IVF index file (valid checksums) is refused at load."""
    w, b, q = layer
    for codes in ("i8", "pq4", "pq4_i8", "none"):
        with pytest.raises(lshk.LshkError) as e:
            lshk.Index(w * np.float32(3e37), source="ivf", codes=codes)
        assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
        iv = lshk.Index(w, b, source="ivf", codes=codes)
        with pytest.raises(lshk.LshkError) as e:
            iv.query(q[0] * np.float32(1e37), k=10)
        assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
        ids, _ = iv.query(q[0] * np.float32(1e3), k=10)
        assert (ids < len(w)).all()
    for source in ("simhash", "graph", "forest"):
        idx = lshk.Index(w, b, source=source)
        with pytest.raises(lshk.LshkError) as e:
            idx.query(q[0] * np.float32(1e37), k=10)
        assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
    lshk.Index(w, b, source="ivf", codes="pq4").save(tmp_path / "good.lshk")
    for tag in ("CBIAS", "LSPREAD", "LSHAPE", "PQCENT"):
        path = tmp_path / f"{tag}.lshk"
        path.write_bytes((tmp_path / "good.lshk").read_bytes())
        patch_section(path, tag, lambda d: d.__setitem__(slice(0, 4), np.float32(np.nan).tobytes()))
        with pytest.raises(lshk.LshkError) as e:
            lshk.Index.load(path)
        assert e.value.status_name == "LSHK_STATUS_BAD_FILE_FORMAT", tag


def test_fifo_is_refused_by_load_and_save(tmp_path, layer):
    """A FIFO given to a load fails at once (it used to block); a save never
    replaces it."""
    w, b, _ = layer
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    iv = lshk.Index(w, b, source="ivf")
    for call in (lambda: lshk.Index.load(fifo), lambda: lshk.Index.load(fifo, w), lambda: iv.save(fifo)):
        t0 = time.monotonic()
        with pytest.raises(lshk.LshkError) as e:
            call()
        assert e.value.status_name == "LSHK_STATUS_IO_ERROR"
        assert time.monotonic() - t0 < 5
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_merge_topk_of_shards_answers_as_one_index(layer):
    """An index split into shards of consecutive rows, merged: with every
    list visited and every row re-ranked, the answer of one index over all
    rows, ids and score bits."""
    w, b, q = layer
    exact = dict(nprobe=2**32 - 1, reach=0.0, rerank=len(w))
    want = lshk.Index(w, b, source="ivf").query(q, 10, **exact)
    cut = [0, len(w) // 3, len(w) // 2, len(w)]
    parts = []
    for a, e in zip(cut, cut[1:]):
        ids, sc = lshk.Index(w[a:e], b[a:e], source="ivf").query(q, 10, **exact)
        parts.append((ids, sc, a))
    same(lshk.merge_topk(parts, 10), want)
    # One query (1-D), padding and a wider k.
    ids, sc = lshk.merge_topk([(p[0][0], p[1][0], p[2]) for p in parts], 40)
    assert ids.shape == (40,) and ids[-1] == 2**32 - 1 and sc[-1] == -np.inf
    with pytest.raises(ValueError):
        lshk.merge_topk([], 10)
    with pytest.raises(lshk.LshkError):
        lshk.merge_topk([(np.array([[5]], np.uint32), np.array([[1.0]], np.float32), 2**32 - 3)], 1)

