//! The FGD graph (`lshk::graph`): the graph dot kernels match their oracle
//! bit for bit on every tier and the f64 exact value within their bound;
//! a small graph searched with `ef >= rows` returns the exact top-k with
//! logits within the f32 bound; build and search are bit-identical on
//! every tier and for 1/2/3 build threads (golden checksum); save/load
//! round trips for every storage; concurrent queries agree; recall on a
//! structured layer; refused inputs.

mod common;

use std::path::PathBuf;

use common::tiers::for_this_test as tiers;
use lshk::graph::{Graph, GraphParams, GraphStats, Storage};
use lshk::kernels::graph::{self as kg, Rows, LANES};
use lshk::matmul::{bf16_to_f32, TOPK_PAD_ID};
use lshk::rng::SplitMix64;
use lshk::Status;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lshk-graph-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn randn(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SplitMix64::new(seed);
    (0..n).map(|_| r.next_normal() as f32).collect()
}

fn gamma(n: usize) -> f64 {
    let u = f64::powi(2.0, -24);
    n as f64 * u / (1.0 - n as f64 * u)
}

// ---------------------------------------------------------------- kernels

#[test]
fn kernels_every_tier_bit_identical_to_oracle_and_within_bound() {
    let ts = tiers();
    let mut rng = SplitMix64::new(7);
    for &dim in &[16usize, 32, 48, 64, 80, 304, 1024] {
        let rows = 37;
        let mut w = randn(rows * dim, dim as u64);
        // Special values in a few elements: -0, denormals, large.
        w[3] = -0.0;
        w[5] = 1e-40;
        w[dim + 1] = 3e30;
        let q = randn(dim, 99 + dim as u64);
        let wb: Vec<u16> = w.iter().map(|&v| lshk::matmul::f32_to_bf16(v)).collect();
        let mut wi = vec![0i8; rows * dim];
        let mut sc = vec![0f32; rows];
        lshk::matmul::quantize_rows_i8(&w, rows, dim, dim, &mut wi, dim, &mut sc).unwrap();
        for n in 0..=13usize {
            let ids: Vec<u32> = (0..n).map(|_| rng.below(rows as u64) as u32).collect();
            let run = |t: lshk::Isa| {
                let k = kg::kernels(t);
                let mut o = [vec![0f32; n], vec![0f32; n], vec![0f32; n]];
                // SAFETY: dim is a multiple of 16, ids < rows, buffers sized.
                unsafe {
                    (k.f32)(
                        &Rows {
                            w: &w,
                            dim,
                            scales: &[],
                        },
                        &q,
                        &ids,
                        &mut o[0],
                    );
                    (k.bf16)(
                        &Rows {
                            w: &wb,
                            dim,
                            scales: &[],
                        },
                        &q,
                        &ids,
                        &mut o[1],
                    );
                    (k.i8)(
                        &Rows {
                            w: &wi,
                            dim,
                            scales: &sc,
                        },
                        &q,
                        &ids,
                        &mut o[2],
                    );
                }
                o
            };
            let oracle = run(lshk::Isa::Scalar);
            for &t in &ts {
                let o = run(t);
                for f in 0..3 {
                    for j in 0..n {
                        assert_eq!(
                            o[f][j].to_bits(),
                            oracle[f][j].to_bits(),
                            "tier {t:?} format {f} dim {dim} n {n} j {j}"
                        );
                    }
                }
            }
            // The bound against f64, for the stored values.
            let g = gamma(dim / LANES + 6);
            for (j, &id) in ids.iter().enumerate() {
                let r = id as usize * dim..(id as usize + 1) * dim;
                let stored: [Vec<f64>; 3] = [
                    w[r.clone()].iter().map(|&v| v as f64).collect(),
                    wb[r.clone()]
                        .iter()
                        .map(|&v| bf16_to_f32(v) as f64)
                        .collect(),
                    wi[r.clone()]
                        .iter()
                        .map(|&v| v as f64 * sc[id as usize] as f64)
                        .collect(),
                ];
                for f in 0..3 {
                    let ex: f64 = stored[f].iter().zip(&q).map(|(a, &b)| a * b as f64).sum();
                    let s: f64 = stored[f]
                        .iter()
                        .zip(&q)
                        .map(|(a, &b)| (a * b as f64).abs())
                        .sum();
                    let err = (oracle[f][j] as f64 - ex).abs();
                    assert!(err <= g * s, "format {f} dim {dim}: err {err} > {}", g * s);
                }
            }
        }
    }
}

// ---------------------------------------------------------------- graphs

struct Layer {
    w: Vec<f32>,
    b: Vec<f32>,
    q: Vec<f32>,
    rows: usize,
    dim: usize,
    nq: usize,
}

fn layer(rows: usize, dim: usize, nq: usize, seed: u64) -> Layer {
    Layer {
        w: randn(rows * dim, seed),
        b: randn(rows, seed + 1),
        q: randn(nq * dim, seed + 2),
        rows,
        dim,
        nq,
    }
}

/// Exact logit (f64) of row `r` for query `i`, and the kernel's bound.
fn exact(l: &Layer, i: usize, r: usize) -> (f64, f64) {
    let q = &l.q[i * l.dim..(i + 1) * l.dim];
    let w = &l.w[r * l.dim..(r + 1) * l.dim];
    let dot: f64 = w.iter().zip(q).map(|(&a, &b)| a as f64 * b as f64).sum();
    let s: f64 = w
        .iter()
        .zip(q)
        .map(|(&a, &b)| (a as f64 * b as f64).abs())
        .sum();
    let b = l.b[r] as f64;
    let sdim = (l.dim + 2).div_ceil(LANES) * LANES;
    (dot + b, gamma(sdim / LANES + 6) * (s + b.abs()))
}

/// Nodes reachable from the entry point on level 0.
fn reachable(g: &Graph) -> usize {
    let mut seen = vec![false; g.rows()];
    let mut stack = vec![g.entry_point() as usize];
    seen[stack[0]] = true;
    while let Some(n) = stack.pop() {
        for &nb in g.neighbors(n, 0) {
            if !std::mem::replace(&mut seen[nb as usize], true) {
                stack.push(nb as usize);
            }
        }
    }
    seen.iter().filter(|&&s| s).count()
}

fn params(m: u32, efc: u32, threads: u32, storage: Storage) -> GraphParams {
    GraphParams {
        m,
        ef_construction: efc,
        threads,
        storage,
        seed: 42,
    }
}

fn search_all(g: &Graph, l: &Layer, k: usize, ef: usize, tier: lshk::Isa) -> (Vec<u32>, Vec<f32>) {
    let mut ids = vec![0u32; l.nq * k];
    let mut sc = vec![0f32; l.nq * k];
    g.search_stats(tier, &l.q, l.nq, l.dim, k, ef, &mut ids, &mut sc, None)
        .unwrap();
    (ids, sc)
}

#[test]
fn ef_at_least_rows_gives_the_exact_top_k() {
    for &(rows, dim) in &[(1usize, 3usize), (2, 5), (50, 7), (300, 20), (500, 33)] {
        let l = layer(rows, dim, 20, rows as u64 * 31 + dim as u64);
        let g = Graph::build(
            &l.w,
            Some(&l.b),
            rows,
            dim,
            dim,
            &params(8, 32, 1, Storage::F32),
        )
        .unwrap();
        // HNSW does not promise that every node is reachable (pruning can
        // leave a node without in-links); with these parameters all are,
        // and then a pool of `rows` visits every node.
        assert_eq!(reachable(&g), rows, "rows {rows}: unreachable nodes");
        let k = 10;
        let (ids, sc) = search_all(&g, &l, k, rows, lshk::Isa::Scalar);
        for i in 0..l.nq {
            let mut ex: Vec<(f64, u32)> =
                (0..rows).map(|r| (exact(&l, i, r).0, r as u32)).collect();
            ex.sort_by(|a, b| b.0.total_cmp(&a.0));
            for t in 0..k {
                if t >= rows {
                    assert_eq!(ids[i * k + t], TOPK_PAD_ID);
                    assert_eq!(sc[i * k + t], f32::NEG_INFINITY);
                    continue;
                }
                let id = ids[i * k + t] as usize;
                let (e, bound) = exact(&l, i, id);
                assert!(
                    (sc[i * k + t] as f64 - e).abs() <= bound,
                    "rows {rows} query {i} rank {t}: logit {} vs exact {e} (bound {bound})",
                    sc[i * k + t]
                );
                // Same set as the exact ranking, up to ties within the bound.
                let (ee, eb) = exact(&l, i, ex[t].1 as usize);
                assert!(
                    id as u32 == ex[t].1 || (e - ee).abs() <= bound + eb,
                    "rows {rows} query {i} rank {t}: got {id}, exact {}",
                    ex[t].1
                );
            }
        }
    }
}

#[test]
fn without_bias_logits_are_plain_dots() {
    let l = layer(200, 16, 5, 3);
    let g = Graph::build(
        &l.w,
        None,
        l.rows,
        l.dim,
        l.dim,
        &params(8, 64, 1, Storage::F32),
    )
    .unwrap();
    assert!(!g.has_bias());
    let (ids, sc) = search_all(&g, &l, 3, 200, lshk::Isa::Scalar);
    for i in 0..l.nq {
        let (e, bound) = exact(&l, i, ids[i * 3] as usize);
        let e = e - l.b[ids[i * 3] as usize] as f64;
        assert!((sc[i * 3] as f64 - e).abs() <= bound);
        let best = (0..l.rows)
            .map(|r| exact(&l, i, r).0 - l.b[r] as f64)
            .fold(f64::MIN, f64::max);
        assert!((best - e).abs() <= 2.0 * bound);
    }
}

#[test]
fn build_and_search_bit_identical_across_tiers_and_threads_golden() {
    // Enough rows to pass the sequential phase and run batches.
    let rows = 3000;
    let l = layer(rows, 24, 30, 11);
    let ts = tiers();
    let mut reference: Option<(u64, Vec<u32>, Vec<u32>)> = None;
    for &t in &ts {
        for threads in [1u32, 2, 3] {
            if t != *ts.last().unwrap() && threads > 1 {
                continue; // thread counts on the top tier only (time)
            }
            let g = Graph::build_isa(
                t,
                &l.w,
                Some(&l.b),
                rows,
                l.dim,
                l.dim,
                &params(8, 40, threads, Storage::F32),
            )
            .unwrap();
            let (ids, sc) = search_all(&g, &l, 10, 40, t);
            let bits: Vec<u32> = sc.iter().map(|v| v.to_bits()).collect();
            let cs = g.structure_checksum();
            match &reference {
                None => reference = Some((cs, ids, bits)),
                Some((c0, i0, b0)) => {
                    assert_eq!(cs, *c0, "tier {t:?} threads {threads}: graph differs");
                    assert_eq!(&ids, i0, "tier {t:?} threads {threads}: ids differ");
                    assert_eq!(&bits, b0, "tier {t:?} threads {threads}: scores differ");
                }
            }
        }
    }
    let (cs, _, _) = reference.unwrap();
    assert_eq!(
        cs, GOLDEN_3000,
        "golden graph checksum changed: {cs:#018x} (update only with a reason)"
    );
}

const GOLDEN_3000: u64 = 0x2884_f8e6_a0db_8bf9;

#[test]
fn recall_on_a_structured_layer() {
    let rows = 5000;
    let dim = 32;
    let lay = lshk::data::structured_layer(rows, dim, 50, 5);
    let (q, _) = lshk::data::queries_near_labels(&lay.w, rows, dim, 100, 6);
    let l = Layer {
        w: lay.w,
        b: lay.bias,
        q,
        rows,
        dim,
        nq: 100,
    };
    for st in [Storage::F32, Storage::Bf16, Storage::I8] {
        let g = Graph::build(&l.w, Some(&l.b), rows, dim, dim, &params(12, 100, 2, st)).unwrap();
        let k = 10;
        let mut stats = GraphStats::default();
        let mut ids = vec![0u32; l.nq * k];
        let mut sc = vec![0f32; l.nq * k];
        g.search_stats(
            lshk::isa::active(),
            &l.q,
            l.nq,
            dim,
            k,
            100,
            &mut ids,
            &mut sc,
            Some(&mut stats),
        )
        .unwrap();
        let mut hits = 0;
        for i in 0..l.nq {
            let mut ex: Vec<(f64, u32)> =
                (0..rows).map(|r| (exact(&l, i, r).0, r as u32)).collect();
            ex.sort_by(|a, b| b.0.total_cmp(&a.0));
            hits += ex[..k]
                .iter()
                .filter(|e| ids[i * k..(i + 1) * k].contains(&e.1))
                .count();
        }
        let recall = hits as f64 / (l.nq * k) as f64;
        println!(
            "storage {st:?}: recall@10 {recall:.3}, {:.0} distances/query, {} bytes",
            stats.distances as f64 / stats.queries as f64,
            g.memory_bytes()
        );
        assert_eq!(stats.queries, l.nq as u64);
        assert!(stats.distances < (l.nq * rows) as u64);
        let want = match st {
            Storage::F32 | Storage::Bf16 => 0.95,
            Storage::I8 => 0.85,
            Storage::BorrowedF32 | Storage::F16 => unreachable!("not a graph storage"),
        };
        assert!(recall >= want, "storage {st:?}: recall {recall}");
    }
}

#[test]
fn save_load_round_trip_every_storage() {
    let l = layer(2500, 19, 15, 21);
    for st in [Storage::F32, Storage::Bf16, Storage::I8] {
        let g = Graph::build(
            &l.w,
            Some(&l.b),
            l.rows,
            l.dim,
            l.dim,
            &params(6, 30, 2, st),
        )
        .unwrap();
        let p = tmp(&format!("g-{st:?}.lshk"));
        g.save(&p).unwrap();
        let h = Graph::load(&p).unwrap();
        assert_eq!(h.structure_checksum(), g.structure_checksum());
        assert_eq!(h.rows(), g.rows());
        assert_eq!(h.dim(), g.dim());
        assert_eq!(h.max_norm().to_bits(), g.max_norm().to_bits());
        assert_eq!(h.params().storage, st);
        assert_eq!(h.memory_bytes(), g.memory_bytes());
        let t = lshk::isa::active();
        let a = search_all(&g, &l, 7, 25, t);
        let b = search_all(&h, &l, 7, 25, t);
        assert_eq!(a.0, b.0);
        assert_eq!(
            a.1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            b.1.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        // Every flipped byte is caught (CRC) or refused by the checks.
        let bytes = std::fs::read(&p).unwrap();
        let mut r = SplitMix64::new(3);
        for _ in 0..40 {
            let mut c = bytes.clone();
            let at = r.below(c.len() as u64) as usize;
            c[at] ^= 1 << r.below(8);
            let q = tmp(&format!("g-bad-{st:?}.lshk"));
            std::fs::write(&q, &c).unwrap();
            let e = Graph::load(&q).err().expect("a corrupt file must not load");
            assert_eq!(e.status, Status::BadFileFormat, "{}", e.message);
        }
        // Another kind of file is refused.
        let e = lshk::ivf::Ivf::load(&p).err().unwrap();
        assert_eq!(e.status, Status::BadFileFormat);
        std::fs::remove_file(&p).unwrap();
    }
}

#[test]
fn concurrent_queries_agree() {
    let l = layer(3000, 20, 64, 8);
    let g = Graph::build(
        &l.w,
        Some(&l.b),
        l.rows,
        l.dim,
        l.dim,
        &params(8, 50, 2, Storage::Bf16),
    )
    .unwrap();
    let t = lshk::isa::active();
    let want = search_all(&g, &l, 5, 30, t);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..5 {
                    // One query at a time, interleaved with the others.
                    for i in 0..l.nq {
                        let mut ids = [0u32; 5];
                        let mut sc = [0f32; 5];
                        g.search(
                            &l.q[i * l.dim..(i + 1) * l.dim],
                            1,
                            l.dim,
                            5,
                            30,
                            &mut ids,
                            &mut sc,
                        )
                        .unwrap();
                        assert_eq!(&ids[..], &want.0[i * 5..(i + 1) * 5]);
                        assert_eq!(&sc[..], &want.1[i * 5..(i + 1) * 5]);
                    }
                }
            });
        }
    });
}

#[test]
fn refused_inputs() {
    let l = layer(10, 4, 1, 1);
    let p = GraphParams::default();
    let err = |r: lshk::Result<Graph>| r.err().expect("must fail").status;
    assert_eq!(
        err(Graph::build(&l.w, None, 0, 4, 4, &p)),
        Status::InvalidArgument
    );
    assert_eq!(
        err(Graph::build(&l.w, None, 10, 0, 4, &p)),
        Status::InvalidArgument
    );
    assert_eq!(
        err(Graph::build(&l.w, None, 10, 4, 3, &p)),
        Status::InvalidArgument
    );
    assert_eq!(
        err(Graph::build(&l.w, None, 11, 4, 4, &p)),
        Status::BufferTooSmall
    );
    assert_eq!(
        err(Graph::build(&l.w, Some(&l.b[..9]), 10, 4, 4, &p)),
        Status::BufferTooSmall
    );
    for m in [0, 1, 257] {
        let q = GraphParams { m, ..p };
        assert_eq!(
            err(Graph::build(&l.w, None, 10, 4, 4, &q)),
            Status::InvalidArgument
        );
    }
    let q = GraphParams {
        ef_construction: 0,
        ..p
    };
    assert_eq!(
        err(Graph::build(&l.w, None, 10, 4, 4, &q)),
        Status::InvalidArgument
    );
    let mut w = l.w.clone();
    w[7] = f32::NAN;
    assert_eq!(err(Graph::build(&w, None, 10, 4, 4, &p)), Status::NonFinite);
    let mut b = l.b.clone();
    b[2] = f32::INFINITY;
    assert_eq!(
        err(Graph::build(&l.w, Some(&b), 10, 4, 4, &p)),
        Status::NonFinite
    );
    let mut w = l.w.clone();
    w[0] = 3e19;
    w[1] = 3e19;
    assert_eq!(err(Graph::build(&w, None, 10, 4, 4, &p)), Status::NonFinite);

    let g = Graph::build(&l.w, Some(&l.b), 10, 4, 4, &p).unwrap();
    let mut ids = [0u32; 4];
    let mut sc = [0f32; 4];
    let s = |r: lshk::Result<()>| r.expect_err("must fail").status;
    assert_eq!(
        s(g.search(&l.q, 1, 4, 4, 0, &mut ids, &mut sc)),
        Status::InvalidArgument
    );
    assert_eq!(
        s(g.search(&l.q[..3], 1, 4, 4, 8, &mut ids, &mut sc)),
        Status::BufferTooSmall
    );
    assert_eq!(
        s(g.search(&l.q, 1, 3, 4, 8, &mut ids, &mut sc)),
        Status::InvalidArgument
    );
    assert_eq!(
        s(g.search(&l.q, 1, 4, 5, 8, &mut ids, &mut sc)),
        Status::BufferTooSmall
    );
    // Nothing written on failure.
    assert_eq!(ids, [0; 4]);
    // k = 0 and nq = 0 are fine and write nothing.
    g.search(&l.q, 1, 4, 0, 8, &mut ids, &mut sc).unwrap();
    g.search(&[], 0, 4, 4, 8, &mut ids, &mut sc).unwrap();
    assert_eq!(ids, [0; 4]);
}

/// Rewrites every section CRC and the header CRC of a container image
/// (so a mutation inside a section reaches the graph's own checks).
fn fix_crcs(b: &mut [u8]) {
    let n = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    for i in 0..n {
        let e = 64 + 32 * i;
        let off = u64::from_le_bytes(b[e + 8..e + 16].try_into().unwrap()) as usize;
        let len = u64::from_le_bytes(b[e + 16..e + 24].try_into().unwrap()) as usize;
        let crc = lshk::crc32c::crc32c(0, &b[off..off + len]);
        b[e + 24..e + 28].copy_from_slice(&crc.to_le_bytes());
    }
    let h = lshk::crc32c::crc32c(lshk::crc32c::crc32c(0, &b[..28]), &b[64..64 + 32 * n]);
    b[28..32].copy_from_slice(&h.to_le_bytes());
}

#[test]
fn in_section_mutations_with_valid_crcs_are_refused_or_safe() {
    let l = layer(300, 9, 6, 77);
    let g = Graph::build(
        &l.w,
        Some(&l.b),
        l.rows,
        l.dim,
        l.dim,
        &params(4, 16, 1, Storage::I8),
    )
    .unwrap();
    let p = tmp("mut-src.lshk");
    g.save(&p).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let n = u32::from_le_bytes(bytes[24..28].try_into().unwrap()) as usize;
    let mut r = SplitMix64::new(12);
    let (mut loaded, mut refused) = (0, 0);
    for it in 0..1500 {
        let mut b = bytes.clone();
        // A section, then a 4-byte word inside it set to a boundary value.
        let e = 64 + 32 * r.below(n as u64) as usize;
        let off = u64::from_le_bytes(b[e + 8..e + 16].try_into().unwrap()) as usize;
        let len = u64::from_le_bytes(b[e + 16..e + 24].try_into().unwrap()) as usize;
        if len < 4 {
            continue;
        }
        let at = off + 4 * r.below(len as u64 / 4) as usize;
        let val: u32 = match it % 6 {
            0 => u32::MAX,
            1 => 0,
            2 => 300,
            3 => 299,
            4 => r.next_u64() as u32,
            _ => u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) ^ (1 << r.below(32)),
        };
        b[at..at + 4].copy_from_slice(&val.to_le_bytes());
        fix_crcs(&mut b);
        let q = tmp("mut.lshk");
        std::fs::write(&q, &b).unwrap();
        match Graph::load(&q) {
            Err(e) => {
                assert_eq!(e.status, Status::BadFileFormat, "{}", e.message);
                refused += 1;
            }
            Ok(h) => {
                loaded += 1;
                // Whatever it holds, a loaded graph answers in range.
                for ef in [1usize, 20, 1000] {
                    let (ids, _) = search_all(&h, &l, 5, ef, lshk::isa::active());
                    assert!(ids
                        .iter()
                        .all(|&i| i == TOPK_PAD_ID || (i as usize) < l.rows));
                }
            }
        }
    }
    println!("in-section mutants: {loaded} loaded, {refused} refused");
    assert!(refused > 100 && loaded > 100);
}

/// The graph's rows use the one `Storage`; it keeps them as F32, Bf16 or
/// I8 and refuses the others (its rows are transformed, never borrowed).
#[test]
fn storages_a_graph_does_not_keep_are_refused() {
    let l = layer(64, 8, 1, 3);
    for st in [Storage::BorrowedF32, Storage::F16] {
        let e = Graph::build(&l.w, Some(&l.b), 64, 8, 8, &params(4, 16, 1, st))
            .err()
            .expect("refused");
        assert_eq!(e.status, Status::InvalidArgument, "{st:?}: {e}");
    }
}
