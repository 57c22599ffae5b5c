//! Finds ALFWorld's game files before any test is built, with the same search as the
//! `rlvmr` binary (`alfworld::locate`), from the repository. When they are missing the test
//! build stops here with one message saying where to put them, instead of every test that
//! reads a game failing on its own.

#[path = "../alfworld/src/locate.rs"]
#[allow(dead_code)]
mod locate;

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=ALFWORLD_DATA");
    println!("cargo:rerun-if-env-changed=HOME");
    let repository = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("../..");
    for place in locate::candidates(&repository) {
        println!("cargo:rerun-if-changed={}", place.display());
    }
    match locate::find_data(&repository) {
        Some(path) => {
            let path = path.canonicalize().unwrap_or(path);
            println!("cargo:rustc-env=RLVMR_TEST_ALFWORLD_DATA={}", path.display());
        }
        None => {
            eprintln!("\nThe tests read ALFWorld's game files. {}.\n", locate::missing_data_help(&repository));
            std::process::exit(1);
        }
    }
}
