#!/usr/bin/env python3
"""lshk against the ANN / MIPS libraries a user would pick instead (FAISS,
ScaNN, hnswlib), one process, ONE thread per query, recall@10 against the
exact top-10 of W q + b versus microseconds per query, at B = 1 (queries one
at a time) and B = 64 (per query, one call per 64 queries).

Run it through benches/peers/run_ann.sh (makes the venv, builds liblshk.so,
exports W1). Directly:

    python ann_peers.py --lib target/release/liblshk.so --w1 target/w1-npy \
        --w2v ../shared/data/w2v-gutenberg --out ann_results.md

Workloads:
  W1   the demo's synthetic layer (examples/export_npy.rs writes W.npy, b.npy,
       Q.npy: structured_layer(670091, 128, 4096, 20240601) and
       queries_near_labels(.., seed 7)); bias.
  w2v  w2v-gutenberg output layer (35,388 x 128, no bias); queries are the
       input embeddings of the centre words of the first held-out pairs.
Peers index [w, b] and query [q, 1] (inner product); lshk gets W, b and q.

"lshk IVF weighted" is lshk's k-means weighted by training queries (the
IVF source's p.ivf.row_weights): the exact top-10 hits of TRAIN queries
that are neither evaluated nor used for calibration (w2v: the first
training pairs' centre words; W1 and .npy layers: the queries after the
calibration ones, when Q.npy has them). No peer uses queries to build, so those rows answer a
different question: what a user with query logs gets.
"""
import argparse
import ctypes
import gc
import math
import os
import platform
import shutil
import sys
import tempfile
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

import lshk_ctypes as lc  # noqa: E402  (benches/peers/lshk_ctypes.py)

K = 10
BATCH = 64


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- data


# Queries after the evaluated ones that lshk_index_calibrate may use (the
# "lshk IVF calibrated" rows: parameters chosen on these, timed on Q).
CAL = 500
# Training queries (w2v: the centre words of the first TRAIN training pairs;
# an .npy layer or W1: the queries after the calibration ones) for the
# "lshk IVF weighted" rows: k-means weighted by the training queries' exact
# top-10 hits (p.ivf.row_weights). Never the evaluated queries.
TRAIN = 20000
# w_r = 1 + ALPHA * rows * n_r / N (lshk::ivf::row_weights_from_hits; the
# value docs/ivf.md recommends).
ALPHA = 4.0


class Workload:
    def __init__(self, name, W, b, Q, Qcal=None, Qtrain=None):
        self.name, self.W, self.b, self.Q = name, W, b, Q
        self.Qcal = Qcal if Qcal is not None and len(Qcal) else None
        self.Qtrain = Qtrain if Qtrain is not None and len(Qtrain) >= 1000 else None
        self.rows, self.dim = W.shape
        self.nq = Q.shape[0]
        if b is not None:  # peers: [w, b] . [q, 1]
            self.X = np.ascontiguousarray(np.hstack([W, b[:, None]]), dtype=np.float32)
            self.QX = np.ascontiguousarray(np.hstack([Q, np.ones((self.nq, 1), np.float32)]))
        else:
            self.X, self.QX = W, Q
        self.gt = None


def load_w1(d, nq):
    W = np.ascontiguousarray(np.load(os.path.join(d, "W.npy")), dtype=np.float32)
    b = np.ascontiguousarray(np.load(os.path.join(d, "b.npy")).reshape(-1), dtype=np.float32)
    Qa = np.load(os.path.join(d, "Q.npy"))
    Q = np.ascontiguousarray(Qa[:nq], dtype=np.float32)
    Qcal = np.ascontiguousarray(Qa[nq:nq + CAL], dtype=np.float32)
    Qtr = np.ascontiguousarray(Qa[nq + CAL:nq + CAL + TRAIN], dtype=np.float32)
    return Workload(f"W1 synthetic {W.shape[0]:,} x {W.shape[1]} + bias", W, b, Q, Qcal, Qtr)


def load_w2v(d, nq):
    dim = 128
    W = np.fromfile(os.path.join(d, "output_layer.f32"), np.float32).reshape(-1, dim)
    emb = np.fromfile(os.path.join(d, "input_embeddings.f32"), np.float32).reshape(-1, dim)
    pairs = np.fromfile(os.path.join(d, "heldout_pairs.i32"), np.int32).reshape(-1, 2)
    Q = np.ascontiguousarray(emb[pairs[:nq, 0]])
    Qcal = np.ascontiguousarray(emb[pairs[nq:nq + CAL, 0]])
    tp = os.path.join(d, "train_pairs.i32")
    Qtr = None
    if os.path.exists(tp):
        tr = np.fromfile(tp, np.int32, count=2 * TRAIN).reshape(-1, 2)
        Qtr = np.ascontiguousarray(emb[tr[:, 0]])
    return Workload(f"w2v-gutenberg {W.shape[0]:,} x {dim}, no bias", W, None, Q, Qcal, Qtr)


def load_npy(d, nq):
    """A layer given as DIR/W.npy, DIR/Q.npy, optional DIR/b.npy and
    DIR/name.txt (e.g. minilm_export.py's 30,522 x 384 vocabulary)."""
    W = np.ascontiguousarray(np.load(os.path.join(d, "W.npy")), dtype=np.float32)
    bp = os.path.join(d, "b.npy")
    b = np.ascontiguousarray(np.load(bp).reshape(-1), dtype=np.float32) if os.path.exists(bp) else None
    Qa = np.load(os.path.join(d, "Q.npy"))
    Q = np.ascontiguousarray(Qa[:nq], dtype=np.float32)
    Qcal = np.ascontiguousarray(Qa[nq:nq + CAL], dtype=np.float32)
    Qtr = np.ascontiguousarray(Qa[nq + CAL:nq + CAL + TRAIN], dtype=np.float32)
    np_ = os.path.join(d, "name.txt")
    name = open(np_).read().strip() if os.path.exists(np_) else f"{d} {W.shape[0]:,} x {W.shape[1]}"
    return Workload(name, W, b, Q, Qcal, Qtr)


def exact_topk(wl, bs=64, Q=None):
    """Exact top-10 ids of W q + b for the rows of Q (default: the
    evaluated queries), by numpy (batched)."""
    Q = wl.Q if Q is None else Q
    out = np.empty((len(Q), K), np.int64)
    for i in range(0, len(Q), bs):
        S = Q[i:i + bs] @ wl.W.T
        if wl.b is not None:
            S += wl.b
        p = np.argpartition(-S, K, axis=1)[:, :K]
        ps = np.take_along_axis(S, p, 1)
        out[i:i + bs] = np.take_along_axis(p, np.argsort(-ps, axis=1, kind="stable"), 1)
    return out


def topk_rows(r):
    """Ids as an (n, K) int64 array; a search that found fewer than K rows
    (ScaNN's tree with few leaves) is padded with -1."""
    a = np.asarray(r, np.int64)
    a = a.reshape(1, -1) if a.ndim == 1 else a
    if a.shape[1] < K:
        a = np.hstack([a, np.full((a.shape[0], K - a.shape[1]), -1, np.int64)])
    return a[:, :K]


def recall10(ids, gt):
    n = len(ids)
    return sum(len(set(ids[i, :K].tolist()) & set(gt[i].tolist())) for i in range(n)) / (K * n)


# ---------------------------------------------------------------- timing


class Harness:
    """Runs search points and keeps every (peer, config, knob, recall, us) row."""

    def __init__(self, wl, passes, slow_s):
        self.wl, self.passes, self.slow_s = wl, passes, slow_s
        self.points = []  # dicts
        self.builds = []  # dicts
        self.limit_us = None  # stop sweeps slower than exact brute force

    def _timed(self, fn, n):
        ts, res = [], None
        for p in range(self.passes):
            t = time.perf_counter()
            res = fn(n)
            ts.append(time.perf_counter() - t)
            if ts[0] > self.slow_s:  # too slow to repeat: one pass
                break
        return res, float(np.median(ts)) * 1e6 / n, len(ts)

    def point(self, peer, config, knob, one, batch, nq=None, extra_fn=None):
        """one(i) -> ids of query i; batch(i0, i1) -> ids (i1 - i0, >= K).
        Returns the B = 1 recall."""
        n = nq or self.wl.nq
        gt = self.wl.gt[:n]

        def run1(n):
            return [one(i) for i in range(n)]

        def run64(n):
            return [batch(i, min(i + BATCH, n)) for i in range(0, n, BATCH)]

        if extra_fn is not None:
            extra_fn(reset=True)  # before the warm-up: it also takes the point's knobs
        one(0)  # warm-up
        r1, us1, p1 = self._timed(run1, n)
        ids1 = np.concatenate([topk_rows(r) for r in r1])
        rec1 = recall10(ids1, gt)
        rec64, us64 = None, None
        if batch is not None:
            batch(0, min(BATCH, n))
            r64, us64, _ = self._timed(run64, n)
            ids64 = np.concatenate([topk_rows(r) for r in r64])
            rec64 = recall10(ids64, gt)
        extra = ""
        if extra_fn is not None:
            # The counts come from one more B = 1 pass, untimed: collecting
            # them (Python work per call) stays out of the timed passes.
            extra_fn(collect=True)
            run1(n)
            extra = extra_fn()
        row = dict(peer=peer, config=config, knob=knob, recall=rec1, us1=us1,
                   recall64=rec64, us64=us64, nq=n, passes=p1, extra=extra)
        self.points.append(row)
        log(f"  {peer:22s} {config:28s} {knob:26s} recall {rec1:.3f} "
            f"{us1:9.1f} us B=1  " + (f"{us64:9.1f} us B=64" if us64 else "") +
            (f"  {extra}" if extra else ""))
        return rec1, us1

    def sweep(self, peer, config, knobs, make, stop=0.999, nq=None, plateau=False):
        """knobs: list of (label, setter); make() -> (one, batch, extra_fn).
        Stops at recall >= stop, when slower than exact brute force, when
        five points in a row (the grids step by 1.2-1.33x) gained < 0.001 over the best before them (a
        recall ceiling, e.g. no re-ranking), or (plateau=True) at the first
        point that gained < 0.001."""
        recs = []
        for label, setter in knobs:
            setter()
            one, batch, extra = make()
            rec, us = self.point(peer, config, label, one, batch, nq=nq, extra_fn=extra)
            if self.stop_here(recs, rec, us, stop) or (plateau and recs[-2:-1] and rec < recs[-2] + 0.001):
                break

    def stop_here(self, recs, rec, us, stop=0.999):
        """The sweeps' stop rule (see sweep); appends rec to recs."""
        recs.append(rec)
        stalled = len(recs) > 5 and max(recs[-5:]) < max(recs[:-5]) + 0.001
        return rec >= stop or bool(self.limit_us and us > self.limit_us) or stalled

    def build(self, peer, config, secs, mem, how):
        self.builds.append(dict(peer=peer, config=config, secs=secs, mem=mem, how=how))
        log(f"  build {peer} {config}: {secs:.2f} s, {mem / 2**20:.1f} MiB ({how})")


def nowt():
    return time.perf_counter()


def dir_bytes(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


# ---------------------------------------------------------------- exact


def run_exact(h, faiss):
    wl = h.wl
    n = wl.nq if wl.rows * wl.dim <= 16 << 20 else min(wl.nq, 64)
    W, b, Q = wl.W, wl.b, wl.Q

    def one(i):
        s = W @ Q[i]
        if b is not None:
            s += b
        p = np.argpartition(-s, K)[:K]
        return p[np.argsort(-s[p])]

    def batch(i0, i1):
        S = Q[i0:i1] @ W.T
        if b is not None:
            S += b
        p = np.argpartition(-S, K, axis=1)[:, :K]
        return np.take_along_axis(p, np.argsort(-np.take_along_axis(S, p, 1), axis=1), 1)

    _, us = h.point("exact numpy", "matvec / matmul", "-", one, batch, nq=n)
    h.limit_us = us
    if faiss is not None:
        idx = faiss.IndexFlatIP(wl.X.shape[1])
        idx.add(wl.X)
        D1, I1 = np.empty((1, K), np.float32), np.empty((1, K), np.int64)
        QX = wl.QX
        h.point("exact FAISS", "IndexFlatIP", "-",
                lambda i: idx.search(QX[i:i + 1], K, D=D1, I=I1)[1][0].copy(),
                lambda i0, i1: idx.search(QX[i0:i1], K)[1], nq=n)
        h.limit_us = min(h.limit_us, h.points[-1]["us1"])
        del idx


# ---------------------------------------------------------------- FAISS


def faiss_search_fns(idx, QX):
    D1, I1 = np.empty((1, K), np.float32), np.empty((1, K), np.int64)
    rows = [QX[i:i + 1] for i in range(len(QX))]

    def one(i):
        idx.search(rows[i], K, D=D1, I=I1)
        return I1[0].copy()

    def batch(i0, i1):
        return idx.search(QX[i0:i1], K)[1]

    return one, batch


GRID = [1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256, 320,
        384, 512, 640, 768, 1024, 1280, 1536, 2048, 2560, 3072, 4096, 5120, 6144, 8192]


def probe_list(nlist):
    """Probes 1, 2, 3, 4, 6, 8, 10, 12, ... (steps of 1.2-1.33x from 8 on) up to nlist; the
    sweeps stop at recall 0.999 or once slower than exact brute force (w2v
    needs hundreds of lists)."""
    return [g for g in GRID if g <= nlist]


def faiss_mem(faiss, idx):
    return len(faiss.serialize_index(idx))


def run_faiss(h, faiss, nlists, pq_nlist, build_threads, train_per_list):
    wl = h.wl
    # FAISS gets [w, b] (and [q, 1]) padded with a zero column to an even
    # width: PQ below needs it (2 dims per sub-quantizer); scores unchanged.
    X, QX = wl.X, wl.QX
    if X.shape[1] % 2:
        X = np.ascontiguousarray(np.hstack([X, np.zeros((len(X), 1), np.float32)]))
        QX = np.ascontiguousarray(np.hstack([QX, np.zeros((len(QX), 1), np.float32)]))
    d = X.shape[1]
    quant, quant_secs = None, 0.0
    for nlist in nlists:
        faiss.omp_set_num_threads(build_threads)
        t = nowt()
        idx = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
        idx.cp.max_points_per_centroid = train_per_list
        idx.train(X)
        t_train = nowt() - t
        idx.add(X)
        secs = nowt() - t
        faiss.omp_set_num_threads(1)
        cfg = f"nlist={nlist}"
        h.build("FAISS IVFFlat", cfg, secs, faiss_mem(faiss, idx),
                f"serialize_index; k-means {t_train:.1f} s on <= {train_per_list} rows per list")
        if nlist == pq_nlist:
            quant, quant_secs = faiss.clone_index(idx.quantizer), t_train
        one, batch = faiss_search_fns(idx, QX)

        def setter(p):
            return lambda: setattr(idx, "nprobe", p)
        h.sweep("FAISS IVFFlat", cfg, [(f"nprobe={p}", setter(p)) for p in probe_list(nlist)],
                lambda: (one, batch, None))
        del idx, one, batch
        gc.collect()

    # IVF-PQ fast-scan (4-bit, 2 dims per sub-quantizer) + exact refine, on
    # the coarse quantizer trained above for IVFFlat nlist = pq_nlist.
    nlist = pq_nlist
    fac = f"IVF{nlist},PQ{d // 2}x4fs,RFlat"
    faiss.omp_set_num_threads(build_threads)
    t = nowt()
    base = faiss.IndexIVFPQFastScan(quant, d, nlist, d // 2, 4, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(1)
    base.train(X[np.sort(rng.choice(len(X), min(len(X), 65536), replace=False))])
    idx = faiss.IndexRefineFlat(base)
    idx.add(X)
    secs = nowt() - t
    faiss.omp_set_num_threads(1)
    h.build("FAISS IVFPQfs+refine", fac, secs + quant_secs, faiss_mem(faiss, idx),
            f"serialize_index; coarse k-means shared with IVFFlat nlist={nlist} ({quant_secs:.1f} s, "
            "counted), PQ trained on 65,536 rows")
    one, batch = faiss_search_fns(idx, QX)
    for p in probe_list(nlist):
        base.nprobe = p

        def setter(kf):
            return lambda: setattr(idx, "k_factor", kf)
        h.sweep("FAISS IVFPQfs+refine", f"nlist={nlist} nprobe={p}",
                [(f"k_factor={kf}", setter(kf)) for kf in [1, 2, 4, 8, 16, 64]],
                lambda: (one, batch, None), plateau=True)
        best = max(pt["recall"] for pt in h.points if pt["config"] == f"nlist={nlist} nprobe={p}")
        if best >= 0.999 or (h.limit_us and h.points[-1]["us1"] > h.limit_us):
            break
    del idx, base, quant, one, batch
    gc.collect()

    # HNSW
    faiss.omp_set_num_threads(build_threads)
    t = nowt()
    idx = faiss.IndexHNSWFlat(d, 32, faiss.METRIC_INNER_PRODUCT)
    idx.add(X)
    secs = nowt() - t
    faiss.omp_set_num_threads(1)
    h.build("FAISS HNSW", "M=32 efConstruction=40", secs, faiss_mem(faiss, idx), "serialize_index")
    one, batch = faiss_search_fns(idx, QX)

    def setef(e):
        return lambda: setattr(idx.hnsw, "efSearch", e)
    h.sweep("FAISS HNSW", "M=32", [(f"efSearch={e}", setef(e)) for e in probe_list(768) if e >= 12],
            lambda: (one, batch, None))
    del idx, one, batch
    gc.collect()


# ---------------------------------------------------------------- hnswlib


def run_hnswlib(h, hnswlib, build_threads, efc):
    wl = h.wl
    X, QX = wl.X, wl.QX
    t = nowt()
    idx = hnswlib.Index(space="ip", dim=X.shape[1])
    idx.init_index(max_elements=len(X), ef_construction=efc, M=32, random_seed=1)
    idx.add_items(X, num_threads=build_threads)
    secs = nowt() - t
    idx.set_num_threads(1)
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "h.bin")
        idx.save_index(p)
        mem = os.path.getsize(p)
    h.build("hnswlib", f"M=32 ef_construction={efc}", secs, mem, "save_index file size")
    rows = [QX[i] for i in range(len(QX))]

    def one(i):
        return idx.knn_query(rows[i], k=K, num_threads=1)[0][0]

    def batch(i0, i1):
        return idx.knn_query(QX[i0:i1], k=K, num_threads=1)[0]

    def setef(e):
        return lambda: idx.set_ef(e)
    h.sweep("hnswlib", "M=32", [(f"ef={e}", setef(e)) for e in [10] + [g for g in probe_list(768) if g >= 16]],
            lambda: (one, batch, None))
    del idx
    gc.collect()


# ---------------------------------------------------------------- ScaNN


def run_scann(h, scann, build_threads):
    wl = h.wl
    X, QX = wl.X, wl.QX
    n = len(X)
    rows = [QX[i] for i in range(len(QX))]

    def mem_of(s):
        td = tempfile.mkdtemp()
        try:
            s.serialize(td)
            return dir_bytes(td)
        finally:
            shutil.rmtree(td, ignore_errors=True)

    # Brute-force AH + exact reorder.
    rmax = 4000
    t = nowt()
    s = (scann.scann_ops_pybind.builder(X, K, "dot_product")
         .score_ah(2, anisotropic_quantization_threshold=0.2).reorder(rmax)
         .set_n_training_threads(build_threads).build())
    secs = nowt() - t
    s.set_num_threads(1)
    h.build("ScaNN AH brute", f"AH 2 dims/block, reorder<={rmax}", secs, mem_of(s), "serialize() dir size")
    recs = []
    # Steps of 1.2-1.33x, as probe_list's and lshk's reach grid.
    for r in [20, 25, 30, 40, 50, 60, 75, 100, 125, 150, 200, 250, 300, 400, 500, 625, 750, 1000,
              1250, 1500, 2000, 2500, 3000, 4000]:
        def one(i, r=r):
            return s.search(rows[i], final_num_neighbors=K, pre_reorder_num_neighbors=r)[0]

        def batch(i0, i1, r=r):
            return s.search_batched(QX[i0:i1], final_num_neighbors=K, pre_reorder_num_neighbors=r)[0]
        rec, us = h.point("ScaNN AH brute", "AH 2/blk, t=0.2", f"reorder={r}", one, batch)
        if h.stop_here(recs, rec, us):
            break
    del s
    gc.collect()

    # Tree (k-means leaves) + AH + reorder.
    leaves = int(round(2 * math.sqrt(n)))
    tss = min(n, 250_000)  # as ScaNN's own example (1.2M rows); 100K lost recall on W1
    t = nowt()
    s = (scann.scann_ops_pybind.builder(X, K, "dot_product")
         .tree(num_leaves=leaves, num_leaves_to_search=max(1, leaves // 10), training_sample_size=tss)
         .score_ah(2, anisotropic_quantization_threshold=0.2).reorder(400)
         .set_n_training_threads(build_threads).build())
    secs = nowt() - t
    s.set_num_threads(1)
    h.build("ScaNN tree+AH", f"leaves={leaves} (2 sqrt n), sample {tss}", secs, mem_of(s),
            "serialize() dir size")
    for r in [100, 400]:  # 400 only when 100 does not reach 0.99
        recs = []
        for lv in probe_list(leaves):
            def one(i, r=r, lv=lv):
                return s.search(rows[i], final_num_neighbors=K, pre_reorder_num_neighbors=r,
                                leaves_to_search=lv)[0]

            def batch(i0, i1, r=r, lv=lv):
                return s.search_batched(QX[i0:i1], final_num_neighbors=K, pre_reorder_num_neighbors=r,
                                        leaves_to_search=lv)[0]
            rec, us = h.point("ScaNN tree+AH", f"leaves={leaves} reorder={r}", f"search={lv}", one, batch)
            if h.stop_here(recs, rec, us):
                break
        if max(p["recall"] for p in h.points if p["peer"] == "ScaNN tree+AH") >= 0.99:
            break
    del s
    gc.collect()


# ---------------------------------------------------------------- lshk (ctypes over the C ABI)


STORAGE = {"f32": lc.STORAGE_BORROWED_F32, "bf16": lc.STORAGE_BF16, "f16": lc.STORAGE_F16,
           "i8": lc.STORAGE_I8}  # f32 = W borrowed, not copied
vp, sz = lc.vp, lc.sz
load_lshk = lc.load_lshk
lshk_check = lc.check


# The Python package (`pip install ./python`), through which lshk's queries
# are timed as a user of lshk in Python calls them (lshk.Index.query, as
# FAISS, ScaNN and hnswlib are called through theirs); None = ctypes over
# liblshk.so for the timed calls too (--lshk-api ctypes, or no package).
PKG = None


def lshk_pkg_index(W, b, **kw):
    """The Python package's lshk.Index over W and b, built with the keyword
    arguments kw: the same index as the C API's build with the same knobs
    (seeded; lshk_query_fns checks that both answer alike), as a user of
    the package builds it. None without the package."""
    return None if PKG is None else PKG.Index(W, b, **kw)


def lshk_query_fns(call, Q, pidx=None, knobs=None, collecting=lambda: False):
    """call(qptr, nq, ids_ptr, sc_ptr) -> status, through ctypes. With
    pidx (lshk_pkg_index) the calls go through the package instead, with
    the knobs() (keyword arguments of lshk.Index.query) read at refresh()
    (Harness.point's reset, before each point), except while collecting()
    (the untimed pass that reads lshk_query_stats through ctypes). Returns
    one, batch, refresh."""
    d = Q.shape[1]
    ids = np.empty((BATCH, K), np.uint32)
    sc = np.empty((BATCH, K), np.float32)
    base, step = Q.ctypes.data, d * 4
    ip, sp = ids.ctypes.data, sc.ctypes.data

    def c_one(i):
        call(base + i * step, 1, ip, sp)
        return ids[0].copy()

    def c_batch(i0, i1):
        call(base + i0 * step, i1 - i0, ip, sp)
        return ids[:i1 - i0].astype(np.int64)

    if pidx is None:
        c_one.keep = (ids, sc, Q)  # the pointers above point into these
        return c_one, c_batch, lambda: None
    kw = {}
    rows = [Q[i] for i in range(len(Q))]
    query = pidx.query

    def refresh():
        kw.clear()
        kw.update(knobs())
        # Both paths run the same code: check that they agree.
        a = query(Q[:BATCH], K, **kw)[0]
        b = c_batch(0, min(BATCH, len(Q)))
        if not np.array_equal(a.astype(np.int64), b):
            raise RuntimeError(f"lshk package and ctypes answers differ at {kw}")

    def one(i):
        if collecting():
            return c_one(i)
        return query(rows[i], K, **kw)[0]

    def batch(i0, i1):
        return query(Q[i0:i1], K, **kw)[0].astype(np.int64)

    one.keep = (ids, sc, Q, rows, pidx)
    return one, batch, refresh


def simhash_grid(wl):
    """(storage, K, L, [probes]) per workload: the demo default first."""
    if wl.rows > 200_000:  # W1: the demo default K=16 L=24 probes 4
        return [("f32", 16, 24, [0, 1, 2, 3, 4, 6, 8, 12, 16]), ("f32", 18, 32, [1, 2, 3, 4, 6, 8, 12, 16]),
                ("bf16", 16, 24, [2, 3, 4, 6, 8, 12, 16]), ("bf16", 18, 32, [2, 3, 4, 6, 8, 12, 16])]
    return [("f32", 16, 24, [4]), ("f32", 8, 32, [0, 4, 8, 16, 24, 32, 48]),
            ("f32", 10, 64, [8, 16, 32, 48, 64, 96]), ("bf16", 10, 64, [16, 32, 48, 64, 96]),
            ("bf16", 10, 128, [32, 48, 64, 96, 128])]


def run_lshk_simhash(h, lib, build_threads):
    wl = h.wl
    W, b, Q = wl.W, wl.b, wl.Q
    bptr = b.ctypes.data if b is not None else None
    for storage, kb, L, probes in simhash_grid(wl):
        p = lib.lshk_index_params_default()  # the SimHash source
        p.lsh.bits_per_table, p.lsh.tables, p.storage = kb, L, STORAGE[storage]
        p.build_threads = build_threads
        h_ = vp()
        t = nowt()
        lshk_check(lib, lib.lshk_index_build(W.ctypes.data, bptr, wl.rows, wl.dim, wl.dim,
                                             ctypes.byref(p), ctypes.byref(h_)), "lshk_index_build")
        secs = nowt() - t
        m = sz()
        lshk_check(lib, lib.lshk_index_memory_bytes(h_, ctypes.byref(m)), "memory")
        cfg = f"K={kb} L={L} {storage}"
        how = "lshk_index_memory_bytes" + (" (+ W borrowed)" if storage == "f32" else "")
        h.build("lshk SimHash", cfg, secs, m.value, how)
        qpar = lib.lshk_query_params_default()
        g = qpar.lsh  # shares qpar's memory: setting g.probes changes qpar
        st = lc.QueryStats()
        st.struct_size = ctypes.sizeof(lc.QueryStats)
        gref, sref = ctypes.byref(qpar), ctypes.byref(st)
        cands = []
        on = [False]  # collecting (Harness.point's untimed pass)

        def call(qp, n, ip, sp):
            r = lib.lshk_index_query(h_, qp, n, wl.dim, K, gref, ip, sp, sref)
            if r:
                lshk_check(lib, r, "lshk_index_query")
            if on[0]:
                cands.append(st.candidates_total / max(st.queries, 1))

        pidx = lshk_pkg_index(W, b, source="simhash", bits_per_table=kb, tables=L,
                              storage="borrowed" if storage == "f32" else storage,
                              build_threads=build_threads)
        one, batch, refresh = lshk_query_fns(call, Q, pidx, lambda: dict(probes=g.probes),
                                             lambda: on[0])

        def setp(pr):
            def f():
                g.probes = pr
            return f
        def extra(reset=False, collect=False):
            if reset or collect:
                cands.clear()
                on[0] = collect
                if reset:
                    refresh()
                return ""
            on[0] = False
            return f"{np.mean(cands):.0f} cand/q ({100 * np.mean(cands) / wl.rows:.1f} % of rows)"
        h.sweep("lshk SimHash", cfg, [(f"probes={pr}", setp(pr)) for pr in probes],
                lambda: (one, batch, extra))
        lshk_check(lib, lib.lshk_index_free(h_), "lshk_index_free")
        gc.collect()


def lshk_nlist(lib, handle):
    """The IVF source's list count (lshk_index_describe)."""
    info = lc.IndexInfo()
    info.struct_size = ctypes.sizeof(lc.IndexInfo)
    lshk_check(lib, lib.lshk_index_describe(handle, ctypes.byref(info)), "lshk_index_describe")
    return info.nlist


def lshk_ivf_index_params(lib, build_threads):
    """Build parameters of the IVF source over the caller's W: BORROWED_F32
    storage, so the lists re-rank from W itself and the index holds no copy
    of it (the memory figures exclude W)."""
    p = lib.lshk_index_params_default()
    p.source = lc.SOURCE_IVF
    p.storage = STORAGE["f32"]
    p.build_threads = build_threads
    return p


def lshk_ivf_query_fns(lib, h_, wl, pidx=None):
    """The IVF query knobs of index h_ (set them before a point; a view into
    the lshk_query_params passed to every call) and its one/batch/extra
    functions for Harness.point: lshk_index_query on the evaluated queries,
    with the per-query IVF counts of lshk_query_stats."""
    qpar = lib.lshk_query_params_default()
    s = qpar.ivf  # shares qpar's memory: setting s.nprobe changes qpar
    st = lc.QueryStats()
    st.struct_size = ctypes.sizeof(lc.QueryStats)
    sref, stref = ctypes.byref(qpar), ctypes.byref(st)
    counts = []
    on = [False]  # collecting (Harness.point's untimed pass)

    def call(qp, n, ip, sp):
        r = lib.lshk_index_query(h_, qp, n, wl.dim, K, sref, ip, sp, stref)
        if r:
            lshk_check(lib, r, "lshk_index_query")
        if on[0]:
            counts.append((st.scanned / n, st.reranked / n, st.lists / n))

    def extra(reset=False, collect=False):
        if reset or collect:
            counts.clear()
            on[0] = collect
            if reset:
                refresh()
            return ""
        on[0] = False
        c = np.mean(counts, axis=0)
        return f"{c[2]:.1f} lists/q, {c[0]:.0f} scanned/q, {c[1]:.0f} re-ranked/q"

    def knobs():
        return dict(nprobe=s.nprobe, rerank=s.rerank, reach=s.reach, refine=s.refine)

    one, batch, refresh = lshk_query_fns(call, wl.Q, pidx, knobs, lambda: on[0])
    one.keep = one.keep + (qpar, st)
    return s, one, batch, extra


def lshk_calibrate(lib, h_, wl, target, build_threads):
    """lshk_index_calibrate on the workload's calibration queries (rerank
    32): the measured lshk_calibration."""
    c = lc.Calibration()
    c.struct_size = ctypes.sizeof(lc.Calibration)
    lshk_check(lib, lib.lshk_index_calibrate(h_, wl.Qcal.ctypes.data, len(wl.Qcal), wl.dim,
                                             K, target, 32, build_threads, ctypes.byref(c)),
               "lshk_index_calibrate")
    return c


def set_ivf(s, src):
    """Copies the IVF query knobs of `src` (an lshk_ivf_query) into `s`."""
    s.nprobe, s.rerank, s.reach, s.refine = src.nprobe, src.rerank, src.reach, src.refine


def run_lshk_ivf(h, lib, build_threads):
    wl = h.wl
    W, b = wl.W, wl.b
    bptr = b.ctypes.data if b is not None else None
    # nlist 0 = automatic (round(4 sqrt(rows))), and a 4x coarser variant;
    # int8 codes (the default), then 4-bit PQ codes (LSHK_IVF_CODES_PQ4 = 2,
    # pq_m = dim / 2), which need a longer re-rank.
    configs = [(1, nl_, [12, 16, 32, 64, 128], [0, 32, 64, 128, 256])
               for nl_ in [0, int(round(math.sqrt(wl.rows)))]]
    if os.environ.get("LSHK_PQ4", "1") != "0":  # LSHK_PQ4=0 skips them
        configs.append((2, 0, [64, 128, 256, 512], [128, 256, 512]))
    # Both codes (LSHK_IVF_CODES_PQ4_I8 = 3): the 4-bit pass, the best 256
    # re-scored from int8 codes (the default refine), then rerank exactly;
    # for wide rows, where the int8 pass costs more per row than the 4-bit
    # one. LSHK_PQ4I8=0 skips them.
    if os.environ.get("LSHK_PQ4I8", "1") != "0":
        configs += [(3, nl_, [16, 32], [16, 32]) for nl_ in [0, int(round(math.sqrt(wl.rows)))]]
    for codes, nlist, adaptive_reranks, fixed_reranks in configs:
        p = lshk_ivf_index_params(lib, build_threads)
        p.ivf.codes = codes
        p.ivf.nlist = nlist
        h_ = vp()
        t = nowt()
        lshk_check(lib, lib.lshk_index_build(W.ctypes.data, bptr, wl.rows, wl.dim, wl.dim,
                                             ctypes.byref(p), ctypes.byref(h_)), "lshk_index_build")
        secs = nowt() - t
        nl = lshk_nlist(lib, h_)
        m = sz()
        lshk_check(lib, lib.lshk_index_memory_bytes(h_, ctypes.byref(m)), "lshk_index_memory_bytes")
        cfg = f"nlist={nl}" + (" (auto)" if nlist == 0 else "") + {2: " PQ4", 3: " PQ4_I8"}.get(codes, "")
        h.build("lshk IVF", cfg, secs, m.value,
                "lshk_index_memory_bytes (+ W borrowed); "
                + {2: "4-bit PQ codes (pq_m = dim / 2), ",
                   3: "4-bit PQ codes (pq_m = dim / 2) and int8 codes, refine 256, "}.get(
                       codes, "defaults: int8 codes, ")
                + f"{p.ivf.iters} k-means iterations, train_rows {p.ivf.train_rows or 'min(rows, 64 nlist)'}")
        pidx = lshk_pkg_index(W, b, source="ivf", storage="borrowed", nlist=nlist,
                              codes={1: "i8", 2: "pq4", 3: "pq4_i8"}[codes],
                              build_threads=build_threads)
        s, one, batch, extra = lshk_ivf_query_fns(lib, h_, wl, pidx)
        # The default: adaptive list selection (reach), no nprobe cap; the
        # sweep is over reach, the one recall knob. Then the fixed-nprobe
        # sweep (reach 0) as FAISS's IVFFlat is run.
        # The library's defaults as they are (one point, always measured).
        h.sweep("lshk IVF", f"{cfg} defaults",
                [(f"reach={s.reach:g} rerank={s.rerank} no cap", lambda: None)],
                lambda: (one, batch, extra))
        # The generalisation rule: no sweep, the parameters chosen by
        # lshk_index_calibrate on CAL other queries of the workload, then
        # timed on the evaluated ones.
        if codes in (1, 3) and nlist == 0 and wl.Qcal is not None:
            for target in (0.95, 0.99):
                t = nowt()
                c = lshk_calibrate(lib, h_, wl, target, build_threads)
                csecs = nowt() - t
                ci = c.query.ivf
                pick = f"reach={ci.reach:g}" if ci.reach > 0 else f"nprobe={ci.nprobe}"
                log(f"  lshk IVF calibrated to {target} on {len(wl.Qcal)} other queries in "
                    f"{csecs:.1f} s: {pick}, sample recall {c.recall:.3f}")

                def setc(ci_=ci):
                    return lambda: set_ivf(s, ci_)
                h.sweep("lshk IVF calibrated", f"{cfg} target={target} ({len(wl.Qcal)} other queries)",
                        [(f"{pick} rerank={ci.rerank}", setc())],
                        lambda: (one, batch, extra))
            set_ivf(s, lib.lshk_query_params_default().ivf)
        for rr in adaptive_reranks:
            s.rerank, s.nprobe = rr, 0xFFFFFFFF

            def setr(r_):
                return lambda: setattr(s, "reach", r_)
            try:
                h.sweep("lshk IVF", f"{cfg} rerank={rr} adaptive",
                        [(f"reach={r:g}", setr(r))
                         for r in [1.0, 1.125, 1.25, 1.375, 1.5, 1.625, 1.75, 1.875, 2.0, 2.25, 2.5,
                                   3.0, 3.5, 4.0, 5.0]],
                        lambda: (one, batch, extra))
            except RuntimeError as e:
                log(f"  lshk IVF {cfg} rerank={rr} adaptive: sweep ended: {e}")
        s.reach = 0.0
        for rr in fixed_reranks:
            s.rerank = rr

            def setn(np_):
                return lambda: setattr(s, "nprobe", np_)
            try:
                h.sweep("lshk IVF", f"{cfg} rerank={rr} fixed",
                        [(f"nprobe={n}", setn(n)) for n in probe_list(nl)],
                        lambda: (one, batch, extra))
            except RuntimeError as e:
                log(f"  lshk IVF {cfg} rerank={rr}: sweep ended: {e}")
        # The memory after the sweeps: the lists the package's batches
        # shared are kept as panels (docs/ivf.md, "Lists kept as panels").
        if pidx is not None:
            rec = next(x for x in reversed(h.builds) if x["peer"] == "lshk IVF" and x["config"] == cfg)
            rec["how"] += f"; {pidx.memory_bytes() / 2**20:.1f} MiB after the queries (lists kept as panels)"
        lshk_check(lib, lib.lshk_index_free(h_), "lshk_index_free")
        gc.collect()


def run_lshk_ivf_weighted(h, lib, build_threads):
    """The IVF source with row weights (p.ivf.row_weights): k-means weighted
    by the exact top-10 hits of training queries (never the evaluated or
    the calibration ones), int8 codes, nlist auto. The parameters come from
    lshk_index_calibrate (the adaptive default over-scans on uneven lists:
    docs/ivf.md, "Row weights"), then a fixed-nprobe sweep at rerank 32."""
    wl = h.wl
    if wl.Qtrain is None:
        log("  lshk IVF weighted: skipped (no training queries)")
        return
    t = nowt()
    hits = exact_topk(wl, Q=wl.Qtrain).reshape(-1)
    n = np.bincount(hits, minlength=wl.rows).astype(np.float64)
    weights = np.ascontiguousarray((1.0 + ALPHA * wl.rows * n / len(hits)).astype(np.float32))
    hsecs = nowt() - t
    bptr = wl.b.ctypes.data if wl.b is not None else None
    p = lshk_ivf_index_params(lib, build_threads)
    p.ivf.row_weights, p.ivf.n_weights = weights.ctypes.data, wl.rows
    h_ = vp()
    t = nowt()
    lshk_check(lib, lib.lshk_index_build(wl.W.ctypes.data, bptr, wl.rows, wl.dim, wl.dim,
                                         ctypes.byref(p), ctypes.byref(h_)), "lshk_index_build")
    secs = nowt() - t
    nl = lshk_nlist(lib, h_)
    m = sz()
    lshk_check(lib, lib.lshk_index_memory_bytes(h_, ctypes.byref(m)), "lshk_index_memory_bytes")
    cfg = f"nlist={nl} (auto) weighted"
    h.build("lshk IVF weighted", cfg, secs, m.value,
            f"lshk_index_memory_bytes (+ W borrowed); int8 codes; weights 1 + {ALPHA:g} rows n_r / N from the "
            f"exact top-10 of {len(wl.Qtrain):,} training queries (numpy, {hsecs:.1f} s, not counted)")
    pidx = lshk_pkg_index(wl.W, wl.b, source="ivf", storage="borrowed", row_weights=weights,
                          build_threads=build_threads)
    s, one, batch, extra = lshk_ivf_query_fns(lib, h_, wl, pidx)
    if wl.Qcal is not None:
        for target in (0.95, 0.99):
            c = lshk_calibrate(lib, h_, wl, target, build_threads)
            ci = c.query.ivf
            pick = f"reach={ci.reach:g}" if ci.reach > 0 else f"nprobe={ci.nprobe}"

            def setc(ci_=ci):
                return lambda: set_ivf(s, ci_)
            h.sweep("lshk IVF weighted calibrated", f"{cfg} target={target} ({len(wl.Qcal)} other queries)",
                    [(f"{pick} rerank={ci.rerank}", setc())], lambda: (one, batch, extra))
    s.reach, s.rerank = 0.0, 32

    def setn(np_):
        return lambda: setattr(s, "nprobe", np_)
    try:
        h.sweep("lshk IVF weighted", f"{cfg} rerank=32 fixed",
                [(f"nprobe={g}", setn(g)) for g in probe_list(nl)], lambda: (one, batch, extra))
    except RuntimeError as e:
        log(f"  lshk IVF weighted: sweep ended: {e}")
    lshk_check(lib, lib.lshk_index_free(h_), "lshk_index_free")
    gc.collect()


def call_overheads(mods, lib):
    """us per B = 1 call on a 64-row index: each binding's call overhead."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((64, 128), dtype=np.float32)
    q = rng.standard_normal((1, 128), dtype=np.float32)
    fns = {}
    if mods.get("faiss") is not None:
        fi = mods["faiss"].IndexFlatIP(128)
        fi.add(X)
        D1, I1 = np.empty((1, K), np.float32), np.empty((1, K), np.int64)
        fns["FAISS IndexFlatIP"] = lambda: fi.search(q, K, D=D1, I=I1)
    if mods.get("hnswlib") is not None:
        hi = mods["hnswlib"].Index(space="ip", dim=128)
        hi.init_index(max_elements=64, M=16)
        hi.add_items(X, num_threads=1)
        hi.set_num_threads(1)
        fns["hnswlib"] = lambda: hi.knn_query(q[0], k=K, num_threads=1)
    if mods.get("scann") is not None:
        si = mods["scann"].scann_ops_pybind.builder(X, K, "dot_product").score_brute_force().build()
        si.set_num_threads(1)
        fns["ScaNN brute force"] = lambda: si.search(q[0], final_num_neighbors=K)
    if lib is not None:
        p = lib.lshk_index_params_default()
        p.lsh.bits_per_table, p.lsh.tables, p.build_threads = 4, 1, 1
        h_ = vp()
        lshk_check(lib, lib.lshk_index_build(X.ctypes.data, None, 64, 128, 128, ctypes.byref(p),
                                             ctypes.byref(h_)), "lshk_index_build")
        g = lib.lshk_query_params_default()
        ids, sc = np.empty(K, np.uint32), np.empty(K, np.float32)
        args = (h_, q.ctypes.data, 1, 128, K, ctypes.byref(g), ids.ctypes.data, sc.ctypes.data, None)
        fns["lshk_index_query (ctypes)"] = lambda: lib.lshk_index_query(*args)
        if PKG is not None:
            pi = lshk_pkg_index(X, None, bits_per_table=4, tables=1, build_threads=1)
            fns["lshk.Index.query (package)"] = lambda: pi.query(q[0], K)
    out = []
    for name, f in fns.items():
        f()
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(2000):
                f()
            ts.append((time.perf_counter() - t) / 2000 * 1e6)
        out.append(f"{name} {np.median(ts):.1f} us")
    if lib is not None:
        lib.lshk_index_free(h_)
    return out


# ---------------------------------------------------------------- report


def fmt_mem(b):
    return f"{b / 2**20:.1f}" if b else "-"


def report(h, wl, targets):
    out = [f"## {wl.name}", "",
           f"{wl.rows:,} rows, {wl.nq} queries (exact lines: first {min(p['nq'] for p in h.points)}), "
           f"recall@10 against the exact top-10 of W q + b (numpy).", "",
           "### Build", "", "| peer | config | build s | index MiB | memory measured by |", "|---|---|---:|---:|---|"]
    for b in h.builds:
        secs = "-" if math.isnan(b["secs"]) else f"{b['secs']:.2f}"
        out.append(f"| {b['peer']} | {b['config']} | {secs} | {fmt_mem(b['mem'])} | {b['how']} |")
    out += ["", "### Fastest configuration per peer at each recall target", ""]
    peers = list(dict.fromkeys(p["peer"] for p in h.points))
    for bsz in (1, 64):
        rk, uk = ("recall", "us1") if bsz == 1 else ("recall64", "us64")
        out += [f"B = {bsz} (us per query):", "",
                "| peer | " + " | ".join(f"recall >= {t}: config | recall | us" for t in targets) + " |",
                "|---|" + "---|---:|---:|" * len(targets)]
        best = {}
        for peer in peers:
            cells = []
            for t in targets:
                ok = [p for p in h.points if p["peer"] == peer and p[uk] is not None and p[rk] >= t]
                if ok:
                    p = min(ok, key=lambda p: p[uk])
                    cells.append(f"{p['config']}, {p['knob']} | {p[rk]:.3f} | {p[uk]:.1f}")
                    if not peer.startswith(("lshk", "exact")):
                        if t not in best or p[uk] < best[t][0]:
                            best[t] = (p[uk], peer)
                else:
                    cells.append("not reached | - | -")
            out.append(f"| {peer} | " + " | ".join(cells) + " |")
        for lp in [p for p in peers if p.startswith("lshk")]:
            parts = []
            for t in targets:
                ok = [p for p in h.points if p["peer"] == lp and p[uk] is not None and p[rk] >= t]
                if ok and t in best:
                    u = min(p[uk] for p in ok)
                    parts.append(f"recall >= {t}: {u:.1f} us vs {best[t][1]} {best[t][0]:.1f} us "
                                 f"= {u / best[t][0]:.2f}x the best peer's time (target <= 0.67x)")
                elif t in best:
                    parts.append(f"recall >= {t}: not reached")
            if parts:
                out += ["", f"{lp}, B = {bsz}: " + "; ".join(parts)]
        out.append("")
    out += ["### All points", "",
            "| peer | config | knob | recall@10 | us/q B=1 | us/q B=64 | note |",
            "|---|---|---|---:|---:|---:|---|"]
    for p in h.points:
        r = f"{p['recall']:.3f}"
        if p["recall64"] is not None and abs(p["recall64"] - p["recall"]) > 0.0005:
            r += f" (B=64: {p['recall64']:.3f})"
        u64 = f"{p['us64']:.1f}" if p["us64"] else "-"
        note = "; ".join(x for x in (p["extra"], "1 pass" if p["passes"] == 1 else "") if x)
        out.append(f"| {p['peer']} | {p['config']} | {p['knob']} | {r} | {p['us1']:.1f} | {u64} | {note} |")
    out.append("")
    return out


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default="target/release/liblshk.so", help="liblshk.so ('' = no lshk)")
    ap.add_argument("--w1", default="target/w1-npy", help="directory with W.npy b.npy Q.npy ('' = skip)")
    ap.add_argument("--w2v", default="../shared/data/w2v-gutenberg", help="w2v-gutenberg directory ('' = skip)")
    ap.add_argument("--npy", default="", help="extra layer: directory with W.npy Q.npy [b.npy name.txt] "
                    "(e.g. minilm_export.py's output; '' = none)")
    ap.add_argument("--nq", type=int, default=500,
                    help="queries per workload (default 500; 1000 doubles the search time)")
    ap.add_argument("--passes", type=int, default=3, help="timed passes per point, median (default 3)")
    ap.add_argument("--build-threads", type=int, default=os.cpu_count(),
                    help="threads for every library's index build (default: all cores); queries use 1")
    ap.add_argument("--train-per-list", type=int, default=64,
                    help="FAISS IVF k-means sample: at most this many rows per list (default 64)")
    ap.add_argument("--hnswlib-efc", type=int, default=64,
                    help="hnswlib ef_construction (default 64; 100 took 3-5x FAISS HNSW's build on W1)")
    ap.add_argument("--lshk-api", choices=["package", "ctypes"], default="package",
                    help="how lshk's queries are timed: through its Python package (lshk.Index.query; "
                         "ctypes when the package is not importable) or ctypes over --lib")
    ap.add_argument("--only", default="", help="comma list of peers to run: exact,faiss,hnswlib,scann,lshk")
    ap.add_argument("--out", default="", help="also write the markdown here")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else {"exact", "faiss", "hnswlib", "scann", "lshk"}

    mods, versions = {}, {"numpy": np.__version__}
    for name in ("faiss", "hnswlib", "scann"):
        try:
            mods[name] = __import__(name)
            versions[name] = getattr(mods[name], "__version__", "?")
        except Exception as e:  # noqa: BLE001
            mods[name] = None
            log(f"skipped: {name} not importable ({e})")
    try:
        from importlib.metadata import version
        for k_, pkg in (("faiss", "faiss-cpu"), ("scann", "scann"), ("hnswlib", "hnswlib")):
            if mods.get(k_) is not None:
                versions[k_] = version(pkg)
    except Exception:  # noqa: BLE001
        pass
    if mods["faiss"] is not None:
        mods["faiss"].omp_set_num_threads(1)
    lib = None
    if a.lib and "lshk" in only:
        if os.path.exists(a.lib):
            lib = load_lshk(a.lib)
            versions["lshk"] = lib.lshk_version().decode()
            if a.lshk_api == "package":
                global PKG
                try:
                    import lshk as pkg
                    PKG = pkg
                    versions["lshk package"] = pkg.__version__
                except Exception as e:  # noqa: BLE001
                    log(f"lshk: timed through ctypes (the Python package is not importable: {e})")
        else:
            log(f"skipped: lshk ({a.lib} not found; run cargo build --release)")

    t_start = time.time()
    head = ["# lshk against ANN / MIPS peers (benches/peers/ann_peers.py)", "",
            f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; {platform.platform()}",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average at start "
            f"{os.getloadavg()[0]:.2f}",
            "- versions: " + ", ".join(f"{k_} {v}" for k_, v in versions.items()),
            f"- queries: one thread (OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
            "faiss.omp_set_num_threads(1), hnswlib/ScaNN set_num_threads(1)); index builds: "
            f"{a.build_threads} threads for every library",
            f"- time per query: median of {a.passes} passes over the queries, time.perf_counter "
            "around the Python loop (B = 1: one call per query; B = 64: one call per 64 queries), so "
            "every figure includes the Python call overhead of its binding ("
            + ("lshk: its Python package, lshk.Index.query, on indexes the package builds with the "
               "knobs of the C API's (each point checks that both answer alike)"
               if PKG is not None else "lshk: ctypes over liblshk.so")
            + "); "
            "lshk's per-query counts (lists, scanned, candidates) come from one more untimed pass",
            "- sweeps stop at the first point with recall >= 0.999 or slower than exact brute force, or "
            "after 5 points without a 0.001 gain",
            "- per-call floor (B = 1 on a 64-row index: binding overhead + trivial search): "
            + ", ".join(call_overheads(mods, lib)), ""]
    body = []
    workloads = []
    if a.w1:
        if os.path.exists(os.path.join(a.w1, "W.npy")):
            workloads.append(lambda: load_w1(a.w1, a.nq))
        else:
            log(f"skipped: W1 ({a.w1}/W.npy not found: run examples/export_npy)")
    if a.w2v:
        if os.path.exists(os.path.join(a.w2v, "output_layer.f32")):
            workloads.append(lambda: load_w2v(a.w2v, a.nq))
        else:
            print("skipped: ../shared/data not found", flush=True)
            body.append(f"w2v: skipped: ../shared/data not found ({a.w2v})\n")
    if a.npy:
        if os.path.exists(os.path.join(a.npy, "W.npy")):
            workloads.append(lambda: load_npy(a.npy, a.nq))
        else:
            log(f"skipped: {a.npy}/W.npy not found (benches/peers/minilm_export.py writes one)")
    for make in workloads:
        wl = make()
        log(f"== {wl.name}: {wl.nq} queries")
        t = nowt()
        wl.gt = exact_topk(wl)
        log(f"  ground truth: {nowt() - t:.1f} s")
        h = Harness(wl, a.passes, slow_s=3.0)
        if "exact" in only:
            run_exact(h, mods["faiss"])
        if lib is not None:
            run_lshk_simhash(h, lib, a.build_threads)
            run_lshk_ivf(h, lib, a.build_threads)
            run_lshk_ivf_weighted(h, lib, a.build_threads)
        if mods["faiss"] is not None and "faiss" in only:
            nl = [1024, 4096] if wl.rows > 200_000 else [256, 1024]
            pq_nlist = int(round(4 * math.sqrt(wl.rows)))
            run_faiss(h, mods["faiss"], sorted(set(nl + [pq_nlist])), pq_nlist, a.build_threads,
                      a.train_per_list)
        if mods["scann"] is not None and "scann" in only:
            run_scann(h, mods["scann"], a.build_threads)
        if mods["hnswlib"] is not None and "hnswlib" in only:
            run_hnswlib(h, mods["hnswlib"], a.build_threads, a.hnswlib_efc)
        body += report(h, wl, (0.95, 0.99))
        del wl, h
        gc.collect()
    head.append(f"Total run time {time.time() - t_start:.0f} s; load average at the end "
                f"{os.getloadavg()[0]:.2f}.\n")
    text = "\n".join(head + body) + "\n"
    print(text, flush=True)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
