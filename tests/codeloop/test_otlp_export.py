"""`OTEL_EXPORTER_OTLP_ENDPOINT`: a tool server process exports its spans over OTLP/HTTP."""

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = pytest.mark.anyio


async def _receive_one_export(listener, received: list[tuple[str, bytes]]) -> None:
    """A minimal OTLP/HTTP collector: one POST, its path and body, answered 200."""
    async with await listener.accept() as stream:
        data = b""
        while b"\r\n\r\n" not in data:
            data += await stream.receive()
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        length = next(int(line.split(":")[1]) for line in lines if line.lower().startswith("content-length"))
        while len(body) < length:
            body += await stream.receive()
        received.append((lines[0].split()[1], body))
        await stream.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
        )


@pytest.mark.slow
async def test_a_tool_server_exports_its_tool_call_span_to_the_otlp_endpoint(tmp_path: Path) -> None:
    """The collector named by the standard variable gets the server's `tools/call` span, with the
    resource naming the process, when the server exits."""
    (tmp_path / "hello.txt").write_text("hi\n")
    listener = (await anyio.create_tcp_listener(local_host="127.0.0.1")).listeners[0]
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
    }
    server = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "codeloop",
            "mcp",
            "fs",
            "--root",
            str(tmp_path),
            "--scopes",
            "read",
            "--audit-log",
            str(tmp_path / "audit.jsonl"),
        ],
        env=env,
    )
    received: list[tuple[str, bytes]] = []
    with anyio.fail_after(120):
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(_receive_one_export, listener, received)
            async with Client(server) as client:
                result = await client.call_tool("read_file", {"path": "hello.txt"})
                assert not result.is_error
    path, body = received[0]
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    resource = {a.key: a.value.string_value for a in request.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "codeloop" and resource["codeloop.process"] == "mcp fs"
    names = [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert "tools/call read_file" in names
