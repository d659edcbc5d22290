//! IUL (learned SimHash planes).

use super::*;

/// lshk_simhash_train_iul (learned planes, stateless): shapes, parameters
/// (flags, rank / score thresholds), CSR labels, buffers; on OK the planes
/// and reports equal `iul::train`'s bit for bit.
pub(crate) fn fuzz_iul(c: &mut Ctx) {
    let r = &mut c.r;
    let mut v = Verdict::default();
    let mut dim = 1 + r.u(6);
    let mut kb = 1 + r.u(4) as u32;
    let mut tl = 1 + r.u(3) as u32;
    let mut range_bits = kb.min(6);
    let mut n_rows = 1 + r.u(30);
    let mut row_stride = dim + if r.one_in(3) { r.u(3) } else { 0 };
    let mut n = 1 + r.u(10);
    let mut q_stride = dim + if r.one_in(3) { r.u(2) } else { 0 };
    let mut p = lshk_iul_params_default();
    p.rounds = r.u(3) as u32;
    p.epochs = 1 + r.u(2) as u32;
    p.batch = r.pick(&[1, 4, 256]);
    p.flags = r.pick(&[0, LSHK_IUL_RANK_THRESHOLDS, LSHK_IUL_KEEP_BEST, 3])
        | r.pick(&[0, 0, LSHK_IUL_TO_CONVERGENCE, LSHK_IUL_COLLISION_LOSS]);
    if p.flags & LSHK_IUL_RANK_THRESHOLDS != 0 {
        p.t1 = r.u(12) as f32;
        p.t2 = r.u(40) as f32;
    } else {
        p.t1 = r.f(-1.0, 1.0);
        p.t2 = r.f(-1.0, 1.0);
    }
    p.validation_fraction = r.pick(&[0.0, 0.25, 0.5]);
    p.max_pairs = r.pick(&[0, 0, 5]);
    p.seed = r.0.next_u64();
    let np = (kb * tl) as usize * dim;
    let mut planes_len = np;
    let mut planes = Arr::new((0..np).map(|_| r.f(-1.0, 1.0)).collect(), 0.0f32);
    let mut rows = Arr::new(
        (0..(n_rows - 1) * row_stride + dim)
            .map(|_| r.f(-1.0, 1.0))
            .collect(),
        0.0f32,
    );
    let mut queries = Arr::new(
        (0..(n - 1) * q_stride + dim)
            .map(|_| r.f(-1.0, 1.0))
            .collect(),
        0.0f32,
    );
    let lo0 = csr(r, n, 3);
    let mut labels = Arr::new(
        (0..*lo0.last().unwrap())
            .map(|_| r.u(n_rows) as u32)
            .collect(),
        0u32,
    );
    let mut lo = Arr::new(lo0, 0usize);
    let mut out_len = np + r.u(2);
    let mut out = Arr::new(vec![0.0f32; out_len], 0.0f32);
    let mut reports_len = p.rounds as usize + r.u(2);
    let mut reps_null = r.one_in(6);
    let mut pmode = r.pick(&[0, 0, 0, 1]); // 0 struct, 1 NULL (defaults)
    let mut what = Vec::new();
    for _ in 0..r.u(4) {
        let m = r.u(16);
        what.push(m);
        match m {
            0 => match r.u(6) {
                0 => planes.mode = r.pick(&[Mode::Null, Mode::Mis]),
                1 => rows.mode = r.pick(&[Mode::Null, Mode::Mis]),
                2 => queries.mode = r.pick(&[Mode::Null, Mode::Mis]),
                3 => lo.mode = r.pick(&[Mode::Null, Mode::Mis]),
                4 => labels.mode = r.pick(&[Mode::Null, Mode::Mis]),
                _ => out.mode = r.pick(&[Mode::Null, Mode::Mis]),
            },
            1 => planes_len = r.size(planes_len),
            2 => dim = r.pick(&[0, dim + 1]),
            3 => kb = r.pick(&[0, 33, kb + 1]),
            4 => tl = r.pick(&[0, tl + 1]),
            5 => range_bits = r.pick(&[0, 25, 24, 1]),
            6 => n_rows = r.pick(&[0, n_rows.saturating_sub(1), n_rows + 1]),
            7 => row_stride = r.pick(&[dim.saturating_sub(1), 0]),
            8 => n = r.pick(&[0, n.saturating_sub(1), n + 1]),
            9 => q_stride = r.pick(&[dim.saturating_sub(1), 0]),
            10 => mutate_offsets(r, lo.data_mut()),
            11 if labels.len() > 0 => {
                let j = r.u(labels.len());
                labels.data_mut()[j] = r.pick(&[n_rows as u32, u32::MAX]);
            }
            12 => match r.u(7) {
                0 => p.flags = r.pick(&[16, 0x8000_0000, u32::MAX]),
                1 => p.t1 = r.special(),
                2 => {
                    p.flags |= LSHK_IUL_RANK_THRESHOLDS;
                    p.t2 = r.pick(&[0.5, -1.0, 1.0e9]);
                }
                3 => p.learning_rate = r.pick(&[0.0, -0.01, f32::NAN]),
                4 => p.batch = 0,
                5 => p.validation_fraction = r.pick(&[1.0, -0.1, f32::NAN]),
                _ => {
                    pmode = 0;
                    let full = std::mem::size_of::<lshk_iul_params>() as u32;
                    p.struct_size = r.pick(&[0, 8, full - 1]);
                }
            },
            13 => out_len = out_len.saturating_sub(1 + r.u(2)),
            14 => reports_len = reports_len.saturating_sub(1 + r.u(2)),
            15 if planes.len() > 0 => {
                let j = r.u(planes.len());
                r.spoil(planes.data_mut(), j);
            }
            _ => reps_null = !reps_null,
        }
    }
    let eff = if pmode == 1 {
        lshk_iul_params_default()
    } else {
        p
    };
    if pmode == 0 && (p.struct_size as usize) < std::mem::size_of::<lshk_iul_params>() {
        v.err("struct_size too small");
    }
    if eff.flags & !15 != 0 {
        v.err("unknown flags");
    }
    planes.need(Some(planes_len as u128), &mut v, || 0.5);
    rows.need(strided(n_rows, dim, row_stride), &mut v, || 0.25);
    queries.need(strided(n, dim, q_stride), &mut v, || 0.25);
    lo.need(Some(n as u128 + 1), &mut v, || 0);
    let total = if lo.mode == Mode::Ok && lo.len() > n {
        lo.data()[n] as u128
    } else {
        0
    };
    labels.need(Some(total), &mut v, || 0);
    out.need(Some(out_len as u128), &mut v, || 0.0);
    if v.skip {
        c.skipped += 1;
        return;
    }
    if dim == 0 || kb == 0 || kb > 32 || tl == 0 {
        v.err("bad shape");
    }
    if planes_len != (kb * tl) as usize * dim {
        v.err("planes_len != K L dim");
    }
    if !(1..=24).contains(&range_bits) {
        v.err("range_bits");
    }
    if planes.mode == Mode::Ok
        && planes.data()[..planes_len.min(planes.len())]
            .iter()
            .any(|x| !x.is_finite())
    {
        v.err("non-finite plane");
    }
    if !(eff.t1.is_finite() && eff.t2.is_finite()) {
        v.err("non-finite threshold");
    }
    if eff.flags & LSHK_IUL_RANK_THRESHOLDS != 0
        && [eff.t1, eff.t2]
            .iter()
            .any(|&t| !(t >= 0.0 && t.fract() == 0.0 && t <= 16_777_216.0))
    {
        v.err("rank cut-off not a whole number in range");
    }
    if !(eff.learning_rate.is_finite() && eff.learning_rate > 0.0) || eff.batch == 0 {
        v.err("learning rate or batch");
    }
    if !(eff.validation_fraction >= 0.0 && eff.validation_fraction < 1.0) {
        v.err("validation fraction");
    }
    if n_rows == 0 || n == 0 || row_stride < dim || q_stride < dim {
        v.err("sizes or strides");
    }
    if lo.mode == Mode::Ok && lo.len() > n {
        let o = &lo.data()[..n + 1];
        if o[0] != 0 || o.windows(2).any(|w| w[1] < w[0]) {
            v.err("bad label offsets");
        } else if labels.mode == Mode::Ok
            && labels.len() >= o[n]
            && labels.data()[..o[n]].iter().any(|&y| y as usize >= n_rows)
        {
            v.err("label >= n_rows");
        }
    }
    if out_len < planes_len {
        v.err("planes_out_len < planes_len");
    }
    let rounds = eff.rounds as usize;
    let (rp, rl) = if reps_null {
        (true, 0)
    } else {
        (false, reports_len)
    };
    if !(rp && rl == 0) && rl < rounds {
        v.err("reports_len < rounds");
    }
    c.desc = format!(
        "iul dim {dim} K {kb} L {tl} rb {range_bits} rows {n_rows}/{row_stride} n {n}/{q_stride} \
         rounds {} flags {} t {} {} pmode {pmode} out {out_len} reps {rl} null {reps_null} muts {what:?}",
        eff.rounds, eff.flags, eff.t1, eff.t2
    );
    let canary = lshk_iul_report {
        round: CANARY,
        ..Default::default()
    };
    let mut reps = vec![canary; rl + 1];
    let repp = if reps_null {
        null_mut()
    } else {
        reps.as_mut_ptr()
    };
    let outp = out.mptr();
    let pp: *const lshk_iul_params = if pmode == 1 { null() } else { &p };
    let (pl0, r0, q0) = (bits(&planes.v), bits(&rows.v), bits(&queries.v));
    let out0 = bits(&out.v);
    // SAFETY: every buffer holds what its length argument claims (Arr::need)
    // or the call is expected to refuse it first.
    let st = c.call("lshk_simhash_train_iul", || unsafe {
        lshk_simhash_train_iul(
            planes.ptr(),
            planes_len,
            dim,
            kb,
            tl,
            range_bits,
            rows.ptr(),
            n_rows,
            row_stride,
            queries.ptr(),
            n,
            q_stride,
            lo.ptr(),
            labels.ptr(),
            pp,
            outp,
            out_len,
            repp,
            rl,
        )
    });
    if bits(&planes.v) != pl0 || bits(&rows.v) != r0 || bits(&queries.v) != q0 {
        c.fail("lshk_simhash_train_iul changed an input".into());
    }
    if !c.judge("lshk_simhash_train_iul", st, &v) {
        if st != LSHK_STATUS_OK && (bits(&out.v) != out0 || reps.iter().any(|x| x.round != CANARY))
        {
            c.fail("lshk_simhash_train_iul failed but wrote an output".into());
        }
        if st != LSHK_STATUS_OK && v.expect_err.is_none() {
            c.fail(format!(
                "lshk_simhash_train_iul refused a valid call: {}",
                last_msg()
            ));
        }
        return;
    }
    if reps[rl].round != CANARY || (rl > rounds && reps[rounds].round != CANARY) {
        c.fail("lshk_simhash_train_iul wrote past the reports it owes".into());
    }
    // Reference: the Rust trainer with the same inputs.
    let ip = lshk::iul::IulParams {
        t1: eff.t1,
        t2: eff.t2,
        thresholds: if eff.flags & LSHK_IUL_RANK_THRESHOLDS != 0 {
            lshk::iul::Thresholds::Rank
        } else {
            lshk::iul::Thresholds::Score
        },
        keep_best: eff.flags & LSHK_IUL_KEEP_BEST != 0,
        learning_rate: eff.learning_rate,
        rounds: eff.rounds,
        epochs: eff.epochs,
        batch: eff.batch,
        max_pairs: eff.max_pairs,
        validation_fraction: eff.validation_fraction,
        seed: eff.seed,
    };
    let shape = lshk::iul::IulShape {
        dim,
        bits: kb,
        tables: tl,
        range_bits,
        bucket_cap: 0,
        table_seed: 0,
    };
    let data = lshk::iul::IulData {
        rows: rows.data(),
        n_rows,
        row_stride,
        queries: queries.data(),
        n_queries: n,
        q_stride,
        label_offsets: &lo.data()[..n + 1],
        labels: labels.data(),
    };
    let mut opts = lshk::iul::IulOptions {
        loss: if eff.flags & LSHK_IUL_COLLISION_LOSS != 0 {
            lshk::iul::IulLoss::Collision
        } else {
            lshk::iul::IulLoss::Dot
        },
        tolerance: if eff.flags & LSHK_IUL_TO_CONVERGENCE != 0 {
            1e-3
        } else {
            0.0
        },
        on_epoch: None,
    };
    match lshk::iul::train_with(&planes.data()[..planes_len], &shape, &data, &ip, &mut opts) {
        Err(e) => c.fail(format!(
            "iul::train refused what the C call took: {}",
            e.message
        )),
        Ok((want, wr)) => {
            if bits(&out.data()[..planes_len]) != bits(&want) {
                c.fail("lshk_simhash_train_iul: planes differ from iul::train's".into());
            }
            if out.data()[planes_len..].iter().any(|&x| x != 0.0) {
                c.fail("lshk_simhash_train_iul wrote past planes_len".into());
            }
            if !reps_null {
                for (g, w) in reps.iter().zip(&wr) {
                    let same = g.round == w.round
                        && g.kept == u32::from(w.kept)
                        && (g.positives, g.negatives) == (w.positives, w.negatives)
                        && g.label_recall_after.to_bits() == w.label_recall_after.to_bits()
                        && g.loss_after.to_bits() == w.loss_after.to_bits();
                    if !same {
                        c.fail(format!(
                            "lshk_simhash_train_iul: report {} differs",
                            w.round
                        ));
                    }
                }
            }
        }
    }
}
