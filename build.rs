//! Compiles the C core (`c_core/*.c`) into a static library linked into this crate: the
//! same hot path, sampling, unwinding and file format as the LD_PRELOAD library.

use std::ffi::OsStr;
use std::fs;
use std::path::Path;

fn main() {
    let core = Path::new("c_core");
    // Cargo scans a directory given here recursively: any .c or .h change rebuilds.
    println!("cargo:rerun-if-changed=c_core");
    println!("cargo:rerun-if-env-changed=MALLOC_FREQ_WERROR");
    let mut sources: Vec<_> = fs::read_dir(core)
        .expect("c_core/ is missing: the crate must be built from a complete source tree")
        .map(|entry| entry.expect("cannot read c_core/").path())
        .filter(|path| path.extension() == Some(OsStr::new("c")))
        .collect();
    sources.sort();

    let mut build = cc::Build::new();
    for source in &sources {
        build.file(source);
    }
    build
        .include(core)
        .define("_GNU_SOURCE", None)
        .flag("-std=gnu11")
        // One instruction to reach the per-thread counters (DESIGN §1).
        .flag_if_supported("-ftls-model=initial-exec")
        .flag("-fno-omit-frame-pointer")
        // Only the malloc_freq_* API is ours to export.
        .flag("-fvisibility=hidden")
        .warnings(true)
        // Warnings are errors in this repository's own builds (`make` sets the variable); a
        // crate that depends on us must not break on a newer compiler's new warning.
        .warnings_into_errors(std::env::var_os("MALLOC_FREQ_WERROR").is_some())
        .compile("malloc_freq_core");

    // The core dlopens libunwind.so.8 at start-up rather than linking it (DESIGN §4).
    for lib in ["dl", "m", "pthread"] {
        println!("cargo:rustc-link-lib={}", lib);
    }
}
