use sandwit_sdk::behavior;

struct Counter;

impl Counter {
    /// Counts.
    #[behavior]
    fn count(&self) -> String {
        String::new()
    }
}

fn main() {
    let _ = Counter.count();
}
