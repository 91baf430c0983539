"""A real HTTP server on 127.0.0.1 speaking OpenAI's Chat Completions, standing in for the LLM.

The one stand-in the project allows: the provider SDK, its HTTP client and pydantic-ai's error
mapping all run for real against it. Each request takes the next scripted reply (the last one
repeats), and every request's headers are kept for the test to inspect.
"""

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, object] | None = None
    """None: a completion saying `text`."""
    text: str = "hello from the fake model"


def completion(
    text: str, *, model: str, prompt_tokens: int = 11, completion_tokens: int = 7
) -> dict[str, object]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def error(status: int, message: str) -> dict[str, object]:
    return {"error": {"message": message, "type": "test_error", "code": str(status)}}


@dataclass
class FakeLLM:
    replies: list[Reply]
    base_url: str = ""
    requests: list[dict[str, str]] = field(default_factory=list)
    """Headers of every request received, in order."""

    async def _chat(self, request: Request) -> JSONResponse:
        self.requests.append(dict(request.headers))
        sent = await request.json()
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        body = reply.body if reply.body is not None else completion(reply.text, model=sent["model"])
        return JSONResponse(body, status_code=reply.status, headers=reply.headers)


@asynccontextmanager
async def serve_fake_llm(*replies: Reply, reports: dict[str, object] | None = None) -> AsyncIterator[FakeLLM]:
    """Serve `replies` at `FakeLLM.base_url` (`http://127.0.0.1:PORT/v1`) until the block ends.
    `reports`: path -> JSON the server answers there (GET or POST), as local servers report their
    context: Ollama's `/api/show`, llama.cpp's `/props`, vLLM's `/v1/models`."""
    fake = FakeLLM(list(replies) or [Reply()])
    routes = [Route("/v1/chat/completions", fake._chat, methods=["POST"])]
    for path, body in (reports or {}).items():
        routes.append(Route(path, _answer(body), methods=["GET", "POST"]))
    app = Starlette(routes=routes)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    fake.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    async with anyio.create_task_group() as tg:
        # The socket already listens, so a client connecting before uvicorn runs just waits in the backlog.
        tg.start_soon(server.serve, [sock])
        try:
            yield fake
        finally:
            server.should_exit = True
    sock.close()


def _answer(body: object):
    async def answer(request: Request) -> JSONResponse:
        return JSONResponse(body)

    return answer
