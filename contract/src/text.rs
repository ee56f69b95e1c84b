//! Text for messages: cut to a size, quoted from a bounded prefix. Under
//! the error types and everything that words a message, so that wording
//! one depends on nothing else.

/// Cuts `s` to at most `max` bytes (on a character boundary), marking the cut
/// with `…`. A cut string gives back the memory it no longer uses.
pub fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        truncate(&mut s, max);
        s.push('…');
        s.shrink_to_fit();
    }
    s
}

/// Cuts `s` to at most `max` bytes, on a character boundary, unmarked.
pub fn truncate(s: &mut String, max: usize) {
    if s.len() > max {
        let mut at = max;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
}

/// `text` quoted as Rust's `{:?}` does, from at most its first `max` bytes:
/// describing a huge name or key costs no more than a short one.
pub fn quote(text: &str, max: usize) -> String {
    let mut at = max.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let quoted = format!("{:?}", &text[..at]);
    if at < text.len() {
        format!("{quoted}… ({} bytes)", text.len())
    } else {
        quoted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_gives_memory_back_and_marks_the_cut() {
        let long = "é".repeat(1 << 20);
        let short = cut(long, 5);
        assert_eq!(short, "éé…");
        assert!(short.capacity() < 64, "{}", short.capacity());
        assert_eq!(cut("abc".into(), 3), "abc");
    }

    #[test]
    fn quote_reads_only_the_start() {
        assert_eq!(quote("a\"b", 10), "\"a\\\"b\"");
        assert_eq!(quote(&"k".repeat(1000), 3), "\"kkk\"… (1000 bytes)");
        assert_eq!(quote("éé", 3), "\"é\"… (4 bytes)");
    }
}
