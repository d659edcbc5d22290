//! Gathered matmul benchmarks (criterion). One thread.
//!
//! Workload W1: an output layer of 670,091 rows x 128 (Amazon-670K shape):
//! f32 is 343 MB, far above this machine's 32 MiB L3, so every row fetch is
//! a DRAM access. Each query gets `k` random sorted ids; to stay in the DRAM
//! regime across iterations the benchmark cycles through enough distinct id
//! sets that the rows touched per cycle exceed 128 MB (4x L3).
//!
//! Groups (throughput in rows/s: ns per row = 1e9 / rate):
//! * `gathered_matmul_{f32,bf16,f16,i8}`: `BenchmarkId(tier, "k{k}_b{B}")`
//!   for k in {1024, 4096, 16384}, B in {1, 64}; the scalar tier beside.
//! * `gathered_matmul_f32` also holds `faiss_fvec_inner_products_by_idx`
//!   (Debian's FAISS, called in-process: a 5-line C++ shim is compiled
//!   against `/usr/lib/x86_64-linux-gnu/libfaiss.a` at bench start-up and
//!   `dlopen`ed; if g++ or the library is missing the peer is skipped with a
//!   message).
//! * `seq_read`: the same core streaming the whole 343 MB f32 matrix (the
//!   sequential read bandwidth ceiling, bytes/s), and the AVX2 kernel over
//!   consecutive ids.
//! * `topk`: k = 10 over 10,000 candidates; `softmax` over 10,000.
//! * LLM head (128,256 x 4096 bf16, 1 GB): only with `LSHK_BENCH_LLM=1`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lshk::matmul::{self, Schedule, WeightMatrix, Weights};
use lshk::rng::SplitMix64;
use lshk::Isa;

const ROWS: usize = 670_091;
const DIM: usize = 128;
const KS: [usize; 3] = [1024, 4096, 16384];
const BS: [usize; 2] = [1, 64];

fn uniform(rng: &mut SplitMix64) -> f32 {
    (rng.next_f64_open() * 2.0 - 1.0) as f32
}

/// `sets` id sets, each `b` queries of `k` random sorted ids, CSR.
struct IdSets {
    ids: Vec<Vec<u32>>,
    offsets: Vec<usize>,
}

fn id_sets(rows: usize, k: usize, b: usize, row_bytes: usize, seed: u64) -> IdSets {
    let per_set = k * b * row_bytes;
    let sets = (128usize << 20).div_ceil(per_set).max(1);
    let mut rng = SplitMix64::new(seed);
    let ids = (0..sets)
        .map(|_| {
            let mut v = Vec::with_capacity(k * b);
            for _ in 0..b {
                let mut s: Vec<u32> = (0..k).map(|_| rng.below(rows as u64) as u32).collect();
                s.sort_unstable();
                v.extend(s);
            }
            v
        })
        .collect();
    IdSets {
        ids,
        offsets: (0..=b).map(|i| i * k).collect(),
    }
}

fn tiers() -> Vec<Isa> {
    let t: Vec<Isa> = Isa::supported().collect();
    for i in Isa::ALL {
        if !t.contains(&i) {
            println!("skipped: {} tier (CPU lacks it)", i.name());
        }
    }
    t
}

fn bench_dtype(
    c: &mut Criterion,
    name: &str,
    m: &WeightMatrix,
    q: &[f32],
    row_bytes: usize,
    tiers: &[Isa],
    faiss: Option<(&Faiss, &[f32])>,
) {
    let mut g = c.benchmark_group(name);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500));
    for &b in &BS {
        for &k in &KS {
            let sets = id_sets(m.rows(), k, b, row_bytes, (k * 31 + b) as u64);
            let mut out = vec![0f32; k * b];
            g.throughput(Throughput::Elements((k * b) as u64));
            let label = format!("k{k}_b{b}");
            for &t in tiers {
                let mut s = 0;
                g.bench_with_input(BenchmarkId::new(t.name(), &label), &(), |bch, _| {
                    bch.iter(|| {
                        s = (s + 1) % sets.ids.len();
                        m.matmul_isa(
                            t,
                            black_box(q),
                            b,
                            DIM,
                            &sets.ids[s],
                            &sets.offsets,
                            &mut out,
                        )
                        .unwrap();
                        black_box(&out);
                    })
                });
            }
            if let Some((f, w)) = faiss {
                let ids64: Vec<Vec<i64>> = sets
                    .ids
                    .iter()
                    .map(|v| v.iter().map(|&x| x as i64).collect())
                    .collect();
                let mut s = 0;
                g.bench_with_input(
                    BenchmarkId::new("faiss_fvec_inner_products_by_idx", &label),
                    &(),
                    |bch, _| {
                        bch.iter(|| {
                            s = (s + 1) % ids64.len();
                            // SAFETY: ids < rows, q holds b*DIM floats, out
                            // b*k floats, w rows*DIM floats.
                            unsafe {
                                (f.by_idx)(
                                    out.as_mut_ptr(),
                                    black_box(q).as_ptr(),
                                    w.as_ptr(),
                                    ids64[s].as_ptr(),
                                    DIM,
                                    b,
                                    k,
                                )
                            };
                            black_box(&out);
                        })
                    },
                );
            }
        }
    }
    g.finish();
}

/// Queries sharing candidates: B = 64 queries of k = 4096 ids, each set's
/// ids drawn from a random pool of `pool` rows (new pool per set, sets
/// cycled so > 128 MB of distinct rows are touched per cycle), per schedule.
fn bench_shared(c: &mut Criterion, m: &WeightMatrix, q: &[f32]) {
    let (k, b) = (4096usize, 64usize);
    let mut g = c.benchmark_group("gathered_matmul_f32_shared");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_millis(1500));
    g.throughput(Throughput::Elements((k * b) as u64));
    let mut rng = SplitMix64::new(77);
    for pool in [4096usize, 65536, 262_144, ROWS] {
        let distinct_est = (pool as f64 * (1.0 - (-((k * b) as f64) / pool as f64).exp())) as usize;
        let sets_n = (128usize << 20)
            .div_ceil(distinct_est * DIM * 4)
            .clamp(1, 64);
        let sets: Vec<Vec<u32>> = (0..sets_n)
            .map(|_| {
                let p: Vec<u32> = (0..pool).map(|_| rng.below(ROWS as u64) as u32).collect();
                let mut v = Vec::with_capacity(k * b);
                for _ in 0..b {
                    let mut s: Vec<u32> =
                        (0..k).map(|_| p[rng.below(pool as u64) as usize]).collect();
                    s.sort_unstable();
                    v.extend(s);
                }
                v
            })
            .collect();
        let offsets: Vec<usize> = (0..=b).map(|i| i * k).collect();
        let mut out = vec![0f32; k * b];
        let label = format!("pool{pool}_k{k}_b{b}");
        for (name, sched) in [
            ("avx2_per_query", Schedule::PerQuery),
            ("avx2_union", Schedule::Union),
            ("avx2_auto", Schedule::Auto),
        ] {
            let mut s = 0;
            g.bench_function(BenchmarkId::new(name, &label), |bch| {
                bch.iter(|| {
                    s = (s + 1) % sets.len();
                    m.matmul_schedule(
                        Isa::Avx2.min(lshk::isa::detected()),
                        sched,
                        black_box(q),
                        b,
                        DIM,
                        &sets[s],
                        &offsets,
                        &mut out,
                    )
                    .unwrap();
                    black_box(&out);
                })
            });
        }
    }
    g.finish();
}

type ByIdx =
    unsafe extern "C" fn(*mut f32, *const f32, *const f32, *const i64, usize, usize, usize);

struct Faiss {
    by_idx: ByIdx,
}

/// Builds and loads the FAISS peer, or says why not.
fn load_faiss() -> Option<Faiss> {
    let lib = "/usr/lib/x86_64-linux-gnu/libfaiss.a";
    if !std::path::Path::new(lib).exists() {
        println!("FAISS peer skipped: {lib} not found");
        return None;
    }
    let dir = std::path::PathBuf::from(option_env!("CARGO_TARGET_TMPDIR").unwrap_or("/tmp"));
    let src = dir.join("lshk_faiss_peer.cpp");
    let so = dir.join("liblshk_faiss_peer.so");
    std::fs::write(
        &src,
        "#include <faiss/utils/distances.h>\n\
         extern \"C\" void lshk_peer_by_idx(float* ip, const float* x, const float* y,\n\
           const int64_t* ids, size_t d, size_t nx, size_t ny) {\n\
           faiss::fvec_inner_products_by_idx(ip, x, y, ids, d, nx, ny); }\n",
    )
    .ok()?;
    let st = std::process::Command::new("g++")
        .args(["-O2", "-shared", "-fPIC"])
        .arg(&src)
        .arg("-o")
        .arg(&so)
        .args([lib, "-lopenblas", "-fopenmp"])
        .status();
    if !matches!(st, Ok(s) if s.success()) {
        println!("FAISS peer skipped: could not build the shim with g++ ({st:?})");
        return None;
    }
    let path = std::ffi::CString::new(so.to_str()?).ok()?;
    // SAFETY: dlopen/dlsym with valid C strings; the symbol has the declared
    // signature (the shim above).
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            println!("FAISS peer skipped: dlopen failed");
            return None;
        }
        let sym = libc::dlsym(h, c"lshk_peer_by_idx".as_ptr());
        if sym.is_null() {
            println!("FAISS peer skipped: symbol not found");
            return None;
        }
        Some(Faiss {
            by_idx: std::mem::transmute::<*mut libc::c_void, ByIdx>(sym),
        })
    }
}

fn seq_sum(w: &[f32]) -> f32 {
    use wide::f32x8;
    let mut a = [f32x8::ZERO; 4];
    for c in w.chunks_exact(32) {
        for (t, acc) in a.iter_mut().enumerate() {
            *acc += f32x8::from(<[f32; 8]>::try_from(&c[8 * t..8 * t + 8]).unwrap());
        }
    }
    (a[0] + a[1] + a[2] + a[3]).reduce_add()
}

fn benches(c: &mut Criterion) {
    // FAISS uses OpenMP over queries: one thread, like lshk.
    // SAFETY (edition 2021: safe): set before any thread exists.
    std::env::set_var("OMP_NUM_THREADS", "1");
    let tiers = tiers();
    let mut rng = SplitMix64::new(1);
    let mut w: Vec<f32> = Vec::with_capacity(ROWS * DIM);
    if std::env::var("LSHK_BENCH_HUGEPAGES").is_ok() {
        // Transparent huge pages for W (before first touch): fewer TLB misses
        // on random rows. Off by default, as most callers' buffers are not.
        // SAFETY: advice on our own, not yet touched allocation.
        let p = w.as_mut_ptr() as usize;
        let start = (p + 4095) & !4095;
        let len = (p + ROWS * DIM * 4 - start) & !4095;
        let r = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        println!("W on transparent huge pages (madvise returned {r})");
    }
    w.extend((0..ROWS * DIM).map(|_| uniform(&mut rng)));
    let q: Vec<f32> = (0..64 * DIM).map(|_| uniform(&mut rng)).collect();
    let faiss = load_faiss();

    // Sequential read bandwidth of the same core, same run.
    {
        let mut g = c.benchmark_group("seq_read");
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2));
        g.throughput(Throughput::Bytes((w.len() * 4) as u64));
        g.bench_function("sum_f32x8_343MB", |b| {
            b.iter(|| black_box(seq_sum(black_box(&w))))
        });
        let m = WeightMatrix::new(Weights::F32(&w), ROWS, DIM, DIM).unwrap();
        let ids: Vec<u32> = (0..ROWS as u32).collect();
        let mut out = vec![0f32; ROWS];
        // Every 16th row left out: runs of 15 consecutive ids, below
        // matmul::RUN_MIN, so the gathered kernel scores them all (15/16 of
        // the rows; compare per row).
        let gaps: Vec<u32> = (0..ROWS as u32).filter(|i| i % 16 != 15).collect();
        let mut out_g = vec![0f32; gaps.len()];
        let dense = lshk::dense::DenseLayer::new(&w, ROWS, DIM, DIM, None).unwrap();
        for &t in &tiers {
            // Runs of consecutive ids go to the dense tile (matmul::RUN_MIN).
            g.bench_function(BenchmarkId::new(t.name(), "all_rows_in_order"), |b| {
                b.iter(|| {
                    m.matmul_isa(t, &q, 1, DIM, black_box(&ids), &[0, ROWS], &mut out)
                        .unwrap()
                })
            });
            g.bench_function(
                BenchmarkId::new(t.name(), "gathered_kernel_runs_of_15"),
                |b| {
                    b.iter(|| {
                        m.matmul_isa(
                            t,
                            &q,
                            1,
                            DIM,
                            black_box(&gaps),
                            &[0, gaps.len()],
                            &mut out_g,
                        )
                        .unwrap()
                    })
                },
            );
            g.bench_function(BenchmarkId::new(t.name(), "dense_tile_b1"), |b| {
                b.iter(|| {
                    dense
                        .logits_isa(t, black_box(&q), 1, DIM, &mut out)
                        .unwrap()
                })
            });
        }
        g.finish();
    }

    let m = WeightMatrix::new(Weights::F32(&w), ROWS, DIM, DIM).unwrap();
    bench_dtype(
        c,
        "gathered_matmul_f32",
        &m,
        &q,
        DIM * 4,
        &tiers,
        faiss.as_ref().map(|f| (f, &w[..])),
    );

    bench_shared(c, &m, &q);

    let only = std::env::var("LSHK_BENCH_DTYPES").unwrap_or_else(|_| "bf16,f16,i8".into());
    let low: Vec<Isa> = tiers
        .iter()
        .copied()
        .filter(|&t| t == Isa::Scalar || t >= Isa::Avx2)
        .collect();
    if only.contains("bf16") {
        let mut wb = vec![0u16; w.len()];
        matmul::convert_f32_to_bf16(&w, &mut wb).unwrap();
        let m = WeightMatrix::new(Weights::Bf16(&wb), ROWS, DIM, DIM).unwrap();
        bench_dtype(c, "gathered_matmul_bf16", &m, &q, DIM * 2, &low, None);
    }
    if only.contains("f16") {
        let mut wh = vec![0u16; w.len()];
        matmul::convert_f32_to_f16(&w, &mut wh).unwrap();
        let m = WeightMatrix::new(Weights::F16(&wh), ROWS, DIM, DIM).unwrap();
        bench_dtype(c, "gathered_matmul_f16", &m, &q, DIM * 2, &low, None);
    }
    if only.contains("i8") {
        let mut wi = vec![0i8; w.len()];
        let mut sc = vec![0f32; ROWS];
        matmul::quantize_rows_i8(&w, ROWS, DIM, DIM, &mut wi, DIM, &mut sc).unwrap();
        let m = WeightMatrix::new(
            Weights::I8 {
                w: &wi,
                scales: &sc,
            },
            ROWS,
            DIM,
            DIM,
        )
        .unwrap();
        bench_dtype(c, "gathered_matmul_i8", &m, &q, DIM, &low, None);
    }
    drop(w);

    // Epilogues.
    {
        let n = 10_000;
        let scores: Vec<f32> = (0..n).map(|_| rng.next_normal() as f32).collect();
        let ids: Vec<u32> = (0..n as u32).map(|i| i * 67).collect();
        let mut g = c.benchmark_group("topk");
        g.sample_size(20).measurement_time(Duration::from_secs(1));
        g.throughput(Throughput::Elements(n as u64));
        for k in [10usize, 100] {
            let mut oi = vec![0u32; k];
            let mut os = vec![0f32; k];
            g.bench_function(BenchmarkId::new("topk", format!("k{k}_n{n}")), |b| {
                b.iter(|| {
                    matmul::topk(black_box(&scores), Some(&ids), &[0, n], k, &mut oi, &mut os)
                        .unwrap()
                })
            });
        }
        g.finish();
        let mut g = c.benchmark_group("softmax");
        g.sample_size(20).measurement_time(Duration::from_secs(1));
        g.throughput(Throughput::Elements(n as u64));
        let mut out = vec![0f32; n];
        let mut lse = [0f32];
        g.bench_function(BenchmarkId::new("softmax", n), |b| {
            b.iter(|| {
                matmul::softmax(black_box(&scores), &[0, n], &mut out, Some(&mut lse)).unwrap()
            })
        });
        g.finish();
    }

    // LLM head, optional (1 GB of bf16).
    if std::env::var("LSHK_BENCH_LLM").is_ok() {
        let (rows, dim) = (128_256usize, 4096usize);
        let mut wb = vec![0u16; rows * dim];
        let mut r = SplitMix64::new(5);
        wb.iter_mut()
            .for_each(|v| *v = matmul::f32_to_bf16(uniform(&mut r) * 0.02));
        let q: Vec<f32> = (0..dim).map(|_| uniform(&mut r)).collect();
        let m = WeightMatrix::new(Weights::Bf16(&wb), rows, dim, dim).unwrap();
        let mut g = c.benchmark_group("gathered_matmul_bf16_llm_head");
        g.sample_size(10).measurement_time(Duration::from_secs(2));
        for k in [1024usize, 4096] {
            let sets = id_sets(rows, k, 1, dim * 2, k as u64);
            let mut out = vec![0f32; k];
            g.throughput(Throughput::Elements(k as u64));
            for &t in &low {
                let mut s = 0;
                g.bench_function(BenchmarkId::new(t.name(), format!("k{k}_b1")), |b| {
                    b.iter(|| {
                        s = (s + 1) % sets.ids.len();
                        m.matmul_isa(t, &q, 1, dim, &sets.ids[s], &sets.offsets, &mut out)
                            .unwrap()
                    })
                });
            }
        }
        g.finish();
    } else {
        println!("LLM-head shape (128,256 x 4096 bf16) skipped: set LSHK_BENCH_LLM=1");
    }
}

criterion_group!(gathered, benches);
criterion_main!(gathered);
