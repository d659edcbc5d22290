//! DWTA, scalar tier: the oracle. Plain loops over the bin map, written for
//! clarity; every other tier is tested against these functions. No lookup
//! tables: sparse rows are searched with `binary_search`, the probe sequence
//! is computed from its formula ([`super::probe`]) and floats are
//! compared as floats.

use std::cell::RefCell;

use super::pack_keys;
use super::{probe, DwtaView, MAX_ATTEMPTS};

/// The winner of one bin: position of the largest non-NaN value, ties to
/// the smallest position; `None` when every value is NaN or absent.
/// `value(c)` is the value of coordinate `c`, `None` when it is absent.
pub fn bin_winner(h: &DwtaView<'_>, j: usize, value: impl Fn(u32) -> Option<f32>) -> Option<u32> {
    let b = h.bin_size() as usize;
    let mut best: Option<(f32, u32)> = None;
    for (p, &c) in h.map()[j * b..(j + 1) * b].iter().enumerate() {
        let Some(v) = value(c) else { continue };
        if v.is_nan() {
            continue;
        }
        match best {
            Some((m, _)) if v <= m => {}
            _ => best = Some((v, p as u32)),
        }
    }
    best.map(|(_, p)| p)
}

thread_local! {
    static HASH: RefCell<Vec<u32>> = const { RefCell::new(Vec::new()) };
    static RAW: RefCell<Vec<Option<u32>>> = const { RefCell::new(Vec::new()) };
}

pub fn dense(h: &DwtaView<'_>, x: &[f32], n: usize, stride: usize, codes: &mut [u32]) {
    let (nb, l) = (h.num_bins(), h.tables() as usize);
    HASH.with(|hs| {
        let mut hash = hs.borrow_mut();
        hash.resize(nb, 0);
        for i in 0..n {
            let row = &x[i * stride..i * stride + h.dim()];
            for (j, hv) in hash.iter_mut().enumerate() {
                // Dense: every coordinate is present; an all-NaN bin gives 0.
                *hv = bin_winner(h, j, |c| Some(row[c as usize])).unwrap_or(0);
            }
            pack_keys(h, &hash, &mut codes[i * l..(i + 1) * l]);
        }
    });
}

pub fn sparse(
    h: &DwtaView<'_>,
    indptr: &[usize],
    indices: &[u32],
    values: &[f32],
    codes: &mut [u32],
) {
    let (nb, l) = (h.num_bins(), h.tables() as usize);
    RAW.with(|rs| {
        HASH.with(|hs| {
            let mut raw = rs.borrow_mut();
            let mut hash = hs.borrow_mut();
            raw.resize(nb, None);
            hash.resize(nb, 0);
            for i in 0..indptr.len() - 1 {
                let idx = &indices[indptr[i]..indptr[i + 1]];
                let val = &values[indptr[i]..indptr[i + 1]];
                let lookup = |c: u32| idx.binary_search(&c).ok().map(|u| val[u]);
                for (j, r) in raw.iter_mut().enumerate() {
                    *r = bin_winner(h, j, lookup);
                }
                for j in 0..nb {
                    hash[j] = match raw[j] {
                        Some(p) => p,
                        None => (1..=MAX_ATTEMPTS)
                            .find_map(|a| raw[probe(j as u32, a, nb as u32) as usize])
                            .unwrap_or(0),
                    };
                }
                pack_keys(h, &hash, &mut codes[i * l..(i + 1) * l]);
            }
        })
    });
}
