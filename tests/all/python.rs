//! The Python sandbox: AI code in CPython calling plugin methods through
//! component imports, under limits, isolated.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sandwit::{
    AgentCtx, ContentPart, Event, Host, LimitKind, LiveEvent, Metering, MethodResult,
    PythonSandbox, RunLimits, RunOptions, RunOutcome, RunStatus, Toolbox,
};
use tokio::sync::OnceCell;

use crate::common::{
    artifacts, assert_ended_soon_after, assert_ok, assert_still_serving, cache_dir, ctx, host,
    load, until_preparer,
};

/// The sandbox and the plugins (the four examples and the hostile one),
/// loaded once for the whole test binary.
pub async fn sandbox() -> &'static (PythonSandbox, Toolbox) {
    static SANDBOX: OnceCell<(PythonSandbox, Toolbox)> = OnceCell::const_new();
    SANDBOX
        .get_or_init(|| async {
            let python = host().load_python_file(artifacts::PYTHON).await.unwrap();
            let mut plugins = Vec::new();
            for path in [
                artifacts::CALC,
                artifacts::KNOWLEDGE,
                artifacts::MESSENGER,
                artifacts::IMAGEGEN,
                artifacts::NOTES,
                artifacts::HOSTILE,
            ] {
                plugins.push(load(host(), path).await);
            }
            (python, Toolbox::new(&plugins).unwrap())
        })
        .await
}

/// The shared sandbox, with the echo plugin alone (whose `echo` returns
/// its argument).
async fn with_echo() -> (&'static PythonSandbox, Toolbox) {
    let (python, _) = sandbox().await;
    let echo = load(host(), artifacts::ECHO).await;
    (python, Toolbox::new(&[echo]).unwrap())
}

/// The lines `code` printed in a run with the echo plugin alone, which
/// must end ok.
async fn echo_lines(code: &str) -> Vec<String> {
    let (python, plugins) = with_echo().await;
    let outcome = python.run(&ctx(), &plugins, code).await;
    assert_ok(&outcome);
    outcome.stdout.lines().map(str::to_string).collect()
}

async fn run(code: &str) -> RunOutcome {
    let (python, plugins) = sandbox().await;
    python.run(&ctx(), plugins, code).await
}

fn tight() -> RunLimits {
    RunLimits {
        fuel: Some(1_000_000_000),
        time: Duration::from_secs(3),
        memory_bytes: 128 << 20,
        max_output_bytes: 64 << 10,
        max_calls: 5,
        ..RunLimits::default()
    }
}

async fn run_tight(code: &str, limits: &RunLimits) -> RunOutcome {
    let (python, plugins) = sandbox().await;
    python.run_with_limits(&ctx(), plugins, code, limits).await
}

/// Checks the run hit `kind`, and that the next run works.
async fn assert_limit(outcome: RunOutcome, kind: LimitKind) -> RunOutcome {
    assert_eq!(outcome.status, RunStatus::LimitExceeded, "{outcome:?}");
    assert_eq!(outcome.limit.as_ref().unwrap().kind, kind, "{outcome:?}");
    let next = run("print(calculate_sum(20, 22))").await;
    assert_ok(&next);
    assert_eq!(next.stdout, "42\n");
    outcome
}

#[tokio::test]
async fn every_curated_stdlib_module_works() {
    let code = r##"
import json, re, math, cmath, statistics, random, datetime, time, calendar
import collections, itertools, functools, operator, copy, string, textwrap, difflib
import unicodedata, html, urllib.parse, base64, binascii, hashlib, hmac, uuid, decimal
import fractions, heapq, bisect, array, struct, zlib, csv, io, pprint, dataclasses, enum
import typing, abc, contextlib, traceback
checks = {
    "json": json.loads(json.dumps({"a": [1, 2]})) == {"a": [1, 2]},
    "re": re.sub(r"\d+", "#", "a1b22") == "a#b#",
    "math": math.isclose(math.sqrt(2) ** 2, 2),
    "cmath": cmath.sqrt(-1) == 1j,
    "statistics": statistics.mean([1, 2, 3]) == 2,
    "random": 0 <= random.random() < 1,
    "datetime": datetime.datetime.strptime("2026-11-22", "%Y-%m-%d").day == 22,
    "time": time.time() > 1.7e9,
    "calendar": calendar.isleap(2028),
    "timezone": datetime.datetime.now(datetime.timezone.utc).tzinfo is datetime.timezone.utc,
    "collections": collections.Counter("aab")["a"] == 2,
    "itertools": list(itertools.accumulate([1, 2, 3])) == [1, 3, 6],
    "functools": functools.reduce(operator.add, [1, 2, 3]) == 6,
    "operator": operator.itemgetter(1)([5, 6]) == 6,
    "copy": copy.deepcopy([[1]]) == [[1]],
    "string": string.ascii_lowercase[0] == "a",
    "textwrap": textwrap.wrap("a b c", 3) == ["a b", "c"],
    "difflib": difflib.SequenceMatcher(None, "abc", "abd").ratio() > 0.6,
    "unicodedata": unicodedata.name("é") == "LATIN SMALL LETTER E WITH ACUTE",
    "html": html.escape("<a>") == "&lt;a&gt;",
    "urllib.parse": urllib.parse.urlparse("https://x.org/p?q=1").query == "q=1",
    "base64": base64.b64decode(base64.b64encode(b"hi")) == b"hi",
    "binascii": binascii.hexlify(b"\x01") == b"01",
    "hashlib": hashlib.sha256(b"").hexdigest().startswith("e3b0c442"),
    "hmac": len(hmac.new(b"k", b"m", "sha256").hexdigest()) == 64,
    "uuid": uuid.uuid4().version == 4,
    "decimal": decimal.Decimal("0.1") + decimal.Decimal("0.2") == decimal.Decimal("0.3"),
    "fractions": fractions.Fraction(1, 3) * 3 == 1,
    "heapq": heapq.nsmallest(1, [3, 1, 2]) == [1],
    "bisect": bisect.bisect([1, 2, 4], 3) == 2,
    "array": array.array("i", [1, 2]).tolist() == [1, 2],
    "struct": struct.unpack("<I", struct.pack("<I", 7)) == (7,),
    "zlib": zlib.decompress(zlib.compress(b"x" * 100)) == b"x" * 100,
    "csv": next(csv.reader(io.StringIO("a,b"))) == ["a", "b"],
    "io": io.BytesIO(b"ab").read(1) == b"a",
    "pprint": pprint.pformat({"a": 1}) == "{'a': 1}",
    "dataclasses": dataclasses.is_dataclass(dataclasses.make_dataclass("P", ["x"])),
    "enum": enum.Enum("C", "RED").RED.value == 1,
    "typing": typing.get_origin(typing.List[int]) is list,
    "abc": isinstance(abc.ABC, type),
    "contextlib": contextlib.suppress(ValueError) is not None,
    "traceback": "Error" in "".join(traceback.format_exception_only(ValueError("x"))),
}
bad = [name for name, ok in checks.items() if not ok]
print("failed:", bad)
print(len(checks), "modules work")
"##;
    let outcome = run(code).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "failed: []\n42 modules work\n");
}

#[tokio::test]
async fn a_module_the_sandbox_lacks_says_so() {
    // zoneinfo has no tz database to read in the component, so it is not offered.
    for module in ["sqlite3", "zoneinfo", "socket"] {
        let outcome = run(&format!("import {module}")).await;
        let error = outcome.error.unwrap();
        assert_eq!(error.type_name, "ModuleNotFoundError");
        assert!(
            error.message.starts_with(&format!(
                "No module named '{module}': the sandbox does not provide it"
            )),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn tools_positional_and_keyword() {
    let outcome = run(
        "a = calculate_sum(1, 2)\nb = calculate_sum(num2=5, num1=4)\nt = get_current_time()\n\
         print(a, b, sorted(t), type(t['unix']).__name__)",
    )
    .await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "3 9 ['iso', 'unix'] int\n");
    let calls: Vec<_> = outcome
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Call {
                plugin, method, ok, ..
            } => Some((plugin.as_str(), method.as_str(), *ok)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("calc", "calculate_sum", true),
            ("calc", "calculate_sum", true),
            ("calc", "get_current_time", true)
        ]
    );
}

#[tokio::test]
async fn a_behavior_returns_and_records_a_system_message() {
    let outcome = run("r = send_channel_message(text='shipped')\nprint(r)\nprint('goes on')").await;
    assert_ok(&outcome);
    assert_eq!(
        outcome.stdout,
        "Message sent to channel #general: shipped\ngoes on\n"
    );
    assert!(outcome.events.contains(&Event::SystemMessage {
        plugin: "messenger".into(),
        method: "send_channel_message".into(),
        text: "Message sent to channel #general: shipped".into(),
    }));
}

#[tokio::test]
async fn an_agent_call_stops_the_script() {
    let code = "print('before')\ntry:\n    search_knowledge_base('fuel')\nexcept BaseException:\n    print('caught')\nprint('after')";
    let outcome = run(code).await;
    assert_eq!(outcome.status, RunStatus::AgentHandoff, "{outcome:?}");
    assert_eq!(outcome.stdout, "before\n", "nothing after the call runs");
    let handoff = outcome.handoff.unwrap();
    assert_eq!(
        (handoff.plugin.as_str(), handoff.method.as_str()),
        ("knowledge", "search_knowledge_base")
    );
    let MethodResult::Agent(text) = handoff.result else {
        panic!("not an agent result")
    };
    assert!(text.contains("Fuel"));
}

#[tokio::test]
async fn a_multimodal_call_stops_the_script_with_a_png() {
    let outcome = run("generate_image_and_comment('tides')\nprint('after')").await;
    assert_eq!(outcome.status, RunStatus::AgentHandoff, "{outcome:?}");
    assert_eq!(outcome.stdout, "");
    let MethodResult::MultimodalAgent(parts) = outcome.handoff.unwrap().result else {
        panic!("not multimodal")
    };
    let ContentPart::Image(media) = &parts[1] else {
        panic!("no image")
    };
    assert_eq!(media.mime_type, "image/png");
    assert_eq!(&media.data[..4], b"\x89PNG");
}

#[tokio::test]
async fn arguments_bind_like_python() {
    for (code, type_name, needle) in [
        (
            "calculate_sum(1)",
            "TypeError",
            "missing 1 required positional argument: 'num2'",
        ),
        (
            "calculate_sum(1, 2, 3)",
            "TypeError",
            "takes 2 positional arguments but 3",
        ),
        (
            "calculate_sum(1, nope=2)",
            "TypeError",
            "unexpected keyword argument 'nope'",
        ),
        (
            "calculate_sum(1, {1, 2})",
            "TypeError",
            "argument 'num2': values of type set",
        ),
        (
            "calculate_sum(1, 2**64)",
            "OverflowError",
            "argument 'num2': the int",
        ),
        (
            "calculate_sum(1, 'x')",
            "PluginArgumentError",
            "\"x\" is not of type \"integer\"",
        ),
    ] {
        let outcome = run(code).await;
        assert_eq!(outcome.status, RunStatus::Error, "{code}");
        let error = outcome.error.unwrap();
        assert_eq!(error.type_name, type_name, "{code}: {error:?}");
        assert!(error.message.contains(needle), "{code}: {error:?}");
        assert_eq!(error.line, Some(1));
    }
    // A schema mismatch is a TypeError too, and values of every kind cross.
    // The exception is sandwit's, by its public module's name.
    let outcome = run(
        "try:\n    calculate_sum('a', 1)\nexcept TypeError as e:\n    print('TypeError', \
         type(e).__module__, type(e).__mro__[1].__module__)\n\
         print(search_knowledge_base.__doc__.splitlines()[0])",
    )
    .await;
    assert_ok(&outcome);
    assert!(
        outcome
            .stdout
            .starts_with("TypeError sandwit sandwit\nSearch the knowledge base"),
        "{}",
        outcome.stdout
    );
}

#[tokio::test]
async fn values_of_every_kind_cross_and_come_back() {
    let (python, plugins) = with_echo().await;
    let code = r#"
import math
deep = []
for _ in range(63):
    deep = [deep]
cases = [
    None, True, False, 0, 7, -2**63, 2**63 - 1, 1.5, -0.0, float("inf"), "", "héllo ✓\n",
    b"\x00\xff", bytearray(b"ab"), memoryview(b"cd"), (1, (2,)), [], {}, [None, [True, 2.5]],
    {"a": [1, {"b": None}], "c": b"x", "": "empty key"}, deep, list(range(300)),
    [0.5] * 8, ["a", "é"] * 4, [1] * 8 + [True], {"é": "ü"},
]
for case in cases:
    print(repr(echo(case)))
print(math.isnan(echo(float("nan"))))
import collections, enum
class Color(enum.IntEnum):
    RED = 3
class Loud(str):
    def __str__(self):
        return "LOUD"
Point = collections.namedtuple("Point", "x y")
print(repr(echo([Color.RED, Point(1, 2.5), collections.OrderedDict(a=1), Loud("quiet")])))
print(type(echo(True)).__name__, type(echo(1)).__name__)
deeper = [deep]
for bad in [
    {1, 2}, 2**63, -2**63 - 1, {1: "x"}, {"k": object()}, deeper, 1j,
    [0] * 9 + [2**63], "a\ud800", ["x"] * 8 + ["\udc80"], {"k\ud800": 1},
]:
    try:
        echo([0, bad])
    except Exception as e:
        print(type(e).__name__, e)
"#;
    let outcome = python.run(&ctx(), &plugins, code).await;
    assert_ok(&outcome);
    let deep = format!("{}{}", "[".repeat(64), "]".repeat(64));
    let too_deep = format!(
        "ValueError argument 'value'[1]{}: nested deeper than 64 levels",
        "[0]".repeat(63)
    );
    let range = format!(
        "[{}]",
        (0..300)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let expected = [
        "None",
        "True",
        "False",
        "0",
        "7",
        "-9223372036854775808",
        "9223372036854775807",
        "1.5",
        "-0.0",
        "inf",
        "''",
        "'héllo ✓\\n'",
        "b'\\x00\\xff'",
        "b'ab'",
        "b'cd'",
        "[1, [2]]",
        "[]",
        "{}",
        "[None, [True, 2.5]]",
        "{'a': [1, {'b': None}], 'c': b'x', '': 'empty key'}",
        &deep,
        &range,
        "[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]",
        "['a', 'é', 'a', 'é', 'a', 'é', 'a', 'é']",
        "[1, 1, 1, 1, 1, 1, 1, 1, True]",
        "{'é': 'ü'}",
        "True",
        "[3, [1, 2.5], {'a': 1}, 'quiet']",
        "bool int",
        "TypeError argument 'value'[1]: values of type set cannot be passed to a plugin method \
         (use None, bool, int, float, str, bytes, list, tuple or dict)",
        "OverflowError argument 'value'[1]: the int 9223372036854775808 does not fit in 64 bits",
        "OverflowError argument 'value'[1]: the int -9223372036854775809 does not fit in 64 bits",
        "TypeError argument 'value'[1]: dict keys must be str, not int",
        "TypeError argument 'value'[1]['k']: values of type object cannot be passed to a plugin \
         method (use None, bool, int, float, str, bytes, list, tuple or dict)",
        &too_deep,
        "TypeError argument 'value'[1]: values of type complex cannot be passed to a plugin \
         method (use None, bool, int, float, str, bytes, list, tuple or dict)",
        "OverflowError argument 'value'[1][9]: the int 9223372036854775808 does not fit in 64 bits",
        "ValueError argument 'value'[1]: the str has a lone surrogate at index 1, which is not \
         valid UTF-8",
        "ValueError argument 'value'[1][8]: the str has a lone surrogate at index 0, which is not \
         valid UTF-8",
        "ValueError argument 'value'[1]['k\\ud800']: the str has a lone surrogate at index 1, \
         which is not valid UTF-8",
    ];
    let lines: Vec<_> = outcome.stdout.lines().collect();
    assert_eq!(lines, expected);
}

#[tokio::test]
async fn malformed_marshal_from_the_code_is_refused() {
    // Code that calls the import itself, around the method functions: an
    // object `{"value": ...}` of each kind of bad value.
    let code = r#"
import marshal
import _sandwit_methods as methods
H = b"{u\x05\x00\x00\x00value"
n = 4_200_000
cases = [
    b"",
    H + b"<\x00\x00\x00\x000",
    H + b"i\x01",
    H + b"[\xff\xff\xff\xffN0",
    H + b"[" + n.to_bytes(4, "little") + b"N" * n + b"0",
    H + b"[\x01\x00\x00\x00" * 70 + b"N0",
    marshal.dumps({"value": 1}, 2) + b"N",
    marshal.dumps({"value": 2**64}, 2),
    marshal.dumps({1: 2}, 2),
    marshal.dumps({"value": "\ud800"}, 2),
]
for case in cases:
    print(*marshal.loads(methods.call("echo", case)))
print(echo([1, "ok"]))
"#;
    assert_eq!(
        echo_lines(code).await,
        [
            "invalid_arguments value has no nodes",
            "invalid_arguments byte 11: 0x3c does not start a value",
            "invalid_arguments the value ends early or claims more than it holds",
            "invalid_arguments the value ends early or claims more than it holds",
            "invalid_arguments value takes 16800041 bytes, more than the limit of \
             16777216",
            "invalid_arguments value is nested deeper than the limit of 64",
            "invalid_arguments bytes follow the end of the value, at byte 17",
            "invalid_arguments byte 11: an integer that is malformed or does not fit \
             in 64 bits",
            "invalid_arguments byte 1: an object key that is not a string",
            "invalid_arguments byte 11: a string that is not UTF-8",
            "[1, 'ok']",
        ]
    );
}

#[tokio::test]
async fn a_list_the_code_changes_after_its_check_crosses_as_checked() {
    let (python, plugins) = with_echo().await;
    // The code runs between the check of `a` (a list of one type, taken
    // whole) and the write of the arguments: from a list subclass's
    // `__iter__`, and from a replaced stdout's `flush` before the call.
    let code = r#"
import sys
a = [1] * 8
class L(list):
    def __iter__(self):
        a.append(2**100)
        return super().__iter__()
class Out:
    def write(self, text):
        return len(text)
    def flush(self):
        a.append("\ud800")
real, sys.stdout = sys.stdout, Out()
result = echo([a, L([1])])
sys.stdout = real
print(result == [[1] * 8, [1]], len(a))
"#;
    let outcome = python.run(&ctx(), &plugins, code).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "True 10\n");
}

#[tokio::test]
async fn wrong_python_types_for_the_import_are_a_type_error() {
    let (python, plugins) = with_echo().await;
    // Code that calls the import itself with what it cannot take: a
    // TypeError in the code, and the run goes on.
    let code = "import _sandwit_methods as methods\n\
                for args in [('echo', (b'{0',)), (1, b'{0'), ('echo',), ('\\ud800', b'{0')]:\n\
                \x20   try:\n\
                \x20       methods.call(*args)\n\
                \x20   except (TypeError, UnicodeEncodeError) as e:\n\
                \x20       print(type(e).__name__)\n\
                print(echo([1]))";
    let outcome = python.run(&ctx(), &plugins, code).await;
    assert_ok(&outcome);
    assert_eq!(
        outcome.stdout,
        "TypeError\nTypeError\nTypeError\nUnicodeEncodeError\n[1]\n"
    );
}

/// Past the call cap, the name of the call refused is whatever the code
/// sent through the import: a 100 MiB one is quoted from its start, and the
/// whole outcome stays small.
#[tokio::test]
async fn a_huge_method_name_past_the_call_cap_is_quoted_from_its_start() {
    let limits = RunLimits {
        fuel: None,
        time: Duration::from_secs(30),
        max_calls: 1,
        ..RunLimits::default()
    };
    let code = "import _sandwit_methods as m\nm.call('x', b'')\nm.call('\\x01' * (100 << 20), b'')";
    let outcome = run_tight(code, &limits).await;
    assert_eq!(
        outcome.status,
        RunStatus::LimitExceeded,
        "{:?}",
        outcome.error
    );
    let hit = outcome.limit.as_ref().unwrap();
    assert_eq!(hit.kind, LimitKind::Calls);
    assert!(
        hit.message
            .starts_with("made more than 1 method calls (the next was \"\\u{1}"),
        "{}",
        hit.message
    );
    assert!(
        hit.message.ends_with(&format!("({} bytes))", 100 << 20)),
        "{}",
        hit.message
    );
    let answer = format!("{outcome:?}").len();
    assert!(answer < 64 << 10, "the outcome takes {answer} bytes");
}

/// `os._exit(n)` ends a run as `sys.exit(n)` does: 0 a success, another
/// status a `SystemExit` error (status 1: WASI 0.2's exit carries only
/// success or failure); the sandbox serves the next run.
#[tokio::test]
async fn os_exit_ends_the_run_as_sys_exit_does() {
    let outcome = run("import os\nprint('before')\nos._exit(0)\nprint('never')").await;
    assert_ok(&outcome);
    assert!(!outcome.stdout.contains("never"), "{}", outcome.stdout);
    let outcome = run("import os\nos._exit(3)").await;
    assert_eq!(outcome.status, RunStatus::Error);
    let error = outcome.error.unwrap();
    assert_eq!(error.type_name, "SystemExit");
    assert_eq!(error.message, "the code exited with status 1 (os._exit)");
    let next = run("print(calculate_sum(20, 22))").await;
    assert_ok(&next);
    assert_eq!(next.stdout, "42\n");
}

#[tokio::test]
async fn the_c_invoke_answers_as_crossing_invoke_does() {
    // The method functions call `_sandwit_methods.invoke`, which handles
    // scalars that cross as they are and hands every other call to
    // `crossing.invoke`: both give each call the same value or error, and
    // flush a stream that is not the interpreter's own write-through one.
    let code = r#"
import sys, io, crossing
fast = echo.__globals__["_invoke"]
print(type(fast).__name__, fast is not crossing.invoke)
one = (("value", True),)
optional = (("value", False),)
cases = [
    ("echo", one, ("abc",)), ("echo", one, ("h\u00e9",)), ("echo", one, ("\ud800",)),
    ("echo", one, (2**63 - 1,)), ("echo", one, (-2**63,)), ("echo", one, (2**63,)),
    ("echo", one, (1.5,)), ("echo", one, (True,)), ("echo", one, (b"xy",)),
    ("echo", one, (None,)), ("echo", optional, (None,)), ("echo", one, ([1, "a"],)),
    ("echo", one, ()), ("echo", (), (1,)), ("echo", ("value",), (1,)),
    ("nope", (), ()), ("nop", (), ()),
    ("echo", one, ("a" * 5000,)), ("echo", one, ("\u00e9" * 5000,)),
    ("echo", one, ("a" * 4095 + "\u00e9",)),
]
def outcome(invoke, case):
    try:
        return repr(invoke(*case))
    except Exception as e:
        return f"{type(e).__name__}: {e}"
same = [outcome(fast, case) == outcome(crossing.invoke, case) for case in cases]
print(all(same), [i for i, ok in enumerate(same) if not ok])
print(outcome(fast, cases[10]), "|", outcome(fast, cases[2]))
flushes = []
class Out(io.StringIO):
    def flush(self):
        flushes.append(self.getvalue())
real, sys.stdout = sys.stdout, Out()
print("before the call", end="")
echo(1)
sys.stdout = real
print(flushes)
"#;
    assert_eq!(
        echo_lines(code).await,
        [
            "builtin_function_or_method True",
            "True []",
            "PluginArgumentError: echo: missing required argument `value` | ValueError: \
             argument 'value': the str has a lone surrogate at index 0, which is not valid UTF-8",
            "['before the call']",
        ]
    );
}

#[tokio::test]
async fn help_shows_the_docstring() {
    let outcome = run("help(calculate_sum)").await;
    assert_ok(&outcome);
    assert!(
        outcome.stdout.contains("calculate_sum(num1, num2)"),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome
            .stdout
            .contains("Add two integers and return their sum.")
    );
}

#[tokio::test]
async fn a_plugin_failure_can_be_caught() {
    let code = "try:\n    calculate_sum(2**62, 2**62)\nexcept PluginError as e:\n    print(e.kind, e.method, 'overflows' in str(e))\nprint('done')";
    let outcome = run(code).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "failed calculate_sum True\ndone\n");
}

#[tokio::test]
async fn errors_name_the_type_and_line_of_the_code() {
    let outcome = run("x = 1\n\ny = (\n").await;
    let error = outcome.error.unwrap();
    assert_eq!(error.type_name, "SyntaxError");
    assert_eq!(error.line, Some(3));

    let outcome = run("def f(d):\n    return d['missing']\n\nx = 1\nf({})\n").await;
    assert_eq!(outcome.status, RunStatus::Error);
    let error = outcome.error.unwrap();
    assert_eq!(
        (error.type_name.as_str(), error.message.as_str(), error.line),
        ("KeyError", "'missing'", Some(2))
    );
    assert!(
        error.traceback.contains("line 5, in <module>"),
        "{}",
        error.traceback
    );
    assert!(error.traceback.contains("return d['missing']"));
    assert!(
        !error.traceback.contains("app.py"),
        "only the code's frames"
    );
}

#[tokio::test]
async fn a_markdown_fence_is_stripped() {
    let outcome = run("```python\nprint('fenced')\n```").await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "fenced\n");
}

#[tokio::test]
async fn an_endless_loop_runs_out_of_fuel() {
    assert_limit(
        run_tight("while True: pass", &tight()).await,
        LimitKind::Fuel,
    )
    .await;
}

#[tokio::test]
async fn sleeping_hits_the_deadline() {
    let limits = RunLimits {
        time: Duration::from_millis(500),
        ..tight()
    };
    let outcome = run_tight("import time\ntime.sleep(3600)", &limits).await;
    assert_ended_soon_after(outcome.elapsed, limits.time);
    assert_limit(outcome, LimitKind::Time).await;
}

#[tokio::test]
async fn busy_code_under_the_default_fuel_runs_until_the_time_limit_set() {
    // No fuel budget by default: the time limit the user set decides how
    // long busy code runs, and it is the limit reported.
    assert_eq!(RunLimits::default().fuel, None);
    let limits = RunLimits {
        time: Duration::from_millis(1500),
        ..RunLimits::default()
    };
    let outcome = run_tight("while True: pass", &limits).await;
    assert_ended_soon_after(outcome.elapsed, limits.time);
    assert!(outcome.elapsed >= limits.time, "{:?}", outcome.elapsed);
    let outcome = assert_limit(outcome, LimitKind::Time).await;
    assert!(outcome.fuel_used > 0);
}

#[tokio::test]
async fn a_busy_loop_hits_the_epoch_deadline_without_fuel() {
    let host = Host::builder()
        .cache_dir(cache_dir())
        .metering(Metering::DeadlineOnly)
        .prepared_interpreters(0)
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let limits = RunLimits {
        time: Duration::from_millis(500),
        ..tight()
    };
    let none = Toolbox::default();
    let outcome = python
        .run_with_limits(
            &ctx(),
            &none,
            "print('spin', flush=True)\nwhile True: pass",
            &limits,
        )
        .await;
    assert_eq!(outcome.stdout, "spin\n");
    assert_eq!(outcome.fuel_used, 0, "fuel is not metered");
    assert_ended_soon_after(outcome.elapsed, limits.time);
    assert_limit(outcome, LimitKind::Time).await;
    let next = python.run(&ctx(), &none, "print(6 * 7)").await;
    assert_ok(&next);
    assert_eq!(next.stdout, "42\n");
}

#[tokio::test]
async fn a_memory_bomb_hits_the_memory_cap() {
    let outcome = run_tight("x = 'a' * (10**9)", &tight()).await;
    assert_limit(outcome, LimitKind::Memory).await;
    let outcome = run_tight("l = []\nwhile True:\n    l.append([0] * 100000)", &tight()).await;
    assert_limit(outcome, LimitKind::Memory).await;
}

#[tokio::test]
async fn a_print_flood_hits_the_output_cap() {
    let outcome = run_tight("while True:\n    print('flood ' * 100)", &tight()).await;
    let outcome = assert_limit(outcome, LimitKind::Output).await;
    assert_eq!(outcome.stdout.len(), 64 << 10);
}

#[tokio::test]
async fn unbounded_recursion_is_a_recursion_error_not_a_limit() {
    let outcome = run_tight("def f(n):\n    return f(n + 1)\nf(0)", &tight()).await;
    assert_eq!((outcome.status, &outcome.limit), (RunStatus::Error, &None));
    assert_eq!(outcome.error.unwrap().type_name, "RecursionError");
    // The code can catch it, as in CPython, and go on.
    let code = "def f(n):\n    return f(n + 1)\ntry:\n    f(0)\nexcept RecursionError:\n    print('caught')";
    let outcome = run_tight(code, &tight()).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "caught\n");
}

#[tokio::test]
async fn too_many_method_calls() {
    let outcome = run_tight("for i in range(10):\n    calculate_sum(i, 1)", &tight()).await;
    let outcome = assert_limit(outcome, LimitKind::Calls).await;
    assert!(
        outcome
            .limit
            .unwrap()
            .message
            .contains("more than 5 method calls")
    );
}

#[tokio::test]
async fn a_plugin_call_draws_on_what_is_left_of_the_run() {
    // The code burns much of its fuel, then calls a plugin that spins: the
    // plugin gets only what is left, and the run ends out of fuel. The
    // loop leaves room for what an interpreter instantiated for the run
    // spends defining the methods.
    let code = "n = 0\nwhile n < 250000:\n    n += 1\nspin()";
    let outcome = run_tight(code, &tight()).await;
    let outcome = assert_limit(outcome, LimitKind::Fuel).await;
    let message = &outcome.limit.unwrap().message;
    assert!(
        message.contains("plugin `hostile`, method `spin`"),
        "{message}"
    );
    let spun = outcome.events.iter().find_map(|e| match e {
        Event::Call { method, fuel, .. } if method == "spin" => Some(*fuel),
        _ => None,
    });
    assert!(
        spun.unwrap() < tight().fuel.unwrap(),
        "the plugin had less than a full budget"
    );

    // Likewise the time left: a plugin that sleeps ends the run at its deadline.
    let limits = RunLimits {
        time: Duration::from_millis(700),
        ..tight()
    };
    let outcome = run_tight("sleep()", &limits).await;
    assert_ended_soon_after(outcome.elapsed, limits.time);
    assert_limit(outcome, LimitKind::Time).await;
}

#[tokio::test]
async fn no_files_environment_processes_or_network() {
    for (code, type_name) in [
        ("open('/etc/passwd')", "FileNotFoundError"),
        ("import os\nos.listdir('/')", "FileNotFoundError"),
        ("import subprocess", "ModuleNotFoundError"),
        ("import os\nos.system('ls')", "AttributeError"),
    ] {
        let outcome = run(code).await;
        assert_eq!(outcome.status, RunStatus::Error, "{code}");
        assert_eq!(outcome.error.unwrap().type_name, type_name, "{code}");
    }
    let outcome = run("import os\nprint(dict(os.environ))").await;
    assert_eq!(outcome.stdout, "{}\n");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "for name in ('socket', '_socket'):\n    try:\n        m = __import__(name)\n        \
         s = m.socket(m.AF_INET, m.SOCK_STREAM)\n        s.connect(('127.0.0.1', {port}))\n        \
         print(name, 'connected')\n    except Exception as e:\n        print(name, 'blocked', type(e).__name__)"
    );
    let outcome = run(&code).await;
    assert_ok(&outcome);
    assert!(!outcome.stdout.contains("connected"), "{}", outcome.stdout);
    assert_eq!(outcome.stdout.matches("blocked").count(), 2);
    assert!(
        listener.accept().is_err(),
        "nothing reached the loopback listener"
    );
}

#[tokio::test]
async fn nothing_leaks_between_runs() {
    let first =
        run("import json\nleak = 42\njson.leak = 1\nimport random\nprint(random.random())").await;
    assert_ok(&first);
    let second = run(
        "import json\nprint('leak' in globals(), hasattr(json, 'leak'))\nimport random\nprint(random.random())",
    )
    .await;
    assert_ok(&second);
    let lines: Vec<_> = second.stdout.lines().collect();
    assert_eq!(lines[0], "False False");
    assert_ne!(lines[1], first.stdout.trim(), "random is seeded per run");
}

#[tokio::test]
async fn a_plugin_instance_serves_one_run() {
    // The calls of one run share the plugin's instance: `peek` sees what
    // `scribble` left.
    let code = "before = peek()\nscribble()\nprint(before.startswith('static=0x0 '), peek().startswith('static=0xdead '))";
    let outcome = run(code).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "True True\n");
    // The next run gets an instance of its own.
    let outcome = run("print(peek())").await;
    assert!(
        outcome.stdout.starts_with("static=0x0 "),
        "{}",
        outcome.stdout
    );
    // A call that traps ends its instance; the run's next call gets a new one.
    let code = "scribble()\ntry:\n    trap()\nexcept PluginError as e:\n    print(e.kind)\nprint(peek().startswith('static=0x0 '))";
    let outcome = run(code).await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "failed\nTrue\n");
    // Each call of a shared instance has the per-call caps afresh: both
    // floods keep 1,000 lines.
    let outcome = run("log_flood()\nlog_flood()").await;
    assert_ok(&outcome);
    let lines = |n: usize| {
        outcome
            .events
            .iter()
            .filter(|e| {
                matches!(e, Event::Plugin { event: sandwit::PluginEvent::Log(line), .. }
                    if line.message == format!("line {n}"))
            })
            .count()
    };
    assert_eq!((lines(0), lines(999), lines(1000)), (2, 2, 0));
}

/// A host of its own that prepares `count` interpreters per sandbox, and
/// its Python sandbox.
async fn preparing(count: usize) -> (sandwit::Host, PythonSandbox) {
    let host = sandwit::Host::builder()
        .cache_dir(crate::common::cache_dir())
        .prepared_interpreters(count)
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    (host, python)
}

/// Waits until `python` has `count` interpreters prepared.
async fn until_prepared(python: &PythonSandbox, count: usize) {
    let what = format!("{count} interpreters to be prepared");
    until_preparer(python, || python.prepared() >= count, &what).await;
}

#[tokio::test]
async fn prepared_interpreters_are_fresh_and_run_under_the_runs_limits() {
    // A sandbox of its own, so no other test takes its prepared interpreters.
    let python = host().load_python_file(artifacts::PYTHON).await.unwrap();
    let (_, plugins) = sandbox().await;
    let run = async |code: &str, limits: &RunLimits| {
        until_prepared(&python, 2).await;
        let outcome = python.run_with_limits(&ctx(), plugins, code, limits).await;
        assert!(
            outcome.prepared,
            "{code}: not run on a prepared interpreter"
        );
        outcome
    };
    let first = run(
        "leak = 42\nimport json, sys\njson.leak = 1\nprint('out')\nprint('err', file=sys.stderr)",
        &tight(),
    )
    .await;
    assert_ok(&first);
    // The streams the interpreter opened while it was prepared carry the
    // run's output.
    assert_eq!((&*first.stdout, &*first.stderr), ("out\n", "err\n"));
    let second = run(
        "import json\nprint('leak' in globals(), hasattr(json, 'leak'))\nprint(calculate_sum(1, 2))",
        &tight(),
    )
    .await;
    assert_ok(&second);
    assert_eq!(second.stdout, "False False\n3\n");
    // Each was seeded apart (componentize-py reseeds `random` from the
    // host's entropy in an instance's first call, here while it was prepared).
    let draw = "import random\nprint(random.random())";
    let draws = [run(draw, &tight()).await, run(draw, &tight()).await];
    assert_ok(&draws[0]);
    assert_ne!(
        draws[0].stdout, draws[1].stdout,
        "random is seeded per interpreter"
    );

    // The run's own limits apply, not those it was prepared under.
    let outcome = run("while True:\n    pass", &tight()).await;
    assert_eq!(outcome.limit.unwrap().kind, LimitKind::Fuel);
    let outcome = run("x = 'a' * (10**9)", &tight()).await;
    assert_eq!(outcome.limit.unwrap().kind, LimitKind::Memory);
    let outcome = run("print('x' * 100_000)", &tight()).await;
    assert_eq!(outcome.limit.unwrap().kind, LimitKind::Output);
    let calls = RunLimits {
        max_calls: 1,
        ..tight()
    };
    let outcome = run("calculate_sum(1, 2)\ncalculate_sum(1, 2)", &calls).await;
    assert_eq!(outcome.limit.unwrap().kind, LimitKind::Calls);

    // A memory cap below what a prepared interpreter already has: the run
    // instantiates its own, and the cap stops it there as it always did.
    until_prepared(&python, 2).await;
    let small = RunLimits {
        memory_bytes: 4 << 20,
        ..tight()
    };
    let outcome = python
        .run_with_limits(&ctx(), plugins, "print(1)", &small)
        .await;
    assert!(!outcome.prepared);
    assert_eq!(outcome.limit.unwrap().kind, LimitKind::Memory);
}

#[tokio::test]
async fn prepared_method_functions_serve_only_their_plugins() {
    let (host, python) = preparing(1).await;
    let calc = Toolbox::new(&[load(&host, artifacts::CALC).await]).unwrap();
    let notes = Toolbox::new(&[load(&host, artifacts::NOTES).await]).unwrap();
    let names = "import sys\nprint(sys.modules['app'].prepared, 'calculate_sum' in globals(), 'recall' in globals())";
    // The interpreter prepared before any run has no method functions; the
    // next one is made with calc's, as the latest run had.
    for expected in ["None True False\n", "None True False\n"] {
        until_prepared(&python, 1).await;
        let outcome = python.run(&ctx(), &calc, names).await;
        assert_ok(&outcome);
        assert!(outcome.prepared);
        assert_eq!(outcome.stdout, expected);
    }
    // A run with other plugins on an interpreter made for calc sees none of
    // calc's functions, only its own.
    until_prepared(&python, 1).await;
    let outcome = python.run(&ctx(), &notes, names).await;
    assert_ok(&outcome);
    assert!(outcome.prepared);
    assert_eq!(outcome.stdout, "None False True\n");
    let outcome = python
        .run(&ctx(), &calc, "print(calculate_sum(2, 3))")
        .await;
    assert_eq!(outcome.stdout, "5\n");
}

#[tokio::test]
async fn a_run_wakes_the_preparing_thread_once_it_sleeps() {
    // Runs do not wake the preparing thread while it polls; after
    // `park_after` with nothing to do (10 s unless a test sets it) it sleeps
    // until one does. The count of its sleeps shows it really sleeps before
    // the run; were the run's wake lost, it would sleep on and never
    // replace the interpreter the run took.
    let parks = Arc::new(AtomicUsize::new(0));
    let host = Host::builder()
        .cache_dir(cache_dir())
        .prepared_interpreters(1)
        .park_after(Duration::from_millis(150), parks.clone())
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    until_prepared(&python, 1).await;
    let asleep = || parks.load(Ordering::SeqCst) > 0;
    until_preparer(&python, asleep, "the thread to sleep").await;
    let slept = parks.load(Ordering::SeqCst);
    let outcome = python.run(&ctx(), &Toolbox::default(), "print(1)").await;
    assert_ok(&outcome);
    assert!(outcome.prepared);
    until_prepared(&python, 1).await;
    // Woken, it polls for `park_after` again before it sleeps again.
    let again = || parks.load(Ordering::SeqCst) > slept;
    until_preparer(&python, again, "the thread to sleep again").await;
}

/// Waits until `python` reuses its interpreters: on a fresh cache the
/// interpreter is first compiled for the sandbox's own engine, in the
/// background.
async fn until_reusable(python: &PythonSandbox) {
    let ready = || python.reuses_interpreters();
    until_preparer(python, ready, "the interpreter compiled for reuse").await;
}

#[tokio::test]
async fn only_a_sandbox_that_will_reuse_interpreters_is_warming_up() {
    // Preparing none, it never reuses them: nothing to wait for.
    let host = Host::builder()
        .cache_dir(cache_dir())
        .prepared_interpreters(0)
        .build()
        .unwrap();
    let none = host.load_python_file(artifacts::PYTHON).await.unwrap();
    assert!(!none.warming_up());
    assert!(!none.reuses_interpreters());
    // Preparing one, it warms up until it reuses them, then no longer.
    let (_host, python) = preparing(1).await;
    let settled = || {
        // Reusing is read first: the thread stops warming up before it
        // starts reusing, so a sandbox seen reusing is seen not warming up.
        let reuses = python.reuses_interpreters();
        let warming = python.warming_up();
        assert!(!(warming && reuses), "warming up while reusing");
        reuses
    };
    until_preparer(&python, settled, "reuse").await;
    assert!(!python.warming_up());
}

#[tokio::test]
async fn random_seeds_itself_by_its_first_use_in_each_run_whatever_name_reaches_it() {
    // `random` is seeded by the first call of one of its functions in a run
    // (crossing.py), on reused interpreters too: a name imported from it
    // draws differently in every run, and an explicit seed still repeats.
    let (_host, python) = preparing(1).await;
    until_reusable(&python).await;
    let code = r#"
from random import randint, choice
import random
print(randint(0, 2**62), choice("abcdefghijklmnopqrstuvwxyz" * 4))
random.seed(7)
a = [random.random(), randint(0, 99)]
random.seed(7)
print(a == [random.random(), randint(0, 99)], randint.__name__, random.randint.__name__)
"#;
    let mut reused = 0;
    let mut draws = std::collections::HashSet::new();
    for _ in 0..6 {
        until_prepared(&python, 1).await;
        let outcome = python.run(&ctx(), &Toolbox::default(), code).await;
        assert_ok(&outcome);
        let lines: Vec<_> = outcome.stdout.lines().collect();
        assert!(
            draws.insert(lines[0].to_string()),
            "drew {} again",
            lines[0]
        );
        assert_eq!(lines[1], "True randint randint");
        reused += usize::from(outcome.reused);
    }
    assert!(
        reused >= 4,
        "only {reused} of 6 runs were on a reused interpreter"
    );
}

#[tokio::test]
async fn a_reused_interpreter_holds_nothing_of_the_previous_run() {
    // One prepared interpreter, given back after each run that ends with
    // its code finished: the next run is on the same instance, its memory
    // restored. Each run checks for the last one's marks in a module, in
    // builtins, in the module table, and in memory the heap reuses (a
    // freed buffer full of marks), then leaves them.
    let (_host, python) = preparing(1).await;
    until_reusable(&python).await;
    let code = r#"
import builtins, functools, json, random, sys
print(hasattr(json, "mark"), hasattr(builtins, "mark"), "mark" in sys.modules, hasattr(functools, "mark"))
print(random.random())
found = [bytes(1 << 12) for _ in range(64)]
print(any(b"\xee" in b for b in found))
json.mark = builtins.mark = 1
sys.modules["mark"] = json
functools.mark = [bytes([0xEE]) * (1 << 12) for _ in range(64)]
del found
"#;
    let mut reused = 0;
    let mut draws = std::collections::HashSet::new();
    for _ in 0..6 {
        until_prepared(&python, 1).await;
        assert!(
            python.prepared_intact(),
            "a prepared interpreter differs from its snapshot"
        );
        let outcome = python.run(&ctx(), &Toolbox::default(), code).await;
        assert_ok(&outcome);
        assert!(outcome.prepared, "not run on a prepared interpreter");
        let lines: Vec<_> = outcome.stdout.lines().collect();
        assert_eq!(lines[0], "False False False False");
        assert_eq!(lines[2], "False", "a freed buffer of the last run is seen");
        // The generator's state is memory too: seeded per run, not restored.
        assert!(
            draws.insert(lines[1].to_string()),
            "random drew {} again",
            lines[1]
        );
        reused += usize::from(outcome.reused);
    }
    assert!(
        reused >= 4,
        "only {reused} of 6 runs were on a reused interpreter"
    );
    // Every byte of its memory is back as prepared, not only what Python
    // code can see.
    until_prepared(&python, 1).await;
    assert!(
        python.prepared_intact(),
        "a restored interpreter differs from its snapshot"
    );
}

/// Waits until the next run of `python` (a sandbox preparing one
/// interpreter) is on a reused interpreter: one compiled for reuse that
/// served a run already.
async fn until_reusing(python: &PythonSandbox) {
    until_reusable(python).await;
    for _ in 0..4 {
        until_prepared(python, 1).await;
        let outcome = python.run(&ctx(), &Toolbox::default(), "pass").await;
        assert_ok(&outcome);
        if outcome.reused {
            until_prepared(python, 1).await;
            return;
        }
    }
    panic!("4 runs in a row were not on a reused interpreter");
}

#[tokio::test]
async fn a_run_that_closes_its_stdout_leaves_the_next_run_its_own() {
    // The interpreter opened stdout while it was prepared, and its restored
    // memory refers to that handle. A run that closes it, and then opens
    // stderr (which the instance's handle table puts in the freed slot),
    // must not leave the next run printing into stderr, or into a handle
    // that is gone.
    let (_host, python) = preparing(1).await;
    let next_code = "import sys\nprint('out')\nprint('err', file=sys.stderr)";
    for code in [
        "import os, sys\nprint('closing')\nsys.stdout.flush()\nos.close(1)\nprint('e', file=sys.stderr)",
        "import os\nos.close(1)",
    ] {
        until_reusing(&python).await;
        let outcome = python.run(&ctx(), &Toolbox::default(), code).await;
        assert_ok(&outcome);
        assert!(outcome.reused, "{code:?}: not on a reused interpreter");
        until_prepared(&python, 1).await;
        let next = python.run(&ctx(), &Toolbox::default(), next_code).await;
        assert_ok(&next);
        assert_eq!(
            (&*next.stdout, &*next.stderr),
            ("out\n", "err\n"),
            "after {code:?}"
        );
    }
}

#[tokio::test]
async fn a_run_whose_future_is_dropped_gives_up_its_interpreter() {
    // The run's interpreter is gone with its future; the thread prepares
    // another in its place.
    let (_host, python) = preparing(1).await;
    until_reusing(&python).await;
    let (ctx, none) = (ctx(), Toolbox::default());
    // Dropped once it printed that it sleeps: it holds its interpreter then.
    let sleeping = Arc::new(tokio::sync::Notify::new());
    let options = RunOptions::new().on_event({
        let sleeping = sleeping.clone();
        move |event: &LiveEvent| {
            if matches!(event, LiveEvent::Stdout { text } if text.contains("sleeping")) {
                sleeping.notify_one();
            }
        }
    });
    let code = "import time\nprint('sleeping', flush=True)\ntime.sleep(60)";
    tokio::select! {
        outcome = python.run_with(&ctx, &none, code, &options) => {
            panic!("the run ended: {outcome:?}")
        }
        () = sleeping.notified() => {}
    }
    until_prepared(&python, 1).await;
    let next = python.run(&ctx, &none, "print(1)").await;
    assert_ok(&next);
    assert!(next.prepared);
}

#[tokio::test]
async fn a_reused_interpreter_keeps_no_plugin_instance_of_its_last_run() {
    // A pool of one instance: the plugin instance a run on a reused
    // interpreter called must be gone once the interpreter is restored
    // (the interpreter itself is not in the host's pool), or a call from
    // the host finds the pool full.
    let host = Host::builder()
        .cache_dir(cache_dir())
        .max_instances(1)
        .prepared_interpreters(1)
        .build()
        .unwrap();
    // Loaded first: the thread's interpreters take the slot until the
    // interpreter is compiled for the sandbox's own engine.
    let calc = load(&host, artifacts::CALC).await;
    let plugins = Toolbox::new(std::slice::from_ref(&calc)).unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    until_reusing(&python).await;
    let outcome = python
        .run(&ctx(), &plugins, "print(calculate_sum(1, 2))")
        .await;
    assert_ok(&outcome);
    assert_eq!(outcome.stdout, "3\n");
    assert!(outcome.reused);
    until_prepared(&python, 1).await;
    let result = calc
        .call(
            &ctx(),
            "calculate_sum",
            crate::common::args(serde_json::json!({"num1": 2, "num2": 40})),
        )
        .await;
    assert!(result.is_ok(), "{result:?}");
}

#[tokio::test]
async fn a_run_that_wrote_every_page_leaves_the_next_run_nothing() {
    // Python cannot address raw memory, so the host stands in for a run
    // that wrote every page the interpreter can write: once the run's
    // export returned, before the restore, every byte of its memory is
    // overwritten with its complement in the snapshot. The restore must
    // find and put back every page (a page it missed differs in every
    // byte): the interpreter is reused, its memory is the snapshot byte for
    // byte, and the next run sees nothing of the marks the code left (in
    // modules, builtins, the module table, a freed buffer) nor of the
    // scribble. Between the scribbles, runs that write what a run usually
    // writes let the pages they do not write come back unchanged four
    // restores in a row and be write-protected again, so the second
    // scribble is found by the kernel's tracking of protected pages.
    let (host, python) = preparing(1).await;
    let calc = load(&host, artifacts::CALC).await;
    let plugins = Toolbox::new(std::slice::from_ref(&calc)).unwrap();
    let code = r#"
import builtins, functools, json, random, sys
print(hasattr(json, "mark"), hasattr(builtins, "mark"), "mark" in sys.modules, hasattr(functools, "mark"))
found = [bytes(1 << 12) for _ in range(64)]
print(any(b"\xee" in b for b in found))
json.mark = builtins.mark = calculate_sum(20, 22)
sys.modules["mark"] = json
functools.mark = [bytes([0xEE]) * (1 << 12) for _ in range(64)]
del found
print(random.random())
"#;
    until_reusing(&python).await;
    let mut draws = std::collections::HashSet::new();
    for run in 0..8 {
        let scribbled = run == 0 || run == 6;
        if scribbled {
            python.scribble_after_next_run();
        }
        let outcome = python.run(&ctx(), &plugins, code).await;
        assert_ok(&outcome);
        assert!(
            outcome.reused,
            "run {run}: not on the reused interpreter (the last restore failed)"
        );
        let lines: Vec<_> = outcome.stdout.lines().collect();
        assert_eq!(
            lines[..2],
            ["False False False False", "False"],
            "run {run}"
        );
        assert!(draws.insert(lines[2].to_string()), "random drew again");
        until_prepared(&python, 1).await;
        assert!(
            python.prepared_intact(),
            "run {run} (scribbled over: {scribbled}): the restored memory differs from its snapshot"
        );
    }
}

#[tokio::test]
async fn a_reused_interpreter_makes_the_latest_runs_method_functions_once() {
    // The interpreter was prepared before any run named its plugins (at
    // the host's start, and then for runs with none). The first run with
    // calc makes its functions in the run; given back, the interpreter makes
    // them once and is snapshotted again, so the next runs only call them.
    // Fuel is exact: making the functions in the run costs far more than
    // the code's one call. A run of other plugins on it then sees none of
    // calc's functions.
    let (host, python) = preparing(1).await;
    let calc = load(&host, artifacts::CALC).await;
    let plugins = Toolbox::new(std::slice::from_ref(&calc)).unwrap();
    until_reusing(&python).await;
    let code = "print(calculate_sum(20, 22))";
    let mut fuel = Vec::new();
    for run in 0..3 {
        until_prepared(&python, 1).await;
        let outcome = python.run(&ctx(), &plugins, code).await;
        assert_ok(&outcome);
        assert!(outcome.reused, "run {run}: not on the reused interpreter");
        assert_eq!(outcome.stdout, "42\n", "run {run}");
        fuel.push(outcome.fuel_used);
    }
    assert!(
        fuel[1..].iter().all(|&later| later * 4 < fuel[0] * 3),
        "the runs after the first made the functions again: fuel {fuel:?}"
    );
    until_prepared(&python, 1).await;
    let outcome = python
        .run(&ctx(), &Toolbox::default(), "print(calculate_sum)")
        .await;
    assert!(outcome.reused);
    let error = outcome.error.expect("calc's function is not the run's");
    assert_eq!(error.type_name, "NameError", "{error:?}");
}

#[tokio::test]
async fn an_interpreter_whose_run_grew_its_memory_or_stopped_is_not_reused() {
    let (_host, python) = preparing(1).await;
    until_reusable(&python).await;
    let grows = "import functools\nfunctools.mark = bytes(range(256)) * (1 << 16)\nprint(len(functools.mark))";
    let traps = "while True: pass";
    let limits = RunLimits {
        fuel: Some(50_000_000),
        ..RunLimits::default()
    };
    for (code, status) in [(grows, RunStatus::Ok), (traps, RunStatus::LimitExceeded)] {
        until_prepared(&python, 1).await;
        let outcome = python
            .run_with_limits(&ctx(), &Toolbox::default(), code, &limits)
            .await;
        assert_eq!(outcome.status, status, "{outcome:?}");
        until_prepared(&python, 1).await;
        let next = python
            .run(
                &ctx(),
                &Toolbox::default(),
                "import functools\nprint(hasattr(functools, 'mark'))",
            )
            .await;
        assert_ok(&next);
        assert_eq!(next.stdout, "False\n");
        assert!(
            next.prepared && !next.reused,
            "ran on the interpreter of {code:?}"
        );
    }
}

#[tokio::test]
async fn runs_beyond_the_prepared_interpreters_use_the_hosts_pool() {
    // More runs alive at once (each sleeps, which yields) than interpreters
    // prepared: the rest instantiate in the host's pool, none fails.
    let (_host, python) = preparing(1).await;
    let runs: Vec<_> = (0..6)
        .map(|i| {
            let python = python.clone();
            tokio::spawn(async move {
                let code = format!("import time\ntime.sleep(0.3)\nprint({i})");
                (i, python.run(&ctx(), &Toolbox::default(), &code).await)
            })
        })
        .collect();
    for run in runs {
        let (i, outcome) = run.await.unwrap();
        assert_ok(&outcome);
        assert_eq!(outcome.stdout, format!("{i}\n"));
    }
}

#[tokio::test]
async fn a_host_can_prepare_no_interpreters() {
    // The run instantiates its own interpreter.
    let (_host, python) = preparing(0).await;
    let outcome = python.run(&ctx(), &Toolbox::default(), "print(1+1)").await;
    assert_ok(&outcome);
    assert!(!outcome.prepared);
}

#[tokio::test]
async fn a_plugin_cannot_be_in_a_set_twice() {
    // (Two plugins offering one method name: `contained`.)
    let calc = load(host(), artifacts::CALC).await;
    let err = Toolbox::new(&[calc.clone(), calc]).err().unwrap();
    assert!(
        err.to_string()
            .starts_with("two plugins claim the id `calc`"),
        "{err}"
    );
}

#[tokio::test]
async fn the_context_reaches_the_plugins() {
    let (python, plugins) = sandbox().await;
    let ctx = AgentCtx {
        channel_name: Some("#ops".into()),
        ..AgentCtx::new("chat-9")
    };
    let outcome = python
        .run(&ctx, plugins, "print(send_channel_message('hi'))")
        .await;
    assert_eq!(outcome.stdout, "Message sent to channel #ops: hi\n");
}

#[tokio::test]
async fn a_bad_interpreter_component_is_refused() {
    let problems = |err: sandwit::LoadError| match err {
        sandwit::LoadError::Rejected { problems, .. } => problems.join("\n"),
        other => panic!("not a rejection: {other}"),
    };
    let err = host().load_python("junk", b"junk").await.err().unwrap();
    assert!(problems(err).contains("not a WebAssembly binary"));
    let calc = std::fs::read(artifacts::CALC).unwrap();
    let err = host().load_python("calc.wasm", &calc).await.err().unwrap();
    assert!(problems(err).contains("does not export `sandwit:interpreter/runner@0.3.x`"));
}

#[tokio::test]
async fn a_full_pool_fails_the_call_that_needs_another_instance_and_says_so() {
    let host = Host::builder()
        .cache_dir(cache_dir())
        .max_instances(1)
        .prepared_interpreters(0)
        .build()
        .unwrap();
    let python = host.load_python_file(artifacts::PYTHON).await.unwrap();
    let calc = load(&host, artifacts::CALC).await;
    let plugins = Toolbox::new(std::slice::from_ref(&calc)).unwrap();
    // The interpreter takes the one slot: the plugin's instance finds none,
    // and the code sees a limit error it can catch.
    let code = "try:\n    calculate_sum(1, 2)\nexcept PluginError as e:\n    print(e.kind, e)\n";
    let outcome = python.run(&ctx(), &plugins, code).await;
    assert_ok(&outcome);
    assert!(
        outcome.stdout.starts_with("limit_exceeded ")
            && outcome.stdout.contains("instances limit exceeded")
            && outcome.stdout.contains("the host's pool is full"),
        "{}",
        outcome.stdout
    );
    // The slot is free again once the run is over.
    assert_still_serving(&host).await;
    assert_ok(&python.run(&ctx(), &plugins, "print(1 + 1)").await);

    for count in [0, 10_001] {
        let error = Host::builder().max_instances(count).build().err().unwrap();
        assert!(
            error
                .to_string()
                .contains(&format!("max_instances is {count}")),
            "{error}"
        );
    }
}

#[tokio::test]
async fn a_run_asking_more_memory_than_the_host_holds_is_refused_not_capped() {
    // The host's instances hold its largest memory limit; a run asking for
    // more would be capped there silently (a MemoryError well below what
    // it asked for), so it is refused, saying how to raise it.
    let python = host().load_python_file(artifacts::PYTHON).await.unwrap();
    let most = host()
        .run_limits()
        .memory_bytes
        .max(host().limits().memory_bytes);
    let limits = RunLimits {
        memory_bytes: most + (512 << 20),
        ..host().run_limits().clone()
    };
    let outcome = python
        .run_with_limits(&ctx(), &Toolbox::default(), "print(1)", &limits)
        .await;
    assert_eq!(outcome.status, RunStatus::Error, "{outcome:?}");
    let error = outcome.error.unwrap();
    assert_eq!(error.type_name, "LimitUnavailable");
    assert!(
        error.message.contains("raise the host's run limits"),
        "{error:?}"
    );
    let limits = RunLimits {
        memory_bytes: most,
        ..host().run_limits().clone()
    };
    let outcome = python
        .run_with_limits(&ctx(), &Toolbox::default(), "print(1)", &limits)
        .await;
    assert_ok(&outcome);
}
