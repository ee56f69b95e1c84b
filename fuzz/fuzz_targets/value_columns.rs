//! A value in columns from the Python sandbox: decoded, and round-tripped when
//! it is one.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sandwit::fuzzing::value_columns(data));
