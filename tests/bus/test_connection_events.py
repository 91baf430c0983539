"""What the NATS client reports asynchronously reaches a log, on a real nats-server: a refused
publish, a slow consumer, a lost connection, a refused password. Never with the password in it."""

import logging
from pathlib import Path

import anyio
import pytest

from bus.config import BusConfig
from bus.connection import open_bus
from bus.errors import BusClosed
from bus.server import NatsServer, open_nats_server

pytestmark = pytest.mark.anyio

PASSWORD = "s3cret-Pa55word-for-the-test"


@pytest.fixture
async def restricted_server(tmp_path: Path):
    """A server whose only user may not publish on `forbidden.>`."""
    conf = tmp_path / "auth.conf"
    conf.write_text(
        "authorization {\n  users = [\n"
        f'    {{user: "limited", password: "{PASSWORD}", permissions: {{publish: {{deny: ["forbidden.>"]}}}}}}\n'
        "  ]\n}\n"
    )
    async with open_nats_server(tmp_path / "nats", extra_args=["--config", str(conf)]) as server:
        yield server


def _config(server: NatsServer, **kwargs: object) -> BusConfig:
    return BusConfig(servers=(server.url,), user="limited", password=PASSWORD, **kwargs)  # pyright: ignore[reportArgumentType] - each test passes BusConfig's own keyword arguments


async def _logged(
    caplog: pytest.LogCaptureFixture, text: str, *, timeout_s: float = 5.0
) -> logging.LogRecord:
    with anyio.fail_after(timeout_s):
        while True:
            for record in caplog.records:
                if text in record.getMessage():
                    return record
            await anyio.sleep(0.05)


def _no_password_logged(caplog: pytest.LogCaptureFixture) -> None:
    assert all(PASSWORD not in record.getMessage() for record in caplog.records)


async def test_a_publish_the_server_refuses_is_logged_as_an_error_naming_the_server(
    restricted_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The server answers a forbidden publish with an asynchronous -ERR and nothing else; it
    used to vanish. Now it is an error in the log that says whose permission is missing."""
    caplog.set_level(logging.DEBUG, logger="codeloop.bus")
    async with open_bus(_config(restricted_server)) as bus:
        await bus.nc.publish("forbidden.topic", b"hello")
        await bus.nc.flush()
        record = await _logged(caplog, "permissions violation")
    assert record.levelno == logging.ERROR
    message = record.getMessage()
    assert f"127.0.0.1:{restricted_server.port}" in message and "forbidden.topic" in message
    assert "lacks the permission" in message
    _no_password_logged(caplog)


async def test_a_slow_consumer_is_logged_once_per_burst_not_per_dropped_message(
    restricted_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A subscription over its pending limits drops messages; the log says so (once for a burst)."""
    caplog.set_level(logging.WARNING, logger="codeloop.bus")
    release = anyio.Event()

    async def stuck(_msg) -> None:
        await release.wait()

    async with open_bus(_config(restricted_server)) as bus:
        sub = await bus.nc.subscribe("work.slow", cb=stuck, pending_msgs_limit=1)
        for n in range(20):
            await bus.nc.publish("work.slow", str(n).encode())
        await bus.nc.flush()
        record = await _logged(caplog, "slow consumer")
        release.set()
        await sub.unsubscribe()
    assert record.levelno == logging.WARNING and "work.slow" in record.getMessage()
    assert sum("slow consumer" in r.getMessage() for r in caplog.records) == 1
    _no_password_logged(caplog)


async def test_a_lost_connection_is_logged_and_a_refused_password_is_named_in_the_error(
    tmp_path: Path, restricted_server: NatsServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A server going away is a warning with its address; a wrong password fails the connect with
    the server's own reason, not nats-py's "no servers available"."""
    caplog.set_level(logging.WARNING, logger="codeloop.bus")
    # The URL carries the credentials, as a user may type it: they must not reach the log.
    url = restricted_server.url.replace("nats://", f"nats://limited:{PASSWORD}@")
    async with open_bus(BusConfig(servers=(url,))) as bus:
        await bus.nc.flush()
        await restricted_server.stop()
        record = await _logged(caplog, "lost the connection")
    assert record.levelno == logging.WARNING
    assert f"nats://127.0.0.1:{restricted_server.port}" in record.getMessage()
    _no_password_logged(caplog)

    auth = ["--config", str(tmp_path / "auth.conf")]
    async with open_nats_server(tmp_path / "nats-again", extra_args=auth) as again:
        with pytest.raises(BusClosed, match="(?i)authorization violation") as refused:
            async with open_bus(BusConfig(servers=(again.url,), user="limited", password="wrong")):
                pass
    assert "no servers available" not in str(refused.value)
