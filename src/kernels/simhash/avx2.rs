//! SimHash, AVX2 tier (avx2 + fma).
//!
//! Dense planes: a register-blocked micro-kernel over the same packed
//! 16-plane panels as AVX-512, each panel row being two ymm: 4 rows x 1
//! panel (8 ymm accumulators; 16 registers in all) with `vbroadcastss` of
//! each row's value feeding `vfmadd231ps`. Signs come from `vcmpps`
//! (`_CMP_GT_OQ`: NaN gives 0) and `vmovmskps`, 8 bits per ymm, so the
//! projections never leave the registers unless `project` asks for them.
//! One row alone uses 1 x 4 panels (eight independent FMA chains).
//!
//! Sparse ±1 planes: 32 rows at a time are transposed into a `dim x 32`
//! scratch block (16 KiB for d = 128: L1-resident); each plane adds the
//! block rows of its positive coordinates and subtracts those of its negative
//! ones (four ymm per index, so one index load feeds four vector loads; two
//! partial sums per quarter). The 32-bit sign masks of 64 planes are then
//! transposed into the rows' bit strings with `vpslld` + `vmovmskps`.

use std::arch::x86_64::*;
use std::cell::RefCell;

use super::{emit_codes, words_per_row};
use super::{Planes, SparseView, PANEL};

const ROWS: usize = 4;
const SPARSE_ROWS: usize = 32;

thread_local! {
    static BITS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
    static BLOCK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// # Safety
/// See [`super::HashFn`].
pub unsafe fn hash(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    // SAFETY: the caller guarantees the HashFn contract: the CPU has avx2
    // and fma (checked by SimHash::hash_isa) and the lengths were checked.
    unsafe {
        match h.sparse() {
            Some(sp) => sparse::<false>(h, sp, x, n, stride, codes, &mut []),
            None => dense::<false>(h, x, n, stride, codes, &mut []),
        }
    }
}

/// # Safety
/// See [`super::ProjectFn`].
pub unsafe fn project(h: &Planes<'_>, x: &[f32], n: usize, stride: usize, out: &mut [f32]) {
    // SAFETY: as in `hash`.
    unsafe {
        match h.sparse() {
            Some(sp) => sparse::<true>(h, sp, x, n, stride, &mut [], out),
            None => dense::<true>(h, x, n, stride, &mut [], out),
        }
    }
}

/// Pointers shared by the tiles of one call.
#[derive(Clone, Copy)]
struct Ctx {
    dim: usize,
    stride: usize,
    pk: *const f32,
    np: usize,
    words: usize,
}

/// One RR x PP tile: rows `x .. x + RR*stride`, panels `panel0 ..
/// panel0 + PP`. Writes sign bits into `bits[r*words ..]` or projections
/// into `out[r*np ..]`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile<const RR: usize, const PP: usize, const PROJ: bool>(
    c: Ctx,
    x: *const f32,
    panel0: usize,
    bits: *mut u64,
    out: *mut f32,
) {
    let mut acc = [[[_mm256_setzero_ps(); 2]; PP]; RR];
    let panel_len = c.dim * PANEL;
    // SAFETY (whole body): panels panel0..panel0+PP exist in `pk` (caller),
    // rows 0..RR of x hold `dim` readable values each (checked lengths), and
    // bits/out have RR rows of `words`/`np` entries (caller).
    unsafe {
        let base = c.pk.add(panel0 * panel_len);
        for j in 0..c.dim {
            let mut w = [[_mm256_setzero_ps(); 2]; PP];
            for (p, wp) in w.iter_mut().enumerate() {
                let src = base.add(p * panel_len + j * PANEL);
                wp[0] = _mm256_load_ps(src);
                wp[1] = _mm256_load_ps(src.add(8));
            }
            for (r, ar) in acc.iter_mut().enumerate() {
                let xb = _mm256_set1_ps(*x.add(r * c.stride + j));
                for p in 0..PP {
                    ar[p][0] = _mm256_fmadd_ps(xb, w[p][0], ar[p][0]);
                    ar[p][1] = _mm256_fmadd_ps(xb, w[p][1], ar[p][1]);
                }
            }
        }
        for (r, ar) in acc.iter().enumerate() {
            for (p, a) in ar.iter().enumerate() {
                let panel = panel0 + p;
                if PROJ {
                    let lanes = (c.np - panel * PANEL).min(PANEL);
                    let mut tmp = [0.0f32; PANEL];
                    _mm256_storeu_ps(tmp.as_mut_ptr(), a[0]);
                    _mm256_storeu_ps(tmp.as_mut_ptr().add(8), a[1]);
                    std::ptr::copy_nonoverlapping(
                        tmp.as_ptr(),
                        out.add(r * c.np + panel * PANEL),
                        lanes,
                    );
                } else {
                    let z = _mm256_setzero_ps();
                    let m = (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(a[0], z)) as u32)
                        | ((_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(a[1], z)) as u32) << 8);
                    let bit = panel * PANEL;
                    *bits.add(r * c.words + bit / 64) |= (m as u64) << (bit % 64);
                }
            }
        }
    }
}

/// Runs `tile::<rr, PP>` for a runtime row count `rr` in 1..=ROWS.
macro_rules! tile_rows {
    ($rr:expr, $pp:literal, $proj:ident, $($a:expr),*) => {
        match $rr {
            1 => tile::<1, $pp, $proj>($($a),*),
            2 => tile::<2, $pp, $proj>($($a),*),
            3 => tile::<3, $pp, $proj>($($a),*),
            _ => tile::<4, $pp, $proj>($($a),*),
        }
    };
}

#[target_feature(enable = "avx2,fma")]
unsafe fn dense<const PROJ: bool>(
    h: &Planes<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let npanels = h.num_panels();
    let c = Ctx {
        dim: h.dim(),
        stride,
        pk: h.packed().as_ptr(),
        np: h.num_planes(),
        words: words_per_row(npanels),
    };
    let (k, l) = (h.bits(), h.tables() as usize);
    BITS.with(|b| {
        let mut bits = b.borrow_mut();
        if bits.len() < ROWS * c.words {
            bits.resize(ROWS * c.words, 0);
        }
        let mut i = 0;
        while i < n {
            let rr = (n - i).min(ROWS);
            bits[..rr * c.words].fill(0);
            // SAFETY: row i + rr - 1 < n exists in x (checked); out has n
            // rows of np values when PROJ (checked); bits holds ROWS rows.
            unsafe {
                let xr = x.as_ptr().add(i * stride);
                let bp = bits.as_mut_ptr();
                let op = if PROJ {
                    out.as_mut_ptr().add(i * c.np)
                } else {
                    std::ptr::null_mut()
                };
                let mut p = 0;
                if rr == 1 {
                    while p + 4 <= npanels {
                        tile::<1, 4, PROJ>(c, xr, p, bp, op);
                        p += 4;
                    }
                }
                while p < npanels {
                    tile_rows!(rr, 1, PROJ, c, xr, p, bp, op);
                    p += 1;
                }
            }
            if !PROJ {
                for r in 0..rr {
                    emit_codes(&bits[r * c.words..], k, l as u32, &mut codes[(i + r) * l..]);
                }
            }
            i += rr;
        }
    });
}

/// Sparse driver: blocks of 32 rows (four ymm per index); a remainder of at
/// most 8 rows uses one-ymm blocks so a single row does not pay for 32.
#[target_feature(enable = "avx2,fma")]
unsafe fn sparse<const PROJ: bool>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let (l, np) = (h.tables() as usize, h.num_planes());
    let big = if n % SPARSE_ROWS <= 8 {
        n - n % SPARSE_ROWS
    } else {
        n
    };
    // SAFETY: forwarded; the row ranges split the checked input/outputs.
    unsafe {
        if big > 0 {
            sparse_block::<PROJ, 4>(h, sp, x, big, stride, codes, out);
        }
        if big < n {
            let (co, oo) = if PROJ {
                (&mut [][..], &mut out[big * np..])
            } else {
                (&mut codes[big * l..], &mut [][..])
            };
            if n - big < 4 {
                super::sparse_rows::<PROJ>(h, sp, &x[big * stride..], n - big, stride, co, oo);
            } else {
                sparse_block::<PROJ, 1>(h, sp, &x[big * stride..], n - big, stride, co, oo);
            }
        }
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn sparse_block<const PROJ: bool, const Q: usize>(
    h: &Planes<'_>,
    sp: &SparseView<'_>,
    x: &[f32],
    n: usize,
    stride: usize,
    codes: &mut [u32],
    out: &mut [f32],
) {
    let rows_per_block = 8 * Q;
    let dim = h.dim();
    let np = h.num_planes();
    let words = np.div_ceil(64);
    let (k, l) = (h.bits(), h.tables() as usize);
    BLOCK.with(|blk| {
        BITS.with(|b| {
            let mut block = blk.borrow_mut();
            let mut bits = b.borrow_mut();
            if block.len() < dim * rows_per_block {
                block.resize(dim * rows_per_block, 0.0);
            }
            if bits.len() < rows_per_block * words {
                bits.resize(rows_per_block * words, 0);
            }
            let mut tmp = [0.0f32; SPARSE_ROWS];
            // Sign masks of up to 64 consecutive planes: bit r = row r.
            let mut masks = [0u32; 64];
            let mut i = 0;
            while i < n {
                let rr = (n - i).min(rows_per_block);
                // Transpose rows i..i+rr into block[j*ROWS + r]; padding
                // rows are zero.
                if rr < rows_per_block {
                    block[..dim * rows_per_block].fill(0.0);
                }
                for r in 0..rr {
                    let row = &x[(i + r) * stride..(i + r) * stride + dim];
                    for (j, v) in row.iter().enumerate() {
                        block[j * rows_per_block + r] = *v;
                    }
                }
                let bp = block.as_ptr();
                for p in 0..np {
                    let (s, m, e) = (
                        sp.start[p] as usize,
                        sp.mid[p] as usize,
                        sp.start[p + 1] as usize,
                    );
                    // SAFETY: every index is < dim (Planes::new's contract), so
                    // idx*8Q + 8Q <= dim*8Q = block length.
                    let v = unsafe { signed_sum::<Q>(bp, &sp.idx[s..m], &sp.idx[m..e]) };
                    if PROJ {
                        // SAFETY: tmp holds 32 floats.
                        unsafe {
                            for (q, vq) in v.iter().enumerate() {
                                _mm256_storeu_ps(tmp.as_mut_ptr().add(8 * q), *vq);
                            }
                        }
                        for r in 0..rr {
                            out[(i + r) * np + p] = tmp[r];
                        }
                    } else {
                        let z = _mm256_setzero_ps();
                        let mut mask = 0u32;
                        for (q, vq) in v.iter().enumerate() {
                            mask |= (_mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(*vq, z))
                                as u32)
                                << (8 * q);
                        }
                        masks[p % 64] = mask;
                        if p % 64 == 63 || p + 1 == np {
                            let w = p / 64;
                            // SAFETY: bits holds rows_per_block rows of `words`.
                            unsafe {
                                transpose_masks(
                                    &masks,
                                    p % 64 + 1,
                                    rr,
                                    bits.as_mut_ptr().add(w),
                                    words,
                                )
                            };
                        }
                    }
                }
                if !PROJ {
                    for r in 0..rr {
                        emit_codes(&bits[r * words..], k, l as u32, &mut codes[(i + r) * l..]);
                    }
                }
                i += rr;
            }
        })
    });
}

/// Transposes the sign masks of `count` (<= 64) planes (bit r of
/// `masks[q]` = row r's bit for plane q) into one u64 word per row:
/// `dst[r * words] = Σ_q bit_r(masks[q]) << q`, for rows 0..rr. Per row,
/// each 8-plane group is shifted so bit r becomes the lane's sign bit and
/// read with `vmovmskps`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn transpose_masks(masks: &[u32; 64], count: usize, rr: usize, dst: *mut u64, words: usize) {
    let mut v = [_mm256_setzero_si256(); 8];
    for (g, vg) in v.iter_mut().enumerate() {
        // SAFETY: masks holds 64 u32 = 8 groups of 8.
        *vg = unsafe { _mm256_loadu_si256(masks.as_ptr().add(8 * g).cast()) };
    }
    let live = if count == 64 {
        u64::MAX
    } else {
        (1u64 << count) - 1
    };
    for r in 0..rr {
        let sh = _mm_cvtsi32_si128(31 - r as i32);
        let mut word = 0u64;
        for (g, vg) in v.iter().enumerate() {
            let m =
                _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_sll_epi32(*vg, sh))) as u32 as u64;
            word |= m << (8 * g);
        }
        // SAFETY: row r < SPARSE_ROWS; dst points at word w of row 0.
        unsafe { *dst.add(r * words) = word & live };
    }
}

/// `Σ block[plus] - Σ block[minus]`, each block row `8*Q` floats (Q ymm),
/// two partial sums per ymm to hide the add latency.
#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::needless_range_loop)] // a[q], b[q], rows q: parallel arrays
unsafe fn signed_sum<const Q: usize>(
    block: *const f32,
    plus: &[u32],
    minus: &[u32],
) -> [__m256; 4] {
    let w = 8 * Q;
    let mut a = [_mm256_setzero_ps(); 4];
    let mut b = [_mm256_setzero_ps(); 4];
    // SAFETY: each index j < dim, so block[j*w .. j*w + w] is in bounds
    // (caller's invariant).
    unsafe {
        for (list, sign) in [(plus, 1.0f32), (minus, -1.0f32)] {
            let mut pairs = list.chunks_exact(2);
            for c in &mut pairs {
                let (r0, r1) = (block.add(c[0] as usize * w), block.add(c[1] as usize * w));
                for q in 0..Q {
                    if sign > 0.0 {
                        a[q] = _mm256_add_ps(a[q], _mm256_loadu_ps(r0.add(8 * q)));
                        b[q] = _mm256_add_ps(b[q], _mm256_loadu_ps(r1.add(8 * q)));
                    } else {
                        a[q] = _mm256_sub_ps(a[q], _mm256_loadu_ps(r0.add(8 * q)));
                        b[q] = _mm256_sub_ps(b[q], _mm256_loadu_ps(r1.add(8 * q)));
                    }
                }
            }
            if let [j] = pairs.remainder() {
                let r0 = block.add(*j as usize * w);
                for q in 0..Q {
                    let v = _mm256_loadu_ps(r0.add(8 * q));
                    a[q] = if sign > 0.0 {
                        _mm256_add_ps(a[q], v)
                    } else {
                        _mm256_sub_ps(a[q], v)
                    };
                }
            }
        }
    }
    let mut r = [_mm256_setzero_ps(); 4];
    for ((rq, aq), bq) in r.iter_mut().zip(a).zip(b).take(Q) {
        *rq = _mm256_add_ps(aq, bq);
    }
    r
}
