"""Bursts that lose nothing: 10,000 steps opened at once from asyncio tasks, held across
two 1 s polls and ended at once, with the event file (plain and zstd) and OTLP on.
Every count is derived from the steps the test opened, never from the exporters'
counters: each step's start, end, energy records and `wattline.scope_energy` mark, and
one copy of every poll's mark taken while it was live."""

from __future__ import annotations

import asyncio
import collections
import datetime
import http.server
import io
import json
import pathlib
import threading
from typing import Dict, Iterator, List

import pytest

import wattline

STEPS = 10_000


class AnsweringReceiver:
    """An OTLP/HTTP endpoint that answers every POST with 200 (the OTLP lane's peer)."""

    def __init__(self) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def lines_of(directory: pathlib.Path) -> Iterator[dict]:
    """Every event of the event files in `directory`, plain or zstd frames."""
    for path in sorted(directory.iterdir()):
        data = path.read_bytes()
        if path.suffix == ".zst":
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
            data = reader.read()
        for line in data.decode().splitlines():
            yield json.loads(line)


def timestamp(event: dict) -> datetime.datetime:
    return wattline._model.parse_timestamp(event["timestamp"])


def config(directory: pathlib.Path, compression: str, receiver: AnsweringReceiver) -> dict:
    return {
        "version": 1,
        "components": [
            {"kind": "resource_metrics", "config": {"polling": {"enabled": True, "interval_millis": 1000}}},
            {"kind": "energy"},
            {
                "kind": "atof",
                "config": {"output_directory": str(directory), "compression": compression},
            },
            {
                "kind": "opentelemetry",
                "config": {
                    "spans": True,
                    "export_interval_millis": 1000,
                    "endpoints": [{"endpoint": receiver.url, "transport": "http_binary"}],
                },
            },
        ],
    }


@pytest.mark.parametrize("compression", ["none", "zstd"])
async def test_ten_thousand_steps_at_once_lose_no_event_of_any_kind(
    compression, stand_in_nvidia_smi, quiet_home, tmp_path
):
    receiver = AnsweringReceiver()
    release = asyncio.Event()
    opened: List[str] = []

    async def step(index: int) -> None:
        async with pipeline.agent_scope(f"request-{index % 7}") as scope:
            opened.append(scope.uuid)
            await release.wait()

    directory = tmp_path / "events"
    try:
        async with wattline.Pipeline(config=config(directory, compression, receiver)) as pipeline:
            tasks = [asyncio.ensure_future(step(index)) for index in range(STEPS)]
            while len(opened) < STEPS:
                await asyncio.sleep(0.01)
            # Live across two polls at least.
            await asyncio.sleep(2.5)
            release.set()
            await asyncio.gather(*tasks)
    finally:
        receiver.close()
    assert len(set(opened)) == STEPS

    starts: Dict[str, List[dict]] = collections.defaultdict(list)
    ends: Dict[str, List[dict]] = collections.defaultdict(list)
    settled: Dict[str, int] = collections.Counter()
    records: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    copies: Dict[datetime.datetime, collections.Counter] = collections.defaultdict(collections.Counter)
    for event in lines_of(directory):
        if event["kind"] == "scope" and event.get("category") == "agent":
            side = starts if event["scope_category"] == "start" else ends
            side[event["uuid"]].append(event)
        elif event["name"] == "wattline.scope_energy":
            settled[event["parent_uuid"]] += 1
        elif event["name"] == "wattline.energy":
            record = event["data"]
            if record["record"] in ("scope_started", "scope_ended"):
                records[record["uuid"]][record["record"]] += 1
        elif event["name"] == "nemo.relay.resource_metrics":
            copies[timestamp(event)][event["parent_uuid"]] += 1

    for uuid in opened:
        assert len(starts[uuid]) == 1 and len(ends[uuid]) == 1, uuid
        assert settled[uuid] == 1, f"{uuid}: its wattline.scope_energy mark"
        assert records[uuid] == {"scope_started": 1, "scope_ended": 1}, uuid
    last_start = max(timestamp(starts[uuid][0]) for uuid in opened)
    first_end = min(timestamp(ends[uuid][0]) for uuid in opened)
    # Polls taken while every step was live: one copy under each step.
    all_live = [at for at in copies if last_start < at < first_end]
    assert len(all_live) >= 2, sorted(copies)
    for at in all_live:
        assert all(copies[at][uuid] == 1 for uuid in opened), at
