// The official TypeScript SDK client against the tasks server over streamable HTTP:
// lists the tools with their schemas, submits a task, reads it back; prints one JSON object.
// Usage: node tasks_client.mjs URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "codeloop-ts-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
// callTool validates structuredContent against each tool's outputSchema.
const submitted = await client.callTool({
  name: "submit_task",
  arguments: { task: "What does add do?", repo: "calc" },
});
const taskId = submitted.structuredContent?.task_id;
const got = await client.callTool({ name: "get_task", arguments: { task_id: taskId } });
console.log(JSON.stringify({
  tools: tools.map((t) => ({ name: t.name, input: t.inputSchema, output: t.outputSchema ?? null })),
  protocol: transport.protocolVersion ?? null,
  submitted: { isError: submitted.isError ?? false, structured: submitted.structuredContent ?? null },
  got: { isError: got.isError ?? false, structured: got.structuredContent ?? null },
}));
await client.close();
