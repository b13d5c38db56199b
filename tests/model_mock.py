"""A scripted model server on 127.0.0.1 for driving the real agent binaries offline.

One in-process threaded HTTP server speaks the three wire formats the harnesses use, all
streamed as server-sent events:

- Anthropic Messages (`POST /v1/messages`, Claude Code),
- OpenAI Responses (`POST /v1/responses`, Codex and Kimi Code),
- OpenAI Chat Completions (`POST /v1/chat/completions`).

Every request body is recorded (`requests`). Replies come from a queue (`script`), else the
default text; a reply may call a tool first (`{"tool": {"name": "Bash", "input": {...}}}`), and
may report a large prompt (`"input_tokens"`) to make a harness compact its context. Requests a
test does not script (a harness's side calls, such as opencode's title generation running
beside the agent's first call) can be answered by `aside` without taking a scripted reply.
(No tests here; the module is imported by the harness tests.)
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any]


class ModelMock:
    def __init__(self, default_text: str = "MOCK-REPLY",
                 aside: Callable[[Any], Reply | None] | None = None) -> None:
        self.default: Reply = {"text": default_text}
        #: Answers the requests it returns a reply for, leaving the script to the others.
        self.aside = aside
        self.queue: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> ModelMock:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def next_reply(self, body: Any) -> Reply:
        reply = self.aside(body) if self.aside is not None else None
        if reply is not None:
            return reply
        with self._lock:
            return self.queue.pop(0) if self.queue else dict(self.default)

    def record(self, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append({"path": path, "body": body})

    def bodies(self, path_prefix: str = "/v1/") -> list[str]:
        """Each model request's body as text (for substring assertions)."""
        with self._lock:
            return [json.dumps(r["body"], ensure_ascii=False) for r in self.requests
                    if r["path"].startswith(path_prefix)]


def _sse(event: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def anthropic_stream(reply: Reply, model: str) -> bytes:
    tokens = int(reply.get("input_tokens", 100))
    usage = {"input_tokens": tokens, "output_tokens": 10, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    blocks: list[dict[str, Any]] = []
    if reply.get("text"):
        blocks.append({"type": "text", "text": reply["text"]})
    if reply.get("tool"):
        blocks.append({"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:20],
                       "name": reply["tool"]["name"], "input": reply["tool"]["input"]})
    stop = "tool_use" if reply.get("tool") else "end_turn"
    out = [_sse("message_start", {"type": "message_start", "message": {
        "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": dict(usage, output_tokens=1)}})]
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out += [_sse("content_block_start", {"type": "content_block_start", "index": i,
                                             "content_block": start}),
                _sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                             "delta": delta}),
                _sse("content_block_stop", {"type": "content_block_stop", "index": i})]
    out += [_sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 10, "input_tokens": tokens}}),
            _sse("message_stop", {"type": "message_stop"})]
    return b"".join(out)


def responses_stream(reply: Reply, model: str, shell_tool: str) -> bytes:
    tokens = int(reply.get("input_tokens", 100))
    rid = "resp_" + uuid.uuid4().hex[:16]
    items: list[dict[str, Any]] = []
    if reply.get("tool"):
        name = reply["tool"]["name"]
        name = shell_tool if name == "shell" else name
        items.append({"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:8],
                      "call_id": "call_" + uuid.uuid4().hex[:8], "name": name,
                      "arguments": json.dumps(reply["tool"]["input"]), "status": "completed"})
    elif reply.get("text") is not None:
        items.append({"type": "message", "id": "msg_" + uuid.uuid4().hex[:8],
                      "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": reply["text"],
                                   "annotations": []}]})
    base = {"id": rid, "object": "response", "model": model, "status": "in_progress",
            "output": []}
    out = [_sse("response.created", {"type": "response.created", "response": base})]
    for index, item in enumerate(items):
        added = dict(item, status="in_progress")
        if item["type"] == "message":
            added["content"] = []
        out.append(_sse("response.output_item.added", {
            "type": "response.output_item.added", "output_index": index, "item": added}))
        if item["type"] == "message":
            text = item["content"][0]["text"]
            out.append(_sse("response.content_part.added", {
                "type": "response.content_part.added", "item_id": item["id"],
                "output_index": index, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}))
            out.append(_sse("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": item["id"],
                "output_index": index, "content_index": 0, "delta": text}))
            out.append(_sse("response.output_text.done", {
                "type": "response.output_text.done", "item_id": item["id"],
                "output_index": index, "content_index": 0, "text": text}))
        out.append(_sse("response.output_item.done", {
            "type": "response.output_item.done", "output_index": index, "item": item}))
    usage = {"input_tokens": tokens, "output_tokens": 10, "total_tokens": tokens + 10,
             "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}
    out.append(_sse("response.completed", {"type": "response.completed", "response": dict(
        base, status="completed", output=items, usage=usage)}))
    return b"".join(out)


def chat_stream(reply: Reply, model: str) -> bytes:
    cid = "chatcmpl-" + uuid.uuid4().hex[:12]

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        return _sse(None, {"id": cid, "object": "chat.completion.chunk", "model": model,
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                           **extra})

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.get("tool"):
        out.append(chunk({"tool_calls": [{"index": 0, "id": "call_" + uuid.uuid4().hex[:8],
                                          "type": "function", "function": {
                                              "name": reply["tool"]["name"],
                                              "arguments": json.dumps(reply["tool"]["input"])}}]}))
        finish = "tool_calls"
    else:
        out.append(chunk({"content": reply.get("text", "")}))
        finish = "stop"
    tokens = int(reply.get("input_tokens", 100))
    out.append(chunk({}, finish, usage={"prompt_tokens": tokens, "completion_tokens": 10,
                                        "total_tokens": tokens + 10}))
    return b"".join(out) + b"data: [DONE]\n\n"


def _handler(mock: ModelMock) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, data: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, b'{"object": "list", "data": []}', "application/json")

        def do_HEAD(self) -> None:
            self._send(200, b"", "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            mock.record(path, body)
            model = body.get("model", "mock") if isinstance(body, dict) else "mock"
            if path.endswith("/count_tokens"):
                self._send(200, b'{"input_tokens": 10}', "application/json")
                return
            reply = mock.next_reply(body)
            if path.endswith("/messages"):
                data = anthropic_stream(reply, model)
            elif path.endswith("/responses"):
                data = responses_stream(reply, model, reply.get("shell_tool", "exec_command"))
            elif path.endswith("/chat/completions"):
                data = chat_stream(reply, model)
            else:
                self._send(404, b'{"error": "not mocked"}', "application/json")
                return
            self._send(200, data, "text/event-stream")

    return Handler
