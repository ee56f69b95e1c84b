//! What the host asks of the operating system beyond what std and wasmtime
//! offer: the kernel interfaces the Python sandbox's memory restore uses.

pub(crate) mod linux;
