//! Query tables ([`Pq4Lut`]): per sub-quantiser byte tables with one
//! shared step and offset.

use crate::bail;
use crate::error::Result;

use super::*;

/// A query's quantised tables (`16 * m_pad` bytes, the global scale
/// `Delta` and the offset sum `O`; see the module documentation). Reuse one
/// per thread: [`Pq4Lut::set`] does not allocate.
#[derive(Clone, Debug)]
pub struct Pq4Lut {
    m: usize,
    bytes: Vec<u8>,
    delta: f32,
    offset: f32,
    /// `16 * m` f64 tables (scratch of `set`).
    tables: Vec<f64>,
    /// `m` per-sub-space minima (scratch of the quantisation).
    lows: Vec<f64>,
}

impl Pq4Lut {
    /// All-zero tables for `m` sub-quantisers (`1..=MAX_M`).
    pub fn new(m: usize) -> Result<Pq4Lut> {
        if m == 0 || m > MAX_M {
            bail!(InvalidArgument, "m is {m}; it must be 1 ..= {MAX_M}");
        }
        Ok(Pq4Lut {
            m,
            bytes: try_vec(KSUB * m_pad_of(m), "lut")?,
            delta: 0.0,
            offset: 0.0,
            tables: try_vec(KSUB * m, "tables")?,
            lows: try_vec(m, "lows")?,
        })
    }

    /// Tables from given bytes (`16 * m`: entry `c` of sub-quantiser `j`
    /// at `16 j + c`), scale and offset, e.g. for tests or stored tables.
    /// `delta` and `offset` must be finite (`NonFinite`).
    pub fn from_parts(m: usize, bytes: &[u8], delta: f32, offset: f32) -> Result<Pq4Lut> {
        let mut l = Pq4Lut::new(m)?;
        if bytes.len() != KSUB * m {
            bail!(
                InvalidArgument,
                "`bytes` holds {} values, 16 * m = {} needed",
                bytes.len(),
                KSUB * m
            );
        }
        if !delta.is_finite() || !offset.is_finite() {
            bail!(
                NonFinite,
                "delta {delta} and offset {offset} must be finite"
            );
        }
        l.bytes[..KSUB * m].copy_from_slice(bytes);
        l.delta = delta;
        l.offset = offset;
        Ok(l)
    }

    /// Quantises float tables (`tables[16 j + c] = T[j][c]`, `16 * m`
    /// finite values) into this query (see the module documentation). On
    /// an error the query is unchanged.
    pub fn set_tables(&mut self, tables: &[f64]) -> Result<()> {
        let m = self.m;
        if tables.len() != KSUB * m {
            bail!(
                InvalidArgument,
                "`tables` holds {} values, 16 * m = {} needed",
                tables.len(),
                KSUB * m
            );
        }
        if let Some(i) = tables.iter().position(|v| !v.is_finite()) {
            bail!(
                NonFinite,
                "tables[{i}] is {} (finite values needed)",
                tables[i]
            );
        }
        let mut lows = std::mem::take(&mut self.lows);
        let r = self.quantize(tables, &mut lows);
        self.lows = lows;
        r
    }

    /// The quantisation of [`Self::set_tables`] on finite `tables`
    /// (`16 * m`); `lows` is scratch of at least `m` values. No allocation.
    fn quantize(&mut self, tables: &[f64], lows: &mut [f64]) -> Result<()> {
        let mut range = 0.0f64;
        let mut osum = 0.0f64;
        for (t, lo_out) in tables.chunks_exact(KSUB).zip(lows.iter_mut()) {
            let (mut lo, mut hi) = (t[0], t[0]);
            for &v in &t[1..] {
                lo = if v < lo { v } else { lo };
                hi = if v > hi { v } else { hi };
            }
            range = range.max(hi - lo);
            osum += lo;
            *lo_out = lo;
        }
        let offset = osum as f32;
        if !offset.is_finite() || !((range / 255.0) as f32).is_finite() {
            bail!(
                NonFinite,
                "the tables' range {range:e} or offset sum {osum:e} overflows f32"
            );
        }
        let mut delta = (range / 255.0) as f32;
        if delta < f32::MIN_POSITIVE {
            delta = 0.0;
        }
        // (v - lo) * (1 / delta) is in 0 ..= 255 (1 + 2^-24) (1 + 2^-52)^2
        // (Delta is range / 255 rounded to f32; two f64 roundings): the
        // truncation of x + 1/2 rounds it to 0 ..= 255, off by at most
        // 1/2 + 2^-44 code units.
        let inv = if delta == 0.0 {
            0.0
        } else {
            1.0 / delta as f64
        };
        for ((t, b), &lo) in tables
            .chunks_exact(KSUB)
            .zip(self.bytes.chunks_exact_mut(KSUB))
            .zip(lows.iter())
        {
            let t: &[f64; KSUB] = t.try_into().expect("KSUB entries");
            // SAFETY: finite and in 1/2 ..= 256 (above), so representable
            // in i32: the unchecked truncation is the integer `as u32`
            // gives, and vectorises (`cvttpd2dq`), where `as` keeps its
            // saturating checks and one scalar conversion per entry.
            let x: [i32; KSUB] =
                std::array::from_fn(|c| unsafe { ((t[c] - lo) * inv + 0.5).to_int_unchecked() });
            for (o, &x) in b.iter_mut().zip(&x) {
                *o = x.min(255) as u8;
            }
        }
        self.delta = delta;
        self.offset = offset;
        Ok(())
    }

    /// The tables of query `q` (`dim` finite floats) against `cb`:
    /// `T[j][c] = <q_j, C_j[c]>` in f64, then [`Self::set_tables`].
    pub fn set(&mut self, cb: &Codebook, q: &[f32]) -> Result<()> {
        if cb.m != self.m {
            bail!(
                InvalidArgument,
                "the codebook has {} sub-quantisers, the table {}",
                cb.m,
                self.m
            );
        }
        if q.len() != cb.dim {
            bail!(
                InvalidArgument,
                "the query has {} values, the codebook dim {}",
                q.len(),
                cb.dim
            );
        }
        if let Some(j) = q.iter().position(|v| !v.is_finite()) {
            bail!(NonFinite, "q[{j}] is {} (finite values needed)", q[j]);
        }
        let ds = cb.dsub;
        let mut tables = std::mem::take(&mut self.tables);
        // T[j][c] = sum_k q_k C_j[c]_k, summed over k in order from 0.0:
        // the transposed centroids make the 16 sums of a sub-space one
        // vectorisable loop per k, into a local array (registers, not a
        // load and store of the table per term).
        for (j, t) in tables.chunks_exact_mut(KSUB).enumerate() {
            let mut acc = [0.0f64; KSUB];
            for k in 0..ds {
                let qk = q[j * ds + k] as f64;
                let ct: &[f32; KSUB] = cb.transposed[(j * ds + k) * KSUB..][..KSUB]
                    .try_into()
                    .expect("KSUB centroids");
                for (o, &cv) in acc.iter_mut().zip(ct) {
                    *o += qk * cv as f64;
                }
            }
            t.copy_from_slice(&acc);
        }
        // Finite: f32 products and sums of dsub terms cannot overflow f64.
        let mut lows = std::mem::take(&mut self.lows);
        let r = self.quantize(&tables, &mut lows);
        self.tables = tables;
        self.lows = lows;
        r
    }

    pub fn m(&self) -> usize {
        self.m
    }
    /// `16 * m_pad` bytes (the padding sub-quantiser's table is zero).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// The global scale `Delta`.
    pub fn delta(&self) -> f32 {
        self.delta
    }
    /// `O = f32(sum_m o_m)`.
    pub fn offset(&self) -> f32 {
        self.offset
    }
    /// `M Delta h`: the bound on `|Delta acc + sum_m o_m - <q, x^>|` from
    /// the byte rounding (module documentation).
    pub fn bound(&self) -> f64 {
        self.m as f64 * self.delta as f64 * H
    }
}
