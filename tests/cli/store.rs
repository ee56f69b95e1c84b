//! The plugin store behind the command: what one `sandwit` process stores,
//! the next one finds.

use std::process::Command;

use crate::common::{artifacts, assert_succeeded, cache_dir, pin_line, tempdir};

fn sandwit_cli(store: &std::path::Path, policy: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sandwit"))
        .arg("--cache-dir")
        .arg(cache_dir().join("cli"))
        .arg("--store")
        .arg(store)
        .arg("--policy")
        .arg(policy)
        .args(args)
        .output()
        .unwrap();
    assert_succeeded(&out);
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn stored_data_survives_a_restart_of_the_process() {
    let dir = tempdir("store", "restart");
    let (store, policy) = (dir.join("store.db"), dir.join("policy.toml"));
    let pins = pin_line(artifacts::NOTES);
    std::fs::write(
        &policy,
        format!("[plugins.notes]\ngrant = [\"store\"]\n{pins}"),
    )
    .unwrap();
    let user = ["--user-id", "ada"];
    let remember = [
        &[
            "call",
            artifacts::NOTES,
            "remember",
            "--args",
            r#"{"note": "tea, no sugar"}"#,
        ][..],
        &user,
    ]
    .concat();
    assert!(sandwit_cli(&store, &policy, &remember).contains("1"));
    let recall = [&["call", artifacts::NOTES, "recall"][..], &user].concat();
    let out = sandwit_cli(&store, &policy, &recall);
    assert!(out.contains("tea, no sugar"), "{out}");
}

/// `sandwit run --session` with the tests' cache, `store` and a data
/// directory of `dir`'s (where the session key is made): exit code, stdout,
/// stderr.
fn run_in_session(dir: &std::path::Path, session: &str, code: &str) -> (bool, String, String) {
    let run = [
        "run",
        "--python",
        artifacts::PYTHON,
        "--session",
        session,
        "-c",
        code,
    ];
    let (status, out, err) = sandwit_in(dir, &run);
    (status == Some(0), out, err)
}

#[test]
fn a_session_survives_a_restart_of_the_process_and_a_foreign_key_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir("store", "sessions");
    let (ok, _, err) = run_in_session(
        &dir,
        "turns",
        "import fractions\nclass Acc(list):\n    pass\nacc = Acc([fractions.Fraction(1, 3)])",
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("session: turns (run 1, started; stored, "),
        "{err}"
    );
    // The key was made, the user's alone.
    let key = dir.join("data/sandwit/session.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // Another process finds what the first left, restored from the store.
    let (ok, out, err) = run_in_session(
        &dir,
        "turns",
        "acc.append(acc[0] * 2)\nprint(sum(acc), type(acc).__name__)",
    );
    assert!(ok, "{err}");
    assert_eq!(out, "1 Acc\n");
    assert!(
        err.contains("session: turns (run 2, restored from the store; stored"),
        "{err}"
    );

    // A failed run leaves the session as the last good run made it.
    let (ok, _, err) = run_in_session(&dir, "turns", "acc.clear()\nraise KeyError('x')");
    assert!(!ok && err.contains("its changes dropped"), "{err}");
    let (_, out, _) = run_in_session(&dir, "turns", "print(len(acc))");
    assert_eq!(out, "2\n");

    // With another key, the stored session is refused, not restored.
    std::fs::write(&key, [9u8; 32]).unwrap();
    let (ok, _, err) = run_in_session(&dir, "turns", "print(acc)");
    assert!(!ok && err.contains("SessionRefused"), "{err}");
    assert!(
        err.contains("not signed by this host's session key"),
        "{err}"
    );
    // A key others may read is refused before anything runs.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (ok, _, err) = run_in_session(&dir, "turns", "1");
    assert!(!ok && err.contains("chmod 600"), "{err}");
}

/// `sandwit ARGS` with the tests' cache, a store, data directory and
/// policy (if there is one) of `dir`'s: exit code, stdout, stderr.
fn sandwit_in(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sandwit"));
    command
        .arg("--cache-dir")
        .arg(cache_dir().join("cli"))
        .arg("--store")
        .arg(dir.join("store.db"));
    let policy = dir.join("policy.toml");
    if policy.exists() {
        command.arg("--policy").arg(policy);
    }
    let out = command
        .args(args)
        .env("XDG_DATA_HOME", dir.join("data"))
        .env_remove("SANDWIT_SESSION_KEY_FILE")
        .env_remove("SANDWIT_POLICY")
        .output()
        .unwrap();
    crate::common::exited(out)
}

#[test]
fn a_paused_run_is_resumed_by_another_process_once() {
    let dir = tempdir("store", "pauses");
    std::fs::write(
        dir.join("policy.toml"),
        "[approval]\npause_for = [\"dangerous\"]\n\n\
         [plugins.calc.methods.calculate_sum]\ndangerous = true\n",
    )
    .unwrap();
    let code = "import random\nseed = random.random()\nprint('seed', seed)\n\
                got = calculate_sum(num1=1, num2=2)\nprint('got', got, seed)";
    let run = [
        "run",
        "--python",
        artifacts::PYTHON,
        "--plugin",
        artifacts::CALC,
        "-c",
        code,
    ];
    // A paused run's token, from the line that says how to resume it.
    let pause = || {
        let (status, out, err) = sandwit_in(&dir, &run);
        assert_eq!(status, Some(3), "{out}{err}");
        assert!(err.contains("paused at calc.calculate_sum("), "{err}");
        let token = err
            .split_whitespace()
            .find(|w| w.starts_with("swp1_"))
            .unwrap_or_else(|| panic!("no token in {err}"));
        (token.to_string(), out)
    };
    let resume = |token: &str, answer: &[&str]| {
        let args = [
            &[
                "resume",
                "--python",
                artifacts::PYTHON,
                "--plugin",
                artifacts::CALC,
            ][..],
            answer,
            &[token],
        ]
        .concat();
        sandwit_in(&dir, &args)
    };
    let (token, out) = pause();
    let seed = out
        .lines()
        .next()
        .unwrap()
        .strip_prefix("seed ")
        .unwrap()
        .to_string();
    // Shown, the call is not answered: the token stays good.
    let (status, out, err) = resume(&token, &["--show"]);
    assert_eq!(status, Some(0), "{out}{err}");
    assert!(
        out.starts_with(r#"calc.calculate_sum({"num1":1,"num2":2}), waiting until "#),
        "{out}"
    );
    let (status, out, err) = resume(&token, &["--result", "40"]);
    assert_eq!(status, Some(0), "{out}{err}");
    assert_eq!(out, format!("seed {seed}\ngot 40 {seed}\n"));
    let (status, _, err) = resume(&token, &["--approve"]);
    assert_eq!(status, Some(1));
    assert!(
        err.contains("ResumeRefused: no paused run has this token"),
        "{err}"
    );

    // Discarded, it ends unanswered, and the token is spent.
    let (token, _) = pause();
    let (status, out, err) = resume(&token, &["--discard"]);
    assert_eq!(status, Some(0), "{out}{err}");
    assert!(out.ends_with("): discarded, never made\n"), "{out}");
    let (status, _, err) = resume(&token, &["--result", "1"]);
    assert_eq!(status, Some(1));
    assert!(err.contains("resumed or discarded already"), "{err}");

    // Approved, the call is made when the run resumes.
    let (token, _) = pause();
    let (status, out, err) = resume(&token, &["--approve"]);
    assert_eq!(status, Some(0), "{err}");
    assert!(out.ends_with("got 3 ") || out.contains("\ngot 3 "), "{out}");

    // A function of the caller's, with no policy that pauses anything: its
    // call pauses, and another process answers it with an exception, then
    // a value.
    let dir = tempdir("store", "functions");
    let code = "try:\n    ask('why?')\nexcept LookupError as e:\n    print('raised', e)\n\
                print('got', ask(n=2))";
    let asked = [
        "run",
        "--python",
        artifacts::PYTHON,
        "--function",
        "ask",
        "-c",
        code,
    ];
    let (status, out, err) = sandwit_in(&dir, &asked);
    assert_eq!(status, Some(3), "{out}{err}");
    assert!(
        err.contains(r#"paused at client.ask({"args":["why?"],"kwargs":{}})"#),
        "{err}"
    );
    let token = |err: &str| {
        let token = err.split_whitespace().find(|w| w.starts_with("swp1_"));
        token
            .unwrap_or_else(|| panic!("no token in {err}"))
            .to_string()
    };
    let answer = |token: &str, answer: &[&str]| {
        let args = [
            &["resume", "--python", artifacts::PYTHON][..],
            answer,
            &[token],
        ]
        .concat();
        sandwit_in(&dir, &args)
    };
    let (status, out, err) = answer(&token(&err), &["--raise", "LookupError=nobody knows"]);
    assert_eq!(status, Some(3), "{out}{err}");
    assert!(
        err.contains(r#"client.ask({"args":[],"kwargs":{"n":2}})"#),
        "{err}"
    );
    let (status, out, err) = answer(&token(&err), &["--result", "\"yes\""]);
    assert_eq!(status, Some(0), "{out}{err}");
    assert_eq!(out, "raised nobody knows\ngot yes\n");
}
