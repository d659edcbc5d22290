"""ctypes bindings of the lshk 0.3 C ABI (include/lshk.h) that the peer
benchmarks call: the index's build, query, describe, memory, calibrate,
save, load and free. Shared by ann_peers.py and graph_peers.py.

Every Structure mirrors its C struct field for field, nested structs
included (ctypes lays them out as the C compiler does); load_lshk checks
the sizes of the two parameter structs against the struct_size the
library's defaults report.
"""
import ctypes


class LshParams(ctypes.Structure):  # struct lshk_lsh_params
    _fields_ = [("bits_per_table", ctypes.c_uint32), ("tables", ctypes.c_uint32),
                ("sparsity", ctypes.c_uint32), ("bin_size", ctypes.c_uint32),
                ("range_bits", ctypes.c_uint32), ("bucket_cap", ctypes.c_uint32),
                ("seed", ctypes.c_uint64),
                ("planes", ctypes.c_void_p), ("planes_len", ctypes.c_size_t),
                ("dwta_map", ctypes.c_void_p), ("dwta_map_len", ctypes.c_size_t)]


class IvfParams(ctypes.Structure):  # struct lshk_ivf_params
    _fields_ = [("nlist", ctypes.c_uint32), ("iters", ctypes.c_uint32),
                ("train_rows", ctypes.c_uint32), ("codes", ctypes.c_uint32),
                ("pq_m", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("seed", ctypes.c_uint64),
                ("row_weights", ctypes.c_void_p), ("n_weights", ctypes.c_size_t)]


class GraphParams(ctypes.Structure):  # struct lshk_graph_params
    _fields_ = [("m", ctypes.c_uint32), ("ef_construction", ctypes.c_uint32),
                ("storage", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("seed", ctypes.c_uint64)]


class ForestParams(ctypes.Structure):  # struct lshk_forest_params
    _fields_ = [("trees", ctypes.c_uint32), ("leaf_size", ctypes.c_uint32),
                ("normalize_rows", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("seed", ctypes.c_uint64)]


class IndexParams(ctypes.Structure):  # struct lshk_index_params
    _fields_ = [("struct_size", ctypes.c_uint32), ("source", ctypes.c_uint32),
                ("storage", ctypes.c_uint32), ("transform", ctypes.c_uint32),
                ("build_threads", ctypes.c_uint32),
                ("lsh", LshParams), ("ivf", IvfParams), ("graph", GraphParams), ("forest", ForestParams),
                ("progress", ctypes.c_void_p), ("progress_user", ctypes.c_void_p)]


class LshQuery(ctypes.Structure):  # struct lshk_lsh_query
    _fields_ = [("min_count", ctypes.c_uint32), ("max_candidates", ctypes.c_uint32),
                ("probes", ctypes.c_uint32), ("bits_per_table", ctypes.c_uint32)]


class IvfQuery(ctypes.Structure):  # struct lshk_ivf_query
    _fields_ = [("nprobe", ctypes.c_uint32), ("rerank", ctypes.c_uint32),
                ("reach", ctypes.c_float), ("refine", ctypes.c_uint32)]


class GraphQuery(ctypes.Structure):  # struct lshk_graph_query
    _fields_ = [("walk", ctypes.c_uint32), ("ef", ctypes.c_uint32),
                ("rerank", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class ForestQuery(ctypes.Structure):  # struct lshk_forest_query
    _fields_ = [("set_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class QueryParams(ctypes.Structure):  # struct lshk_query_params
    _fields_ = [("struct_size", ctypes.c_uint32), ("threads", ctypes.c_uint32),
                ("lsh", LshQuery), ("ivf", IvfQuery), ("graph", GraphQuery), ("forest", ForestQuery)]


class QueryStats(ctypes.Structure):  # struct lshk_query_stats
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("queries", ctypes.c_uint64), ("candidates_total", ctypes.c_uint64),
                ("candidates_min", ctypes.c_uint64), ("candidates_max", ctypes.c_uint64),
                ("lists", ctypes.c_uint64), ("scanned", ctypes.c_uint64),
                ("reranked", ctypes.c_uint64)]


class IndexInfo(ctypes.Structure):  # struct lshk_index_info
    _fields_ = [("struct_size", ctypes.c_uint32), ("source", ctypes.c_uint32),
                ("storage", ctypes.c_uint32), ("transform", ctypes.c_uint32),
                ("rows", ctypes.c_size_t), ("dim", ctypes.c_size_t),
                ("bits_per_table", ctypes.c_uint32), ("tables", ctypes.c_uint32),
                ("nlist", ctypes.c_uint32), ("codes", ctypes.c_uint32),
                ("labelled", ctypes.c_uint32), ("reserved", ctypes.c_uint32)]


class Calibration(ctypes.Structure):  # struct lshk_calibration
    _fields_ = [("struct_size", ctypes.c_uint32), ("met", ctypes.c_uint32), ("query", QueryParams),
                ("recall", ctypes.c_float), ("fixed_nprobe", ctypes.c_uint32),
                ("fixed_recall", ctypes.c_float), ("adaptive_reach", ctypes.c_float),
                ("adaptive_recall", ctypes.c_float), ("recall_lower", ctypes.c_float),
                ("scanned", ctypes.c_double), ("fixed_scanned", ctypes.c_double),
                ("adaptive_scanned", ctypes.c_double)]


# LSHK_SOURCE_*
SOURCE_SIMHASH, SOURCE_DWTA, SOURCE_GRAPH, SOURCE_IVF, SOURCE_FOREST = 0, 1, 2, 3, 4
# LSHK_STORAGE_*
STORAGE_BORROWED_F32, STORAGE_F32, STORAGE_BF16, STORAGE_F16, STORAGE_I8 = 0, 1, 2, 3, 4
# LSHK_IVF_CODES_*
IVF_CODES_NONE, IVF_CODES_I8, IVF_CODES_PQ4, IVF_CODES_PQ4_I8 = 0, 1, 2, 3
# LSHK_GRAPH_WALK_*
GRAPH_WALK_EXACT, GRAPH_WALK_INT8 = 0, 1

vp, sz, u32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32


def load_lshk(path):
    """liblshk.so at `path` with the argument and result types of the calls
    above; refuses a library without the 0.3 index API."""
    lib = ctypes.CDLL(path)
    if not hasattr(lib, "lshk_index_calibrate"):
        raise RuntimeError(f"{path}: not the lshk 0.3 C ABI (no lshk_index_calibrate)")
    lib.lshk_version.restype = ctypes.c_char_p
    lib.lshk_isa_active.restype = u32
    lib.lshk_last_error_message.argtypes = [ctypes.c_char_p, sz]
    lib.lshk_last_error_message.restype = sz
    lib.lshk_index_params_default.restype = IndexParams
    lib.lshk_query_params_default.restype = QueryParams
    lib.lshk_index_build.argtypes = [vp, vp, sz, sz, sz, ctypes.POINTER(IndexParams), ctypes.POINTER(vp)]
    lib.lshk_index_build.restype = u32
    lib.lshk_index_query.argtypes = [vp, vp, sz, sz, u32, ctypes.POINTER(QueryParams),
                                     vp, vp, ctypes.POINTER(QueryStats)]
    lib.lshk_index_query.restype = u32
    lib.lshk_index_describe.argtypes = [vp, ctypes.POINTER(IndexInfo)]
    lib.lshk_index_describe.restype = u32
    lib.lshk_index_memory_bytes.argtypes = [vp, ctypes.POINTER(sz)]
    lib.lshk_index_memory_bytes.restype = u32
    lib.lshk_index_calibrate.argtypes = [vp, vp, sz, sz, u32, ctypes.c_float, u32, u32,
                                         ctypes.POINTER(Calibration)]
    lib.lshk_index_calibrate.restype = u32
    lib.lshk_index_save.argtypes = [vp, ctypes.c_char_p]
    lib.lshk_index_save.restype = u32
    lib.lshk_index_load.argtypes = [ctypes.c_char_p, vp, sz, ctypes.POINTER(vp)]
    lib.lshk_index_load.restype = u32
    lib.lshk_index_free.argtypes = [vp]
    lib.lshk_index_free.restype = u32
    p, q = lib.lshk_index_params_default(), lib.lshk_query_params_default()
    assert p.struct_size == ctypes.sizeof(IndexParams), (p.struct_size, ctypes.sizeof(IndexParams))
    assert q.struct_size == ctypes.sizeof(QueryParams), (q.struct_size, ctypes.sizeof(QueryParams))
    return lib


def check(lib, st, what):
    """Raises RuntimeError with lshk's message when `st` is not LSHK_STATUS_OK."""
    if st != 0:
        buf = ctypes.create_string_buffer(1024)
        lib.lshk_last_error_message(buf, 1024)
        raise RuntimeError(f"{what}: status {st}: {buf.value.decode()}")
