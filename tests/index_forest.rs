//! The hashing forest as the candidate source of the one `Index`
//! (`Family::Forest`, src/source/forest/family.rs): a sample's candidates are the
//! forest's set `S(x)` of `max(set_size, k)` classes, and the index returns
//! their top `k` by exact logit; files round-trip; what the family does not
//! support is refused.

use lshk::forest::{Forest, ForestParams, ForestQuery, ForestResult};
use lshk::index::{Family, Index, IndexParams, QueryParams, Storage, Transform};
use lshk::matmul::TOPK_PAD_ID;
use lshk::Status;

const ROWS: usize = 2000;
const DIM: usize = 24;
const NQ: usize = 33;
const K: usize = 10;

fn layer() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let g = lshk::data::structured_layer(ROWS, DIM, 40, 17);
    let (q, _) = lshk::data::queries_near_labels(&g.w, ROWS, DIM, NQ, 5);
    (g.w, g.bias, q)
}

fn params(storage: Storage) -> IndexParams {
    IndexParams {
        family: Family::Forest,
        storage,
        forest: ForestParams {
            trees: 6,
            leaf_size: 32,
            threads: 1,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn build(w: &[f32], b: &[f32], p: &IndexParams) -> Index {
    // SAFETY: every caller's `w` outlives the index it builds.
    unsafe { Index::build_borrowed(w, Some(b), ROWS, DIM, DIM, p, None) }.unwrap()
}

/// The exact logit of row `r` for query `i`, in f64.
fn logit(w: &[f32], b: &[f32], q: &[f32], i: usize, r: usize) -> f64 {
    (0..DIM)
        .map(|d| f64::from(w[r * DIM + d]) * f64::from(q[i * DIM + d]))
        .sum::<f64>()
        + f64::from(b[r])
}

#[test]
fn the_top_k_of_the_forests_sets() {
    let (w, b, q) = layer();
    for storage in [Storage::F32, Storage::BorrowedF32] {
        let p = params(storage);
        let idx = build(&w, &b, &p);
        let forest = Forest::build(&w, ROWS, DIM, DIM, &p.forest).unwrap();
        for set_size in [4u32, 64, 256] {
            let qp = QueryParams {
                forest: ForestQuery {
                    set_size,
                    ..Default::default()
                },
                ..Default::default()
            };
            let (mut ids, mut sc) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
            idx.query_with(&q, NQ, DIM, K as u32, &qp, &mut ids, &mut sc, None)
                .unwrap();
            let mut sets = ForestResult::default();
            let set = set_size.max(K as u32);
            forest.query(&w, DIM, &q, NQ, DIM, set, &mut sets).unwrap();
            for i in 0..NQ {
                let s = &sets.ids[sets.offsets[i]..sets.offsets[i + 1]];
                let got = &ids[i * K..(i + 1) * K];
                let what = format!("{storage:?} set {set_size} query {i}");
                // Every returned id is in S(x) (padding only when S(x) is
                // smaller than k), with its exact logit.
                for (t, &id) in got.iter().enumerate() {
                    if id == TOPK_PAD_ID {
                        assert!(s.len() < K, "{what}: padding");
                        continue;
                    }
                    assert!(s.contains(&id), "{what}: id {id} not in S(x)");
                    let e = logit(&w, &b, &q, i, id as usize);
                    assert!((f64::from(sc[i * K + t]) - e).abs() < 1e-4, "{what}: score");
                }
                // ... and no member of S(x) left out beats the k-th.
                let kth = sc[i * K + K - 1];
                for &r in s.iter().filter(|r| !got.contains(r)) {
                    assert!(
                        logit(&w, &b, &q, i, r as usize) <= f64::from(kth) + 1e-4,
                        "{what}: row {r} beats the k-th"
                    );
                }
            }
        }
    }
}

#[test]
fn files_round_trip() {
    let (w, b, q) = layer();
    let dir = std::env::temp_dir().join(format!("lshk-index-forest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("f.lshk");
    for storage in [Storage::F32, Storage::BorrowedF32] {
        let idx = build(&w, &b, &params(storage));
        idx.save(&path).unwrap();
        let back = if storage == Storage::BorrowedF32 {
            // SAFETY: `w` outlives `back`.
            unsafe { Index::load_borrowed(&path, &w) }.unwrap()
        } else {
            Index::load(&path).unwrap()
        };
        let qp = QueryParams::default();
        let (mut i1, mut s1) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
        let (mut i2, mut s2) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
        idx.query_with(&q, NQ, DIM, K as u32, &qp, &mut i1, &mut s1, None)
            .unwrap();
        back.query_with(&q, NQ, DIM, K as u32, &qp, &mut i2, &mut s2, None)
            .unwrap();
        assert_eq!(i1, i2, "{storage:?}");
        assert_eq!(s1, s2, "{storage:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_the_family_does_not_support_is_refused() {
    let (w, b, q) = layer();
    let status = |r: lshk::Result<Index>| r.err().map(|e| e.status);
    for storage in [Storage::Bf16, Storage::F16, Storage::I8] {
        assert_eq!(
            status(Index::build(
                &w,
                Some(&b),
                ROWS,
                DIM,
                DIM,
                &params(storage),
                None
            )),
            Some(Status::InvalidArgument),
            "{storage:?}"
        );
    }
    let mut p = params(Storage::F32);
    p.transform = Transform::BiasAug;
    assert_eq!(
        status(Index::build(&w, Some(&b), ROWS, DIM, DIM, &p, None)),
        Some(Status::InvalidArgument)
    );
    let mut idx = build(&w, &b, &params(Storage::F32));
    assert!(idx.update_rows(&[1], Some((&w[..DIM], DIM)), None).is_err());
    let offs: Vec<usize> = (0..=NQ).collect();
    let labels: Vec<u32> = (0..NQ as u32).collect();
    assert!(idx
        .train_labels(&q, NQ, DIM, &offs, &labels, &Default::default())
        .is_err());
}

/// HF-A's confidence threshold through the index: each sample's
/// candidates are the standalone forest's trimmed set, ranked by the
/// index's logits (bias included), never fewer than k; the top k of the
/// query come from them.
#[test]
fn confidence_trims_the_sets_with_the_bias_and_keeps_k() {
    let (w, b, q) = layer();
    // Peaked logits, so that a threshold below 1 trims.
    let w: Vec<f32> = w.iter().map(|v| v * 8.0).collect();
    let p = params(Storage::BorrowedF32);
    let idx = build(&w, &b, &p);
    let forest = Forest::build(&w, ROWS, DIM, DIM, &p.forest).unwrap();
    let mut trimmed = false;
    for confidence in [0.5f32, 0.9, 1.0] {
        let qp = QueryParams {
            forest: ForestQuery {
                set_size: 128,
                confidence,
            },
            ..Default::default()
        };
        let mut got = lshk::source::GatherResult::default();
        idx.candidate_sets(&q, NQ, DIM, K as u32, &qp, &mut got)
            .unwrap();
        let mut want = ForestResult::default();
        forest
            .query_confident(
                &w,
                DIM,
                Some(&b),
                &q,
                NQ,
                DIM,
                128,
                confidence,
                K as u32,
                &mut want,
            )
            .unwrap();
        assert_eq!(got.ids, want.ids, "confidence {confidence}");
        assert_eq!(got.offsets, want.offsets, "confidence {confidence}");
        for i in 0..NQ {
            let n = got.offsets[i + 1] - got.offsets[i];
            assert!(n >= K, "confidence {confidence} query {i}: {n} < k");
            trimmed |= n < 128;
        }
        let (mut ids, mut sc) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
        idx.query_with(&q, NQ, DIM, K as u32, &qp, &mut ids, &mut sc, None)
            .unwrap();
        for i in 0..NQ {
            let s = &got.ids[got.offsets[i]..got.offsets[i + 1]];
            assert!(ids[i * K..(i + 1) * K].iter().all(|id| s.contains(id)));
        }
    }
    assert!(
        trimmed,
        "no set was trimmed: the test layer is not peaked enough"
    );
    let bad = QueryParams {
        forest: ForestQuery {
            set_size: 128,
            confidence: f32::NAN,
        },
        ..Default::default()
    };
    let (mut ids, mut sc) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
    let e = idx
        .query_with(&q, NQ, DIM, K as u32, &bad, &mut ids, &mut sc, None)
        .unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
}
