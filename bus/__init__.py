"""bus: codeloop's NATS JetStream layer — embedded server, connection, streams, contracts, actor runtime.

Subject scheme (all names are built in `bus/subjects.py`):

    codeloop.task.submit              TaskSubmitted from any client      stream CODELOOP_TASKS (work queue)
    codeloop.task.result.<role>       a worker role's result             stream CODELOOP_TASKS
    codeloop.work.<role>              work for a role (echo, planner...) stream CODELOOP_WORK  (work queue)
    codeloop.events.<task_id>.<name>  transition, result, dead_letter... stream CODELOOP_EVENTS (limits, 7 days)
    KV codeloop-tasks                 key task.<task_id>: the TaskState record (compare-and-set)
    KV codeloop-handled               key <durable>.<message id>: handled marks (1 day TTL)
    object store codeloop-artifacts   snapshots (blob/, manifest/), recordings (recording/)

The orchestrator's durable consumer (`codeloop-orchestrator`) takes all of `codeloop.task.>`;
each worker role has one durable (`codeloop-<role>`) on `codeloop.work.<role>` shared by all its
workers, in any number of processes. Every message is an `Envelope` (JSON, `schema_version`),
published with `Nats-Msg-Id` = envelope id.

Delivery guarantees:
- Publishing is at-least-once, storing is once per id: JetStream drops a second publish of the
  same envelope id within 10 minutes (`streams.DUPLICATE_WINDOW_S`). A task's envelope id is its
  task id, and the orchestrator's claim of the task record stops a copy arriving later still.
- Handling is at-least-once with idempotent handlers: a message is acked only after the handler
  returned, i.e. after its results were stored (their publishes awaited the streams' acks).
  Results carry ids derived from the input's id (`Delivery.derived_id`), so a handler re-run
  after a crash republishes the same ids and JetStream stores them once. A redelivery of a
  message this role already finished (lost ack) is acked without running the handler.
  Effects outside the bus must be idempotent on the message id themselves (e.g. a KV record that
  remembers the ids it applied, `records.compare_and_set`), because a worker may die between
  applying an effect and acking.
- A held message is redelivered `ack_wait_s` after its worker stops sending in-progress
  heartbeats (crash, SIGKILL, partition); transient failures (`actor.RetryLater`) are nak'ed with
  back-off; after `max_deliver` deliveries the message is terminated and a `DeadLetter` event is
  published on `codeloop.events.<task_id>.dead_letter` — by the worker itself, or, if it died
  holding the last delivery, from JetStream's MAX_DELIVERIES advisory (`dead_letters.py`).
  Malformed messages and unknown schema versions are dead-lettered at once; workers keep running.
- Task records change only by compare-and-set on their KV revision; a writer that loses retries
  on the winner's record, so no update is lost.
- Replicas: 1 on the embedded server, 3 on a three-node cluster (`BusConfig.replicas`); with R3
  streams a node may die without losing a stored message.
"""
