#!/usr/bin/env bash
# The FGD graph (the lshk index's graph source) against hnswlib (ip on
# [w, b]; l2 on the FGD transform) and FAISS HNSW, in one process
# (benches/peers/graph_peers.py): makes the peers' venv, builds liblshk.so
# and a W1 export, runs the script.
# Not run by cargo test.
#
#   benches/peers/run_graph.sh [graph_peers.py options, e.g. --m 16 --efc 100]
#
# Environment: LSHK_PEERS_VENV (default /tmp/lshk-peers-venv), PYTHON
# (default python3), W1_ROWS (default 200000: the full 670,091-row W1 takes
# 1.5-2.5 minutes per build per library on one Zen 4 core; for it, pass
# --index-dir DIR and run --build-only per library first, as session 10 did,
# see graph_results.md), W1_DIR (default target/w1-npy-$W1_ROWS),
# W2V_DIR (default ../shared/data/w2v-gutenberg), OUT (default
# target/graph_results.md).
set -u
cd "$(dirname "$0")/../.."
VENV=${LSHK_PEERS_VENV:-/tmp/lshk-peers-venv}
PY=${PYTHON:-python3}
W1_ROWS=${W1_ROWS:-200000}
W1_DIR=${W1_DIR:-target/w1-npy-$W1_ROWS}
W2V_DIR=${W2V_DIR:-../shared/data/w2v-gutenberg}
OUT=${OUT:-target/graph_results.md}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV" || { echo "skipped: cannot create a venv at $VENV with $PY"; exit 0; }
fi
"$VENV/bin/python" -m pip install -q -r benches/peers/requirements.txt \
    || { echo "skipped: pip install -r benches/peers/requirements.txt failed"; exit 0; }

cargo build --release --lib --example export_npy || exit 1
if [ ! -f "$W1_DIR/W.npy" ]; then
    target/release/examples/export_npy --rows "$W1_ROWS" --out "$W1_DIR" || exit 1
fi
exec "$VENV/bin/python" benches/peers/graph_peers.py --lib target/release/liblshk.so \
    --w1 "$W1_DIR" --w2v "$W2V_DIR" --out "$OUT" "$@"
