//! Flat value nodes from a guest: decoded, and round-tripped when they are a
//! value.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sandwit_fuzz::value_nodes(data));
