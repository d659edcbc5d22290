use lshk::{Isa, SimHash};
#[test]
fn quick() {
    for &(dim, k, l, s) in &[
        (128usize, 8u32, 64u32, 0u32),
        (37, 7, 5, 0),
        (128, 8, 64, 3),
        (5, 32, 3, 1),
    ] {
        let h = SimHash::new(dim, k, l, s, 42).unwrap();
        let n = 13;
        let mut r = lshk::rng::SplitMix64::new(1);
        let x: Vec<f32> = (0..n * dim).map(|_| r.next_normal() as f32).collect();
        let mut base = vec![0u32; n * l as usize];
        h.hash_isa(Isa::Scalar, &x, n, dim, &mut base).unwrap();
        for isa in Isa::supported() {
            let mut c = vec![0u32; n * l as usize];
            h.hash_isa(isa, &x, n, dim, &mut c).unwrap();
            let diff: u32 = c.iter().zip(&base).map(|(a, b)| (a ^ b).count_ones()).sum();
            println!("{dim} {k} {l} {s} {isa:?}: {diff} bits differ");
        }
    }
}
