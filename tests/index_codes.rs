//! The scorer's code stage (`Index::set_codes`): every candidate scored
//! from int8 row codes, the best `max(rerank, k)` of each query exactly.
//! Answers are the exact logits of the index's rows; with a shortlist as
//! long as the candidates they are the answers without codes; the codes
//! follow row updates, rehashes and the forest's rebuild; files round-trip;
//! what cannot take codes is refused.

use lshk::index::{Family, Index, IndexParams, QueryParams, QueryStats, Storage};
use lshk::ivf::Codes;
use lshk::matmul::TOPK_PAD_ID;
use lshk::tables::GatherParams;
use lshk::Status;

const ROWS: usize = 3000;
const DIM: usize = 40;
const NQ: usize = 70;
const K: usize = 10;

fn layer() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let g = lshk::data::structured_layer(ROWS, DIM, 50, 23);
    let (q, _) = lshk::data::queries_near_labels(&g.w, ROWS, DIM, NQ, 9);
    (g.w, g.bias, q)
}

fn params(family: Family, storage: Storage) -> IndexParams {
    let mut p = IndexParams {
        family,
        storage,
        bits: 8,
        tables: 12,
        ..Default::default()
    };
    p.forest.threads = 1;
    p.graph.threads = 1;
    p
}

fn build(w: &[f32], b: &[f32], p: &IndexParams) -> Index {
    // SAFETY: every caller's `w` outlives the index it builds.
    unsafe { Index::build_borrowed(w, Some(b), ROWS, DIM, DIM, p, None) }.unwrap()
}

fn query(idx: &Index, q: &[f32], qp: &QueryParams) -> (Vec<u32>, Vec<f32>, QueryStats) {
    let (mut ids, mut sc) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
    let mut st = QueryStats::default();
    idx.query_with(q, NQ, DIM, K as u32, qp, &mut ids, &mut sc, Some(&mut st))
        .unwrap();
    (ids, sc, st)
}

/// The exact logit of row `r` for query `i`, in f64.
fn logit(w: &[f32], b: &[f32], q: &[f32], i: usize, r: usize) -> f64 {
    (0..DIM)
        .map(|d| f64::from(w[r * DIM + d]) * f64::from(q[i * DIM + d]))
        .sum::<f64>()
        + f64::from(b[r])
}

/// The f32 bound of a gathered dot product of `DIM` terms (plus the bias)
/// around its f64 value: `gamma(DIM + 1) * (sum |w q| + |b|)`.
fn bound(w: &[f32], b: &[f32], q: &[f32], i: usize, r: usize) -> f64 {
    let s: f64 = (0..DIM)
        .map(|d| (f64::from(w[r * DIM + d]) * f64::from(q[i * DIM + d])).abs())
        .sum::<f64>()
        + f64::from(b[r]).abs();
    let u = f64::from(f32::EPSILON) / 2.0;
    let n = (DIM + 1) as f64;
    n * u / (1.0 - n * u) * s
}

fn families() -> [Family; 4] {
    [Family::SimHash, Family::Dwta, Family::Graph, Family::Forest]
}

#[test]
fn scores_are_the_rows_exact_logits() {
    let (w, b, q) = layer();
    for family in families() {
        let mut idx = build(&w, &b, &params(family, Storage::BorrowedF32));
        idx.set_codes(Codes::I8, 16).unwrap();
        assert_eq!(idx.codes(), (Codes::I8, 16));
        let (ids, sc, st) = query(&idx, &q, &QueryParams::default());
        assert!(
            st.reranked > 0 && st.reranked <= (NQ * 16) as u64,
            "{family:?}"
        );
        assert!(st.reranked <= st.candidates_total, "{family:?}");
        for i in 0..NQ {
            for j in 0..K {
                let (id, s) = (ids[i * K + j], sc[i * K + j]);
                if id == TOPK_PAD_ID {
                    assert_eq!(s, f32::NEG_INFINITY);
                    continue;
                }
                let (e, e_b) = (
                    logit(&w, &b, &q, i, id as usize),
                    bound(&w, &b, &q, i, id as usize),
                );
                assert!(
                    (f64::from(s) - e).abs() <= e_b,
                    "{family:?} query {i} rank {j}: {s} against {e} (bound {e_b})"
                );
                if j > 0 {
                    assert!(sc[i * K + j - 1] >= s, "{family:?} descending");
                }
            }
        }
    }
}

#[test]
fn a_shortlist_of_every_candidate_answers_as_without_codes() {
    let (w, b, q) = layer();
    for family in families() {
        for storage in [
            Storage::F32,
            Storage::BorrowedF32,
            Storage::Bf16,
            Storage::F16,
        ] {
            if family == Family::Forest && !matches!(storage, Storage::F32 | Storage::BorrowedF32) {
                continue;
            }
            let plain = build(&w, &b, &params(family, storage));
            let mut coded = build(&w, &b, &params(family, storage));
            coded.set_codes(Codes::I8, u32::MAX).unwrap();
            let qp = QueryParams::default();
            let (i0, s0, st0) = query(&plain, &q, &qp);
            let (i1, s1, st1) = query(&coded, &q, &qp);
            assert_eq!(st0.candidates_total, st1.candidates_total, "{family:?}");
            assert_eq!(st1.reranked, st1.candidates_total, "{family:?}");
            for i in 0..NQ * K {
                // The exact kernel's last bits may depend on a row's place
                // among the ids it is given (lshk_weights_view): the same
                // rows, each score within the kernel's bound.
                let r = (i / K, i0[i] as usize);
                if i0[i] != i1[i] {
                    // Only a near-tie may swap.
                    assert!(
                        (s0[i] - s1[i]).abs() <= 1e-5 * s0[i].abs().max(1.0),
                        "{family:?} {storage:?} query {}: {} ({}) against {} ({})",
                        r.0,
                        i0[i],
                        s0[i],
                        i1[i],
                        s1[i]
                    );
                } else if i0[i] != TOPK_PAD_ID {
                    let e = 2.0 * bound(&w, &b, &q, r.0, r.1) as f32 + 1e-6 * s0[i].abs();
                    assert!((s0[i] - s1[i]).abs() <= e, "{family:?} {storage:?}");
                }
            }
        }
    }
}

#[test]
fn a_short_list_keeps_the_top_k() {
    let (w, b, q) = layer();
    let plain = build(&w, &b, &params(Family::SimHash, Storage::F32));
    let (i0, _, _) = query(&plain, &q, &QueryParams::default());
    for (rerank, want) in [(32u32, 0.99), (K as u32, 0.9)] {
        let mut coded = build(&w, &b, &params(Family::SimHash, Storage::F32));
        coded.set_codes(Codes::I8, rerank).unwrap();
        let (i1, _, st) = query(&coded, &q, &QueryParams::default());
        assert!(st.reranked <= (NQ as u64) * u64::from(rerank));
        let hits: usize = (0..NQ)
            .map(|i| {
                let a = &i0[i * K..(i + 1) * K];
                i1[i * K..(i + 1) * K]
                    .iter()
                    .filter(|x| a.contains(x))
                    .count()
            })
            .sum();
        let recall = hits as f64 / (NQ * K) as f64;
        assert!(recall >= want, "rerank {rerank}: recall {recall} < {want}");
    }
    // A rerank below k acts as k.
    let mut c = build(&w, &b, &params(Family::SimHash, Storage::F32));
    c.set_codes(Codes::I8, 1).unwrap();
    let (_, _, st) = query(&c, &q, &QueryParams::default());
    assert!(st.reranked > (NQ as u64) && st.reranked <= (NQ * K) as u64);
}

#[test]
fn threads_and_blocks_answer_the_same() {
    let (w, b, q) = layer();
    let mut idx = build(&w, &b, &params(Family::SimHash, Storage::F32));
    idx.set_codes(Codes::I8, 20).unwrap();
    let (i1, s1, _) = query(&idx, &q, &QueryParams::default());
    let qp = QueryParams {
        threads: 3,
        ..Default::default()
    };
    let (i3, s3, _) = query(&idx, &q, &qp);
    assert_eq!(i1, i3);
    assert_eq!(
        s1.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        s3.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // One query at a time.
    for i in 0..NQ {
        let (mut ids, mut sc) = ([0u32; K], [0f32; K]);
        idx.query_with(
            &q[i * DIM..],
            1,
            DIM,
            K as u32,
            &QueryParams::default(),
            &mut ids,
            &mut sc,
            None,
        )
        .unwrap();
        assert_eq!(ids, i1[i * K..(i + 1) * K], "query {i}");
    }
}

#[test]
fn files_keep_the_codes() {
    let (w, b, q) = layer();
    let dir = std::env::temp_dir().join(format!("lshk-codes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for storage in [Storage::F32, Storage::BorrowedF32] {
        let mut idx = build(&w, &b, &params(Family::SimHash, storage));
        let before = idx.memory_bytes();
        idx.set_codes(Codes::I8, 24).unwrap();
        assert_eq!(idx.memory_bytes(), before + ROWS * DIM + 4 * ROWS);
        let path = dir.join(format!("codes-{storage:?}.lshk"));
        idx.save(&path).unwrap();
        let back = if storage == Storage::BorrowedF32 {
            // SAFETY: `w` outlives `back`.
            unsafe { Index::load_borrowed(&path, &w) }.unwrap()
        } else {
            Index::load(&path).unwrap()
        };
        assert_eq!(back.codes(), (Codes::I8, 24));
        let qp = QueryParams::default();
        let (a, sa, _) = query(&idx, &q, &qp);
        let (c, sc, _) = query(&back, &q, &qp);
        assert_eq!(a, c);
        assert_eq!(
            sa.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            sc.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        // Without codes the file has no code sections, and loads so.
        idx.set_codes(Codes::None, 0).unwrap();
        assert_eq!(idx.codes(), (Codes::None, 0));
        assert_eq!(idx.memory_bytes(), before);
        idx.save(&path).unwrap();
        let back = if storage == Storage::BorrowedF32 {
            // SAFETY: `w` outlives `back`.
            unsafe { Index::load_borrowed(&path, &w) }.unwrap()
        } else {
            Index::load(&path).unwrap()
        };
        assert_eq!(back.codes(), (Codes::None, 0));
    }
    std::fs::remove_dir_all(&dir).ok();
}

/// Row `r` set to `scale` times query 0: its code must follow, or the
/// shortlist of one (rerank 1, k 1) would miss it.
fn point_row_at_query(w: &mut [f32], q: &[f32], r: usize, scale: f32) {
    for d in 0..DIM {
        w[r * DIM + d] = scale * q[d];
    }
}

#[test]
fn codes_follow_updated_rows() {
    let (w, b, q) = layer();
    let r = 1234usize;
    let (q0, k1) = (&q[..DIM], 1u32);
    let top1 = |idx: &Index| {
        let (mut ids, mut sc) = ([0u32; 1], [0f32; 1]);
        idx.query_with(
            q0,
            1,
            DIM,
            k1,
            &QueryParams::default(),
            &mut ids,
            &mut sc,
            None,
        )
        .unwrap();
        ids[0]
    };
    // Owned rows: update_rows writes the row and its code.
    let mut idx = build(&w, &b, &params(Family::SimHash, Storage::F32));
    idx.set_codes(Codes::I8, 1).unwrap();
    assert_ne!(top1(&idx), r as u32);
    let mut row = vec![0f32; DIM];
    point_row_at_query(&mut row, q0, 0, 50.0);
    idx.update_rows(&[r as u32], Some((&row, DIM)), None)
        .unwrap();
    idx.rehash_dirty().unwrap();
    assert_eq!(top1(&idx), r as u32);

    // A borrowed W changed in place, then rehashed.
    let mut wb = w.clone();
    let mut idx = build(&wb, &b, &params(Family::SimHash, Storage::BorrowedF32));
    idx.set_codes(Codes::I8, 1).unwrap();
    let ptr = wb.as_mut_ptr();
    // SAFETY: no call uses the index while the row changes (the contract
    // of borrowed weights); `ptr` covers `wb`.
    let wm = unsafe { std::slice::from_raw_parts_mut(ptr, wb.len()) };
    point_row_at_query(wm, q0, r, 50.0);
    idx.rehash_rows(&[r as u32]).unwrap();
    assert_eq!(top1(&idx), r as u32);
    drop(idx);

    // The forest's rebuild quantises every row again.
    let mut wf = w.clone();
    let mut idx = build(&wf, &b, &params(Family::Forest, Storage::BorrowedF32));
    idx.set_codes(Codes::I8, 1).unwrap();
    let ptr = wf.as_mut_ptr();
    // SAFETY: as above.
    let wm = unsafe { std::slice::from_raw_parts_mut(ptr, wf.len()) };
    point_row_at_query(wm, q0, r, 50.0);
    idx.rebuild(None).unwrap();
    assert_eq!(top1(&idx), r as u32);
}

#[test]
fn what_cannot_take_codes_is_refused() {
    let (w, b, _) = layer();
    let status = |r: lshk::Result<()>| r.unwrap_err().status;
    let mut ivf = build(&w, &b, &params(Family::Ivf, Storage::BorrowedF32));
    assert_eq!(status(ivf.set_codes(Codes::I8, 32)), Status::Unsupported);
    let mut idx = build(&w, &b, &params(Family::SimHash, Storage::F32));
    for c in [Codes::Pq4, Codes::Pq4I8] {
        assert_eq!(status(idx.set_codes(c, 32)), Status::InvalidArgument);
    }
    assert_eq!(status(idx.set_codes(Codes::I8, 0)), Status::InvalidArgument);
    assert_eq!(idx.codes(), (Codes::None, 0));
    let mut i8s = build(&w, &b, &params(Family::SimHash, Storage::I8));
    assert_eq!(
        status(i8s.set_codes(Codes::I8, 32)),
        Status::InvalidArgument
    );
    // Setting it again changes only the rerank.
    idx.set_codes(Codes::I8, 8).unwrap();
    let m = idx.memory_bytes();
    idx.set_codes(Codes::I8, 40).unwrap();
    assert_eq!((idx.codes(), idx.memory_bytes()), ((Codes::I8, 40), m));
    // LSH gathers with their knobs still work through the stage.
    let qp = QueryParams::from(GatherParams {
        probes: 3,
        ..Default::default()
    });
    let (_, _, st) = query(&idx, &layer().2, &qp);
    assert!(st.reranked > 0);
}
