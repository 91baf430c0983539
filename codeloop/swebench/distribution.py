"""A run shared by many machines: each instance is a message on the bus, every worker of every
machine takes them from one durable consumer, and the coordinator (`codeloop swebench --nats URL`)
collects the outcomes into OUT as they come.

Subjects and streams (apart from `codeloop.task.>`, which the orchestrator's durable takes whole):

| name | kind | subjects |
| --- | --- | --- |
| `CODELOOP_SWEBENCH` | work-queue stream | `codeloop.swebench.work.<run_id>`: one `swebench_instance` per instance |
| `CODELOOP_SWEBENCH_RESULTS` | limits stream, 7 days | `codeloop.swebench.result.<run_id>`: one `swebench_outcome` per instance |

Workers share the durable pull consumer `swebench-workers` (explicit acks, `ACK_WAIT_S` renewed
by in-progress heartbeats while an instance runs, at most `MAX_DELIVER` deliveries). A worker
acks only after the outcome is published and its files are in the object store
(`codeloop-artifacts`, `swebench/<run_id>/<instance_id>.tar.gz`); a worker killed mid-instance
loses nothing: the message comes back after the ack wait and another worker runs the instance
again. A message delivered `MAX_DELIVER` times without an outcome is dead: the coordinator sees
JetStream's max-deliveries advisory and records the instance as an error (`env.infra`).
Environments are built where an instance runs and cached per machine.
"""

import io
import json
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from pydantic import JsonValue

from bus import subjects as bus_subjects
from bus.connection import MSG_ID_HEADER, Bus
from bus.objects import Objects
from bus.streams import ensure_log_stream
from bus.work_queue import WorkQueue, ack_wait_of, ensure_work_queue
from codeloop.swebench.outcome import Outcome

if TYPE_CHECKING:  # the run's modules (sandbox, environments) are not a message's business
    from codeloop.swebench.run import RunOptions

WORK_STREAM = "CODELOOP_SWEBENCH"
RESULTS_STREAM = "CODELOOP_SWEBENCH_RESULTS"
WORK_PREFIX = "codeloop.swebench.work"
RESULT_PREFIX = "codeloop.swebench.result"
WORKERS = "swebench-workers"
ACK_WAIT_S = 120.0
MAX_DELIVER = 3
RESULTS_MAX_AGE_S = 7 * 24 * 3600.0
ARTIFACT_PREFIX = "swebench"
WORK_QUEUE = WorkQueue(
    stream=WORK_STREAM,
    subject_prefix=WORK_PREFIX,
    durable=WORKERS,
    ack_wait_s=ACK_WAIT_S,
    max_deliver=MAX_DELIVER,
)
"""The instances of every run, and the durable consumer every worker shares (`bus.work_queue`)."""


def work_subject(run_id: str) -> str:
    return f"{WORK_PREFIX}.{bus_subjects.token(run_id)}"


def result_subject(run_id: str) -> str:
    return f"{RESULT_PREFIX}.{bus_subjects.token(run_id)}"


def artifact_name(run_id: str, instance_id: str) -> str:
    return f"{ARTIFACT_PREFIX}/{run_id}/{instance_id}.tar.gz"


async def ensure_swebench_streams(bus: Bus, *, ack_wait_s: float = ACK_WAIT_S) -> None:
    """Create (idempotently) the two streams, the workers' durable consumer and the object store.
    An existing consumer keeps its configuration (its ack wait decides the workers' heartbeats)."""
    await ensure_work_queue(bus, replace(WORK_QUEUE, ack_wait_s=ack_wait_s))
    await ensure_log_stream(
        bus, name=RESULTS_STREAM, subject_pattern=f"{RESULT_PREFIX}.>", max_age_s=RESULTS_MAX_AGE_S
    )
    await Objects.ensure(bus, bus_subjects.ARTIFACTS_BUCKET)


def pack(directory: Path) -> bytes:
    """An instance's directory as a gzipped tar (its files only, flat)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(directory.iterdir()):
            if path.is_file():
                tar.add(path, arcname=path.name)
    return buffer.getvalue()


def unpack(data: bytes, target: Path) -> None:
    """Write a packed instance directory to `target` (made new, atomically renamed into place)."""
    partial = target.with_name(f".{target.name}.partial")
    if partial.exists():
        import shutil

        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile() or "/" in member.name or member.name.startswith("."):
                continue  # flat regular files only: nothing written outside the directory
            source = tar.extractfile(member)
            assert source is not None
            (partial / member.name).write_bytes(source.read())
    if target.exists():
        import shutil

        shutil.rmtree(target)
    partial.rename(target)


def work_message(
    run_id: str, instance: dict[str, JsonValue], prediction: dict[str, JsonValue], options: "RunOptions"
) -> bytes:
    """The `swebench_instance` message: the instance, its prediction and the run's options."""
    return json.dumps(
        {
            "kind": "swebench_instance",
            "schema_version": 1,
            "run_id": run_id,
            "instance": instance,
            "prediction": prediction,
            "options": options,
        }
    ).encode()


async def heartbeat_interval(bus: Bus) -> float:
    """How often a worker says an instance is still in progress: a third of the ack wait."""
    return max(0.5, await ack_wait_of(bus, WORK_QUEUE) / 3)


async def publish_work(bus: Bus, run_id: str, instance_id: str, body: bytes) -> None:
    """Queue one instance of a run (deduplicated per run and instance)."""
    await bus.publish_bytes(work_subject(run_id), body, headers={MSG_ID_HEADER: f"{run_id}.{instance_id}"})


async def publish_outcome(bus: Bus, run_id: str, outcome: Outcome, directory: Path) -> None:
    """Store the instance's files, then publish its outcome (deduplicated per run and instance)."""
    name = artifact_name(run_id, outcome.instance_id)
    data = await anyio.to_thread.run_sync(pack, directory)
    await (await Objects.open(bus, bus_subjects.ARTIFACTS_BUCKET)).put(name, data)
    body: dict[str, JsonValue] = {
        "kind": "swebench_outcome",
        "schema_version": 1,
        "run_id": run_id,
        "artifact": name,
    }
    body["outcome"] = outcome.model_dump(mode="json")
    await bus.publish_bytes(
        result_subject(run_id),
        json.dumps(body).encode(),
        headers={MSG_ID_HEADER: f"{run_id}.{outcome.instance_id}.{outcome.wall_s}"},
    )


async def fetch_artifact(bus: Bus, name: str) -> bytes:
    """An instance's packed files, taken out of the object store (read once, then deleted)."""
    store = await Objects.open(bus, bus_subjects.ARTIFACTS_BUCKET)
    data = await store.get(name)
    await store.delete(name)
    return data


def scratch_out() -> Path:
    """Where a worker writes an instance's files before packing them."""
    return Path(tempfile.mkdtemp(prefix="codeloop-swebench-worker-"))
