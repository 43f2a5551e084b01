// ext-tasks.mjs drives taskgate with the official MCP Tasks requester
// package, @modelcontextprotocol/ext-tasks, as a 2026-07-28 client: a second,
// independent implementation of the tasks extension's client side (task
// handles, tasks/get polling, inputRequests answered with tasks/update,
// tasks/cancel, MRTR rounds) next to the Go test's hand-written one.
//
//   node ext-tasks.mjs <scenario>[,<scenario>...] <url>[,<url>...]
//
// Scenarios, run in order on one session: elicit, elicit2, outcomes,
// cancel. It prints one JSON object; a failure is in its "error".
//
// How it connects, and what is ours rather than the package's: ext-tasks has
// no transport. Its documented 2026-07-28 setup is an MCP SDK v2 Client
// (@modelcontextprotocol/client, connected here over its own Streamable HTTP
// transport, pinned to 2026-07-28 so it must find taskgate modern through
// server/discover) plus a host-owned `rawDispatch` for tools/call and
// tasks/*, whose task wire shapes the SDK's codecs reject. That rawDispatch,
// below, is ours: it POSTs the package's framed request as is (the package
// puts the protocol version, client info and capabilities, with the tasks
// extension, in _meta, and the Mcp-Name of a tasks/* request in its
// headers) and adds only what HTTP needs: the JSON-RPC id and the
// MCP-Protocol-Version, Mcp-Method and (tools/call) Mcp-Name headers. It
// alternates between the URLs given, one request each, so with two replicas
// the polls, updates and cancels land on both.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";

const PROTOCOL_VERSION = "2026-07-28";
const CLIENT_INFO = { name: "taskgate-e2e-ext-tasks", version: "1.0.0" };
const CLIENT_CAPABILITIES = { elicitation: { form: {} } };
const AUTH = "Bearer e2e-ext-tasks";

const [scenarioList, urlList] = process.argv.slice(2);
const scenarios = (scenarioList ?? "").split(",").filter(Boolean);
const urls = (urlList ?? "").split(",").filter(Boolean);
const t0 = performance.now();
const now = () => Math.round(performance.now() - t0);
const out = { scenarios, replicas: urls.length, dispatches: [], inputs: [], errors: [] };

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// parseBody returns the JSON-RPC messages of a JSON or SSE response body.
function parseBody(contentType, text) {
  if (!(contentType ?? "").startsWith("text/event-stream"))
    return text.trim() === "" ? [] : [JSON.parse(text)];
  const msgs = [];
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((l) => l.startsWith("data:"))
      .map((l) => l.slice(5).replace(/^ /, ""))
      .join("\n");
    if (data !== "") msgs.push(JSON.parse(data));
  }
  return msgs;
}

let nextId = 0;
let nextReplica = 0;

// rawDispatch is the host-owned request path ext-tasks requires for V2 task
// traffic (tools/call and tasks/*).
async function rawDispatch(request, options = {}) {
  const id = `ext-${++nextId}`;
  const replica = nextReplica++ % urls.length;
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": PROTOCOL_VERSION,
    "Mcp-Method": request.method,
    Authorization: AUTH,
    ...(options.context?.headers ?? {}),
  };
  if (request.method === "tools/call" && typeof request.params?.name === "string")
    headers["Mcp-Name"] = request.params.name;
  const body = { jsonrpc: "2.0", id, ...request };
  const rec = { t: now(), replica, method: request.method, request: body, headers };
  out.dispatches.push(rec);
  const res = await fetch(urls[replica], {
    method: "POST",
    headers,
    body: JSON.stringify(body),
    signal: options.signal,
  });
  rec.status = res.status;
  const msgs = parseBody(res.headers.get("content-type"), await res.text());
  const reply = msgs.find((m) => m.id === id && (m.result !== undefined || m.error !== undefined));
  rec.response = reply ?? msgs;
  rec.ms = now() - rec.t;
  if (reply === undefined) throw new Error(`${request.method}: HTTP ${res.status} without a response to ${id}`);
  return reply.error !== undefined ? { kind: "error", error: reply.error } : { kind: "result", result: reply.result };
}

async function connect() {
  const client = new Client(CLIENT_INFO, {
    capabilities: CLIENT_CAPABILITIES,
    versionNegotiation: { mode: { pin: PROTOCOL_VERSION } },
  });
  const transport = new StreamableHTTPClientTransport(new URL(urls[0]), {
    requestInit: { headers: { Authorization: AUTH } },
  });
  await withTimeout(client.connect(transport), 15000, "connect");
  out.protocolEra = client.getProtocolEra();
  out.serverCapabilities = client.getServerCapabilities();
  const session = createTaskSessionFromClient(client, {
    endpointId: "taskgate-e2e",
    rawDispatch,
    v2RequestFraming: {
      protocolVersion: PROTOCOL_VERSION,
      clientInfo: CLIENT_INFO,
      clientCapabilities: CLIENT_CAPABILITIES,
    },
    onError: (e) => out.errors.push(String(e?.stack ?? e)),
    onInputRequest: async (request, context) => {
      out.inputs.push({
        t: now(),
        kind: request.kind,
        message: request.params?.message,
        scope: context.scope,
        delivery: context.delivery,
        taskId: context.taskId,
        inputId: context.inputId,
      });
      const props = Object.keys(request.params?.requestedSchema?.properties ?? {});
      if (request.kind !== "elicitation") throw new Error(`unexpected ${request.kind} input request`);
      if (props.includes("color")) return { action: "accept", content: { color: "teal" } };
      return { action: "accept", content: { name: "Grace" } };
    },
  });
  return { client, session };
}

// run calls tool and settles it, recording the execution kind, every task
// view it saw and the outcome.
async function run(session, tool, args, { cancelAfterMs } = {}) {
  const rec = { tool, t: now(), events: [] };
  const execution = await withTimeout(session.callTool(tool, args), 20000, `callTool ${tool}`);
  rec.kind = execution.kind;
  rec.taskId = execution.handle?.taskId;
  const settled = execution.settle({
    onEvent: (event) => {
      if (event.type === "task")
        rec.events.push({
          t: now(),
          status: event.task.status,
          taskId: event.task.taskId,
          pollMs: event.task.suggestedPollIntervalMs,
          ttlMs: event.task.retentionMs,
        });
    },
  });
  let cancelled;
  if (cancelAfterMs !== undefined) {
    // Long enough for the gateway to have started the upstream call, so
    // the test can see the upstream being cancelled, not just never called.
    await new Promise((resolve) => setTimeout(resolve, cancelAfterMs));
    rec.cancelAt = now();
    cancelled = execution.cancel().then(
      () => {
        rec.cancelAcked = now();
      },
      (e) => {
        rec.cancelError = String(e);
      },
    );
  }
  const { outcome } = await withTimeout(settled, 30000, `settle ${tool}`);
  await cancelled;
  rec.ms = now() - rec.t;
  rec.outcome = { status: outcome.status };
  if (outcome.status === "completed") rec.outcome.result = outcome.result;
  if (outcome.status === "failed")
    rec.outcome.error = { name: outcome.error?.name, message: outcome.error?.message, code: outcome.error?.code, data: outcome.error?.data };
  return rec;
}

async function main() {
  if (scenarios.length === 0 || urls.length === 0)
    throw new Error("usage: node ext-tasks.mjs <scenario>[,<scenario>...] <url>[,<url>...]");
  const { client, session } = await connect();
  try {
    for (const scenario of scenarios) await runScenario(session, scenario);
  } finally {
    await session.close().catch((e) => out.errors.push(`session.close: ${e}`));
    await client.close().catch(() => {});
  }
}

async function runScenario(session, scenario) {
  switch (scenario) {
    case "elicit":
      out.elicit = await run(session, "elicit", {});
      break;
    case "elicit2":
      out.elicit2 = await run(session, "elicit2", {});
      break;
    case "outcomes":
      out.fail = await run(session, "fail", {});
      out.rpcerror = await run(session, "rpcerror", {});
      break;
    case "cancel":
      out.cancel = await run(
        session,
        "slow",
        { seconds: 30, text: "never" },
        { cancelAfterMs: 500 },
      );
      break;
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}

main()
  .catch((e) => {
    out.error = String(e?.stack ?? e);
  })
  .finally(() => {
    process.stdout.write(JSON.stringify(out) + "\n");
    process.exit(0);
  });
