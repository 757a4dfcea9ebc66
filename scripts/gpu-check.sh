#!/usr/bin/env bash
# gpu-check.sh: compare wattline's GPU readings with nvidia-smi on a host that has an
# NVIDIA GPU. Builds wattline (release), starts a small GPU load when PyTorch with
# CUDA is installed, then in one run reads nvidia-smi, `wattline collect --compact`,
# and nvidia-smi again, and checks per device:
#   uuid    the set of NVIDIA device identifiers equals nvidia-smi's UUIDs
#   memory  memory used within 1 % (of the larger value, at least 2 MiB) of an
#           nvidia-smi reading taken just before or just after, or between them
#   power   the mean power wattline's energy stage measured over a few seconds
#           (`wattline run --report json`, sampling every 0.5 s) within 5 % of the
#           mean of nvidia-smi power readings taken every 0.5 s in the same window
# Prints PASS/FAIL/SKIP per field and exits 1 on any FAIL, 2 when it cannot run.
#
# Environment:
#   WATTLINE_BIN   use this binary instead of building target/release/wattline
#   NVIDIA_SMI     nvidia-smi to query (default: the one on PATH)
#   LOAD_SECONDS   how long the optional load runs (default 60)
#   WARMUP_SECONDS wait after starting the load before reading (default 5)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
smi=${NVIDIA_SMI:-nvidia-smi}
load_seconds=${LOAD_SECONDS:-60}
warmup_seconds=${WARMUP_SECONDS:-5}
work=$(mktemp -d)
load_pid=""

cleanup() {
    if [ -n "$load_pid" ] && kill -0 "$load_pid" 2>/dev/null; then
        kill "$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

die() {
    echo "gpu-check: $*" >&2
    exit 2
}

command -v python3 >/dev/null 2>&1 || die "python3 is needed to read the JSON snapshot"
command -v "$smi" >/dev/null 2>&1 || die "nvidia-smi not found ($smi)"
"$smi" -L >/dev/null 2>&1 || die "nvidia-smi does not work on this host"

if [ -n "${WATTLINE_BIN:-}" ]; then
    wattline=$WATTLINE_BIN
else
    echo "gpu-check: building wattline (release)"
    (cd "$repo" && cargo build --release) || die "cargo build --release failed"
    wattline="$repo/target/release/wattline"
fi
[ -x "$wattline" ] || die "no wattline binary at $wattline"

if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu-check: starting a ${load_seconds}s PyTorch load on every GPU"
    LOAD_SECONDS=$load_seconds python3 - <<'PY' &
import os, time, torch
end = time.time() + float(os.environ["LOAD_SECONDS"])
mats = [torch.randn(4096, 4096, device=f"cuda:{i}") for i in range(torch.cuda.device_count())]
while time.time() < end:
    for m in mats:
        m @ m
    torch.cuda.synchronize()
PY
    load_pid=$!
    sleep "$warmup_seconds"
else
    echo "gpu-check: no PyTorch with CUDA: reading an idle GPU"
fi

query=(--query-gpu=uuid,memory.used,power.draw --format=csv,noheader,nounits)
"$smi" "${query[@]}" > "$work/smi-before.csv" || die "nvidia-smi query failed"
"$wattline" collect --compact > "$work/wattline.json" || die "wattline collect failed"
"$smi" "${query[@]}" > "$work/smi-after.csv" || die "nvidia-smi query failed"

# Power: wattline's energy stage over a 4 s window, nvidia-smi sampled alongside.
( for _ in $(seq 1 8); do "$smi" --query-gpu=uuid,power.draw --format=csv,noheader,nounits; sleep 0.5; done ) \
    > "$work/smi-power.csv" &
smi_power_pid=$!
GENAI_GPU_COLLECTION_INTERVAL=0.5 "$wattline" run --quiet --report json -- sleep 4 > "$work/report.json" \
    || die "wattline run failed"
wait "$smi_power_pid" || true

python3 - "$work/smi-before.csv" "$work/smi-after.csv" "$work/wattline.json" "$work/report.json" "$work/smi-power.csv" <<'PY'
import json, sys

KIB_PER = {"bytes": 1 / 1024, "kibibytes": 1, "kilobytes": 1000 / 1024,
           "mebibytes": 1024, "megabytes": 1e6 / 1024, "gibibytes": 1024 * 1024}


def number(text):
    text = text.strip()
    if not text or text.startswith("[") or text.upper() == "N/A":
        return None
    return float(text)


def smi_rows(path):
    rows = {}
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                continue
            uuid, mem_mib, power = parts
            mem = number(mem_mib)
            rows[uuid] = {"memory_kib": None if mem is None else mem * 1024,
                          "power_w": number(power)}
    return rows


def measurement(record, names, units):
    for name in names:
        value = record.get(name)
        if isinstance(value, dict) and value.get("value") is not None:
            factor = units.get(value.get("unit"))
            if factor is not None:
                return float(value["value"]) * factor
    return None


before, after = smi_rows(sys.argv[1]), smi_rows(sys.argv[2])
with open(sys.argv[4]) as f:
    energy_report = json.load(f)
energy_devices = {d["device_identifier"]: d for d in energy_report.get("devices", [])}
print(f"INFO gpu source: {energy_report.get('gpu_source')}")
smi_power = []
with open(sys.argv[5]) as f:
    for line in f:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2:
            smi_power.append((parts[0], number(parts[1])))
with open(sys.argv[3]) as f:
    snapshot = json.load(f)
gpu = snapshot.get("gpu") or {}
records = [r for r in (gpu.get("device_metrics") or [])
           if str(r.get("vendor", "")).lower() == "nvidia"]
ours = {r.get("device_identifier"): r for r in records}

failed = False


def report(status, field, detail):
    global failed
    failed = failed or status == "FAIL"
    print(f"{status} {field}: {detail}")


def within(value, low, high, tolerance):
    return low - tolerance <= value <= high + tolerance


smi_uuids = set(before) | set(after)
if set(ours) == smi_uuids and smi_uuids:
    report("PASS", "uuid", f"{len(smi_uuids)} device(s): {', '.join(sorted(smi_uuids))}")
else:
    report("FAIL", "uuid", f"wattline {sorted(ours)} vs nvidia-smi {sorted(smi_uuids)}")

for uuid in sorted(smi_uuids):
    record = ours.get(uuid)
    if record is None:
        report("FAIL", f"memory {uuid}", "no wattline record")
        continue
    refs = [r[uuid]["memory_kib"] for r in (before, after)
            if uuid in r and r[uuid]["memory_kib"] is not None]
    mem = measurement(record, ["memory_used"], KIB_PER)
    if mem is None or not refs:
        report("FAIL", f"memory {uuid}", f"wattline {mem} KiB, nvidia-smi {refs} KiB")
    else:
        tolerance = max(0.01 * max(mem, *refs), 2048.0)
        status = "PASS" if within(mem, min(refs), max(refs), tolerance) else "FAIL"
        report(status, f"memory {uuid}",
               f"wattline {mem:.0f} KiB, nvidia-smi {' / '.join(f'{r:.0f}' for r in refs)} KiB"
               f" (tolerance {tolerance:.0f} KiB)")

    util = measurement(record, ["compute_utilization"], {"percentage": 1.0, "percent": 1.0})
    print(f"INFO compute {uuid}: wattline {util} %")
    ours_power = energy_devices.get(uuid, {}).get("mean_watts")
    refs = [w for (u, w) in smi_power if u == uuid and w is not None]
    if not refs:
        report("SKIP", f"power {uuid}", "nvidia-smi reports no power for this device")
        continue
    if ours_power is None:
        report("FAIL", f"power {uuid}", "wattline's report has no mean power for this device")
        continue
    theirs = sum(refs) / len(refs)
    status = "PASS" if abs(ours_power - theirs) <= 0.05 * theirs else "FAIL"
    report(status, f"power {uuid}",
           f"wattline mean {ours_power:.2f} W, nvidia-smi mean {theirs:.2f} W over {len(refs)} readings (5 %)")
    print(f"INFO energy {uuid}: {energy_devices[uuid].get('energy_kwh')} kWh by "
          f"{energy_devices[uuid].get('energy_source')}, trapezoid {energy_devices[uuid].get('trapezoid_kwh')}, "
          f"counter {energy_devices[uuid].get('counter_kwh')}")


sys.exit(1 if failed else 0)
PY
