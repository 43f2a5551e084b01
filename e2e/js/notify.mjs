// notify.mjs drives a session's notifications with the official TypeScript
// SDK client: it sets the log level, subscribes to a resource, calls the
// test upstream's log tool (its messages come back on the call) and its
// touch tool until the resource's update arrives on the session's GET
// stream, then cancels a slow call, and prints one JSON object of what it saw.
//
//   node notify.mjs http://127.0.0.1:PORT/mcp
//
// Exit status: 0 with the JSON on stdout; non-zero with {"error": ...}.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';

const url = process.argv[2];
if (!url) {
  console.error('usage: node notify.mjs URL');
  process.exit(2);
}
const deadline = setTimeout(() => {
  process.stdout.write(JSON.stringify({ error: 'timeout after 40s' }) + '\n');
  process.exit(3);
}, 40_000);

const out = { logs: [], updated: [] };
const client = new Client({ name: 'taskgate-e2e-notify', version: '1.0.0' }, { capabilities: {} });
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
  out.logs.push(`${n.params.level}:${n.params.data}`);
});
let onUpdate;
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  out.updated.push(n.params.uri);
  if (onUpdate) onUpdate();
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

try {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  out.capabilities = client.getServerCapabilities();
  await client.setLoggingLevel('info');
  await client.subscribeResource({ uri: 'test://note' });
  const logged = await client.callTool({ name: 'log', arguments: { text: 'ts' } });
  out.logResult = logged.content?.[0]?.text;
  const got = new Promise((r) => { onUpdate = r; });
  for (let i = 0; i < 100 && out.updated.length === 0; i++) {
    await client.callTool({ name: 'touch', arguments: {} });
    await Promise.race([got, sleep(200)]);
  }
  // A call the client gives up on: the SDK sends notifications/cancelled.
  const abort = new AbortController();
  const slow = client.callTool({ name: 'slow', arguments: { seconds: 30, text: 'never' } }, undefined, { signal: abort.signal });
  await sleep(500);
  abort.abort('changed my mind');
  try {
    await slow;
    out.slow = 'answered';
  } catch (e) {
    out.slow = 'aborted';
  }
  await client.unsubscribeResource({ uri: 'test://note' });
  await transport.terminateSession();
  await client.close();
  clearTimeout(deadline);
  process.stdout.write(JSON.stringify(out) + '\n');
} catch (e) {
  process.stdout.write(JSON.stringify({ error: String(e?.stack ?? e), partial: out }) + '\n');
  process.exit(1);
}
