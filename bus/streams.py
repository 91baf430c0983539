"""Idempotent creation of the streams, KV buckets and object store of the bus contract (docs/bus-contract.md).

`codeloop serve` calls `ensure_streams()` at start; creating what exists with the same config is a
no-op, and a changed config (e.g. replicas) is applied as an update.
"""

import anyio
import nats.js.errors
from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

from bus import center, subjects
from bus.connection import Bus, nats_errors
from bus.errors import BusError, BusNotReady, BusTimeout, NoResponders

DUPLICATE_WINDOW_S = 600.0
"""Publishes with the same message id within this window are stored once."""
EVENTS_MAX_AGE_S = 7 * 24 * 3600.0
HANDLED_TTL_S = 24 * 3600.0
"""Handled-message marks must outlive every redelivery of their message; a day is ample."""
_STREAM_EXISTS_DIFFERENTLY = 10058


def stream_configs(replicas: int) -> list[StreamConfig]:
    return [
        StreamConfig(
            name=subjects.TASKS_STREAM,
            subjects=[subjects.TASKS_ALL],
            retention=RetentionPolicy.WORK_QUEUE,
            num_replicas=replicas,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
        ),
        StreamConfig(
            name=subjects.WORK_STREAM,
            subjects=[subjects.WORK_ALL],
            retention=RetentionPolicy.WORK_QUEUE,
            num_replicas=replicas,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
        ),
        StreamConfig(
            name=subjects.EVENTS_STREAM,
            subjects=[subjects.EVENTS_ALL],
            retention=RetentionPolicy.LIMITS,
            max_age=EVENTS_MAX_AGE_S,
            discard=DiscardPolicy.OLD,
            num_replicas=replicas,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
        ),
    ]


async def ensure_streams(bus: Bus, *, replicas: int | None = None, settle_s: float = 30.0) -> None:
    """Create (or update to this config) the streams, KV buckets and object store.

    A cluster that just started (or lost a node) may answer "no suitable peers" or time out for a
    few seconds; those answers are retried for up to `settle_s`.

    Raises:
        BusError: JetStream refused a config (e.g. more replicas than servers), or kept failing.
    """
    replicas = replicas or bus.config.replicas
    deadline = anyio.current_time() + settle_s
    while True:
        try:
            await _ensure_once(bus, replicas)
            return
        except BusError as exc:
            if not _settling(exc) or anyio.current_time() > deadline:
                raise
            await anyio.sleep(0.25)


def _settling(exc: BusError) -> bool:
    """True for answers of a cluster still electing leaders or placing peers."""
    return isinstance(exc, (BusTimeout, NoResponders, BusNotReady))


async def ensure_stream(bus: Bus, config: StreamConfig) -> None:
    """Create the stream `config` describes, or bring the existing one to this config."""
    with nats_errors():
        try:
            await bus.js.add_stream(config)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
        except nats.js.errors.BadRequestError as exc:
            if exc.err_code != _STREAM_EXISTS_DIFFERENTLY:
                raise
            await bus.js.update_stream(config)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped


async def ensure_log_stream(bus: Bus, *, name: str, subject_pattern: str, max_age_s: float) -> None:
    """Create (or update) a stream that keeps what is published on `subject_pattern` for `max_age_s`
    (limits retention, oldest discarded first): results read back by whoever waits for them."""
    await ensure_stream(
        bus,
        StreamConfig(
            name=name,
            subjects=[subject_pattern],
            retention=RetentionPolicy.LIMITS,
            max_age=max_age_s,
            discard=DiscardPolicy.OLD,
            num_replicas=bus.config.replicas,
            storage=StorageType.FILE,
            duplicate_window=DUPLICATE_WINDOW_S,
        ),
    )


async def _ensure_once(bus: Bus, replicas: int) -> None:
    for config in stream_configs(replicas):
        await ensure_stream(bus, config)
    with nats_errors():
        await bus.js.create_key_value(bucket=subjects.TASKS_BUCKET, history=5, replicas=replicas)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
        await bus.js.create_key_value(  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
            bucket=subjects.HANDLED_BUCKET, history=1, ttl=HANDLED_TTL_S, replicas=replicas
        )
        await bus.js.create_key_value(  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
            bucket=subjects.CONFIG_BUCKET, history=center.HISTORY, replicas=replicas
        )
        await bus.js.create_key_value(bucket=subjects.USAGE_BUCKET, history=1, replicas=replicas)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
        await bus.js.create_object_store(bucket=subjects.ARTIFACTS_BUCKET, replicas=replicas)  # pyright: ignore[reportUnknownMemberType] - nats-py leaves its **params untyped
