#!/usr/bin/env bash
# energy-check.sh: on a host with an NVIDIA GPU, measures a GPU load that steps between
# full and idle (2 s busy, 1 s idle, PyTorch bf16 matrix products on every GPU) with
# `wattline run` polling every 100 ms, and compares per device, over the same window,
# the trapezoid of the dense power readings with NVML's energy counter:
#   trapezoid  within 2 % of the counter (PASS/FAIL); both figures, the power field the
#              trapezoid used, its readings, rate and gaps are printed
# Then, where NVML can be hidden from wattline (left out of LD_LIBRARY_PATH, or as root
# covered in a mount namespace of wattline's own), the same load again with wattline on its `nvidia-smi` fallback, which has no counter:
# its trapezoid is printed beside the NVML run's, for the same load, not the same window.
# Exits 1 on any FAIL, 2 when it cannot run.
#
# Environment:
#   WATTLINE_BIN   use this binary instead of building target/release/wattline
#   LOAD_SECONDS   how long each load runs (default 30)
#   OUT_DIR        keep each run's JSON report and ATOF files here (default: discarded)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
load_seconds=${LOAD_SECONDS:-30}
work=$(mktemp -d)
out=${OUT_DIR:-$work/out}
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT

die() {
    echo "energy-check: $*" >&2
    exit 2
}

command -v python3 >/dev/null 2>&1 || die "python3 is needed to run the load and read the reports"
command -v nvidia-smi >/dev/null 2>&1 || die "nvidia-smi not found"
if [ -n "${WATTLINE_BIN:-}" ]; then
    wattline=$WATTLINE_BIN
else
    (cd "$repo" && cargo build --release) || die "cargo build --release failed"
    wattline="$repo/target/release/wattline"
fi
[ -x "$wattline" ] || die "no wattline binary at $wattline"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
    || die "the load needs PyTorch with CUDA"

cat > "$work/load.py" <<'PY'
import os, time, torch
seconds = float(os.environ["LOAD_SECONDS"])
mats = [torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.bfloat16)
        for i in range(torch.cuda.device_count())]
torch.cuda.synchronize()
end = time.time() + seconds
while time.time() < end:
    busy_until = min(time.time() + 2.0, end)
    while time.time() < busy_until:
        for m in mats:
            m @ m
        torch.cuda.synchronize()
    time.sleep(max(0.0, min(1.0, end - time.time())))
PY

# One measured run: $1 names it, the rest (if any) is a command wattline runs under.
measure() {
    local name=$1
    shift
    mkdir -p "$out/$name-atof"
    LOAD_SECONDS=$load_seconds GENAI_GPU_COLLECTION_INTERVAL=0.1 \
        "$@" "$wattline" run --quiet --report json --atof "$out/$name-atof" -- python3 "$work/load.py" \
        > "$out/$name.json" || die "wattline run ($name) failed"
}

echo "energy-check: ${load_seconds}s load, NVML, 100 ms polls"
measure nvml

# The nvidia-smi fallback: NVML hidden from wattline only; the nvidia-smi it runs is a
# wrapper that runs the real one where NVML is in sight.
real_smi=$(command -v nvidia-smi)
mkdir -p "$work/bin"
nvml_dir=""
library_path=${LD_LIBRARY_PATH:-}
for dir in ${library_path//:/ }; do
    if [ -e "$dir/libnvidia-ml.so.1" ]; then nvml_dir=$dir; fi
done
smi_ran=no
if [ -n "$nvml_dir" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then
    printf '#!/bin/sh\necho "$*" >> %q\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$out/smi-calls.txt" "$library_path" "$real_smi" > "$work/bin/nvidia-smi"
    chmod +x "$work/bin/nvidia-smi"
    hidden=$(echo "$library_path" | tr ':' '\n' | grep -vxF "$nvml_dir" | paste -sd: -)
    echo "energy-check: the same load on the nvidia-smi fallback (NVML hidden: $nvml_dir left out of LD_LIBRARY_PATH)"
    PATH="$work/bin:$PATH" LD_LIBRARY_PATH=$hidden measure smi
    smi_ran=yes
elif [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 && command -v nsenter >/dev/null 2>&1; then
    # Found through the loader's cache: in a mount namespace of wattline's own, every
    # copy of the library reads as an empty file; the wrapper goes back to this one.
    libraries=$(ldconfig -p | awk '/libnvidia-ml\.so/ {print $NF}' | xargs -r readlink -f | sort -u)
    printf '#!/bin/sh\necho "$*" >> %q\nexec nsenter --mount=/proc/%s/ns/mnt -- %q "$@"\n' "$out/smi-calls.txt" "$$" "$real_smi" > "$work/bin/nvidia-smi"
    {
        echo '#!/bin/sh'
        for library in $libraries; do printf 'mount --bind /dev/null %q || exit 1\n' "$library"; done
        echo 'exec "$@"'
    } > "$work/hide-nvml.sh"
    chmod +x "$work/bin/nvidia-smi" "$work/hide-nvml.sh"
    echo "energy-check: the same load on the nvidia-smi fallback (NVML hidden:" $libraries")"
    PATH="$work/bin:$PATH" measure smi unshare --mount --propagation private "$work/hide-nvml.sh"
    smi_ran=yes
else
    echo "energy-check: SKIP nvidia-smi run: NVML cannot be hidden here (not through LD_LIBRARY_PATH, and no root for a mount namespace)"
fi

if [ "$smi_ran" = yes ]; then
    echo "energy-check: the nvidia-smi calls of the fallback run (count, arguments):"
    sort "$out/smi-calls.txt" | uniq -c | sort -rn
fi

python3 - "$out/nvml.json" "$smi_ran" "$out/smi.json" <<'PY'
import json, sys

failed = False


def report(status, field, detail):
    global failed
    failed = failed or status == "FAIL"
    print(f"{status} {field}: {detail}")


def devices(path):
    with open(path) as f:
        energy_report = json.load(f)
    return energy_report, {d["device_identifier"]: d for d in energy_report.get("devices", [])}


def describe(device):
    return (f"power fields {device.get('power_fields')}, {device.get('readings')} readings "
            f"at {device.get('sampling_rate_hz') or 0:.2f} Hz over {device.get('covered_seconds'):.2f} s, "
            f"{device.get('gaps')} gaps, mean {device.get('mean_watts')} W, max {device.get('max_watts')} W")


nvml_report, nvml = devices(sys.argv[1])
print(f"INFO gpu source: {nvml_report.get('gpu_source')}, window {nvml_report.get('started_at')} to {nvml_report.get('ended_at')}")
if not nvml:
    report("FAIL", "devices", f"the NVML run's report has no device ({nvml_report.get('gpu_unavailable')})")
for uuid, device in sorted(nvml.items()):
    counter, trapezoid = device.get("counter_kwh"), device.get("trapezoid_kwh")
    print(f"INFO nvml {uuid}: {describe(device)}; energy {device.get('energy_kwh')} kWh by {device.get('energy_source')}")
    if counter is None or trapezoid is None or counter <= 0:
        report("FAIL", f"trapezoid {uuid}", f"counter {counter} kWh, trapezoid {trapezoid} kWh")
        continue
    difference = (trapezoid - counter) / counter
    status = "PASS" if abs(difference) <= 0.02 else "FAIL"
    report(status, f"trapezoid {uuid}",
           f"{trapezoid * 3.6e6:.1f} J against the counter's {counter * 3.6e6:.1f} J: {difference * 100:+.3f} % (2 %)")
if sys.argv[2] == "yes":
    smi_report, smi = devices(sys.argv[3])
    print(f"INFO gpu source (fallback run): {smi_report.get('gpu_source')} ({smi_report.get('gpu_unavailable')})")
    for uuid, device in sorted(smi.items()):
        print(f"INFO nvidia-smi {uuid}: {describe(device)}; energy {device.get('energy_kwh')} kWh by "
              f"{device.get('energy_source')}")
        if uuid in nvml and device.get("mean_watts") and nvml[uuid].get("mean_watts"):
            ratio = device["mean_watts"] / nvml[uuid]["mean_watts"]
            print(f"INFO mean power, nvidia-smi run / NVML run (same load, another window): {ratio:.4f}")
sys.exit(1 if failed else 0)
PY
