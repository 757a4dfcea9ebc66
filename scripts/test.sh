#!/usr/bin/env bash
# The test suite with what its real-system tests need: a venv (.ci/venv) holding the
# reference system (nemo-relay 0.10.4, for the conformance tests) and the rotel OTLP
# collector (for the exporter tests), a second one (.ci/venv-genai) with the GPU spec's
# reference (genai-otel-instrument 1.42.0), a third (.ci/venv-worker) with the
# reference's Python worker SDK (nemo-relay-plugin 0.11.0rc3), headless Chromium (for
# the HTML report test); then the release artefacts (scripts/dist.sh) installed with
# cargo off PATH (scripts/dist-check.sh); then `cargo test --workspace` (extra
# arguments go to it), the Python package's pytest suite against the wheel, in the
# reference's venv so the snapshot is compared with the reference's own in one
# process, the Node.js package's node:test suite against the addon the dist build
# placed, and the book (mdBook, warnings as errors).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.ci/venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "nemo-relay==0.10.4" "rotel==0.0.1a15"
export WATTLINE_REFERENCE_PYTHON="$PWD/$venv/bin/python"

# The GPU spec's reference (genai-otel-instrument, with pynvml and codecarbon) in a
# venv of its own: its OpenTelemetry SDK pins differ from nemo-relay's.
genai_venv=.ci/venv-genai
if [ ! -x "$genai_venv/bin/python" ]; then
  python3 -m venv "$genai_venv"
fi
"$genai_venv/bin/pip" install --quiet --disable-pip-version-check "genai-otel-instrument[gpu]==1.42.0"
export WATTLINE_GENAI_REFERENCE_PYTHON="$PWD/$genai_venv/bin/python"

# The reference system's published Python worker SDK, a real client of the host
# endpoint. An exact pre-release pin, installed without --pre so its dependencies stay
# on releases.
worker_venv=.ci/venv-worker
if [ ! -x "$worker_venv/bin/python" ]; then
  python3 -m venv "$worker_venv"
fi
"$worker_venv/bin/pip" install --quiet --disable-pip-version-check "nemo-relay-plugin==0.11.0rc3"
export WATTLINE_WORKER_SDK_PYTHON="$PWD/$worker_venv/bin/python"

# rotel-agent ships inside the rotel wheel.
WATTLINE_ROTEL_AGENT="$("$venv/bin/python" -c 'import os, rotel; print(os.path.join(os.path.dirname(os.path.abspath(rotel.__file__)), "rotel-agent"))')"
if [ ! -x "$WATTLINE_ROTEL_AGENT" ]; then
  echo "rotel-agent not found at $WATTLINE_ROTEL_AGENT" >&2
  exit 1
fi
export WATTLINE_ROTEL_AGENT

# Headless Chromium for the HTML report test (tests/report_html.rs), from Debian's
# package when it is not installed yet.
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
export WATTLINE_CHROMIUM=/usr/bin/chromium

# The release artefacts (scripts/dist.sh: the Python wheel, the npm package with its
# prebuilt addon, the CLI tarball), then each installed as a user without Rust
# installs it, with cargo off PATH, and the tours run (scripts/dist-check.sh). The
# dist build also leaves node/wattline.node beside node/index.js for the Node suite.
scripts/dist.sh
scripts/dist-check.sh
# The Python suite runs against the wheel, in the reference's venv so the snapshot is
# compared with the reference's own in one process, with its test tools.
# The OpenTelemetry SDK and proto types: tests/test_spans.py makes a parent span with
# the official SDK and decodes the spans wattline sends with the official types;
# zstandard reads the zstd event files tests/test_bursts.py has wattline write. The
# frameworks tests/test_frameworks.py drives against a local model server: the
# official openai client with OpenTelemetry's instrumentation of it (which imports
# only with opentelemetry-util-genai 0.4b0 and httpx pinned beside it), and the OpenAI
# Agents SDK; EcoLogits, whose estimate of a remote model call wattline's Python layer
# uses when it is installed (tests/test_remote_estimates.py compares the two).
"$venv/bin/pip" install --quiet --disable-pip-version-check "pytest==9.2.0" "pytest-asyncio==1.5.0" \
  "opentelemetry-sdk==1.45.2" "opentelemetry-proto==1.45.2" "zstandard==0.23.0" \
  "openai==3.63.0" "opentelemetry-instrumentation-openai-v2==2.4b0" \
  "opentelemetry-util-genai==0.4b0" "httpx==0.28.1" "openai-agents==0.24.0" "ecologits==0.11.3"
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps dist/wattline-*.whl

cargo test --workspace "$@"
# The packages' tests use the CLI that cargo test has just built.
"$venv/bin/pytest" -q python/tests
# The OpenTelemetry API and SDK for node/test/spans.test.js's programs and the span
# processor's tests, and the openai package with OpenTelemetry's instrumentation of it
# for node/test/frameworks.test.js (NODE_PATH).
node_otel=.ci/node-otel
if [ ! -d "$node_otel/node_modules/@opentelemetry/instrumentation-openai" ]; then
  mkdir -p "$node_otel"
  (cd "$node_otel" && npm install --no-audit --no-fund --loglevel=error \
    "@opentelemetry/api@1.9.0" "@opentelemetry/sdk-trace-base@2.12.1" \
    "@opentelemetry/context-async-hooks@2.12.1" \
    "@opentelemetry/instrumentation-openai@0.21.0" "openai@6.49.0")
fi
NODE_PATH="$PWD/$node_otel/node_modules" node --test node/test/*.test.js

# The book (docs/, mdBook pinned; installed once per machine): built with every
# warning an error. tests/docs_book.rs has checked its links and anchors.
mdbook_version=0.5.4
if [ "$(mdbook --version 2>/dev/null)" != "mdbook v$mdbook_version" ]; then
  cargo install --locked --quiet mdbook --version "$mdbook_version" --no-default-features --features search
fi
book_log="$(mktemp)"
mdbook build docs 2>&1 | tee "$book_log"
if grep -E "WARN|ERROR" "$book_log" >/dev/null; then
  echo "scripts/test.sh: the book built with warnings (above): fix them" >&2
  exit 1
fi
rm -f "$book_log"
