"""What the core reads of a model call's span at its end, so that a call served by
another machine gets its estimate; and, when the EcoLogits library is installed, its
estimate of the call (the core's factor table makes one otherwise)."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

OPERATION_ATTRIBUTE = "gen_ai.operation.name"

#: The operations of a model call: the ones whose span may be a remote call.
MODEL_CALL_OPERATIONS = frozenset({"chat", "text_completion", "embeddings", "generate_content"})

#: The attributes the core reads of a model call's span (it decides what is remote).
MODEL_CALL_ATTRIBUTES = (
    OPERATION_ATTRIBUTE,
    "server.address",
    "gen_ai.provider.name",
    "gen_ai.system",
    "gen_ai.response.model",
    "gen_ai.request.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
)

#: OpenTelemetry's provider names (`gen_ai.provider.name`, `gen_ai.system`) as
#: EcoLogits names its providers.
ECOLOGITS_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "mistral_ai": "mistralai",
    "cohere": "cohere",
    "gcp.gemini": "google_genai",
    "gcp.gen_ai": "google_genai",
    "gcp.vertex_ai": "google_genai",
}

# The EcoLogits function and its version once looked for: None when not installed.
_ecologits: Optional[Any] = None
_looked_for_ecologits = False


def _ecologits_impacts() -> Optional[Any]:
    global _ecologits, _looked_for_ecologits
    if not _looked_for_ecologits:
        _looked_for_ecologits = True
        try:
            from importlib.metadata import version

            from ecologits.tracers.utils import llm_impacts

            _ecologits = (llm_impacts, f"ecologits {version('ecologits')}")
        except Exception:  # not installed, or not importable here
            _ecologits = None
    return _ecologits


def ecologits_estimate(
    provider: Optional[str], model: Optional[str], output_tokens: Any, latency_seconds: float
) -> Optional[Dict[str, Any]]:
    """EcoLogits' estimate of a call's energy (its `energy` range, kWh), when EcoLogits
    is installed and knows the provider and model; None otherwise."""
    found = _ecologits_impacts()
    provider = ECOLOGITS_PROVIDERS.get(provider or "")
    if found is None or provider is None or not model or not isinstance(output_tokens, int):
        return None
    llm_impacts, estimator = found
    try:
        impacts = llm_impacts(
            provider=provider,
            model_name=model,
            output_token_count=output_tokens,
            request_latency=latency_seconds,
        )
    except Exception:  # a library error never reaches the traced program
        return None
    energy = getattr(impacts, "energy", None)
    if energy is None:
        return None
    value = energy.value
    low, high = (value.min, value.max) if hasattr(value, "min") else (value, value)
    return {
        "low_kwh": float(low),
        "high_kwh": float(high),
        "estimator": estimator,
        "source": "EcoLogits methodology, https://ecologits.ai/latest/methodology/",
    }


def span_end(attributes: Any, latency_seconds: Optional[float]) -> Optional[str]:
    """A model call's span at its end, as the core reads it (JSON): its `attributes`
    and how long it took; None for any other span."""
    attributes = attributes or {}
    if attributes.get(OPERATION_ATTRIBUTE) not in MODEL_CALL_OPERATIONS:
        return None
    picked = {
        key: attributes[key]
        for key in MODEL_CALL_ATTRIBUTES
        if isinstance(attributes.get(key), (str, int, float))
    }
    estimate = None
    if latency_seconds is not None:
        output_tokens = picked.get("gen_ai.usage.output_tokens", picked.get("gen_ai.usage.completion_tokens"))
        estimate = ecologits_estimate(
            picked.get("gen_ai.provider.name", picked.get("gen_ai.system")),
            picked.get("gen_ai.response.model", picked.get("gen_ai.request.model")),
            output_tokens,
            latency_seconds,
        )
    return json.dumps({"attributes": picked, "estimate": estimate})


def span_latency(span: Any) -> Optional[float]:
    """Seconds from an OpenTelemetry SDK span's start to its end, when both are known."""
    if span.start_time is None or span.end_time is None:
        return None
    return (span.end_time - span.start_time) / 1e9
