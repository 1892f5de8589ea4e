//! Generates the C header include/horecon.h from src/ffi with cbindgen.
//! The header is committed; the tests fail when it differs from a fresh one.

use std::path::PathBuf;

fn main() {
    let crate_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    let mut parts = version
        .split('.')
        .map(|p| p.split('-').next().unwrap_or("0").to_string());
    let (major, minor, patch) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let mut config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is valid");
    config.after_includes = Some(format!(
        "\n#define HORECON_VERSION_MAJOR {major}\n#define HORECON_VERSION_MINOR {minor}\n#define HORECON_VERSION_PATCH {patch}\n#define HORECON_VERSION_STRING \"{version}\"\n"
    ));
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate include/horecon.h");
    let path = crate_dir.join("include").join("horecon.h");
    let mut text = Vec::new();
    bindings.write(&mut text);
    if std::fs::read(&path).ok().as_deref() != Some(&text[..]) {
        std::fs::create_dir_all(crate_dir.join("include")).expect("can create include/");
        std::fs::write(&path, &text).expect("can write include/horecon.h");
    }
}
