//! Arbitrary bytes, mutated fixture components and WebAssembly text, loaded as
//! a plugin.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sandwit_fuzz::component(data));
