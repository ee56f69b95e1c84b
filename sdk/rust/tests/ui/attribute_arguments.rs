use sandwit_sdk::tool;

/// Has a name of its own.
#[tool(name = "other")]
fn renamed() -> i64 {
    1
}

fn main() {}
