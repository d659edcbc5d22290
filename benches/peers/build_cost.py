"""Build time and memory of lshk's IVF index against FAISS IVFFlat with the
same number of lists, on a large generated layer (issue: build time and
memory at or below FAISS IVFFlat's).

The layer: examples/export_npy.rs's W1 generator at `--rows` rows
(`cargo run --release --example export_npy -- --rows 2000000 --out
target/w2m-npy`; the demo's structured layer, 128 dims, with a bias).
Both libraries build with all cores (`--build-threads`), nlist =
round(4 sqrt(rows)) for both (lshk's default), k-means trained on at most
64 rows per list in both (FAISS `max_points_per_centroid`, lshk's default
`train_rows`), 10 iterations in lshk and FAISS's default (10) as well.
Memory: FAISS, the serialized index (its lists hold an f32 copy of
[w, b]); lshk, `lshk_index_memory_bytes` with W borrowed (int8 codes and
list metadata; the caller's W is not copied) and, as a second row, with
F32 storage (W copied into the index), the like-for-like figure.

`python benches/peers/build_cost.py --npy target/w2m-npy [--lib target/release/liblshk.so] [--reps 5]`

Any layer saved as `W.npy` (and `b.npy`) works; `--reps N` builds each
N times, taking turns, and reports the median and every time.
"""
import argparse
import ctypes
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lshk_ctypes as lc  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--npy", default="target/w2m-npy")
    ap.add_argument("--lib", default="target/release/liblshk.so")
    ap.add_argument("--build-threads", type=int, default=os.cpu_count())
    ap.add_argument("--reps", type=int, default=1, help="rounds of builds, the libraries taking turns")
    a = ap.parse_args()
    W = np.ascontiguousarray(np.load(os.path.join(a.npy, "W.npy")), dtype=np.float32)
    bp = os.path.join(a.npy, "b.npy")
    b = np.ascontiguousarray(np.load(bp).reshape(-1), dtype=np.float32) if os.path.exists(bp) else None
    rows, dim = W.shape
    nlist = int(round(4 * math.sqrt(rows)))
    print(f"layer {a.npy}: {rows:,} x {dim}{' + bias' if b is not None else ''}; nlist {nlist}; "
          f"build threads {a.build_threads}; CPU {cpu_name()}")
    print("| library | build | seconds | memory MiB | what the memory holds |")
    print("|---|---|---:|---:|---|")

    lib = lc.load_lshk(a.lib)
    import faiss
    X = W if b is None else np.ascontiguousarray(np.hstack([W, b[:, None]]))
    d = X.shape[1]
    faiss.omp_set_num_threads(a.build_threads)

    def lshk_build(storage):
        p = lib.lshk_index_params_default()
        p.source = lc.SOURCE_IVF
        p.storage = storage
        p.build_threads = a.build_threads
        h = ctypes.c_void_p()
        t = time.perf_counter()
        lc.check(lib, lib.lshk_index_build(W.ctypes.data, b.ctypes.data if b is not None else None,
                                           rows, dim, dim, ctypes.byref(p), ctypes.byref(h)), "build")
        secs = time.perf_counter() - t
        m = ctypes.c_size_t()
        lc.check(lib, lib.lshk_index_memory_bytes(h, ctypes.byref(m)), "memory")
        lib.lshk_index_free(h)
        return secs, m.value

    def faiss_build():
        t = time.perf_counter()
        idx = faiss.IndexIVFFlat(faiss.IndexFlatIP(d), d, nlist, faiss.METRIC_INNER_PRODUCT)
        idx.cp.max_points_per_centroid = 64
        idx.train(X)
        idx.add(X)
        secs = time.perf_counter() - t
        return secs, len(faiss.serialize_index(idx))

    # The libraries take turns, `--reps` rounds; each row gives the median
    # (and, with more than one round, every time in round order).
    runs = {"borrowed": [], "f32": [], "faiss": []}
    for _ in range(a.reps):
        runs["borrowed"].append(lshk_build(lc.STORAGE_BORROWED_F32))
        runs["f32"].append(lshk_build(lc.STORAGE_F32))
        runs["faiss"].append(faiss_build())

    def cell(key):
        ts = [t for t, _ in runs[key]]
        med = sorted(ts)[len(ts) // 2]
        fmt = (lambda v: f"{v:.2f}") if med < 10 else (lambda v: f"{v:.1f}")
        return fmt(med) + (f" ({', '.join(fmt(t) for t in ts)})" if len(ts) > 1 else ""), runs[key][0][1]

    for key, name, what in (("borrowed", "BORROWED_F32", "int8 codes, ids, centroid codes; W borrowed (not counted)"),
                            ("f32", "F32", "the same plus an f32 copy of W")):
        secs, mem = cell(key)
        print(f"| lshk IVF | int8 codes, storage {name} | {secs} | {mem / 2**20:.1f} | {what} |")
    secs, mem = cell("faiss")
    print(f"| FAISS {faiss.__version__} IVFFlat | nlist {nlist}, <= 64 rows per list | {secs} | "
          f"{mem / 2**20:.1f} | serialized index (f32 lists of [w, b]) |")
    return 0


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


if __name__ == "__main__":
    sys.exit(main())
