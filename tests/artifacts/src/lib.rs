//! Paths of the guest components the tests use, built from source by this
//! crate's build script.
#![allow(missing_docs)]

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
