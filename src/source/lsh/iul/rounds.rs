//! The training rounds: pair collection and balancing, the tables and
//! gathers of each round, validation, and [`train`] itself (also as
//! `Index::train_iul`).

use crate::error::{checked_mul, try_vec, Result};
use crate::rng::SplitMix64;
use crate::source::lsh::hash::simhash::SimHash;
use crate::source::lsh::tables::{fold_code, GatherInput, GatherParams, GatherResult, Tables};

use super::*;

/// Pairs for the queries `query_ids` (indices into `d`'s queries) given
/// their candidate sets (`cands`: CSR, one entry per element of
/// `query_ids`, ids ascending), in collection order: queries in the order
/// given; positives in label order (a label listed twice gives two pairs),
/// negatives in ascending id order. Not balanced.
pub fn collect_pairs(
    d: &IulData<'_>,
    dim: usize,
    query_ids: &[u32],
    cands: &GatherResult,
    t1: f32,
    t2: f32,
) -> Pairs {
    collect_pairs_with(d, dim, query_ids, cands, |_| (t1, t2))
}

/// [`collect_pairs`] with per-query thresholds: `thr(i)` gives `(t1, t2)`
/// for the i-th element of `query_ids`.
pub fn collect_pairs_with(
    d: &IulData<'_>,
    dim: usize,
    query_ids: &[u32],
    cands: &GatherResult,
    thr: impl Fn(usize) -> (f32, f32),
) -> Pairs {
    let mut out = Pairs::default();
    for (i, &qi) in query_ids.iter().enumerate() {
        let (t1, t2) = thr(i);
        let qi_u = qi as usize;
        let q = &d.queries[qi_u * d.q_stride..qi_u * d.q_stride + dim];
        let s = &cands.ids[cands.offsets[i]..cands.offsets[i + 1]];
        let labs = &d.labels[d.label_offsets[qi_u]..d.label_offsets[qi_u + 1]];
        let row = |r: u32| &d.rows[r as usize * d.row_stride..r as usize * d.row_stride + dim];
        for &y in labs {
            if s.binary_search(&y).is_err() && dot(q, row(y)) > t1 {
                out.pos.push((qi, y));
            }
        }
        for &j in s {
            if !labs.contains(&j) && dot(q, row(j)) < t2 {
                out.neg.push((qi, j));
            }
        }
    }
    out
}

/// Balancing rule: both sides are cut to `m = min(|pos|, |neg|)` (and to
/// `max_pairs` when it is > 0) by keeping a uniform subset: a partial
/// Fisher–Yates pass over the side's indices (`for i in 0..m { j = i +
/// rng.below(len - i); swap }`), kept indices sorted back into collection
/// order. Positives are cut first, then negatives (a side already of size
/// m draws nothing).
pub fn balance(p: &mut Pairs, max_pairs: u32, rng: &mut SplitMix64) {
    let mut m = p.pos.len().min(p.neg.len());
    if max_pairs > 0 {
        m = m.min(max_pairs as usize);
    }
    for side in [&mut p.pos, &mut p.neg] {
        if side.len() == m {
            continue;
        }
        let mut idx: Vec<u32> = (0..side.len() as u32).collect();
        for i in 0..m {
            let j = i + rng.below((idx.len() - i) as u64) as usize;
            idx.swap(i, j);
        }
        let mut keep = idx[..m].to_vec();
        keep.sort_unstable();
        *side = keep.iter().map(|&k| side[k as usize]).collect();
    }
}

/// Hashes the rows with `fam` and builds the tables.
fn build_tables(fam: &SimHash, shape: &IulShape, d: &IulData<'_>) -> Result<Tables> {
    let l = shape.tables as usize;
    let mut codes = try_vec::<u32>(checked_mul(d.n_rows, l, "rows * L")?, "row codes")?;
    fam.hash(d.rows, d.n_rows, d.row_stride, &mut codes)?;
    Tables::build(
        &codes,
        d.n_rows,
        shape.tables,
        shape.range_bits,
        shape.bucket_cap,
        shape.table_seed,
        0,
    )
}

/// Candidate sets of `ids` (plain gather), in blocks of 1024 queries,
/// concatenated into one CSR.
fn gather_all(fam: &SimHash, t: &Tables, d: &IulData<'_>, ids: &[u32]) -> Result<GatherResult> {
    let (dim, l) = (fam.dim(), fam.tables() as usize);
    let mut out = GatherResult {
        offsets: vec![0],
        ..Default::default()
    };
    let mut qb = Vec::new();
    let mut codes = Vec::new();
    let mut r = GatherResult::default();
    for chunk in ids.chunks(1024) {
        qb.clear();
        for &i in chunk {
            let i = i as usize;
            qb.extend_from_slice(&d.queries[i * d.q_stride..i * d.q_stride + dim]);
        }
        codes.resize(chunk.len() * l, 0);
        fam.hash(&qb, chunk.len(), dim, &mut codes)?;
        let input = GatherInput {
            codes: &codes,
            q: chunk.len(),
            projections: None,
            forced_offsets: None,
            forced_ids: &[],
        };
        t.gather(&GatherParams::default(), &input, false, &mut r)?;
        let base = out.ids.len();
        out.ids.extend_from_slice(&r.ids);
        out.offsets.extend(r.offsets[1..].iter().map(|o| o + base));
    }
    Ok(out)
}

/// (mean candidates, label recall) of the queries `ids`.
fn validation(fam: &SimHash, t: &Tables, d: &IulData<'_>, ids: &[u32]) -> Result<(f64, f64)> {
    if ids.is_empty() {
        return Ok((f64::NAN, f64::NAN));
    }
    let c = gather_all(fam, t, d, ids)?;
    let (mut hit, mut tot) = (0u64, 0u64);
    for (i, &qi) in ids.iter().enumerate() {
        let s = &c.ids[c.offsets[i]..c.offsets[i + 1]];
        let qi = qi as usize;
        for y in &d.labels[d.label_offsets[qi]..d.label_offsets[qi + 1]] {
            tot += 1;
            hit += s.binary_search(y).is_ok() as u64;
        }
    }
    let recall = if tot == 0 {
        f64::NAN
    } else {
        hit as f64 / tot as f64
    };
    Ok((c.ids.len() as f64 / ids.len() as f64, recall))
}

/// Fraction of (pair, table) that share a bucket.
fn collision(fam: &SimHash, range_bits: u32, xq: &[f32], xw: &[f32], n: usize) -> Result<f64> {
    if n == 0 {
        return Ok(f64::NAN);
    }
    let l = fam.tables() as usize;
    let (mut cq, mut cw) = (vec![0u32; n * l], vec![0u32; n * l]);
    fam.hash(xq, n, fam.dim(), &mut cq)?;
    fam.hash(xw, n, fam.dim(), &mut cw)?;
    let same = cq
        .iter()
        .zip(&cw)
        .filter(|(a, b)| fold_code(**a, range_bits) == fold_code(**b, range_bits))
        .count();
    Ok(same as f64 / (n * l) as f64)
}

/// Trains `planes` (`K*L x dim`, row-major, the family's layout) on `d`
/// (see the module documentation). Returns the new planes and one report
/// per round. Everything is validated first; deterministic for a fixed
/// seed (any thread count).
pub fn train(
    planes: &[f32],
    shape: &IulShape,
    d: &IulData<'_>,
    p: &IulParams,
) -> Result<(Vec<f32>, Vec<IulReport>)> {
    train_with(planes, shape, d, p, &mut IulOptions::default())
}

/// [`train`] with the options of [`IulOptions`] (loss form, convergence
/// tolerance, per-epoch hook). `IulOptions::default()` gives [`train`]
/// exactly. Errors as [`train`], and `InvalidArgument` for a tolerance
/// that is negative or not finite.
pub fn train_with(
    planes: &[f32],
    shape: &IulShape,
    d: &IulData<'_>,
    p: &IulParams,
    opts: &mut IulOptions<'_>,
) -> Result<(Vec<f32>, Vec<IulReport>)> {
    validate(planes, shape, d, p)?;
    super::grad::check_tolerance(opts.tolerance)?;
    let fit = AdamFit {
        loss: opts.loss,
        tolerance: opts.tolerance,
        lr: p.learning_rate,
        max_epochs: p.epochs,
        batch: p.batch as usize,
    };
    let dim = shape.dim;
    let mut rng = SplitMix64::new(p.seed);
    let mut perm: Vec<u32> = (0..d.n_queries as u32).collect();
    rng.shuffle(&mut perm);
    let nval = ((d.n_queries as f64) * p.validation_fraction as f64).floor() as usize;
    let (mut val, mut tr) = (perm[..nval].to_vec(), perm[nval..].to_vec());
    val.sort_unstable();
    tr.sort_unstable();
    let mut cur = planes.to_vec();
    let mut reports = Vec::with_capacity(p.rounds as usize);
    let mut fam = SimHash::from_planes(&cur, dim, shape.bits, shape.tables)?;
    let mut tabs = build_tables(&fam, shape, d)?;
    let mut val_before = validation(&fam, &tabs, d, &val)?;
    let ranks = match p.thresholds {
        Thresholds::Score => Vec::new(),
        Thresholds::Rank => rank_thresholds(d, dim, &tr, p.t1 as u32, p.t2 as u32),
    };
    // keep_best: (validation label recall, planes, round) of the best so far.
    let mut best: Option<(f64, Vec<f32>, Option<usize>)> =
        (p.keep_best && !val.is_empty()).then(|| (val_before.1, cur.clone(), None));
    for round in 0..p.rounds {
        let cands = gather_all(&fam, &tabs, d, &tr)?;
        let mut pairs = match p.thresholds {
            Thresholds::Score => collect_pairs(d, dim, &tr, &cands, p.t1, p.t2),
            Thresholds::Rank => collect_pairs_with(d, dim, &tr, &cands, |i| ranks[i]),
        };
        drop(cands);
        balance(&mut pairs, p.max_pairs, &mut rng);
        let n = pairs.pos.len() + pairs.neg.len();
        let mut xq = try_vec::<f32>(checked_mul(n, dim, "pairs * dim")?, "pair queries")?;
        let mut xw = try_vec::<f32>(n * dim, "pair rows")?;
        let mut y = Vec::with_capacity(n);
        for (i, &(qi, r)) in pairs.pos.iter().chain(&pairs.neg).enumerate() {
            let (qi, r) = (qi as usize, r as usize);
            xq[i * dim..(i + 1) * dim]
                .copy_from_slice(&d.queries[qi * d.q_stride..qi * d.q_stride + dim]);
            xw[i * dim..(i + 1) * dim]
                .copy_from_slice(&d.rows[r * d.row_stride..r * d.row_stride + dim]);
            y.push(if i < pairs.pos.len() { 1.0 } else { 0.0 });
        }
        let np = pairs.pos.len();
        let nn = pairs.neg.len();
        let (pq, pw) = (&xq[..np * dim], &xw[..np * dim]);
        let (nq, nw) = (&xq[np * dim..], &xw[np * dim..]);
        let pos_b = collision(&fam, shape.range_bits, pq, pw, np)?;
        let neg_b = collision(&fam, shape.range_bits, nq, nw, nn)?;
        let losses = if np == 0 || nn == 0 {
            vec![f64::NAN]
        } else {
            let mut hook = |epoch: u32, planes: &[f32], loss: f64| {
                if let Some(f) = opts.on_epoch.as_mut() {
                    f(&EpochView {
                        round,
                        epoch,
                        loss,
                        planes,
                        xq: &xq,
                        xw: &xw,
                        positives: np,
                        negatives: nn,
                    });
                }
            };
            adam_fit_with(
                &mut cur,
                dim,
                shape.bits,
                shape.tables,
                &xq,
                &xw,
                &y,
                &fit,
                &mut rng,
                &mut hook,
            )?
        };
        fam = SimHash::from_planes(&cur, dim, shape.bits, shape.tables)?;
        tabs = build_tables(&fam, shape, d)?;
        let val_after = validation(&fam, &tabs, d, &val)?;
        reports.push(IulReport {
            round,
            positives: np as u64,
            negatives: nn as u64,
            loss_before: losses[0],
            loss_after: *losses.last().unwrap(),
            pos_collision_before: pos_b,
            pos_collision_after: collision(&fam, shape.range_bits, pq, pw, np)?,
            neg_collision_before: neg_b,
            neg_collision_after: collision(&fam, shape.range_bits, nq, nw, nn)?,
            mean_candidates_before: val_before.0,
            mean_candidates_after: val_after.0,
            label_recall_before: val_before.1,
            label_recall_after: val_after.1,
            kept: false,
        });
        if let Some(b) = best.as_mut() {
            // NaN recall (no labels in the validation split) never wins.
            if val_after.1 > b.0 {
                *b = (val_after.1, cur.clone(), Some(round as usize));
            }
        }
        val_before = val_after;
    }
    if let Some((_, planes, round)) = best {
        cur = planes;
        if let Some(r) = round {
            reports[r].kept = true;
        }
    }
    Ok((cur, reports))
}
