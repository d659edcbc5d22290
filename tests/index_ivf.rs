//! The IVF lists as the candidate source of the one `Index`
//! (`Family::Ivf`, src/source/ivf/family.rs): the index answers exactly what the
//! standalone `Ivf` answers (ids and score bits) with f32 or borrowed
//! storage, on every code type and search setting with an exact stage, one
//! query at a time and in batches (with `rerank = 0` the lists' top-k
//! scored from the index's rows); other storages re-rank from the index's
//! own rows, with no f32 copy; files round-trip; what the family does not support is
//! refused.

mod common;

use lshk::index::{Family, Index, IndexParams, QueryParams, Storage, Transform};
use lshk::ivf::{Codes, Ivf, IvfParams, SearchParams};
use lshk::matmul::TOPK_PAD_ID;
use lshk::Status;

const ROWS: usize = 3000;
const DIM: usize = 40;
const NQ: usize = 37;
const K: usize = 10;

fn layer() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let g = lshk::data::structured_layer(ROWS, DIM, 64, 11);
    let (q, _) = lshk::data::queries_near_labels(&g.w, ROWS, DIM, NQ, 3);
    (g.w, g.bias, q)
}

fn params(codes: Codes, storage: Storage) -> IndexParams {
    IndexParams {
        family: Family::Ivf,
        storage,
        ivf: IvfParams {
            codes,
            nlist: 40,
            threads: 1,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Builds the index; a borrowed W through `build_borrowed`.
fn build(w: &[f32], b: &[f32], p: &IndexParams) -> Index {
    // SAFETY: every caller's `w` outlives the index it builds.
    unsafe { Index::build_borrowed(w, Some(b), ROWS, DIM, DIM, p, None) }.unwrap()
}

fn searches() -> [SearchParams; 4] {
    [
        SearchParams::default(),
        SearchParams::fixed(1, 32),
        SearchParams::fixed(6, 0),
        SearchParams::fixed(40, 1000),
    ]
}

#[test]
fn answers_equal_the_standalone_ivf() {
    let (w, b, q) = layer();
    for codes in [Codes::None, Codes::I8, Codes::Pq4, Codes::Pq4I8] {
        for storage in [Storage::F32, Storage::BorrowedF32] {
            let p = params(codes, storage);
            let idx = build(&w, &b, &p);
            let ivf = Ivf::build(&w, Some(&b), ROWS, DIM, DIM, &p.ivf).unwrap();
            for sp in searches() {
                let qp = QueryParams {
                    ivf: sp,
                    ..Default::default()
                };
                for nq in [1, NQ] {
                    let (mut i1, mut s1) = (vec![0u32; nq * K], vec![0f32; nq * K]);
                    let (mut i2, mut s2) = (vec![0u32; nq * K], vec![0f32; nq * K]);
                    idx.query_with(&q, nq, DIM, K as u32, &qp, &mut i1, &mut s1, None)
                        .unwrap();
                    ivf.search(&q, nq, DIM, K, &sp, &mut i2, &mut s2).unwrap();
                    let what = format!("{codes:?} {storage:?} {sp:?} nq {nq}");
                    if sp.rerank == 0 && codes != Codes::None {
                        // The lists return approximate scores; the index
                        // scores the same top-k from its rows.
                        for (a, b) in i1.chunks(K).zip(i2.chunks(K)) {
                            let (mut a, mut b) = (a.to_vec(), b.to_vec());
                            a.sort_unstable();
                            b.sort_unstable();
                            assert_eq!(a, b, "{what}: the candidate sets");
                        }
                        continue;
                    }
                    assert_eq!(i1, i2, "{what}: ids");
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&s1), bits(&s2), "{what}: scores");
                }
            }
        }
    }
}

/// bf16, f16 and int8 storage: the lists hold no f32 copy (W is held once,
/// in the index's storage) and re-rank from the index's rows with the
/// scorer's kernels: every returned score is the index's own logit of
/// that id, to the bit where the lists re-rank (ranked as the one top-k
/// ranks), and with every list visited and every row re-ranked the answer
/// is the exact top-k of the stored rows.
#[test]
fn other_storages_rerank_from_the_index_rows() {
    let (w, b, q) = layer();
    let all = SearchParams::fixed(40, ROWS as u32);
    for storage in [Storage::Bf16, Storage::F16, Storage::I8] {
        for codes in [Codes::I8, Codes::Pq4, Codes::Pq4I8] {
            let idx = build(&w, &b, &params(codes, storage));
            let f32_bytes = build(&w, &b, &params(codes, Storage::F32)).memory_bytes();
            // The f32 index holds W once in f32 (4 bytes per value); this
            // one holds it in 1 or 2 bytes and has no other copy.
            let saved = ROWS * DIM * 2;
            assert!(
                idx.memory_bytes() + saved <= f32_bytes,
                "{storage:?} {codes:?}: {} bytes against {f32_bytes} for f32",
                idx.memory_bytes()
            );
            let wm = lshk::matmul::WeightMatrix::new(idx.weights(), ROWS, DIM, idx.weight_stride())
                .unwrap()
                .with_bias(&b)
                .unwrap();
            for sp in [SearchParams::default(), all] {
                let qp = QueryParams {
                    ivf: sp,
                    ..Default::default()
                };
                let (mut ids, mut sc) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
                idx.query_with(&q, NQ, DIM, K as u32, &qp, &mut ids, &mut sc, None)
                    .unwrap();
                for i in 0..NQ {
                    let qi = &q[i * DIM..(i + 1) * DIM];
                    let (got, gs) = (&ids[i * K..(i + 1) * K], &sc[i * K..(i + 1) * K]);
                    assert!(got.iter().all(|&id| id != TOPK_PAD_ID));
                    // The index's own logits of the returned ids.
                    let mut want = vec![0f32; K];
                    wm.matmul(qi, 1, DIM, got, &[0, K], &mut want).unwrap();
                    for t in 0..K {
                        assert_eq!(
                            gs[t].to_bits(),
                            want[t].to_bits(),
                            "{storage:?} {codes:?} {sp:?}: query {i} rank {t}"
                        );
                        if t > 0 {
                            let (a, c) = ((gs[t - 1], got[t - 1]), (gs[t], got[t]));
                            assert!(a.0 > c.0 || (a.0 == c.0 && a.1 < c.1), "rank order");
                        }
                    }
                    if sp == all {
                        // Every row re-ranked: the exact top-k of the
                        // stored rows (as the index's scorer gives them).
                        let every: Vec<u32> = (0..ROWS as u32).collect();
                        let mut s = vec![0f32; ROWS];
                        wm.matmul(qi, 1, DIM, &every, &[0, ROWS], &mut s).unwrap();
                        let (mut ti, mut ts) = (vec![0u32; K], vec![0f32; K]);
                        lshk::matmul::topk(&s, None, &[0, ROWS], K, &mut ti, &mut ts).unwrap();
                        assert_eq!(got, &ti[..], "{storage:?} {codes:?}: query {i} exact top-k");
                    }
                }
            }
        }
    }
}

#[test]
fn files_round_trip() {
    let (w, b, q) = layer();
    let dir = std::env::temp_dir().join(format!("lshk-index-ivf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("i.lshk");
    for (codes, storage) in [
        (Codes::I8, Storage::F32),
        (Codes::Pq4I8, Storage::BorrowedF32),
        (Codes::None, Storage::BorrowedF32),
        (Codes::Pq4, Storage::Bf16),
    ] {
        let idx = build(&w, &b, &params(codes, storage));
        idx.save(&path).unwrap();
        let back = if storage == Storage::BorrowedF32 {
            // SAFETY: `w` outlives `back`.
            unsafe { Index::load_borrowed(&path, &w) }.unwrap()
        } else {
            Index::load(&path).unwrap()
        };
        assert_eq!(
            back.memory_bytes(),
            idx.memory_bytes(),
            "{codes:?} {storage:?}"
        );
        let qp = QueryParams::default();
        let (mut i1, mut s1) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
        let (mut i2, mut s2) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
        idx.query_with(&q, NQ, DIM, K as u32, &qp, &mut i1, &mut s1, None)
            .unwrap();
        back.query_with(&q, NQ, DIM, K as u32, &qp, &mut i2, &mut s2, None)
            .unwrap();
        assert_eq!(i1, i2, "{codes:?} {storage:?}");
        assert_eq!(s1, s2, "{codes:?} {storage:?}");
        assert!(i1.iter().all(|&i| i != TOPK_PAD_ID));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Label-aware lists through the one index: the lists' own training, kept
/// by a save and a load; trained once.
#[test]
fn label_training_of_the_ivf_source() {
    let (w, b, q) = layer();
    let dir = std::env::temp_dir().join(format!("lshk-index-ivf-labels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for storage in [
        Storage::F32,
        Storage::BorrowedF32,
        Storage::Bf16,
        Storage::I8,
    ] {
        let mut idx = build(&w, &b, &params(Codes::I8, storage));
        assert!(idx.label_state().is_none());
        let offs: Vec<usize> = (0..=NQ).collect();
        let labels: Vec<u32> = (0..NQ as u32).map(|i| (i * 37) % ROWS as u32).collect();
        idx.train_labels(&q, NQ, DIM, &offs, &labels, &Default::default())
            .unwrap();
        let st = idx.label_state().expect("trained");
        assert_eq!(st.pairs, NQ as u64);
        let e = idx
            .train_labels(&q, NQ, DIM, &offs, &labels, &Default::default())
            .unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{e}");
        let path = dir.join(format!("{storage:?}.lshk"));
        idx.save(&path).unwrap();
        let back = if storage == Storage::BorrowedF32 {
            // SAFETY: `w` outlives `back`.
            unsafe { Index::load_borrowed(&path, &w) }.unwrap()
        } else {
            Index::load(&path).unwrap()
        };
        assert_eq!(back.label_state(), Some(st), "{storage:?}");
        let qp = QueryParams::default();
        let (mut i1, mut s1) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
        let (mut i2, mut s2) = (vec![0u32; NQ * K], vec![0f32; NQ * K]);
        idx.query_with(&q, NQ, DIM, K as u32, &qp, &mut i1, &mut s1, None)
            .unwrap();
        back.query_with(&q, NQ, DIM, K as u32, &qp, &mut i2, &mut s2, None)
            .unwrap();
        assert_eq!((i1, s1), (i2, s2), "{storage:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_the_family_does_not_support_is_refused() {
    let (w, b, q) = layer();
    let status = |r: lshk::Result<Index>| r.err().map(|e| e.status);
    let mut p = params(Codes::I8, Storage::F32);
    p.transform = Transform::Mips;
    assert_eq!(
        status(Index::build(&w, Some(&b), ROWS, DIM, DIM, &p, None)),
        Some(Status::InvalidArgument)
    );
    let mut p = params(Codes::I8, Storage::F32);
    p.ivf.nlist = ROWS as u32 + 1;
    assert_eq!(
        status(Index::build(&w, Some(&b), ROWS, DIM, DIM, &p, None)),
        Some(Status::InvalidArgument)
    );
    let mut idx = build(&w, &b, &params(Codes::I8, Storage::F32));
    let e = idx
        .update_rows(&[1], Some((&w[..DIM], DIM)), None)
        .unwrap_err();
    assert_eq!(e.status, Status::Unsupported, "{e}");
    assert_eq!(idx.rebuild(None).unwrap_err().status, Status::Unsupported);
    let (mut ids, mut sc) = (vec![0u32; K], vec![0f32; K]);
    for sp in [
        SearchParams::fixed(0, 32),
        SearchParams {
            reach: f32::NAN,
            ..Default::default()
        },
    ] {
        let qp = QueryParams {
            ivf: sp,
            ..Default::default()
        };
        let e = idx
            .query_with(&q, 1, DIM, K as u32, &qp, &mut ids, &mut sc, None)
            .unwrap_err();
        assert_eq!(e.status, Status::InvalidArgument, "{sp:?}: {e}");
    }
}
