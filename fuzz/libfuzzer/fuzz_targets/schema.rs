//! A JSON Schema (text, or generated) bounded and compiled, and a value checked
//! against it within the work bound.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sandwit_fuzz::schema(data));
