#!/usr/bin/env bash
# Installs what scripts/dist.sh left in dist/ as a user without Rust would, and runs
# the tours: cargo and rustc are taken off PATH (and the check fails if either is
# still found), then a fresh venv installs the wheel, a fresh npm project the npm
# tarball, and the CLI tarball is unpacked. Prints how long each install took.
# The wheel's platform tag is checked with auditwheel against what it links.
set -euo pipefail
cd "$(dirname "$0")/.."
repository="$PWD"

wheel="$(ls dist/wattline-*.whl)"
tarball="$(ls dist/wattline-*.tgz)"
cli="$(ls dist/wattline-*.tar.gz)"

# auditwheel (pinned) in the dist tools' venv: the tag the wheel claims must be one
# its linked symbols allow.
tools=.ci/venv-dist
"$tools/bin/pip" install --quiet --disable-pip-version-check "auditwheel==6.4.2"
tag="$(basename "$wheel" .whl | awk -F- '{print $NF}')"
shown="$("$tools/bin/auditwheel" show "$wheel")"
echo "$shown" | grep -q -- "\"$tag\"" || {
  echo "dist-check: $wheel claims $tag, which auditwheel does not accept:" >&2
  echo "$shown" >&2
  exit 1
}
case "$tag" in
  manylinux*) ;;
  *) echo "dist-check: $wheel is tagged $tag, not manylinux" >&2; exit 1 ;;
esac

# No Rust from here on.
python_bin="$(dirname "$(python3 -c 'import sys; print(sys.executable)')")"
export PATH="$python_bin:/usr/local/bin:/usr/bin:/bin"
export CARGO_HOME=/nonexistent RUSTUP_HOME=/nonexistent
for tool in cargo rustc; do
  if command -v "$tool" >/dev/null 2>&1; then
    echo "dist-check: $tool is still on PATH ($(command -v "$tool"))" >&2
    exit 1
  fi
done

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
home="$scratch/home"
mkdir -p "$home"

seconds_since() { echo "$(( $(date +%s%N) / 1000000 - $1 ))" | awk '{printf "%.1f", $1 / 1000}'; }

# Python: a fresh venv, the wheel only (no index), then the tour.
started=$(( $(date +%s%N) / 1000000 ))
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install --quiet --disable-pip-version-check --no-index "$wheel"
echo "dist-check: wheel installed in $(seconds_since "$started") s (venv included)"
# Copied out of the checkout, so only the installed package can be imported.
cp python/examples/tour.py "$scratch/tour.py"
(cd "$scratch" && HOME="$home" "$scratch/venv/bin/python" tour.py) > "$scratch/python.out"
grep -q "planner" "$scratch/python.out" || { cat "$scratch/python.out"; exit 1; }
echo "dist-check: python/examples/tour.py ran"

# Node: a fresh project, the tarball (its install script places the prebuilt addon).
mkdir -p "$scratch/project"
started=$(( $(date +%s%N) / 1000000 ))
(cd "$scratch/project" && npm init -y >/dev/null && \
  npm install --no-audit --no-fund --loglevel=error --foreground-scripts "$repository/$tarball" > "$scratch/npm.out")
echo "dist-check: npm package installed in $(seconds_since "$started") s"
grep -q "installed the prebuilt addon" "$scratch/npm.out" || { cat "$scratch/npm.out"; exit 1; }
cp node/examples/tour.js "$scratch/project/tour.js"
(cd "$scratch/project" && HOME="$home" node tour.js) > "$scratch/node.out"
grep -q "planner" "$scratch/node.out" || { cat "$scratch/node.out"; exit 1; }
echo "dist-check: node/examples/tour.js ran"

# The CLI: unpack, measure a command, read the manual page's title.
started=$(( $(date +%s%N) / 1000000 ))
tar -xzf "$cli" -C "$scratch"
echo "dist-check: CLI unpacked in $(seconds_since "$started") s"
wattline="$(ls -d "$scratch"/wattline-*/bin/wattline)"
HOME="$home" "$wattline" run --quiet --report json -- true > "$scratch/report.json"
"$python_bin/python3" -c 'import json, sys; json.load(open(sys.argv[1]))' "$scratch/report.json"
grep -q '^\.TH wattline 1' "$(dirname "$wattline")/../share/man/man1/wattline.1"
bash -n "$(dirname "$wattline")/../share/bash-completion/completions/wattline"
echo "dist-check: the CLI ran a command, and its manual page and completions are in place"
