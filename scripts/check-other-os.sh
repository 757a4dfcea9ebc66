#!/usr/bin/env bash
# The OS seam holds: the workspace type-checks for macOS (library and CLI), and the
# library crates for Windows, where every reader answers "not supported on this OS"
# (actors/src/platform/unsupported.rs). Needs no linker: `cargo check` only. The
# targets' standard libraries come from rustup once per machine.
set -euo pipefail
cd "$(dirname "$0")/.."

macos=x86_64-apple-darwin
windows=x86_64-pc-windows-gnu
installed="$(rustup target list --installed)"
for target in "$macos" "$windows"; do
  grep -qx "$target" <<<"$installed" || rustup target add "$target"
done
# C dependencies (zstd's library) are compiled by their build scripts even under
# `cargo check`, with the other OS's compiler and headers, which this machine lacks.
# Nothing is linked here, so their objects are not needed: `true` stands in for the
# compiler and the archiver, and the Rust code is checked all the same.
for target in "$macos" "$windows"; do
  variable="$(tr '-' '_' <<<"$target")"
  export "CC_$variable=true" "AR_$variable=true"
done
cargo check --workspace --quiet --target "$macos"
# The CLI's `run` needs Unix signals and process groups; Windows gets the library.
cargo check --quiet --target "$windows" -p wattline-config -p wattline-diagnostics -p wattline-gpu -p wattline-actors -p wattline-exporters
cargo check --quiet --target "$windows" --lib
