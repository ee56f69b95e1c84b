//! A value's marshal form from the Python sandbox (a call's arguments):
//! decoded, and round-tripped when it is one.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sandwit_fuzz::value_marshal(data));
