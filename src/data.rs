//! Data for the demo and the benchmarks: a structured synthetic output
//! layer, queries with known labels, and loaders for user-supplied weights
//! (`.npy`, f32, C order) and raw little-endian f32 matrices.
//!
//! ## The synthetic layer (fixed for ever by its seed)
//! `structured_layer(rows, dim, clusters, seed)` draws, from one
//! [`SplitMix64`] stream seeded with `seed`, in this order:
//! 1. `clusters` centroids: `dim` standard normals each, scaled to norm 1;
//! 2. for each row i: its cluster `c = below(clusters)`, then `dim` normals
//!    `z`, and `w_i = centroid_c + 0.35 / sqrt(dim) * z`, finally scaled by
//!    a per-row norm factor `0.75 + 0.5 * U` (U uniform in (0,1));
//! 3. the bias: `rows` values `0.05 * normal`.
//!
//! `queries_near_labels(w, rows, dim, n, seed)` draws, for each query: a
//! label row `y = below(rows)`, then `q = w_y / |w_y| + 0.25 / sqrt(dim) * z`
//! (`z` standard normal), all from one stream seeded with `seed`.
//! Rows of a cluster are close in angle, so (as in a trained layer) many
//! rows score nearly as high as the label: retrieval must find the right
//! ones among thousands of similar rows.

use std::path::Path;

use crate::error::{Error, Result, Status};
use crate::rng::SplitMix64;

/// A weight matrix with its bias: `rows x dim`, row-major.
pub struct Layer {
    pub rows: usize,
    pub dim: usize,
    pub w: Vec<f32>,
    pub bias: Vec<f32>,
}

/// The synthetic layer described in the module documentation.
pub fn structured_layer(rows: usize, dim: usize, clusters: usize, seed: u64) -> Layer {
    assert!(rows > 0 && dim > 0 && clusters > 0);
    let mut r = SplitMix64::new(seed);
    let mut cent = vec![0f32; clusters * dim];
    for c in cent.chunks_mut(dim) {
        for v in c.iter_mut() {
            *v = r.next_normal() as f32;
        }
        let n = c
            .iter()
            .map(|v| v * v)
            .sum::<f32>()
            .sqrt()
            .max(f32::MIN_POSITIVE);
        c.iter_mut().for_each(|v| *v /= n);
    }
    let spread = 0.35 / (dim as f32).sqrt();
    let mut w = vec![0f32; rows * dim];
    for row in w.chunks_mut(dim) {
        let c = r.below(clusters as u64) as usize;
        let cen = &cent[c * dim..(c + 1) * dim];
        for (v, cv) in row.iter_mut().zip(cen) {
            *v = cv + spread * r.next_normal() as f32;
        }
        let scale = 0.75 + 0.5 * r.next_f64_open() as f32;
        row.iter_mut().for_each(|v| *v *= scale);
    }
    let bias = (0..rows).map(|_| 0.05 * r.next_normal() as f32).collect();
    Layer { rows, dim, w, bias }
}

/// `n` queries near random label rows: `(queries n x dim, labels)`.
pub fn queries_near_labels(
    w: &[f32],
    rows: usize,
    dim: usize,
    n: usize,
    seed: u64,
) -> (Vec<f32>, Vec<u32>) {
    let mut r = SplitMix64::new(seed);
    let noise = 0.25 / (dim as f32).sqrt();
    let mut q = vec![0f32; n * dim];
    let mut labels = Vec::with_capacity(n);
    for qi in q.chunks_mut(dim) {
        let y = r.below(rows as u64) as usize;
        labels.push(y as u32);
        let wy = &w[y * dim..(y + 1) * dim];
        let norm = wy
            .iter()
            .map(|v| v * v)
            .sum::<f32>()
            .sqrt()
            .max(f32::MIN_POSITIVE);
        for (v, wv) in qi.iter_mut().zip(wy) {
            *v = wv / norm + noise * r.next_normal() as f32;
        }
    }
    (q, labels)
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> Error {
    Error::new(Status::BadFileFormat, format!("{}: {msg}", path.display()))
}

/// Reads a 2-D (or 1-D, read as `n x 1`) little-endian f32
/// `.npy` array in C order: returns `(data, rows, cols)`.
pub fn read_npy_f32(path: &Path) -> Result<(Vec<f32>, usize, usize)> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::new(
            Status::IoError,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    parse_npy_f32(&bytes).map_err(|m| bad(path, m))
}

/// Parses the bytes of an `.npy` file (versions 1.0, 2.0 and 3.0).
pub fn parse_npy_f32(b: &[u8]) -> std::result::Result<(Vec<f32>, usize, usize), String> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err("not an .npy file (bad magic)".into());
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10usize),
        2 | 3 => {
            if b.len() < 12 {
                return Err("truncated .npy header".into());
            }
            (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
        }
        v => return Err(format!(".npy version {v} is not supported")),
    };
    let end = start
        .checked_add(hlen)
        .filter(|&e| e <= b.len())
        .ok_or("truncated .npy header")?;
    let header = std::str::from_utf8(&b[start..end]).map_err(|_| "the .npy header is not text")?;
    let field = |key: &str| -> std::result::Result<&str, String> {
        let at = header
            .find(key)
            .ok_or(format!("the .npy header has no {key}"))?;
        Ok(header[at + key.len()..].trim_start_matches([' ', ':', '\'', '"']))
    };
    let descr = field("descr")?;
    if !(descr.starts_with("<f4") || descr.starts_with("=f4")) {
        return Err(format!(
            "dtype {} is not little-endian float32 (convert with arr.astype('<f4'))",
            descr.split([',', '\'']).next().unwrap_or("?")
        ));
    }
    if field("fortran_order")?.starts_with("True") {
        return Err(
            "Fortran-order arrays are not supported (save np.ascontiguousarray(arr))".into(),
        );
    }
    let shape = field("shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("cannot parse the .npy shape")?;
    let dims: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad dimension {s:?} in the .npy shape"))
        })
        .collect::<std::result::Result<_, _>>()?;
    let (rows, cols) = match dims[..] {
        [n] => (n, 1),
        [r, c] => (r, c),
        _ => {
            return Err(format!(
                "expected a 1-D or 2-D array, the shape is ({inner})"
            ))
        }
    };
    let count = rows.checked_mul(cols).ok_or("the .npy shape overflows")?;
    let data = &b[end..];
    if data.len() != count.checked_mul(4).ok_or("the .npy shape overflows")? {
        return Err(format!(
            "the shape ({rows}, {cols}) needs {} data bytes, the file has {}",
            count * 4,
            data.len()
        ));
    }
    Ok((
        data.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        rows,
        cols,
    ))
}

/// Writes a 2-D f32 array as `.npy` version 1.0 (C order).
pub fn write_npy_f32(path: &Path, data: &[f32], rows: usize, cols: usize) -> Result<()> {
    assert_eq!(data.len(), rows * cols);
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Pad so the data starts 64-byte aligned, ending with a newline.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + data.len() * 4);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, out).map_err(|e| {
        Error::new(
            Status::IoError,
            format!("cannot write {}: {e}", path.display()),
        )
    })
}

/// Reads a raw little-endian f32 matrix of `cols` columns (rows inferred).
pub fn read_raw_f32(path: &Path, cols: usize) -> Result<(Vec<f32>, usize)> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::new(
            Status::IoError,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    if cols == 0 || bytes.len() % (4 * cols) != 0 {
        return Err(bad(
            path,
            format!(
                "{} bytes is not a whole number of rows of {cols} f32",
                bytes.len()
            ),
        ));
    }
    let v: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let rows = v.len() / cols;
    Ok((v, rows))
}

/// Reads raw little-endian i32 values.
pub fn read_raw_i32(path: &Path) -> Result<Vec<i32>> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::new(
            Status::IoError,
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    if bytes.len() % 4 != 0 {
        return Err(bad(path, "length is not a multiple of 4"));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npy_round_trip_and_errors() {
        let dir = std::env::temp_dir().join(format!("lshk-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        let data: Vec<f32> = (0..12).map(|i| i as f32 - 3.5).collect();
        write_npy_f32(&p, &data, 3, 4).unwrap();
        assert_eq!(read_npy_f32(&p).unwrap(), (data.clone(), 3, 4));
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(
            (10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize) % 64,
            0
        );
        // numpy's own header layout (as np.save writes it)
        let mut np_style = b"\x93NUMPY\x01\x00".to_vec();
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }          \n";
        np_style.extend_from_slice(&(h.len() as u16).to_le_bytes());
        np_style.extend_from_slice(h.as_bytes());
        np_style.extend_from_slice(&1.5f32.to_le_bytes());
        np_style.extend_from_slice(&2.5f32.to_le_bytes());
        assert_eq!(parse_npy_f32(&np_style).unwrap(), (vec![1.5, 2.5], 2, 1));
        assert!(parse_npy_f32(&bytes[..bytes.len() - 1])
            .unwrap_err()
            .contains("needs"));
        assert!(parse_npy_f32(b"hello").is_err());
        let patch = |from: &[u8], to: &[u8]| {
            let mut b = bytes.clone();
            let at = b.windows(from.len()).position(|w| w == from).unwrap();
            b[at..at + to.len()].copy_from_slice(to);
            b
        };
        assert!(parse_npy_f32(&patch(b"<f4", b"<f8"))
            .unwrap_err()
            .contains("float32"));
        assert!(parse_npy_f32(&patch(b"False", b"True "))
            .unwrap_err()
            .contains("Fortran"));
        assert_eq!(
            read_npy_f32(&dir.join("missing.npy")).unwrap_err().status,
            Status::IoError
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn generator_is_deterministic_and_structured() {
        let a = structured_layer(500, 16, 7, 3);
        let b = structured_layer(500, 16, 7, 3);
        assert_eq!(a.w, b.w);
        assert_eq!(a.bias, b.bias);
        let (q, y) = queries_near_labels(&a.w, a.rows, a.dim, 50, 9);
        // A query is much closer in angle to its label row than to a
        // random row.
        let cos = |u: &[f32], v: &[f32]| {
            let d: f32 = u.iter().zip(v).map(|(a, b)| a * b).sum();
            d / (u.iter().map(|a| a * a).sum::<f32>().sqrt()
                * v.iter().map(|a| a * a).sum::<f32>().sqrt())
        };
        let mut near = 0.0;
        for (i, &yi) in y.iter().enumerate() {
            near += cos(
                &q[i * 16..(i + 1) * 16],
                &a.w[yi as usize * 16..(yi as usize + 1) * 16],
            );
        }
        assert!(near / 50.0 > 0.8, "{}", near / 50.0);
    }
}
