"""Sharded serving on a local Ray cluster (python/examples/sharded.py):
one actor per shard, each loading its index file; the driver's merged
answers equal one index over all rows (exact scoring: ids and score bits);
a killed actor is restarted from its file and the batch is retried, with
no answer lost. Skipped where Ray is not installed (tests/python.rs
installs it into the test venv when pip can)."""

import os
import sys

import numpy as np
import pytest

import lshk

ray = pytest.importorskip("ray")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import sharded  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    yield
    ray.shutdown()


def test_sharded_answers_equal_one_index_and_survive_a_killed_actor(cluster, tmp_path, layer):
    w, b, q = layer
    exact = dict(nprobe=2**32 - 1, reach=0.0, rerank=len(w))
    want = lshk.Index(w, b, source="ivf").query(q, 10, **exact)
    files = sharded.save_shards(w, b, 3, str(tmp_path), source="ivf")
    assert [f for _, f in files] == [0, 1000, 2000]
    si = sharded.ShardedIndex(files)
    got = si.query(q, 10, **exact)
    assert np.array_equal(got[0], want[0])
    assert np.array_equal(got[1].view(np.uint32), want[1].view(np.uint32))
    # Kill one shard's actor: Ray restarts it (it loads its file again)
    # and retries the call; the answers are the same.
    victim = si.actors[1]
    before = ray.get(victim.pid.remote())
    ray.kill(victim, no_restart=False)
    again = si.query(q, 10, **exact)
    assert np.array_equal(again[0], want[0])
    assert np.array_equal(again[1].view(np.uint32), want[1].view(np.uint32))
    assert ray.get(victim.pid.remote()) != before
