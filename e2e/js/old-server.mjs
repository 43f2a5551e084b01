// old-server.mjs: a TypeScript SDK client at 2025-11-25 in front of a server
// of an older protocol version (through taskgate). It prints one JSON
// object of what it saw; the Go test (versions_test.go) decides what is
// right.
//
//   node old-server.mjs URL TOOL ARGS_JSON
//
// It connects, lists the tools, calls TOOL plainly, then as a task
// (task-augmented tools/call, tasks/get until terminal, tasks/result).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, tool, argsJSON] = process.argv.slice(2);
if (!url || !tool) {
  console.error('usage: node old-server.mjs URL TOOL ARGS_JSON');
  process.exit(2);
}
const args = JSON.parse(argsJSON || '{}');
const out = {};
const finish = (code) => {
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(code);
};
// A hung gateway must fail the test, not stall it.
setTimeout(() => {
  out.error = 'timeout after 50s';
  finish(3);
}, 50_000).unref();
const REQ = { timeout: 20_000 };

try {
  const client = new Client(
    { name: 'old-server-e2e', version: '1.0.0' },
    { capabilities: { tasks: { list: {}, cancel: {}, requests: {} } } },
  );
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion;
  out.serverCapabilities = client.getServerCapabilities();
  const tools = await client.listTools(undefined, REQ);
  out.tools = Object.fromEntries(tools.tools.map((t) => [t.name, t.execution?.taskSupport ?? '']));
  out.plain = await client.callTool({ name: tool, arguments: args }, CallToolResultSchema, REQ);
  const created = await client.request(
    { method: 'tools/call', params: { name: tool, arguments: args } },
    CreateTaskResultSchema,
    { ...REQ, task: { ttl: 60_000 } },
  );
  out.created = created.task;
  const id = created.task.taskId;
  let task = created.task;
  for (let i = 0; i < 500 && !['completed', 'failed', 'cancelled'].includes(task.status); i++) {
    await new Promise((r) => setTimeout(r, 20));
    task = await client.experimental.tasks.getTask(id, REQ);
  }
  out.final = task;
  out.result = await client.experimental.tasks.getTaskResult(id, CallToolResultSchema, REQ);
  await client.close();
  finish(0);
} catch (e) {
  out.error = String(e?.stack ?? e);
  finish(1);
}
