// everything.mjs drives the reference server @modelcontextprotocol/server-everything
// with the TypeScript SDK v1 client and prints one JSON object of what it
// observed; the Go test (stdio_test.go) compares and checks.
//
//   node everything.mjs plain|tasks|native URL[,URL]
//
// plain: the tool list and an echo (to compare the server over stdio
// through taskgate with the same server over HTTP). tasks: also progress,
// elicitation and sampling inside tasks, and a cancel, through the SDK's
// experimental tasks client. native: the server's own task tool
// (simulate-research-query, taskSupport "required"), with its clarifying
// elicitation; with two URLs every HTTP request goes to the next one.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { errInfo, harness } from './harness.mjs';

const [mode, urlList] = process.argv.slice(2);
const urls = urlList.split(',');
const url = urls[0];
let rr = 0;
const roundRobin = async (u, init) => {
  const target = new URL(String(u instanceof Request ? u.url : u));
  target.host = new URL(urls[rr++ % urls.length]).host;
  return fetch(target, init);
};
const out = { mode, steps: {} };
const { finish, deadline } = harness(out, 60);
const REQ = { timeout: 20_000 };

const seen = { elicitations: 0, samples: 0, progress: 0 };
const client = new Client(
  { name: 'taskgate-e2e-everything', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } } },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  seen.elicitations++;
  if (mode === 'native') {
    // The research tool asks which interpretation: pick the first offered.
    const props = req.params.requestedSchema?.properties ?? {};
    const content = {};
    for (const [k, v] of Object.entries(props)) {
      content[k] = v.enum?.[0] ?? v.oneOf?.[0]?.const ?? 'the first one';
    }
    return { action: 'accept', content };
  }
  return { action: 'decline' };
});
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  seen.samples++;
  return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: `sampled(${req.params.messages.length})` } };
});
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///work' }] }));
client.onerror = (e) => (out.clientErrors ??= []).push(String(e));

// stream runs a tool as a task through callToolStream and records its
// messages.
async function stream(name, args, extra = {}) {
  const messages = [];
  try {
    for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
      ...REQ,
      task: { ttl: 60_000 },
      ...extra,
    })) {
      messages.push({ type: m.type, task: m.task, result: m.result, error: m.error ? errInfo(m.error) : undefined });
    }
  } catch (e) {
    messages.push({ type: 'thrown', error: errInfo(e) });
  }
  return messages;
}

try {
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: roundRobin }));
  const tools = await client.listTools();
  out.tools = tools.tools;
  out.steps.echo = await client.callTool({ name: 'echo', arguments: { message: 'hello' } }, undefined, REQ);
  if (mode === 'tasks') {
    out.steps.progress = await stream('trigger-long-running-operation', { duration: 1, steps: 4 }, { onprogress: () => seen.progress++ });
    out.steps.elicit = await stream('trigger-elicitation-request', {});
    out.steps.sample = await stream('trigger-sampling-request', { prompt: 'hi', maxTokens: 5 });
    const created = await client.request(
      { method: 'tools/call', params: { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 3 } } },
      CreateTaskResultSchema,
      { ...REQ, task: { ttl: 60_000 } },
    );
    const id = created.task.taskId;
    out.steps.cancel = await client.experimental.tasks.cancelTask(id, REQ);
    out.steps.afterCancel = await client.experimental.tasks.getTask(id, REQ);
  }
  if (mode === 'native') {
    out.steps.native = await stream('simulate-research-query', { topic: 'tasks', ambiguous: true });
    const created = out.steps.native.find((m) => m.type === 'taskCreated');
    if (created?.task?.taskId) {
      out.steps.nativeGet = await client.experimental.tasks.getTask(created.task.taskId, REQ);
      // Another session (another owner) must not reach it.
      const other = new Client({ name: 'taskgate-e2e-other', version: '1.0.0' }, { capabilities: {} });
      await other.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: roundRobin }));
      try {
        out.steps.foreignGet = { result: await other.experimental.tasks.getTask(created.task.taskId, REQ) };
      } catch (e) {
        out.steps.foreignGet = { error: errInfo(e) };
      }
      await other.close();
    }
  }
  out.seen = seen;
  await client.close();
  clearTimeout(deadline);
  finish(0);
} catch (e) {
  out.error = String(e?.stack ?? e);
  finish(1);
}
