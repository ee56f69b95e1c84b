use sandwit_sdk::{FromValue, tool};

/// Takes anything.
#[tool]
fn anything<T: FromValue>(value: T) -> i64 {
    drop(value);
    1
}

fn main() {}
