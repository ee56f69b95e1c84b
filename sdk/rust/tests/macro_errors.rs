//! The errors the attribute macros give a plugin author, each a file of
//! `ui/` that must not compile, with the compiler's output in the `.stderr`
//! file beside it (trybuild). After a deliberate change of a message,
//! `TRYBUILD=overwrite cargo test -p sandwit-sdk --test macro_errors`
//! rewrites them.

#[test]
fn a_method_the_macros_refuse_does_not_compile() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
