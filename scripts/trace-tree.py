#!/usr/bin/env python3
"""Runs a small agent under `wattline run --otlp-spans`, receives the spans it sends
over OTLP/HTTP, decodes them with the official opentelemetry-proto types and prints the
trace as a tree with each step's energy: what the README shows.

    .ci/venv/bin/python scripts/trace-tree.py [path/to/wattline]
"""

from __future__ import annotations

import http.server
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import threading

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

AGENT = textwrap.dedent(
    """
    import contextvars, threading, time, wattline
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    tracer = trace.get_tracer("agent")

    def step(name, seconds, weight=None):
        with wattline.agent_scope(name, weight=weight):
            time.sleep(seconds)

    with tracer.start_as_current_span("handle request"):
        step("plan", 0.4)
        # Two concurrent steps, weighted 2 and 1 (tokens, say), in the request's context.
        threads = [
            threading.Thread(target=contextvars.copy_context().run, args=(step, name, 0.6, weight))
            for name, weight in (("call tool", 2), ("retrieve", 1))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        step("answer", 0.3)
    """
)

# A stand-in nvidia-smi: one H200 drawing 250 W (this machine has no GPU).
NVIDIA_SMI = r"""#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c)";;
  *--loop-ms=*) while :; do echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, 250.00"; sleep 0.1; done;;
  *) echo "0, GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c, NVIDIA H200, 7, 3, 1377, 143771, 46, 250.00, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, 250.00";;
esac
"""


def main() -> None:
    wattline = sys.argv[1] if len(sys.argv) > 1 else "target/debug/wattline"
    requests = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                requests.append(request)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/metrics"
    with tempfile.TemporaryDirectory() as scratch:
        smi = pathlib.Path(scratch) / "nvidia-smi"
        smi.write_text(NVIDIA_SMI)
        smi.chmod(0o755)
        environment = {**os.environ, "PATH": f"{scratch}:{os.environ['PATH']}", "HOME": scratch}
        subprocess.run(
            [wattline, "run", "--quiet", "--report", "json", "--otlp", url, "--otlp-spans",
             "--", sys.executable, "-c", AGENT],
            env=environment, check=True, stdout=subprocess.DEVNULL,
        )
    server.shutdown()
    spans = [span for request in requests for resource in request.resource_spans
             for scope in resource.scope_spans for span in scope.spans]
    spans.sort(key=lambda span: span.start_time_unix_nano)
    start = min(span.start_time_unix_nano for span in spans)
    print(f"trace {spans[0].trace_id.hex()} (the agent's own, from its OpenTelemetry SDK)")
    print(f"└─ handle request   span {spans[0].parent_span_id.hex()} (the agent's span)")
    for index, span in enumerate(spans):
        branch = "└─" if index == len(spans) - 1 else "├─"
        values = {kv.key: kv.value for kv in span.attributes}
        joules = values["wattline.energy.attributed_joules"].double_value
        window = values["wattline.energy.window_joules"].double_value
        coverage = values["wattline.energy.coverage"].double_value
        offset = (span.start_time_unix_nano - start) / 1e9
        seconds = (span.end_time_unix_nano - span.start_time_unix_nano) / 1e9
        print(f"   {branch} {span.name:<10} +{offset:.2f} s, {seconds:.2f} s   "
              f"attributed {joules:7.1f} J  window {window:7.1f} J  coverage {coverage:.2f}")


if __name__ == "__main__":
    main()
