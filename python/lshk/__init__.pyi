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
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple, TypedDict, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str

STATUS: Dict[str, int]
"""The C API's status codes by name, e.g. STATUS['LSHK_STATUS_NON_FINITE'] == 12."""

_F32 = npt.ArrayLike  # float32 data (a float32 ndarray, or a sequence of numbers)
_Int = npt.ArrayLike  # integer data (any integer dtype, range-checked)
_Path = Union[str, bytes, "PathLike[str]", "PathLike[bytes]"]

Source = Union[Literal["simhash", "dwta", "graph", "ivf", "forest"], int]
Storage = Union[Literal["f32", "borrowed", "borrowed_f32", "bf16", "f16", "i8"], int]
Transform = Union[Literal["none", "bias_aug", "mips"], int]
Codes = Union[Literal["none", "i8", "pq4", "pq4_i8"], int]
Policy = Union[Literal["beside", "instead"], int]
GraphStorage = Union[Literal["f32", "bf16", "i8"], int]
Walk = Union[Literal["exact", "int8"], int]
BudgetRule = Union[Literal["mid_bucket", "mid_bucket_rotated", "whole_buckets"], int]

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

class UnsupportedError(LshkError):
    """LSHK_STATUS_UNSUPPORTED (13): the operation does not apply to the
    index's candidate source (calibrate on a source other than IVF, rebuild
    on one other than the forest, train_labels on the graph or the forest,
    tables() or train_iul without LSH tables, ...); the message names both."""

class QueryStats(TypedDict):
    queries: int
    candidates_total: int
    candidates_min: int
    candidates_max: int
    lists: int
    """IVF: lists visited (0 for other sources)."""
    scanned: int
    """IVF: rows scored in the visited lists (0 for other sources)."""
    reranked: int
    """IVF: rows re-scored exactly (0 for other sources)."""

class Description(TypedDict):
    source: str
    storage: str
    transform: str
    rows: int
    dim: int
    bits_per_table: int
    """LSH: K; 0 for other sources."""
    tables: int
    """LSH: L; forest: trees; 0 for other sources."""
    nlist: int
    """IVF: lists; 0 for other sources."""
    codes: Optional[str]
    """IVF: the lists' codes; other sources: 'i8' with row codes
    (set_codes), else None."""
    labelled: bool

class IvfQuery(TypedDict):
    nprobe: int
    rerank: int
    reach: float
    refine: int

class Calibration(TypedDict):
    query: IvfQuery
    """The IVF query knobs to pass on: index.query(q, k, **cal["query"])."""
    recall: float
    recall_lower: float
    scanned: float
    met: bool
    fixed: Tuple[int, float, float]
    adaptive: Tuple[float, float, float]

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
    """The retrieval index (lshk_index_*) over the rows of W: a candidate
    source proposes rows per query, the index scores them with the original
    W and bias (in `storage`) and returns the top k.

    Sources (`source=`): 'simhash' and 'dwta' (LSH tables; label-aware
    buckets with train_labels, learned planes with train_iul), 'ivf' (k-means
    lists with int8 / 4-bit codes and an exact re-rank; calibrate, label-aware
    lists with train_labels), 'graph' (the FGD graph) and 'forest' (the
    hashing forest; rebuild after W changes). Each source reads its own build
    and query knobs; a knob of another source raises ValueError. A call the
    source lacks raises UnsupportedError.

    Queries are thread-safe and release the GIL; train_labels, train_iul,
    rebuild and set_codes need exclusive access (a concurrent query makes them raise
    RuntimeError).
    """

    def __init__(
        self,
        w: _F32,
        b: Optional[_F32] = None,
        *,
        source: Source = "simhash",
        storage: Storage = "f32",
        transform: Transform = "none",
        seed: Optional[int] = None,
        build_threads: int = 0,
        progress: Optional[Callable[[int, int], object]] = None,
        # LSH ('simhash', 'dwta')
        bits_per_table: Optional[int] = None,
        tables: int = 50,
        sparsity: int = 0,
        bin_size: int = 8,
        range_bits: int = 0,
        bucket_cap: int = 0,
        planes: Optional[_F32] = None,
        dwta_map: Optional[_Int] = None,
        # 'ivf'
        nlist: int = 0,
        iters: int = 10,
        train_rows: int = 0,
        codes: Codes = "i8",
        pq_m: int = 0,
        row_weights: Optional[_F32] = None,
        # 'graph'
        m: int = 16,
        ef_construction: int = 200,
        graph_storage: GraphStorage = "f32",
        # 'forest'
        trees: int = 8,
        leaf_size: int = 64,
        normalize_rows: bool = True,
    ) -> None:
        """lshk_index_build over W (rows x dim float32) and an optional bias
        b (rows float32). Knobs as lshk_index_params (None or left out = the
        C default of lshk_index_params_default()); seed is the source's own
        (lsh.seed, ivf.seed, graph.seed or forest.seed).

        storage: the weights the scores come from: 'f32' (a copy, default),
        'borrowed' (W itself, used in place: the index keeps a reference to
        the array; do not change it while the index lives, except rows
        changed before rebuild() on a forest), 'bf16', 'f16', 'i8'. The IVF
        source re-ranks from f32 rows, the index's copy or the borrowed W. A
        borrowed W must be a float32 array whose rows are contiguous (a W
        that would need a copy raises ValueError).

        LSH: bits_per_table=None is 12 for SimHash (the C default), and for
        'dwta' 12 // log2(bin_size) bins (4 with the default bin_size 8):
        DWTA codes are K * log2(bin_size) <= 32 bits, so the C default 12 is
        refused there; this gives the same 12-bit codes. transform ('none',
        'bias_aug', 'mips') steers LSH retrieval only; other sources refuse
        one (LshkError).

        IVF: nlist (0 = round(4 sqrt(rows))), iters, train_rows, codes
        ('i8', 'pq4', 'pq4_i8', 'none'), pq_m, row_weights (rows floats
        steering the k-means). Graph: m, ef_construction, graph_storage (the
        graph's own rows: 'f32', 'bf16', 'i8'). Forest: trees, leaf_size,
        normalize_rows; storage 'f32' or 'borrowed' only.

        progress(done, total) is called from the building thread (with the
        GIL); an exception it raises stops later calls and is re-raised when
        the build returns. The GIL is released meanwhile.
        """
    @staticmethod
    def load(path: _Path, w: Optional[_F32] = None, w_stride: int = 0) -> "Index":
        """lshk_index_load: a file saved by Index.save, lshk_index_save or
        lshk::Index::save, or one of lshk 0.2's IVF, graph and forest files
        (loaded as an index of that source). w: the W the index was built on
        when its file does not hold it (a 'borrowed' index; a borrowing 0.2
        IVF file; every 0.2 graph and forest file), else None; it is used in
        place, as at build. w_stride: 0 = w's own row stride (a numpy array
        carries it); another value must equal it. The file is memory-mapped.
        A w whose shape or row stride differs from the file's, or given for
        a file that holds its weights, raises ValueError; a corrupt or
        unreadable file raises LshkError (LSHK_STATUS_BAD_FILE_FORMAT,
        LSHK_STATUS_IO_ERROR, ...) whether or not w is given."""
    def save(self, path: _Path) -> None:
        """lshk_index_save (written to a temporary file, then renamed)."""
    @overload
    def query(
        self, q: _F32, k: int = 10, *, stats: Literal[False] = False,
        min_count: Optional[int] = None, max_candidates: Optional[int] = None, probes: Optional[int] = None,
        bits_per_table: Optional[int] = None, nprobe: Optional[int] = None, rerank: Optional[int] = None,
        reach: Optional[float] = None, refine: Optional[int] = None, ef: Optional[int] = None,
        walk: Optional[Walk] = None, set_size: Optional[int] = None,
        confidence: Optional[float] = None, threads: int = 0,
    ) -> Tuple[np.ndarray, np.ndarray]: ...
    @overload
    def query(
        self, q: _F32, k: int = 10, *, stats: Literal[True],
        min_count: Optional[int] = None, max_candidates: Optional[int] = None, probes: Optional[int] = None,
        bits_per_table: Optional[int] = None, nprobe: Optional[int] = None, rerank: Optional[int] = None,
        reach: Optional[float] = None, refine: Optional[int] = None, ef: Optional[int] = None,
        walk: Optional[Walk] = None, set_size: Optional[int] = None,
        confidence: Optional[float] = None, threads: int = 0,
    ) -> Tuple[np.ndarray, np.ndarray, QueryStats]: ...
    def query(self, q: _F32, k: int = 10, **kw: object) -> tuple:  # type: ignore[misc]
        """lshk_index_query: the top k rows of W q + b among each query's
        candidates. q: (nq, dim) or (dim,). Returns (ids uint32, scores
        float32) of shape (nq, k) or (k,): descending, ties by smaller id,
        padded with 2**32-1 / -inf when a query has fewer than k candidates
        (always when k > rows). stats=True adds the counts of
        lshk_query_stats.

        The knobs of lshk_query_params, each for its source (None = the C
        default): LSH min_count, max_candidates, probes (SimHash),
        bits_per_table; IVF nprobe, reach (adaptive stop; 0 = exactly nprobe
        lists), rerank (exact re-scores; 0 = the top k by the codes, scored
        from the stored W), refine (pq4_i8's int8 stage); graph ef, walk
        ('exact', 'int8'), rerank (the pool's best that become candidates,
        0 = the whole pool); forest set_size, confidence (HF-A's tau_cp in
        [0, 1]: each sample keeps the fewest of its set, by logit, whose
        softmax mass in the set reaches it, at least k; 0 = all). threads: the batch split over
        that many threads (0 and 1 the calling thread, 2**32-1 every core;
        the same answers for every count; the index keeps the threads
        between calls until it is freed). Scores are exact logits of the
        index's W (in its storage) and bias."""
    def candidates(
        self, q: _F32, k: int = 0, *,
        min_count: Optional[int] = None, max_candidates: Optional[int] = None, probes: Optional[int] = None,
        bits_per_table: Optional[int] = None, nprobe: Optional[int] = None, rerank: Optional[int] = None,
        reach: Optional[float] = None, refine: Optional[int] = None, ef: Optional[int] = None,
        walk: Optional[Walk] = None, set_size: Optional[int] = None,
        confidence: Optional[float] = None,
    ) -> Tuple[np.ndarray, np.ndarray]:
        """lshk_index_candidates: the candidate sets the source hands the
        scorer for a top-k query with these knobs, unscored, as CSR: query
        i's ids (uint32, distinct) are ids[offsets[i]:offsets[i+1]]
        (offsets uint64, nq + 1 entries; one query for a 1-D q). Ascending
        for LSH and the forest (whose set is the max(set_size, k) classes of
        largest cosine), best first for IVF and the graph. The sets LSH
        negative sampling and the forest's selective softmax train on."""
    @overload
    def union(self, ids: _Int, *, cap: int = 0, seed: int = 0, counts: Literal[False] = False) -> np.ndarray: ...
    @overload
    def union(self, ids: _Int, *, cap: int = 0, seed: int = 0, counts: Literal[True]) -> Tuple[np.ndarray, np.ndarray]: ...
    def union(self, ids: _Int, *, cap: int = 0, seed: int = 0, counts: bool = False) -> Any:  # type: ignore[misc]
        """lshk_index_union: the distinct ids (ascending, each < rows) of
        `ids` (e.g. candidates() over a batch), with their counts when
        counts=True; more than `cap` (0 = no cap) are cut to `cap` drawn
        without replacement with probabilities proportional to their counts
        (seeded). Any source."""
    def calibrate(
        self, q: _F32, k: int = 10, target: float = 0.99, *, rerank: int = 32, threads: int = 0,
    ) -> Calibration:
        """lshk_index_calibrate (IVF source; UnsupportedError otherwise): the
        query knobs reaching `target` recall@k on the sample queries q
        (2-D, held-out queries of the real workload). Keys: query (the IVF
        knobs: index.query(q, k, **cal['query'])), recall, recall_lower (its
        95 % lower bound, which must reach the target), scanned, met, fixed
        (nprobe, recall, scanned), adaptive (reach, recall, scanned)."""
    def rebuild(self, seed: Optional[int] = None) -> None:
        """lshk_index_rebuild (forest source; UnsupportedError otherwise):
        builds the trees again from the index's current W, e.g. after the
        caller changed a borrowed W in place (while no call used the index),
        with a new seed when given. On error the index is unchanged."""
    def set_codes(self, codes: Union[str, int, None] = None, rerank: int = 32) -> None:
        """lshk_index_set_codes (LSH, graph and forest sources;
        UnsupportedError on IVF, whose lists have codes): 'i8' (the default)
        scores every candidate from int8 codes of the rows (rows x dim bytes
        more), then the best max(rerank, k) of each query exactly from W,
        which answer; 'none' scores every candidate exactly. The codes
        follow update_rows, rehashes and rebuild, and are saved. Exclusive
        access. ValueError: an unknown name; LshkError: 4-bit codes, rerank
        0 with 'i8', storage 'i8'."""
    def update_rows(self, ids: _Int, rows: Optional[_F32] = None, bias: Optional[_F32] = None) -> None:
        """lshk_index_update_rows (LSH sources; UnsupportedError otherwise):
        writes new values of rows `ids` of W (`rows`: one row of dim floats
        per id) and of their bias (`bias`: one value per id, only for an
        index with a bias) and marks them dirty; the tables keep the old
        buckets until rehash_dirty. A borrowed W: change it in place and
        pass rows=None (marks only). On error the index is unchanged."""
    def rehash_rows(self, ids: _Int) -> int:
        """lshk_index_rehash_rows (LSH sources): rehashes rows `ids` from
        the current W into every table (their dirty marks cleared); returns
        the number rehashed. Afterwards queries equal those of a fresh build
        over the current W and bias (f32 and borrowed storage)."""
    def rehash_dirty(self) -> int:
        """lshk_index_rehash_dirty (LSH sources): rehashes every row marked
        by update_rows since its last rehash; returns their number."""
    def dirty_rows(self) -> int:
        """lshk_index_dirty_rows: rows updated since their last rehash."""
    def memory_bytes(self) -> int:
        """lshk_index_memory_bytes (a borrowed W is not counted; an IVF
        index grows by the lists its batches share, kept as panels, up to
        its int8 codes again)."""
    def describe(self) -> Description:
        """lshk_index_describe."""
    @property
    def source(self) -> str:
        """'simhash', 'dwta', 'graph', 'ivf' or 'forest'."""
    @property
    def storage(self) -> str:
        """'borrowed', 'f32', 'bf16', 'f16' or 'i8'."""
    @property
    def rows(self) -> int: ...
    @property
    def dim(self) -> int: ...
    def weights(self) -> WeightsView:
        """lshk_index_weights as read-only numpy views of the index's memory
        (no copy; they keep the index alive): w is float32 (f32 storages),
        uint16 bf16 bits (bf16), float16 (f16) or int8 with per-row scales
        (i8). They plug into gathered_matmul."""
    def train_labels(
        self, queries: _F32, label_offsets: _Int, labels: _Int, *, label_cap: int = 64,
        policy: Policy = "beside",
    ) -> None:
        """lshk_index_train_labels: query i's labels are
        labels[label_offsets[i]:label_offsets[i+1]]. LSH sources: every
        bucket gains ('beside') or is replaced by ('instead') its label_cap
        most frequent labels (label-aware buckets, lshk's extension; not HALOS's IUL); IVF: the same for
        each list, from the queries that visit it first (not with codes
        'pq4' / 'pq4_i8'). UnsupportedError for the graph and the forest.
        Once per index; on error the index is unchanged."""
    def label_info(self) -> Optional[Dict[str, object]]:
        """lshk_index_label_info: None, or {'label_cap': int, 'policy': str}."""
    def train_iul(
        self, queries: _F32, label_offsets: _Int, labels: _Int, *, rounds: int = 3, epochs: int = 4,
        batch: int = 256, t1: float = 0.0, t2: float = 0.0, learning_rate: float = 0.01,
        validation_fraction: float = 0.1, max_pairs: int = 0, rank_thresholds: bool = False,
        keep_best: bool = False, to_convergence: bool = False, collision_loss: bool = False,
        seed: int = 1,
    ) -> List[IulReport]:
        """lshk_index_train_iul (learned SimHash planes; UnsupportedError
        without LSH tables); one report per round. On error the index is
        unchanged. to_convergence: Adam epochs until the round's loss falls
        by < 0.1 % (epochs the most); collision_loss: the log loss on the
        relaxed all-K-bits collision (LSHK_IUL_TO_CONVERGENCE,
        LSHK_IUL_COLLISION_LOSS)."""
    def simhash(self) -> Optional["SimHash"]:
        """The index's SimHash family (lshk_index_simhash), a view that keeps
        the index alive; None for another source."""
    def dwta(self) -> Optional["Dwta"]:
        """The index's DWTA family (lshk_index_dwta); None for another source."""
    def tables(self) -> "Tables":
        """The index's LSH tables (lshk_index_tables), a view;
        UnsupportedError for a source without tables."""

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
    def memory_bytes(self) -> int:
        """lshk_tables_memory_bytes."""
    def gather(
        self, codes: _Int, *, min_count: Optional[int] = None, max_candidates: Optional[int] = None,
        probes: Optional[int] = None, bits_per_table: Optional[int] = None, projections: Optional[_F32] = None,
        forced_offsets: Optional[_Int] = None, forced_ids: Optional[_Int] = None, counts: bool = False,
        rule: Optional[BudgetRule] = None, budget_seed: int = 0,
    ) -> tuple:
        """lshk_tables_gather: candidates of queries given by their codes
        (q, L), as CSR (ids uint32, offsets uint64 of q + 1), plus the
        per-id table counts with counts=True. With `rule`,
        lshk_tables_gather_budget: how max_candidates (forced ids included)
        cuts a query's buckets: 'mid_bucket' (lshk_tables_gather's rule),
        'mid_bucket_rotated' (tables from a per-query start, the cut bucket
        read from a per-query position; `budget_seed` seeds both) or
        'whole_buckets' (LSH negative sampling's rule: whole buckets, table
        by table from the per-query start, stopping before the first table
        that would pass the budget)."""

class Hrr:
    """FFT plans and buffers for vectors of `dim` floats (lshk_hrr_*). The C
    handle serves one thread at a time: each object has its own lock, so
    calls from several threads on one object run one after another (use
    one object per thread for parallel calls)."""

    def __init__(self, dim: int, *, isa: Optional[Union[str, int]] = None) -> None:
        """lshk_hrr_new (lshk_hrr_new_isa with `isa`: "scalar", "portable",
        "avx2", "avx512"); 1 <= dim <= 2^24."""
    @property
    def dim(self) -> int: ...
    def bind(self, x: _F32, y: _F32) -> np.ndarray:
        """lshk_hrr_bind: x[r] ⊛ y[r], the circular convolution; y (n, dim) or
        (dim,), x 1 row or n. Returns y's shape."""
    def unbind(self, key: _F32, s: _F32, inverse: Optional[Union[str, int]] = None) -> np.ndarray:
        """lshk_hrr_unbind: key[r]† ⊛ s[r]; inverse "approx" (default: the
        circular correlation with key) or "exact" (ifft(fft(s) / fft(key)))."""
    def project(self, x: _F32) -> np.ndarray:
        """lshk_hrr_project: real(ifft(fft(x) / (|fft(x)| + 1e-5))) row by row."""

def hrr_class_vectors(seed: int, dim: int, m: int, *, first: int = 0, threads: int = 0) -> np.ndarray:
    """lshk_hrr_class_vectors: rows first..first+m of the projected class
    vectors of (seed, dim), (m, dim) float32; frozen bits. threads 0:
    every core the work pays for (at least 4,096 coordinates, m * dim,
    a thread)."""

def gathered_matmul(
    w: npt.ArrayLike, q: _F32, ids: _Int, offsets: Optional[_Int] = None, *, bias: Optional[_F32] = None,
    scales: Optional[_F32] = None, bf16: bool = False,
) -> np.ndarray:
    """lshk_gathered_matmul: out[j] = W[ids[j]] . q[i] + bias[ids[j]] for j
    in query i's segment offsets[i]:offsets[i+1] (offsets None: one query).
    W's element type (lshk_weights_view.storage) follows w's dtype:
    float32, float16, int8 (with per-row `scales`), or uint16 bf16 bits
    with bf16=True."""

def topk(scores: _F32, k: int, offsets: Optional[_Int] = None, ids: Optional[_Int] = None) -> Tuple[np.ndarray, np.ndarray]:
    """lshk_topk per CSR segment: (ids, scores) of shape (nq, k) ((k,)
    without offsets); ids default to the position in the segment. A segment
    with fewer than k non-NaN scores (e.g. k > len(scores)) is padded with
    2**32-1 / -inf."""

def merge_topk(parts: Sequence[Tuple[np.ndarray, np.ndarray, int]], k: int) -> Tuple[np.ndarray, np.ndarray]:
    """lshk_topk_merge: the top k over shards' answers. parts: (ids,
    scores, first_row) per shard, as Index.query returns them for the same
    queries, with the shard's own row ids (2**32-1 = padding); returns
    (ids, scores) of shape (nq, k) with global ids (first_row + id), ranked
    as one index over all rows ranks (score descending, ties by the smaller
    global id), padded with 2**32-1 / -inf."""

@overload
def softmax(scores: _F32, offsets: Optional[_Int] = None, *, return_lse: Literal[False] = False) -> np.ndarray: ...
@overload
def softmax(scores: _F32, offsets: Optional[_Int] = None, *, return_lse: Literal[True]) -> Tuple[np.ndarray, np.ndarray]: ...
def quantize_rows_i8(w: _F32) -> Tuple[np.ndarray, np.ndarray]:
    """lshk_quantize_rows_i8: (int8 codes (rows, dim), float32 scales)."""
def to_bf16(x: _F32) -> np.ndarray:
    """lshk_convert(F32 -> BF16): bf16 bits as uint16, round to nearest
    even."""
def softmax_xent_csr(logits: _F32, targets: _F32, offsets: _Int, *, threads: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """lshk_softmax_xent_csr: per CSR segment b (offsets nb + 1, ending at
    len(logits)), with t = targets / sum(targets) over the segment,
    loss[b] = log sum exp(z) - sum t z and grad[j] = softmax(z)_j - t_j:
    (loss (nb,), grad (n,)) float32. A segment whose targets sum to 0 has
    loss 0 and gradient 0. Same bits on every tier and thread count
    (threads 0 = every core, as many as the work pays for: at least 2**18
    logits a thread, so a small batch stays on the calling thread). Error
    bounds: docs/training.md."""
def gather_dq(w: _F32, grad: _F32, ids: _Int, offsets: _Int, *, threads: int = 0) -> np.ndarray:
    """lshk_gather_dq (f32 rows): dq[b] = sum over sample b's segment of
    grad[j] * w[ids[j]], shape (nb, dim): the gradient in the inputs of
    the gathered matmul (threads 0 = every core, as many as the work pays
    for: at least 2**20 gathered coordinates, ids x dim, a thread)."""
def rows_update_sgd(w: np.ndarray, q: _F32, grad: _F32, ids: _Int, offsets: _Int, lr: float, *, threads: int = 0) -> None:
    """lshk_rows_update_sgd, in place on w (a writable float32 array whose
    rows are contiguous; anything that would need a copy raises
    ValueError): for every position j in order, w[ids[j]] -= (lr *
    grad[j]) * q[b(j)], b(j) the segment holding j (q: one row per
    segment). lr = -1 on a zero w gives the rows' gradient sum_j grad_j
    q_b(j)."""
def rehash_next(t: int, initial_period: float = 50.0, lambda_: float = 1e-4) -> int:
    """lshk_rehash_next: the iteration of the next rehash after one at t,
    t + max(1, floor(initial_period * exp(lambda_ * t))); the defaults are
    LNS's schedule (50, 100, 150, 200, 251, ...)."""
def isa_active() -> str:
    """The SIMD tier lshk runs on: 'scalar', 'portable', 'avx2' or 'avx512'."""
