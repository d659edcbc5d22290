//! Building the graph: HNSW insertion in batches (plans made in parallel,
//! applied in order), reachability repair, the walk records and storage
//! conversion (module docs of `graph`).

use super::*;

impl Graph {
    /// Builds the graph over `rows` rows of `dim` floats (row `r` at
    /// `w[r * w_stride ..]`) with an optional bias, on the active tier.
    pub fn build(
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &GraphParams,
    ) -> Result<Graph> {
        Self::build_isa(isa::active(), w, bias, rows, dim, w_stride, p)
    }

    /// [`Graph::build`] on one chosen tier (the graph is the same on every
    /// tier; tests check it).
    #[doc(hidden)]
    pub fn build_isa(
        tier: Isa,
        w: &[f32],
        bias: Option<&[f32]>,
        rows: usize,
        dim: usize,
        w_stride: usize,
        p: &GraphParams,
    ) -> Result<Graph> {
        isa::check_supported(tier)?;
        if dim == 0 {
            bail!(InvalidArgument, "dim must be >= 1");
        }
        if rows == 0 {
            bail!(InvalidArgument, "rows must be >= 1");
        }
        if rows >= u32::MAX as usize {
            bail!(InvalidArgument, "rows is {rows}; at most 2^32 - 2");
        }
        crate::error::check_layer_buffers(w, bias, rows, dim, w_stride)?;
        if !(2..=MAX_M).contains(&p.m) {
            bail!(InvalidArgument, "m is {}; it must be in 2..=256", p.m);
        }
        if p.ef_construction == 0 {
            bail!(InvalidArgument, "ef_construction must be >= 1");
        }
        if file_code(p.storage).is_none() {
            bail!(
                InvalidArgument,
                "graph storage {:?}: the graph keeps its own rows as F32, Bf16 or I8",
                p.storage
            );
        }
        crate::error::check_finite_rows(w, rows, dim, w_stride, "w")?;
        if let Some(b) = bias {
            if let Some(r) = b[..rows].iter().position(|v| !v.is_finite()) {
                bail!(NonFinite, "bias[{r}] is {} (finite values needed)", b[r]);
            }
        }
        let sdim = (dim + 2).div_ceil(LANES) * LANES;
        let total = checked_mul(rows, sdim, "rows * stored row length")?;
        crate::error::check_fits_memory(total as u128 * 4, "graph rows")?;
        // The transform, in f64: U = max |[x; b]|, t = sqrt(U^2 - |[x; b]|^2).
        let norm2 = |r: usize| -> f64 {
            let x = &w[r * w_stride..r * w_stride + dim];
            let b = bias.map_or(0.0, |b| b[r] as f64);
            x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() + b * b
        };
        let mut n2 = try_vec::<f64>(rows, "graph norms")?;
        for (r, v) in n2.iter_mut().enumerate() {
            *v = norm2(r);
        }
        let u2 = n2.iter().fold(0.0f64, |a, &b| a.max(b));
        let u = u2.sqrt() as f32;
        if !(u * u).is_finite() || !(u2 as f32).is_finite() {
            bail!(
                NonFinite,
                "the largest row norm |[w; b]| = {:e} squared overflows f32",
                u2.sqrt()
            );
        }
        let mut xf = try_vec::<f32>(total, "graph rows")?;
        for r in 0..rows {
            let o = &mut xf[r * sdim..(r + 1) * sdim];
            o[..dim].copy_from_slice(&w[r * w_stride..r * w_stride + dim]);
            o[dim] = bias.map_or(0.0, |b| b[r]);
            o[dim + 1] = (u2 - n2[r]).max(0.0).sqrt() as f32;
        }
        drop(n2);
        // Levels from the seed, then the upper-level slot offsets.
        let m = p.m as usize;
        let ml = 1.0 / ieee754_log(m as f64);
        let mut rng = SplitMix64::new(p.seed);
        let mut levels = try_vec::<u8>(rows, "graph levels")?;
        for l in levels.iter_mut() {
            let lv = (-ieee754_log(rng.next_f64_open()) * ml).floor();
            *l = lv.clamp(0.0, MAX_LEVEL as f64) as u8;
        }
        let mut upper_off = try_vec::<u32>(rows, "graph upper offsets")?;
        let mut acc = 0usize;
        for (o, &l) in upper_off.iter_mut().zip(&levels) {
            if acc > u32::MAX as usize {
                bail!(SizeOverflow, "upper-level links exceed 2^32 entries");
            }
            *o = acc as u32;
            acc += l as usize * (1 + m);
        }
        if acc > u32::MAX as usize {
            bail!(SizeOverflow, "upper-level links exceed 2^32 entries");
        }
        let slot0 = 1 + 2 * m;
        let links0 = try_vec::<u32>(checked_mul(rows, slot0, "rows * (1 + 2m)")?, "graph links")?;
        let upper = try_vec::<u32>(acc, "graph upper links")?;
        let mut g = Graph {
            rows,
            dim,
            sdim,
            u,
            has_bias: bias.is_some(),
            params: *p,
            data: Data::F32(xf),
            links0,
            levels,
            upper_off,
            upper,
            entry: 0,
            max_level: 0,
            walk: None,
        };
        g.max_level = g.levels[0] as usize;
        let threads = crate::par::threads(p.threads as usize);
        g.insert_all(tier, threads);
        g.repair_reachability(tier);
        g.convert_storage(p.storage)?;
        g.build_walk()?;
        Ok(g)
    }

    /// Inserts nodes `1..rows` (node 0 is the first entry point).
    pub(super) fn insert_all(&mut self, tier: Isa, threads: usize) {
        let mut next = 1usize;
        while next < self.rows {
            let len = if next < SEQUENTIAL_NODES {
                1
            } else {
                (next / BATCH_DIV).max(1)
            };
            let end = (next + len).min(self.rows);
            let plans = self.plan_batch(tier, next..end, threads);
            self.apply_batch(tier, next, &plans, threads);
            next = end;
        }
    }

    /// Makes every node reachable from the entry point on level 0 (HNSW's
    /// pruning can leave a node without in-links). In node order, each
    /// unreachable node `u` is linked from the best-scoring reachable node
    /// with room found by a search for `u` (`ef_construction`), or, when
    /// none has room, replaces the last link of the best one whose target
    /// keeps another in-link; then everything reachable from `u` counts as
    /// reachable. Sequential and deterministic.
    pub(super) fn repair_reachability(&mut self, tier: Isa) {
        let rows = self.rows;
        let mut seen = vec![false; rows];
        let mut indeg = vec![0u32; rows];
        for n in 0..rows {
            for &t in self.links(n, 0) {
                indeg[t as usize] += 1;
            }
        }
        let mut stack = Vec::new();
        let mut mark = |g: &Graph, from: usize, seen: &mut Vec<bool>| {
            if seen[from] {
                return;
            }
            seen[from] = true;
            stack.push(from);
            while let Some(n) = stack.pop() {
                for &t in g.links(n, 0) {
                    if !seen[t as usize] {
                        seen[t as usize] = true;
                        stack.push(t as usize);
                    }
                }
            }
        };
        mark(self, self.entry as usize, &mut seen);
        let cap = 2 * self.params.m as usize;
        let mut s = Scratch::default();
        for u in 0..rows {
            if seen[u] {
                continue;
            }
            let Data::F32(xf) = &self.data else {
                unreachable!("the build works on f32 rows")
            };
            let view = View {
                rows: Rows {
                    w: xf,
                    dim: self.sdim,
                    scales: &[],
                },
                dot: kg::kernels(tier).f32,
            };
            s.prepare(rows, self.sdim);
            let q = &xf[u * self.sdim..(u + 1) * self.sdim];
            let ep = self.descend(&view, q, 1, &mut s);
            self.search_layer(
                &view,
                q,
                0,
                ep,
                self.params.ef_construction as usize,
                &mut s,
            );
            s.sorted.clear();
            s.sorted.extend(s.pool.drain().map(|r| r.0));
            s.sorted.sort_unstable_by(|a, b| b.cmp(a));
            let pick = s
                .sorted
                .iter()
                .find(|c| {
                    c.id as usize != u
                        && seen[c.id as usize]
                        && self.links(c.id as usize, 0).len() < cap
                })
                .map(|c| (c.id as usize, None))
                .or_else(|| {
                    s.sorted.iter().find_map(|c| {
                        let v = c.id as usize;
                        if v == u || !seen[v] {
                            return None;
                        }
                        let l = self.links(v, 0);
                        l.iter()
                            .rposition(|&t| indeg[t as usize] >= 2)
                            .map(|pos| (v, Some(pos)))
                    })
                });
            let Some((v, replace)) = pick else {
                continue;
            };
            let slot = self.slot_mut(v, 0);
            match replace {
                None => {
                    let n = slot[0] as usize;
                    slot[1 + n] = u as u32;
                    slot[0] += 1;
                }
                Some(pos) => {
                    let old = slot[1 + pos] as usize;
                    slot[1 + pos] = u as u32;
                    indeg[old] -= 1;
                }
            }
            indeg[u] += 1;
            mark(self, u, &mut seen);
        }
    }

    /// Every node of the batch searches the current (frozen) graph: per
    /// level `0..=min(level, max_level)`, its selected neighbours.
    pub(super) fn plan_batch(
        &self,
        tier: Isa,
        nodes: std::ops::Range<usize>,
        threads: usize,
    ) -> Vec<Plan> {
        let n = nodes.len();
        let work = |s: &mut Scratch, i: usize| self.plan_node(tier, nodes.start + i, s);
        if threads <= 1 || n < 2 {
            return SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                (0..n).map(|i| work(s, i)).collect()
            });
        }
        crate::par::map_indexed(n, threads, Scratch::default, work)
    }

    pub(super) fn plan_node(&self, tier: Isa, node: usize, s: &mut Scratch) -> Plan {
        let Data::F32(xf) = &self.data else {
            unreachable!("the build works on f32 rows")
        };
        let view = View {
            rows: Rows {
                w: xf,
                dim: self.sdim,
                scales: &[],
            },
            dot: kg::kernels(tier).f32,
        };
        s.prepare(self.rows, self.sdim);
        let q = &xf[node * self.sdim..(node + 1) * self.sdim];
        let level = self.levels[node] as usize;
        let mut cur = self.descend(&view, q, level + 1, s);
        let mut plan = Plan { levels: Vec::new() };
        let ef = self.params.ef_construction as usize;
        let m = self.params.m as usize;
        for lev in (0..=level.min(self.max_level)).rev() {
            self.search_layer(&view, q, lev, cur, ef, s);
            // The pool, best first.
            s.sorted.clear();
            s.sorted.extend(s.pool.drain().map(|r| r.0));
            s.sorted.sort_unstable_by(|a, b| b.cmp(a));
            cur = s.sorted[0];
            let sel = select_heuristic(&view, &s.sorted, m, &mut s.ids, &mut s.out);
            plan.levels.push((lev, sel));
        }
        plan
    }

    /// Applies a batch's plans: the new nodes' own links (in node order),
    /// then the back-links of every old node they chose, pruned in node
    /// order (in parallel over old nodes).
    pub(super) fn apply_batch(&mut self, tier: Isa, first: usize, plans: &[Plan], threads: usize) {
        let mut requests: Vec<(usize, u32, u32)> = Vec::new(); // (level, target, node)
        for (i, plan) in plans.iter().enumerate() {
            let node = (first + i) as u32;
            for (lev, sel) in &plan.levels {
                let slot = self.slot_mut(node as usize, *lev);
                slot[0] = sel.len() as u32;
                slot[1..1 + sel.len()].copy_from_slice(sel);
                requests.extend(sel.iter().map(|&t| (*lev, t, node)));
            }
        }
        requests.sort_unstable();
        // Group by (level, target).
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut a = 0;
        while a < requests.len() {
            let mut b = a + 1;
            while b < requests.len()
                && requests[b].0 == requests[a].0
                && requests[b].1 == requests[a].1
            {
                b += 1;
            }
            groups.push((a, b));
            a = b;
        }
        let work = |gi: usize, s: &mut Scratch| -> Vec<u32> {
            let (a, b) = groups[gi];
            let (lev, target) = (requests[a].0, requests[a].1 as usize);
            self.backlink(tier, lev, target, requests[a..b].iter().map(|r| r.2), s)
        };
        let n = groups.len();
        let lists: Vec<Vec<u32>> = if threads <= 1 || n < 64 {
            SCRATCH.with(|s| {
                let s = &mut *s.borrow_mut();
                (0..n).map(|gi| work(gi, s)).collect()
            })
        } else {
            crate::par::map_indexed(n, threads, Scratch::default, |s, i| work(i, s))
        };
        for (gi, list) in lists.into_iter().enumerate() {
            let (lev, target) = (requests[groups[gi].0].0, requests[groups[gi].0].1 as usize);
            let slot = self.slot_mut(target, lev);
            slot[0] = list.len() as u32;
            slot[1..1 + list.len()].copy_from_slice(&list);
        }
        // The entry point: the first node of the highest level.
        for i in 0..plans.len() {
            let l = self.levels[first + i] as usize;
            if l > self.max_level {
                self.max_level = l;
                self.entry = (first + i) as u32;
            }
        }
    }

    /// The new list of `target` at `lev` after adding `news` one by one
    /// (append while there is room, otherwise HNSW's heuristic over the
    /// list and the new node).
    pub(super) fn backlink(
        &self,
        tier: Isa,
        lev: usize,
        target: usize,
        news: impl Iterator<Item = u32>,
        s: &mut Scratch,
    ) -> Vec<u32> {
        let Data::F32(xf) = &self.data else {
            unreachable!("the build works on f32 rows")
        };
        let view = View {
            rows: Rows {
                w: xf,
                dim: self.sdim,
                scales: &[],
            },
            dot: kg::kernels(tier).f32,
        };
        let cap = self.max_links(lev);
        let mut list = self.links(target, lev).to_vec();
        let q = &xf[target * self.sdim..(target + 1) * self.sdim];
        for nb in news {
            if list.len() < cap {
                list.push(nb);
                continue;
            }
            list.push(nb);
            s.out.clear();
            s.out.resize(list.len(), 0.0);
            view.score(q, &list, &mut s.out);
            s.sorted.clear();
            s.sorted
                .extend(list.iter().zip(&s.out).map(|(&id, &sc)| Cand { s: sc, id }));
            s.sorted.sort_unstable_by(|a, b| b.cmp(a));
            let sorted = std::mem::take(&mut s.sorted);
            list = select_heuristic(&view, &sorted, cap, &mut s.ids, &mut s.out);
            s.sorted = sorted;
        }
        list
    }

    /// The stored row `r` as f32 (`sdim` values) into `out`.
    /// The bias of every row, exactly, from f32 rows (`None` without a
    /// bias); `InvalidArgument` for bf16 or int8 rows, which hold it
    /// rounded.
    pub(crate) fn exact_bias(&self) -> Result<Option<Vec<f32>>> {
        if !self.has_bias {
            return Ok(None);
        }
        let Data::F32(v) = &self.data else {
            bail!(
                InvalidArgument,
                "the graph holds its bias in {:?} rows, rounded: build the index again from W and \
                 the bias (the same parameters give the same graph)",
                self.params.storage
            );
        };
        Ok(Some(
            (0..self.rows)
                .map(|r| v[r * self.sdim + self.dim])
                .collect(),
        ))
    }

    pub(super) fn stored_row(&self, r: usize, out: &mut [f32]) {
        let span = r * self.sdim..(r + 1) * self.sdim;
        match &self.data {
            Data::F32(v) => out.copy_from_slice(&v[span]),
            Data::Bf16(v) => out
                .iter_mut()
                .zip(&v[span])
                .for_each(|(o, &b)| *o = crate::kernels::matmul::bf16_to_f32(b)),
            Data::I8 { w, scales } => out
                .iter_mut()
                .zip(&w[span])
                .for_each(|(o, &c)| *o = c as f32 * scales[r]),
        }
    }

    /// Makes the int8 walk's records (see [`WalkRecs`]) from the stored
    /// rows and the level-0 links (after a build or a load; plain scalar
    /// code, so the same on every tier).
    pub(super) fn build_walk(&mut self) -> Result<()> {
        if self.dim > MAX_WALK_DIM {
            self.walk = None;
            return Ok(());
        }
        let dpad = self.dim.div_ceil(kg::WALK_PAD) * kg::WALK_PAD;
        let slots = 2 * self.params.m as usize;
        let stride = (dpad + 4 * slots).div_ceil(64) * 64;
        let lines_n = checked_mul(self.rows, stride / 64, "walk records")?;
        let mut lines = try_vec::<Line>(lines_n, "graph walk records")?;
        let mut side = try_vec::<[f32; 2]>(self.rows, "graph walk scales")?;
        let mut row = vec![0.0f32; self.sdim];
        for r in 0..self.rows {
            self.stored_row(r, &mut row);
            let x = &row[..self.dim];
            let amax = x.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
            let scale = amax / 127.0;
            side[r] = [scale, row[self.dim]];
            let rec: &mut [u8] = {
                let ls = &mut lines[r * stride / 64..(r + 1) * stride / 64];
                // SAFETY: `Line` is 64 plain bytes; the slice covers
                // exactly `ls`, borrowed mutably here.
                unsafe { std::slice::from_raw_parts_mut(ls.as_mut_ptr().cast::<u8>(), stride) }
            };
            for (t, c) in rec[..dpad].iter_mut().enumerate() {
                let code = if t < self.dim && scale > 0.0 {
                    (x[t] / scale).round().clamp(-127.0, 127.0) as i32
                } else {
                    0
                };
                *c = (code + 128) as u8;
            }
            let links = self.links(r, 0);
            for t in 0..slots {
                let v = links.get(t).copied().unwrap_or(u32::MAX);
                rec[dpad + 4 * t..dpad + 4 * t + 4].copy_from_slice(&v.to_ne_bytes());
            }
        }
        self.walk = Some(WalkRecs {
            lines,
            stride,
            dpad,
            side,
        });
        Ok(())
    }

    pub(super) fn convert_storage(&mut self, st: Storage) -> Result<()> {
        let Data::F32(xf) = &self.data else {
            return Ok(());
        };
        self.data = match st {
            Storage::F32 | Storage::BorrowedF32 | Storage::F16 => return Ok(()),
            Storage::Bf16 => {
                let mut v = try_vec::<u16>(xf.len(), "graph bf16 rows")?;
                v.iter_mut().zip(xf).for_each(|(d, &s)| *d = f32_to_bf16(s));
                Data::Bf16(v)
            }
            Storage::I8 => {
                let mut v = try_vec::<i8>(xf.len(), "graph int8 rows")?;
                let mut scales = try_vec::<f32>(self.rows, "graph int8 scales")?;
                crate::matmul::quantize_rows_i8(
                    xf,
                    self.rows,
                    self.sdim,
                    self.sdim,
                    &mut v,
                    self.sdim,
                    &mut scales,
                )?;
                Data::I8 { w: v, scales }
            }
        };
        Ok(())
    }
}

/// One node's build plan: per level (highest first), the chosen links.
pub(super) struct Plan {
    levels: Vec<(usize, Vec<u32>)>,
}

/// HNSW's neighbour heuristic: `sorted` holds candidates best first (their
/// score to the base node); a candidate is kept unless a kept one scores
/// higher with it than the base does (is closer to it, all norms being
/// equal). At most `m` are kept; with fewer than `m` candidates all are.
pub(super) fn select_heuristic(
    view: &View<'_, f32>,
    sorted: &[Cand],
    m: usize,
    ids: &mut Vec<u32>,
    out: &mut Vec<f32>,
) -> Vec<u32> {
    if sorted.len() <= m {
        return sorted.iter().map(|c| c.id).collect();
    }
    ids.clear();
    for c in sorted {
        if ids.len() >= m {
            break;
        }
        let good = if ids.is_empty() {
            true
        } else {
            out.clear();
            out.resize(ids.len(), 0.0);
            let r = c.id as usize * view.rows.dim;
            view.score(&view.rows.w[r..r + view.rows.dim], ids, out);
            out.iter().all(|&v| v <= c.s)
        };
        if good {
            ids.push(c.id);
        }
    }
    ids.clone()
}
