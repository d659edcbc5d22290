use lshk::centroid::Panels;
use lshk::Isa;
fn cpu() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
fn main() {
    let (n, xdim, nlist) = (4096usize, 129usize, 3274usize);
    let mut r = lshk::rng::SplitMix64::new(1);
    let x: Vec<f32> = (0..n * xdim).map(|_| r.next_f64_open() as f32).collect();
    let c: Vec<f32> = (0..nlist * xdim).map(|_| r.next_f64_open() as f32).collect();
    let h: Vec<f32> = (0..nlist).map(|i| -(c[i*xdim..(i+1)*xdim].iter().map(|v| v*v).sum::<f32>())/2.0).collect();
    let p = Panels::pack(&c, &h, nlist, xdim).unwrap();
    let (mut b, mut ids) = (vec![0f32; n * 4], vec![0u32; n * 4]);
    for t in [Isa::Avx512, Isa::Avx2] {
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t0 = cpu();
            p.top4_isa(t, &x, n, xdim, &mut b, &mut ids).unwrap();
            best = best.min(cpu() - t0);
        }
        println!("{}: {:.1} GFLOP/s", t.name(), (n * nlist * xdim * 2) as f64 / best / 1e9);
    }
}
