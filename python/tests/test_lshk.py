"""The Python package against the C API (liblshk.so through ctypes, see
capi.py) bit for bit, bad inputs, threads, and files shared with C++."""

import os
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import lshk


def bits(a):
    """Exact comparison of float arrays (NaN / -inf / signed zeros included)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def same(py_out, c_out):
    assert np.array_equal(py_out[0], c_out[0])
    assert np.array_equal(bits(py_out[1]), bits(c_out[1]))


INDEX_CONFIGS = [
    dict(),
    dict(family="dwta", bits_per_table=4, tables=12, storage="bf16"),
    dict(transform="bias_aug", storage="i8", bits_per_table=9, tables=20, seed=5),
    dict(transform="mips", storage="f16", bucket_cap=40, range_bits=10),
    dict(storage="borrowed_f32", sparsity=3, bits_per_table=8, tables=24),
]


@pytest.mark.parametrize("cfg", INDEX_CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "defaults")
def test_index_matches_c_api(capi, layer, cfg):
    w, b, q = layer
    idx = lshk.Index(w, b, **cfg)
    h = capi.index_build(w, b, **cfg)
    try:
        for k in (1, 10, 64):
            same(idx.query(q, k), capi.index_query(h, q, k))
        same(idx.query(q, 5, max_candidates=100, min_count=2),
             capi.index_query(h, q, 5, max_candidates=100, min_count=2))
        if cfg.get("family", "simhash") == "simhash":
            same(idx.query(q, 7, probes=3), capi.index_query(h, q, 7, probes=3))
        # 1-D query = one row of the 2-D result
        ids1, sc1 = idx.query(q[3], 10)
        ids2, sc2 = capi.index_query(h, q[3:4], 10)
        assert ids1.shape == (10,) and np.array_equal(ids1, ids2[0])
        assert np.array_equal(bits(sc1), bits(sc2[0]))
    finally:
        capi.index_free(h)


def test_index_query_stats_and_shape(layer):
    w, b, q = layer
    idx = lshk.Index(w, b, bits_per_table=10, tables=16)
    ids, sc, st = idx.query(q, 10, stats=True)
    assert st["queries"] == len(q)
    assert st["candidates_min"] <= st["candidates_total"] / len(q) <= st["candidates_max"]
    assert idx.shape == (3000, 48, 10, 16)
    assert idx.memory_bytes() > w.nbytes


@pytest.mark.parametrize("cfg", [dict(), dict(codes="pq4", rerank=64), dict(codes="pq4_i8"),
                                 dict(codes="none", borrow=False),
                                 dict(borrow=False, nlist=40, iters=4)],
                         ids=["defaults", "pq4", "pq4-i8", "codes-none", "copy"])
def test_ivf_matches_c_api(capi, layer, cfg):
    w, b, q = layer
    cfg = dict(cfg)
    rerank = cfg.pop("rerank", None)
    iv = lshk.Ivf(w, b, **cfg)
    h = capi.ivf_build(w, b, **cfg)
    try:
        kw = {} if rerank is None else dict(rerank=rerank)
        for k in (1, 10):
            same(iv.query(q, k, **kw), capi.ivf_query(h, q, k, **kw))
        same(iv.query(q, 10, nprobe=3, reach=0.0), capi.ivf_query(h, q, 10, nprobe=3, reach=0.0))
        ids, sc, st = iv.query(q, 10, stats=True)
        assert st["lists"] >= len(q) and st["scanned"] > 0
    finally:
        capi.ivf_free(h)


def test_ivf_exact_when_everything_is_scanned(layer):
    w, b, q = layer
    iv = lshk.Ivf(w, b, nlist=16)
    ids, sc = iv.query(q, 10, nprobe=16, reach=0.0, rerank=len(w))
    exact = np.argsort(-(q @ w.T + b), axis=1, kind="stable")[:, :10]
    assert np.array_equal(ids, exact)


def test_ivf_calibrate(layer):
    w, b, q = layer
    iv = lshk.Ivf(w, b, nlist=40)
    c = iv.calibrate(q, 10, 0.9)
    assert c["met"] and np.float32(c["recall_lower"]) >= np.float32(0.9)
    assert c["recall_lower"] <= c["recall"]
    assert set(c) == {"nprobe", "rerank", "reach", "recall", "recall_lower", "scanned", "met",
                      "fixed", "adaptive"}
    # the reported recall is a search's with those parameters
    exact, _ = iv.query(q, 10, nprobe=40, reach=0.0, rerank=len(w))
    ids, _ = iv.query(q, 10, nprobe=c["nprobe"], rerank=c["rerank"], reach=c["reach"])
    hit = sum(len(set(a) & set(e)) for a, e in zip(ids, exact))
    assert np.float32(hit / exact.size) == np.float32(c["recall"])
    assert iv.calibrate(q, 10, 0.9, threads=1) == c
    with pytest.raises(lshk.LshkError) as e:
        iv.calibrate(q, 10, 1.5)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    with pytest.raises(ValueError):
        iv.calibrate(q[:, :5], 10, 0.9)


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
    sc = lshk.gathered_matmul(w, q, ids, offs, bias=b)
    assert np.array_equal(bits(sc), bits(capi.gathered_matmul_f32(w, b, q, ids, offs)))
    same(lshk.topk(sc, 10, offs, ids), capi.topk(sc, ids, offs, 10))
    p, lse = lshk.softmax(sc, offs, return_lse=True)
    cp, clse = capi.softmax(sc, offs)
    assert np.array_equal(bits(p), bits(cp)) and np.array_equal(bits(lse), bits(clse))
    # the kernels end to end give the index's answer (same family, tables, weights)
    idx = lshk.Index(w, b, bits_per_table=10, tables=16, range_bits=10, seed=4)
    ii, _ = idx.query(q, 10)
    ti, _ = lshk.topk(sc, 10, offs, ids)
    assert np.array_equal(ii, ti)
    assert np.array_equal(idx.simhash().planes(), sh.planes())
    assert np.array_equal(idx.tables().gather(qc)[0], ids)


def test_other_storages_through_the_weights_view(layer):
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
    bw = lshk.Index(w, b, storage="borrowed_f32").weights()["w"]
    assert np.shares_memory(bw, w)  # zero-copy


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
    bw = lshk.Index(sub, b, storage="borrowed_f32")
    assert np.shares_memory(bw.weights()["w"], wide)
    same(bw.query(q, 10), ref)


def test_save_load_roundtrip_and_borrowed(tmp_path, layer):
    w, b, q = layer
    for storage in ("f32", "i8", "borrowed_f32"):
        idx = lshk.Index(w, b, storage=storage, bits_per_table=9, tables=12)
        path = tmp_path / f"{storage}.lshk"
        idx.save(path)
        back = lshk.Index.load(str(path), borrowed_w=w if storage == "borrowed_f32" else None)
        same(back.query(q, 10), idx.query(q, 10))
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load(tmp_path / "borrowed_f32.lshk")  # W needed
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    iv = lshk.Ivf(w, b)
    iv.save(tmp_path / "a.ivf")
    same(lshk.Ivf.load(tmp_path / "a.ivf", w).query(q, 10), iv.query(q, 10))
    # a borrowed W of another shape or row stride is refused before the C
    # loader would read it (it reads the file's rows x dim at its stride)
    wide = np.zeros((3000, 64), np.float32)
    wide[:, :48] = w
    for bad in (w[:100], w[:, :40], wide[:, :48]):
        with pytest.raises(ValueError):
            lshk.Index.load(tmp_path / "borrowed_f32.lshk", borrowed_w=bad)
    for bad in (w[:100], w[:, :40]):
        with pytest.raises(ValueError):
            lshk.Ivf.load(tmp_path / "a.ivf", bad)
    with pytest.raises(lshk.LshkError) as e:
        lshk.Ivf.load(tmp_path / "a.ivf")
    assert e.value.message.startswith("lshk_ivf_load: ")
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load(tmp_path / "i8.lshk", borrowed_w=w)  # the file stores its weights
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"


def test_files_shared_with_c_api(capi, tmp_path, layer):
    w, b, q = layer
    idx = lshk.Index(w, b, storage="bf16")
    idx.save(tmp_path / "py.lshk")
    h = capi.index_load(tmp_path / "py.lshk")
    same(idx.query(q, 10), capi.index_query(h, q, 10))
    capi.index_save(h, tmp_path / "c.lshk")
    capi.index_free(h)
    same(lshk.Index.load(tmp_path / "c.lshk").query(q, 10), idx.query(q, 10))
    assert (tmp_path / "c.lshk").read_bytes() == (tmp_path / "py.lshk").read_bytes()


GRAPH_CONFIGS = [
    dict(family="graph"),
    dict(family="graph", m=8, ef_construction=40, graph_storage="bf16", storage="bf16", build_threads=2, seed=3),
    dict(family="graph", m=12, ef_construction=60, graph_storage="i8", storage="i8", build_threads=1),
]
GRAPH_QUERIES = [dict(), dict(ef=20), dict(ef=5, walk="exact"), dict(ef=200, walk="int8", rerank=30),
                 dict(ef=50, walk="int8"), dict(ef=64, walk=1, rerank=0)]


@pytest.mark.parametrize("cfg", GRAPH_CONFIGS, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()))
def test_graph_index_matches_c_api(capi, layer, cfg):
    """family='graph': lshk_index_build_ex / lshk_index_query_ex, bit for bit."""
    w, b, q = layer
    idx = lshk.Index(w, b, **cfg)
    h = capi.index_build(w, b, **cfg)
    try:
        assert idx.family == "graph" and idx.shape == (3000, 48, 0, 0)
        assert idx.simhash() is None and idx.dwta() is None
        assert "family='graph'" in repr(idx)
        for kw in GRAPH_QUERIES:
            for k in (1, 10, 64):
                same(idx.query(q, k, **kw), capi.index_query(h, q, k, **kw))
        ids1, sc1 = idx.query(q[3], 10, ef=30, walk="int8")
        ids2, sc2 = capi.index_query(h, q[3:4], 10, ef=30, walk="int8")
        assert ids1.shape == (10,) and np.array_equal(ids1, ids2[0])
        assert np.array_equal(bits(sc1), bits(sc2[0]))
        _, _, st = idx.query(q, 10, ef=50, stats=True)
        assert st["queries"] == len(q) and 10 <= st["candidates_min"] <= st["candidates_max"] <= 50
    finally:
        capi.index_free(h)


def test_graph_index_exact_when_the_pool_holds_every_row(layer):
    """ef >= rows: the walk scores every row (every node is reachable), so
    both walks return the exact top-k of W q + b."""
    w, b, q = layer
    s = q.astype(np.float64) @ w.astype(np.float64).T + b
    want = np.argsort(-s, axis=1, kind="stable")[:, :10]
    idx = lshk.Index(w, b, family="graph", m=8, ef_construction=40)
    for walk in ("exact", "int8"):
        ids, sc = idx.query(q, 10, ef=3000, walk=walk)
        assert np.array_equal(ids, want)
        np.testing.assert_allclose(sc, np.take_along_axis(s, want.astype(np.int64), 1), rtol=1e-5, atol=1e-4)


def test_graph_index_files_and_refusals(capi, tmp_path, layer):
    w, b, q = layer
    w0, b0, q0 = w.copy(), b.copy(), q.copy()
    idx = lshk.Index(w, b, family="graph", m=8, ef_construction=50, build_threads=2)
    ref = idx.query(q, 10, ef=40, walk="int8", rerank=20)
    idx.save(tmp_path / "py.lshk")
    back = lshk.Index.load(tmp_path / "py.lshk")
    assert back.family == "graph"
    same(back.query(q, 10, ef=40, walk="int8", rerank=20), ref)
    # the same file from the C API's own build (the graph does not depend on
    # the thread count) and the C API reading the package's file
    h = capi.index_build(w, b, family="graph", m=8, ef_construction=50, build_threads=1)
    capi.index_save(h, tmp_path / "c.lshk")
    capi.index_free(h)
    assert (tmp_path / "c.lshk").read_bytes() == (tmp_path / "py.lshk").read_bytes()
    h = capi.index_load(tmp_path / "py.lshk")
    same(capi.index_query(h, q, 10, ef=40, walk="int8", rerank=20), ref)
    capi.index_free(h)
    lsh = lshk.Index(w, b, bits_per_table=8, tables=8)
    cases = [
        (ValueError, lambda: lshk.Index(w, b, m=8)),  # graph options on an LSH family
        (ValueError, lambda: lshk.Index(w, b, family="dwta", ef_construction=8)),
        (ValueError, lambda: lsh.query(q, 10, ef=10)),
        (ValueError, lambda: lsh.query(q, 10, walk="int8")),
        (ValueError, lambda: idx.query(q, 10, walk="bogus")),
        (ValueError, lambda: lshk.Index(w, b, family="graph", graph_storage="f16")),
        (lshk.LshkError, lambda: idx.query(q, 10, ef=0)),
        (lshk.LshkError, lambda: idx.query(q, 10, walk=7)),
        (lshk.LshkError, lambda: lshk.Index(w, b, family="graph", m=1)),
        (lshk.LshkError, lambda: lshk.Index(w, b, family="graph", m=300)),
        (lshk.LshkError, lambda: lshk.Index(w, b, family="graph", ef_construction=0)),
        (lshk.LshkError, lambda: lshk.Index(w, b, family="graph", graph_storage=9)),
        (lshk.LshkError, lambda: lshk.Index(w, b, family="graph", transform="mips")),
        (lshk.LshkError, lambda: idx.tables()),
        (lshk.LshkError, lambda: idx.train_labels(q, np.arange(len(q) + 1), np.arange(len(q)))),
        (lshk.LshkError, lambda: idx.train_iul(q, np.arange(len(q) + 1), np.arange(len(q)), rounds=1)),
    ]
    for exc, call in cases:
        with pytest.raises(exc):
            call()
    with pytest.raises(lshk.LshkError) as e:
        idx.query(q, 10, ef=0)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_index_query_ex: ")
    with pytest.raises(lshk.LshkError) as e:
        idx.tables()
    assert "graph" in e.value.message
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

    # Python saves, C++ loads
    idx = lshk.Index(w, bits_per_table=10, tables=16, seed=3)
    idx.save(tmp_path / "py.lshk")
    same(idx.query(q, k), cpp_query("query-index", tmp_path / "py.lshk"))
    iv = lshk.Ivf(w, nlist=32, borrow=False)
    iv.save(tmp_path / "py.ivf")
    same(iv.query(q, k), cpp_query("query-ivf", tmp_path / "py.ivf"))
    # C++ saves, Python loads
    for mode, ext, cls in (("build-index", "lshk", lshk.Index), ("build-ivf", "ivf", lshk.Ivf)):
        path = tmp_path / f"cpp.{ext}"
        subprocess.run([interop, mode, str(tmp_path / "w.bin"), str(rows), str(dim), str(path)], check=True)
        loaded = cls.load(path)
        same(loaded.query(q, k), cpp_query("query-" + mode.split("-")[1], path))
        same(loaded.query(q, k), (idx if cls is lshk.Index else iv).query(q, k))
        # the C++ file is the Python file, byte for byte (same inputs, same parameters)
        assert path.read_bytes() == (tmp_path / f"py.{ext}").read_bytes()


def labels_for(q, w, b, per=3):
    scores = q @ w.T + b
    lab = np.argsort(-scores, axis=1)[:, :per].astype(np.uint32)
    return np.arange(0, per * len(q) + 1, per, dtype=np.uint64), lab.ravel()


def test_train_labels_and_iul_match_c_api(capi, layer):
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
    same(idx.query(q, 10), capi.index_query(h, q, 10))
    capi.index_free(h)

    idx = lshk.Index(w, b, bits_per_table=10, tables=8)
    h = capi.index_build(w, b, bits_per_table=10, tables=8)
    reports = idx.train_iul(tq, offs, labs, rounds=2, epochs=2)
    capi.train_iul(h, tq, offs, labs, rounds=2, epochs=2)
    assert len(reports) == 2 and reports[0]["round"] == 0
    same(idx.query(q, 10), capi.index_query(h, q, 10))
    capi.index_free(h)


@pytest.mark.parametrize("policy,code", [("beside", 0), ("instead", 1)])
def test_ivf_train_labels_matches_c_api(capi, layer, policy, code):
    w, b, q = layer
    rng = np.random.default_rng(5)
    tq = rng.standard_normal((150, 48)).astype(np.float32)
    offs, labs = labels_for(tq, w, b)
    ivf = lshk.Ivf(w, b, borrow=False)
    h = capi.ivf_build(w, b, borrow=0)
    assert ivf.label_info() is None
    ivf.train_labels(tq, offs, labs, label_cap=4, policy=policy)
    capi.ivf_train_labels(h, tq, offs, labs, label_cap=4, policy=code)
    assert ivf.label_info() == {"label_cap": 4, "policy": policy}
    for kw in ({}, {"nprobe": 1, "reach": 0.0, "rerank": 8}):
        same(ivf.query(q, 10, **kw), capi.ivf_query(h, q, 10, **kw))
    with pytest.raises(lshk.LshkError) as e:
        ivf.train_labels(tq, offs, labs)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_ivf_train_labels: ")
    capi.ivf_free(h)


# ---------------------------------------------------------------- bad inputs

def test_lshk_errors_carry_status_and_message(layer):
    w, b, q = layer
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(w, b, bits_per_table=40)
    assert e.value.status == lshk.STATUS["LSHK_STATUS_INVALID_ARGUMENT"] == 2
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_index_build: ") and str(e.value) == e.value.message
    bad = w.copy()
    bad[5, 3] = np.nan
    with pytest.raises(lshk.LshkError) as e:
        lshk.Ivf(bad)
    assert e.value.status_name == "LSHK_STATUS_NON_FINITE" and e.value.message.startswith("lshk_ivf_build")
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load("/nonexistent/dir/x.lshk")
    assert e.value.status_name == "LSHK_STATUS_IO_ERROR"
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index(w, family="dwta", bits_per_table=4).query(q, 5, probes=2)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    assert e.value.message.startswith("lshk_index_query: ")


def test_bad_inputs_raise_and_change_nothing(tmp_path, layer):
    w, b, q = layer
    w0, b0, q0 = w.copy(), b.copy(), q.copy()
    idx = lshk.Index(w, b, bits_per_table=10, tables=8)
    iv = lshk.Ivf(w, b, nlist=20)
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
        (lshk.LshkError, lambda: idx.query(qn, 10)),
        (lshk.LshkError, lambda: iv.query(qn, 10)),
        (lshk.LshkError, lambda: iv.query(q, 10, nprobe=0)),
        (lshk.LshkError, lambda: iv.query(q, 10, reach=-1.0)),
        (ValueError, lambda: lshk.Index(w, b[:-1])),
        (TypeError, lambda: lshk.Index(w.astype(np.float16))),
        (ValueError, lambda: lshk.Index(w, storage="f64")),
        (lshk.LshkError, lambda: lshk.Index(w, storage=17)),
        (OverflowError, lambda: idx.query(q, -1)),
        (ValueError, lambda: idx.train_labels(q, np.array([0, 1], np.uint64), np.array([1], np.uint32))),
        (lshk.LshkError, lambda: idx.train_labels(q, np.array([0] * len(q) + [1], np.uint64),
                                                   np.array([999999], np.uint32))),
        (ValueError, lambda: idx.train_labels(q, np.arange(len(q) + 1), np.arange(len(q)) - 1)),
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
    assert idx.label_info() is None
    assert not (tmp_path / "no").exists()


def test_progress_callback(layer):
    w, b, _ = layer
    calls = []
    lshk.Index(w, b, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (len(w), len(w))

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
ivf = lshk.Ivf(w, nlist=4)
graph = lshk.Index(w, family="graph", m=8, ef_construction=20)
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
calls = {
    "Ivf.query 1-D": lambda: ivf.query(w[0], k=2**30),
    "Ivf.query 2-D": lambda: ivf.query(q, k=2**31 - 1),
    "Index.query 1-D": lambda: index.query(w[0], k=2**31 - 1),
    "Index.query 2-D stats": lambda: index.query(q, 2**31 - 1, stats=True),
    "graph Index.query": lambda: graph.query(q, 2**31 - 1, ef=10),
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
    -inf, bit for bit as lshk_*_query; not a ValueError."""
    w, b, q = layer
    w, b = w[:20], b[:20]
    k = 25
    pad = np.uint32(2**32 - 1)
    exact = np.argsort(-(q @ w.T + b), axis=1, kind="stable")
    idx = lshk.Index(w, b, bits_per_table=2, tables=40)  # every row a candidate
    h = capi.index_build(w, b, bits_per_table=2, tables=40)
    iv = lshk.Ivf(w, b, nlist=2)
    hi = capi.ivf_build(w, b, nlist=2)
    try:
        same(idx.query(q, k), capi.index_query(h, q, k))
        same(iv.query(q, k, nprobe=2, reach=0.0, rerank=20),
             capi.ivf_query(hi, q, k, nprobe=2, reach=0.0, rerank=20))
    finally:
        capi.index_free(h)
        capi.ivf_free(hi)
    graph = lshk.Index(w, b, family="graph", m=8)
    for ids, sc in (idx.query(q, k), iv.query(q, k, nprobe=2, reach=0.0, rerank=20), graph.query(q, k, ef=40)):
        assert ids.shape == sc.shape == (len(q), k)
        assert np.array_equal(ids[:, :20], exact)
        assert np.all(ids[:, 20:] == pad) and np.all(sc[:, 20:] == -np.inf)
    ids, sc = lshk.topk(np.arange(5, dtype=np.float32), 8)
    assert ids.tolist() == [4, 3, 2, 1, 0] + [2**32 - 1] * 3
    assert sc.tolist() == [4, 3, 2, 1, 0] + [-np.inf] * 3


# ---------------------------------------------------------------- defaults that depend on other arguments

def test_dwta_default_bits_per_table(layer):
    """family='dwta' without bits_per_table: 12 // log2(bin_size) bins per
    table (the C default K = 12 breaks DWTA's K*log2(B) <= 32)."""
    w, b, q = layer
    idx = lshk.Index(w, b, family="dwta")
    assert idx.family == "dwta" and idx.shape[2] == 4 and idx.dwta().shape[3] == 8
    same(idx.query(q, 10), lshk.Index(w, b, family="dwta", bits_per_table=4).query(q, 10))
    for bin_size, bins in ((2, 12), (4, 6), (16, 3), (32, 2), (256, 1)):
        assert lshk.Index(w, b, family="dwta", bin_size=bin_size).shape[2] == bins
    assert lshk.Index(w, b).shape[2] == 12  # SimHash keeps the C default
    with pytest.raises(lshk.LshkError) as e:  # a given K is passed through
        lshk.Index(w, b, family="dwta", bits_per_table=12)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    with pytest.raises(lshk.LshkError) as e:  # a bad bin size is the C API's to report
        lshk.Index(w, b, family="dwta", bin_size=3)
    assert "bin_size" in e.value.message


def test_ivf_borrow_default_follows_codes(capi, layer, tmp_path):
    """borrow=None borrows W unless codes='none' (which cannot borrow)."""
    w, b, q = layer
    iv = lshk.Ivf(w, b, codes="none")
    h = capi.ivf_build(w, b, codes="none", borrow=0)
    try:
        same(iv.query(q, 10), capi.ivf_query(h, q, 10))
    finally:
        capi.ivf_free(h)
    assert iv.memory_bytes() >= w.nbytes  # its own copy of the rows
    iv.save(tmp_path / "none.ivf")
    same(lshk.Ivf.load(tmp_path / "none.ivf").query(q, 10), iv.query(q, 10))  # no W needed
    with pytest.raises(lshk.LshkError) as e:
        lshk.Ivf(w, b, codes="none", borrow=True)
    assert e.value.status_name == "LSHK_STATUS_INVALID_ARGUMENT"
    # other codes still borrow by default
    assert lshk.Ivf(w, b).memory_bytes() < lshk.Ivf(w, b, borrow=False).memory_bytes() - w.nbytes // 2
    lshk.Ivf(w, b, codes="i8").save(tmp_path / "i8.ivf")
    with pytest.raises(lshk.LshkError):
        lshk.Ivf.load(tmp_path / "i8.ivf")  # borrowed: W needed


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
    idx = lshk.Index(w, b, storage="borrowed_f32", bits_per_table=9, tables=12)
    good = tmp_path / "good.lshk"
    idx.save(good)
    same_bytes = tmp_path / "same.lshk"
    same_bytes.write_bytes(good.read_bytes())
    patch_section(same_bytes, "PARAMS", lambda d: None)
    assert same_bytes.read_bytes() == good.read_bytes()  # the checksums are lshk's
    iv = lshk.Ivf(w, b)
    iv.save(tmp_path / "good.ivf")

    def zero(lo, hi):
        def patch(d):
            d[lo:hi] = bytes(hi - lo)
        return patch

    cases = [
        ("rows0.lshk", "PARAMS", zero(48, 64)),  # rows = dim = 0
        ("version.lshk", "PARAMS", lambda d: d.__setitem__(slice(0, 4), (99).to_bytes(4, "little"))),
        ("rows0.ivf", "IVFPARAM", zero(4, 12)),
    ]
    for name, tag, patch in cases:
        path = tmp_path / name
        path.write_bytes((tmp_path / ("good" + path.suffix)).read_bytes())
        patch_section(path, tag, patch)
        for load in ((lambda: lshk.Index.load(path, borrowed_w=w)) if tag == "PARAMS" else
                     (lambda: lshk.Ivf.load(path, w)),
                     (lambda: lshk.Index.load(path)) if tag == "PARAMS" else (lambda: lshk.Ivf.load(path))):
            with pytest.raises(lshk.LshkError) as e:
                load()
            assert e.value.status_name == "LSHK_STATUS_BAD_FILE_FORMAT", (name, e.value.message)
    # a damaged header (checksum not matching) is the loader's to report too
    b2 = bytearray(good.read_bytes())
    b2[40] ^= 1
    (tmp_path / "header.lshk").write_bytes(bytes(b2))
    with pytest.raises(lshk.LshkError) as e:
        lshk.Index.load(tmp_path / "header.lshk", borrowed_w=w[:10])
    assert e.value.status_name == "LSHK_STATUS_BAD_FILE_FORMAT"
    # a sound file and a W of another shape: ValueError, and W is not read
    with pytest.raises(ValueError):
        lshk.Index.load(good, borrowed_w=w[:10])
    with pytest.raises(ValueError):
        lshk.Ivf.load(tmp_path / "good.ivf", w[:, :40])
    # a file that stores its weights refuses any W
    lshk.Index(w, b, storage="f32").save(tmp_path / "stored.lshk")
    with pytest.raises(ValueError):
        lshk.Index.load(tmp_path / "stored.lshk", borrowed_w=w[:10])
    same(lshk.Index.load(good, borrowed_w=w).query(q, 10), idx.query(q, 10))


# ---------------------------------------------------------------- threads

def test_threads_querying_one_index_agree(layer):
    w, b, _ = layer
    rng = np.random.default_rng(11)
    qs = rng.standard_normal((400, 48)).astype(np.float32)
    idx = lshk.Index(w, b, storage="i8")
    iv = lshk.Ivf(w, b)
    ref = [(idx.query(x, 10), iv.query(x, 10)) for x in qs]
    ref_batch = idx.query(qs, 10), iv.query(qs, 10)
    errors = []

    def worker(seed):
        order = np.random.default_rng(seed).permutation(len(qs))
        try:
            for _ in range(3):
                for i in order:
                    a, c = idx.query(qs[i], 10), iv.query(qs[i], 10)
                    same(a, ref[i][0])
                    same(c, ref[i][1])
                same(idx.query(qs, 10), ref_batch[0])
                same(iv.query(qs, 10), ref_batch[1])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_training_while_querying_is_refused(layer):
    """train_* need exclusive access: a query running in another thread
    holds a shared borrow, so training meanwhile raises instead of racing."""
    w, b, q = layer
    idx = lshk.Index(w, b, bits_per_table=10, tables=8)
    big = np.random.default_rng(0).standard_normal((20000, 48)).astype(np.float32)
    started = threading.Event()
    result = {}

    def run():
        started.set()
        result["q"] = idx.query(big, 10)

    t = threading.Thread(target=run)
    t.start()
    started.wait()
    try:
        idx.train_labels(q, np.arange(len(q) + 1), np.arange(len(q)))
        outcome = "trained"  # the query had already finished
    except RuntimeError:
        outcome = "refused"
    t.join()
    assert outcome in ("trained", "refused")
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
    IVF file (valid checksums) is refused at load."""
    w, b, q = layer
    for codes in ("i8", "pq4", "pq4_i8", "none"):
        with pytest.raises(lshk.LshkError) as e:
            lshk.Ivf(w * np.float32(3e37), codes=codes)
        assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
        iv = lshk.Ivf(w, b, codes=codes)
        with pytest.raises(lshk.LshkError) as e:
            iv.query(q[0] * np.float32(1e37), k=10)
        assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
        ids, _ = iv.query(q[0] * np.float32(1e3), k=10)
        assert (ids < len(w)).all()
    idx = lshk.Index(w, b)
    with pytest.raises(lshk.LshkError) as e:
        idx.query(q[0] * np.float32(1e37), k=10)
    assert e.value.status_name == "LSHK_STATUS_NON_FINITE"
    lshk.Ivf(w, b, codes="pq4", borrow=False).save(tmp_path / "good.ivf")
    for tag in ("CBIAS", "LSPREAD", "PQCENT"):
        path = tmp_path / f"{tag}.ivf"
        path.write_bytes((tmp_path / "good.ivf").read_bytes())
        patch_section(path, tag, lambda d: d.__setitem__(slice(0, 4), np.float32(np.nan).tobytes()))
        with pytest.raises(lshk.LshkError) as e:
            lshk.Ivf.load(path)
        assert e.value.status_name == "LSHK_STATUS_BAD_FILE_FORMAT", tag


def test_fifo_is_refused_by_load_and_save(tmp_path, layer):
    """A FIFO given to a load fails at once (it used to block); a save never
    replaces it."""
    w, b, _ = layer
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    iv = lshk.Ivf(w, b)
    for call in (lambda: lshk.Ivf.load(fifo), lambda: lshk.Index.load(fifo), lambda: iv.save(fifo)):
        t0 = time.monotonic()
        with pytest.raises(lshk.LshkError) as e:
            call()
        assert e.value.status_name == "LSHK_STATUS_IO_ERROR"
        assert time.monotonic() - t0 < 5
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
