// stdio-child-2025.mjs is a 2025-11-25 client of the official TypeScript
// SDK in front of a server that also speaks 2026-07-28 (go-sdk's
// conformance server) run by taskgate as a stdio child (issue 37, item 1).
// It records what reaches it of the child's requests and log messages,
// on plain calls and inside tasks, and prints one JSON object; the Go test
// (stdio_versions_test.go) decides what is right.
//
//   node stdio-child-2025.mjs URL
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
if (!url) {
  console.error('usage: node stdio-child-2025.mjs URL');
  process.exit(2);
}
const out = { steps: {} };
const finish = (code) => {
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(code);
};
const deadline = setTimeout(() => {
  out.error = 'timeout after 50s';
  finish(3);
}, 50_000);

const seen = { logs: [], elicitations: [], samples: [] };
const client = new Client(
  { name: 'taskgate-e2e-stdio-2025', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} }, sampling: {} } },
);
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  seen.elicitations.push(req.params.message);
  return { action: 'accept', content: { username: 'grace' } };
});
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  const prompt = req.params.messages.map((m) => m.content.text).join('');
  seen.samples.push(prompt);
  return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: `sampled ${prompt}` } };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  seen.logs.push(String(n.params.data));
});

const text = (res) => (res?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const errInfo = (e) => (typeof e?.code === 'number' ? { code: e.code, message: e.message } : { message: String(e?.stack ?? e) });

// inTask runs a tool as a task through the SDK's task stream and records
// the statuses it passed through and its result.
async function inTask(name, args) {
  const rec = { statuses: [] };
  try {
    for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
      timeout: 20_000,
      task: { ttl: 60_000 },
    })) {
      if (m.type === 'taskCreated') rec.taskId = m.task.taskId;
      if (m.type === 'taskStatus') rec.statuses.push(m.task.status);
      if (m.type === 'result') rec.text = text(m.result);
      if (m.type === 'error') rec.error = errInfo(m.error);
    }
  } catch (e) {
    rec.error = errInfo(e);
  }
  return rec;
}

const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion;
  out.hasSessionId = typeof transport.sessionId === 'string' && transport.sessionId.length > 0;
  out.tasksCapability = client.getServerCapabilities()?.tasks !== undefined;
  await client.setLoggingLevel('debug');
  const s = out.steps;

  s.logging = { text: text(await client.callTool({ name: 'test_tool_with_logging', arguments: {} })) };
  s.logging.logs = [...seen.logs];
  s.elicit = { text: text(await client.callTool({ name: 'test_elicitation', arguments: { message: 'plain: who are you?' } })) };
  s.sample = { text: text(await client.callTool({ name: 'test_sampling', arguments: { prompt: 'plain-prompt' } })) };

  s.taskElicit = await inTask('test_elicitation', { message: 'in a task: who are you?' });
  s.taskSample = await inTask('test_sampling', { prompt: 'task-prompt' });
  const before = seen.logs.length;
  s.taskLogging = await inTask('test_tool_with_logging', {});
  s.taskLogging.logs = seen.logs.slice(before);

  out.seen = seen;
  await transport.terminateSession();
  await client.close();
} catch (e) {
  out.error = String(e?.stack ?? e);
  out.seen = seen;
  finish(1);
}
clearTimeout(deadline);
finish(0);
