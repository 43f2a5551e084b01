// principal-memory.mjs: one TypeScript SDK client session of
// server-memory through taskgate, signed in with the bearer token in
// $TG_TOKEN (not on the command line). It reads the knowledge graph, adds
// one entity per NAME, reads the graph again, and ends its session
// (DELETE). stdio_principal_test.go runs it beside go-sdk sessions of the
// same principal and of another one.
//
//   TG_TOKEN=… node principal-memory.mjs http://127.0.0.1:PORT/mcp NAME...
//
// Prints {"version", "before": [entity names], "after": [entity names]};
// exit status 0, or non-zero with {"error": ...}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { errInfo, harness } from './harness.mjs';

const [url, ...names] = process.argv.slice(2);
const out = {};
const { finish, deadline } = harness(out, 60);
const REQ = { timeout: 30_000 };

const client = new Client({ name: 'taskgate-e2e-principal', version: '1.0.0' }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.TG_TOKEN}` } },
});

// graph is the names of the graph's entities, sorted.
async function graph() {
  const res = await client.callTool({ name: 'read_graph', arguments: {} }, undefined, REQ);
  if (res.isError) {
    throw new Error(`read_graph: ${JSON.stringify(res.content)}`);
  }
  const g = res.structuredContent ?? JSON.parse(res.content[0].text);
  return g.entities.map((e) => e.name).sort();
}

try {
  await client.connect(transport, REQ);
  out.version = transport.protocolVersion;
  out.before = await graph();
  if (names.length > 0) {
    const entities = names.map((name) => ({ name, entityType: 'person', observations: ['added by the TypeScript client'] }));
    const res = await client.callTool({ name: 'create_entities', arguments: { entities } }, undefined, REQ);
    if (res.isError) {
      throw new Error(`create_entities: ${JSON.stringify(res.content)}`);
    }
  }
  out.after = await graph();
  await transport.terminateSession();
  await client.close();
  clearTimeout(deadline);
  await finish(0);
} catch (e) {
  out.error = errInfo(e).message;
  await finish(1);
}
