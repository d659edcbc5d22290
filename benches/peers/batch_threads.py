"""Batched queries on 1 and t threads: lshk's IVF source beside FAISS
IndexIVFFlat and ScaNN tree+AH, each at its cheapest setting of a small grid
that reaches recall@10 >= 0.99 on one thread.

Per layer and library: microseconds per query for a batch of B (--batches,
default 64 and 256) on 1 thread and on t threads (--threads, default 2;
a list such as 2,4,8,16 measures each against 1), in alternation (1, t, 1,
t, ...; REPS pairs), with the median speed-up of the pairs. Threads: lshk
lshk_query_params.threads; FAISS omp_set_num_threads (a batch is split over
OpenMP threads); ScaNN search_batched_parallel with set_num_threads.

    benches/peers/run_ann.sh's venv, then:
    /tmp/lshk-peers-venv/bin/python benches/peers/batch_threads.py [--w1 target/w1-npy]
        [--npy DIR ...] [--threads 2,4,8,16] [--batches 64,256,1024] [--nq 1024]

Not run by cargo test. Figures: benches/threads.md.
"""

import argparse
import ctypes
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ann_peers as ap  # noqa: E402  (loaders, exact top-k, recall, ctypes API)

import numpy as np  # noqa: E402

K = ap.K
lc = ap.lc


def per_query(batch, n, b, secs):
    """Seconds per query of batch(i0, i1) over the first n queries in
    batches of b, repeated for at least secs."""
    t0 = time.perf_counter()
    done = 0
    while time.perf_counter() - t0 < secs:
        for i in range(0, n - b + 1, b):
            batch(i, i + b)
            done += b
    return (time.perf_counter() - t0) / done


def recall(batch, wl, n):
    ids = np.vstack([ap.topk_rows(batch(i, min(i + 64, n))) for i in range(0, n, 64)])
    return ap.recall10(ids, wl.gt[:n])


def faiss_lib(wl, faiss):
    X, QX = wl.X, wl.QX
    nlist = int(round(4 * math.sqrt(len(X))))
    faiss.omp_set_num_threads(os.cpu_count())
    q = faiss.IndexFlatIP(X.shape[1])
    idx = faiss.IndexIVFFlat(q, X.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
    idx.train(X[np.random.default_rng(1).choice(len(X), min(len(X), 64 * nlist), replace=False)])
    idx.add(X)

    def setter(nprobe):
        idx.nprobe = nprobe

    def threads(t):
        faiss.omp_set_num_threads(t)

    def batch(i0, i1):
        return idx.search(QX[i0:i1], K)[1]

    grid = sorted({v for v in ap.GRID if v <= nlist} | {nlist})
    return f"FAISS IVFFlat nlist={nlist}", grid, "nprobe", setter, threads, batch


def scann_lib(wl, scann):
    X, QX = wl.X, wl.QX
    n = len(X)
    leaves = int(round(2 * math.sqrt(n)))
    s = (scann.scann_ops_pybind.builder(X, K, "dot_product")
         .tree(num_leaves=leaves, num_leaves_to_search=max(1, leaves // 10),
               training_sample_size=min(n, 250_000))
         .score_ah(2, anisotropic_quantization_threshold=0.2).reorder(1000)
         .set_n_training_threads(os.cpu_count()).build())
    state = {"lv": 1, "t": 1}

    def setter(lv):
        state["lv"] = lv

    def threads(t):
        state["t"] = t
        s.set_num_threads(t)

    def batch(i0, i1):
        f = s.search_batched if state["t"] == 1 else s.search_batched_parallel
        return f(QX[i0:i1], final_num_neighbors=K, pre_reorder_num_neighbors=1000,
                 leaves_to_search=state["lv"])[0]

    grid = sorted(set(ap.probe_list(leaves)) | {leaves})
    return f"ScaNN tree+AH leaves={leaves} reorder=1000", grid, "leaves", setter, threads, batch


def lshk_lib(wl, lib):
    p = ap.lshk_ivf_index_params(lib, os.cpu_count())
    h_ = ap.vp()
    bptr = wl.b.ctypes.data if wl.b is not None else None
    ap.lshk_check(lib, lib.lshk_index_build(wl.W.ctypes.data, bptr, wl.rows, wl.dim, wl.dim,
                                            ctypes.byref(p), ctypes.byref(h_)), "lshk_index_build")
    qpar = lib.lshk_query_params_default()
    ids = np.empty((wl.nq, K), np.uint32)
    sc = np.empty((wl.nq, K), np.float32)
    Q = wl.Q
    base, step = Q.ctypes.data, wl.dim * 4

    def setter(reach):
        qpar.ivf.reach = reach

    def threads(t):
        qpar.threads = t

    def batch(i0, i1):
        r = lib.lshk_index_query(h_, base + i0 * step, i1 - i0, wl.dim, K, ctypes.byref(qpar),
                                 ids.ctypes.data, sc.ctypes.data, None)
        if r:
            ap.lshk_check(lib, r, "lshk_index_query")
        return ids[:i1 - i0].astype(np.int64)

    batch.keep = (h_, qpar, ids, sc, Q)
    grid = [1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 6.0]
    return "lshk IVF (int8 codes, W borrowed)", grid, "reach", setter, threads, batch


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--lib", default="target/release/liblshk.so")
    a.add_argument("--w2v", default="../shared/data/w2v-gutenberg")
    a.add_argument("--w1", default="", help="W1 export directory (W.npy b.npy Q.npy); '' = skip")
    a.add_argument("--nq", type=int, default=512)
    a.add_argument("--reps", type=int, default=3)
    a.add_argument("--secs", type=float, default=0.5)
    a.add_argument("--threads", default="2",
                   help="thread counts, comma-separated (e.g. 2,4,8,16): each is measured against 1")
    a.add_argument("--batches", default="64,256", help="batch sizes B, comma-separated")
    a.add_argument("--npy", action="append", default=[],
                   help="extra layer: directory with W.npy Q.npy [b.npy name.txt] (repeatable)")
    a.add_argument("--libs", default="lshk,faiss,scann", help="which libraries, comma-separated")
    args = a.parse_args()
    import faiss
    import scann
    lib = lc.load_lshk(args.lib)
    wls = []
    if args.w2v and os.path.exists(os.path.join(args.w2v, "output_layer.f32")):
        wls.append(ap.load_w2v(args.w2v, args.nq))
    elif args.w2v:
        print("skipped: ../shared/data not found")
    if args.w1:
        wls.append(ap.load_w1(args.w1, args.nq))
    for d in args.npy:
        wls.append(ap.load_npy(d, args.nq))
    tlist = [int(t) for t in args.threads.split(",")]
    blist = [int(b) for b in args.batches.split(",")]
    print(f"CPU: {ap.cpu_model()}; lshk {lib.lshk_version().decode()}, faiss {faiss.__version__}, "
          f"scann (pip 1.4.2); nq {args.nq}, {args.reps} alternating pairs of {args.secs} s; "
          f"{os.cpu_count()} cores")
    print("\n| layer | library | setting (recall@10) | B | threads | 1 thread us/q | "
          "t threads us/q | speed-up median (min-max) |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    if max(blist) > args.nq:
        sys.exit(f"--nq {args.nq} is smaller than the largest batch {max(blist)}")
    for wl in wls:
        if wl.nq < max(blist):
            sys.exit(f"{wl.name}: {wl.nq} queries, fewer than the largest batch {max(blist)}")
        wl.gt = ap.exact_topk(wl)
        n = wl.nq
        for key, make, mod in (("lshk", lshk_lib, lib), ("faiss", faiss_lib, faiss),
                               ("scann", scann_lib, scann)):
            if key not in args.libs.split(","):
                continue
            name, grid, knob, setter, threads, batch = make(wl, mod)
            threads(1)
            chosen = None
            for v in grid:
                setter(v)
                r = recall(batch, wl, n)
                if r >= 0.99:
                    chosen = (v, r)
                    break
            if chosen is None:
                print(f"| {wl.name} | {name} | no grid point reaches 0.99 | | | | | |")
                continue
            for b in blist:
                for t in tlist:
                    ones, manys, ratios = [], [], []
                    for _ in range(args.reps):
                        threads(1)
                        t1 = per_query(batch, n, b, args.secs)
                        threads(t)
                        tt = per_query(batch, n, b, args.secs)
                        ones.append(t1)
                        manys.append(tt)
                        ratios.append(t1 / tt)
                    threads(1)
                    print(f"| {wl.name} | {name} | {knob}={chosen[0]} ({chosen[1]:.3f}) | {b} | {t} | "
                          f"{np.median(ones) * 1e6:.1f} | {np.median(manys) * 1e6:.1f} | "
                          f"**{np.median(ratios):.2f}** ({min(ratios):.2f}-{max(ratios):.2f}) |",
                          flush=True)

if __name__ == "__main__":
    main()
