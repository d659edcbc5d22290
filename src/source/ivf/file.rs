//! Saving and loading an IVF index (lshk's container: CRC-checked
//! sections, atomic replace; see docs/ivf.md for the sections).

use super::*;

impl Ivf {
    /// Saves the index (lshk's container: CRC-checked sections, atomic
    /// replace). A borrowed W is not saved: [`Ivf::load_borrowed`] takes it
    /// again.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut keep = Vec::new();
        let secs = self.file_sections(&mut keep);
        format::write_file(path, format::KIND_IVF, &secs)
    }

    /// The index's sections (an IVF file's, or an index file's whose
    /// candidate source is the IVF); `keep` holds the bytes they borrow.
    pub(crate) fn file_sections<'a>(&'a self, keep: &'a mut Vec<Vec<u8>>) -> Vec<SectionOut<'a>> {
        let base = keep.len();
        keep.push(self.params_record());
        // The index keeps only the centroids' int8 codes (CENTQ, CENTQS),
        // which a load takes as they are. CENTROID holds them dequantised
        // (`scale * code`) so that a reader older than these sections, which
        // quantises CENTROID, still opens the file.
        keep.push(format::as_bytes(&self.dequantised_centroids()).to_vec());
        if let Some(l) = &self.labels {
            keep.push(l.record());
            keep.push(format::as_bytes(&self.home_positions()).to_vec());
        }
        let keep: &'a Vec<Vec<u8>> = keep;
        let mut secs = vec![
            SectionOut::new("IVFPARAM", vec![&keep[base]]),
            SectionOut::new("CENTROID", vec![&keep[base + 1]]),
            SectionOut::new("CENTQ", vec![format::as_bytes(self.cq.codes())]),
            SectionOut::new("CENTQS", vec![format::as_bytes(self.cq.scales())]),
            SectionOut::new("CBIAS", vec![format::as_bytes(&self.cbias)]),
            SectionOut::new("LSPREAD", vec![format::as_bytes(&self.spread)]),
            SectionOut::new("LOFFS", vec![format::as_bytes(&self.offsets)]),
            SectionOut::new("LIDS", vec![format::as_bytes(&self.ids)]),
        ];
        if !self.bias_pos.is_empty() {
            secs.push(SectionOut::new(
                "PBIAS",
                vec![format::as_bytes(&self.bias_pos)],
            ));
        }
        if let Exact::Owned(v) = &self.exact {
            secs.push(SectionOut::new("PROWS", vec![format::as_bytes(v)]));
        }
        if let Some(c) = &self.codes {
            secs.push(SectionOut::new("QCODES", vec![format::as_bytes(c.codes())]));
            secs.push(SectionOut::new(
                "QSCALES",
                vec![format::as_bytes(c.scales())],
            ));
        }
        if let Some(sh) = &self.shape {
            secs.push(SectionOut::new(
                "LDIRQ",
                vec![format::as_bytes(sh.dirs.codes())],
            ));
            secs.push(SectionOut::new(
                "LDIRQS",
                vec![format::as_bytes(sh.dirs.scales())],
            ));
            secs.push(SectionOut::new(
                "LSHAPE",
                vec![format::as_bytes(&sh.kappa), format::as_bytes(&sh.far)],
            ));
        }
        if self.labels.is_some() {
            secs.push(SectionOut::new("LABELS", vec![&keep[base + 2]]));
            secs.push(SectionOut::new("LHOME", vec![&keep[base + 3]]));
        }
        if let Some(pq) = &self.pq {
            secs.push(SectionOut::new(
                "PQCENT",
                vec![format::as_bytes(pq.codebook().centroids())],
            ));
            secs.push(SectionOut::new("PQCODES", vec![pq.packed()]));
            if !pq.errors().is_empty() {
                secs.push(SectionOut::new(
                    "PQERR",
                    vec![format::as_bytes(pq.errors())],
                ));
            }
        }
        secs
    }

    fn params_record(&self) -> Vec<u8> {
        // Version 1 (48 bytes) unless the codes are PQ4 or PQ4_I8, whose
        // record adds pq_eta (version 2, 56 bytes): int8 and exact files
        // stay readable by 0.2.0. (A PQ4_I8 file is refused by readers
        // older than that code: "codes value 3".)
        let pq4 = self.pq.is_some();
        let mut r = Vec::with_capacity(64);
        for v in [
            if pq4 { 2 } else { IVF_PARAMS_VERSION },
            self.rows as u32,
            self.dim as u32,
            self.nlist as u32,
            self.params.iters,
            self.params.train_rows,
            self.params.codes as u32,
            u32::from(!self.bias_pos.is_empty()),
            u32::from(self.borrows_weights()),
            self.params.pq_m,
        ] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend_from_slice(&self.params.seed.to_le_bytes());
        if pq4 {
            r.extend_from_slice(&self.params.pq_eta.to_bits().to_le_bytes());
            r.extend_from_slice(&0u32.to_le_bytes());
        }
        r
    }

    /// Loads an index saved with its own f32 rows.
    pub fn load(path: &Path) -> Result<Ivf> {
        // SAFETY: no W to borrow.
        unsafe { Self::load_impl(path, None) }
    }

    /// Loads an index built with [`Ivf::build_borrowed`], borrowing `w`
    /// again (`rows` rows at `w_stride`; it must be the W it was built on).
    ///
    /// # Safety
    /// As [`Ivf::build_borrowed`].
    pub unsafe fn load_borrowed(path: &Path, w: &[f32], w_stride: usize) -> Result<Ivf> {
        // SAFETY: forwarded: the caller keeps `w` alive and unchanged.
        unsafe { Self::load_impl(path, Some((w, w_stride))) }
    }

    /// # Safety
    /// A given `w` stays alive and unchanged while the index lives (as
    /// [`Ivf::load_borrowed`]).
    unsafe fn load_impl(path: &Path, w: Option<(&[f32], usize)>) -> Result<Ivf> {
        let c = format::Container::open(path, format::KIND_IVF)?;
        // SAFETY: forwarded (a given `w` outlives the index).
        unsafe { Self::from_container(&c, w.map(|(w, s)| RowsIn::F32(w, s))) }
    }

    /// Whether the lists of `c` were built on a borrowed W (the `IVFPARAM`
    /// record's flag; the record itself is checked by
    /// [`Ivf::from_container`]).
    /// rows and dim of an IVF file's record, checked against the sizes of
    /// the LIDS and CENTROID sections (and for a file that borrows W, of
    /// QCODES with int8 codes or PQCENT with PQ4 codes), so that sizes
    /// computed from them cannot overflow and a borrowed W is never read
    /// beyond the shape the file really holds.
    pub(crate) fn shape_in(c: &format::Container) -> Result<(usize, usize)> {
        let rec = c.section("IVFPARAM")?;
        // Version 1 (48 bytes) or the PQ4 record, version 2 (56 bytes).
        if rec.len() != 48 && rec.len() != 56 {
            bail!(
                BadFileFormat,
                "IVFPARAM is {} bytes (48 or 56 expected)",
                rec.len()
            );
        }
        let u = |i: usize| u32::from_le_bytes(rec[4 * i..4 * i + 4].try_into().unwrap());
        let pq4 = u(6) == Codes::Pq4 as u32;
        let (rows, dim, nlist) = (u(1) as usize, u(2) as usize, u(3) as usize);
        let borrowed = match u(8) {
            0 => false,
            1 => true,
            _ => bail!(BadFileFormat, "IVFPARAM: borrow flag {}", u(8)),
        };
        let lids = c.section("LIDS")?.len();
        let cent = c.section("CENTROID")?.len();
        // One id per list position: the rows, or (label-aware lists, with a
        // LABELS section) any whole number of positions, the rows then being
        // LHOME's length.
        let labels = c.optional("LABELS").is_some();
        let npos = if labels { lids / 4 } else { rows };
        // Label-aware files hold the row count in LHOME's size instead.
        let home_ok = !labels || c.section("LHOME")?.len() as u128 == rows as u128 * 4;
        let (qcodes, want_q) = match (borrowed, pq4) {
            (false, _) => (0, 0),
            (true, false) => (
                c.section("QCODES")?.len() as u128,
                npos as u128 * dim.div_ceil(64) as u128 * 64,
            ),
            (true, true) => (c.section("PQCENT")?.len() as u128, 64 * dim as u128),
        };
        if rows == 0
            || dim == 0
            || nlist == 0
            || lids as u128 != npos as u128 * 4
            || !home_ok
            || cent as u128 != nlist as u128 * dim as u128 * 4
            || qcodes != want_q
        {
            bail!(
                BadFileFormat,
                "IVFPARAM's {rows} rows of dim {dim} in {nlist} lists disagree with \
                 the sizes of the LIDS ({lids} bytes), CENTROID ({cent} bytes) or QCODES \
                 / PQCENT sections"
            );
        }
        let _ = borrowed;
        Ok((rows, dim))
    }

    pub(crate) fn borrows_w_in(c: &format::Container) -> Result<bool> {
        let rec = c.section("IVFPARAM")?;
        Ok(rec.get(4 * BORROWED_WORD..4 * BORROWED_WORD + 4) == Some(&1u32.to_le_bytes()[..]))
    }

    /// The index held by the IVF sections of `c` (an IVF file, or an index
    /// file whose candidate source is the IVF), every section checked; `w`
    /// is the borrowed W of an index built on one.
    ///
    /// # Safety
    /// A given `w` stays alive and unchanged while the index lives.
    pub(crate) unsafe fn from_container(
        c: &format::Container,
        w: Option<RowsIn<'_>>,
    ) -> Result<Ivf> {
        let rec = c.section("IVFPARAM")?;
        if rec.len() < 4 {
            bail!(BadFileFormat, "IVFPARAM is {} bytes", rec.len());
        }
        let u = |i: usize| u32::from_le_bytes(rec[4 * i..4 * i + 4].try_into().unwrap());
        let want_len = match u(0) {
            1 => IVF_PARAMS_LEN,
            2 => IVF_PARAMS_LEN + 8,
            v => bail!(BadFileFormat, "IVF parameter record version {v}"),
        };
        if rec.len() != want_len {
            bail!(
                BadFileFormat,
                "IVFPARAM version {} is {} bytes, {want_len} expected",
                u(0),
                rec.len()
            );
        }
        // Version 2 is the PQ4 / PQ4_I8 record (with pq_eta), version 1 the
        // others.
        let pq_eta = if u(0) == 2 {
            f32::from_bits(u(12))
        } else {
            1.0
        };
        let (rows, dim, nlist) = (u(1) as usize, u(2) as usize, u(3) as usize);
        let codes = Codes::from_u32(u(6))
            .ok_or_else(|| Error::new(Status::BadFileFormat, format!("codes value {}", u(6))))?;
        let (has_bias, borrowed, pq_m) = (u(7), u(BORROWED_WORD), u(9));
        if rows == 0
            || dim == 0
            || nlist == 0
            || nlist > rows
            || has_bias > 1
            || borrowed > 1
            || codes.has_pq() != (pq_m != 0)
            || codes.has_pq() != (u(0) == 2)
            || !(pq_eta.is_finite() && pq_eta >= 1.0)
            || (u(0) == 2 && u(13) != 0)
            || (codes.has_pq() && (pq::resolve_m(dim, pq_m).is_err() || rows < 16))
        {
            bail!(BadFileFormat, "IVFPARAM holds an impossible shape or flag");
        }
        let seed = u64::from_le_bytes(rec[40..48].try_into().unwrap());
        let params = IvfParams {
            nlist: nlist as u32,
            iters: u(4),
            train_rows: u(5),
            codes,
            pq_m,
            pq_eta,
            threads: 0,
            seed,
        };
        // A section of exactly `n` little-endian 4-byte values.
        let words = |name: &str, n: usize| -> Result<std::slice::ChunksExact<'_, u8>> {
            let b = c.section(name)?;
            if n.checked_mul(4) != Some(b.len()) {
                bail!(
                    BadFileFormat,
                    "{name} is {} bytes, {n} 4-byte values expected",
                    b.len()
                );
            }
            Ok(b.chunks_exact(4))
        };
        // Float sections: finite, and within the range a build can produce
        // (a CRC proves integrity, not validity). Rows and biases stay within
        // the build's row limit; the derived values (list spreads, PQ
        // centroids of residuals) within a multiple of it.
        let row_lim = crate::error::row_value_limit(dim);
        let derived_lim = 4.0 * (dim as f64 + 2.0).sqrt() * row_lim;
        let f32s_in = |name: &str, n: usize, lim: f64| -> Result<Vec<f32>> {
            let v: Vec<f32> = words(name, n)?
                .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
                .collect();
            if let Some(i) = v
                .iter()
                .position(|x| !x.is_finite() || f64::from(x.abs()) > lim)
            {
                bail!(
                    BadFileFormat,
                    "{name}[{i}] is {:e}: outside the range an index of dim {dim} holds (|value| <= {lim:.3e})",
                    v[i]
                );
            }
            Ok(v)
        };
        let f32s = |name: &str, n: usize| f32s_in(name, n, derived_lim);
        let u32s = |name: &str, n: usize| -> Result<Vec<u32>> {
            Ok(words(name, n)?
                .map(|x| u32::from_le_bytes(x.try_into().unwrap()))
                .collect())
        };
        // Size-checked here; converted only for a file without CENTQ (below).
        let centroid_words = words("CENTROID", checked_mul(nlist, dim, "nlist * dim")?)?;
        // Int8 rows stored as a codes section and a scales section (the
        // list codes QCODES/QSCALES, the centroid codes CENTQ/CENTQS).
        let qrows = |codes: &str, scales: &str, n: usize| -> Result<QRows> {
            let sc = f32s(scales, n)?;
            let b = format::cast_slice::<i8>(c.section(codes)?, codes)?;
            QRows::from_parts(n, dim, b, &sc).map_err(|e| {
                Error::new(
                    Status::BadFileFormat,
                    format!("{codes}/{scales}: {}", e.message),
                )
            })
        };
        let cbias = f32s("CBIAS", nlist)?;
        let spread = f32s("LSPREAD", nlist)?;
        let offsets = u32s("LOFFS", nlist + 1)?;
        // Label-trained lists may hold a row in several lists (module
        // `labels`): their positions outnumber the rows.
        let labels = match c.optional("LABELS") {
            Some(r) => Some(Box::new(
                LabelState::parse(r).map_err(|m| Error::new(Status::BadFileFormat, m))?,
            )),
            None => None,
        };
        let npos = offsets[nlist] as usize;
        if offsets[0] != 0
            || (labels.is_none() && npos != rows)
            || offsets.windows(2).any(|p| p[0] > p[1])
        {
            bail!(BadFileFormat, "LOFFS is not a partition of the rows");
        }
        if labels.is_some() && codes.has_pq() {
            bail!(BadFileFormat, "LABELS with PQ4 codes");
        }
        let ids = u32s("LIDS", npos)?;
        if labels.is_some() {
            if let Some(i) = ids.iter().position(|&r| r as usize >= rows) {
                bail!(BadFileFormat, "LIDS[{i}] is {}, not a row", ids[i]);
            }
            // One value per row (so the file's row count is checked by a
            // section size, as LIDS does without labels), each the row's
            // first position or u32::MAX.
            if u32s("LHOME", rows)? != home_of(&ids, rows) {
                bail!(BadFileFormat, "LHOME does not match LIDS");
            }
        } else {
            let mut seen = vec![false; rows];
            for &r in &ids {
                if r as usize >= rows || std::mem::replace(&mut seen[r as usize], true) {
                    bail!(BadFileFormat, "LIDS is not a permutation of the rows");
                }
            }
        }
        let bias_pos = if has_bias == 1 {
            f32s_in("PBIAS", npos, row_lim)?
        } else {
            Vec::new()
        };
        let (w, narrow) = match w {
            Some(RowsIn::Narrow(n, s)) => (None, Some(RowsIn::Narrow(n, s))),
            Some(RowsIn::F32(w, s)) => (Some((w, s)), None),
            None => (None, None),
        };
        let exact = match (borrowed == 1, w) {
            // Attached below (Ivf::use_rows), once the lists are read.
            (true, None) if narrow.is_some() => Exact::Owned(Vec::new()),
            (false, None) => Exact::Owned(f32s_in(
                "PROWS",
                checked_mul(npos, dim, "positions * dim")?,
                row_lim,
            )?),
            (true, Some((w, stride))) => {
                crate::error::check_layer_buffers(w, None, rows, dim, stride)?;
                crate::error::check_finite_rows(w, rows, dim, stride, "w")?;
                crate::error::check_row_range(w, None, rows, dim, stride)?;
                let len = strided_len(rows, dim, stride, "w")?;
                Exact::Borrowed {
                    // SAFETY: load_borrowed's contract: the caller keeps W
                    // alive and unchanged while the index lives.
                    w: unsafe { Buf::borrowed(&w[..len]) },
                    stride,
                }
            }
            (true, None) => bail!(
                InvalidArgument,
                "this index was built on a borrowed W: load it with load_borrowed"
            ),
            (false, Some(_)) => bail!(
                InvalidArgument,
                "this index holds its own rows: load it without W"
            ),
        };
        let pq = if codes.has_pq() {
            let cent = f32s("PQCENT", checked_mul(16, dim, "16 * dim")?)?;
            let mut lp =
                pq::ListPq::from_parts(dim, pq_m as usize, &cent, c.section("PQCODES")?, &offsets)?;
            // The rows' coding errors (files written before they were
            // kept have none: their shortlists rank by the 4-bit scores).
            if c.optional("PQERR").is_some() {
                let err = f32s("PQERR", npos)?;
                if let Some(i) = err.iter().position(|&e| e < 0.0) {
                    bail!(
                        BadFileFormat,
                        "PQERR[{i}] is {:e}: an error norm is >= 0",
                        err[i]
                    );
                }
                lp.set_errors(err);
            }
            Some(Box::new(lp))
        } else {
            None
        };
        let codes = if codes.has_i8() {
            Some(qrows("QCODES", "QSCALES", npos)?)
        } else {
            None
        };
        // A file with CENTQ holds the int8 codes the lists were ranked by
        // (CENTQ, CENTQS); a file without it (an older writer's) holds only
        // the f32 centroids, quantised here exactly as the build did.
        let cq = if c.optional("CENTQ").is_some() {
            qrows("CENTQ", "CENTQS", nlist)?
        } else {
            let centroids: Vec<f32> = centroid_words
                .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
                .collect();
            qdot::quantize_rows(&centroids, nlist, dim, dim).map_err(|e| {
                Error::new(Status::BadFileFormat, format!("CENTROID: {}", e.message))
            })?
        };
        // The lists' shapes (files written before them have none: their
        // queries rank lists by LSPREAD alone).
        let shape = if c.optional("LSHAPE").is_some() {
            let nd = checked_mul(nlist, LIST_DIRS, "nlist * LIST_DIRS")?;
            let dirs = qrows("LDIRQ", "LDIRQS", nd)?;
            let ks = f32s("LSHAPE", checked_mul(2, nlist, "2 * nlist")?)?;
            if let Some(i) = ks.iter().position(|&e| !(e >= 0.0 && e.is_finite())) {
                bail!(
                    BadFileFormat,
                    "LSHAPE[{i}] is {:e}: a list's shape terms are finite and >= 0",
                    ks[i]
                );
            }
            Some(Box::new(Shape {
                dirs,
                kappa: ks[..nlist].to_vec(),
                far: ks[nlist..].to_vec(),
            }))
        } else {
            None
        };
        if codes.is_none() && pq.is_none() && matches!(exact, Exact::Borrowed { .. }) {
            bail!(BadFileFormat, "a borrowed IVF index must have codes");
        }
        let mut ix = Ivf {
            lpan: ListPanels::new(nlist, codes.is_some()),
            dpan: std::sync::OnceLock::new(),
            cpan: centroid_panels(&cq)?,
            cnib: centroid_nibbles(&cq, &cbias, &spread)?,
            cq,
            pq,
            rows,
            dim,
            nlist,
            params,
            cbias,
            spread,
            offsets,
            ids,
            bias_pos,
            exact,
            codes,
            shape,
            labels,
            vmax: 0.0,
        };
        ix.vmax = ix.value_max();
        if let Some(n) = narrow {
            if borrowed != 1 {
                bail!(
                    InvalidArgument,
                    "this index holds its own rows: load it without W"
                );
            }
            // SAFETY: this function's contract (the index's rows outlive
            // the lists).
            unsafe { ix.use_rows(n) }?;
        }
        // Code scales and centroids stand for row values.
        if f64::from(ix.vmax) > derived_lim {
            bail!(
                BadFileFormat,
                "the codes stand for values up to {:e}: outside the range an index of dim {dim} holds",
                ix.vmax
            );
        }
        Ok(ix)
    }
}

impl Ivf {
    /// The centroids' `w` part as the index knows it: `scale * code` per
    /// list (what CENTROID holds in a saved file).
    pub(super) fn dequantised_centroids(&self) -> Vec<f32> {
        let (dim, dp) = (self.dim, self.cq.dim_pad());
        let mut v = Vec::with_capacity(self.nlist * dim);
        for (l, &s) in self.cq.scales().iter().enumerate() {
            v.extend(
                self.cq.codes()[l * dp..l * dp + dim]
                    .iter()
                    .map(|&c| s * c as f32),
            );
        }
        v
    }
}

/// Per row, its first list position, or `u32::MAX` when it is in no list.
pub(super) fn home_of(ids: &[u32], rows: usize) -> Vec<u32> {
    let mut h = vec![u32::MAX; rows];
    for (p, &r) in ids.iter().enumerate().rev() {
        h[r as usize] = p as u32;
    }
    h
}

impl Ivf {
    fn home_positions(&self) -> Vec<u32> {
        home_of(&self.ids, self.rows)
    }
}

const IVF_PARAMS_VERSION: u32 = 1;
/// The `IVFPARAM` word (u32 index) of the borrowed-W flag.
const BORROWED_WORD: usize = 8;
const IVF_PARAMS_LEN: usize = 48;
