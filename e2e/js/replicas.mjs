// replicas.mjs drives one stdio server's sessions across two taskgate
// replicas with the official TypeScript SDK client, and prints what it saw
// as JSON lines on stdout. The Go test (e2e/stdio_replicas_test.go) decides
// what is right; this script only acts and records.
//
//   node replicas.mjs URL1 URL2
//
// Every initialize goes to URL1 and every other request to URL2 (a fetch
// wrapper rewrites host:port), until replica 1 is killed: then the script
// prints {"await":"kill"}, waits for a line on stdin (the test killed it),
// and goes on with URL2 alone. The last line is {"result": ...}.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const urls = process.argv.slice(2);
if (urls.length !== 2) {
  console.error('usage: node replicas.mjs URL1 URL2');
  process.exit(2);
}
const out = { exchanges: [], steps: {} };
const print = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const deadline = setTimeout(() => {
  out.error = 'timeout after 60s';
  print({ result: out });
  process.exit(3);
}, 60_000);

let replica1Alive = true;

// routedFetch sends initialize to replica 1 (while it lives) and the rest
// to replica 2, recording each exchange.
function routedFetch(session) {
  return async (url, init) => {
    let rpc = '';
    try {
      rpc = JSON.parse(init?.body ?? '{}').method ?? 'response';
    } catch {}
    const replica = rpc === 'initialize' && replica1Alive ? 0 : 1;
    const target = new URL(url);
    target.host = new URL(urls[replica]).host;
    const res = await fetch(target, init);
    out.exchanges.push({ session, http: init?.method ?? 'GET', rpc, replica: replica + 1, status: res.status,
      type: res.headers.get('content-type') ?? '' });
    return res;
  };
}

async function connect(session) {
  const client = new Client({ name: 'replicas-e2e', version: '1.0.0' }, { capabilities: {} });
  const transport = new StreamableHTTPClientTransport(new URL(urls[0]), { fetch: routedFetch(session) });
  await client.connect(transport);
  return { client, transport };
}

const names = (graph) => (graph?.entities ?? []).map((e) => e.name).sort();

async function readGraph(client) {
  const res = await client.callTool({ name: 'read_graph', arguments: {} });
  return JSON.parse(res.content[0].text);
}

async function rawPost(replica, sessionId) {
  const res = await fetch(urls[replica], {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream',
      'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  await res.text();
  return res.status;
}

async function main() {
  // Session a: opened on replica 1, used through replica 2.
  const a = await connect('a');
  out.steps.sessionA = a.transport.sessionId;
  await a.client.callTool({ name: 'create_entities', arguments: { entities: [
    { name: 'ada', entityType: 'person', observations: ['wrote the first program'] }] } });
  out.steps.graphA = names(await readGraph(a.client));
  // Its GET stream, through replica 2, stays open while we go on; wait
  // until the SDK opened it.
  for (let i = 0; i < 200 && !out.exchanges.some((e) => e.session === 'a' && e.http === 'GET'); i++) {
    await new Promise((r) => setTimeout(r, 25));
  }

  // Session b: another session on replica 1, for after the kill.
  const b = await connect('b');
  out.steps.graphB = names(await readGraph(b.client));

  // DELETE session a through replica 2; then no replica knows it.
  await a.transport.terminateSession();
  out.steps.afterDelete = [await rawPost(0, out.steps.sessionA), await rawPost(1, out.steps.sessionA)];

  // Replica 1 dies: session b is gone; the client starts over on replica 2.
  print({ await: 'kill' });
  const rl = createInterface({ input: process.stdin });
  await new Promise((r) => rl.once('line', r));
  rl.close();
  replica1Alive = false;
  try {
    await b.client.callTool({ name: 'read_graph', arguments: {} });
    out.steps.afterKill = { ok: true };
  } catch (e) {
    out.steps.afterKill = { code: e.code, message: String(e.message) };
  }
  await b.client.close().catch(() => {});
  const c = await connect('c');
  out.steps.sessionC = c.transport.sessionId;
  out.steps.graphC = names(await readGraph(c.client));
  await c.client.callTool({ name: 'create_entities', arguments: { entities: [
    { name: 'grace', entityType: 'person', observations: ['found a moth'] }] } });
  out.steps.graphC2 = names(await readGraph(c.client));
  await c.client.close();
}

main().then(
  () => { clearTimeout(deadline); print({ result: out }); process.exit(0); },
  (e) => { out.error = String(e?.stack ?? e); print({ result: out }); process.exit(1); },
);
