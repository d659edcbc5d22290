//! Writes the seed corpora: `in/index_load/*` (index files of several
//! families (the graph family included), storages, transforms, with and without labels, each with the
//! mode byte 1 = "fix CRCs" and 0 = "as is") and `in/args/*`.

use lshk::index::{Family, Index, IndexParams, Storage, Transform};

fn main() {
    let out =
        std::path::Path::new(&std::env::args().nth(1).unwrap_or_else(|| "in".into())).to_path_buf();
    let il = out.join("index_load");
    let ar = out.join("args");
    std::fs::create_dir_all(&il).unwrap();
    std::fs::create_dir_all(&ar).unwrap();
    let cfgs = [
        (Family::SimHash, Storage::F32, Transform::None, false),
        (Family::SimHash, Storage::Bf16, Transform::Mips, true),
        (Family::Dwta, Storage::I8, Transform::BiasAug, false),
        (Family::SimHash, Storage::F16, Transform::None, true),
        // The graph family: its graph sections beside the index's.
        (Family::Graph, Storage::F32, Transform::None, false),
    ];
    for (i, &(family, storage, transform, labels)) in cfgs.iter().enumerate() {
        // Small files: AFL++ works best on inputs of a few KB.
        let (rows, dim) = (24usize, 6usize);
        let layer = lshk::data::structured_layer(rows, dim, 3, 5);
        let p = IndexParams {
            family,
            bits: if family == Family::SimHash { 4 } else { 2 },
            tables: 3,
            bin_size: 4,
            storage,
            transform,
            threads: 1,
            graph: lshk::graph::GraphParams {
                m: 3,
                ef_construction: 8,
                threads: 1,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut idx = Index::build(&layer.w, Some(&layer.bias), rows, dim, dim, &p, None).unwrap();
        if labels {
            let (q, y) = lshk::data::queries_near_labels(&layer.w, rows, dim, 6, 3);
            let offs: Vec<usize> = (0..=6).collect();
            idx.train_labels(&q, 6, dim, &offs, &y, &Default::default())
                .unwrap();
        }
        let tmp = il.join(format!("tmp{i}"));
        idx.save(&tmp).unwrap();
        let file = std::fs::read(&tmp).unwrap();
        std::fs::remove_file(&tmp).unwrap();
        for mode in [0u8, 1] {
            let mut b = vec![mode];
            b.extend_from_slice(&file);
            std::fs::write(il.join(format!("seed{i}_mode{mode}")), b).unwrap();
        }
    }
    // args: one seed per selector with mid-range bytes.
    for sel in 0u8..8 {
        let mut b = vec![sel];
        b.extend((0..200u32).map(|i| (i * 73 % 251) as u8));
        std::fs::write(ar.join(format!("sel{sel}")), b).unwrap();
    }
    println!("seeds written to {}", out.display());
}
