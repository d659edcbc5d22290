//! Answering queries: greedy descent of the upper levels, the level-0
//! walk (exact or int8 on the walk records), the re-rank and the search API
//! (module docs of `graph`).

use super::*;

/// Runs `$body` with `$v` bound to the [`View`] of the graph's rows (the
/// one match on the storage, once per query).
macro_rules! with_view {
    ($g:expr, $ks:expr, |$v:ident| $body:expr) => {
        match &$g.data {
            Data::F32(w) => {
                let $v = View {
                    rows: Rows {
                        w,
                        dim: $g.sdim,
                        scales: &[],
                    },
                    dot: $ks.f32,
                };
                $body
            }
            Data::Bf16(w) => {
                let $v = View {
                    rows: Rows {
                        w,
                        dim: $g.sdim,
                        scales: &[],
                    },
                    dot: $ks.bf16,
                };
                $body
            }
            Data::I8 { w, scales } => {
                let $v = View {
                    rows: Rows {
                        w,
                        dim: $g.sdim,
                        scales,
                    },
                    dot: $ks.i8,
                };
                $body
            }
        }
    };
}

impl Graph {
    /// The query options' check (`ef >= 1`; the int8 walk needs
    /// `dim <= MAX_WALK_DIM`).
    pub(crate) fn check_search(&self, sp: &SearchParams) -> Result<()> {
        if sp.ef == 0 {
            bail!(InvalidArgument, "ef must be >= 1");
        }
        if sp.walk == Walk::Int8 && self.walk.is_none() {
            bail!(
                InvalidArgument,
                "the int8 walk needs dim <= {MAX_WALK_DIM}; this graph has dim {}",
                self.dim
            );
        }
        Ok(())
    }

    /// The candidates an index re-scores for `nq` checked queries (`q` row
    /// `i` at `i * q_stride`, `dim` finite floats) on tier `tier`: per
    /// query the pool's best `rerank` (0 = the whole pool, at least `k`)
    /// by the walk's own score ([`Walk::Exact`]: the stored rows';
    /// [`Walk::Int8`]: the int8 score), ids ascending, CSR in `out`. Exactly
    /// the rows [`Graph::search_with`] re-scores with [`Walk::Int8`], and
    /// with [`Walk::Exact`] the pool its top-k comes from. Returns the rows
    /// scored (`GraphStats::distances`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn candidates_into(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out: &mut crate::source::GatherResult,
    ) -> Result<u64> {
        isa::check_supported(tier)?;
        self.check_search(sp)?;
        out.ids.clear();
        out.counts.clear();
        out.offsets.clear();
        out.offsets.push(0);
        let ks = kg::kernels(tier);
        let distances = SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            s.prepare(self.rows, self.sdim);
            s.distances = 0;
            for i in 0..nq {
                let h = &q[i * q_stride..i * q_stride + self.dim];
                with_view!(self, ks, |v| match (sp.walk, &self.walk) {
                    (Walk::Int8, Some(wr)) => self.walk_pool(&v, wr, ks.walk, h, k, sp, s),
                    _ => self.exact_pool(&v, h, k, sp.ef, s),
                });
                let take = Self::rerank_take(sp, k, s.sorted.len());
                let at = out.ids.len();
                out.ids.extend(s.sorted[..take].iter().map(|c| c.id));
                out.ids[at..].sort_unstable();
                out.offsets.push(out.ids.len());
            }
            s.distances
        });
        Ok(distances)
    }
}

impl Graph {
    /// Greedy descent from the entry point through levels
    /// `max_level .. stop` (exclusive), returning the node reached.
    pub(super) fn descend<T>(
        &self,
        view: &View<'_, T>,
        q: &[f32],
        stop: usize,
        s: &mut Scratch,
    ) -> Cand {
        let e = self.entry;
        s.out.clear();
        s.out.push(0.0);
        view.score(q, &[e], &mut s.out[..1]);
        s.distances += 1;
        let mut cur = Cand { s: s.out[0], id: e };
        let mut lev = self.max_level;
        while lev >= stop && lev > 0 {
            loop {
                let links = self.links(cur.id as usize, lev);
                if links.is_empty() {
                    break;
                }
                s.out.clear();
                s.out.resize(links.len(), 0.0);
                view.score(q, links, &mut s.out);
                s.distances += links.len() as u64;
                let mut best = cur;
                for (&id, &sc) in links.iter().zip(&s.out) {
                    let c = Cand { s: sc, id };
                    if c > best {
                        best = c;
                    }
                }
                if best.id == cur.id {
                    break;
                }
                cur = best;
            }
            lev -= 1;
        }
        cur
    }

    /// Best-first search of level `lev` from `ep` with a pool of `ef`;
    /// leaves the pool in `s.pool`.
    pub(super) fn search_layer<T>(
        &self,
        view: &View<'_, T>,
        q: &[f32],
        lev: usize,
        ep: Cand,
        ef: usize,
        s: &mut Scratch,
    ) {
        s.next_gen();
        let gen = s.gen;
        s.cand.clear();
        s.pool.clear();
        s.visited[ep.id as usize] = gen;
        s.cand.push(ep);
        s.pool.push(std::cmp::Reverse(ep));
        while let Some(c) = s.cand.pop() {
            let worst = s.pool.peek().unwrap().0;
            if c < worst && s.pool.len() >= ef {
                break;
            }
            // The next candidate's links are needed after this one's rows:
            // start fetching them now.
            if let Some(n) = s.cand.peek() {
                self.prefetch_links(n.id as usize, lev);
            }
            s.ids.clear();
            for &nb in self.links(c.id as usize, lev) {
                let v = &mut s.visited[nb as usize];
                if *v != gen {
                    *v = gen;
                    s.ids.push(nb);
                }
            }
            if s.ids.is_empty() {
                continue;
            }
            s.out.clear();
            s.out.resize(s.ids.len(), 0.0);
            view.score(q, &s.ids, &mut s.out);
            s.distances += s.ids.len() as u64;
            for (&id, &sc) in s.ids.iter().zip(&s.out) {
                let n = Cand { s: sc, id };
                if s.pool.len() < ef {
                    s.cand.push(n);
                    s.pool.push(std::cmp::Reverse(n));
                } else if n > s.pool.peek().unwrap().0 {
                    s.cand.push(n);
                    s.pool.push(std::cmp::Reverse(n));
                    s.pool.pop();
                }
            }
        }
    }

    /// The int8 walk of level 0 from `ep` with a pool of `ef` (the best-
    /// first search of [`Graph::search_layer`], scoring with the walk
    /// kernel on the records); leaves the pool in `s.pool`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk_layer(
        &self,
        wr: &WalkRecs,
        wk: kg::WalkFn,
        qs: f32,
        corr: i32,
        ep: u32,
        ef: usize,
        s: &mut Scratch,
    ) {
        let recs = kg::Recs {
            base: wr.bytes(),
            stride: wr.stride,
            dim: wr.dpad,
        };
        let slots = 2 * self.params.m as usize;
        let q8 = std::mem::take(&mut s.q8);
        let score = |raw: i32, id: u32| -> f32 {
            let [sc, b] = wr.side[id as usize];
            raw.wrapping_sub(corr) as f32 * (sc * qs) + b
        };
        s.next_gen();
        let gen = s.gen;
        s.cand.clear();
        s.pool.clear();
        s.visited[ep as usize] = gen;
        s.raw.clear();
        s.raw.push(0);
        // SAFETY: ids < rows (graph invariant), records hold rows * stride
        // bytes, dpad a nonzero multiple of 64 <= stride, q8 holds at
        // least dpad bytes (Scratch::prepare), the tier was checked.
        unsafe { wk(&recs, &q8, &[ep], &mut s.raw[..1]) };
        s.distances += 1;
        let e = Cand {
            s: score(s.raw[0], ep),
            id: ep,
        };
        s.cand.push(e);
        s.pool.push(std::cmp::Reverse(e));
        while let Some(c) = s.cand.pop() {
            let worst = s.pool.peek().unwrap().0;
            if c < worst && s.pool.len() >= ef {
                break;
            }
            if let Some(n) = s.cand.peek() {
                crate::kernels::prefetch(
                    recs.base[n.id as usize * wr.stride + wr.dpad..].as_ptr(),
                    4 * slots,
                );
            }
            s.ids.clear();
            for &nb in wr.links(c.id as usize, slots) {
                if nb == u32::MAX {
                    break;
                }
                let v = &mut s.visited[nb as usize];
                if *v != gen {
                    *v = gen;
                    s.ids.push(nb);
                    // Its scale and bias are read after the kernel.
                    crate::kernels::prefetch(wr.side[nb as usize..].as_ptr().cast(), 8);
                }
            }
            if s.ids.is_empty() {
                continue;
            }
            s.raw.clear();
            s.raw.resize(s.ids.len(), 0);
            // SAFETY: as above (the ids are links: < rows).
            unsafe { wk(&recs, &q8, &s.ids, &mut s.raw) };
            s.distances += s.ids.len() as u64;
            for (&id, &raw) in s.ids.iter().zip(&s.raw) {
                let n = Cand {
                    s: score(raw, id),
                    id,
                };
                if s.pool.len() < ef || n > s.pool.peek().unwrap().0 {
                    // A kept node may be expanded soon: start fetching
                    // its links (the record's second part) now.
                    crate::kernels::prefetch(
                        recs.base[id as usize * wr.stride + wr.dpad..].as_ptr(),
                        4 * slots,
                    );
                    s.cand.push(n);
                    s.pool.push(std::cmp::Reverse(n));
                    if s.pool.len() > ef {
                        s.pool.pop();
                    }
                }
            }
        }
        s.q8 = q8;
    }

    /// The int8 walk's pool of one query: exact greedy descent of the
    /// upper levels, int8 walk of level 0; leaves the pool best first (by
    /// int8 score) in `s.sorted` and the padded f32 query in `s.q`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk_pool<T>(
        &self,
        view: &View<'_, T>,
        wr: &WalkRecs,
        wk: kg::WalkFn,
        h: &[f32],
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
    ) {
        let mut q = std::mem::take(&mut s.q);
        q[..self.dim].copy_from_slice(h);
        q[self.dim] = 1.0;
        q[self.dim + 1..self.sdim].fill(0.0);
        // The int8 query: one scale, codes round(h / scale) in -127..=127.
        let amax = h.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
        let qs = amax / 127.0;
        // Round to nearest even by adding and subtracting 1.5 * 2^23
        // (exact for |x| <= 2^22; here |x| <= 127): no libm call.
        const RND: f32 = 12_582_912.0;
        let mut qsum = 0i32;
        for (t, c) in s.q8[..wr.dpad].iter_mut().enumerate() {
            *c = if t < self.dim && qs > 0.0 {
                ((h[t] / qs + RND) - RND).clamp(-127.0, 127.0) as i8
            } else {
                0
            };
            qsum += *c as i32;
        }
        let corr = qsum.wrapping_mul(128);
        let ep = self.descend(view, &q[..self.sdim], 1, s);
        s.q = q;
        let ef = sp.ef.max(k);
        self.walk_layer(wr, wk, qs, corr, ep.id, ef, s);
        // The pool by int8 score, best first.
        s.sorted.clear();
        s.sorted.extend(s.pool.drain().map(|r| r.0));
        s.sorted.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// How many of a pool of `len` the re-rank takes: `rerank` (0 = all),
    /// at least `k`.
    fn rerank_take(sp: &SearchParams, k: usize, len: usize) -> usize {
        match sp.rerank {
            0 => len,
            r => r.max(k).min(len),
        }
    }

    /// One query with the int8 walk: [`Graph::walk_pool`], then exact
    /// re-rank of the pool's best `rerank` (0 = all) with the stored rows.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn query_walk<T>(
        &self,
        view: &View<'_, T>,
        wr: &WalkRecs,
        wk: kg::WalkFn,
        h: &[f32],
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        self.walk_pool(view, wr, wk, h, k, sp, s);
        let take = Self::rerank_take(sp, k, s.sorted.len());
        s.ids.clear();
        s.ids.extend(s.sorted[..take].iter().map(|c| c.id));
        s.out.clear();
        s.out.resize(take, 0.0);
        view.score(&s.q[..self.sdim], &s.ids, &mut s.out);
        s.distances += take as u64;
        s.sorted.clear();
        s.sorted.extend(
            s.ids
                .iter()
                .zip(&s.out)
                .map(|(&id, &sc)| Cand { s: sc, id }),
        );
        s.sorted.sort_unstable_by(|a, b| b.cmp(a));
        self.write_top(s, out_ids, out_scores);
    }

    pub(super) fn write_top(&self, s: &Scratch, out_ids: &mut [u32], out_scores: &mut [f32]) {
        for (t, (oi, os)) in out_ids.iter_mut().zip(out_scores.iter_mut()).enumerate() {
            match s.sorted.get(t) {
                Some(c) => {
                    *oi = c.id;
                    *os = c.s;
                }
                None => {
                    *oi = TOPK_PAD_ID;
                    *os = f32::NEG_INFINITY;
                }
            }
        }
    }

    /// The exact walk's pool of one query, best first, in `s.sorted`.
    pub(super) fn exact_pool<T>(
        &self,
        view: &View<'_, T>,
        h: &[f32],
        k: usize,
        ef: usize,
        s: &mut Scratch,
    ) {
        let mut q = std::mem::take(&mut s.q);
        q[..self.dim].copy_from_slice(h);
        q[self.dim] = 1.0;
        q[self.dim + 1..self.sdim].fill(0.0);
        let ep = self.descend(view, &q[..self.sdim], 1, s);
        self.search_layer(view, &q[..self.sdim], 0, ep, ef.max(k), s);
        s.q = q;
        s.sorted.clear();
        s.sorted.extend(s.pool.drain().map(|r| r.0));
        s.sorted.sort_unstable_by(|a, b| b.cmp(a));
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn query_one<T>(
        &self,
        view: &View<'_, T>,
        h: &[f32],
        k: usize,
        ef: usize,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        self.exact_pool(view, h, k, ef, s);
        self.write_top(s, out_ids, out_scores);
    }

    // ------------------------------------------------------------ search API

    /// The approximate top-`k` logits `h . x_i + b_i` of `nq` queries (`q`
    /// rows of `dim` floats at `q_stride`) with a search pool of
    /// `max(ef, k)`: `out_ids` / `out_scores` get `nq * k` entries, largest
    /// first, equal scores by smaller id, padded with [`TOPK_PAD_ID`] /
    /// `-inf` when the graph has fewer than `k` rows.
    #[allow(clippy::too_many_arguments)]
    pub fn search(
        &self,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        ef: usize,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) -> Result<()> {
        self.search_stats(
            isa::active(),
            q,
            nq,
            q_stride,
            k,
            ef,
            out_ids,
            out_scores,
            None,
        )
    }

    /// [`Graph::search`] on one tier, with optional counts (added to
    /// `stats`).
    #[allow(clippy::too_many_arguments)]
    pub fn search_stats(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        ef: usize,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut GraphStats>,
    ) -> Result<()> {
        let sp = SearchParams {
            ef,
            walk: Walk::Exact,
            rerank: 0,
        };
        self.search_with(tier, q, nq, q_stride, k, &sp, out_ids, out_scores, stats)
    }

    /// The search with every query option ([`SearchParams`]) on one tier,
    /// with optional counts (added to `stats`; with [`Walk::Int8`] the
    /// re-ranked rows count as scored too).
    #[allow(clippy::too_many_arguments)]
    pub fn search_with(
        &self,
        tier: Isa,
        q: &[f32],
        nq: usize,
        q_stride: usize,
        k: usize,
        sp: &SearchParams,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
        stats: Option<&mut GraphStats>,
    ) -> Result<()> {
        isa::check_supported(tier)?;
        self.check_search(sp)?;
        let ql = strided_len(nq, self.dim, q_stride, "q")?;
        if q.len() < ql {
            bail!(
                BufferTooSmall,
                "`q` holds {} floats, {nq} queries of stride {q_stride} need {ql}",
                q.len()
            );
        }
        crate::error::check_finite_rows(q, nq, self.dim, q_stride, "q")?;
        // Every stored coordinate is at most U (the transformed rows' norm);
        // int8 rows are summed as codes (up to 127) times q, then scaled.
        let a = match self.data {
            Data::I8 { .. } => self.u.max(127.0),
            _ => self.u,
        };
        crate::error::check_query_range(q, nq, self.dim, q_stride, a, "q")?;
        let need = checked_mul(nq, k, "nq * k")?;
        if out_ids.len() < need || out_scores.len() < need {
            bail!(
                BufferTooSmall,
                "outputs hold {} ids and {} scores, nq * k = {need} needed",
                out_ids.len(),
                out_scores.len()
            );
        }
        if k == 0 || nq == 0 {
            return Ok(());
        }
        let ks = kg::kernels(tier);
        let distances = SCRATCH.with(|s| {
            let s = &mut *s.borrow_mut();
            s.prepare(self.rows, self.sdim);
            s.distances = 0;
            for i in 0..nq {
                let h = &q[i * q_stride..i * q_stride + self.dim];
                let (oi, os) = (
                    &mut out_ids[i * k..(i + 1) * k],
                    &mut out_scores[i * k..(i + 1) * k],
                );
                with_view!(self, ks, |v| self.query_any(&v, ks, h, k, sp, s, oi, os));
            }
            s.distances
        });
        if let Some(st) = stats {
            st.queries += nq as u64;
            st.distances += distances;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn query_any<T>(
        &self,
        view: &View<'_, T>,
        ks: &kg::Kernels,
        h: &[f32],
        k: usize,
        sp: &SearchParams,
        s: &mut Scratch,
        out_ids: &mut [u32],
        out_scores: &mut [f32],
    ) {
        match (sp.walk, &self.walk) {
            (Walk::Int8, Some(wr)) => {
                self.query_walk(view, wr, ks.walk, h, k, sp, s, out_ids, out_scores)
            }
            _ => self.query_one(view, h, k, sp.ef, s, out_ids, out_scores),
        }
    }
}
