//! Status codes and the library's error type.
//!
//! [`Status`] is the Rust mirror of the C `lshk_status` codes; the numeric
//! values are part of the ABI and never change meaning.

use std::fmt;

/// Outcome of an lshk call. `Ok` is 0; every failure has its own code.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Ok = 0,
    /// A required pointer was NULL.
    NullPointer = 1,
    /// An argument is outside its documented domain (dim 0, K > 32, a bad
    /// enum value, stride < dim, unsorted CSR indices, ...).
    InvalidArgument = 2,
    /// An output buffer is shorter than the call needs.
    BufferTooSmall = 3,
    /// An id or index is >= the number of rows it refers to.
    IndexOutOfRange = 4,
    /// The requested ISA tier is not available on this CPU or build.
    UnsupportedIsa = 5,
    /// The operating system reported an I/O failure.
    IoError = 6,
    /// A file is truncated, corrupt, foreign or of an unknown version.
    BadFileFormat = 7,
    /// Memory could not be allocated.
    AllocationFailed = 8,
    /// lshk panicked internally (a bug); the panic was stopped at the C
    /// boundary.
    Panic = 9,
    /// A handle is not a live handle of the expected type (freed, foreign or
    /// of another kind).
    InvalidHandle = 10,
    /// A size computation (e.g. n * dim) overflows the address space.
    SizeOverflow = 11,
    /// Input data holds NaN or infinity where the call requires finite values.
    NonFinite = 12,
    /// The operation does not apply to this object (e.g. label training on
    /// a graph-source index, calibration of a source without lists).
    Unsupported = 13,
}

impl Status {
    /// Every status, in code order.
    pub const ALL: [Status; 14] = [
        Status::Ok,
        Status::NullPointer,
        Status::InvalidArgument,
        Status::BufferTooSmall,
        Status::IndexOutOfRange,
        Status::UnsupportedIsa,
        Status::IoError,
        Status::BadFileFormat,
        Status::AllocationFailed,
        Status::Panic,
        Status::InvalidHandle,
        Status::SizeOverflow,
        Status::NonFinite,
        Status::Unsupported,
    ];

    /// The C enumerator's name, e.g. `"LSHK_STATUS_OK"`.
    pub const fn name(self) -> &'static str {
        match self {
            Status::Ok => "LSHK_STATUS_OK",
            Status::NullPointer => "LSHK_STATUS_NULL_POINTER",
            Status::InvalidArgument => "LSHK_STATUS_INVALID_ARGUMENT",
            Status::BufferTooSmall => "LSHK_STATUS_BUFFER_TOO_SMALL",
            Status::IndexOutOfRange => "LSHK_STATUS_INDEX_OUT_OF_RANGE",
            Status::UnsupportedIsa => "LSHK_STATUS_UNSUPPORTED_ISA",
            Status::IoError => "LSHK_STATUS_IO_ERROR",
            Status::BadFileFormat => "LSHK_STATUS_BAD_FILE_FORMAT",
            Status::AllocationFailed => "LSHK_STATUS_ALLOCATION_FAILED",
            Status::Panic => "LSHK_STATUS_PANIC",
            Status::InvalidHandle => "LSHK_STATUS_INVALID_HANDLE",
            Status::SizeOverflow => "LSHK_STATUS_SIZE_OVERFLOW",
            Status::NonFinite => "LSHK_STATUS_NON_FINITE",
            Status::Unsupported => "LSHK_STATUS_UNSUPPORTED",
        }
    }

    /// The status for a raw code, if it is one.
    pub fn from_code(code: u32) -> Option<Status> {
        Status::ALL.get(code as usize).copied()
    }
}

/// A failure: a status code and a sentence saying what went wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Error {
            status,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// `Err(Error)` with a formatted message: `bail!(InvalidArgument, "dim is {}", d)`.
#[macro_export]
macro_rules! bail {
    ($status:ident, $($arg:tt)*) => {
        return Err($crate::error::Error::new($crate::error::Status::$status, format!($($arg)*)))
    };
}

/// `a * b` or a `SizeOverflow` error naming `what`.
pub fn checked_mul(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b).ok_or_else(|| {
        Error::new(
            Status::SizeOverflow,
            format!("{what}: {a} * {b} overflows the address space"),
        )
    })
}

/// Allocates a zeroed `Vec<T>` of `len` elements, reporting failure as
/// `AllocationFailed` instead of aborting the process. A buffer of at
/// least [`HUGE_PAGE_MIN`] bytes is offered transparent huge pages before
/// it is first written ([`advise_huge_pages`]).
pub fn try_vec<T: Clone + Default>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(len).map_err(|_| {
        Error::new(
            Status::AllocationFailed,
            format!(
                "{what}: cannot allocate {len} elements of {} bytes",
                std::mem::size_of::<T>()
            ),
        )
    })?;
    advise_huge_pages(v.as_mut_ptr().cast(), len * std::mem::size_of::<T>());
    v.resize(len, T::default());
    Ok(v)
}

/// Buffers from this size up are offered transparent huge pages: the IVF's
/// codes (W1's 86 MB) are read a list at a time from DRAM, and with 4 KB
/// pages every 32 rows of 128 bytes cost a TLB miss and stop the hardware
/// prefetcher at the page boundary (docs/ivf.md, "Huge pages").
pub const HUGE_PAGE_MIN: usize = 4 << 20;

/// `madvise(MADV_HUGEPAGE)` over the whole 4 KB pages inside `bytes` bytes
/// at `p` when `bytes >= HUGE_PAGE_MIN` (Linux; elsewhere nothing). Where
/// the system's `transparent_hugepage` setting is `madvise` (a common
/// default) this is what lets the kernel back the buffer with 2 MB pages;
/// with `always` it changes nothing, with `never` it is ignored. Advice
/// only: the contents and the allocation are unchanged, and a failure (an
/// old kernel, a non-THP system) is ignored.
fn advise_huge_pages(p: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    if bytes >= HUGE_PAGE_MIN {
        const PAGE: usize = 4096;
        let start = (p as usize).div_ceil(PAGE) * PAGE;
        let end = (p as usize + bytes) / PAGE * PAGE;
        if end > start {
            // SAFETY: [start, end) lies within the allocation of `bytes`
            // bytes at `p` (rounded inward to whole pages), which this
            // process owns; MADV_HUGEPAGE only changes how the kernel backs
            // those pages, never their contents or mapping.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, bytes);
}

/// Number of elements a row-major matrix of `n` rows of `dim` elements with
/// row stride `stride` spans: `(n - 1) * stride + dim`, or 0 when `n == 0`.
pub fn strided_len(n: usize, dim: usize, stride: usize, name: &str) -> Result<usize> {
    if stride < dim {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("`{name}` stride {stride} is smaller than its row length {dim}"),
        ));
    }
    if n == 0 {
        return Ok(0);
    }
    (n - 1)
        .checked_mul(stride)
        .and_then(|v| v.checked_add(dim))
        .ok_or_else(|| {
            Error::new(
                Status::SizeOverflow,
                format!("`{name}`: {n} rows of stride {stride} overflow the address space"),
            )
        })
}

/// Checks that a row-major layer's buffers are long enough: `w` holds
/// `(rows - 1) * stride + dim` floats (`stride >= dim`) and `bias`, if
/// given, at least `rows` values. Returns the length `w` needs.
pub fn check_layer_buffers(
    w: &[f32],
    bias: Option<&[f32]>,
    rows: usize,
    dim: usize,
    stride: usize,
) -> Result<usize> {
    let need = strided_len(rows, dim, stride, "w")?;
    if w.len() < need {
        return Err(Error::new(
            Status::BufferTooSmall,
            format!(
                "`w` holds {} floats, {rows} rows of stride {stride} need {need}",
                w.len()
            ),
        ));
    }
    if let Some(b) = bias {
        if b.len() < rows {
            return Err(Error::new(
                Status::BufferTooSmall,
                format!("`bias` holds {} values, W has {rows} rows", b.len()),
            ));
        }
    }
    Ok(need)
}

/// Rows `0..n` of `x` (row `r` at `r * stride`, `dim` values each) hold
/// no NaN or infinity; otherwise `NonFinite` naming `{what}[r][j]`. The
/// caller has checked that `x` holds the rows.
pub(crate) fn check_finite_rows(
    x: &[f32],
    n: usize,
    dim: usize,
    stride: usize,
    what: &str,
) -> Result<()> {
    finite_or(x, n, dim, stride, |r, j, v| {
        format!("{what}[{r}][{j}] is {v} (finite values needed)")
    })
}

/// [`check_finite_rows`] worded `"{what} r coordinate j is v"` (an index's
/// queries, IUL's rows and queries).
pub(crate) fn check_finite_coords(
    x: &[f32],
    n: usize,
    dim: usize,
    stride: usize,
    what: &str,
) -> Result<()> {
    finite_or(x, n, dim, stride, |r, j, v| {
        format!("{what} {r} coordinate {j} is {v}")
    })
}

/// `NonFinite` with `msg(row, column, value)` at the first non-finite
/// value, if any.
fn finite_or(
    x: &[f32],
    n: usize,
    dim: usize,
    stride: usize,
    msg: impl FnOnce(usize, usize, f32) -> String,
) -> Result<()> {
    match first_non_finite(x, n, dim, stride) {
        Some((r, j)) => Err(Error::new(Status::NonFinite, msg(r, j, x[r * stride + j]))),
        None => Ok(()),
    }
}

/// The first `(row, column)` among rows `0..n` of `x` (row `r` at
/// `r * stride`, `dim` values each) that holds a NaN or an infinity: the
/// one scan behind every finite-value check (each caller words its own
/// error). The caller has checked that `x` holds the rows.
pub(crate) fn first_non_finite(
    x: &[f32],
    n: usize,
    dim: usize,
    stride: usize,
) -> Option<(usize, usize)> {
    (0..n).find_map(|r| {
        let row = &x[r * stride..r * stride + dim];
        if all_finite(row) {
            return None;
        }
        row.iter().position(|v| !v.is_finite()).map(|j| (r, j))
    })
}

/// Whether every value of `v` is finite: `x * 0` is +-0 for a finite `x` and
/// NaN otherwise, summed over sixteen running lanes (the loop vectorises;
/// a sum of zeros is exact in any order).
fn all_finite(v: &[f32]) -> bool {
    let mut lanes = [0f32; 16];
    let mut chunks = v.chunks_exact(16);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l += x * 0.0;
        }
    }
    let tail = chunks.remainder().iter().fold(0f32, |m, &x| m + x * 0.0);
    lanes.iter().fold(tail, |m, &x| m + x) == 0.0
}

// ---------------------------------------------------------------------------
// Value ranges: finite inputs whose arithmetic would overflow f32.
//
// A finite W and q can still give logits beyond f32::MAX (W * 1e19 and
// q * 1e20), and an index computes more than logits: squared distances at
// build (k-means, PQ training), int8 and 4-bit estimates, list bounds. The
// two limits below keep all of it finite, so a call that passes them gives
// complete answers and one that does not gets `NonFinite` up front.

/// The largest |value| an index's rows (`w_ij`, `b_r`) may hold at `dim`
/// columns: `sqrt(f32::MAX / (16 (dim + 2)))`.
///
/// Why: building compares squared distances between rows and centroids
/// (means of rows), `|x - c|^2 <= (dim + 1) (2 A)^2`, which this keeps
/// below `f32::MAX / 4`, with room for the f32 sums' rounding. About
/// 4.1e17 at dim 128; no trained layer comes near it.
pub fn row_value_limit(dim: usize) -> f64 {
    (f32::MAX as f64 / (16.0 * (dim as f64 + 2.0))).sqrt()
}

/// The bound on `A * Q` for a query: `f32::MAX / (8 (dim + 2))`, where `A`
/// is the largest |value| the index stores (rows, biases, centroids, code
/// scales times 127, list constants) and `Q` the query's largest
/// |coordinate|, at least 1 (the bias coordinate).
///
/// Why: every score an index computes is a sum of at most `dim + 1`
/// products of a stored value and a query coordinate (an exact logit, a
/// centroid score, a PQ table sum), or an int8 estimate
/// `s_w s_q sum c_w c_q <= dim A Q`, plus a bias and a list term; each is
/// at most `4 (dim + 2) A Q`, so under this bound none and none of their
/// partial sums reaches `f32::MAX / 2`.
pub fn score_limit(dim: usize) -> f64 {
    f32::MAX as f64 / (8.0 * (dim as f64 + 2.0))
}

/// The largest |x| over rows `0..n` of `x` (row `r` at `r * stride`, `dim`
/// values each); NaN is not looked for (the caller has checked finiteness).
pub(crate) fn max_abs_rows(x: &[f32], n: usize, dim: usize, stride: usize) -> f32 {
    (0..n).fold(0.0f32, |m, r| {
        m.max(max_abs(&x[r * stride..r * stride + dim]))
    })
}

/// The largest |x| of `v` (0 when empty; a NaN is passed over). Sixteen
/// independent running maxima by plain comparison, so the loop compiles to
/// vector max instructions (one chain of `f32::max`, which must order its
/// NaN cases, does not vectorise); the maximum of finite values is exact in
/// any order, so the result is the same.
pub(crate) fn max_abs(v: &[f32]) -> f32 {
    let bigger = |m: f32, x: f32| if x.abs() > m { x.abs() } else { m };
    let mut lanes = [0f32; 16];
    let mut chunks = v.chunks_exact(16);
    for c in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(c) {
            *l = bigger(*l, x);
        }
    }
    let tail = chunks.remainder().iter().fold(0f32, |m, &x| bigger(m, x));
    lanes.iter().fold(tail, |m, &x| bigger(m, x))
}

/// `NonFinite` when a value of the rows (`w`, finite) or of `bias` exceeds
/// [`row_value_limit`]. One pass over the values; the offending position
/// is looked for only when one exceeds the limit.
pub(crate) fn check_row_range(
    w: &[f32],
    bias: Option<&[f32]>,
    rows: usize,
    dim: usize,
    stride: usize,
) -> Result<()> {
    let lim = row_value_limit(dim);
    let over = |v: f32| f64::from(v.abs()) > lim;
    if over(max_abs_rows(w, rows, dim, stride)) {
        let (r, j) = (0..rows)
            .find_map(|r| {
                w[r * stride..r * stride + dim]
                    .iter()
                    .position(|&v| over(v))
                    .map(|j| (r, j))
            })
            .expect("a value exceeds the limit");
        bail!(
            NonFinite,
            "w[{r}][{j}] is {:e}: rows of dim {dim} must stay within +-{lim:.3e} (their squared distances would overflow f32)",
            w[r * stride + j]
        );
    }
    if let Some(b) = bias {
        if let Some(r) = b[..rows].iter().position(|&v| over(v)) {
            bail!(
                NonFinite,
                "bias[{r}] is {:e}: biases must stay within +-{lim:.3e} at dim {dim} (squared distances would overflow f32)",
                b[r]
            );
        }
    }
    Ok(())
}

/// `NonFinite` when stored values up to `a` could not be scored against
/// any query (`max |q_j| >= 1` counts as 1) within f32: `a` above
/// [`score_limit`]. The LSH index's rule for its rows, at build, update
/// and rehash; `what` names them in the message.
pub(crate) fn check_scorable(a: f32, dim: usize, what: &str) -> Result<()> {
    let lim = score_limit(dim);
    if f64::from(a) > lim {
        bail!(
            NonFinite,
            "{what} reach {a:e}: at dim {dim} the index scores queries only for |values| <= {lim:.3e} (logits would overflow f32)"
        );
    }
    Ok(())
}

/// `NonFinite` when a query (finite rows `0..n` of `q`) could make scores
/// overflow f32 against an index whose stored values reach `a`:
/// `max(max_j |q_j|, 1) * a > score_limit(dim)`.
pub(crate) fn check_query_range(
    q: &[f32],
    n: usize,
    dim: usize,
    stride: usize,
    a: f32,
    what: &str,
) -> Result<()> {
    let lim = score_limit(dim);
    for r in 0..n {
        let m = max_abs_rows(&q[r * stride..], 1, dim, dim).max(1.0);
        if f64::from(m) * f64::from(a) > lim {
            bail!(
                NonFinite,
                "{what} row {r} reaches |{m:e}| against index values up to {a:e}: its scores could overflow f32 (the product must stay <= {lim:.3e} at dim {dim})"
            );
        }
    }
    Ok(())
}

/// Bytes of physical memory (`sysconf(_SC_PHYS_PAGES) * page size`), or
/// `u64::MAX` when unknown.
pub fn physical_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || size <= 0 {
        return u64::MAX;
    }
    (pages as u64).saturating_mul(size as u64)
}

/// Refuses (`AllocationFailed`) an object whose several allocations would
/// add up to more than the machine's physical memory. Each allocation alone
/// may succeed under Linux's overcommit, and touching them all would then
/// get the process OOM-killed instead of returning an error: this check
/// turns a small call that asks for an impossible object (e.g. many tables
/// of 2^24 buckets over no rows) into a status.
pub fn check_fits_memory(bytes: u128, what: &str) -> Result<()> {
    let phys = physical_memory();
    if bytes > phys as u128 {
        return Err(Error::new(
            Status::AllocationFailed,
            format!(
                "{what} would need {bytes} bytes, more than the {phys} bytes of physical memory"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first non-finite value is found at every position, across and
    /// inside the sixteen-value chunks of `all_finite`, and in a later row
    /// of strided rows; finite rows (with -0, subnormals and f32::MAX) pass.
    #[test]
    fn first_non_finite_finds_every_position() {
        let (n, dim, stride) = (3usize, 37usize, 40usize);
        let base: Vec<f32> = (0..n * stride)
            .map(|i| match i % 5 {
                0 => -0.0,
                1 => f32::MIN_POSITIVE / 4.0,
                2 => f32::MAX,
                3 => -f32::MAX,
                _ => i as f32 * 0.25,
            })
            .collect();
        assert_eq!(first_non_finite(&base, n, dim, stride), None);
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for r in 0..n {
                for j in 0..dim {
                    let mut x = base.clone();
                    x[r * stride + j] = bad;
                    // A second one later in the same row is not reported.
                    if j + 1 < dim {
                        x[r * stride + j + 1] = f32::NAN;
                    }
                    assert_eq!(first_non_finite(&x, n, dim, stride), Some((r, j)));
                    assert!(!all_finite(&x[r * stride..r * stride + dim]));
                }
                // Outside the rows' `dim` values (the stride's gap): not read.
                let mut x = base.clone();
                x[r * stride + dim] = bad;
                assert_eq!(first_non_finite(&x, n, dim, stride), None);
            }
        }
    }
}
