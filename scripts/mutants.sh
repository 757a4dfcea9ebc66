#!/usr/bin/env bash
# Mutation testing (cargo-mutants, installed once per machine) of the code every
# per-step figure passes through: the energy account (energy/, against its own tests)
# and the report's renderers and compare (src/report/, against the library's unit
# tests and the report tests that read the concurrent-steps fixture and real runs).
# Each mutant is a small change to the code (an operator swapped, a function's body
# replaced); a "missed" one is a change no test noticed. Writes mutants.out/ under
# target/mutants/{energy,report}. Takes hours on two cores: the report's part builds
# the library once per mutant (debug info off to make that faster).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p target/mutants
command -v cargo-mutants >/dev/null 2>&1 || cargo install --locked --quiet cargo-mutants --version 27.1.0
part="${1:-all}"
if [ "$part" = all ] || [ "$part" = energy ]; then
  cargo mutants --package wattline-energy --output target/mutants/energy
fi
if [ "$part" = all ] || [ "$part" = report ]; then
  CARGO_PROFILE_DEV_DEBUG=0 cargo mutants --file 'src/report/**' --output target/mutants/report -- \
    --lib --test concurrent_steps --test compare --test report_table --test report_csv
fi
