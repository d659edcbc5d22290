//! The cost of rehashing a fraction of the rows of a mutable index against
//! a full rebuild (issue 14, item 2).
//!
//! `cargo run --release --example rehash_cost [-- --rows N --threads T]`
//!
//! Layer: `lshk::data::structured_layer(rows, 128, 4096, 20240601)` (the
//! W1 shape by default, 670,091 x 128, with its bias), borrowed f32 W.
//! Index: SimHash, K = 10, L = 50, the BiasAug transform (rows `[w, b]`),
//! as `examples/lns_train.rs` uses it. Then, per fraction f in 1 %, 10 %
//! (and 100 % through the same call): f·rows random rows get new values
//! (the caller changes the borrowed W, then `update_rows(ids, None,
//! Some(new bias))`), and `rehash_dirty` moves them. Printed: the time of
//! the full build, of the first rehash (which also restores the frozen
//! tables' row-to-bucket map from the CSR), of later rehashes, and of the
//! `Tables::update` part alone (the hashing is the rest).

use std::time::Instant;

use lshk::index::{Family, Index, IndexParams, Storage, Transform};
use lshk::rng::SplitMix64;

fn arg(name: &str, default: usize) -> usize {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    let rows = arg("--rows", 670_091);
    let threads = arg("--threads", 1) as u32;
    let dim = 128;
    let t0 = Instant::now();
    let layer = lshk::data::structured_layer(rows, dim, 4096, 20240601);
    let mut w = layer.w.clone();
    let mut bias = layer.bias.clone();
    println!(
        "layer {rows} x {dim} made in {:.1} s; tier {}; {threads} thread(s)",
        t0.elapsed().as_secs_f64(),
        lshk::isa::active().name()
    );
    let p = IndexParams {
        family: Family::SimHash,
        bits: 10,
        tables: 50,
        seed: 11,
        storage: Storage::BorrowedF32,
        transform: Transform::BiasAug,
        threads,
        ..Default::default()
    };
    let t = Instant::now();
    // SAFETY: `w` outlives the index and changes only between its calls.
    let mut idx =
        unsafe { Index::build_borrowed(&w, Some(&bias), rows, dim, dim, &p, None).unwrap() };
    let build = t.elapsed().as_secs_f64();
    println!("full build: {build:.3} s");
    let mut r = SplitMix64::new(5);
    let mut all: Vec<u32> = (0..rows as u32).collect();
    for (round, pct) in [(0, 1.0), (1, 1.0), (2, 10.0), (3, 10.0), (4, 100.0)] {
        let n = ((rows as f64 * pct / 100.0) as usize).max(1);
        r.shuffle(&mut all);
        let ids = &all[..n];
        // New values: a small step on every coordinate (a training update).
        let mut nb = Vec::with_capacity(n);
        for &id in ids {
            let row = &mut w[id as usize * dim..(id as usize + 1) * dim];
            for v in row.iter_mut() {
                *v += 0.05 * r.next_normal() as f32;
            }
            bias[id as usize] += 0.01 * r.next_normal() as f32;
            nb.push(bias[id as usize]);
        }
        let t = Instant::now();
        idx.update_rows(ids, None, Some(&nb)).unwrap();
        let done = idx.rehash_dirty().unwrap();
        let dt = t.elapsed().as_secs_f64();
        println!(
            "rehash {pct:>5.1} % ({done:>7} rows){}: {dt:.3} s = {:.3}x the full build",
            if round == 0 {
                " [first: restores the row-to-bucket map]"
            } else {
                ""
            },
            dt / build
        );
    }
    // The table part alone: move 1 % / 10 % of the rows to random buckets.
    let l = 50;
    let mut tables = idx.tables().clone();
    for pct in [1.0, 10.0] {
        let n = (rows as f64 * pct / 100.0) as usize;
        r.shuffle(&mut all);
        let codes: Vec<u32> = (0..n * l).map(|_| r.below(1024) as u32).collect();
        let t = Instant::now();
        tables.update(&all[..n], &codes).unwrap();
        println!(
            "Tables::update alone, {pct:>4.1} % of the rows: {:.3} s",
            t.elapsed().as_secs_f64()
        );
    }
}
