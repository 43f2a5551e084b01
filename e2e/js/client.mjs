// client.mjs drives an MCP server with the official TypeScript SDK client and
// prints one JSON object of what it observed. taskgate's e2e tests run it
// against the test upstream directly and through the gateway and compare.
//
//   node client.mjs http://127.0.0.1:PORT/mcp
//
// Exit status: 0 with the JSON on stdout; non-zero with {"error": ...}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
if (!url) {
  console.error('usage: node client.mjs URL');
  process.exit(2);
}

// Bound the whole run: a hung gateway must fail the test, not stall it.
const deadline = setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: 'timeout after 30s' }) + '\n');
  process.exit(3);
}, 30_000);

const out = {};
const seen = { elicitations: [], samplingPrompts: [], rootsRequests: 0 };

const client = new Client(
  { name: 'taskgate-e2e-ts', version: '1.0.0' },
  {
    capabilities: {
      elicitation: { form: {} },
      sampling: {},
      roots: { listChanged: false },
    },
  },
);

client.setRequestHandler(ElicitRequestSchema, async (req) => {
  seen.elicitations.push({ message: req.params.message, requestedSchema: req.params.requestedSchema });
  return { action: 'accept', content: { name: 'Grace' } };
});
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  const prompt = req.params.messages.map((m) => m.content.text).join('');
  seen.samplingPrompts.push(prompt);
  return { model: 'e2e-model', role: 'assistant', content: { type: 'text', text: `sampled: ${prompt}` } };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  seen.rootsRequests++;
  return { roots: [{ uri: 'file:///work/a', name: 'a' }, { uri: 'file:///work/b' }] };
});

function text(res) {
  return {
    isError: res.isError === true,
    text: (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join(''),
  };
}

async function call(name, args, options) {
  return text(await client.callTool({ name, arguments: args }, undefined, options));
}

const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
  out.protocolVersion = transport.protocolVersion;
  out.serverInfo = client.getServerVersion();
  out.serverCapabilities = client.getServerCapabilities();
  out.hasSessionId = typeof transport.sessionId === 'string' && transport.sessionId.length > 0;

  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name).sort();

  out.echo = await call('echo', { text: 'hello from ts' });
  out.slow = await call('slow', { seconds: 0.5, text: 'ts' });
  out.elicit = await call('elicit', {});
  out.elicit.requests = seen.elicitations;

  const progress = [];
  out.progress = await call('progress', { steps: 3, delayMs: 10 }, {
    onprogress: (p) => progress.push({ progress: p.progress, total: p.total, message: p.message }),
  });
  out.progress.notifications = progress;

  out.sample = await call('sample', { prompt: 'say hi' });
  out.sample.prompts = seen.samplingPrompts;
  out.roots = await call('roots', {});
  out.roots.requests = seen.rootsRequests;
  out.fail = await call('fail', {});

  try {
    await call('rpcerror', {});
    out.rpcerror = { error: 'no error' };
  } catch (e) {
    out.rpcerror = e instanceof McpError
      ? { code: e.code, message: e.message, data: e.data }
      : { error: String(e) };
  }

  await transport.terminateSession();
  out.terminated = transport.sessionId === undefined;
  await client.close();
} catch (e) {
  out.error = String(e?.stack ?? e);
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(1);
}
clearTimeout(deadline);
process.stdout.write(JSON.stringify(out) + '\n');
