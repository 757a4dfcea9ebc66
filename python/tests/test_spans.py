"""A step's span in the caller's trace: with spans exported, a scope entered inside an
OpenTelemetry span (the official SDK) is that span's child, in process and under
`wattline run`; an explicit `traceparent` wins. The spans arrive at an OTLP/HTTP
receiver here and are decoded with the official `opentelemetry-proto` types."""

from __future__ import annotations

import http.server
import subprocess
import sys
import textwrap
import threading
from typing import List

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace import TracerProvider

import wattline

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


class Receiver:
    """An OTLP/HTTP receiver: keeps every trace export, answers every POST with 200."""

    def __init__(self) -> None:
        self.requests: List[ExportTraceServiceRequest] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.requests.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> List[Span]:
        return [
            span
            for request in self.requests
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


def spans_to(receiver: Receiver) -> dict:
    """A configuration sending steps' spans (with energy) to `receiver`."""
    return {
        "version": 1,
        "components": [
            {"kind": "energy"},
            {
                "kind": "opentelemetry",
                "config": {
                    "spans": True,
                    "endpoints": [{"endpoint": receiver.url, "transport": "http_binary"}],
                },
            },
        ],
    }


def by_name(spans: List[Span], name: str) -> Span:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, [span.name for span in spans]
    return found[0]


async def test_a_step_is_a_child_of_the_current_opentelemetry_span(receiver, quiet_home):
    config = spans_to(receiver)
    tracer = TracerProvider().get_tracer("agent")
    async with wattline.Pipeline(config=config, gpu=False) as pipeline:
        with tracer.start_as_current_span("handle request") as request:
            async with pipeline.agent_scope("plan"):
                pass
            with pipeline.agent_scope("act", traceparent=CALLER):
                pass
        with pipeline.agent_scope("alone"):
            pass
    caller = request.get_span_context()
    spans = receiver.spans()
    plan = by_name(spans, "plan")
    assert plan.trace_id.hex() == format(caller.trace_id, "032x")
    assert plan.parent_span_id.hex() == format(caller.span_id, "016x")
    act = by_name(spans, "act")
    assert act.trace_id.hex() == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert act.parent_span_id.hex() == "00f067aa0ba902b7"
    alone = by_name(spans, "alone")
    assert alone.parent_span_id == b"", "no span was current: a trace of its own"
    assert alone.trace_id != plan.trace_id


async def test_a_nested_step_is_a_child_of_its_parent_steps_span_unless_a_span_opened_between(
    receiver, quiet_home
):
    config = spans_to(receiver)
    tracer = TracerProvider().get_tracer("agent")
    async with wattline.Pipeline(config=config, gpu=False) as pipeline:
        with tracer.start_as_current_span("handle request"):
            async with pipeline.agent_scope("request"):
                async with pipeline.agent_scope("summarize"):
                    pass
                with tracer.start_as_current_span("call tool") as tool_call:
                    with pipeline.agent_scope("tool"):
                        pass
    spans = receiver.spans()
    request, summarize, tool = (by_name(spans, name) for name in ("request", "summarize", "tool"))
    assert summarize.trace_id == request.trace_id
    assert summarize.parent_span_id == request.span_id
    # A span the program opened inside the parent step is the nearer parent.
    assert tool.parent_span_id.hex() == format(tool_call.get_span_context().span_id, "016x")


PROGRAM = textwrap.dedent(
    """
    import wattline
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("agent")
    with tracer.start_as_current_span("handle request") as request:
        with wattline.agent_scope("planner"):
            pass
    context = request.get_span_context()
    print(format(context.trace_id, "032x"), format(context.span_id, "016x"))
    """
)


def test_under_wattline_run_the_step_joins_the_programs_trace(
    wattline_binary, receiver, quiet_home
):
    finished = subprocess.run(
        [str(wattline_binary), "run", "--quiet", "--report", "json",
         "--otlp", receiver.url + "/v1/metrics", "--otlp-spans",
         "--", sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert finished.returncode == 0, finished.stderr
    trace_id, span_id = finished.stdout.split("\n", 1)[0].split()
    planner = by_name(receiver.spans(), "planner")
    assert planner.trace_id.hex() == trace_id
    assert planner.parent_span_id.hex() == span_id
