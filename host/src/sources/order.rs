//! A method's parameters keep the order its schema declares them in, for
//! generated schemas: a tool source's call passes its arguments by
//! position, so an order the server did not write (its keys sorted, say)
//! sends each value to another parameter. The cases come from a seeded
//! generator, the same on every run (no property-testing crate is in the
//! lock file or the offline registry).

use sandwit_contract::Policy;
use sandwit_contract::manifest::Param;

use super::mcp::methods_of;
use super::openapi::{operations, python_name};

/// xorshift64*, seeded.
struct Cases(u64);

impl Cases {
    /// A number below `n`.
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }

    /// Up to `max` distinct parameter names (each its own Python name),
    /// each with whether it is required, in the order generated.
    fn params(&mut self, max: u64, taken: &mut Vec<String>) -> Vec<(String, bool)> {
        const FIRST: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
        const REST: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_";
        let mut params = Vec::new();
        let count = self.below(max + 1);
        while (params.len() as u64) < count {
            let mut name = String::from(FIRST[self.below(26) as usize] as char);
            for _ in 0..self.below(8) {
                name.push(REST[self.below(REST.len() as u64) as usize] as char);
            }
            if python_name(&name) != name || taken.contains(&name) {
                continue;
            }
            taken.push(name.clone());
            params.push((name, self.below(2) == 0));
        }
        params
    }
}

/// `{"a": {"type": "string"}, ...}` in `params`' order, as text.
fn properties(params: &[(String, bool)]) -> String {
    let members: Vec<String> = params
        .iter()
        .map(|(name, _)| format!("\"{name}\": {{\"type\": \"string\"}}"))
        .collect();
    format!("{{{}}}", members.join(", "))
}

/// The names of `params` marked required.
fn required(params: &[(String, bool)]) -> String {
    let names: Vec<String> = params
        .iter()
        .filter(|(_, required)| *required)
        .map(|(name, _)| format!("\"{name}\""))
        .collect();
    format!("[{}]", names.join(", "))
}

/// The order a method must have: the required parameters first, each part
/// in the order generated.
fn expected(params: &[(String, bool)]) -> Vec<(String, bool)> {
    let (mut first, rest): (Vec<_>, Vec<_>) = params.iter().cloned().partition(|(_, r)| *r);
    first.extend(rest);
    first
}

fn got(params: &[Param]) -> Vec<(String, bool)> {
    params
        .iter()
        .map(|p| (p.name.clone(), p.required))
        .collect()
}

#[test]
fn an_operations_parameters_and_body_members_keep_the_documents_order() {
    let mut cases = Cases(0x5EED_0001);
    for case in 0..300 {
        let mut taken = Vec::new();
        let query = cases.params(3, &mut taken);
        let members = cases.params(10, &mut taken);
        let parameters: Vec<String> = query
            .iter()
            .map(|(name, required)| {
                format!(
                    "{{\"name\": \"{name}\", \"in\": \"query\", \"required\": {required}, \
                     \"schema\": {{\"type\": \"string\"}}}}"
                )
            })
            .collect();
        // Text, parsed as a document is.
        let text = format!(
            "{{\"openapi\": \"3.1.0\", \"paths\": {{\"/x\": {{\"post\": {{\
             \"operationId\": \"x\", \"parameters\": [{}], \
             \"requestBody\": {{\"required\": true, \"content\": {{\"application/json\": \
             {{\"schema\": {{\"type\": \"object\", \"required\": {}, \"properties\": {}}}}}}}}}\
             }}}}}}}}",
            parameters.join(", "),
            required(&members),
            properties(&members)
        );
        let document = super::spec::parse(text.as_bytes()).unwrap();
        let (offered, skipped) = operations(&document, None).unwrap();
        assert!(skipped.is_empty(), "case {case}: {skipped:?}");
        let mut declared = query.clone();
        declared.extend(members.iter().cloned());
        assert_eq!(
            got(&offered[0].spec.params),
            expected(&declared),
            "case {case}: {text}"
        );
        let wires: Vec<&str> = offered[0]
            .plan
            .params
            .iter()
            .map(|p| p.wire.as_str())
            .collect();
        let names: Vec<&str> = offered[0]
            .spec
            .params
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(wires, names, "case {case}: each value goes to its own name");
    }
}

#[test]
fn an_mcp_tools_parameters_keep_its_input_schemas_order() {
    let policy = Policy::from_toml("[tools.d]\ncommand = [\"server\"]\n").unwrap();
    let policy = policy.tool("d").unwrap();
    let mut cases = Cases(0x5EED_0002);
    for case in 0..300 {
        let params = cases.params(12, &mut Vec::new());
        // Text, deserialized as rmcp deserializes a `tools/list` answer.
        let text = format!(
            "{{\"name\": \"t\", \"inputSchema\": {{\"type\": \"object\", \"required\": {}, \
             \"properties\": {}}}}}",
            required(&params),
            properties(&params)
        );
        let tool: rmcp::model::Tool = serde_json::from_str(&text).unwrap();
        let listing = methods_of(policy, &[tool]);
        assert!(
            listing.skipped.is_empty(),
            "case {case}: {:?}",
            listing.skipped
        );
        assert_eq!(
            got(&listing.methods[0].spec.params),
            expected(&params),
            "case {case}: {text}"
        );
    }
}
