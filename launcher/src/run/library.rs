//! Where `libcuprof.so` is, and how it is preloaded.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use cuprof_analysis::escape::terminal::Shown;

/// `libcuprof.so`: `$CUPROF_LIB`, else beside this executable (a cargo build's `target/*/`),
/// else in `../lib` from it, else in the `cuprof` Python package installed beside it (the
/// wheel puts this executable in `PREFIX/bin` and the library in
/// `PREFIX/lib/pythonX.Y/site-packages/cuprof/`).
pub(super) fn find_library(
    cuprof_lib: Option<OsString>,
    exe: io::Result<PathBuf>,
) -> Result<PathBuf> {
    if let Some(lib) = cuprof_lib.filter(|v| !v.is_empty()) {
        let lib = PathBuf::from(lib);
        if !lib.is_file() {
            bail!(
                "CUPROF_LIB={} is not a file: point it at libcuprof.so, or unset it to use the one installed beside cuprof",
                lib.shown()
            );
        }
        return lib
            .canonicalize()
            .with_context(|| format!("CUPROF_LIB={}", lib.shown()));
    }
    let exe = exe.context("cannot find libcuprof.so: cannot locate the cuprof executable")?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let lib_dir = dir.join("..").join("lib");
    let mut candidates = vec![dir.join("libcuprof.so"), lib_dir.join("libcuprof.so")];
    candidates.extend(python_packages(&lib_dir));
    for c in &candidates {
        if c.is_file() {
            return c.canonicalize().with_context(|| c.shown().to_string());
        }
    }
    bail!(
        "cannot find libcuprof.so: looked for {} and {}, and in the cuprof Python package under {}; reinstall cuprof (pip install cuprof), build it (cargo build -p cuprof-preload) or set CUPROF_LIB=/path/to/libcuprof.so",
        candidates[0].shown(),
        candidates[1].shown(),
        lib_dir.shown()
    )
}

/// `LIB/python3.*/{site,dist}-packages/cuprof/libcuprof.so`, the newest Python first (the
/// library is the same for every Python 3; one left by an older Python is the fallback).
fn python_packages(lib_dir: &Path) -> Vec<PathBuf> {
    let mut pythons: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(lib_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let version = name.strip_prefix("python3")?;
            let key = std::iter::once(3)
                .chain(version.split('.').filter_map(|v| v.parse().ok()))
                .collect();
            Some((key, e.path()))
        })
        .collect();
    pythons.sort_by(|a, b| b.cmp(a));
    pythons
        .into_iter()
        .flat_map(|(_, p)| {
            ["site-packages", "dist-packages"]
                .map(|s| p.join(s).join("cuprof").join("libcuprof.so"))
        })
        .collect()
}

/// `lib` in front of an existing `LD_PRELOAD` (ld.so separates entries by ':' or space).
pub(super) fn ld_preload(lib: &Path, existing: Option<&OsStr>) -> Result<OsString> {
    let bytes = lib.as_os_str().as_encoded_bytes();
    if bytes.iter().any(|&b| b == b':' || b == b' ' || b == b'\t') {
        bail!(
            "libcuprof.so's path {} holds a ':' or a space, which LD_PRELOAD cannot express; set CUPROF_LIB to a path without them (a symlink will do)",
            lib.shown()
        );
    }
    let mut v = lib.as_os_str().to_owned();
    if let Some(existing) = existing.filter(|e| !e.is_empty()) {
        v.push(":");
        v.push(existing);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_prepends() {
        let lib = Path::new("/opt/cuprof/lib/libcuprof.so");
        assert_eq!(
            ld_preload(lib, None).unwrap(),
            "/opt/cuprof/lib/libcuprof.so"
        );
        assert_eq!(
            ld_preload(lib, Some(OsStr::new(""))).unwrap(),
            "/opt/cuprof/lib/libcuprof.so"
        );
        assert_eq!(
            ld_preload(lib, Some(OsStr::new("/a.so /b.so"))).unwrap(),
            "/opt/cuprof/lib/libcuprof.so:/a.so /b.so"
        );
        assert!(ld_preload(Path::new("/my dir/libcuprof.so"), None).is_err());
    }

    #[test]
    fn library_search() {
        let dir = std::env::temp_dir().join(format!("cuprof-run-lib-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        let exe = dir.join("bin").join("cuprof");
        assert!(find_library(None, Ok(exe.clone())).is_err());
        std::fs::write(dir.join("lib/libcuprof.so"), b"").unwrap();
        let found = find_library(None, Ok(exe.clone())).unwrap();
        assert_eq!(found, dir.join("lib/libcuprof.so").canonicalize().unwrap());
        std::fs::write(dir.join("bin/libcuprof.so"), b"").unwrap();
        assert_eq!(
            find_library(None, Ok(exe.clone())).unwrap(),
            dir.join("bin/libcuprof.so").canonicalize().unwrap()
        );
        let err = find_library(Some("/nonexistent/libcuprof.so".into()), Ok(exe)).unwrap_err();
        assert!(err
            .to_string()
            .contains("CUPROF_LIB=/nonexistent/libcuprof.so"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn library_in_the_installed_python_package() {
        // The wheel's layout: PREFIX/bin/cuprof, PREFIX/lib/pythonX.Y/site-packages/cuprof/.
        let dir = std::env::temp_dir().join(format!("cuprof-run-pkg-{}", std::process::id()));
        let exe = dir.join("bin").join("cuprof");
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        for py in ["python3.9", "python3.12"] {
            let pkg = dir.join("lib").join(py).join("site-packages/cuprof");
            std::fs::create_dir_all(&pkg).unwrap();
            std::fs::write(pkg.join("libcuprof.so"), b"").unwrap();
        }
        std::fs::create_dir_all(dir.join("lib/python3.10/dist-packages/cuprof")).unwrap();
        std::fs::write(
            dir.join("lib/python3.10/dist-packages/cuprof/libcuprof.so"),
            b"",
        )
        .unwrap();
        let found = |dir: &Path| find_library(None, Ok(dir.join("bin").join("cuprof"))).unwrap();
        // The newest Python's package, 3.12 before 3.10 (numbers, not text).
        assert_eq!(
            found(&dir),
            dir.join("lib/python3.12/site-packages/cuprof/libcuprof.so")
                .canonicalize()
                .unwrap()
        );
        std::fs::remove_dir_all(dir.join("lib/python3.12")).unwrap();
        assert_eq!(
            found(&dir),
            dir.join("lib/python3.10/dist-packages/cuprof/libcuprof.so")
                .canonicalize()
                .unwrap()
        );
        // A library beside the executable comes first.
        std::fs::write(dir.join("bin/libcuprof.so"), b"").unwrap();
        assert_eq!(
            found(&dir),
            dir.join("bin/libcuprof.so").canonicalize().unwrap()
        );
        std::fs::remove_dir_all(dir.join("lib")).unwrap();
        std::fs::remove_file(dir.join("bin/libcuprof.so")).unwrap();
        let err = find_library(None, Ok(exe)).unwrap_err().to_string();
        assert!(err.contains("in the cuprof Python package under"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
