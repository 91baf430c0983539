// A codeloop review role in JavaScript. It speaks only the bus contract (docs/bus-contract.md)
// and the message schemas `codeloop schema` prints: it consumes `review_request`s from the role's
// durable consumer, answers each with a `review_result` (or a `step_failed`), and registers as a
// NATS micro service so `codeloop roles` and the orchestrator see it.
//
//   codeloop schema -o schema.json
//   CODELOOP_NATS_USER=... CODELOOP_NATS_PASSWORD=... \
//     node reviewer.mjs --nats nats://127.0.0.1:4222 --schema schema.json [--role js-reviewer] [--ack-wait 30]

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { parseArgs } from "node:util";

import { AckPolicy, jetstream, jetstreamManager } from "@nats-io/jetstream";
import { Svcm } from "@nats-io/services";
import { connect, nanos } from "@nats-io/transport-node";

import { scan } from "./rules.mjs";

const { values: args } = parseArgs({
  options: {
    nats: { type: "string", default: process.env.CODELOOP_NATS_URL ?? "nats://127.0.0.1:4222" },
    schema: { type: "string" },
    role: { type: "string", default: "js-reviewer" },
    "ack-wait": { type: "string", default: "30" },
  },
});
if (!args.schema) {
  console.error("error: --schema FILE is required (write it with `codeloop schema -o FILE`)");
  process.exit(2);
}
const schema = JSON.parse(readFileSync(args.schema, "utf8"));
const SCHEMA_VERSION = schema.schema_version;
for (const kind of ["review_request", "review_result", "step_failed"]) {
  if (!schema.payloads[kind]) {
    console.error(`error: ${args.schema} has no ${kind} message: this codeloop has no review stages`);
    process.exit(2);
  }
}
const ROLE = args.role;
const STREAM = "CODELOOP_WORK";
const DURABLE = `codeloop-${ROLE}`;
// The Python runtime derives a result's id as uuid5(NAMESPACE, "<request id>/<role>/<label>"):
// the same id on a re-run, so JetStream stores a republished result once.
const NAMESPACE = "6b1f1c2e-7d0a-4c1e-9a57-3f0f5a1c0de1";

function uuid5hex(name) {
  const ns = Buffer.from(NAMESPACE.replace(/-/g, ""), "hex");
  const hash = createHash("sha1").update(Buffer.concat([ns, Buffer.from(name, "utf8")])).digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x50;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  return bytes.toString("hex");
}

const nc = await connect({
  servers: args.nats.split(","),
  user: process.env.CODELOOP_NATS_USER,
  pass: process.env.CODELOOP_NATS_PASSWORD,
  name: `codeloop ${ROLE} (node)`,
});
const svcm = new Svcm(nc);

// Refuse an orchestrator that speaks another schema version, before taking any work.
for await (const info of await svcm.client().info("orchestrator")) {
  const theirs = Number(info.metadata?.codeloop_schema_version);
  if (theirs !== SCHEMA_VERSION) {
    console.error(
      `error: the orchestrator on this bus speaks message schema version ${theirs}; this ${ROLE} worker ` +
        `speaks ${SCHEMA_VERSION} (from ${args.schema}): regenerate it with \`codeloop schema\` of that codeloop`,
    );
    await nc.close();
    process.exit(2);
  }
}

// Bind to the role's durable consumer, or create it with the configuration the contract gives.
const jsm = await jetstreamManager(nc);
try {
  await jsm.consumers.info(STREAM, DURABLE);
} catch {
  await jsm.consumers.add(STREAM, {
    durable_name: DURABLE,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(Number(args["ack-wait"]) * 1000),
    max_deliver: 8,
    filter_subject: `codeloop.work.${ROLE}`,
    max_ack_pending: 1000,
  });
}
const js = jetstream(nc);

const counts = { requests: 0, errors: 0, in_flight: 0 };
const service = await svcm.add({
  name: ROLE,
  version: "0.1.0",
  description: "codeloop review role in JavaScript",
  metadata: {
    codeloop_role: ROLE,
    codeloop_stage_kind: "review",
    codeloop_schema_version: String(SCHEMA_VERSION),
    codeloop_host: hostname(),
    codeloop_pid: String(process.pid),
  },
  statsHandler: async () => ({ ...counts }),
});
service.addEndpoint("status", {
  subject: `codeloop.workers.${ROLE}.${service.info().id}`,
  handler: (err, msg) => msg?.respond(JSON.stringify({ role: ROLE, ...counts })),
});

function review(request) {
  const findings = scan(request.patch);
  if (findings.length === 0) {
    return { kind: "review_result", step_id: request.step_id, verdict: "approve", findings: [],
             feedback: "No security problems in the added lines." };
  }
  const rules = [...new Set(findings.map((f) => f.rule))].sort();
  return {
    kind: "review_result", step_id: request.step_id, verdict: "request_changes", findings,
    feedback: `Remove these from the patch (${rules.join(", ")}); keep the fix itself.`,
  };
}

async function answer(request, payload, label) {
  const envelope = {
    id: uuid5hex(`${request.id}/${ROLE}/${label}`),
    kind: payload.kind,
    task_id: request.task_id,
    trace_id: request.trace_id,
    causation_id: request.id,
    sent_at: new Date().toISOString(),
    schema_version: SCHEMA_VERSION,
    payload,
  };
  // Wait for the stream's ack before acking the request: never lose a result.
  await js.publish(`codeloop.task.result.${ROLE}`, JSON.stringify(envelope), { msgID: envelope.id });
}

const consumer = await js.consumers.get(STREAM, DURABLE);
const messages = await consumer.consume({ max_messages: 16 });
const stop = async () => {
  messages.stop();
  await service.stop();
  await nc.drain();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
console.log(JSON.stringify({ ready: true, role: ROLE, service_id: service.info().id, schema_version: SCHEMA_VERSION }));

for await (const msg of messages) {
  counts.requests += 1;
  counts.in_flight += 1;
  try {
    let request;
    try {
      request = JSON.parse(msg.string());
    } catch {
      msg.term(); // unreadable: the contract's dead letter is the runtime's; never retry it
      counts.errors += 1;
      continue;
    }
    if (request.schema_version !== SCHEMA_VERSION || request.kind !== "review_request") {
      await answer(request, {
        kind: "step_failed", step_id: request.payload?.step_id ?? "", role: ROLE, failure_class: "agent.format",
        message: `the ${ROLE} takes review_request of schema version ${SCHEMA_VERSION}, ` +
          `got ${request.kind} of version ${request.schema_version}`,
      }, "result");
      counts.errors += 1;
    } else {
      await answer(request, review(request.payload), "result");
    }
    msg.ack();
  } catch (err) {
    counts.errors += 1;
    console.error(`${ROLE}: ${err}`);
    msg.nak(1000);
  } finally {
    counts.in_flight -= 1;
  }
}
