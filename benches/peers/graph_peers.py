#!/usr/bin/env python3
"""The FGD graph (the lshk index's graph source, LSHK_SOURCE_GRAPH) against
hnswlib and FAISS HNSW in ONE process: the same M and efConstruction, the
same build threads, then queries one at a time on ONE thread (B = 1),
recall@10 and P@1 against the exact top-10 of W q + b, microseconds per
query, over an efSearch sweep.

lshk is called through its C ABI with ctypes (lshk_index_build /
lshk_index_query, benches/peers/lshk_ctypes.py), the peers through their
Python bindings, so every library pays a Python call per query (a few
microseconds; see the "empty call" line printed for each). The index
borrows W (BORROWED_F32 storage, no copy) and returns the exact logits of
W and b for the walk's pool; its graph rows are stored as --storages says.
The index does not report the walk's distance count, so lshk's "rows
scored/q" cells are "-".

Peers:
  hnswlib ip   space='ip' on [w, b], queried with [q, 1] (no transform);
  hnswlib l2   space='l2' on the FGD-transformed rows [w; b; sqrt(U^2 - |[w;b]|^2)],
               queried with [q; 1; 0] (the same data lshk's graph indexes);
  FAISS HNSW   IndexHNSWFlat (L2) on the same transformed rows.

Run it through benches/peers/run_graph.sh, or directly:
    python graph_peers.py --lib target/release/liblshk.so \
        --w2v ../shared/data/w2v-gutenberg --w1 target/w1-npy-200k --out graph_results.md

Large layers (the full 670,091-row W1): --index-dir DIR saves every built
index there (lshk_index_save, hnswlib save_index, faiss.write_index, with
the build's wall and CPU seconds in DIR/<layer>/builds.json) and later runs
load them instead of building, so that each library's build and the query
sweeps can run as separate, shorter runs (--build-only; --only picks the
libraries).
"""
import argparse
import ctypes
import json
import os
import platform
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

import lshk_ctypes as lc  # noqa: E402  (benches/peers/lshk_ctypes.py)

K = 10


def log(*a):
    print(*a, file=sys.stderr, flush=True)


vp, sz = lc.vp, lc.sz
load_lib = lc.load_lshk
check = lc.check


# ---------------------------------------------------------------- data


class Workload:
    def __init__(self, name, W, b, Q, key):
        self.name, self.W, self.b, self.Q, self.key = name, W, b, Q, key
        self.rows, self.dim = W.shape
        self.nq = len(Q)
        bb = b if b is not None else np.zeros(self.rows, np.float32)
        # [w, b] / [q, 1] for inner product
        self.X = np.ascontiguousarray(np.hstack([W, bb[:, None]]), dtype=np.float32)
        self.QX = np.ascontiguousarray(np.hstack([Q, np.ones((self.nq, 1), np.float32)]))
        # FGD: [w; b; sqrt(U^2 - |[w;b]|^2)] / [q; 1; 0]
        n2 = (self.X.astype(np.float64) ** 2).sum(1)
        t = np.sqrt(np.maximum(n2.max() - n2, 0.0)).astype(np.float32)
        self.XT = np.ascontiguousarray(np.hstack([self.X, t[:, None]]))
        self.QT = np.ascontiguousarray(np.hstack([self.QX, np.zeros((self.nq, 1), np.float32)]))
        S = Q @ W.T
        if b is not None:
            S += b
        p = np.argpartition(-S, K, axis=1)[:, :K]
        ps = np.take_along_axis(S, p, 1)
        self.gt = np.take_along_axis(p, np.argsort(-ps, axis=1, kind="stable"), 1)


def load_w2v(d, nq):
    dim = 128
    W = np.fromfile(os.path.join(d, "output_layer.f32"), np.float32).reshape(-1, dim)
    emb = np.fromfile(os.path.join(d, "input_embeddings.f32"), np.float32).reshape(-1, dim)
    pairs = np.fromfile(os.path.join(d, "heldout_pairs.i32"), np.int32).reshape(-1, 2)
    Q = np.ascontiguousarray(emb[pairs[:nq, 0]])
    return Workload(f"w2v-gutenberg {W.shape[0]:,} x {dim}, no bias", np.ascontiguousarray(W), None, Q,
                    f"w2v-{W.shape[0]}")


def load_w1(d, nq):
    W = np.ascontiguousarray(np.load(os.path.join(d, "W.npy")), dtype=np.float32)
    b = np.ascontiguousarray(np.load(os.path.join(d, "b.npy")).reshape(-1), dtype=np.float32)
    Q = np.ascontiguousarray(np.load(os.path.join(d, "Q.npy"))[:nq], dtype=np.float32)
    return Workload(f"W1 synthetic {W.shape[0]:,} x {W.shape[1]} + bias", W, b, Q, f"w1-{W.shape[0]}")


def recall(ids, gt):
    n = len(gt)
    r10 = sum(len(set(ids[i][:K].tolist()) & set(gt[i].tolist())) for i in range(n)) / (K * n)
    p1 = float(np.mean([ids[i][0] == gt[i][0] for i in range(n)]))
    return p1, r10


# ---------------------------------------------------------------- runners


class Builds:
    """Build records (name, wall s, CPU s, memory bytes or None, threads); with --index-dir,
    also the saved indexes and DIR/<layer>/builds.json."""

    def __init__(self, a, wl):
        self.rows = []
        self.tag = seed_tag(a)  # builds.json keys: name + seed tag
        self.dir = os.path.join(a.index_dir, wl.key) if a.index_dir else None
        self.saved = {}
        if self.dir:
            os.makedirs(self.dir, exist_ok=True)
            try:
                with open(os.path.join(self.dir, "builds.json")) as f:
                    self.saved = json.load(f)
            except FileNotFoundError:
                pass

    def path(self, fname):
        return os.path.join(self.dir, fname) if self.dir else None

    def cached(self, name, fname):
        """The saved record of `name` when its index file is there, else None."""
        p = self.path(fname)
        if p and os.path.exists(p) and name + self.tag in self.saved:
            return self.saved[name + self.tag]
        return None

    def add(self, name, secs, cpu, mem, threads, loaded=False):
        self.rows.append((name, secs, cpu, mem, threads, loaded))
        if self.dir and not loaded:
            self.saved[name + self.tag] = [secs, cpu, mem, threads, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                os.getloadavg()[0]]
            with open(os.path.join(self.dir, "builds.json"), "w") as f:
                json.dump(self.saved, f, indent=1)
        log(f"  {'loaded' if loaded else 'built'} {name}: {secs:.2f} s wall, {cpu:.2f} s CPU, threads {threads}")


def seed_tag(a):
    """Index file name part for a seed other than the default 1."""
    return "" if a.seed == 1 else f"-s{a.seed}"


def timed(fn):
    """(result, wall seconds, process CPU seconds) of fn()."""
    t, c = time.perf_counter(), time.process_time()
    r = fn()
    return r, time.perf_counter() - t, time.process_time() - c


# The graph's own rows (p.graph.storage), which its walk scores.
STORAGE = {"f32": lc.STORAGE_F32, "bf16": lc.STORAGE_BF16, "i8": lc.STORAGE_I8}


WALK = {"exact": lc.GRAPH_WALK_EXACT, "int8": lc.GRAPH_WALK_INT8}


def lshk_name(storage, walk="exact"):
    rows = "" if storage == "f32" else f", {storage} rows"
    w = "" if walk == "exact" else f", int8 walk + {storage} re-rank"
    return f"lshk graph (FGD{rows}{w})"


def run_lshk(lib, wl, a, rows_out, builds, storage="f32"):
    name = lshk_name(storage)
    p = lib.lshk_index_params_default()
    p.source, p.storage = lc.SOURCE_GRAPH, lc.STORAGE_BORROWED_F32
    p.build_threads = a.threads
    p.graph.m, p.graph.ef_construction, p.graph.seed = a.m, a.efc, a.seed
    p.graph.storage = STORAGE[storage]
    h = vp()
    bptr = wl.b.ctypes.data if wl.b is not None else None
    fname = f"lshk-index-graph-{storage}-m{a.m}-efc{a.efc}{seed_tag(a)}.lshk"
    rec = builds.cached(name, fname)
    if rec:
        check(lib, lib.lshk_index_load(builds.path(fname).encode(), wl.W.ctypes.data, wl.dim, ctypes.byref(h)),
              "lshk_index_load")
        builds.add(name, rec[0], rec[1], rec[2], rec[3], loaded=True)
    else:
        _, secs, cpu = timed(lambda: check(lib, lib.lshk_index_build(
            wl.W.ctypes.data, bptr, wl.rows, wl.dim, wl.dim, ctypes.byref(p), ctypes.byref(h)),
            "lshk_index_build"))
        mem = sz()
        check(lib, lib.lshk_index_memory_bytes(h, ctypes.byref(mem)), "lshk_index_memory_bytes")
        if builds.dir:
            check(lib, lib.lshk_index_save(h, builds.path(fname).encode()), "lshk_index_save")
        builds.add(name, secs, cpu, mem.value, a.threads)
    if a.build_only:
        lib.lshk_index_free(h)
        return []
    qrows = [np.ascontiguousarray(wl.Q[i]) for i in range(wl.nq)]
    ids = np.zeros(K, np.uint32)
    sc = np.zeros(K, np.float32)
    ip, sp = ids.ctypes.data, sc.ctypes.data
    query = lib.lshk_index_query
    dim = wl.dim
    runners = []
    for walk in a.walks:
        qp = lib.lshk_query_params_default()
        qp.graph.walk, qp.graph.rerank = WALK[walk], a.rerank
        qpr = ctypes.byref(qp)

        def set_ef(ef, qp=qp, qpr=qpr):
            qp.graph.ef = ef
            check(lib, query(h, qrows[0].ctypes.data, 1, dim, K, qpr, ip, sp, None), "lshk_index_query")

        def one(i, qpr=qpr):
            query(h, qrows[i].ctypes.data, 1, dim, K, qpr, ip, sp, None)
            return ids.copy()

        # keep: the buffers whose addresses the closures hold as integers
        runners.append(Runner(lshk_name(storage, walk), set_ef, one, None, keep=(ids, sc, qrows, wl.W)))
    runners[-1].free = lambda: lib.lshk_index_free(h)
    return runners


class Runner:
    """One searcher: set_ef(ef), one(i) -> ids of query i, dist() -> rows scored per query or None."""

    def __init__(self, name, set_ef, one, dist=None, keep=None):
        self.name, self.set_ef, self.one, self.dist, self.keep = name, set_ef, one, dist, keep
        self.free = lambda: None


def measure(wl, a, runners, rows_out, efs):
    """Per efSearch, the searchers' timed passes interleaved (pass 1 of each, then pass 2 ...), so
    that a load change on the shared machine hits all of them; best pass of each."""
    for ef in efs:
        best = {r.name: float("inf") for r in runners}
        best_cpu = dict(best)
        res = {}
        load0 = os.getloadavg()[0]
        for r in runners:
            r.set_ef(ef)
            res[r.name] = [r.one(i) for i in range(min(wl.nq, 50))]  # warm-up
        for _ in range(a.passes):
            for r in runners:
                t, c = time.perf_counter(), time.thread_time()
                res[r.name] = [r.one(i) for i in range(wl.nq)]
                best_cpu[r.name] = min(best_cpu[r.name], time.thread_time() - c)
                best[r.name] = min(best[r.name], time.perf_counter() - t)
        load = (load0 + os.getloadavg()[0]) / 2
        for r in runners:
            us = best[r.name] / wl.nq * 1e6
            cus = best_cpu[r.name] / wl.nq * 1e6
            p1, r10 = recall(res[r.name], wl.gt)
            d = r.dist() if r.dist else None
            rows_out.append((r.name, ef, p1, r10, d, us, cus, load))
            log(f"  {r.name} ef {ef}: P@1 {p1:.3f} recall@10 {r10:.3f} "
                f"{'-' if d is None else f'{d:.0f}'} dist {us:.1f} us ({cus:.1f} us CPU), load {load:.1f}")


def run_hnswlib(hnswlib, wl, a, space, rows_out, builds):
    X, Q = (wl.XT, wl.QT) if space == "l2" else (wl.X, wl.QX)
    name = f"hnswlib {space}" + (" (FGD transform)" if space == "l2" else " ([w,b]·[q,1])")
    idx = hnswlib.Index(space=space, dim=X.shape[1])
    fname = f"hnswlib-{space}-m{a.m}-efc{a.efc}{seed_tag(a)}.bin"
    rec = builds.cached(name, fname)
    if rec:
        idx.load_index(builds.path(fname), max_elements=len(X))
        builds.add(name, rec[0], rec[1], rec[2], rec[3], loaded=True)
    else:
        def build():
            idx.init_index(max_elements=len(X), ef_construction=a.efc, M=a.m, random_seed=a.seed)
            idx.add_items(X, num_threads=a.threads)
        _, secs, cpu = timed(build)
        if builds.dir:
            idx.save_index(builds.path(fname))
        builds.add(name, secs, cpu, None, a.threads)
    if a.build_only:
        return []
    idx.set_num_threads(1)
    qrows = [Q[i] for i in range(len(Q))]
    return [Runner(name, lambda ef: idx.set_ef(max(ef, K)),
                   lambda i: idx.knn_query(qrows[i], k=K, num_threads=1)[0][0], keep=idx)]


def run_faiss(faiss, wl, a, rows_out, builds):
    X, Q = wl.XT, wl.QT
    name = "FAISS HNSW (FGD transform, L2)"
    faiss.omp_set_num_threads(a.threads)
    fname = f"faiss-hnswflat-m{a.m}-efc{a.efc}.index"
    rec = builds.cached(name, fname)
    if rec:
        idx = faiss.read_index(builds.path(fname))
        builds.add(name, rec[0], rec[1], rec[2], rec[3], loaded=True)
    else:
        def build():
            ix = faiss.IndexHNSWFlat(X.shape[1], a.m)
            ix.hnsw.efConstruction = a.efc
            ix.add(X)
            return ix
        idx, secs, cpu = timed(build)
        if builds.dir:
            faiss.write_index(idx, builds.path(fname))
        builds.add(name, secs, cpu, len(faiss.serialize_index(idx)), a.threads)
    faiss.omp_set_num_threads(1)
    if a.build_only:
        return []
    D1, I1 = np.empty((1, K), np.float32), np.empty((1, K), np.int64)
    qrows = [Q[i:i + 1] for i in range(len(Q))]

    def set_ef(ef):
        idx.hnsw.efSearch = max(ef, K)

    def one(i):
        idx.search(qrows[i], K, D=D1, I=I1)
        return I1[0].copy()

    def dist():
        faiss.cvar.hnsw_stats.reset()
        for i in range(len(Q)):
            idx.search(qrows[i], K, D=D1, I=I1)
        return faiss.cvar.hnsw_stats.ndis / len(Q)
    return [Runner(name, set_ef, one, dist, keep=idx)]


def at_recall(rows, name, target):
    """The fastest measured point of `name` with recall@10 >= target."""
    pts = [r for r in rows if r[0] == name and r[3] >= target]
    return min(pts, key=lambda r: r[5]) if pts else None


def report(wl, a, rows, builds, out):
    out.append(f"\n### {wl.name}, {wl.nq} queries\n")
    out.append(f"M = {a.m}, efConstruction = {a.efc}, seed {a.seed}, build threads {a.threads}; queries one at a time "
               f"on one thread (B = 1), best of {a.passes} passes, the searchers' passes interleaved per efSearch.\n")
    out.append("| build | threads | seconds (wall) | seconds (CPU) | memory MiB |")
    out.append("|---|---:|---:|---:|---:|")
    for n, s, c, m, th, loaded in builds.rows:
        out.append(f"| {n}{' (saved build, loaded)' if loaded else ''} | {th} | {s:.2f} | {c:.2f} | "
                   f"{'-' if m is None else f'{m / 2**20:.1f}'} |")
    out.append("\n| library | efSearch | P@1 | recall@10 | rows scored/q | us/q | CPU us/q | load |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for n, ef, p1, r10, d, us, cus, load in rows:
        out.append(f"| {n} | {ef} | {p1:.3f} | {r10:.3f} | {'-' if d is None else f'{d:.0f}'} | {us:.1f} | "
                   f"{cus:.1f} | {load:.1f} |")
    out.append("\nAt a recall target, the fastest measured efSearch point of each: us/q (efSearch; "
               "hnswlib l2's time over this one's, wall and thread CPU: > 1 = faster than hnswlib on the same "
               "transformed rows):\n")
    lshks = []
    for n, *_ in rows:
        if n.startswith("lshk") and n not in lshks:
            lshks.append(n)
    names = ["hnswlib l2 (FGD transform)"] + lshks + ["hnswlib ip ([w,b]·[q,1])", "FAISS HNSW (FGD transform, L2)"]
    out.append("| recall@10 >= | " + " | ".join(names) + " |")
    out.append("|---:|" + "---:|" * len(names))
    for target in (0.9, 0.95, 0.99):
        pts = [at_recall(rows, n, target) for n in names]
        base = pts[0][5] if pts[0] else None
        cells = []
        for p in pts:
            if p is None:
                cells.append("not reached")
            elif base is None or p is pts[0]:
                cells.append(f"{p[5]:.1f} (ef {p[1]})")
            else:
                cells.append(f"{p[5]:.1f} (ef {p[1]}, {base / p[5]:.2f}x; CPU {pts[0][6] / p[6]:.2f}x)")
        out.append(f"| {target} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--w2v", default="../shared/data/w2v-gutenberg")
    ap.add_argument("--w1", default=None)
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--nq-w1", type=int, default=500)
    ap.add_argument("--m", type=int, default=16)
    ap.add_argument("--efc", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--efs", default="10,20,50,100,200,400,800,1600")
    ap.add_argument("--only", default="lshk,hnswlib-l2,hnswlib-ip,faiss")
    ap.add_argument("--storages", default="f32,bf16", help="lshk row storages (f32 first)")
    ap.add_argument("--efs-w1", default=None, help="efSearch list for W1 (default: --efs)")
    ap.add_argument("--walks", default="exact,int8", help="lshk level-0 walks (exact, int8)")
    ap.add_argument("--rerank", type=int, default=0, help="int8 walk: rows re-ranked (0 = the pool)")
    ap.add_argument("--out", default="target/graph_results.md")
    ap.add_argument("--datasets", default="w2v,w1", help="layers to run (w2v, w1)")
    ap.add_argument("--index-dir", default=None, help="save built indexes here; load them when present")
    ap.add_argument("--build-only", action="store_true", help="build (and save) the indexes, no queries")
    ap.add_argument("--seed", type=int, default=1, help="graph seed of lshk and hnswlib (levels)")
    a = ap.parse_args()
    a.efs = [int(x) for x in a.efs.split(",")]
    a.efs_w1 = [int(x) for x in a.efs_w1.split(",")] if a.efs_w1 else None
    a.storages = a.storages.split(",")
    a.walks = a.walks.split(",")
    only = set(a.only.split(","))
    lib = load_lib(a.lib)
    import hnswlib
    import faiss
    out = [f"## FGD graph vs hnswlib / FAISS HNSW ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n",
           f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; lshk "
           f"{lib.lshk_version().decode()} tier {lib.lshk_isa_active()} (3 = avx512), "
           f"hnswlib {getattr(hnswlib, '__version__', '0.8.0')}, faiss {faiss.__version__}, numpy {np.__version__}. "
           "lshk through ctypes, the peers through their Python bindings: every B = 1 query pays one Python call."]
    loads = []
    datasets = a.datasets.split(",")
    if "w2v" not in datasets:
        pass
    elif os.path.exists(os.path.join(a.w2v, "output_layer.f32")):
        loads.append(lambda: load_w2v(a.w2v, a.nq))
    else:
        print("skipped: ../shared/data not found")
    if "w1" in datasets and a.w1 and os.path.exists(os.path.join(a.w1, "W.npy")):
        loads.append(lambda: load_w1(a.w1, a.nq_w1))
    for ld in loads:
        wl = ld()
        log(wl.name)
        rows, builds, runners = [], Builds(a, wl), []
        if "lshk" in only:
            for st in a.storages:
                runners += run_lshk(lib, wl, a, rows, builds, st)
        if "hnswlib-l2" in only:
            runners += run_hnswlib(hnswlib, wl, a, "l2", rows, builds)
        if "hnswlib-ip" in only:
            runners += run_hnswlib(hnswlib, wl, a, "ip", rows, builds)
        if "faiss" in only:
            runners += run_faiss(faiss, wl, a, rows, builds)
        efs = a.efs_w1 if wl.name.startswith("W1") and a.efs_w1 else a.efs
        if not a.build_only:
            measure(wl, a, runners, rows, efs)
        for r in runners:
            r.free()
        report(wl, a, rows, builds, out)
    text = "\n".join(out) + "\n"
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
