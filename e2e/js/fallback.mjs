// fallback.mjs drives taskgate's fallback task tools (--fallback-tools)
// with the official TypeScript SDK v1 client declaring NO tasks
// capability, as most clients in use do, and prints one JSON object of
// what it observed. The Go test (fallback_test.go) decides what is right;
// this script only acts and records.
//
//   node fallback.mjs URL[,URL...]
//
// With several URLs every HTTP request goes to the next one in turn, as a
// load balancer without affinity would, except that each step's tools/call
// goes to the replica the step names, so that tasks are created on one
// replica and read, answered and cancelled on the other. Two sessions: "asker" declares
// elicitation (its handler answers name "Grace"); "plain" declares no
// capabilities at all.
//
// Exit status: 0 with the JSON on stdout; non-zero with {"error": ...}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const urls = (process.argv[2] ?? '').split(',').filter(Boolean);
if (urls.length === 0) {
  console.error('usage: node fallback.mjs URL[,URL...]');
  process.exit(2);
}
const T0 = Date.now();
const now = () => Date.now() - T0;
const out = { steps: {}, listChanged: [], elicitations: [], replicas: {} };

function finish(code) {
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(code);
}
const deadline = setTimeout(() => {
  out.error = 'timeout after 100s';
  finish(3);
}, 100_000);

let rr = 0;
let pin; // the replica of the current step's tools/call
function roundRobin(label) {
  return async (url, init = {}) => {
    const target = new URL(String(url instanceof Request ? url.url : url));
    let replica = rr++ % urls.length;
    const body = typeof init.body === 'string' ? init.body : '';
    try {
      const m = JSON.parse(body);
      if (m.method === 'tools/call' && pin !== undefined) {
        replica = pin % urls.length;
        (out.replicas[`${label}:${m.params.name}`] ??= []).push(replica);
      }
    } catch {
      /* not JSON: a GET or DELETE */
    }
    target.host = new URL(urls[replica]).host;
    return fetch(target, init);
  };
}

async function connect(label, capabilities) {
  const client = new Client({ name: `taskgate-e2e-fallback-${label}`, version: '1.0.0' }, {
    capabilities,
    listChanged: {
      tools: {
        autoRefresh: true,
        debounceMs: 0,
        onChanged: (err, tools) => {
          out.listChanged.push({ client: label, t: now(), error: err ? String(err) : undefined, tools: tools?.map((x) => x.name) });
        },
      },
    },
  });
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      out.elicitations.push({ client: label, t: now(), message: req.params.message });
      return { action: 'accept', content: { name: 'Grace' } };
    });
  }
  client.onerror = (e) => (out.clientErrors ??= []).push({ client: label, error: String(e) });
  const transport = new StreamableHTTPClientTransport(new URL(urls[0]), { fetch: roundRobin(label) });
  await client.connect(transport);
  return { client, transport };
}

// call runs a tool on replica and records {ms, result} or {ms, error}
// under step.
async function call(c, step, replica, name, args) {
  const t = now();
  pin = replica;
  try {
    const result = await c.client.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
    out.steps[step] = { t, ms: now() - t, result };
    return result;
  } catch (e) {
    out.steps[step] = { t, ms: now() - t, error: { code: e?.code, message: String(e?.message ?? e) } };
    return undefined;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

try {
  const asker = await connect('asker', { elicitation: { form: {} } });
  const plain = await connect('plain', {});
  out.serverCapabilities = asker.client.getServerCapabilities();
  out.protocolVersion = asker.transport.protocolVersion;
  out.toolsBefore = (await asker.client.listTools()).tools.map((x) => x.name);

  // A slow tool answers early with a task id; the SDK's own list-changed
  // handling re-lists the tools. 6 s: still working when its status is
  // read after that, however busy the machine.
  const started = await call(asker, 'slowStarted', 0, 'slow', { seconds: 6, text: 'late' });
  const id = started?.structuredContent?.taskId;
  for (let i = 0; i < 50 && !out.listChanged.some((l) => l.client === 'asker' && l.tools); i++) await sleep(100);
  if (id) {
    await call(asker, 'status', 1, 'taskgate_task_status', { taskId: id });
    await call(plain, 'foreignStatus', 0, 'taskgate_task_status', { taskId: id });
    await call(plain, 'foreignResult', 1, 'taskgate_task_result', { taskId: id, waitSeconds: 1 });
    await call(plain, 'foreignCancel', 0, 'taskgate_task_cancel', { taskId: id });
    await call(asker, 'result', 1, 'taskgate_task_result', { taskId: id, waitSeconds: 20 });
  }

  // Cancel.
  const long = await call(asker, 'longStarted', 0, 'slow', { seconds: 30, text: 'never' });
  const longID = long?.structuredContent?.taskId;
  if (longID) {
    await call(asker, 'cancel', 1, 'taskgate_task_cancel', { taskId: longID });
    await call(asker, 'cancelledStatus', 0, 'taskgate_task_status', { taskId: longID });
  }

  // Input through the elicitation handler while waiting in task_result.
  const el = await call(asker, 'elicitStarted', 0, 'elicit', {});
  const elID = el?.structuredContent?.taskId;
  if (elID) await call(asker, 'elicitResult', 1, 'taskgate_task_result', { taskId: elID, waitSeconds: 20 });

  // Input through task_answer by a client without elicitation.
  const pl = await call(plain, 'plainStarted', 1, 'elicit', {});
  const plID = pl?.structuredContent?.taskId;
  if (plID) {
    // An agent reads the status until it shows the question (the gateway
    // records it as the task starts).
    let st;
    for (let i = 0; i < 50; i++) {
      st = await call(plain, 'plainStatus', 0, 'taskgate_task_status', { taskId: plID });
      if (st?.structuredContent?.status === 'input_required') break;
      await sleep(100);
    }
    const key = Object.keys(st?.structuredContent?.inputRequests ?? {})[0];
    if (key) {
      await call(plain, 'plainAnswer', 1, 'taskgate_task_answer', {
        taskId: plID,
        inputResponses: { [key]: { action: 'accept', content: { name: 'Ada' } } },
      });
    }
    await call(plain, 'plainResult', 0, 'taskgate_task_result', { taskId: plID, waitSeconds: 20 });
  }
  await asker.client.close();
  await plain.client.close();
  clearTimeout(deadline);
  finish(0);
} catch (e) {
  out.error = String(e?.stack ?? e);
  finish(1);
}
