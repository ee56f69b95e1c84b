# Sourced by the scripts: installs the toolchain pieces the build needs, on a
# fresh machine too, and names the guest packages.
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
rustup component add clippy rustfmt >/dev/null 2>&1 || true
GUEST_PACKAGES="-p sandwit-sdk -p calc -p knowledge -p messenger -p imagegen -p notes -p weather -p echo -p hostile -p impostor -p services -p bad-manifest -p other-world"
# Guest components are built here (the same place tests/artifacts builds them).
GUEST_TARGET_DIR="target/guests"
GUEST_OUT="$GUEST_TARGET_DIR/wasm32-wasip2/guest"
