use sandwit_sdk::tool;

#[tool]
fn undocumented(n: i64) -> i64 {
    n
}

fn main() {}
