//! Generates `include/lshk.h` with cbindgen (written only when its content
//! changes, so the committed header is the contract), sets the shared
//! library's SONAME and writes a pkg-config file `lshk.pc` next to the built
//! libraries (`target/<profile>/lshk.pc`).
use std::{env, fs, path::PathBuf};

fn main() {
    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap();
    let minor = env::var("CARGO_PKG_VERSION_MINOR").unwrap();
    let patch = env::var("CARGO_PKG_VERSION_PATCH").unwrap();
    let version = env::var("CARGO_PKG_VERSION").unwrap();

    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=build.rs");

    // ---- header ----
    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is readable");
    config.after_includes = Some(format!(
        "\n#define LSHK_VERSION_MAJOR {major}\n#define LSHK_VERSION_MINOR {minor}\n#define LSHK_VERSION_PATCH {patch}\n#define LSHK_VERSION_STRING \"{version}\"\n"
    ));
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate include/lshk.h");
    let generated = out_dir.join("lshk.h");
    bindings.write_to_file(&generated);
    let new = fs::read(&generated).unwrap();
    let committed = crate_dir.join("include").join("lshk.h");
    if fs::read(&committed).ok().as_deref() != Some(&new[..]) {
        fs::create_dir_all(crate_dir.join("include")).unwrap();
        fs::write(&committed, &new).unwrap();
    }
    println!(
        "cargo:rustc-env=LSHK_GENERATED_HEADER={}",
        generated.display()
    );

    // ---- shared library name ----
    // The SONAME carries the ABI generation: the major version, or for
    // 0.y.z releases (where, as in Cargo's semver rule, y is the breaking
    // number) `0.y`. tests/abi.rs allows an incompatible ABI only when that
    // generation is raised.
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major.clone()
    };
    let soname = format!("liblshk.so.{abi}");
    println!("cargo:rustc-env=LSHK_SONAME={soname}");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
    }

    // ---- pkg-config file next to the libraries ----
    // OUT_DIR = target/<profile>/build/lshk-<hash>/out
    if let Some(profile_dir) = out_dir.ancestors().nth(3) {
        let pc = format!(
            "prefix={root}\nincludedir={root}/include\nlibdir={lib}\n\nName: lshk\nDescription: SIMD kernels for sublinear wide output layers (LSH)\nVersion: {version}\nCflags: -I${{includedir}}\nLibs: -L${{libdir}} -Wl,-rpath,${{libdir}} -llshk\nLibs.private: -lpthread -ldl -lm\n",
            root = crate_dir.display(),
            lib = profile_dir.display(),
        );
        let pc_path = profile_dir.join("lshk.pc");
        if fs::read_to_string(&pc_path).ok().as_deref() != Some(pc.as_str()) {
            let _ = fs::write(&pc_path, pc);
        }
        // Binaries linked against liblshk.so look for the SONAME at run time,
        // so provide it as a link.
        #[cfg(unix)]
        {
            let link = profile_dir.join(&soname);
            if fs::symlink_metadata(&link).is_err() {
                let _ = std::os::unix::fs::symlink("liblshk.so", &link);
            }
        }
    }
}
