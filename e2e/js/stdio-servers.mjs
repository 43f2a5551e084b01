// stdio-servers.mjs drives stdio MCP servers published on npm with two
// TypeScript SDK v1 clients at once, A and B, and prints one JSON object of
// what each observed. The Go test (stdio_servers_test.go) runs it twice per
// server: "direct", where each client starts the server itself over stdio
// (StdioClientTransport: a process of its own, as a desktop client does),
// and through taskgate (`taskgate serve --upstream-command` with the same
// command), where both clients share one gateway; it compares the two.
//
//   node stdio-servers.mjs SCENARIO direct COMMAND [ARG...]
//   node stdio-servers.mjs SCENARIO http://127.0.0.1:PORT/mcp
//
// SCENARIO: filesystem (TG_FS_A, TG_FS_B: the two clients' folders),
// memory, thinking, everything, commands.
// Exit status: 0 with the JSON on stdout; non-zero with {"error": ...}.
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { errInfo, harness, sleep } from './harness.mjs';

const [scenario, target, ...command] = process.argv.slice(2);
const out = { scenario };
const cleanups = [];
const { finish, deadline } = harness(out, 90, cleanups);
const REQ = { timeout: 60_000 };

// connect opens one client session: over stdio to a process of its own
// (direct), or to the gateway. seen counts the server's requests.
async function connect(name, capabilities, handlers = {}) {
  const client = new Client({ name: `taskgate-e2e-${name}`, version: '1.0.0' }, { capabilities });
  const seen = { roots: 0, elicitations: [], samples: [], progress: 0 };
  client.onerror = (e) => (out.clientErrors ??= []).push(`${name}: ${e}`);
  let rootsAnswered;
  seen.rootsAnswered = new Promise((r) => (rootsAnswered = r));
  if (capabilities.roots) {
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      seen.roots++;
      setImmediate(rootsAnswered);
      return { roots: handlers.roots ?? [] };
    });
  }
  if (capabilities.elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      seen.elicitations.push(req.params.message);
      return { action: 'accept', content: { name: `${name} answers` } };
    });
  }
  if (capabilities.sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      const prompt = req.params.messages.map((m) => m.content.text).join('');
      seen.samples.push(prompt);
      return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: `${name} sampled: ${prompt}` } };
    });
  }
  const transport = target === 'direct'
    ? new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: 'ignore' })
    : new StreamableHTTPClientTransport(new URL(target));
  await client.connect(transport);
  cleanups.push(() => client.close());
  return { client, seen, name };
}

// texts are a tool result's text parts, joined.
const texts = (res) => (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');

// call is a tools/call's outcome: isError and text, or the JSON-RPC error.
async function call(c, name, args, options = {}) {
  try {
    const res = await c.client.callTool({ name, arguments: args }, CallToolResultSchema, { ...REQ, ...options });
    return { isError: res.isError === true, text: texts(res), structured: res.structuredContent };
  } catch (e) {
    return { error: errInfo(e) };
  }
}

// asTask calls a tool as a task (2025-11-25 task-augmented tools/call)
// where the server lists it as one, and plainly where it does not (as
// the SDK's own callToolStream would without the task option). It returns
// the stream's messages: taskCreated, taskStatus…, then result or error.
async function asTask(c, tool, args) {
  const messages = [];
  const result = (res) => ({ type: 'result', text: texts(res), structured: res.structuredContent });
  if (!['optional', 'required'].includes(tool?.execution?.taskSupport)) {
    const r = await call(c, tool.name, args);
    messages.push(r.error ? { type: 'error', error: r.error } : { type: 'result', text: r.text, structured: r.structured });
    return messages;
  }
  try {
    for await (const m of c.client.experimental.tasks.callToolStream({ name: tool.name, arguments: args }, CallToolResultSchema,
      { ...REQ, task: { ttl: 60_000 } })) {
      messages.push(m.type === 'result' ? result(m.result)
        : m.type === 'error' ? { type: m.type, error: errInfo(m.error) } : { type: m.type, status: m.task?.status });
    }
  } catch (e) {
    messages.push({ type: 'thrown', error: errInfo(e) });
  }
  return messages;
}

const scenarios = {
  // server-filesystem started with no folder: each client's roots are its
  // allowed folders, asked for right after initialized.
  async filesystem() {
    const [dirA, dirB] = [process.env.TG_FS_A, process.env.TG_FS_B];
    const [a, b, c] = await Promise.all([
      connect('A', { roots: { listChanged: true } }, { roots: [{ uri: `file://${dirA}`, name: 'fsA' }] }),
      connect('B', { roots: { listChanged: true } }, { roots: [{ uri: `file://${dirB}`, name: 'fsB' }] }),
      connect('C', {}), // no roots: no folder at all
    ]);
    // The server asks each client for its roots on its own (no
    // roots/list_changed is ever sent); its folders follow once it has
    // the answer, which it processes asynchronously.
    const allowed = async (c, dir) => {
      await Promise.race([c.seen.rootsAnswered, sleep(20_000)]);
      let r;
      for (let i = 0; i < 100; i++) {
        r = await call(c, 'list_allowed_directories', {});
        if (r.text?.includes(dir)) break;
        await sleep(50);
      }
      return r.text;
    };
    const [allowedA, allowedB] = await Promise.all([allowed(a, dirA), allowed(b, dirB)]);
    const [secretA, secretB, secretC, ownB, big] = await Promise.all([
      call(a, 'read_text_file', { path: join(dirA, 'secretA.txt') }),
      call(b, 'read_text_file', { path: join(dirA, 'secretA.txt') }),
      call(c, 'read_text_file', { path: join(dirA, 'secretA.txt') }),
      call(b, 'read_text_file', { path: join(dirB, 'b.txt') }),
      call(a, 'read_text_file', { path: join(dirA, 'big.txt') }),
    ]);
    const bigText = big.text ?? '';
    delete big.text;
    delete big.structured;
    Object.assign(out, {
      a: { roots: a.seen.roots, allowed: allowedA, secret: secretA.text, secretError: secretA.isError },
      b: { roots: b.seen.roots, allowed: allowedB, secretA: secretB, own: ownB.text },
      c: { secretA: secretC },
      big: { ...big, length: bigText.length, sha256: createHash('sha256').update(bigText).digest('hex') },
    });
  },

  // server-memory: the knowledge graph of the process (its memory file).
  async memory() {
    const [a, b] = await Promise.all([connect('A', {}), connect('B', {})]);
    const entity = (name, note) => ({ entities: [{ name, entityType: 'person', observations: [note] }] });
    await Promise.all([
      call(a, 'create_entities', entity('alice-secret', 'only A knows')),
      call(b, 'create_entities', entity('bob-note', 'only B knows')),
    ]);
    const names = async (c) => {
      const r = await call(c, 'read_graph', {});
      return r.error ?? (r.structured?.entities ?? JSON.parse(r.text).entities).map((e) => e.name).sort();
    };
    out.a = await names(a);
    out.b = await names(b);
  },

  // server-sequential-thinking: the thought history of the process.
  async thinking() {
    const [a, b] = await Promise.all([connect('A', {}), connect('B', {})]);
    const think = (c, n, extra = {}) => call(c, 'sequentialthinking', {
      thought: `${c.name} thinks ${n}`, thoughtNumber: n, totalThoughts: 4, nextThoughtNeeded: true, ...extra,
    }).then((r) => r.structured ?? r);
    out.a = [await think(a, 1), await think(a, 2, { branchFromThought: 1, branchId: 'a-branch' }), await think(a, 3)];
    // B's first thought as a task where taskgate makes the tool one: the
    // task's worker calls B's process.
    const tool = (await b.client.listTools(undefined, REQ)).tools.find((t) => t.name === 'sequentialthinking');
    const messages = await asTask(b, tool, {
      thought: 'B thinks 1', thoughtNumber: 1, totalThoughts: 4, nextThoughtNeeded: true,
    });
    const last = messages.at(-1);
    out.b = [last?.type === 'result' ? last.structured : last];
    out.a.push(await think(a, 4));
    // Not compared with the direct run: the server has no tasks.
    out.gatewayOnly = { bTask: messages.map((m) => m.type) };
  },

  // server-everything: tools as the client's capabilities allow, and the
  // server's requests while several calls are in flight.
  async everything() {
    const [a, b] = await Promise.all([
      connect('A', { elicitation: { form: {} }, sampling: {}, roots: { listChanged: true } }, { roots: [{ uri: 'file:///work/a' }] }),
      connect('B', {}),
    ]);
    const listA = (await a.client.listTools(undefined, REQ)).tools;
    out.toolsA = listA.map((t) => t.name).sort();
    out.toolsB = (await b.client.listTools(undefined, REQ)).tools.map((t) => t.name).sort();
    // B: a long call of its own in flight meanwhile, and the tools it was
    // not offered.
    const longB = call(b, 'trigger-long-running-operation', { duration: 3, steps: 3 });
    // A: a long call of its own that runs until A's questions are
    // answered (then A abandons it), so they are asked while it is in
    // flight (its first progress notification says it is), with another
    // long call of A's, and B's.
    const hold = new AbortController();
    let inFlight;
    const started = new Promise((r) => (inFlight = r));
    const held = call(a, 'trigger-long-running-operation', { duration: 60, steps: 60 }, {
      signal: hold.signal, onprogress: () => inFlight(),
    });
    const longA = call(a, 'trigger-long-running-operation', { duration: 3, steps: 3 }, {
      onprogress: () => a.seen.progress++,
    });
    await Promise.race([started, held]);
    const [elicit, sample, unofferedB] = await Promise.all([
      call(a, 'trigger-elicitation-request', {}),
      call(a, 'trigger-sampling-request', { prompt: 'hello from A', maxTokens: 5 }),
      call(b, 'trigger-sampling-request', { prompt: 'hello from B', maxTokens: 5 }),
    ]);
    hold.abort('answered');
    delete elicit.structured;
    delete sample.structured;
    out.a = {
      elicit, sample, long: await longA, progress: a.seen.progress > 0, held: await held,
      elicitations: a.seen.elicitations, samples: a.seen.samples,
    };
    out.b = { long: await longB, unoffered: unofferedB };
    // A tool as a task, where taskgate makes it one.
    const messages = await asTask(a, listA.find((t) => t.name === 'trigger-long-running-operation'), { duration: 1, steps: 2 });
    out.a.task = messages;
  },

  // mcp-server-commands: B's command runs until A's large answer has
  // reached A, so it is in flight the whole time.
  async commands() {
    const dir = mkdtempSync(join(tmpdir(), 'taskgate-e2e-commands-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const [started, release] = [join(dir, 'started'), join(dir, 'release')];
    const [a, b] = await Promise.all([connect('A', {}), connect('B', {})]);
    const waiting = call(b, 'run_command', {
      command: `touch '${started}'; i=0; while [ ! -e '${release}' ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo done`,
    });
    for (let i = 0; i < 1200 && !existsSync(started); i++) {
      await sleep(50);
    }
    // Five million control bytes: the server keeps the first MiB of
    // stdout (node's exec maxBuffer) and answers it as an error, each byte
    // escaped as \u0001 — a line of about 6.3 MB.
    const big = await call(a, 'run_command', { command: "head -c 5000000 /dev/zero | tr '\\0' '\\1'" });
    writeFileSync(release, '');
    const res = await a.client.callTool({ name: 'run_command', arguments: { command: 'echo small' } }, CallToolResultSchema, REQ)
      .then((r) => texts(r), (e) => errInfo(e));
    const text = big.text ?? '';
    out.a = {
      isError: big.isError, error: big.error, length: text.length,
      controlBytes: text.split('\u0001').length - 1, head: text.replace(/\u0001/g, '').slice(0, 100), after: res,
    };
    out.b = await waiting;
  },
};

try {
  const run = scenarios[scenario];
  if (!run) throw new Error(`unknown scenario ${scenario}`);
  await run();
  clearTimeout(deadline);
  await finish(0);
} catch (e) {
  out.error = String(e?.stack ?? e);
  await finish(1);
}
