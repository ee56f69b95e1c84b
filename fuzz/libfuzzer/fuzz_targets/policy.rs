//! The operator's policy file: arbitrary text parsed as TOML.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sandwit_fuzz::policy(data));
