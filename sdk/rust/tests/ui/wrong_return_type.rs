use sandwit_sdk::agent;

/// Answers with a number, which an agent method may not.
#[agent]
fn answer() -> i64 {
    42
}

fn main() {}
