// Golden values of the frozen generator (src/rng.rs). GOLDEN_DENSE_4X4_SEED42
// was cross-checked against an independent Python implementation of the
// documented algorithm (SplitMix64 + polar method with libm log); do not
// regenerate these from the library: a change here is a breaking change.
const GOLDEN_DENSE_4X4_SEED42: [u32; 16] = [
    0x3efc6407, 0xbf31aa5b, 0xbfa3fa58, 0xbf66cc74, 0xbf1a14ad, 0x3f247f50, 0xbfc56c13, 0x3f922174,
    0xbfb9cb18, 0xbd0d3f77, 0x3ff80032, 0x40394080, 0x3f1b066a, 0xbf8b2f06, 0xbf76a007, 0xbc333979,
];
const GOLDEN_PM1_5X3_SEED7: [f32; 15] = [
    1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0,
];
fn golden_sparse_10() -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    (
        vec![0, 4, 8, 12, 16],
        vec![1, 7, 10, 15],
        vec![0, 7, 8, 9, 2, 6, 9, 7, 1, 7, 3, 4, 2, 3, 4, 8],
    )
}
const GOLDEN_FAMILY_HASHES: [u64; 4] = [
    0xc48bf775ae3b04f5,
    0xe87228159bc88725,
    0x1b3207ae7d674975,
    0x9c0c2b22d725e99e,
];
