//! A layer split into shards of consecutive rows, one index per shard,
//! merged with `topk_merge` / `lshk_topk_merge`: with exact scoring (IVF,
//! every list visited and every row re-ranked) the merge answers exactly
//! what one index over all rows answers, ids and score bits, including
//! ties across shards (rows duplicated in two shards break by global id);
//! with the default parameters its recall against the exact top-k is
//! reported and bounded.

use lshk::ffi::matmul::{lshk_shard_topk, lshk_topk_merge};
use lshk::index::{Family, Index, IndexParams, QueryParams};
use lshk::ivf::{IvfParams, SearchParams};
use lshk::matmul::{topk_merge, ShardTopK};

const DIM: usize = 32;
const NQ: usize = 40;
const K: usize = 10;

fn ivf(threads: u32) -> IndexParams {
    IndexParams {
        family: Family::Ivf,
        ivf: IvfParams {
            nlist: 0,
            threads,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn query(idx: &Index, q: &[f32], k: usize, sp: SearchParams) -> (Vec<u32>, Vec<f32>) {
    let qp = QueryParams {
        ivf: sp,
        ..Default::default()
    };
    let (mut i, mut s) = (vec![0u32; NQ * k], vec![0f32; NQ * k]);
    idx.query_with(q, NQ, DIM, k as u32, &qp, &mut i, &mut s, None)
        .unwrap();
    (i, s)
}

#[test]
fn shards_merged_answer_as_one_index() {
    let rows = 3000;
    let g = lshk::data::structured_layer(rows, DIM, 48, 3);
    let (mut w, mut b) = (g.w, g.bias);
    // Ties across shards: rows 2990.. repeat rows 0.. (other shards).
    for r in 0..10 {
        let (src, dst) = (r * 37, rows - 10 + r);
        let row = w[src * DIM..(src + 1) * DIM].to_vec();
        w[dst * DIM..(dst + 1) * DIM].copy_from_slice(&row);
        b[dst] = b[src];
    }
    let (mut q, _) = lshk::data::queries_near_labels(&w, rows, DIM, NQ, 8);
    // Queries at duplicated rows, so the ties reach the top k.
    for i in 0..10 {
        let src = i * 37;
        q[i * DIM..(i + 1) * DIM].copy_from_slice(&w[src * DIM..(src + 1) * DIM]);
    }
    let exact = SearchParams {
        nprobe: u32::MAX,
        reach: 0.0,
        rerank: rows as u32,
        ..Default::default()
    };
    let whole = Index::build(&w, Some(&b), rows, DIM, DIM, &ivf(1), None).unwrap();
    let (wi, ws) = query(&whole, &q, K, exact);
    let (di, _) = query(&whole, &q, K, SearchParams::default());
    for bounds in [
        vec![0, 1500, 3000],
        vec![0, 700, 2100, 3000],
        vec![0, 5, 1000, 2995, 3000],
    ] {
        let shards: Vec<(Index, u32)> = bounds
            .windows(2)
            .map(|s| {
                let (a, e) = (s[0], s[1]);
                let idx = Index::build(
                    &w[a * DIM..e * DIM],
                    Some(&b[a..e]),
                    e - a,
                    DIM,
                    DIM,
                    &ivf(1),
                    None,
                )
                .unwrap();
                (idx, a as u32)
            })
            .collect();
        for (sp, name) in [(exact, "exact"), (SearchParams::default(), "default")] {
            let answers: Vec<(Vec<u32>, Vec<f32>)> = shards
                .iter()
                .map(|(idx, _)| query(idx, &q, K, SearchParams { ..sp }))
                .collect();
            let parts: Vec<ShardTopK> = answers
                .iter()
                .zip(&shards)
                .map(|((i, s), (_, first))| ShardTopK {
                    ids: i,
                    scores: s,
                    k: K,
                    first_row: *first,
                })
                .collect();
            let (mut mi, mut ms) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
            topk_merge(&parts, NQ, K, &mut mi, &mut ms).unwrap();
            // The C entry point answers the same.
            let (ci, cs) = c_merge(&c_shards(&parts), NQ, K);
            assert_eq!((&ci, bits(&cs)), (&mi, bits(&ms)));
            if name == "exact" {
                assert_eq!(mi, wi, "{bounds:?}: ids");
                assert_eq!(bits(&ms), bits(&ws), "{bounds:?}: score bits");
            } else {
                let rec = recall(&mi, &wi);
                println!(
                    "shards {bounds:?}, default knobs: merged recall@10 {rec:.3} (one index: {:.3})",
                    recall(&di, &wi)
                );
                assert!(rec >= 0.9, "{bounds:?}: recall {rec}");
            }
        }
    }
    // The ties did reach the answers: some query has two equal scores.
    assert!((0..NQ).any(|i| ws[i * K..(i + 1) * K].windows(2).any(|p| p[0] == p[1])));
}

/// The C form of the shards' lists.
fn c_shards(parts: &[ShardTopK]) -> Vec<lshk_shard_topk> {
    parts
        .iter()
        .map(|p| lshk_shard_topk {
            ids: p.ids.as_ptr(),
            scores: p.scores.as_ptr(),
            k: p.k,
            first_row: p.first_row,
            reserved: 0,
        })
        .collect()
}

/// `lshk_topk_merge` of `cparts` (each holding `nq * k_s` entries), which
/// must succeed: the merged ids and scores.
fn c_merge(cparts: &[lshk_shard_topk], nq: usize, k: usize) -> (Vec<u32>, Vec<f32>) {
    let (mut ci, mut cs) = (vec![0u32; nq * k], vec![0f32; nq * k]);
    // SAFETY: every shard's lists hold nq * its k values (the caller's
    // slices); the outputs nq * k.
    let st = unsafe {
        lshk_topk_merge(
            cparts.as_ptr(),
            cparts.len(),
            nq,
            k,
            ci.as_mut_ptr(),
            cs.as_mut_ptr(),
        )
    };
    assert_eq!(st, 0, "{} shards", cparts.len());
    (ci, cs)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn recall(got: &[u32], want: &[u32]) -> f64 {
    let mut hit = 0;
    for i in 0..NQ {
        let w = &want[i * K..(i + 1) * K];
        hit += got[i * K..(i + 1) * K]
            .iter()
            .filter(|x| w.contains(x))
            .count();
    }
    hit as f64 / (NQ * K) as f64
}

/// `lshk_topk_merge` with 1 to 40 shards (its slices on the stack up to 32,
/// on the heap beyond) answers what `topk_merge` answers, ids and score
/// bits, with padded and tied entries, and an output overlapping a later
/// shard's list is refused with nothing written.
#[test]
fn c_merge_of_many_shards_matches_the_rust_merge() {
    let (nq, ks, k) = (3usize, 4usize, 6usize);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for n in [1usize, 2, 31, 32, 33, 40] {
        let lists: Vec<(Vec<u32>, Vec<f32>)> = (0..n)
            .map(|_| {
                let ids = (0..nq * ks)
                    .map(|j| {
                        if j % ks == ks - 1 {
                            u32::MAX
                        } else {
                            (next() % 50) as u32
                        }
                    })
                    .collect();
                // Scores on a coarse grid, so that shards tie.
                let sc = (0..nq * ks)
                    .map(|j| {
                        if j % ks == ks - 1 {
                            f32::NEG_INFINITY
                        } else {
                            (next() % 8) as f32
                        }
                    })
                    .collect();
                (ids, sc)
            })
            .collect();
        let parts: Vec<ShardTopK> = lists
            .iter()
            .enumerate()
            .map(|(s, (i, sc))| ShardTopK {
                ids: i,
                scores: sc,
                k: ks,
                first_row: 100 * s as u32,
            })
            .collect();
        let (mut mi, mut ms) = (vec![0u32; nq * k], vec![0f32; nq * k]);
        topk_merge(&parts, nq, k, &mut mi, &mut ms).unwrap();
        let cparts = c_shards(&parts);
        let (ci, cs) = c_merge(&cparts, nq, k);
        assert_eq!((&ci, bits(&cs)), (&mi, bits(&ms)), "{n} shards");
        // The last shard's scores as the output scores: refused, nothing written.
        // Room for the nq * k outputs, the shard's nq * ks scores first.
        let mut own = lists[n - 1].1.clone();
        own.resize(nq * k.max(ks), 0.0);
        let mut c2 = cparts.clone();
        c2[n - 1].scores = own.as_ptr();
        let before = own.clone();
        let mut oi = vec![7u32; nq * k];
        // SAFETY: as above; out_scores aliases a shard's list on purpose
        // (own holds nq * k floats, the shard reads its first nq * ks).
        let st =
            unsafe { lshk_topk_merge(c2.as_ptr(), n, nq, k, oi.as_mut_ptr(), own.as_mut_ptr()) };
        assert_ne!(st, 0, "{n} shards: overlap accepted");
        assert!(oi.iter().all(|&v| v == 7), "{n} shards: written on error");
        assert_eq!(bits(&own), bits(&before));
    }
}
