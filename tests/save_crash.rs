//! Saving over an existing index is atomic under a crash.
//!
//! The test re-executes its own binary (`std::env::current_exe()`, this
//! test's name, env `LSHK_SAVE_CRASH_CHILD=<dir>`): the child loads two
//! indexes A and B from reference files and saves them alternately (B, A,
//! B, ...) over `<dir>/target.lshk` through lshk_index_save, printing
//! `saved N` after each. The parent kills it with SIGKILL after a random
//! delay (before, during and between saves; sometimes two children save
//! to the same path at once), then checks that the file at the path is
//! byte-identical to A or B, loads with lshk_index_load, and answers
//! queries exactly like the index it equals; an index loaded (mapped)
//! from the path before the saves keeps answering as before.
//!
//! Leftovers: a save killed mid-write leaves its temporary file
//! `.target.lshk.tmp-<pid>-<nanos>-<seq>` in the directory (a crash can't
//! clean up). The names are unique per process, time and call, so they
//! never collide with a later save; loads open only the exact path, so
//! they are never confused. The test counts them, then checks that a save
//! and a load with all of them present still work, then removes them.
//!
//! Iterations: `LSHK_SAVE_CRASH_ITERS` (default 16).
//!
//! Not simulated: power loss (the page cache survives a SIGKILL). For
//! that, write_file fsyncs the temporary file before the rename and the
//! directory after it (src/format.rs).

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lshk::data::{queries_near_labels, structured_layer};
use lshk::ffi::index::*;
use lshk::ffi::*;
use lshk::rng::SplitMix64;

const CHILD_ENV: &str = "LSHK_SAVE_CRASH_CHILD";
const TEST_NAME: &str = "save_over_existing_index_is_atomic_under_sigkill";
const DIM: usize = 128;

fn ok(s: lshk_status, what: &str) {
    if s != LSHK_STATUS_OK {
        let mut buf = [0 as libc::c_char; 512];
        // SAFETY: buf is writable for its length.
        unsafe { lshk_last_error_message(buf.as_mut_ptr(), buf.len()) };
        // SAFETY: NUL-terminated within buf.
        let m = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        panic!("{what}: status {s}: {}", m.to_string_lossy());
    }
}

fn cpath(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn save(idx: *const lshk_index, p: &Path) {
    let c = cpath(p);
    // SAFETY: a live handle and a NUL-terminated path.
    ok(
        unsafe { lshk_index_save(idx, c.as_ptr()) },
        "lshk_index_save",
    );
}

fn load(p: &Path) -> *mut lshk_index {
    let c = cpath(p);
    let mut out = std::ptr::null_mut();
    // SAFETY: NUL-terminated path, out writable.
    ok(
        unsafe { lshk_index_load(c.as_ptr(), std::ptr::null(), 0, &mut out) },
        "lshk_index_load",
    );
    out
}

fn free(idx: *mut lshk_index) {
    // SAFETY: a live handle with no other user.
    ok(unsafe { lshk_index_free(idx) }, "lshk_index_free");
}

fn build(rows: usize, seed: u64, tables: u32) -> *mut lshk_index {
    let l = structured_layer(rows, DIM, 128, seed);
    let mut p = lshk_index_params_default();
    p.lsh.tables = tables;
    p.lsh.seed = seed;
    let mut out = std::ptr::null_mut();
    // SAFETY: w holds rows*DIM floats, bias rows; p and out valid.
    ok(
        unsafe { lshk_index_build(l.w.as_ptr(), l.bias.as_ptr(), rows, DIM, DIM, &p, &mut out) },
        "lshk_index_build",
    );
    out
}

/// Top-10 ids and score bits of `qs` (B = 8 per call).
fn answers(idx: *const lshk_index, qs: &[f32]) -> Vec<u32> {
    let nq = qs.len() / DIM;
    let mut ids = vec![0u32; nq * 10];
    let mut sc = vec![0f32; nq * 10];
    // SAFETY: qs holds nq*DIM floats, outputs nq*10.
    ok(
        unsafe {
            lshk_index_query(
                idx,
                qs.as_ptr(),
                nq,
                DIM,
                10,
                std::ptr::null(),
                ids.as_mut_ptr(),
                sc.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        },
        "lshk_index_query",
    );
    ids.extend(sc.iter().map(|s| s.to_bits()));
    ids
}

fn temp_leftovers(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(".target.lshk.tmp-")
        })
        .collect();
    v.sort();
    v
}

/// The child: saves B, A, B, ... over target.lshk until killed.
fn child(dir: &Path) -> ! {
    let a = load(&dir.join("a.lshk"));
    let b = load(&dir.join("b.lshk"));
    let target = dir.join("target.lshk");
    // SAFETY: getppid has no preconditions.
    let parent = unsafe { libc::getppid() };
    let mut n = 0u64;
    loop {
        // SAFETY: as above. An orphan (the parent died) stops saving.
        if unsafe { libc::getppid() } != parent {
            std::process::exit(3);
        }
        save(if n.is_multiple_of(2) { b } else { a }, &target);
        n += 1;
        println!("saved {n}");
    }
}

struct Running {
    child: Child,
    saves: Arc<AtomicUsize>,
    reader: Option<std::thread::JoinHandle<()>>,
}

fn spawn(dir: &Path) -> Running {
    let mut c = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot re-execute the test binary");
    let out = c.stdout.take().unwrap();
    let saves = Arc::new(AtomicUsize::new(0));
    let s2 = saves.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("saved ") {
                s2.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    Running {
        child: c,
        saves,
        reader: Some(reader),
    }
}

impl Drop for Running {
    /// A panicking parent still kills its children (no-op after kill()).
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kill(mut r: Running) -> usize {
    // Child::kill sends SIGKILL on Unix.
    let _ = r.child.kill();
    let st = r.child.wait().unwrap();
    // Killed by our SIGKILL, not ended by a panic or an error of its own.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGKILL),
        "the child ended on its own: {st:?}"
    );
    if let Some(h) = r.reader.take() {
        h.join().unwrap();
    }
    r.saves.load(Ordering::SeqCst)
}

#[test]
fn save_over_existing_index_is_atomic_under_sigkill() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        child(Path::new(&dir));
    }
    let iters: usize = std::env::var("LSHK_SAVE_CRASH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let dir = std::env::temp_dir().join(format!("lshk-save-crash-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let target = dir.join("target.lshk");

    // A and B differ in every section (and in length).
    let a = build(32_768, 1, 16);
    let b = build(30_000, 2, 20);
    save(a, &dir.join("a.lshk"));
    save(b, &dir.join("b.lshk"));
    let bytes_a = fs::read(dir.join("a.lshk")).unwrap();
    let bytes_b = fs::read(dir.join("b.lshk")).unwrap();
    assert_ne!(bytes_a, bytes_b);
    let layer = structured_layer(32_768, DIM, 128, 1);
    let (qs, _) = queries_near_labels(&layer.w, 32_768, DIM, 64, 3);
    let ans_a = answers(a, &qs);
    let ans_b = answers(b, &qs);
    free(a);
    free(b);
    let t = Instant::now();
    let x = load(&dir.join("a.lshk"));
    save(x, &target);
    let save_time = t.elapsed();
    free(x);
    let first = load(&target);
    assert_eq!(
        fs::read(&target).unwrap(),
        bytes_a,
        "saving a loaded index changed its bytes"
    );
    free(first);

    // Calibrate: how long until a child's first save completes.
    let t = Instant::now();
    let r = spawn(&dir);
    while r.saves.load(Ordering::SeqCst) < 2 && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let two_saves = t.elapsed();
    kill(r);
    for p in temp_leftovers(&dir) {
        fs::remove_file(p).unwrap();
    }
    // Kill moments: uniform over [0, two_saves + 2 * save_time): before
    // the first save starts, inside saves, between them.
    let span = (two_saves + 2 * save_time).as_micros() as u64;

    let mut rng = SplitMix64::new(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    let (mut was_a, mut was_b, mut total_saves, mut mid_write, mut pairs) = (0, 0, 0, 0, 0);
    for it in 0..iters {
        let before = temp_leftovers(&dir).len();
        // An index loaded (memory-mapped) from the path before the saves:
        // replacing the file must not change or break it.
        let held = load(&target);
        let held_ans = answers(held, &qs);
        assert!(held_ans == ans_a || held_ans == ans_b);
        // Every fourth iteration two processes save to the same path.
        let two = it % 4 == 3;
        let mut rs = vec![spawn(&dir)];
        if two {
            rs.push(spawn(&dir));
            pairs += 1;
        }
        std::thread::sleep(Duration::from_micros(rng.below(span)));
        let mut saves = 0;
        for r in rs {
            saves += kill(r);
        }
        total_saves += saves;
        let after = temp_leftovers(&dir).len();
        mid_write += after - before;
        let got = fs::read(&target).unwrap();
        let which = if got == bytes_a {
            was_a += 1;
            "A"
        } else if got == bytes_b {
            was_b += 1;
            "B"
        } else {
            panic!(
                "iteration {it}: {} holds {} bytes equal to neither A ({}) nor B ({})",
                target.display(),
                got.len(),
                bytes_a.len(),
                bytes_b.len()
            );
        };
        let idx = load(&target);
        let ans = answers(idx, &qs);
        free(idx);
        assert_eq!(
            ans,
            if which == "A" { &ans_a } else { &ans_b }.clone(),
            "iteration {it}: the loaded index answers differently from {which}"
        );
        assert_eq!(
            answers(held, &qs),
            held_ans,
            "iteration {it}: an index mapped before the saves changed"
        );
        free(held);
    }

    // The leftovers don't disturb a later save or load.
    let left = temp_leftovers(&dir);
    let idx = load(&dir.join("b.lshk"));
    save(idx, &target);
    free(idx);
    assert_eq!(fs::read(&target).unwrap(), bytes_b);
    let idx = load(&target);
    assert_eq!(answers(idx, &qs), ans_b);
    free(idx);
    assert_eq!(
        temp_leftovers(&dir),
        left,
        "a clean save left a temporary file"
    );
    println!(
        "save_crash: {iters} SIGKILLs ({pairs} with two concurrent savers), kill moments uniform \
         in [0, {:.0} ms) (one save ~{:.0} ms, file {} / {} bytes): {} saves completed in \
         children, target held A {was_a} times and B {was_b} times, always loadable and \
         byte-identical to one of them; {mid_write} kills mid-write left a temporary file \
         (.target.lshk.tmp-*), none disturbed later saves or loads",
        span as f64 / 1e3,
        save_time.as_secs_f64() * 1e3,
        bytes_a.len(),
        bytes_b.len(),
        total_saves,
    );
    fs::remove_dir_all(&dir).unwrap();
}

/// Threads of one process saving to the same path at once: every save
/// succeeds (temporary names never collide), the file is one of the
/// complete indexes, and no temporary file is left.
#[test]
fn concurrent_saves_to_one_path_from_threads() {
    let dir = std::env::temp_dir().join(format!("lshk-save-conc-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let target = dir.join("target.lshk");
    let idxs: Vec<usize> = (0..4)
        .map(|i| build(2000 + 100 * i, 10 + i as u64, 8) as usize)
        .collect();
    let refs: Vec<Vec<u8>> = idxs
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let p = dir.join(format!("ref{i}.lshk"));
            save(x as *const lshk_index, &p);
            fs::read(&p).unwrap()
        })
        .collect();
    let start = std::sync::Barrier::new(idxs.len());
    std::thread::scope(|s| {
        for &x in &idxs {
            let (target, start) = (&target, &start);
            s.spawn(move || {
                start.wait();
                for _ in 0..25 {
                    save(x as *const lshk_index, target);
                }
            });
        }
    });
    let got = fs::read(&target).unwrap();
    assert!(refs.contains(&got), "the file is none of the saved indexes");
    assert!(temp_leftovers(&dir).is_empty(), "temporary files left");
    for x in idxs {
        free(x as *mut lshk_index);
    }
    fs::remove_dir_all(&dir).unwrap();
    println!("save_crash: 4 threads x 25 saves to one path: all succeeded, file complete");
}
