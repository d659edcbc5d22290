"""Serving a layer split into shards on Ray: one actor per shard, each
holding an lshk index over its rows, loaded (memory-mapped) from a file; a
driver fans a batch out to every shard and merges the shards' top-k with
lshk.merge_topk. lshk adds no network layer: Ray carries the queries.

A killed actor is restarted by Ray from its file (max_restarts) and the
batch's call to it is retried (max_task_retries), so no answer is lost.

    pip install ./python ray
    python python/examples/sharded.py [--rows 400000] [--shards 1,2,4] [--workers 1,2]

prints queries/s against shards and workers (actors per shard, batches kept
in flight: two per worker) and the merge's cost per query. Figures:
docs/scale.md.
"""

import argparse
import os
import tempfile
import time

import numpy as np

import lshk

try:
    import ray
except ImportError:  # the module still imports (for its helpers)
    ray = None


def shard_bounds(rows, shards):
    """Consecutive row ranges [a, e) of `shards` near-equal shards."""
    cut = [rows * s // shards for s in range(shards + 1)]
    return list(zip(cut, cut[1:]))


def save_shards(w, b, shards, directory, **params):
    """Builds one index per shard over its rows (with the same parameters)
    and saves each to `directory`; returns [(path, first_row)]."""
    out = []
    for s, (a, e) in enumerate(shard_bounds(len(w), shards)):
        idx = lshk.Index(w[a:e], None if b is None else b[a:e], **params)
        path = os.path.join(directory, f"shard-{s}.lshk")
        idx.save(path)
        out.append((path, a))
    return out


if ray is not None:

    @ray.remote(max_restarts=-1, max_task_retries=-1)
    class ShardActor:
        """One shard's index, loaded from its file (mmap: processes on one
        host share its pages). A restart loads it again."""

        def __init__(self, path, first_row):
            self.index = lshk.Index.load(path)
            self.first_row = first_row

        def query(self, q, k, knobs):
            ids, scores = self.index.query(q, k, **knobs)
            return ids, scores, self.first_row

        def pid(self):
            return os.getpid()

    class ShardedIndex:
        """The driver's view of a sharded layer: query() fans the batch out
        to one actor of every shard and merges their top-k. `replicas`
        actors per shard (the workers) take the batches in turn, so that
        batches in flight together run on different processes."""

        def __init__(self, files, replicas=1):
            self.shards = [[ShardActor.remote(p, f) for _ in range(replicas)] for p, f in files]
            self.actors = [reps[0] for reps in self.shards]
            self.turn = 0

        def submit(self, q, k=10, **knobs):
            """The batch's calls, one per shard (Ray object refs)."""
            t, self.turn = self.turn, self.turn + 1
            return [reps[t % len(reps)].query.remote(q, k, knobs) for reps in self.shards]

        def query(self, q, k=10, **knobs):
            return lshk.merge_topk(ray.get(self.submit(q, k, **knobs)), k)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--shards", default="1,2,4")
    ap.add_argument("--workers", default="1,2", help="actors per shard (replicas)")
    ap.add_argument("--cpus", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--secs", type=float, default=3.0)
    a = ap.parse_args()
    if ray is None:
        print("skipped: ray not importable (pip install ray)")
        return
    rng = np.random.default_rng(1)
    centres = rng.standard_normal((1024, a.dim)).astype(np.float32)
    w = (centres[rng.integers(0, 1024, a.rows)]
         + 0.5 * rng.standard_normal((a.rows, a.dim)).astype(np.float32))
    b = (0.1 * rng.standard_normal(a.rows)).astype(np.float32)
    q = (centres[rng.integers(0, 1024, 4096)]
         + 0.5 * rng.standard_normal((4096, a.dim)).astype(np.float32))
    ray.init(num_cpus=a.cpus, include_dashboard=False, log_to_driver=False)
    print(f"layer {a.rows:,} x {a.dim} (IVF source, default knobs), batch {a.batch}, "
          f"{a.cpus} CPUs, lshk {lshk.__version__}, ray {ray.__version__}")
    whole = lshk.Index(w, b, source="ivf")
    want, _ = whole.query(q[:512], 10)
    with tempfile.TemporaryDirectory() as d:
        for shards in [int(x) for x in a.shards.split(",")]:
            sub = os.path.join(d, str(shards))
            os.makedirs(sub)
            files = save_shards(w, b, shards, sub, source="ivf")
            for reps in [int(x) for x in a.workers.split(",")]:
                si = ShardedIndex(files, reps)
                for _ in range(reps):
                    si.query(q[:a.batch])  # every replica loaded
                got, _ = si.query(q[:512])
                rec = np.mean([len(set(got[i]) & set(want[i])) / 10 for i in range(512)])
                # 2 batches in flight per replica; the oldest is merged first.
                inflight, n, s = [], 0, 0
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < a.secs:
                    while len(inflight) < 2 * reps:
                        inflight.append(si.submit(q[s:s + a.batch]))
                        s = (s + a.batch) % (4096 - a.batch)
                    lshk.merge_topk(ray.get(inflight.pop(0)), 10)
                    n += a.batch
                qps = n / (time.perf_counter() - t0)
                for refs in inflight:
                    ray.get(refs)
                # The merge alone, on the shards' answers of one batch.
                parts = ray.get(si.submit(q[:a.batch]))
                t1, nrep = time.perf_counter(), 200
                for _ in range(nrep):
                    lshk.merge_topk(parts, 10)
                merge_us = (time.perf_counter() - t1) / nrep / a.batch * 1e6
                print(f"  {shards} shard(s) x {reps} worker(s): {qps:,.0f} queries/s, "
                      f"merge {merge_us:.2f} us/query, recall@10 against the one index {rec:.3f}")
                for reps_ in si.shards:
                    for x in reps_:
                        ray.kill(x)
    ray.shutdown()


if __name__ == "__main__":
    main()
