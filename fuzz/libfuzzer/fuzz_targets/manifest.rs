//! A plugin's manifest, structure-aware (schemas mostly JSON Schemas): checked
//! as a plugin's is.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sandwit_fuzz::manifest(data));
