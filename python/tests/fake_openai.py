"""A local OpenAI-compatible model server for the framework tests: POST
`/v1/chat/completions` (plain, or server-sent events with `stream`, the last chunk
carrying `usage` as OpenAI's does with `stream_options.include_usage`) and
`/v1/embeddings`, each a fixed answer with token usage; offered tools and holding no
tool's answer, a chat request is answered with a call of the first tool. No model runs: the tests are
about the spans the clients make around the calls."""

from __future__ import annotations

import http.server
import json
import threading

#: The usage every chat answer reports.
CHAT_USAGE = {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}


def _chunk(model: str, delta: dict, finish=None, usage=None) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
    }
    if usage is not None:
        chunk["usage"] = usage
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _wants_a_tool(body: dict) -> bool:
    """A request offering tools and holding no tool's answer yet: the first tool is
    called (with no arguments), as a model deciding to use it would."""
    answered = any(message.get("role") == "tool" for message in body.get("messages", []))
    return bool(body.get("tools")) and not answered


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body.get("model", "fake-model")
        if self.path.endswith("/chat/completions") and body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(_chunk(model, {"role": "assistant", "content": "Hello"}))
            self.wfile.write(_chunk(model, {"content": " there"}, finish="stop"))
            self.wfile.write(_chunk(model, {}, usage=CHAT_USAGE))
            self.wfile.write(b"data: [DONE]\n\n")
            return
        if self.path.endswith("/chat/completions") and _wants_a_tool(body):
            tool = body["tools"][0]["function"]["name"]
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": tool, "arguments": "{}"},
                    }
                ],
            }
            answer = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": CHAT_USAGE,
            }
        elif self.path.endswith("/chat/completions"):
            answer = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "Hello there"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": CHAT_USAGE,
            }
        else:
            answer = {
                "object": "list",
                "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
                "model": model,
                "usage": {"prompt_tokens": 3, "total_tokens": 3},
            }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


class FakeOpenAI:
    """The server on a free loopback port; `base_url` for a client."""

    def __init__(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
