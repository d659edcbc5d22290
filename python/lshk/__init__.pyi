"""Type stubs of the lshk package (the extension module lshk._lshk).

Every function calls the lshk C API entry point named in its docstring;
see include/lshk.h for the exact semantics, error statuses and limits.

Array arguments: float data must be float32 (TypeError otherwise); integer
arrays of another integer dtype are converted (range-checked copy). 2-D
arrays whose rows are contiguous (inner stride = item size) are used in
place with their row stride; other layouts are copied. Wrong shapes raise
ValueError before any C call; the C API's own errors raise LshkError.

Outputs are allocated before the C call: an output too large for memory
raises MemoryError (numpy's), one whose byte count exceeds the largest
possible array (isize::MAX bytes) raises ValueError. No call raises
pyo3's PanicException. A k larger than what a query can find is not an
error: as in C, the rows past the candidates found are padded with id
2**32-1 and score -inf (so k > rows gives rows real results per query and
k - rows padding), and the outputs are sized nq x k, so a huge k costs
that memory (or raises MemoryError) before any work.
"""

from os import PathLike
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, TypedDict, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str

STATUS: Dict[str, int]
"""The C API's status codes by name, e.g. STATUS['LSHK_STATUS_NON_FINITE'] == 12."""

_F32 = npt.ArrayLike  # float32 data (a float32 ndarray, or a sequence of numbers)
_Int = npt.ArrayLike  # integer data (any integer dtype, range-checked)
_Path = Union[str, bytes, "PathLike[str]", "PathLike[bytes]"]

Family = Union[Literal["simhash", "dwta", "graph"], int]
Storage = Union[Literal["borrowed_f32", "f32", "bf16", "f16", "i8"], int]
Transform = Union[Literal["none", "bias_aug", "mips"], int]
Codes = Union[Literal["none", "i8", "pq4", "pq4_i8"], int]
Policy = Union[Literal["beside", "instead"], int]
GraphStorage = Union[Literal["f32", "bf16", "i8"], int]
Walk = Union[Literal["exact", "int8"], int]

class LshkError(Exception):
    """A failed lshk call.

    status: the C API's lshk_status code (int, see STATUS);
    status_name: its name, e.g. 'LSHK_STATUS_INVALID_ARGUMENT';
    message: lshk_last_error_message(), starting with the C function's name
    (e.g. 'lshk_index_build: bits_per_table is 40; ...'); str(error) is the
    message. Nothing was written or changed by the failed call.
    """

    status: int
    status_name: str
    message: str

class QueryStats(TypedDict):
    queries: int
    candidates_total: int
    candidates_min: int
    candidates_max: int

class IvfStats(TypedDict):
    scanned: int
    reranked: int
    lists: int

class WeightsView(TypedDict):
    storage: str
    w: np.ndarray
    scales: Optional[np.ndarray]
    bias: Optional[np.ndarray]
    rows: int
    dim: int
    w_stride: int

class IulReport(TypedDict):
    round: int
    kept: bool
    positives: int
    negatives: int
    loss_before: float
    loss_after: float
    pos_collision_before: float
    pos_collision_after: float
    neg_collision_before: float
    neg_collision_after: float
    mean_candidates_before: float
    mean_candidates_after: float
    label_recall_before: float
    label_recall_after: float

class Index:
    """The LSH index (lshk_index_*): SimHash or DWTA tables over the rows of
    W, candidates scored with the original W and bias, top-k per query.
    Label-aware buckets (train_labels) and learned planes (train_iul).
    family='graph' is the FGD graph family instead (an HNSW graph over the
    bias-fused rows, lshk_index_build_ex / lshk_index_query_ex): its
    candidates are a graph search's pool; the LSH-only calls (tables,
    train_labels, train_iul, ...) raise LshkError on it.

    Queries are thread-safe and release the GIL; train_labels / train_iul
    need exclusive access (a concurrent query makes them raise RuntimeError).
    """

    def __init__(
        self,
        w: _F32,
        bias: Optional[_F32] = None,
        *,
        family: Family = "simhash",
        bits_per_table: Optional[int] = None,
        tables: int = 50,
        sparsity: int = 0,
        bin_size: int = 8,
        seed: int = 1,
        range_bits: int = 0,
        bucket_cap: int = 0,
        storage: Storage = "f32",
        transform: Transform = "none",
        build_threads: int = 0,
        planes: Optional[_F32] = None,
        dwta_map: Optional[_Int] = None,
        progress: Optional[Callable[[int, int], object]] = None,
        m: Optional[int] = None,
        ef_construction: Optional[int] = None,
        graph_storage: Optional[GraphStorage] = None,
    ) -> None:
        """lshk_index_build over W (rows x dim float32) and an optional bias
        (rows float32). Parameters as lshk_index_params (defaults from
        lshk_index_params_default()), except bits_per_table=None: 12 for
        SimHash (the C default), and for family='dwta' 12 // log2(bin_size)
        bins (4 with the default bin_size 8): DWTA codes are
        K * log2(bin_size) <= 32 bits, so the C default 12 is refused there;
        this gives the same 12-bit codes. storage='borrowed_f32' uses W in place:
        the index keeps a reference to the array; do not change it while the
        index lives. progress(done, total) is called from the building
        thread (with the GIL); an exception it raises stops later calls and
        is re-raised when the build returns. The GIL is released meanwhile.

        family='graph' (lshk_index_build_ex): m (links per node, 2..=256,
        default 16), ef_construction (default 200) and graph_storage (the
        graph's own rows: 'f32', 'bf16', 'i8') are lshk_graph_params'
        fields, and build_threads / seed go to the graph too; transform
        must stay 'none' (the graph has its own FGD transform). m,
        ef_construction and graph_storage given with another family raise
        ValueError.
        """
    @staticmethod
    def load(path: _Path, borrowed_w: Optional[_F32] = None) -> "Index":
        """lshk_index_load: a file saved by Index.save, lshk_index_save or
        lshk::Index::save. borrowed_w: the same W as at build time for a file
        saved from a 'borrowed_f32' index (its weights are not stored), else
        None. The file is memory-mapped. A borrowed_w whose shape or row
        stride differs from the file's raises ValueError; a corrupt or
        unreadable file raises LshkError (LSHK_STATUS_BAD_FILE_FORMAT,
        LSHK_STATUS_IO_ERROR, ...) whether or not borrowed_w is given."""
    def save(self, path: _Path) -> None:
        """lshk_index_save (written to a temporary file, then renamed)."""
    @overload
    def query(
        self, q: _F32, k: int = 10, *, min_count: Optional[int] = None, max_candidates: Optional[int] = None,
        probes: Optional[int] = None, bits_per_table: Optional[int] = None, stats: Literal[False] = False,
        ef: Optional[int] = None, walk: Optional[Walk] = None, rerank: Optional[int] = None,
    ) -> Tuple[np.ndarray, np.ndarray]: ...
    @overload
    def query(
        self, q: _F32, k: int = 10, *, min_count: Optional[int] = None, max_candidates: Optional[int] = None,
        probes: Optional[int] = None, bits_per_table: Optional[int] = None, stats: Literal[True],
        ef: Optional[int] = None, walk: Optional[Walk] = None, rerank: Optional[int] = None,
    ) -> Tuple[np.ndarray, np.ndarray, QueryStats]: ...
    def query(self, q: _F32, k: int = 10, **kw: object) -> tuple:  # type: ignore[misc]
        """lshk_index_query: the top k rows of W q + b among each query's
        candidates. q: (nq, dim) or (dim,). Returns (ids uint32, scores
        float32) of shape (nq, k) or (k,): descending, ties by smaller id,
        padded with 2**32-1 / -inf when a query has fewer than k candidates
        (always when k > rows). The gather options are those of
        lshk_gather_params; stats=True adds the candidate counts.

        A family='graph' index (lshk_index_query_ex) takes ef (pool size,
        default 100), walk ('exact' or 'int8') and rerank (int8 walk: the
        pool's best `rerank` are the candidates, 0 = the whole pool), the
        fields of lshk_graph_query_params; given to an LSH index they raise
        ValueError. Scores are exact logits of the index's W and bias."""
    def memory_bytes(self) -> int:
        """lshk_index_memory_bytes."""
    @property
    def shape(self) -> Tuple[int, int, int, int]:
        """(rows, dim, K, L) (lshk_index_shape; K = L = 0 for a graph)."""
    @property
    def family(self) -> Family:
        """'simhash', 'dwta' or 'graph'."""
    def weights(self) -> WeightsView:
        """lshk_index_weights as read-only numpy views of the index's memory
        (no copy; they keep the index alive): w is float32 (f32 storages),
        uint16 bf16 bits (bf16), float16 (f16) or int8 with per-row scales
        (i8). They plug into gathered_matmul."""
    def train_labels(
        self, queries: _F32, label_offsets: _Int, labels: _Int, *, label_cap: int = 64,
        policy: Policy = "beside",
    ) -> None:
        """lshk_index_train_labels (HALOS label-aware buckets): query i's
        labels are labels[label_offsets[i]:label_offsets[i+1]]. Once per
        index; on error the index is unchanged."""
    def label_info(self) -> Optional[Dict[str, object]]:
        """lshk_index_label_info: None, or {'label_cap': int, 'policy': str}."""
    def train_iul(
        self, queries: _F32, label_offsets: _Int, labels: _Int, *, rounds: int = 3, epochs: int = 4,
        batch: int = 256, t1: float = 0.0, t2: float = 0.0, learning_rate: float = 0.01,
        validation_fraction: float = 0.1, max_pairs: int = 0, rank_thresholds: bool = False,
        keep_best: bool = False, seed: int = 1,
    ) -> List[IulReport]:
        """lshk_index_train_iul (learned SimHash planes); one report per
        round. On error the index is unchanged."""
    def simhash(self) -> Optional["SimHash"]:
        """The index's SimHash family (lshk_index_simhash), a view that keeps
        the index alive; None for a DWTA index."""
    def dwta(self) -> Optional["Dwta"]:
        """The index's DWTA family (lshk_index_dwta); None for SimHash."""
    def tables(self) -> "Tables":
        """The index's tables (lshk_index_tables), a view."""

class Ivf:
    """The IVF index (lshk_ivf_*), the recommended top-k index: k-means
    lists with int8 (or 4-bit PQ, or both: "pq4_i8" scans 4-bit codes and
    re-scores the best 256 from int8 codes) codes, the best lists scanned
    per query (adaptively, by `reach`), the best candidates re-scored
    exactly."""

    def __init__(
        self,
        w: _F32,
        bias: Optional[_F32] = None,
        *,
        nlist: int = 0,
        iters: int = 10,
        train_rows: int = 0,
        codes: Codes = "i8",
        borrow: Optional[bool] = None,
        threads: int = 0,
        pq_m: int = 0,
        seed: Optional[int] = None,
    ) -> None:
        """lshk_ivf_build (parameters as lshk_ivf_params; None = the C
        default). borrow=True uses W in place for the re-ranking: the index
        keeps a reference; do not change W while it lives. borrow=None (the
        default) borrows unless codes="none" (which scores the index's own
        f32 copy and cannot borrow; borrow=True with it raises LshkError)."""
    @staticmethod
    def load(path: _Path, w: Optional[_F32] = None) -> "Ivf":
        """lshk_ivf_load; w: the same W as at build time when it was built
        with borrow=True (its rows are not stored), else None. A w of
        another shape raises ValueError; a corrupt or unreadable file raises
        LshkError (LSHK_STATUS_BAD_FILE_FORMAT, ...) whether or not w is
        given."""
    def save(self, path: _Path) -> None:
        """lshk_ivf_save."""
    @overload
    def query(
        self, q: _F32, k: int = 10, *, nprobe: Optional[int] = None, rerank: Optional[int] = None,
        reach: Optional[float] = None, stats: Literal[False] = False,
    ) -> Tuple[np.ndarray, np.ndarray]: ...
    @overload
    def query(
        self, q: _F32, k: int = 10, *, nprobe: Optional[int] = None, rerank: Optional[int] = None,
        reach: Optional[float] = None, stats: Literal[True],
    ) -> Tuple[np.ndarray, np.ndarray, IvfStats]: ...
    def query(self, q: _F32, k: int = 10, **kw: object) -> tuple:  # type: ignore[misc]
        """lshk_ivf_query: top k of W q + b per query (defaults of
        lshk_ivf_search_default: reach 3, no nprobe cap, rerank 32).
        Returns (ids, scores) shaped (nq, k) or (k,) for a 1-D q, padded
        with 2**32-1 / -inf when the visited lists hold fewer than k rows
        (always when k > rows)."""
    def calibrate(
        self, q: _F32, k: int = 10, target: float = 0.99, *, rerank: int = 32, threads: int = 0,
    ) -> Dict[str, Any]:
        """lshk_ivf_calibrate: the search parameters reaching `target`
        recall@k on the sample queries q (2-D, held-out queries of the real
        workload). Keys: nprobe, rerank, reach (pass them to query), recall,
        recall_lower (its 95 % lower bound, which must reach the target),
        scanned, met, fixed (nprobe, recall, scanned), adaptive (reach,
        recall, scanned)."""
    @property
    def shape(self) -> Tuple[int, int, int]:
        """(rows, dim, nlist)."""
    def memory_bytes(self) -> int:
        """lshk_ivf_memory_bytes (a borrowed W is not counted)."""
    def train_labels(
        self, queries: _F32, label_offsets: _Int, labels: _Int, *, label_cap: int = 64,
        policy: Policy = "beside",
    ) -> None:
        """lshk_ivf_train_labels (label-aware lists): each list gains
        ("beside") or is replaced by ("instead") the label_cap most frequent
        labels of the training queries that visit it first. Once per index,
        not with codes="pq4" or "pq4_i8"; on error the index is unchanged."""
    def label_info(self) -> Optional[Dict[str, object]]:
        """lshk_ivf_label_info: None, or {'label_cap': int, 'policy': str}."""

class SimHash:
    """A SimHash family (lshk_simhash_*)."""

    def __init__(self, dim: int, bits_per_table: int, tables: int, *, sparsity: int = 0, seed: int = 1) -> None:
        """lshk_simhash_new."""
    @staticmethod
    def from_planes(planes: _F32, bits_per_table: int, tables: int) -> "SimHash":
        """lshk_simhash_from_planes: planes of shape (K*L, dim)."""
    @property
    def shape(self) -> Tuple[int, int, int]:
        """(dim, K, L)."""
    def planes(self) -> np.ndarray:
        """A copy of the planes, (K*L, dim) float32."""
    def hash(self, x: _F32) -> np.ndarray:
        """lshk_simhash_hash: codes (n, L) uint32 ((L,) for a 1-D x)."""
    def project(self, x: _F32) -> np.ndarray:
        """lshk_simhash_project: (n, L*K) float32 projections."""

class Dwta:
    """A DWTA family (lshk_dwta_*)."""

    def __init__(self, dim: int, bins_per_table: int, tables: int, *, bin_size: int = 8, seed: int = 1) -> None:
        """lshk_dwta_new."""
    @staticmethod
    def from_map(map: _Int, dim: int, bins_per_table: int, tables: int, bin_size: int) -> "Dwta":
        """lshk_dwta_from_map."""
    @property
    def shape(self) -> Tuple[int, int, int, int]:
        """(dim, K, L, bin_size)."""
    def map(self) -> np.ndarray:
        """A copy of the bin map (K*L*bin_size uint32)."""
    def hash(self, x: _F32) -> np.ndarray:
        """lshk_dwta_hash_dense: codes (n, L) uint32."""
    def hash_sparse(self, indptr: _Int, indices: _Int, values: _F32) -> np.ndarray:
        """lshk_dwta_hash_sparse over CSR rows: codes (n, L)."""

class Tables:
    """LSH tables (lshk_tables_*)."""

    def __init__(self, codes: _Int, range_bits: int, *, bucket_cap: int = 0, seed: int = 1, threads: int = 0) -> None:
        """lshk_tables_build from codes (n, L)."""
    @property
    def shape(self) -> Tuple[int, int, int]:
        """(n, L, range_bits)."""
    def memory_bytes(self) -> int: ...
    def gather(
        self, codes: _Int, *, min_count: Optional[int] = None, max_candidates: Optional[int] = None,
        probes: Optional[int] = None, bits_per_table: Optional[int] = None, projections: Optional[_F32] = None,
        forced_offsets: Optional[_Int] = None, forced_ids: Optional[_Int] = None, counts: bool = False,
    ) -> tuple:
        """lshk_tables_gather: candidates of queries given by their codes
        (q, L), as CSR (ids uint32, offsets uint64 of q + 1), plus the
        per-id table counts with counts=True."""

def gathered_matmul(
    w: npt.ArrayLike, q: _F32, ids: _Int, offsets: Optional[_Int] = None, *, bias: Optional[_F32] = None,
    scales: Optional[_F32] = None, bf16: bool = False,
) -> np.ndarray:
    """lshk_gathered_matmul_{f32,f16,bf16,i8}: out[j] = W[ids[j]] . q[i] +
    bias[ids[j]] for j in query i's segment offsets[i]:offsets[i+1]
    (offsets None: one query). The kernel follows w's dtype: float32,
    float16, int8 (with per-row `scales`), or uint16 bf16 bits with
    bf16=True."""

def topk(scores: _F32, k: int, offsets: Optional[_Int] = None, ids: Optional[_Int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """lshk_topk per CSR segment: (ids, scores) of shape (nq, k) ((k,)
    without offsets); ids default to the position in the segment. A segment
    with fewer than k non-NaN scores (e.g. k > len(scores)) is padded with
    2**32-1 / -inf."""

@overload
def softmax(scores: _F32, offsets: Optional[_Int] = None, *, return_lse: Literal[False] = False) -> np.ndarray: ...
@overload
def softmax(scores: _F32, offsets: Optional[_Int] = None, *, return_lse: Literal[True]) -> Tuple[np.ndarray, np.ndarray]: ...
def quantize_rows_i8(w: _F32) -> Tuple[np.ndarray, np.ndarray]:
    """lshk_quantize_rows_i8: (int8 codes (rows, dim), float32 scales)."""
def to_bf16(x: _F32) -> np.ndarray:
    """lshk_convert_f32_to_bf16: bf16 bits as uint16."""
def isa_active() -> str:
    """The SIMD tier lshk runs on: 'scalar', 'portable', 'avx2' or 'avx512'."""
