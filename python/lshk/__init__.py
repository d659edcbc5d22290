"""lshk: SIMD retrieval indexes for sublinear wide output layers.

Python bindings of the lshk library (see python/README.md in its
repository): every function calls lshk's C API entry point of the same
name, linked into this extension module, so arguments are checked, results
are computed and errors are reported exactly as in C and C++ (`LshkError`
carries the C status and message; `UnsupportedError`, a subclass, is an
operation the index's candidate source does not have), and index files are
interchangeable with `lshk_index_save` / `lshk_index_load` /
`lshk::Index`.

`Index` is the one retrieval object: `Index(w, b, source=...)` with the
candidate source "simhash" or "dwta" (LSH tables; label-aware buckets,
IUL), "ivf" (k-means lists with int8 / 4-bit codes; calibration),
"graph" (the FGD graph) or "forest" (the hashing forest; rebuild), each
with its own knobs, and `query(q, k)` for every one of them.
Kernels: `SimHash`, `Dwta`, `Tables`, `gathered_matmul`, `topk`, `merge_topk`,
`softmax`, `quantize_rows_i8`, `to_bf16`; training kernels:
`softmax_xent_csr`, `gather_dq`, `rows_update_sgd`, `rehash_next`;
holographic reduced representations: `Hrr` (bind, unbind, projection by
FFT) and `hrr_class_vectors`.

`lshk.torch` (needs PyTorch: `pip install ./python[torch]`) has the
PyTorch modules: `TopKHead` (top-k inference through an index) and
`SampledSoftmax` (a sampled-softmax output layer trained on these
kernels) and `HrrOutput` (the HRR output layer). `import lshk` itself does not import torch.

Arrays: float data must be float32 (a TypeError otherwise); integer arrays
of another integer dtype are converted (range-checked copy). Arrays whose
rows are contiguous are used in place (with their row stride); other
layouts are copied first. Queries and builds release the GIL.
"""

from ._lshk import (  # noqa: F401
    STATUS,
    Dwta,
    Hrr,
    Index,
    LshkError,
    SimHash,
    Tables,
    UnsupportedError,
    __version__,
    gather_dq,
    gathered_matmul,
    hrr_class_vectors,
    isa_active,
    merge_topk,
    quantize_rows_i8,
    rehash_next,
    rows_update_sgd,
    softmax,
    softmax_xent_csr,
    to_bf16,
    topk,
)

__all__ = [
    "STATUS",
    "Dwta",
    "Hrr",
    "Index",
    "LshkError",
    "SimHash",
    "Tables",
    "UnsupportedError",
    "__version__",
    "gather_dq",
    "gathered_matmul",
    "hrr_class_vectors",
    "isa_active",
    "merge_topk",
    "quantize_rows_i8",
    "rehash_next",
    "rows_update_sgd",
    "softmax",
    "softmax_xent_csr",
    "to_bf16",
    "topk",
]
