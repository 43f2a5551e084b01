// native.mjs drives taskgate in front of native-server.mjs (an upstream
// with tasks of its own) with the TypeScript SDK v1 client and its
// experimental tasks API, and prints one JSON object of what it observed;
// the Go test (native_test.go) checks it.
//
//   node native.mjs pass|ruled|lost URL[,URL]
//
// With two URLs every HTTP request goes to the next one (two replicas).
// pass: no rule names the upstream's task tools: its tasks pass through
// (research with its elicitation, slow cancelled), beside a gateway task
// (wait, made a task by --task wait); tasks/list shows them all; another
// session cannot reach them; broken's malformed CreateTaskResult is an
// error. ruled (--task research --sync survey): research is the gateway's
// task holding the upstream's; survey a plain call answered through the
// upstream's task. lost: a slow task is created, "created <id>" is printed
// on stderr, and after a line on stdin (the test restarts the upstream
// meanwhile) the task is read back until it leaves working.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { errInfo, harness, sleep } from './harness.mjs';

const [mode, urlList] = process.argv.slice(2);
const urls = urlList.split(',');
let rr = 0;
const roundRobin = async (u, init) => {
  const target = new URL(String(u instanceof Request ? u.url : u));
  target.host = new URL(urls[rr++ % urls.length]).host;
  return fetch(target, init);
};
const out = { mode, steps: {} };
const { finish, deadline } = harness(out, 90);
const REQ = { timeout: 30_000 };

let elicitations = 0;
function newClient(name) {
  const c = new Client({ name, version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  c.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicitations++;
    return { action: 'accept', content: { angle: `angle-${elicitations} (${req.params.message})` } };
  });
  c.onerror = (e) => {
    // Closing a client aborts its streams; the SDK reports that too. In
    // "lost" mode the upstream restarts, so the client's own session with
    // it is gone: its GET stream's reconnection gets 404 (the SDK says so
    // whenever it tries, before or after the test's last step), or 502
    // when it tries while the upstream is down (the reconnection does not
    // wait for the restart; on a busy machine the restart takes longer
    // than the SDK's first reconnection delay); and after its last retry
    // the SDK says it gave up, if the client lives that long.
    const lostSession =
      mode === 'lost' && /SSE stream: (Not Found|Bad Gateway)|^Error: Maximum reconnection attempts/.test(String(e));
    if (!String(e).includes('AbortError') && !lostSession) (out.clientErrors ??= []).push(String(e));
  };
  return c;
}

// stream runs a tool as a task through callToolStream and records its
// messages.
async function stream(client, name, args) {
  const messages = [];
  try {
    for await (const m of client.experimental.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
      ...REQ,
      task: { ttl: 60_000 },
    })) {
      messages.push({ type: m.type, task: m.task, result: m.result, error: m.error ? errInfo(m.error) : undefined });
    }
  } catch (e) {
    messages.push({ type: 'thrown', error: errInfo(e) });
  }
  return messages;
}

async function createTask(client, name, args) {
  const r = await client.request({ method: 'tools/call', params: { name, arguments: args } }, CreateTaskResultSchema, {
    ...REQ,
    task: { ttl: 60_000 },
  });
  return r.task.taskId;
}

async function attempt(f) {
  try {
    return { result: await f() };
  } catch (e) {
    return { error: errInfo(e) };
  }
}

// waitStatus polls tasks/get until the task leaves working/input_required.
async function waitStatus(client, id) {
  for (let i = 0; i < 200; i++) {
    const t = await client.experimental.tasks.getTask(id, REQ);
    if (!['working', 'input_required'].includes(t.status)) return t;
    await sleep(100);
  }
  return { status: 'still running' };
}

const client = newClient('taskgate-e2e-native');
try {
  await client.connect(new StreamableHTTPClientTransport(new URL(urls[0]), { fetch: roundRobin }));
  out.tools = (await client.listTools()).tools.map((t) => ({ name: t.name, taskSupport: t.execution?.taskSupport }));
  if (mode === 'pass') {
    // A task of the gateway's own (--task wait); directly, wait is a plain
    // tool and this fails.
    const gatewayTask = (await attempt(() => createTask(client, 'wait', { ms: 50 }))).result;
    out.steps.research = await stream(client, 'research', { topic: 'tides' });
    // A cancel of a task already completed is refused (-32602) and
    // changes nothing.
    const researchId = out.steps.research.find((m) => m.type === 'taskCreated')?.task?.taskId;
    if (researchId) {
      out.steps.cancelDone = await attempt(() => client.experimental.tasks.cancelTask(researchId, REQ));
      out.steps.afterCancelDone = await attempt(() => client.experimental.tasks.getTask(researchId, REQ));
    }
    const slow = await createTask(client, 'slow', { ms: 60_000 });
    out.ids = { gatewayTask, slow };
    out.steps.list = (await client.experimental.tasks.listTasks(undefined, REQ)).tasks.map((t) => ({ taskId: t.taskId, status: t.status }));
    out.steps.cancel = await attempt(() => client.experimental.tasks.cancelTask(slow, REQ));
    out.steps.afterCancel = await attempt(() => client.experimental.tasks.getTask(slow, REQ));
    if (gatewayTask) out.steps.gatewayTask = await waitStatus(client, gatewayTask);
    const other = newClient('taskgate-e2e-other');
    await other.connect(new StreamableHTTPClientTransport(new URL(urls[0]), { fetch: roundRobin }));
    out.steps.foreignGet = await attempt(() => other.experimental.tasks.getTask(slow, REQ));
    out.steps.foreignList = (await other.experimental.tasks.listTasks(undefined, REQ)).tasks.map((t) => t.taskId);
    await other.close();
    out.steps.broken = await attempt(() => createTask(client, 'broken', {}));
  }
  if (mode === 'ruled') {
    out.steps.research = await stream(client, 'research', { topic: 'tides' });
    out.steps.survey = await attempt(() => client.callTool({ name: 'survey', arguments: { topic: 'winds' } }, undefined, REQ));
    out.steps.slowPlain = await attempt(() => client.callTool({ name: 'slow', arguments: { ms: 10 } }, undefined, REQ));
    const held = await createTask(client, 'research', { topic: 'cancelled' });
    out.steps.cancelHeld = await attempt(() => client.experimental.tasks.cancelTask(held, REQ));
    out.ids = { held };
  }
  if (mode === 'lost') {
    const slow = await createTask(client, 'slow', { ms: 60_000 });
    out.ids = { slow };
    process.stderr.write(`created ${slow}\n`);
    const rl = createInterface({ input: process.stdin });
    await new Promise((resolve) => rl.once('line', resolve));
    rl.close();
    out.steps.get = await attempt(() => waitStatus(client, slow));
    out.steps.result = await attempt(() => client.experimental.tasks.getTaskResult(slow, CallToolResultSchema, REQ));
    out.steps.listed = await attempt(async () => (await client.experimental.tasks.listTasks(undefined, REQ)).tasks);
    out.steps.cancel = await attempt(() => client.experimental.tasks.cancelTask(slow, REQ));
  }
  out.elicitations = elicitations;
  await client.close().catch(() => {});
  clearTimeout(deadline);
  finish(0);
} catch (e) {
  out.error = String(e?.stack ?? e);
  finish(1);
}
