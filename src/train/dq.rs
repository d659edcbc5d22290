//! The transposed gathered product `dq` ([`gather_dq`]).

use crate::bail;
use crate::error::{strided_len, Error, Result, Status};
use crate::isa::{self, Isa};
use crate::kernels::train::{self as kt, Rows};
use crate::matmul::check_offsets;

use super::segment_cuts;
use crate::par::threads_auto;

/// The rows of W for [`gather_dq`]: f32, or bf16 bit patterns (widened to
/// f32 exactly).
#[derive(Clone, Copy, Debug)]
pub enum DqWeights<'a> {
    F32(&'a [f32]),
    Bf16(&'a [u16]),
}

impl DqWeights<'_> {
    fn len(&self) -> usize {
        match self {
            DqWeights::F32(w) => w.len(),
            DqWeights::Bf16(w) => w.len(),
        }
    }
}

/// `IndexOutOfRange` naming the first id `>= rows` (position and sample).
pub(super) fn check_ids(ids: &[u32], rows: usize, offsets: &[usize]) -> Result<()> {
    let max = ids.iter().copied().max().unwrap_or(0) as usize;
    if ids.is_empty() || max < rows {
        return Ok(());
    }
    let pos = ids.iter().position(|&id| id as usize >= rows).unwrap_or(0);
    let b = offsets.partition_point(|&o| o <= pos).saturating_sub(1);
    Err(Error::new(
        Status::IndexOutOfRange,
        format!(
            "index out of range: ids[{pos}] = {} (sample {b}) but W has {rows} rows",
            ids[pos]
        ),
    ))
}

/// Gathered coordinates (`ids x dim`) a thread gets at least when the
/// caller asks for every core (`threads = 0`): 2^20 (8,192 ids of 128
/// floats), where a second thread started per call begins to pay
/// (benches/train.md, "Every core for xent and dq").
const DQ_MIN_WORK_PER_THREAD: usize = 1 << 20;

/// The transposed gathered product: for each sample `b < nb`
/// (`nb = offsets.len() - 1`), `dq[b * dq_stride .. + dim] =
/// sum_j grad[j] * W[ids[j]]` over its segment, each element summed in
/// position order from +0 (an empty segment gives 0). W: `rows` rows of
/// `dim` elements at stride `w_stride`. `threads`: 0 = every core, as many
/// as the work pays for (at least 2^20 gathered coordinates a thread); an
/// explicit count is kept. Every tier and thread count gives the same
/// bits; against exact arithmetic each element is within
/// `gamma(n) * sum_j |g_j w_jk|` (`n` the segment length; one more
/// rounding per product: `gamma(n + 1)`).
#[allow(clippy::too_many_arguments)]
pub fn gather_dq(
    tier: Isa,
    threads: usize,
    w: DqWeights<'_>,
    rows: usize,
    dim: usize,
    w_stride: usize,
    grad: &[f32],
    ids: &[u32],
    offsets: &[usize],
    dq: &mut [f32],
    dq_stride: usize,
) -> Result<()> {
    isa::check_supported(tier)?;
    if dim == 0 {
        bail!(InvalidArgument, "dim must be >= 1");
    }
    let need = strided_len(rows, dim, w_stride, "w")?;
    if w.len() < need {
        bail!(
            BufferTooSmall,
            "`w` holds {} elements, {rows} rows of stride {w_stride} need {need}",
            w.len()
        );
    }
    if offsets.is_empty() {
        bail!(InvalidArgument, "`offsets` must have nb + 1 >= 1 entries");
    }
    let nb = offsets.len() - 1;
    check_offsets(offsets, nb, ids.len(), "ids")?;
    if grad.len() != ids.len() {
        bail!(
            InvalidArgument,
            "`grad` has {} entries, `ids` {}; they must be equal",
            grad.len(),
            ids.len()
        );
    }
    let dql = strided_len(nb, dim, dq_stride, "dq")?;
    if dq.len() < dql {
        bail!(
            BufferTooSmall,
            "`dq` holds {} floats, {nb} rows of stride {dq_stride} need {dql}",
            dq.len()
        );
    }
    check_ids(ids, rows, offsets)?;
    let ks = kt::kernels(tier);
    let t = threads_auto(
        threads,
        nb,
        ids.len().saturating_mul(dim),
        DQ_MIN_WORK_PER_THREAD,
    );
    let run = |b0: usize, b1: usize, out: &mut [f32]| {
        for b in b0..b1 {
            let (s, e) = (offsets[b], offsets[b + 1]);
            let o = &mut out[(b - b0) * dq_stride..(b - b0) * dq_stride + dim];
            // SAFETY: dim >= 1, o holds dim floats, grad/ids segments
            // match, ids < rows and w spans the strided matrix (checked
            // above), tier supported.
            unsafe {
                match w {
                    DqWeights::F32(w) => (ks.dq_f32)(
                        &Rows {
                            w,
                            stride: w_stride,
                            dim,
                            scales: &[],
                        },
                        &grad[s..e],
                        &ids[s..e],
                        o,
                    ),
                    DqWeights::Bf16(w) => (ks.dq_bf16)(
                        &Rows {
                            w,
                            stride: w_stride,
                            dim,
                            scales: &[],
                        },
                        &grad[s..e],
                        &ids[s..e],
                        o,
                    ),
                }
            }
        }
    };
    if t == 1 {
        run(0, nb, dq);
        return Ok(());
    }
    let cuts = segment_cuts(offsets, t);
    let mut jobs = Vec::with_capacity(t);
    let mut rest = &mut dq[..dql];
    for k in 0..t {
        let (b0, b1) = (cuts[k], cuts[k + 1]);
        // The last rows of dq may be shorter than a stride, and the last
        // threads may get no sample.
        let take = if k + 1 == t {
            rest.len()
        } else {
            ((b1 - b0) * dq_stride).min(rest.len())
        };
        let (mine, r) = rest.split_at_mut(take);
        rest = r;
        jobs.push((b0, b1, mine));
    }
    crate::par::map(jobs, |(b0, b1, mine)| run(b0, b1, mine));
    Ok(())
}
