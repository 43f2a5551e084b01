// oauth.mjs signs in through taskgate to an OAuth-protected MCP server
// with the TypeScript SDK v1's own OAuth client flow (an authProvider on
// StreamableHTTPClientTransport), and prints one JSON object of what it
// observed; the Go test (oauth_test.go) checks it.
//
//   node oauth.mjs flow URL
//   node oauth.mjs refresh URL1,URL2
//   node oauth.mjs forged URL
//
// flow: discovery (the 401's challenge, the protected resource metadata,
// the authorization server metadata), dynamic client registration,
// authorization (the demo server approves at once and redirects with a
// code, which is read from the redirect), the token, then tools/list, a
// plain call, a task the gateway makes of a plain tool (--task greet) and
// one of the upstream's own task tools (delay).
// refresh: one client signs in twice (two tokens of one principal, two
// sessions); tasks created with the first token on URL1 are read, listed,
// answered, have their result read and are cancelled with the second
// token on URL2;
// a second client (another principal) gets -32602 for them.
// forged: a client signs in and calls greet; a request with a forged
// token follows (its status and challenge noted); then the signed-in
// client calls greet again, and a second client signs in (a token the
// gateway checks for the first time right after the forged one) and
// calls greet.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { errInfo, harness, sleep } from './harness.mjs';

const [mode, urlList] = process.argv.slice(2);
const urls = urlList.split(',');
const out = { mode, steps: {}, fetches: [] };
const { finish, deadline } = harness(out, 90);
const REQ = { timeout: 30_000 };
async function attempt(f) {
  try {
    return { result: await f() };
  } catch (e) {
    return { error: errInfo(e) };
  }
}

// recording is a fetch that notes every request (method, URL, status,
// and a challenge's WWW-Authenticate): what the SDK's discovery asked
// where.
const recording = (label) => async (u, init) => {
  const res = await fetch(u, init);
  const url = String(u instanceof Request ? u.url : u);
  out.fetches.push({ label, method: init?.method ?? 'GET', url, status: res.status, challenge: res.headers.get('www-authenticate') ?? undefined });
  return res;
};

// provider is an in-memory OAuthClientProvider. The demo authorization
// server approves every request at once: its authorize endpoint redirects
// to redirectUrl with the code, which is taken from the Location header
// instead of a browser.
function provider() {
  const p = {
    client: undefined,
    saved: undefined,
    verifier: undefined,
    code: undefined,
    get redirectUrl() {
      return 'http://127.0.0.1:9/callback';
    },
    get clientMetadata() {
      return {
        client_name: 'taskgate-e2e-oauth',
        redirect_uris: ['http://127.0.0.1:9/callback'],
        grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
      };
    },
    clientInformation: () => p.client,
    saveClientInformation: (info) => {
      p.client = info;
    },
    tokens: () => p.saved,
    saveTokens: (t) => {
      p.saved = t;
    },
    saveCodeVerifier: (v) => {
      p.verifier = v;
    },
    codeVerifier: () => p.verifier,
    redirectToAuthorization: async (url) => {
      out.authorizationURL = url.href;
      const res = await fetch(url, { redirect: 'manual' });
      const loc = res.headers.get('location');
      if (!loc) throw new Error(`authorize answered ${res.status} without a redirect`);
      p.code = new URL(loc).searchParams.get('code');
    },
  };
  return p;
}

// newClient declares form elicitation and answers it (as name), noting who
// answered.
function newClient(name) {
  const c = new Client({ name, version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
  c.setRequestHandler(ElicitRequestSchema, async () => {
    (out.answeredBy ??= []).push(name);
    return { action: 'accept', content: { name: 'Ada', email: 'ada@example.com' } };
  });
  return c;
}

// signIn connects a client to url with p, running the whole flow when p
// has no token yet: the first connect fails with UnauthorizedError once
// the code is in hand, finishAuth trades it for a token, and a second
// transport connects with it.
async function signIn(name, url, p, label) {
  const opts = { authProvider: p, fetch: recording(label) };
  const client = newClient(name);
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url), opts));
    return client;
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const t = new StreamableHTTPClientTransport(new URL(url), opts);
  await t.finishAuth(p.code);
  const again = newClient(name);
  await again.connect(new StreamableHTTPClientTransport(new URL(url), opts));
  return again;
}

async function createTask(client, name, args) {
  const r = await client.request({ method: 'tools/call', params: { name, arguments: args } }, CreateTaskResultSchema, {
    ...REQ,
    task: { ttl: 60_000 },
  });
  return r.task.taskId;
}

// waitStatus polls tasks/get until the task leaves working (and
// input_required, unless until names it).
async function waitStatus(client, id, until) {
  for (let i = 0; i < 300; i++) {
    const t = await client.experimental.tasks.getTask(id, REQ);
    if (t.status === until || !['working', 'input_required'].includes(t.status)) return t;
    await sleep(100);
  }
  return { status: 'still running' };
}

const text = (r) => r?.content?.map((c) => c.text).join('');

try {
  if (mode === 'flow') {
    const p = provider();
    const client = await signIn('taskgate-e2e-oauth', urls[0], p, 'flow');
    out.registered = Boolean(p.client?.client_id);
    out.tokenType = p.saved?.token_type;
    out.tools = (await client.listTools(undefined, REQ)).tools.map((t) => ({ name: t.name, taskSupport: t.execution?.taskSupport }));
    out.steps.greet = text(await client.callTool({ name: 'greet', arguments: { name: 'plain' } }, undefined, REQ));
    const gatewayTask = await createTask(client, 'greet', { name: 'task' });
    out.steps.gatewayTask = await waitStatus(client, gatewayTask);
    out.steps.gatewayResult = text(await client.experimental.tasks.getTaskResult(gatewayTask, CallToolResultSchema, REQ));
    const nativeTask = await createTask(client, 'delay', { duration: 200 });
    out.steps.nativeTask = await waitStatus(client, nativeTask);
    out.steps.nativeResult = text(await client.experimental.tasks.getTaskResult(nativeTask, CallToolResultSchema, REQ));
    out.ids = { gatewayTask, nativeTask };
    await client.close().catch(() => {});
  }
  if (mode === 'refresh') {
    const p = provider();
    const first = await signIn('taskgate-e2e-first', urls[0], p, 'first');
    const firstToken = p.saved.access_token;
    // held: the upstream's own task (delay), routed to the session that
    // created it; done: the gateway's task (--task greet).
    const held = await createTask(first, 'delay', { duration: 60_000 });
    const done = await createTask(first, 'greet', { name: 'done' });
    out.steps.firstDone = (await waitStatus(first, done)).status;
    // asked: the gateway's task (--task collect-user-info) waiting for
    // the user's answer.
    const asked = await createTask(first, 'collect-user-info', { infoType: 'contact' });
    out.steps.firstAsked = (await waitStatus(first, asked, 'input_required')).status;
    out.steps.firstGet = (await first.experimental.tasks.getTask(held, REQ)).status;
    // The same client signs in again: a new token for the same principal.
    p.saved = undefined;
    const second = await signIn('taskgate-e2e-second', urls[1], p, 'second');
    out.newToken = p.saved.access_token !== firstToken;
    out.steps.secondGet = await attempt(async () => (await second.experimental.tasks.getTask(held, REQ)).status);
    out.steps.secondList = await attempt(async () => (await second.experimental.tasks.listTasks(undefined, REQ)).tasks.map((t) => t.taskId));
    out.steps.secondResult = await attempt(async () => text(await second.experimental.tasks.getTaskResult(done, CallToolResultSchema, REQ)));
    // The second token answers the question on the task's result stream.
    out.steps.secondAnswered = await attempt(async () => text(await second.experimental.tasks.getTaskResult(asked, CallToolResultSchema, REQ)));
    // Another client (another principal) on either replica sees none of it.
    const q = provider();
    const other = await signIn('taskgate-e2e-other', urls[1], q, 'other');
    out.steps.otherGet = await attempt(async () => (await other.experimental.tasks.getTask(held, REQ)).status);
    out.steps.otherCancel = await attempt(async () => (await other.experimental.tasks.cancelTask(held, REQ)).status);
    out.steps.otherList = await attempt(async () => (await other.experimental.tasks.listTasks(undefined, REQ)).tasks.map((t) => t.taskId));
    out.steps.secondCancel = await attempt(async () => (await second.experimental.tasks.cancelTask(held, REQ)).status);
    out.steps.firstAfter = await attempt(async () => (await first.experimental.tasks.getTask(held, REQ)).status);
    out.ids = { held, done, asked };
    for (const c of [first, second, other]) await c.close().catch(() => {});
  }
  if (mode === 'forged') {
    const first = await signIn('taskgate-e2e-first', urls[0], provider(), 'first');
    out.steps.greet = text(await first.callTool({ name: 'greet', arguments: { name: 'first' } }, undefined, REQ));
    const res = await fetch(urls[0], {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: 'Bearer forged-0123456789abcdef',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    out.forged = { status: res.status, challenge: res.headers.get('www-authenticate') ?? undefined };
    out.steps.afterForged = await attempt(async () => text(await first.callTool({ name: 'greet', arguments: { name: 'again' } }, undefined, REQ)));
    out.steps.secondGreet = await attempt(async () => {
      const second = await signIn('taskgate-e2e-second', urls[0], provider(), 'second');
      const r = text(await second.callTool({ name: 'greet', arguments: { name: 'second' } }, undefined, REQ));
      await second.close().catch(() => {});
      return r;
    });
    await first.close().catch(() => {});
  }
  clearTimeout(deadline);
  finish(0);
} catch (e) {
  out.error = String(e?.stack ?? e);
  finish(1);
}
