//! The check finds cycles planted in small crates, however they are
//! written, and passes a crate without one.

use std::path::{Path, PathBuf};

/// A crate of `files` (path, text) in a fresh folder; its root file.
fn planted(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("layers")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir.join("lib.rs")
}

fn members(cycles: &[sandwit_layers::Cycle]) -> Vec<Vec<String>> {
    cycles.iter().map(|c| c.members.clone()).collect()
}

#[test]
fn a_crate_without_a_cycle_passes() {
    let root = planted(
        "clean",
        &[
            ("lib.rs", "mod a;\nmod b;\npub use b::B;\n"),
            ("a.rs", "pub struct A;\n"),
            (
                "b.rs",
                "use crate::a::A;\npub struct B(A);\n#[cfg(test)]\nmod tests { use crate::B; }\n",
            ),
        ],
    );
    let report = sandwit_layers::check(&root).unwrap();
    assert!(report.clean(), "{report:?}");
    assert_eq!((report.files, report.modules), (3, 3));
}

#[test]
fn a_cycle_between_files_is_found_with_its_edges() {
    let root = planted(
        "two",
        &[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "b.rs",
                "pub struct B;\nfn f() -> crate::a::A { crate::a::A }\n",
            ),
        ],
    );
    let report = sandwit_layers::check(&root).unwrap();
    assert_eq!(members(&report.file_cycles), [["a", "b"]]);
    assert_eq!(members(&report.module_cycles), [["a", "b"]]);
    let edges = &report.file_cycles[0].edges;
    assert!(
        edges.contains(&("a".into(), "b".into(), "crate::b::B".into())),
        "{edges:?}"
    );
}

#[test]
fn what_fooled_the_regex_does_not_fool_it() {
    // A `\`-continued string (the old script's pattern deleted the line
    // after it, with the `use` on it), a reference inside a macro, a raw
    // string and a comment that only look like references.
    let root = planted(
        "fooled",
        &[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            (
                "a.rs",
                "pub const S: &str = \"one \\\n two\";\nuse crate::b::B;\npub struct A;\n\
                 // use crate::c::C;\nconst R: &str = r#\"crate::c::C\"#;\n",
            ),
            (
                "b.rs",
                "pub struct B;\nfn f() { let _ = format!(\"{:?}\", crate::a::A); }\n",
            ),
            ("c.rs", "pub struct C;\n"),
        ],
    );
    let report = sandwit_layers::check(&root).unwrap();
    assert_eq!(members(&report.file_cycles), [["a", "b"]], "{report:?}");
    assert!(!report.file_edges["a"].contains_key("c"), "{report:?}");
}

#[test]
fn a_cycle_between_folders_is_found_though_no_two_files_form_one() {
    // x/inner.rs -> y, y -> x (x/mod.rs): no file cycle, a module one.
    let root = planted(
        "folders",
        &[
            ("lib.rs", "mod x;\nmod y;\n"),
            ("x/mod.rs", "mod inner;\npub struct X;\n"),
            ("x/inner.rs", "use crate::y::Y;\n"),
            ("y.rs", "pub struct Y;\nuse crate::x::X;\n"),
        ],
    );
    let report = sandwit_layers::check(&root).unwrap();
    assert!(report.file_cycles.is_empty(), "{report:?}");
    assert_eq!(members(&report.module_cycles), [["x", "y"]]);
}

#[test]
fn relative_paths_and_inline_modules_resolve() {
    // `super::` from an inline module, and a child named without `self::`.
    let root = planted(
        "relative",
        &[
            ("lib.rs", "mod p;\nmod q;\n"),
            ("p/mod.rs", "mod kid;\npub fn f() { kid::g() }\n"),
            (
                "p/kid.rs",
                "pub fn g() {}\nmod inner { fn h() { super::super::super::q::Q; } }\n",
            ),
            ("q.rs", "pub struct Q;\npub fn k() { super::p::f() }\n"),
        ],
    );
    let report = sandwit_layers::check(&root).unwrap();
    assert_eq!(
        members(&report.file_cycles),
        [["p", "p::kid", "q"]],
        "{report:?}"
    );
}

#[test]
fn the_roots_re_exports_are_its_facade_not_its_code() {
    // `pub use` at the root is no dependency, and `crate::B` names `b`:
    // no cycle. Code in the root that uses a module that uses the root's
    // own item is one.
    let root = planted(
        "facade",
        &[
            (
                "lib.rs",
                "mod a;\nmod b;\npub use a::A;\npub use b::{B, B as Bee};\n\
                 pub use crate::b::B as Bb;\npub use std::time::Duration;\n",
            ),
            (
                "a.rs",
                "pub struct A(crate::B, crate::Bee, crate::Bb, crate::Duration);\n",
            ),
            ("b.rs", "pub struct B;\n"),
        ],
    );
    let report = sandwit_layers::check(&root).unwrap();
    assert!(report.clean(), "{report:?}");
    assert_eq!(report.file_edges["a"].keys().collect::<Vec<_>>(), ["b"]);
    let root = planted(
        "own",
        &[
            (
                "lib.rs",
                "mod a;\npub struct Setup;\nfn main() { a::run() }\n",
            ),
            ("a.rs", "pub fn run() { let _ = crate::Setup; }\n"),
        ],
    );
    let report = sandwit_layers::check(&root).unwrap();
    assert_eq!(members(&report.module_cycles), [["a", "crate"]]);
}
