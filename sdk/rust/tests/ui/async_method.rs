use sandwit_sdk::agent;

/// Waits for something.
#[agent]
async fn waits() -> String {
    String::new()
}

fn main() {}
