//! The C API's enum values by their Python names. An argument is a name
//! (case-insensitive) or the C API's integer, which is passed through
//! unchanged so that lshk validates it and reports its own error.

use lshk::ffi as c;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

pub(crate) type Names = &'static [(&'static str, u32)];

pub(crate) const SOURCES: Names = &[
    ("simhash", c::index::LSHK_SOURCE_SIMHASH),
    ("dwta", c::index::LSHK_SOURCE_DWTA),
    ("graph", c::index::LSHK_SOURCE_GRAPH),
    ("ivf", c::index::LSHK_SOURCE_IVF),
    ("forest", c::index::LSHK_SOURCE_FOREST),
];
/// The storage of W. "borrowed" is the name reported; "borrowed_f32" (the
/// C constant's) is accepted too.
pub(crate) const STORAGES: Names = &[
    ("borrowed", c::index::LSHK_STORAGE_BORROWED_F32),
    ("borrowed_f32", c::index::LSHK_STORAGE_BORROWED_F32),
    ("f32", c::index::LSHK_STORAGE_F32),
    ("bf16", c::index::LSHK_STORAGE_BF16),
    ("f16", c::index::LSHK_STORAGE_F16),
    ("i8", c::index::LSHK_STORAGE_I8),
];
/// The graph source's own rows (lshk_graph_params.storage): a subset of
/// the one storage enum.
pub(crate) const GRAPH_STORAGES: Names = &[
    ("f32", c::index::LSHK_STORAGE_F32),
    ("bf16", c::index::LSHK_STORAGE_BF16),
    ("i8", c::index::LSHK_STORAGE_I8),
];
pub(crate) const TRANSFORMS: Names = &[
    ("none", c::index::LSHK_TRANSFORM_NONE),
    ("bias_aug", c::index::LSHK_TRANSFORM_BIAS_AUG),
    ("mips", c::index::LSHK_TRANSFORM_MIPS),
];
pub(crate) const CODES: Names = &[
    ("none", c::index::LSHK_IVF_CODES_NONE),
    ("i8", c::index::LSHK_IVF_CODES_I8),
    ("pq4", c::index::LSHK_IVF_CODES_PQ4),
    ("pq4_i8", c::index::LSHK_IVF_CODES_PQ4_I8),
];
pub(crate) const WALKS: Names = &[
    ("exact", c::index::LSHK_GRAPH_WALK_EXACT),
    ("int8", c::index::LSHK_GRAPH_WALK_INT8),
];
/// How a gather's `max_candidates` cuts the union of a query's buckets
/// (lshk_budget_params.rule).
pub(crate) const BUDGET_RULES: Names = &[
    ("mid_bucket", c::tables::LSHK_BUDGET_MID_BUCKET),
    (
        "mid_bucket_rotated",
        c::tables::LSHK_BUDGET_MID_BUCKET_ROTATED,
    ),
    ("whole_buckets", c::tables::LSHK_BUDGET_WHOLE_BUCKETS),
];
pub(crate) const POLICIES: Names = &[
    ("beside", c::labels::LSHK_LABEL_POLICY_BESIDE),
    ("instead", c::labels::LSHK_LABEL_POLICY_INSTEAD),
];

/// The C value of `v`: a name from `names`, or an int passed through.
pub(crate) fn enum_arg(v: &Bound<'_, PyAny>, what: &str, names: Names) -> PyResult<u32> {
    if let Ok(s) = v.cast::<PyString>() {
        let s = s.to_cow()?.to_ascii_lowercase();
        if let Some((_, code)) = names.iter().find(|(n, _)| *n == s) {
            return Ok(*code);
        }
        let all: Vec<_> = names.iter().map(|(n, _)| format!("'{n}'")).collect();
        return Err(PyValueError::new_err(format!(
            "{what}: unknown value '{s}' (one of {}, or the C API's integer)",
            all.join(", ")
        )));
    }
    v.extract::<u32>()
        .map_err(|_| PyTypeError::new_err(format!("{what}: expected a str or an int")))
}

/// The first name of `code` in `names`, or the number itself.
pub(crate) fn name_of(names: Names, code: u32) -> String {
    names
        .iter()
        .find(|(_, c)| *c == code)
        .map_or_else(|| code.to_string(), |(n, _)| n.to_string())
}
