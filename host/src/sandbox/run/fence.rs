//! The markdown fence LLMs put around code, taken off.

/// Strips one markdown code fence (```` ``` ```` or ```` ```python ````) around
/// the whole code, as LLMs often add one.
pub fn strip_code_fence(code: &str) -> &str {
    let trimmed = code.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return code;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return code;
    };
    // The rest of the opening line is the language tag.
    match body.split_once('\n') {
        Some((tag, body)) if !tag.contains('`') && !tag.trim().contains(' ') => body,
        _ => code,
    }
}

#[cfg(test)]
mod tests {
    use super::strip_code_fence;

    #[test]
    fn strips_one_fence() {
        assert_eq!(strip_code_fence("```python\nprint(1)\n```"), "print(1)\n");
        assert_eq!(strip_code_fence("  ```\nx = 1\n```  \n"), "x = 1\n");
        assert_eq!(strip_code_fence("```py\nx = 1```"), "x = 1");
        assert_eq!(strip_code_fence("print('```')"), "print('```')");
        assert_eq!(strip_code_fence("x = 1"), "x = 1");
        assert_eq!(strip_code_fence("```not closed\nx"), "```not closed\nx");
    }
}
