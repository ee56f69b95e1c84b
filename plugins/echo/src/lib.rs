//! `echo`: the smallest possible tools, for measuring the cost of a method
//! call itself (the benchmarks use it).

use sandwit_sdk::{Value, tool};

/// Do nothing.
///
/// Returns:
///     None
///
/// Example:
///     >>> nop()
#[tool]
fn nop() {}

/// Return the value given.
///
/// Args:
///     value: Any value.
///
/// Returns:
///     Any: The same value.
///
/// Example:
///     >>> echo([1, "two"])
///     [1, 'two']
#[tool]
fn echo(value: Value) -> Value {
    value
}

sandwit_sdk::plugin! {
    id: "echo",
    name: "Echo",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Does nothing, or returns its argument: for measuring calls.",
    methods: [nop, echo],
}
