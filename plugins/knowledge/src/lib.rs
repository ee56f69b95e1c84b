//! `knowledge`: an agent method that searches a small corpus shipped inside
//! the plugin and hands the best passages to the AI.

use sandwit_sdk::{Error, agent};

/// The corpus: (title, passage).
const CORPUS: &[(&str, &str)] = &[
    (
        "WebAssembly components",
        "A WebAssembly component is a portable binary that declares its imports and exports in WIT. \
         Components exchange strings, lists, records and variants through the canonical ABI, \
         so a host can call a plugin with typed values instead of serialized blobs.",
    ),
    (
        "Fuel",
        "Fuel is a deterministic CPU budget: the runtime decrements it as WebAssembly code runs and \
         traps when it reaches zero. The same program with the same input always uses the same fuel, \
         which makes limits reproducible across machines.",
    ),
    (
        "Epoch interruption",
        "Epoch interruption bounds wall-clock time: a ticker thread advances a global epoch and code \
         compiled with epoch checks traps once the store's deadline epoch has passed. It is cheaper \
         than fuel and also stops code that waits.",
    ),
    (
        "Capabilities",
        "A capability is a permission a plugin must request in its manifest and an operator must grant. \
         The effective set is the intersection of the two; anything else is denied, so a plugin can only \
         reach what it was given.",
    ),
    (
        "Python sandbox",
        "AI-written Python runs inside a CPython interpreter compiled to WebAssembly. It sees no files, \
         environment or network, and calls plugin methods as ordinary Python functions whose arguments \
         cross into the plugin as typed values.",
    ),
    (
        "Method kinds",
        "A tool returns a value to the calling code. An agent method returns a message for the AI and \
         ends the script. A behavior returns a system message and the script goes on. A multimodal agent \
         returns text and images for the AI and ends the script.",
    ),
    (
        "Copy-on-write memory images",
        "A pooling allocator can keep a component's initialized linear memory as an image and map it \
         copy-on-write into each new instance, so instantiation costs a few page mappings rather than \
         copying the heap.",
    ),
    (
        "Pickle",
        "Python's pickle format can run arbitrary code while loading. A server that unpickles bytes chosen \
         by a sandbox gives that sandbox code execution on the server.",
    ),
];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
        .map(str::to_lowercase)
        .collect()
}

/// Score of a passage: matching query words, titles counting double.
fn score(query: &[String], title: &str, passage: &str) -> usize {
    let (title, passage) = (words(title), words(passage));
    query
        .iter()
        .map(|q| {
            2 * title.iter().filter(|w| w.starts_with(q.as_str())).count()
                + passage.iter().filter(|w| w.starts_with(q.as_str())).count()
        })
        .sum()
}

/// Search the knowledge base and hand the best passages to the AI.
///
/// The script stops at this call: the passages go to the AI, which answers in
/// a new round.
///
/// Args:
///     query: What to look for, in plain words.
///     max_results: How many passages at most (1 to 5, default 3).
///
/// Returns:
///     str: The matching passages with their titles, best first.
///
/// Example:
///     >>> search_knowledge_base("how does fuel limit cpu time")
#[agent]
fn search_knowledge_base(query: String, max_results: Option<u32>) -> Result<String, Error> {
    let max = max_results.unwrap_or(3);
    if !(1..=5).contains(&max) {
        return Err(Error::invalid_arguments(
            "max_results must be between 1 and 5",
        ));
    }
    let terms = words(&query);
    if terms.is_empty() {
        return Err(Error::invalid_arguments(
            "the query has no words of three letters or more",
        ));
    }
    let mut hits: Vec<(usize, &str, &str)> = CORPUS
        .iter()
        .map(|(t, p)| (score(&terms, t, p), *t, *p))
        .filter(|(s, _, _)| *s > 0)
        .collect();
    hits.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    hits.truncate(max as usize);
    if hits.is_empty() {
        return Ok(format!("The knowledge base has nothing on \"{query}\"."));
    }
    let mut out = format!("Knowledge base results for \"{query}\":\n");
    for (i, (_, title, passage)) in hits.iter().enumerate() {
        out.push_str(&format!("\n{}. {title}\n{passage}\n", i + 1));
    }
    Ok(out)
}

sandwit_sdk::plugin! {
    id: "knowledge",
    name: "Knowledge base",
    version: env!("CARGO_PKG_VERSION"),
    author: "sandwit",
    description: "Searches a small built-in knowledge base about sandboxing and WebAssembly.",
    methods: [search_knowledge_base],
}
