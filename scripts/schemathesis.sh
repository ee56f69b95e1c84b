# Sourced by scripts/test-registry and scripts/test-service: what both share
# to fuzz a real server's /openapi.json with schemathesis (pinned, in a
# local virtualenv, .venv-schemathesis, made here), one server process on
# loopback at a time. Source scripts/env.sh first.

SCHEMATHESIS_VERSION=4.32.5
SCHEMATHESIS_VENV="$PWD/.venv-schemathesis"
# Examples per operation; a script may lower its own default.
SCHEMATHESIS_EXAMPLES="${SANDWIT_SCHEMATHESIS_EXAMPLES:-50}"

# schemathesis_venv [PACKAGE==VERSION...]: the virtualenv with schemathesis
# and the extra pinned packages a script needs.
schemathesis_venv() {
  echo "== schemathesis $SCHEMATHESIS_VERSION $* (.venv-schemathesis)"
  if [[ ! -x "$SCHEMATHESIS_VENV/bin/python" ]]; then
    "${PYTHON:-python3}" -m venv "$SCHEMATHESIS_VENV"
    # Ignored by git without an entry in the tree's .gitignore.
    echo '*' >"$SCHEMATHESIS_VENV/.gitignore"
  fi
  "$SCHEMATHESIS_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "schemathesis==$SCHEMATHESIS_VERSION" "$@"
}

# A scratch folder ($SCHEMATHESIS_WORK) and the server started in it, both
# removed on exit.
SCHEMATHESIS_WORK="$(mktemp -d)"
SCHEMATHESIS_SERVER=""
schemathesis_cleanup() {
  if [[ -n "$SCHEMATHESIS_SERVER" ]]; then
    kill "$SCHEMATHESIS_SERVER" 2>/dev/null || true
    wait "$SCHEMATHESIS_SERVER" 2>/dev/null || true
  fi
  rm -rf "$SCHEMATHESIS_WORK"
}
trap schemathesis_cleanup EXIT

# schemathesis_start COMMAND...: starts a server that prints `listening on
# URL` on stdout, its stderr in $SCHEMATHESIS_WORK/server.log, and sets
# SCHEMATHESIS_BASE to the URL once it listens (fails if it exits first,
# or does not listen within 15 minutes: a `sandwit serve` on a cold cache
# compiles its interpreters first, the scientific one for minutes on a busy
# 2-core machine).
schemathesis_start() {
  "$@" >"$SCHEMATHESIS_WORK/stdout" 2>"$SCHEMATHESIS_WORK/server.log" &
  SCHEMATHESIS_SERVER=$!
  for _ in $(seq 1 9000); do
    if grep -q '^listening on ' "$SCHEMATHESIS_WORK/stdout"; then break; fi
    if ! kill -0 "$SCHEMATHESIS_SERVER" 2>/dev/null; then
      cat "$SCHEMATHESIS_WORK/server.log"
      return 1
    fi
    sleep 0.1
  done
  SCHEMATHESIS_BASE="$(sed -n 's/^listening on //p' "$SCHEMATHESIS_WORK/stdout")"
  [[ -n "$SCHEMATHESIS_BASE" ]] || {
    echo "the server did not start"
    cat "$SCHEMATHESIS_WORK/server.log"
    return 1
  }
}

# schemathesis_run TOKEN [ST-ARGS...]: schemathesis against
# $SCHEMATHESIS_BASE/openapi.json with TOKEN, $SCHEMATHESIS_EXAMPLES examples
# per operation and a fixed seed; then the server must still answer
# /healthz and must never have logged the token.
schemathesis_run() {
  local token="$1"
  shift
  echo "== schemathesis against $SCHEMATHESIS_BASE/openapi.json ($SCHEMATHESIS_EXAMPLES examples per operation)"
  "$SCHEMATHESIS_VENV/bin/st" run "$SCHEMATHESIS_BASE/openapi.json" \
    --max-examples "$SCHEMATHESIS_EXAMPLES" \
    --header "Authorization: Bearer $token" \
    --request-timeout 300 \
    --seed 1 \
    "$@"
  "$SCHEMATHESIS_VENV/bin/python" -c \
    'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=60)' \
    "$SCHEMATHESIS_BASE/healthz"
  if grep -q "$token" "$SCHEMATHESIS_WORK/server.log"; then
    echo "the token was logged"
    return 1
  fi
}
