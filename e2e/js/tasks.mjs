// tasks.mjs drives MCP Tasks (2025-11-25) through taskgate with the official
// TypeScript SDK's experimental tasks client (client.experimental.tasks) and
// prints one JSON object of what it observed. The Go tests (tasks_test.go)
// decide what is right; this script only acts and records.
//
//   node tasks.mjs SCENARIO URL[,URL...]
//
// SCENARIO is lifecycle, cancel, list or access (see the functions below).
// With several URLs every HTTP request goes to the next one in turn (a fetch
// wrapper rewrites host:port), as a load balancer without affinity would.
//
// Besides the SDK-level results ("steps"), every HTTP exchange is recorded as
// the client saw it ("exchanges": the JSON-RPC body sent, the status, and the
// JSON body or each SSE event received, with times in ms since start), so the
// tests can check what the SDK hides: _meta, which stream a message came on,
// which replica answered.
//
// Exit status: 0 with the JSON on stdout; non-zero with {"error": ...} added.
import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const [scenario, urlList] = process.argv.slice(2);
if (!scenario || !urlList) {
  console.error('usage: node tasks.mjs lifecycle|cancel|list|access URL[,URL...]');
  process.exit(2);
}
const urls = urlList.split(',');

const T0 = Date.now();
const now = () => Date.now() - T0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const out = { scenario, replicas: urls.length, steps: {}, exchanges: [] };

function finish(code) {
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(code);
}

// Bound the whole run: a hung gateway must fail the test, not stall it.
const deadline = setTimeout(() => {
  out.error = 'timeout after 50s';
  finish(3);
}, 50_000);

// Per-request bound; tasks/result blocks, so keep it well under the deadline.
const REQ = { timeout: 20_000 };
const TTL = 60_000;

function errInfo(e) {
  if (e && typeof e.code === 'number') {
    return { code: e.code, message: e.message, data: e.data };
  }
  return { message: String(e?.stack ?? e) };
}

// timed runs fn and records {ms, result} or {ms, error}.
async function timed(fn) {
  const t = now();
  try {
    const result = await fn();
    return { t, ms: now() - t, result };
  } catch (e) {
    return { t, ms: now() - t, error: errInfo(e) };
  }
}

function text(res) {
  return (res?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
}

// ---------------------------------------------------------------------------
// The traced, round-robin fetch.

let rr = 0;

function tracingFetch(label) {
  return async (url, init = {}) => {
    const target = new URL(String(url instanceof Request ? url.url : url));
    const replica = rr++ % urls.length;
    target.host = new URL(urls[replica]).host;
    const ex = { client: label, replica, method: init.method ?? 'GET', t0: now() };
    if (typeof init.body === 'string') {
      try {
        ex.request = JSON.parse(init.body);
      } catch {
        ex.request = init.body;
      }
    }
    out.exchanges.push(ex);
    let res;
    try {
      res = await fetch(target, init);
    } catch (e) {
      ex.error = String(e);
      ex.t1 = now();
      throw e;
    }
    ex.status = res.status;
    const ct = res.headers.get('content-type') ?? '';
    ex.contentType = ct;
    const headers = new Headers(res.headers);
    headers.delete('content-encoding');
    headers.delete('content-length');
    if (res.body && ct.includes('text/event-stream')) {
      const [a, b] = res.body.tee();
      ex.events = [];
      drainSSE(b, ex);
      return new Response(a, { status: res.status, statusText: res.statusText, headers });
    }
    const body = await res.text();
    ex.t1 = now();
    if (body !== '') {
      try {
        ex.response = JSON.parse(body);
      } catch {
        ex.response = body;
      }
    }
    return new Response(body === '' ? null : body, { status: res.status, statusText: res.statusText, headers });
  };
}

// drainSSE reads a copy of an SSE body and records each event's data.
async function drainSSE(stream, ex) {
  const reader = stream.getReader();
  const dec = new TextDecoder();
  let buf = '';
  const flush = (block) => {
    const datas = [];
    let id;
    for (const line of block.split('\n')) {
      if (line.startsWith('data:')) datas.push(line.slice(5).replace(/^ /, ''));
      else if (line.startsWith('id:')) id = line.slice(3).trim();
    }
    if (datas.length === 0) return;
    let data = datas.join('\n');
    try {
      data = JSON.parse(data);
    } catch {
      /* keep the text */
    }
    ex.events.push({ t: now(), id, data });
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, '\n');
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        flush(buf.slice(0, i));
        buf = buf.slice(i + 2);
      }
    }
  } catch (e) {
    ex.streamError = String(e);
  } finally {
    if (buf.trim() !== '') flush(buf);
    ex.t1 = now();
  }
}

// ---------------------------------------------------------------------------
// Clients.

async function connect(label, headers) {
  const seen = { elicitations: [], samples: [], roots: 0, progress: [] };
  const client = new Client(
    { name: 'taskgate-e2e-ts-tasks', version: '1.0.0' },
    { capabilities: { elicitation: { form: {} }, sampling: {}, roots: { listChanged: false } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    seen.elicitations.push({ t: now(), message: req.params.message });
    return { action: 'accept', content: { name: 'Grace' } };
  });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    const prompt = req.params.messages.map((m) => m.content.text).join('');
    seen.samples.push({ t: now(), prompt });
    return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: `sampled: ${prompt}` } };
  });
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    seen.roots++;
    return { roots: [{ uri: 'file:///work/a', name: 'a' }, { uri: 'file:///work/b' }] };
  });
  client.onerror = (e) => {
    (out.clientErrors ??= []).push({ client: label, t: now(), error: String(e) });
  };
  const transport = new StreamableHTTPClientTransport(new URL(urls[0]), {
    fetch: tracingFetch(label),
    requestInit: headers ? { headers } : undefined,
  });
  await client.connect(transport);
  const c = { label, client, transport, seen, tasks: client.experimental.tasks };
  c.onprogress = (p) => seen.progress.push({ t: now(), progress: p.progress, total: p.total, message: p.message });
  return c;
}

function describe(c) {
  return {
    protocolVersion: c.transport.protocolVersion,
    serverCapabilities: c.client.getServerCapabilities(),
    serverInfo: c.client.getServerVersion(),
    hasSessionId: typeof c.transport.sessionId === 'string' && c.transport.sessionId.length > 0,
  };
}

// create sends a task-augmented tools/call and returns the CreateTaskResult.
function create(c, name, args, opts = {}) {
  const { ttl = TTL, ...rest } = opts;
  return timed(() =>
    c.client.request(
      { method: 'tools/call', params: { name, arguments: args } },
      CreateTaskResultSchema,
      { ...REQ, task: { ttl }, ...rest },
    ),
  );
}

// stream runs callToolStream to its end (at most 25 s) and records every
// message. (No AbortSignal: the SDK never removes its abort listeners, so a
// signal firing later would cancel requests long answered.)
async function stream(c, name, args, opts = {}) {
  const messages = [];
  const gen = c.tasks.callToolStream({ name, arguments: args }, CallToolResultSchema, {
    ...REQ,
    task: { ttl: TTL },
    ...opts,
  });
  const drain = (async () => {
    try {
      for await (const m of gen) {
        const rec = { type: m.type, t: now() };
        if (m.task) rec.task = m.task;
        if (m.result) rec.result = m.result;
        if (m.error) rec.error = errInfo(m.error);
        messages.push(rec);
      }
    } catch (e) {
      messages.push({ type: 'thrown', t: now(), error: errInfo(e) });
    }
  })();
  let timer;
  const timedOut = await Promise.race([
    drain.then(() => false),
    new Promise((r) => (timer = setTimeout(() => r(true), 25_000))),
  ]);
  clearTimeout(timer);
  if (timedOut) messages.push({ type: 'timeout', t: now() });
  const created = messages.find((m) => m.type === 'taskCreated');
  return { messages: [...messages], taskId: created?.task?.taskId };
}

const get = (c, id) => timed(() => c.tasks.getTask(id, REQ));
const result = (c, id) => timed(() => c.tasks.getTaskResult(id, CallToolResultSchema, REQ));
const cancel = (c, id) => timed(() => c.tasks.cancelTask(id, REQ));
const list = (c, cursor) => timed(() => c.tasks.listTasks(cursor, REQ));

async function listAll(c) {
  const pages = [];
  let cursor;
  for (let i = 0; i < 10; i++) {
    const p = await list(c, cursor);
    pages.push(p);
    cursor = p.result?.nextCursor;
    if (!cursor) break;
  }
  return pages;
}

// waitFor polls cond every 20 ms for at most ms.
async function waitFor(cond, ms) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await sleep(20);
  }
  return true;
}

// ---------------------------------------------------------------------------
// Scenarios.

// lifecycle: every kind of tool as a task, plus the sync and error paths.
async function lifecycle() {
  const c = await connect('main');
  Object.assign(out, describe(c));
  const tools = await c.client.listTools();
  out.tools = Object.fromEntries(tools.tools.map((t) => [t.name, t.execution?.taskSupport ?? '']));
  const s = out.steps;

  // A slow tool: created at once, tasks/get does not block, tasks/result does.
  s.slow = { create: await create(c, 'slow', { seconds: 1.5, text: 'ts' }) };
  const slowId = s.slow.create.result?.task?.taskId;
  if (slowId) {
    s.slow.get = await get(c, slowId);
    s.slow.result = await result(c, slowId);
    s.slow.after = await get(c, slowId);
  }

  // Tools that ask the client for input, through the SDK's task stream:
  // input_required, then tasks/result carries the request and the answer.
  s.elicit = await stream(c, 'elicit', {});
  s.elicit.seen = [...c.seen.elicitations];
  if (s.elicit.taskId) s.elicit.after = await get(c, s.elicit.taskId);

  s.sample = await stream(c, 'sample', { prompt: 'say hi' });
  s.sample.seen = [...c.seen.samples];
  if (s.sample.taskId) s.sample.after = await get(c, s.sample.taskId);

  s.roots = await stream(c, 'roots', {});
  s.roots.seen = c.seen.roots;
  if (s.roots.taskId) s.roots.after = await get(c, s.roots.taskId);

  // isError → failed; tasks/result still returns the CallToolResult.
  s.fail = await stream(c, 'fail', {});
  if (s.fail.taskId) {
    s.fail.get = await get(c, s.fail.taskId);
    s.fail.result = await result(c, s.fail.taskId);
  }

  // JSON-RPC error → failed; tasks/result returns that error.
  s.rpcerror = await stream(c, 'rpcerror', {});
  if (s.rpcerror.taskId) {
    s.rpcerror.get = await get(c, s.rpcerror.taskId);
    s.rpcerror.result = await result(c, s.rpcerror.taskId);
  }

  // Progress while the client polls (no tasks/result open): GET stream.
  c.seen.progress.length = 0;
  s.progressPoll = await stream(c, 'progress', { steps: 3, delayMs: 150 }, { onprogress: c.onprogress });
  await sleep(300); // notifications are handled asynchronously; let stragglers land
  s.progressPoll.progress = [...c.seen.progress];

  // Progress while tasks/result is open: that stream.
  c.seen.progress.length = 0;
  s.progressResult = { create: await create(c, 'progress', { steps: 3, delayMs: 150 }, { onprogress: c.onprogress }) };
  const progId = s.progressResult.create.result?.task?.taskId;
  if (progId) {
    s.progressResult.result = await result(c, progId);
    await sleep(300);
    s.progressResult.progress = [...c.seen.progress];
  }

  // Sync paths: an optional tool without task is a plain call; a task on a
  // sync tool and a required tool without task are -32601.
  s.optionalSync = await timed(async () => text(await c.client.callTool({ name: 'slow', arguments: { seconds: 0, text: 'sync' } }, undefined, REQ)));
  s.syncWithTask = await create(c, 'echo', { text: 'no task for me' });
  s.requiredWithoutTask = await timed(() =>
    c.client.request({ method: 'tools/call', params: { name: 'roots', arguments: {} } }, CallToolResultSchema, REQ),
  );
  s.syncEcho = await timed(async () => text(await c.client.callTool({ name: 'echo', arguments: { text: 'plain' } }, undefined, REQ)));

  // Unknown task ids.
  const unknown = randomUUID();
  s.unknown = { get: await get(c, unknown), result: await result(c, unknown), cancel: await cancel(c, unknown) };
  await c.transport.terminateSession().catch(() => {});
}

// cancel: cancel a running task (upstream call aborted), cancel again.
async function cancelScenario() {
  const c = await connect('main');
  Object.assign(out, describe(c));
  await c.client.listTools();
  const s = out.steps;

  // A slow call: cancel it once it has surely reached the upstream.
  s.slow = { create: await create(c, 'slow', { seconds: 30, text: 'never' }) };
  const slowId = s.slow.create.result?.task?.taskId;
  if (slowId) {
    await sleep(500);
    s.slow.cancel = await cancel(c, slowId);
    s.slow.get = await get(c, slowId);
    s.slow.cancelAgain = await cancel(c, slowId);
    s.slow.result = await result(c, slowId);
  }

  // A progress call: its first notification proves the upstream runs it;
  // after the cancel no more progress may arrive.
  c.seen.progress.length = 0;
  s.progress = { create: await create(c, 'progress', { steps: 100, delayMs: 100 }, { onprogress: c.onprogress }) };
  const progId = s.progress.create.result?.task?.taskId;
  if (progId) {
    s.progress.sawProgress = await waitFor(() => c.seen.progress.length > 0, 10_000);
    s.progress.cancel = await cancel(c, progId);
    const atCancel = now();
    await sleep(700);
    s.progress.cancelledAt = atCancel;
    s.progress.progress = [...c.seen.progress];
    s.progress.get = await get(c, progId);
  }

  // Cancelling a completed task is -32602.
  s.done = { create: await create(c, 'slow', { seconds: 0, text: 'quick' }) };
  const doneId = s.done.create.result?.task?.taskId;
  if (doneId) {
    s.done.result = await result(c, doneId);
    s.done.cancel = await cancel(c, doneId);
    s.done.get = await get(c, doneId);
  }
}

// list: more tasks than a page, newest first, every task once; bad cursor.
async function listScenario() {
  const c = await connect('main');
  Object.assign(out, describe(c));
  await c.client.listTools();
  const s = out.steps;
  const n = 52; // the store's default page is 50
  s.created = [];
  for (let i = 0; i < n; i++) {
    const r = await create(c, 'slow', { seconds: 0, text: `t${i}` });
    s.created.push(r.result?.task?.taskId ?? null);
    if (r.error) {
      s.createError = r.error;
      break;
    }
    await sleep(3); // distinct creation times, so "newest first" is one order
  }
  s.pages = await listAll(c);
  s.badCursor = await list(c, 'not-a-cursor-' + randomUUID());
}

// access: tasks are bound to their owner: sha256(Authorization) when sent,
// else the session. Plus an expired task.
async function accessScenario() {
  const secret = randomUUID();
  const alice = await connect('alice', { Authorization: `Bearer alice-${secret}` });
  const bob = await connect('bob', { Authorization: `Bearer bob-${secret}` });
  const alice2 = await connect('alice2', { Authorization: `Bearer alice-${secret}` });
  const anon1 = await connect('anon1');
  const anon2 = await connect('anon2');
  Object.assign(out, describe(alice));
  const s = out.steps;

  s.aliceRunning = await create(alice, 'slow', { seconds: 30, text: 'alice' });
  s.aliceDone = await create(alice, 'slow', { seconds: 0, text: 'alice done' });
  const running = s.aliceRunning.result?.task?.taskId;
  const done = s.aliceDone.result?.task?.taskId;
  if (done) s.aliceDoneResult = await result(alice, done);

  s.bobCreate = await create(bob, 'slow', { seconds: 0, text: 'bob' });
  if (running && done) {
    s.bob = {
      getRunning: await get(bob, running),
      resultRunning: await result(bob, running),
      cancelRunning: await cancel(bob, running),
      getDone: await get(bob, done),
      resultDone: await result(bob, done),
      cancelDone: await cancel(bob, done),
      list: await listAll(bob),
    };
    s.alice2 = {
      getRunning: await get(alice2, running),
      resultDone: await result(alice2, done),
      list: await listAll(alice2),
    };
    s.alice = { getRunning: await get(alice, running), list: await listAll(alice) };
  }

  s.anonCreate = await create(anon1, 'slow', { seconds: 0, text: 'anon' });
  const anonId = s.anonCreate.result?.task?.taskId;
  if (anonId) {
    s.anon = {
      ownGet: await get(anon1, anonId),
      otherGet: await get(anon2, anonId),
      otherResult: await result(anon2, anonId),
      otherCancel: await cancel(anon2, anonId),
      otherList: await listAll(anon2),
      aliceGet: await get(alice, anonId),
    };
  }

  // Clean up the running task (its owner may cancel it).
  if (running) s.aliceCancel = await cancel(alice, running);

  // Expiry: a short ttl, then the task is gone for its owner too.
  s.expiring = await create(alice, 'slow', { seconds: 0, text: 'short-lived' }, { ttl: 1000 });
  const expId = s.expiring.result?.task?.taskId;
  const ttl = s.expiring.result?.task?.ttl;
  if (expId && typeof ttl === 'number' && ttl <= 3000) {
    await sleep(ttl + 1000);
    s.expired = { get: await get(alice, expId), result: await result(alice, expId), list: await listAll(alice) };
  }
}

const scenarios = { lifecycle, cancel: cancelScenario, list: listScenario, access: accessScenario };

try {
  const run = scenarios[scenario];
  if (!run) throw new Error(`unknown scenario ${scenario}`);
  await run();
} catch (e) {
  out.error = String(e?.stack ?? e);
  clearTimeout(deadline);
  finish(1);
}
clearTimeout(deadline);
finish(0);
