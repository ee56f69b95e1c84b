use sandwit_sdk::tool;

///
///
#[tool]
fn blank(n: i64) -> i64 {
    n
}

fn main() {}
