fn main() {
    let s: u32 = std::env::args()
        .nth(1)
        .map(|v| v.parse().unwrap())
        .unwrap_or(3);
    let h = lshk::SimHash::new(128, 8, 64, s, 1).unwrap();
    let b: usize = std::env::args()
        .nth(2)
        .map(|v| v.parse().unwrap())
        .unwrap_or(1024);
    let mut r = lshk::rng::SplitMix64::new(1);
    let x: Vec<f32> = (0..b * 128).map(|_| r.next_normal() as f32).collect();
    let mut c = vec![0u32; b * 64];
    let t = std::time::Instant::now();
    let reps = 200_000 / b;
    for _ in 0..reps {
        h.hash_isa(lshk::Isa::Avx2, &x, b, 128, &mut c).unwrap();
    }
    println!(
        "s={s}: {:.2} us/row",
        t.elapsed().as_secs_f64() * 1e6 / (reps as f64 * b as f64)
    );
}
