//! The LSH candidate source: a hash family ([`crate::source::lsh::hash`]) and the
//! [`Tables`] over its codes (the SimHash and DWTA families of an index).
//! Build (hash every transformed row, with progress; build the tables),
//! query (transform → hash, fused hash + project when probing → gather),
//! its file sections (the family's `PLANES` / `DWTAMAP`, `TOFFS`,
//! `TIDLEN`, `TIDS`) and its memory, behind [`CandidateSource`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::bail;
use crate::error::{checked_mul, try_vec, Result};
use crate::format::{self, cast_slice, SectionOut};
use crate::source::{
    transform_queries, transform_row, BuildInput, CandidateSource, Family, GatherParams,
    GatherResult, IndexView, LoadInput, QueryParams, QueryStats, Resolved, SourceRegistration,
    Transform,
};

pub mod hash;
pub mod iul;
pub mod tables;
pub mod train_logq;

use hash::HashFamily;
use tables::{BudgetRule, GatherInput, Tables, U32s};

/// The hash family and the tables of an LSH index. Both are boxed: their
/// addresses do not change for the index's life (the C API's borrowed
/// family and tables handles point into them).
pub(crate) struct Lsh {
    pub(crate) fam: Box<dyn HashFamily>,
    pub(crate) tables: Box<Tables>,
}

#[derive(Default)]
struct LshScratch {
    tq: Vec<f32>,
    codes: Vec<u32>,
    proj: Vec<f32>,
}

thread_local! {
    static LSCRATCH: RefCell<LshScratch> = RefCell::new(LshScratch::default());
}

impl Lsh {
    /// The gather parameters a query runs with: `g` with `bits_per_table`
    /// 0 resolved to K, and multi-probing checked (a family with a probe
    /// order, `bits_per_table` 0 or K, probes at most `min(2^K - 1,
    /// MAX_PROBES)`).
    pub(crate) fn resolve_gather(&self, p: &Resolved, g: &GatherParams) -> Result<GatherParams> {
        let mut gp = *g;
        if gp.probes > 0 {
            if !self.fam.has_probe_order() {
                bail!(
                    InvalidArgument,
                    "multi-probing (probes > 0) needs a family with a probe order (SimHash); \
                     this index is {}",
                    hash::registration(p.family).name
                );
            }
            if gp.bits_per_table == 0 {
                gp.bits_per_table = p.bits;
            } else if gp.bits_per_table != p.bits {
                bail!(
                    InvalidArgument,
                    "gather bits_per_table is {} but the index has K = {} (pass 0 or K)",
                    gp.bits_per_table,
                    p.bits
                );
            }
            let kb = p.bits;
            let maxp = if kb >= 32 { u32::MAX } else { (1u32 << kb) - 1 };
            if gp.probes > tables::MAX_PROBES || gp.probes > maxp {
                bail!(
                    InvalidArgument,
                    "probes is {}; at most min(2^K - 1, {}) = {}",
                    gp.probes,
                    tables::MAX_PROBES,
                    maxp.min(tables::MAX_PROBES)
                );
            }
        }
        Ok(gp)
    }

    /// The transform and hash stages for `n` checked queries: codes
    /// (`n x L`) into `codes`, and with `proj` the projections (`n x K*L`,
    /// the probe order) from the same pass (fused hash + project). `tq` is
    /// transform scratch of at least `n * hash_dim` floats (unused, may be
    /// empty, without a transform). One call of the family per batch.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn hash_queries(
        &self,
        ix: &IndexView<'_>,
        q: &[f32],
        n: usize,
        q_stride: usize,
        tq: &mut [f32],
        codes: &mut [u32],
        proj: Option<&mut [f32]>,
    ) -> Result<()> {
        let (x, xs): (&[f32], usize) = if ix.p.transform == Transform::None {
            (q, q_stride)
        } else {
            transform_queries(ix.p.transform, ix.dim, ix.hash_dim, q, n, q_stride, tq);
            (tq, ix.hash_dim)
        };
        match proj {
            Some(p) => self.fam.hash_project(x, n, xs, codes, p),
            None => self.fam.hash(x, n, xs, codes),
        }
    }
}

/// Rows hashed per work unit during a build.
pub(crate) const BUILD_UNIT: usize = 16384;

fn ceil_log2(x: usize) -> u32 {
    usize::BITS - (x.max(2) - 1).leading_zeros()
}

/// The default `range_bits` (module documentation).
pub fn default_range_bits(family: Family, bits: u32, bin_size: u32, rows: usize) -> u32 {
    let code_bits = (hash::registration(family).code_bits)(bits, bin_size);
    code_bits.min(20).min(ceil_log2(rows) + 1).max(1)
}

/// Registered for every hash family of [`crate::source::lsh::hash::FAMILIES`].
pub(crate) static REGISTRATION: SourceRegistration = SourceRegistration {
    name: "LSH",
    accepts: |f| hash::FAMILIES.iter().any(|r| r.family == f),
    build,
    load,
};

impl CandidateSource for Lsh {
    fn check_query(&self, ix: &IndexView<'_>, qp: &QueryParams) -> Result<()> {
        self.resolve_gather(ix.p, &qp.gather).map(drop)
    }

    fn candidates(
        &self,
        ix: &IndexView<'_>,
        q: &[f32],
        n: usize,
        q_stride: usize,
        _k: usize,
        qp: &QueryParams,
        out: &mut GatherResult,
        _scores: &mut Vec<f32>,
        _st: &mut QueryStats,
    ) -> Result<()> {
        let gp = self.resolve_gather(ix.p, &qp.gather)?;
        let (l, hd, kl) = (
            ix.p.tables as usize,
            ix.hash_dim,
            ix.p.bits as usize * ix.p.tables as usize,
        );
        LSCRATCH.with(|cell| -> Result<()> {
            let mut guard = cell.borrow_mut();
            let s = &mut *guard;
            s.codes.resize(n * l, 0);
            if ix.p.transform != Transform::None {
                s.tq.resize(n * hd, 0.0);
            }
            // With probes the family gives the projections (the probe
            // order) from the same pass: hash_project.
            let proj = if gp.probes > 0 {
                s.proj.resize(n * kl, 0.0);
                Some(&mut s.proj[..])
            } else {
                None
            };
            let probing = proj.is_some();
            self.hash_queries(ix, q, n, q_stride, &mut s.tq, &mut s.codes, proj)?;
            let input = GatherInput {
                codes: &s.codes[..n * l],
                q: n,
                projections: if probing {
                    Some(&s.proj[..n * kl])
                } else {
                    None
                },
                forced_offsets: None,
                forced_ids: &[],
            };
            self.tables
                .gather_budget(&gp, BudgetRule::MidBucket, &input, false, out)
        })
    }

    fn sections<'a>(&'a self, keep: &'a mut Vec<Vec<u8>>) -> Vec<SectionOut<'a>> {
        let t = &*self.tables;
        let l = t.tables();
        keep.push(
            (0..l)
                .flat_map(|i| (t.csr(i).1.len() as u64).to_le_bytes())
                .collect(),
        );
        let keep: &'a Vec<Vec<u8>> = keep;
        let reg = crate::source::lsh::hash::registration(self.fam.family());
        vec![
            SectionOut::new(reg.section, vec![self.fam.section_bytes()]),
            SectionOut::new(
                "TOFFS",
                (0..l).map(|i| format::as_bytes(t.csr(i).0)).collect(),
            ),
            SectionOut::new("TIDLEN", vec![&keep[keep.len() - 1]]),
            SectionOut::new(
                "TIDS",
                (0..l).map(|i| format::as_bytes(t.csr(i).1)).collect(),
            ),
        ]
    }

    fn memory_bytes(&self) -> usize {
        self.fam.memory_bytes() + self.tables.memory_bytes()
    }
}

/// Checks the hash family's parameters, hashes every (transformed) row and
/// builds the tables.
fn build(b: &BuildInput<'_>, r: &mut Resolved) -> Result<Box<dyn CandidateSource>> {
    let p = b.p;
    let reg = crate::source::lsh::hash::registration(p.family);
    if let Some(other) = crate::source::lsh::hash::FAMILIES
        .iter()
        .find(|r| r.family != p.family && (r.given)(p))
    {
        bail!(
            InvalidArgument,
            "caller-given {} data ({}) but the family is {}",
            other.name,
            other.section,
            reg.name
        );
    }
    let (rows, dim, w_stride, hash_dim, w) = (b.rows, b.dim, b.w_stride, b.hash_dim, b.w);
    r.given = (reg.given)(p);
    r.sparsity = if p.planes.is_some() { 0 } else { p.sparsity };
    let fam = (reg.build)(&r.shape(hash_dim), p)?;
    let range_bits = if p.range_bits == 0 {
        default_range_bits(p.family, p.bits, p.bin_size, rows)
    } else {
        p.range_bits
    };
    if range_bits > crate::source::lsh::tables::MAX_RANGE_BITS {
        bail!(
            InvalidArgument,
            "range_bits is {range_bits}; it must be in 1..={}",
            crate::source::lsh::tables::MAX_RANGE_BITS
        );
    }
    r.range_bits = range_bits;
    let l = p.tables as usize;
    let ncodes = checked_mul(rows, l, "rows * L")?;
    let inv_u = 1.0 / b.mips_u as f64;

    // ---- hash every row
    let mut codes = try_vec::<u32>(ncodes, "row codes")?;
    let nthreads = crate::par::threads(p.threads as usize);
    let units: Vec<(usize, &mut [u32])> = codes
        .chunks_mut(BUILD_UNIT * l)
        .enumerate()
        .map(|(u, c)| (u * BUILD_UNIT, c))
        .collect();
    let nthreads = nthreads.clamp(1, units.len().max(1));
    let mut per_thread: Vec<Vec<(usize, &mut [u32])>> = (0..nthreads).map(|_| Vec::new()).collect();
    for (i, u) in units.into_iter().enumerate() {
        per_thread[i % nthreads].push(u);
    }
    let done = AtomicU64::new(0);
    let total = rows as u64;
    let transform = b.transform;
    let bias_of = |r: usize| b.bias.map_or(0.0, |b| b[r]);
    let caller = std::thread::current();
    let progress = b.progress;
    let worker = |jobs: Vec<(usize, &mut [u32])>, report: bool| -> Result<()> {
        let mut buf: Vec<f32> = if transform == Transform::None {
            Vec::new()
        } else {
            try_vec::<f32>(BUILD_UNIT * hash_dim, "transform scratch")?
        };
        for (r0, c) in jobs {
            let n = c.len() / l;
            if transform == Transform::None {
                fam.hash(&w[r0 * w_stride..], n, w_stride, c)?;
            } else {
                for i in 0..n {
                    let r = r0 + i;
                    transform_row(
                        transform,
                        &w[r * w_stride..r * w_stride + dim],
                        bias_of(r),
                        inv_u,
                        &mut buf[i * hash_dim..(i + 1) * hash_dim],
                    );
                }
                fam.hash(&buf[..n * hash_dim], n, hash_dim, c)?;
            }
            let d = done.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
            if report {
                if let Some(cb) = progress {
                    if d < total {
                        cb(d, total);
                    }
                }
            } else {
                // Wake the calling thread so it reports this unit.
                caller.unpark();
            }
        }
        Ok(())
    };
    if nthreads == 1 {
        // One thread: the caller hashes and reports after every unit.
        let jobs = per_thread.pop().unwrap_or_default();
        worker(jobs, true)?;
    } else {
        // Workers hash; the calling thread only reports progress (woken
        // after every unit, so reports come every BUILD_UNIT rows whatever
        // the thread count) and joins.
        std::thread::scope(|s| -> Result<()> {
            let worker = &worker;
            let handles: Vec<_> = per_thread
                .into_iter()
                .map(|j| s.spawn(move || worker(j, false)))
                .collect();
            let mut last = 0u64;
            while handles.iter().any(|h| !h.is_finished()) {
                std::thread::park_timeout(std::time::Duration::from_millis(50));
                let d = done.load(Ordering::Relaxed);
                if let Some(cb) = progress {
                    if d != last && d < total {
                        cb(d, total);
                    }
                }
                last = d;
            }
            let mut res = Ok(());
            for h in handles {
                let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                if res.is_ok() {
                    res = r;
                }
            }
            res
        })?;
    }

    // ---- tables
    let mut tables = Box::new(Tables::build(
        &codes,
        rows,
        p.tables,
        range_bits,
        p.bucket_cap,
        p.seed,
        p.threads,
    )?);
    drop(codes);
    // The index never updates its tables: drop the row-to-bucket map (as
    // large as the ids).
    tables.freeze();
    Ok(Box::new(Lsh { fam, tables }))
}

/// The family and the tables of a file (views of the mapping).
fn load(li: &LoadInput<'_>) -> Result<Box<dyn CandidateSource>> {
    let (c, bad, p, rows) = (li.c, li.bad, li.p, li.rows);
    // ---- table sizes, checked before anything is allocated from the
    // params (a corrupt L or K must not make the seeded family below
    // allocate gigabytes: the sections' real sizes bound everything).
    let range_bits = p.range_bits;
    if range_bits == 0 || range_bits > crate::source::lsh::tables::MAX_RANGE_BITS {
        return Err(bad(format!(
            "params: range_bits {range_bits} is outside 1..=24"
        )));
    }
    let l = p.tables as usize;
    let nb1 = (1usize << range_bits) + 1;
    let toffs: &[u32] = cast_slice(c.section("TOFFS")?, "TOFFS")?;
    let idlen: &[u64] = cast_slice(c.section("TIDLEN")?, "TIDLEN")?;
    let tids: &[u32] = cast_slice(c.section("TIDS")?, "TIDS")?;
    if toffs.len() as u128 != l as u128 * nb1 as u128 {
        return Err(bad(format!(
            "TOFFS holds {} offsets, L * (2^range_bits + 1) = {} expected",
            toffs.len(),
            l as u128 * nb1 as u128
        )));
    }
    if idlen.len() != l {
        return Err(bad(format!(
            "TIDLEN holds {} counts, L = {l} expected",
            idlen.len()
        )));
    }
    let sum: u128 = idlen.iter().map(|&v| v as u128).sum();
    if sum != tids.len() as u128 {
        return Err(bad(format!(
            "TIDLEN counts sum to {sum} ids but TIDS holds {}",
            tids.len()
        )));
    }
    let shape = p.shape(li.hash_dim);
    let reg = crate::source::lsh::hash::registration(p.family);
    let (want, per) = (reg.section_len)(&shape);
    let fam_sec = c.section(reg.section)?;
    if fam_sec.len() as u128 != want {
        return Err(bad(format!(
            "{} holds {} bytes, K * L * {per} * 4 = {want} expected from the params",
            reg.section,
            fam_sec.len()
        )));
    }
    // ---- family
    let fam = (reg.load)(&shape, fam_sec, p.given, bad)?;
    // The tables are views of the mapping (kept alive by `keep`): a large
    // index opens without copying them.
    let keep: crate::source::lsh::tables::KeepAlive = c.clone();
    let mut offs = Vec::with_capacity(l);
    let mut ids = Vec::with_capacity(l);
    let mut at = 0usize;
    for t in 0..l {
        let n = idlen[t] as usize;
        // SAFETY: both slices lie in the read-only mapping that `keep` (an
        // Arc of the container) owns and nobody writes.
        unsafe {
            offs.push(U32s::mapped(&toffs[t * nb1..(t + 1) * nb1], &keep));
            ids.push(U32s::mapped(&tids[at..at + n], &keep));
        }
        at += n;
    }
    let (cap, seed) = (p.bucket_cap, p.seed);
    let tables = Box::new(
        if li.labelled {
            Tables::from_stored_parts_multi(rows, range_bits, cap, seed, 0, offs, ids)
        } else {
            Tables::from_stored_parts(rows, range_bits, cap, seed, 0, offs, ids, Vec::new())
        }
        .map_err(|e| bad(e.message))?,
    );
    Ok(Box::new(Lsh { fam, tables }))
}
