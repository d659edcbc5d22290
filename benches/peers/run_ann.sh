#!/usr/bin/env bash
# lshk against FAISS, ScaNN and hnswlib (recall@10 vs us per query, one
# thread): makes a venv with the pinned peers, builds liblshk.so and the W1
# export (release), and runs ann_peers.py. Not run by cargo test.
#
#   benches/peers/run_ann.sh [ann_peers.py options, e.g. --nq 500 --only faiss,lshk]
#
# Environment: LSHK_PEERS_VENV (default /tmp/lshk-peers-venv), PYTHON
# (default python3), W1_DIR (default target/w1-npy), W2V_DIR (default
# ../shared/data/w2v-gutenberg), OUT (default target/ann_results.md).
set -u
cd "$(dirname "$0")/../.."
VENV=${LSHK_PEERS_VENV:-/tmp/lshk-peers-venv}
PY=${PYTHON:-python3}
W1_DIR=${W1_DIR:-target/w1-npy}
W2V_DIR=${W2V_DIR:-../shared/data/w2v-gutenberg}
OUT=${OUT:-target/ann_results.md}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV" || { echo "skipped: cannot create a venv at $VENV with $PY"; exit 0; }
fi
"$VENV/bin/python" -m pip install -q -r benches/peers/requirements.txt \
    || { echo "skipped: pip install -r benches/peers/requirements.txt failed"; exit 0; }

cargo build --release --lib --example export_npy || exit 1
if [ ! -f "$W1_DIR/W.npy" ]; then
    target/release/examples/export_npy --out "$W1_DIR" || exit 1
fi
exec "$VENV/bin/python" benches/peers/ann_peers.py --lib target/release/liblshk.so \
    --w1 "$W1_DIR" --w2v "$W2V_DIR" --out "$OUT" "$@"
