"""A bare OTLP/HTTP metrics receiver for the gen_ai.* differential test.

Usage: otlp_summary_receiver.py OUT.jsonl

Binds 127.0.0.1 on a free port, prints the port on the first line of stdout, and for
every ExportMetricsServiceRequest posted to /v1/metrics appends one JSON line per
metric: its name, data type, unit, temporality, monotonicity, point count, the
union of its points' attribute keys, the value kinds of its points (`as_int`,
`as_double`), and for gauges every point's value by its `gpu_id` attribute. Decoded with the official opentelemetry-proto
types. Runs until killed.
"""

import gzip
import http.server
import json
import sys

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

TEMPORALITY = {0: "unspecified", 1: "delta", 2: "cumulative"}


def summaries(request):
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                data = getattr(metric, kind)
                points = list(data.data_points)
                keys = sorted({kv.key for point in points for kv in point.attributes})
                summary = {
                    "name": metric.name,
                    "type": kind,
                    "unit": metric.unit,
                    "points": len(points),
                    "attribute_keys": keys,
                    "scope": scope_metrics.scope.name,
                }
                if kind in ("sum", "histogram", "exponential_histogram"):
                    summary["temporality"] = TEMPORALITY.get(
                        data.aggregation_temporality, "unknown"
                    )
                if kind == "sum":
                    summary["monotonic"] = data.is_monotonic
                if kind in ("gauge", "sum"):
                    # Whether each point is an integer or a double, every point.
                    summary["value_kinds"] = sorted(
                        {point.WhichOneof("value") for point in points}
                    )
                if kind == "gauge":
                    values = {}
                    for point in points:
                        for kv in point.attributes:
                            if kv.key == "gpu_id":
                                values.setdefault(kv.value.string_value, []).append(
                                    number(point)
                                )
                    summary["values_by_gpu_id"] = values
                yield summary


def number(point):
    if point.WhichOneof("value") == "as_int":
        return float(point.as_int)
    return point.as_double


def main():
    out = open(sys.argv[1], "a", encoding="utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path.endswith("/v1/metrics"):
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                for summary in summaries(request):
                    out.write(json.dumps(summary) + "\n")
                out.flush()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()
            self.wfile.write(ExportMetricsServiceResponse().SerializeToString())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
