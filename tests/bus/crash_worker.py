"""An echo worker process for the SIGKILL test: `python crash_worker.py NATS_URL MODE [TAG]`.

MODE `normal` handles messages; `hold-before-effect` / `hold-after-effect` announce on core subject
`test.holding` that they hold a message (before / after applying its effect) and then hang, so the
test can SIGKILL them at that point. The effect is a counter in KV bucket `test-effects`, guarded by
the message id as handlers should be (`bus.records.compare_and_set`).

MODE `die-before-ack` (and `normal-unguarded`, its successor) count without the guard, and the
worker SIGKILLs itself after the runtime recorded the message as handled but before it acked:
the one moment a test cannot reach from outside, so this Actor subclass reaches it from inside.
The redelivery must then skip the handler, or the unguarded count would reach 2.

TAG is ignored; the test passes its tmp dir so its leftover-process check sees this process.
"""

import json
import os
import signal
import sys

import anyio

from agents.roles.echo import handle_echo
from bus import subjects
from bus.actor import Actor, ActorSpec, Delivery, DeliveryPolicy
from bus.config import BusConfig
from bus.connection import open_bus
from bus.records import compare_and_set

EFFECTS_BUCKET = "test-effects"
UNGUARDED = ("die-before-ack", "normal-unguarded")


async def main(url: str, mode: str) -> None:
    # A server with generated credentials (an embedded serve) hands them over in the environment.
    auth = {
        "user": os.environ.get("CODELOOP_NATS_USER"),
        "password": os.environ.get("CODELOOP_NATS_PASSWORD"),
    }
    async with open_bus(BusConfig(servers=(url,), name=f"crash-worker-{mode}", **auth)) as bus:  # pyright: ignore[reportArgumentType] - the auth options come from the environment of the test, BusConfig validates them
        effects = await bus.js.key_value(EFFECTS_BUCKET)

        async def announce(stage: str) -> None:
            await bus.nc.publish("test.holding", json.dumps({"pid": os.getpid(), "stage": stage}).encode())
            await bus.nc.flush()

        async def handler(delivery: Delivery):
            if mode == "hold-before-effect":
                await announce("before-effect")
                await anyio.sleep_forever()

            def count_once(raw: bytes | None) -> bytes | None:
                state = json.loads(raw) if raw else {"count": 0, "applied": []}
                if delivery.envelope.id in state["applied"] and mode not in UNGUARDED:
                    return None
                state["count"] += 1
                state["applied"].append(delivery.envelope.id)
                return json.dumps(state).encode()

            await compare_and_set(effects, f"count.{delivery.envelope.task_id}", count_once)
            if mode == "hold-after-effect":
                await announce("after-effect")
                await anyio.sleep_forever()
            return await handle_echo(delivery)

        spec = ActorSpec(
            address=subjects.RoleAddress.worker("echo"),
            handler=handler,
            policy=DeliveryPolicy(ack_wait_s=1.0),
        )
        actor_class = DiesBeforeAck if mode == "die-before-ack" else Actor
        await actor_class(bus, spec).run()


class DiesBeforeAck(Actor):
    async def _remember(self, message_id: str) -> None:
        await super()._remember(message_id)
        await self.bus.nc.flush()
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
