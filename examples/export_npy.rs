//! Writes the demo's synthetic W1 layer and its queries as `.npy` files
//! (f32, C order) for other tools, e.g. `benches/peers/ann_peers.py`.
//!
//! `cargo run --release --example export_npy -- [--rows N] [--nq N] [--out DIR]`
//!
//! Files in DIR (default `target/w1-npy`): `W.npy` (rows x 128), `b.npy`
//! (rows x 1, the bias) and `Q.npy` (nq x 128, default 1,000 queries).
//! The layer is the demo's (`common::synthetic`: `structured_layer(rows,
//! 128, min(4096, rows), 20240601)`), the queries are
//! `queries_near_labels(.., seed 7)`, so the first queries are the demo's.

mod common;

use std::path::PathBuf;

fn main() {
    let (mut rows, mut nq, mut out) = (670_091usize, 1000usize, PathBuf::from("target/w1-npy"));
    let mut a = std::env::args().skip(1);
    while let Some(f) = a.next() {
        let v = a.next().unwrap_or_else(|| panic!("{f} needs a value"));
        let num = |s: &str| {
            s.parse::<usize>()
                .unwrap_or_else(|_| panic!("bad number {s}"))
        };
        match f.as_str() {
            "--rows" => rows = num(&v),
            "--nq" => nq = num(&v),
            "--out" => out = v.into(),
            _ => panic!("usage: export_npy [--rows N] [--nq N] [--out DIR]"),
        }
    }
    assert!(rows > 0 && nq > 0, "--rows and --nq must be >= 1");
    let d = common::synthetic(rows, 4096.min(rows), nq);
    std::fs::create_dir_all(&out).expect("create the output directory");
    let bias = d.bias.as_deref().expect("the synthetic layer has a bias");
    let write = |name: &str, v: &[f32], r: usize, c: usize| {
        lshk::data::write_npy_f32(&out.join(name), v, r, c).expect("write .npy");
    };
    write("W.npy", &d.w, d.rows, d.dim);
    write("b.npy", bias, d.rows, 1);
    write("Q.npy", &d.q, d.nq, d.dim);
    println!("{}: W.npy b.npy Q.npy in {}", d.name, out.display());
}
