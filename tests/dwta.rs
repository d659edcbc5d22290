//! DWTA: every tier against the scalar oracle (exact: DWTA compares, it does
//! not add), a hand-worked example, golden values of the seeded map and of
//! the probe sequence, from_map round trip and input validation.

mod common;

use lshk::dwta::{probe, Dwta};
use lshk::kernels::dwta::scalar;
use lshk::rng::SplitMix64;
use lshk::{Isa, Status};

// Every tier this CPU supports (capped by `LSHK_MAX_ISA`), printed once per
// test; under CI a supported tier that does not run fails the test.
use common::tiers::for_this_test as tiers;

/// Values with many ties and every special: NaN, ±inf, ±0.
fn special_value(r: &mut SplitMix64) -> f32 {
    match r.below(16) {
        0 => f32::NAN,
        1 => f32::INFINITY,
        2 => f32::NEG_INFINITY,
        3 => -0.0,
        4 => 0.0,
        5 => 1.0,
        6 => -1.0,
        7 => f32::from_bits(1), // denormal
        8 => -f32::MIN_POSITIVE,
        _ => (r.below(7) as f32) - 3.0 + if r.below(2) == 0 { 0.5 } else { 0.0 },
    }
}

fn random_value(r: &mut SplitMix64) -> f32 {
    r.next_normal() as f32
}

/// Shapes (K, L, B) covering B in {2, 8, 256}, K*L from 1 to 3*16+1 and not
/// powers of two, and K*log2(B) up to 32.
fn shapes() -> Vec<(u32, u32, u32)> {
    let mut v = vec![];
    for kl in 1..=49u32 {
        // B = 2 with K = 1 (K*L = L), B = 8 with K = kl or 1 table
        v.push((1, kl, 2));
    }
    v.extend_from_slice(&[
        (3, 5, 8),
        (6, 50, 8),
        (7, 3, 8),
        (10, 1, 8),
        (32, 3, 2),
        (4, 3, 256),
        (1, 17, 256),
        (3, 1, 256),
        (16, 4, 4),
    ]);
    v
}

const DIMS: [usize; 12] = [1, 2, 3, 5, 7, 8, 9, 16, 17, 33, 128, 4096];

/// Every key fits in K*log2(B) bits (no overlapping fields, no INT_MIN or
/// other garbage left by densification).
fn assert_key_width(h: &Dwta, codes: &[u32], what: &str) {
    let bits = h.bins_per_table() * h.log2_bin_size();
    if bits < 32 {
        for &c in codes {
            assert!(c >> bits == 0, "{what}: key {c:#x} wider than {bits} bits");
        }
    }
}

fn check_dense(h: &Dwta, x: &[f32], n: usize, stride: usize, what: &str) {
    let l = h.tables() as usize;
    let mut want = vec![0u32; n * l];
    h.hash_dense_isa(Isa::Scalar, x, n, stride, &mut want)
        .unwrap();
    assert_key_width(h, &want, what);
    for &t in &tiers() {
        let mut got = vec![0xDEAD_BEEFu32; n * l + 1];
        h.hash_dense_isa(t, x, n, stride, &mut got[..n * l])
            .unwrap();
        assert_eq!(&got[..n * l], &want[..], "{what} tier {}", t.name());
        assert_eq!(got[n * l], 0xDEAD_BEEF);
    }
}

#[test]
fn dense_every_tier_matches_oracle() {
    let mut r = SplitMix64::new(5);
    for (k, l, b) in shapes() {
        for &dim in &DIMS {
            if b == 256 && dim == 4096 && k * l > 8 {
                continue; // keep the oracle's run time small
            }
            let h = Dwta::new(dim, k, l, b, 1000 + dim as u64).unwrap();
            let n = 3;
            let stride = dim + 3;
            // One element of offset: the rows start unaligned.
            let mut buf = vec![0.0f32; 1 + n * stride];
            for (u, v) in buf.iter_mut().enumerate() {
                *v = if u % 2 == 0 {
                    special_value(&mut r)
                } else {
                    random_value(&mut r)
                };
            }
            check_dense(
                &h,
                &buf[1..],
                n,
                stride,
                &format!("dim {dim} K {k} L {l} B {b} specials"),
            );
            let ties: Vec<f32> = (0..n * stride).map(|_| r.below(3) as f32).collect();
            check_dense(
                &h,
                &ties,
                n,
                stride,
                &format!("dim {dim} K {k} L {l} B {b} ties"),
            );
            let nans: Vec<f32> = (0..n * stride)
                .map(|_| if r.below(4) == 0 { -0.0 } else { f32::NAN })
                .collect();
            check_dense(
                &h,
                &nans,
                n,
                stride,
                &format!("dim {dim} K {k} L {l} B {b} nans"),
            );
        }
    }
}

#[test]
fn dense_many_rows_and_strides() {
    let mut r = SplitMix64::new(8);
    let h = Dwta::new(128, 6, 50, 8, 77).unwrap();
    for n in [0usize, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 64, 65] {
        for stride in [128usize, 129, 200] {
            let x: Vec<f32> = (0..n * stride + 1).map(|_| random_value(&mut r)).collect();
            check_dense(&h, &x, n, stride, &format!("n {n} stride {stride}"));
        }
    }
}

/// A CSR batch from rows given as (index, value) lists (sorted here).
fn csr(rows: &[Vec<(u32, f32)>]) -> (Vec<usize>, Vec<u32>, Vec<f32>) {
    let mut indptr = vec![0usize];
    let (mut idx, mut val) = (vec![], vec![]);
    for row in rows {
        let mut row = row.clone();
        row.sort_by_key(|e| e.0);
        row.dedup_by_key(|e| e.0);
        for (c, v) in row {
            idx.push(c);
            val.push(v);
        }
        indptr.push(idx.len());
    }
    (indptr, idx, val)
}

fn check_sparse(h: &Dwta, rows: &[Vec<(u32, f32)>], what: &str) -> Vec<u32> {
    let (indptr, idx, val) = csr(rows);
    let n = rows.len();
    let l = h.tables() as usize;
    let mut want = vec![0u32; n * l];
    h.hash_sparse_isa(Isa::Scalar, &indptr, &idx, &val, &mut want)
        .unwrap();
    assert_key_width(h, &want, what);
    for &t in &tiers() {
        let mut got = vec![0xDEAD_BEEFu32; n * l + 1];
        h.hash_sparse_isa(t, &indptr, &idx, &val, &mut got[..n * l])
            .unwrap();
        assert_eq!(&got[..n * l], &want[..], "{what} tier {}", t.name());
        assert_eq!(got[n * l], 0xDEAD_BEEF);
    }
    want
}

fn random_row(r: &mut SplitMix64, dim: usize, density: f64, special: bool) -> Vec<(u32, f32)> {
    let mut row = vec![];
    for c in 0..dim as u32 {
        if r.next_f64_open() < density {
            let v = if special {
                special_value(r)
            } else {
                random_value(r)
            };
            row.push((c, v));
        }
    }
    row
}

#[test]
fn sparse_every_tier_matches_oracle() {
    let mut r = SplitMix64::new(6);
    for (k, l, b) in shapes() {
        for &dim in &DIMS {
            if b == 256 && dim == 4096 && k * l > 8 {
                continue;
            }
            let h = Dwta::new(dim, k, l, b, 2000 + dim as u64).unwrap();
            let bs = b as usize;
            let mut rows: Vec<Vec<(u32, f32)>> = vec![
                vec![],                                  // no entries
                vec![(r.below(dim as u64) as u32, 1.5)], // one entry
                (0..dim as u32)
                    .map(|c| (c, special_value(&mut r)))
                    .collect(), // all
                (0..dim as u32).map(|c| (c, f32::NAN)).collect(), // all NaN
                (0..dim as u32).map(|c| (c, 0.0)).collect(), // stored zeros
                // entries only in bin 0: densification everywhere else
                h.map()[..bs]
                    .iter()
                    .map(|&c| (c, special_value(&mut r)))
                    .collect(),
                // entries only in the last bin
                h.map()[h.map().len() - bs..]
                    .iter()
                    .map(|&c| (c, random_value(&mut r)))
                    .collect(),
            ];
            for density in [0.01, 0.1, 0.5] {
                rows.push(random_row(&mut r, dim, density, true));
                rows.push(random_row(&mut r, dim, density, false));
            }
            // Every prefix length up to 3 AVX-512 widths + 1 (tails).
            for len in 0..=49usize.min(dim) {
                rows.push((0..len as u32).map(|c| (c, random_value(&mut r))).collect());
            }
            check_sparse(&h, &rows, &format!("dim {dim} K {k} L {l} B {b}"));
        }
    }
}

#[test]
fn sparse_amazon_shape_both_densification_paths() {
    // Amazon-670K: 128 entries of 135,909, K = 6, L = 50, B = 8: a few
    // occupied bins (inverse densification) ...
    let dim = 135_909;
    let h = Dwta::new(dim, 6, 50, 8, 3).unwrap();
    let mut r = SplitMix64::new(9);
    let mut rows = vec![];
    for _ in 0..20 {
        let mut row: Vec<(u32, f32)> = (0..128)
            .map(|_| (r.below(dim as u64) as u32, random_value(&mut r)))
            .collect();
        row.sort_by_key(|e| e.0);
        row.dedup_by_key(|e| e.0);
        rows.push(row);
    }
    // ... exactly one occupied bin, and most bins occupied (forward).
    rows.push(vec![(h.map()[17], 2.0)]);
    rows.push(
        h.map()
            .iter()
            .step_by(3)
            .map(|&c| (c, random_value(&mut r)))
            .collect(),
    );
    let codes = check_sparse(&h, &rows, "amazon shape");
    // One occupied bin: every key is built from that bin's hash only
    // (position of map[17] in bin 2 is 1 if the coordinate is not repeated
    // earlier in the bin), or 0 for bins whose 100 probes all missed.
    let hv = {
        let bin = &h.map()[16..24];
        bin.iter().position(|&c| c == h.map()[17]).unwrap() as u32
    };
    for &code in &codes[20 * 50..21 * 50] {
        for k in 0..6 {
            let f = (code >> (3 * k)) & 7;
            assert!(f == hv || f == 0, "{code:#x}");
        }
    }
}

#[test]
fn sparse_with_all_entries_equals_dense_without_nan() {
    let mut r = SplitMix64::new(10);
    for (k, l, b) in [(6u32, 50u32, 8u32), (3, 7, 2), (2, 5, 256)] {
        let dim = 100;
        let h = Dwta::new(dim, k, l, b, 4).unwrap();
        let x: Vec<f32> = (0..dim)
            .map(|_| {
                let v = special_value(&mut r);
                if v.is_nan() {
                    -0.0
                } else {
                    v
                }
            })
            .collect();
        let mut dense = vec![0u32; l as usize];
        h.hash_dense(&x, 1, dim, &mut dense).unwrap();
        let row: Vec<(u32, f32)> = x.iter().enumerate().map(|(c, &v)| (c as u32, v)).collect();
        let sparse = check_sparse(&h, &[row], "all entries");
        assert_eq!(dense, sparse);
    }
}

#[test]
fn hand_worked_example() {
    // dim 6, K = 2 bins per table, L = 1 table, B = 4 (2 bits per bin).
    //   bin 0 = coordinates [5, 0, 3, 3], bin 1 = [2, 4, 1, 0].
    let map = [5, 0, 3, 3, 2, 4, 1, 0];
    let h = Dwta::from_map(&map, 6, 2, 1, 4).unwrap();
    // Dense x = [1, 7, -2, 4, 7, NaN]:
    //   bin 0 sees [x5, x0, x3, x3] = [NaN, 1, 4, 4]: NaN never wins, 4 at
    //         p = 2 beats 1, the tie at p = 3 keeps p = 2   -> hash 2
    //   bin 1 sees [x2, x4, x1, x0] = [-2, 7, 7, 1]: 7 first at p = 1,
    //         the tie at p = 2 keeps p = 1                  -> hash 1
    //   key = 2 + (1 << 2) = 6.
    // Dense x = [NaN x 6]: every bin is all-NaN -> hash 0, key 0.
    // Dense x = [-inf, NaN, NaN, NaN, NaN, NaN]: bin 0 = [NaN, -inf, NaN,
    //   NaN] -> 1 (-inf is the only non-NaN value); bin 1 = [NaN, NaN, NaN,
    //   -inf] -> 3; key = 1 + (3 << 2) = 13.
    let x = [
        1.0,
        7.0,
        -2.0,
        4.0,
        7.0,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN,
        f32::NAN,
    ];
    for t in tiers() {
        let mut c = [0u32; 3];
        h.hash_dense_isa(t, &x, 3, 6, &mut c).unwrap();
        assert_eq!(c, [6, 0, 13], "{}", t.name());
    }
    // Sparse rows:
    //   row 0 = {0: -0.0, 3: +0.0}: bin 0 sees [-, -0, +0, +0]: -0 at p = 1
    //     and +0 compare equal, the earlier wins -> 1; bin 1 sees
    //     [-, -, -, -0] -> 3; key = 1 + (3 << 2) = 13.
    //   row 1 = {3: 1.0}: bin 0 = [-, -, 1, 1] -> 2; bin 1 holds no entry:
    //     it is empty and densified. probe(1, a, 2) for a = 1, 2, 3, 4 is
    //     0, 0, 0, 1 (((A * (128 + a) + C) mod (2^61 - 1)) mod 2, computed
    //     by hand in Python), so attempt 1 already finds bin 0 -> 2;
    //     key = 2 + (2 << 2) = 10.
    //   row 2 = {}: no entries -> key 0.
    //   row 3 = {5: NaN}: bin 0 holds only a NaN: empty; bin 1 empty; no
    //     non-empty bin -> key 0.
    //   row 4 = {1: 0.0, 5: 3.0}: bin 0 = [3, -, -, -] -> 0; bin 1 = [-, -,
    //     0, -] -> 2; key = 0 + (2 << 2) = 8.
    assert_eq!([1, 2, 3, 4].map(|a| probe(1, a, 2)), [0, 0, 0, 1]);
    let indptr = [0usize, 2, 3, 3, 4, 6];
    let idx = [0u32, 3, 3, 5, 1, 5];
    let val = [-0.0f32, 0.0, 1.0, f32::NAN, 0.0, 3.0];
    for t in tiers() {
        let mut c = [0u32; 5];
        h.hash_sparse_isa(t, &indptr, &idx, &val, &mut c).unwrap();
        assert_eq!(c, [13, 10, 0, 0, 8], "{}", t.name());
    }
}

#[test]
fn golden_seeded_maps_and_probes() {
    // Computed with an independent Python implementation of the documented
    // derivation (SplitMix64, Lemire's bounded draw, forward Fisher–Yates,
    // ceil(K*L*B / dim) permutations concatenated and cut).
    let h = Dwta::new(10, 3, 2, 4, 42).unwrap();
    assert_eq!(
        h.map(),
        &[7, 2, 4, 5, 1, 9, 6, 3, 8, 0, 6, 2, 5, 0, 7, 8, 3, 4, 1, 9, 0, 7, 9, 3]
    );
    let h = Dwta::new(135_909, 6, 50, 8, 7).unwrap();
    assert_eq!(
        &h.map()[..12],
        &[52981, 2282, 122421, 79226, 61493, 33903, 63602, 44593, 18253, 56154, 14083, 130455]
    );
    let h = Dwta::new(5, 1, 1, 8, 1).unwrap();
    assert_eq!(h.map(), &[2, 3, 4, 1, 0, 2, 4, 1]);
    let h = Dwta::new(1, 2, 3, 2, 1).unwrap();
    assert_eq!(h.map(), &[0; 12]);
    assert_eq!(
        [1, 2, 3, 4, 5].map(|a| probe(0, a, 300)),
        [275, 201, 127, 53, 279]
    );
    assert_eq!([probe(299, 1, 300), probe(299, 100, 300)], [30, 210]);
}

#[test]
fn seeded_map_is_permutations() {
    let (dim, k, l, b) = (37usize, 5u32, 9u32, 8u32);
    let h = Dwta::new(dim, k, l, b, 11).unwrap();
    let m = h.map();
    assert_eq!(m.len(), 360);
    for chunk in m.chunks(dim) {
        let mut s = chunk.to_vec();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), chunk.len(), "a permutation repeats a coordinate");
    }
}

#[test]
fn from_map_round_trip() {
    let h = Dwta::new(300, 4, 7, 16, 5).unwrap();
    let g = Dwta::from_map(h.map(), 300, 4, 7, 16).unwrap();
    assert_eq!(h.map(), g.map());
    let mut r = SplitMix64::new(1);
    let x: Vec<f32> = (0..300 * 4).map(|_| random_value(&mut r)).collect();
    let (mut a, mut b) = (vec![0u32; 28], vec![0u32; 28]);
    h.hash_dense(&x, 4, 300, &mut a).unwrap();
    g.hash_dense(&x, 4, 300, &mut b).unwrap();
    assert_eq!(a, b);
    // A map with repeated coordinates inside bins.
    let map: Vec<u32> = (0..4 * 7 * 16).map(|i| (i % 5) as u32).collect();
    let g = Dwta::from_map(&map, 300, 4, 7, 16).unwrap();
    check_dense(&g, &x, 4, 300, "repeating map");
    let rows = vec![
        random_row(&mut r, 300, 0.01, true),
        vec![(2, 1.0), (3, 1.0)],
    ];
    check_sparse(&g, &rows, "repeating map");
}

#[test]
fn key_fields_do_not_overlap() {
    // K*log2(B) = 32 exactly: 4 bins of 256 and 32 bins of 2.
    for (k, b) in [(4u32, 256u32), (32, 2), (8, 16)] {
        let dim = 64;
        let h = Dwta::new(dim, k, 3, b, 2).unwrap();
        let mut r = SplitMix64::new(3);
        let x: Vec<f32> = (0..dim).map(|_| random_value(&mut r)).collect();
        let mut c = vec![0u32; 3];
        h.hash_dense(&x, 1, dim, &mut c).unwrap();
        let lb = b.trailing_zeros();
        for (l, &code) in c.iter().enumerate() {
            for kk in 0..k {
                let j = l * k as usize + kk as usize;
                let want = scalar::bin_winner(&h.view(), j, |cc| Some(x[cc as usize])).unwrap();
                let got = ((code as u64) >> (kk * lb)) & ((1u64 << lb) - 1);
                assert_eq!(got as u32, want);
            }
        }
    }
}

#[test]
fn bad_parameters_are_rejected() {
    let e = |r: lshk::Result<Dwta>| r.unwrap_err().status;
    assert_eq!(e(Dwta::new(0, 2, 2, 8, 0)), Status::InvalidArgument);
    assert_eq!(e(Dwta::new(10, 0, 2, 8, 0)), Status::InvalidArgument);
    assert_eq!(e(Dwta::new(10, 2, 0, 8, 0)), Status::InvalidArgument);
    assert_eq!(e(Dwta::new(10, 2, 2, 1, 0)), Status::InvalidArgument);
    assert_eq!(e(Dwta::new(10, 2, 2, 12, 0)), Status::InvalidArgument);
    assert_eq!(e(Dwta::new(10, 2, 2, 512, 0)), Status::InvalidArgument);
    assert_eq!(e(Dwta::new(10, 11, 2, 8, 0)), Status::InvalidArgument); // 33 bits
    assert_eq!(e(Dwta::new(10, 32, 1 << 20, 2, 0)), Status::InvalidArgument); // > 2^20 bins
    assert_eq!(
        e(Dwta::new(10, 2, (1 << 19) + 1, 2, 0)),
        Status::InvalidArgument
    ); // 2^20 + 2
    assert_eq!(e(Dwta::new(1 << 31, 1, 1, 2, 0)), Status::InvalidArgument);
    assert_eq!(
        e(Dwta::from_map(&[0, 1, 2], 4, 1, 1, 2)),
        Status::InvalidArgument
    );
    assert_eq!(
        e(Dwta::from_map(&[0, 4], 4, 1, 1, 2)),
        Status::IndexOutOfRange
    );
    assert!(Dwta::new(10, 11, 2, 8, 0).is_err());
    assert!(Dwta::new(10, 10, 2, 8, 0).is_ok()); // 30 bits
}

#[test]
fn bad_csr_is_rejected() {
    let h = Dwta::new(10, 2, 3, 4, 0).unwrap();
    let mut c = vec![0xA5A5_A5A5u32; 6];
    let mut bad = |indptr: &[usize], idx: &[u32], val: &[f32], want: Status| {
        for t in tiers() {
            let err = h.hash_sparse_isa(t, indptr, idx, val, &mut c).unwrap_err();
            assert_eq!(err.status, want, "{}", err.message);
            assert!(c.iter().all(|&v| v == 0xA5A5_A5A5));
        }
    };
    bad(&[], &[], &[], Status::InvalidArgument);
    bad(&[1, 2], &[0, 1], &[1.0, 1.0], Status::InvalidArgument); // indptr[0] != 0
    bad(&[0, 2, 1], &[0, 1], &[1.0, 1.0], Status::InvalidArgument); // decreasing
    bad(&[0, 2], &[0, 1, 2], &[1.0; 3], Status::InvalidArgument); // length
    bad(&[0, 2], &[0, 1], &[1.0], Status::InvalidArgument); // values length
    bad(&[0, 2], &[1, 0], &[1.0, 1.0], Status::InvalidArgument); // unsorted
    bad(&[0, 2], &[1, 1], &[1.0, 1.0], Status::InvalidArgument); // duplicate
    bad(&[0, 1, 2], &[3, 10], &[1.0, 1.0], Status::IndexOutOfRange);
    // Sorted across rows is not required: each row is checked on its own.
    let mut c = vec![0u32; 6];
    h.hash_sparse(&[0, 1, 2], &[5, 1], &[1.0, 1.0], &mut c)
        .unwrap();
    let mut short = vec![0u32; 5];
    assert_eq!(
        h.hash_sparse(&[0, 1, 2], &[5, 1], &[1.0, 1.0], &mut short)
            .unwrap_err()
            .status,
        Status::BufferTooSmall
    );
    let x = vec![0.0f32; 25];
    assert_eq!(
        h.hash_dense(&x, 3, 9, &mut c).unwrap_err().status,
        Status::InvalidArgument
    );
    assert_eq!(
        h.hash_dense(&x, 3, 10, &mut c).unwrap_err().status,
        Status::BufferTooSmall
    );
}

#[test]
fn huge_dim_costs_the_map_not_dim() {
    // dim = 2^31 - 1: the family's memory is O(K*L*B) (no O(dim) array),
    // so this is instant; sparse rows can use any coordinate.
    let dim = (1usize << 31) - 1;
    let h = Dwta::new(dim, 4, 5, 8, 3).unwrap();
    assert!(h.map().iter().all(|&c| (c as usize) < dim));
    let mut r = SplitMix64::new(4);
    let mut rows = vec![];
    for _ in 0..10 {
        let mut row: Vec<(u32, f32)> = vec![];
        for &c in h.map() {
            if r.below(8) == 0 {
                row.push((c, special_value(&mut r)));
            }
        }
        for _ in 0..40 {
            row.push((r.below(dim as u64) as u32, random_value(&mut r)));
        }
        row.push(((dim - 1) as u32, 5.0));
        rows.push(row);
    }
    check_sparse(&h, &rows, "huge dim");
    let mut map = h.map().to_vec();
    map[3] = (dim - 1) as u32;
    let g = Dwta::from_map(&map, dim, 4, 5, 8).unwrap();
    let codes = check_sparse(&g, &[vec![((dim - 1) as u32, 1.0)]], "top coordinate");
    // Only bin 0 is non-empty, its hash is 3 (position of the coordinate).
    assert_eq!(codes[0] & 7, 3);
    assert_eq!(
        Dwta::from_map(&map, dim - 1, 4, 5, 8).unwrap_err().status,
        Status::IndexOutOfRange
    );
}

#[test]
fn shared_family_from_many_threads() {
    // One family, many threads, every tier: per-thread scratch only, so
    // results equal the single-threaded oracle.
    let h = std::sync::Arc::new(Dwta::new(128, 6, 50, 8, 21).unwrap());
    let mut r = SplitMix64::new(22);
    let x: std::sync::Arc<Vec<f32>> =
        std::sync::Arc::new((0..40 * 128).map(|_| random_value(&mut r)).collect());
    let rows: Vec<Vec<(u32, f32)>> = (0..40)
        .map(|_| random_row(&mut r, 128, 0.05, true))
        .collect();
    let (indptr, idx, val) = csr(&rows);
    let mut want_d = vec![0u32; 40 * 50];
    let mut want_s = vec![0u32; 40 * 50];
    h.hash_dense_isa(Isa::Scalar, &x, 40, 128, &mut want_d)
        .unwrap();
    h.hash_sparse_isa(Isa::Scalar, &indptr, &idx, &val, &mut want_s)
        .unwrap();
    let csr = std::sync::Arc::new((indptr, idx, val));
    let tiers = tiers();
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let (h, x, csr, tiers) = (h.clone(), x.clone(), csr.clone(), tiers.clone());
            std::thread::spawn(move || {
                let mut out = vec![];
                for it in 0..50 {
                    let tier = tiers[(t + it) % tiers.len()];
                    let n = 1 + (t * 7 + it) % 40;
                    let mut d = vec![0u32; n * 50];
                    h.hash_dense_isa(tier, &x, n, 128, &mut d).unwrap();
                    let mut s = vec![0u32; 40 * 50];
                    h.hash_sparse_isa(tier, &csr.0, &csr.1, &csr.2, &mut s)
                        .unwrap();
                    out.push((n, d, s));
                }
                out
            })
        })
        .collect();
    for th in handles {
        for (n, d, s) in th.join().unwrap() {
            assert_eq!(d, want_d[..n * 50]);
            assert_eq!(s, want_s);
        }
    }
}
