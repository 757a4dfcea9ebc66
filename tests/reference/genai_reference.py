"""Runs the GPU spec's reference, genai-otel-instrument, for SECONDS and exports its
metrics over OTLP/HTTP to ENDPOINT (the environment set by the test chooses the fake
NVML, the export interval and the CO2 mode), then shuts it down, which exports once
more.

Usage: genai_reference.py ENDPOINT SECONDS
"""

import sys
import time

import genai_otel


def main():
    endpoint, seconds = sys.argv[1], float(sys.argv[2])
    genai_otel.instrument(service_name="genai-reference", endpoint=endpoint)
    time.sleep(seconds)
    genai_otel.uninstrument()


if __name__ == "__main__":
    main()
