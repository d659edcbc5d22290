//! Saving and loading an index (lshk's container: CRC-checked sections,
//! atomic replace; the parameter record and the sections are described in
//! docs/c-api.md and the module documentation of the parent).

use super::*;

impl Index {
    pub(super) fn params_record(&self) -> Vec<u8> {
        let p = &self.p;
        let mut r = Vec::with_capacity(PARAMS_LEN);
        let u32s = |r: &mut Vec<u8>, v: u32| r.extend_from_slice(&v.to_le_bytes());
        let u64s = |r: &mut Vec<u8>, v: u64| r.extend_from_slice(&v.to_le_bytes());
        u32s(&mut r, PARAMS_VERSION);
        u32s(&mut r, p.family as u32);
        u32s(&mut r, p.bits);
        u32s(&mut r, p.tables);
        u32s(&mut r, p.sparsity);
        u32s(&mut r, p.bin_size);
        u64s(&mut r, p.seed);
        u32s(&mut r, p.range_bits);
        u32s(&mut r, p.bucket_cap);
        u32s(&mut r, p.storage as u32);
        u32s(&mut r, p.transform as u32);
        u64s(&mut r, self.rows as u64);
        u64s(&mut r, self.dim as u64);
        u64s(&mut r, self.w.stride as u64);
        u64s(&mut r, self.hash_dim as u64);
        u32s(&mut r, self.mips_u.to_bits());
        let flags = if self.bias.is_some() { FLAG_BIAS } else { 0 }
            | if p.storage != Storage::BorrowedF32 {
                FLAG_WEIGHTS
            } else {
                0
            }
            | if p.given { FLAG_GIVEN } else { 0 }
            | if self.codes.is_some() { FLAG_CODES } else { 0 };
        u32s(&mut r, flags);
        u32s(&mut r, self.codes.as_ref().map_or(0, |c| c.rerank));
        u32s(&mut r, 0);
        debug_assert_eq!(r.len(), PARAMS_LEN);
        r
    }

    /// Saves the index (atomically: temporary file + rename). Borrowed
    /// weights are not stored: load such a file with
    /// [`Index::load_borrowed`] and the same W.
    pub fn save(&self, path: &Path) -> Result<()> {
        let rec = self.params_record();
        let mut secs = vec![SectionOut::new("PARAMS", vec![&rec])];
        // The candidate source's sections (its family's).
        let mut keep = Vec::new();
        secs.extend(self.src.sections(&mut keep));
        if let Some(b) = &self.bias {
            secs.push(SectionOut::new("BIAS", vec![format::as_bytes(b)]));
        }
        let labels_rec = self.labels.map(|s| s.record());
        if let Some(r) = &labels_rec {
            secs.push(SectionOut::new("LABELS", vec![r]));
        }
        if self.p.storage != Storage::BorrowedF32 {
            // Stored weights are compact (stride == dim) by construction.
            secs.push(SectionOut::new("WEIGHTS", vec![self.w.bytes()]));
            if self.p.storage == Storage::I8 {
                let s = self.w.scales();
                secs.push(SectionOut::new("WSCALES", vec![format::as_bytes(s)]));
            }
        }
        if let Some(rc) = &self.codes {
            secs.push(SectionOut::new("CODES", vec![rc.w.bytes()]));
            let sc = format::as_bytes(rc.w.scales());
            secs.push(SectionOut::new("CSCALES", vec![sc]));
        }
        format::write_file(path, format::KIND_INDEX, &secs)
    }

    /// Loads an index whose file stores its weights (used in place from the
    /// mapped file). A file saved from a BorrowedF32 index needs
    /// [`Index::load_borrowed`] (`InvalidArgument` here).
    pub fn load(path: &Path) -> Result<Index> {
        Self::load_impl(path, None, 0)
    }

    /// Loads an index saved with [`Storage::BorrowedF32`], using `w` (the
    /// same `rows x dim` matrix at the same row stride as at build) in
    /// place. A file that stores its weights is refused with
    /// `InvalidArgument` (pass no W for it: [`Index::load`]).
    ///
    /// # Safety
    /// `w` must stay alive and unchanged as long as the index lives.
    pub unsafe fn load_borrowed(path: &Path, w: &[f32]) -> Result<Index> {
        Self::load_impl(path, Some(BorrowedW::Slice(w)), 0)
    }

    /// [`Index::load`] / [`Index::load_borrowed`] for the C API: `w` is
    /// NULL (the file must store its weights) or points to the borrowed W,
    /// whose length is only known from the file (`(rows - 1) * w_stride +
    /// dim` floats).
    ///
    /// # Safety
    /// A non-NULL `w` must point to that many floats that stay alive and
    /// unchanged as long as the index lives.
    pub unsafe fn load_raw(path: &Path, w: *const f32) -> Result<Index> {
        if w.is_null() {
            Self::load_impl(path, None, 0)
        } else {
            Self::load_impl(path, Some(BorrowedW::Ptr(w, usize::MAX)), 0)
        }
    }

    /// Loads any lshk file that holds a retrieval structure as an index:
    /// an index file ([`Index::load_raw`], `w_stride` 0 or the recorded
    /// stride), or a file of lshk 0.2's standalone IVF, graph or forest,
    /// as an index of that source (the C `lshk_index_load` documents the
    /// rules for `w` and `w_stride`).
    ///
    /// `w_len` is the number of floats at `w` when the caller knows it
    /// (`usize::MAX` when not): a file whose shape needs more is refused
    /// with `BufferTooSmall` before W is read.
    ///
    /// # Safety
    /// A non-NULL `w` points to `w_len` readable floats or, with `w_len =
    /// usize::MAX`, to `(rows - 1) * stride + dim` (the file's shape); they
    /// stay alive and unchanged while the index lives.
    pub unsafe fn load_any(
        path: &Path,
        w: *const f32,
        w_len: usize,
        w_stride: usize,
    ) -> Result<Index> {
        let kinds = [
            format::KIND_INDEX,
            format::KIND_IVF,
            format::KIND_GRAPH,
            crate::source::forest::KIND_FOREST,
        ];
        let (c, kind) = Container::open_any(path, &kinds)?;
        if kind == format::KIND_INDEX {
            drop(c);
            let b = (!w.is_null()).then_some(BorrowedW::Ptr(w, w_len));
            // The stride is compared before W is read.
            return Self::load_impl(path, b, w_stride);
        }
        let src: Box<dyn CandidateSource>;
        let (family, rows, dim, seed, threads, bias_of): (
            Family,
            usize,
            usize,
            u64,
            u32,
            Option<Vec<f32>>,
        );
        let mut owned_w: Option<Vec<f32>> = None;
        match kind {
            format::KIND_IVF => {
                let borrows = crate::source::ivf::Ivf::borrows_w_in(&c)?;
                let wv = if borrows {
                    if w.is_null() {
                        bail!(
                            InvalidArgument,
                            "{}: the IVF file was built on a borrowed W: pass it as borrowed_w",
                            path.display()
                        );
                    }
                    // SAFETY: forwarded caller contract; the shape is
                    // checked by the IVF loader against its record.
                    Some(unsafe { borrowed_slice(&c, w, w_len, w_stride)? })
                } else {
                    if !w.is_null() {
                        bail!(
                            InvalidArgument,
                            "{}: the IVF file holds its rows; borrowed_w must be NULL",
                            path.display()
                        );
                    }
                    None
                };
                // SAFETY: a given W is the caller's, alive and unchanged
                // while the index lives (the contract above).
                let ivf = unsafe {
                    crate::source::ivf::Ivf::from_container(
                        &c,
                        wv.map(|v| crate::source::ivf::RowsIn::F32(v, w_stride)),
                    )?
                };
                (rows, dim) = (ivf.rows(), ivf.dim());
                let (wid, b) = ivf.rows_by_id()?;
                if !borrows {
                    owned_w = Some(wid);
                }
                bias_of = b;
                (family, seed, threads) = (Family::Ivf, ivf.params().seed, ivf.params().threads);
                src = Box::new(ivf);
            }
            format::KIND_GRAPH => {
                let g = crate::source::graph::Graph::from_container(&c)?;
                (rows, dim) = (g.rows(), g.dim());
                bias_of = g.exact_bias()?;
                (family, seed, threads) = (Family::Graph, g.params().seed, g.params().threads);
                src = Box::new(g);
            }
            _ => {
                let f = crate::source::forest::Forest::from_container(&c)?;
                (rows, dim) = (f.rows(), f.dim());
                bias_of = None;
                (family, seed, threads) = (Family::Forest, f.params().seed, f.params().threads);
                src = Box::new(f);
            }
        }
        let (wstore, storage) = match owned_w {
            Some(v) => (WStore::from_vec_f32(v, dim), Storage::F32),
            None => {
                if w.is_null() {
                    bail!(
                        InvalidArgument,
                        "{}: a {family:?} file of lshk 0.2 does not hold W: pass the W it was built \
                         from as borrowed_w",
                        path.display()
                    );
                }
                if w_stride < dim {
                    bail!(
                        InvalidArgument,
                        "w_stride is {w_stride}, less than dim = {dim}"
                    );
                }
                let need = strided_len(rows, dim, w_stride, "borrowed_w")?;
                check_w_len(need, w_len)?;
                if !w.is_aligned() {
                    bail!(InvalidArgument, "`borrowed_w` is not aligned to 4 bytes");
                }
                // SAFETY: non-NULL, aligned; the caller promised the
                // file's shape at w_stride (load_any's contract), and
                // `w_len` when given is not below it.
                let ws = unsafe { std::slice::from_raw_parts(w, need) };
                if let Some((r, j)) = first_non_finite(ws, rows, dim, w_stride) {
                    bail!(
                        NonFinite,
                        "borrowed W row {r} column {j} is {}",
                        ws[r * w_stride + j]
                    );
                }
                // SAFETY: as above; alive and unchanged while the index lives.
                (
                    unsafe { WStore::borrowed_f32(ws, w_stride) },
                    Storage::BorrowedF32,
                )
            }
        };
        let p = Resolved {
            family,
            bits: 0,
            tables: 0,
            sparsity: 0,
            bin_size: 0,
            seed,
            range_bits: 0,
            bucket_cap: 0,
            storage,
            transform: Transform::None,
            threads,
            given: false,
        };
        let mut idx = Index {
            rows,
            dim,
            hash_dim: dim,
            mips_u: 1.0,
            p,
            src,
            bias: bias_of,
            w: wstore,
            codes: None,
            labels: None,
            dirty: Default::default(),
            vmax: 0.0,
            pool: Default::default(),
        };
        idx.vmax = idx.value_max();
        crate::error::check_scorable(idx.vmax, dim, "the rows' values")?;
        Ok(idx)
    }

    /// `want_stride`: 0, or the stride the caller says its W has, which
    /// must be the recorded one (`InvalidArgument`, before W is read).
    pub(super) fn load_impl(
        path: &Path,
        borrowed: Option<BorrowedW<'_>>,
        want_stride: usize,
    ) -> Result<Index> {
        let c = Arc::new(Container::open(path, format::KIND_INDEX)?);
        let bad = |m: String| Error::new(Status::BadFileFormat, format!("{}: {m}", path.display()));
        // ---- params
        let rec = c.section("PARAMS")?;
        if rec.len() < 4 {
            return Err(bad(format!("PARAMS section is {} bytes", rec.len())));
        }
        let u32_at = |o: usize| u32::from_le_bytes(rec[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(rec[o..o + 8].try_into().unwrap());
        let ver = u32_at(0);
        if ver > PARAMS_VERSION {
            return Err(bad(format!(
                "params version {ver} is newer than this library's ({PARAMS_VERSION}): upgrade lshk"
            )));
        }
        if ver != PARAMS_VERSION {
            return Err(bad(format!("unknown params version {ver}")));
        }
        if rec.len() < PARAMS_LEN {
            return Err(bad(format!(
                "PARAMS section is {} bytes, version {ver} needs {PARAMS_LEN}",
                rec.len()
            )));
        }
        let family = Family::from_u32(u32_at(4))
            .ok_or_else(|| bad(format!("params: unknown family {}", u32_at(4))))?;
        let storage = Storage::from_u32(u32_at(40))
            .ok_or_else(|| bad(format!("params: unknown storage {}", u32_at(40))))?;
        let transform = Transform::from_u32(u32_at(44))
            .ok_or_else(|| bad(format!("params: unknown transform {}", u32_at(44))))?;
        let (bits, tables, sparsity, bin_size) = (u32_at(8), u32_at(12), u32_at(16), u32_at(20));
        let seed = u64_at(24);
        let (range_bits, bucket_cap) = (u32_at(32), u32_at(36));
        let to_usize = |v: u64, what: &str| {
            usize::try_from(v).map_err(|_| bad(format!("params: {what} {v} does not fit")))
        };
        let rows = to_usize(u64_at(48), "rows")?;
        let dim = to_usize(u64_at(56), "dim")?;
        let w_stride = to_usize(u64_at(64), "w_stride")?;
        if want_stride != 0 && want_stride != w_stride {
            bail!(
                InvalidArgument,
                "w_stride is {want_stride} but the index records {w_stride} (pass 0 or that)"
            );
        }
        let hash_dim = to_usize(u64_at(72), "hash dim")?;
        let mips_u = f32::from_bits(u32_at(80));
        let flags = u32_at(84);
        if u32_at(92) != 0 || flags & !(FLAG_BIAS | FLAG_WEIGHTS | FLAG_GIVEN | FLAG_CODES) != 0 {
            return Err(bad("params: reserved bits are not zero".into()));
        }
        let code_rerank = u32_at(88);
        if (flags & FLAG_CODES != 0) != (code_rerank != 0) {
            return Err(bad(format!(
                "params: row codes flag {} with rerank {code_rerank}",
                flags & FLAG_CODES != 0
            )));
        }
        if rows == 0 || rows > MAX_ROWS || dim == 0 {
            return Err(bad(format!("params: rows {rows} or dim {dim} is invalid")));
        }
        if w_stride < dim {
            return Err(bad(format!("params: w_stride {w_stride} < dim {dim}")));
        }
        let want_hd = dim + (transform != Transform::None) as usize;
        if hash_dim != want_hd {
            return Err(bad(format!(
                "params: hash dimension {hash_dim}, expected {want_hd} for dim {dim} and this transform"
            )));
        }
        if !(mips_u.is_finite() && mips_u > 0.0) {
            return Err(bad(format!(
                "params: MIPS scale {mips_u} is not a positive number"
            )));
        }
        let stored = flags & FLAG_WEIGHTS != 0;
        if stored == (storage == Storage::BorrowedF32) {
            return Err(bad(format!(
                "params: storage {storage:?} but the weights-stored flag is {stored}"
            )));
        }
        if storage != Storage::BorrowedF32 && w_stride != dim {
            return Err(bad(format!(
                "params: stored weights have stride {w_stride}, not dim {dim}"
            )));
        }
        let label_state = match c.optional("LABELS") {
            Some(r) => Some(crate::source::labels::LabelState::parse(r).map_err(bad)?),
            None => None,
        };
        let given = flags & FLAG_GIVEN != 0;
        let resolved = Resolved {
            family,
            bits,
            tables,
            sparsity,
            bin_size,
            seed,
            range_bits,
            bucket_cap,
            storage,
            transform,
            threads: 0,
            given,
        };
        // ---- bias
        let bias = match (c.optional("BIAS"), flags & FLAG_BIAS != 0) {
            (Some(b), true) => {
                let b: &[f32] = cast_slice(b, "BIAS")?;
                if b.len() != rows {
                    return Err(bad(format!("BIAS holds {} values, rows = {rows}", b.len())));
                }
                if let Some(i) = b.iter().position(|v| !v.is_finite()) {
                    return Err(bad(format!("BIAS[{i}] is {}", b[i])));
                }
                Some(b.to_vec())
            }
            (None, false) => None,
            (Some(_), false) => {
                return Err(bad("a BIAS section but the params say no bias".into()))
            }
            (None, true) => {
                return Err(bad(
                    "the params say there is a bias but BIAS is missing".into()
                ))
            }
        };
        // ---- weights
        let cnt = rows
            .checked_mul(dim)
            .ok_or_else(|| bad("rows * dim overflows".into()))?;
        let w = if storage == Storage::BorrowedF32 {
            if c.optional("WEIGHTS").is_some() {
                return Err(bad("a WEIGHTS section in a file of borrowed weights".into()));
            }
            let w = borrowed.ok_or_else(|| {
                Error::new(
                    Status::InvalidArgument,
                    format!(
                        "{}: the index was built with borrowed weights, which are not stored in \
                         the file: pass the same W ({rows} x {dim}, row stride {w_stride}) as borrowed_w",
                        path.display()
                    ),
                )
            })?;
            let need = strided_len(rows, dim, w_stride, "borrowed_w")?;
            let w: &[f32] = match w {
                BorrowedW::Slice(w) => w,
                BorrowedW::Ptr(p, len) => {
                    check_w_len(need, len)?;
                    if !(p as usize).is_multiple_of(std::mem::align_of::<f32>()) {
                        bail!(InvalidArgument, "`borrowed_w` is not aligned to 4 bytes");
                    }
                    if need > isize::MAX as usize / 4 {
                        bail!(SizeOverflow, "borrowed W of {need} floats overflows");
                    }
                    // SAFETY: non-NULL, aligned, size fits; the caller
                    // promised `need` readable floats (load_raw's contract).
                    unsafe { std::slice::from_raw_parts(p, need) }
                }
            };
            if w.len() < need {
                bail!(
                    BufferTooSmall,
                    "borrowed W holds {} floats, {need} needed",
                    w.len()
                );
            }
            if let Some((r, j)) = first_non_finite(w, rows, dim, w_stride) {
                bail!(
                    NonFinite,
                    "borrowed W row {r} column {j} is {}",
                    w[r * w_stride + j]
                );
            }
            debug_assert_eq!(storage, Storage::BorrowedF32);
            // SAFETY: the contract of borrowed weights (load_with_weights /
            // load_raw): the caller keeps W alive and unchanged while the
            // index lives.
            unsafe { WStore::borrowed_f32(&w[..need], w_stride) }
        } else {
            if borrowed.is_some() {
                bail!(
                    InvalidArgument,
                    "{}: the file stores its weights; borrowed_w must be NULL",
                    path.display()
                );
            }
            let raw = c.section("WEIGHTS")?;
            let want = cnt
                .checked_mul(storage.elem_bytes())
                .ok_or_else(|| bad("weights size overflows".into()))?;
            if raw.len() != want {
                return Err(bad(format!(
                    "WEIGHTS holds {} bytes, rows * dim * {} = {want} expected",
                    raw.len(),
                    storage.elem_bytes()
                )));
            }
            let mut scales: &[f32] = &[];
            match storage {
                Storage::F32 => {
                    let v: &[f32] = cast_slice(raw, "WEIGHTS")?;
                    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                        return Err(bad(format!(
                            "WEIGHTS row {} column {} is {}",
                            i / dim,
                            i % dim,
                            v[i]
                        )));
                    }
                }
                Storage::Bf16 | Storage::F16 => {
                    let v: &[u16] = cast_slice(raw, "WEIGHTS")?;
                    let exp = if storage == Storage::Bf16 {
                        0x7f80
                    } else {
                        0x7c00
                    };
                    if let Some(i) = v.iter().position(|&x| x & exp == exp) {
                        return Err(bad(format!(
                            "WEIGHTS row {} column {} is not finite",
                            i / dim,
                            i % dim
                        )));
                    }
                }
                Storage::I8 => {
                    scales = row_scales(&c, "WSCALES", rows, &bad)?;
                }
                Storage::BorrowedF32 => unreachable!(),
            }
            let keep: crate::source::lsh::tables::KeepAlive = c.clone();
            // SAFETY: `raw` and `scales` are sections of the mapped
            // container `c`, which `keep` owns; the mapping is read-only.
            unsafe { WStore::mapped(storage, raw, scales, dim, &keep)? }
        };
        // ---- the candidate source (its family's sections, all checked)
        let src = (source_registration(family).load)(&crate::source::LoadInput {
            c: &c,
            rows,
            dim,
            hash_dim,
            has_bias: flags & FLAG_BIAS != 0,
            p: &resolved,
            labelled: label_state.is_some(),
            w: Some((w.weights(rows), w.stride)),
            bad: &bad,
        })?;
        // ---- row codes (the scorer's code stage)
        let codes = if code_rerank == 0 {
            if c.optional("CODES").is_some() || c.optional("CSCALES").is_some() {
                return Err(bad("CODES or CSCALES without the row codes flag".into()));
            }
            None
        } else {
            if family == Family::Ivf || storage == Storage::I8 {
                return Err(bad(format!(
                    "row codes on an index of family {family:?} and storage {storage:?}"
                )));
            }
            let raw = c.section("CODES")?;
            if raw.len() != cnt {
                return Err(bad(format!(
                    "CODES holds {} bytes, rows * dim = {cnt} expected",
                    raw.len()
                )));
            }
            // The kernels' bound takes |code| <= 127, as quantisation makes.
            if let Some(i) = raw.iter().position(|&b| b == 0x80) {
                return Err(bad(format!(
                    "CODES row {} column {} is -128",
                    i / dim,
                    i % dim
                )));
            }
            let s = row_scales(&c, "CSCALES", rows, &bad)?;
            let keep: crate::source::lsh::tables::KeepAlive = c.clone();
            // SAFETY: `raw` and `s` are sections of the mapped container
            // `c`, which `keep` owns; the mapping is read-only.
            let w = unsafe { WStore::mapped(Storage::I8, raw, s, dim, &keep)? };
            Some(codes::RowCodes {
                w,
                rerank: code_rerank,
            })
        };
        let mut idx = Index {
            rows,
            dim,
            hash_dim,
            mips_u,
            p: resolved,
            src,
            bias,
            w,
            codes,
            // The IVF lists own their LABELS section (read by their loader).
            labels: if family == Family::Ivf {
                None
            } else {
                label_state
            },
            dirty: Default::default(),
            vmax: 0.0,
            pool: Default::default(),
        };
        idx.vmax = idx.value_max();
        // The rows a build refuses (no query could be scored against them)
        // are refused here too: the caller's W, or a corrupt file's.
        crate::error::check_scorable(idx.vmax, dim, "the rows' values").map_err(|e| {
            if storage == Storage::BorrowedF32 {
                e
            } else {
                bad(e.message)
            }
        })?;
        Ok(idx)
    }
}

/// The section `name` of `rows` int8 row scales (`WSCALES`, `CSCALES`),
/// each finite and >= 0 (`bad` otherwise).
fn row_scales<'c>(
    c: &'c Container,
    name: &str,
    rows: usize,
    bad: &dyn Fn(String) -> Error,
) -> Result<&'c [f32]> {
    let s: &[f32] = cast_slice(c.section(name)?, name)?;
    if s.len() != rows {
        return Err(bad(format!(
            "{name} holds {} values, rows = {rows}",
            s.len()
        )));
    }
    if let Some(i) = s.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
        return Err(bad(format!("{name}[{i}] is {}", s[i])));
    }
    Ok(s)
}

/// The caller's W for a 0.2 IVF file that borrowed it: `(rows - 1) *
/// w_stride + dim` floats, the shape read from the file's record.
///
/// # Safety
/// `w` (non-NULL) points to that many floats.
unsafe fn borrowed_slice<'a>(
    c: &Container,
    w: *const f32,
    w_len: usize,
    w_stride: usize,
) -> Result<&'a [f32]> {
    let (rows, dim) = crate::source::ivf::Ivf::shape_in(c)?;
    if w_stride < dim {
        bail!(
            InvalidArgument,
            "w_stride is {w_stride}, less than dim = {dim}"
        );
    }
    if !w.is_aligned() {
        bail!(InvalidArgument, "`borrowed_w` is not aligned to 4 bytes");
    }
    let need = strided_len(rows, dim, w_stride, "borrowed_w")?;
    check_w_len(need, w_len)?;
    // SAFETY: non-NULL, aligned; the caller's contract gives `need` floats.
    Ok(unsafe { std::slice::from_raw_parts(w, need) })
}

/// Refuses a borrowed W the caller says is shorter than the file's shape
/// needs (`have`: `usize::MAX` when the caller did not say).
fn check_w_len(need: usize, have: usize) -> Result<()> {
    if have < need {
        bail!(
            BufferTooSmall,
            "borrowed_w holds {have} floats; the file's shape needs {need} \
             ((rows - 1) * w_stride + dim)"
        );
    }
    Ok(())
}
