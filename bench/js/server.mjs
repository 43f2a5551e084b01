// server.mjs is the native baseline of taskgate's tasks benchmark
// (go run ./bench -mode tasks): what a user would otherwise write to give an
// MCP server tasks with the official TypeScript SDK. An McpServer per
// session (stateful Streamable HTTP, the SDK's default SSE answers) on a
// plain node http server, every session sharing one InMemoryTaskStore, and
// one task-capable tool registered with the SDK's experimental tasks API:
//
//   node server.mjs PORT
//
// The tool "echo" (taskSupport "optional") creates a task, completes it
// with its text on the next tick, and answers CreateTaskResult; tasks/get,
// tasks/result, tasks/list and tasks/cancel are the SDK's own handlers over
// the task store. It listens on 127.0.0.1 only and exits on SIGTERM/SIGINT.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js';
import { z } from 'zod';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node server.mjs PORT');
  process.exit(2);
}

const taskStore = new InMemoryTaskStore();
const MAX_SESSIONS = 64; // bound memory: the bench opens a handful

function newServer() {
  const server = new McpServer(
    { name: 'taskgate-bench-native', version: '0.0.0' },
    {
      capabilities: {
        tools: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
      taskStore,
    },
  );
  server.experimental.tasks.registerToolTask(
    'echo',
    {
      description: 'Returns its text, as a task.',
      inputSchema: { text: z.string().optional() },
      execution: { taskSupport: 'optional' },
    },
    {
      createTask: async (args, extra) => {
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 60_000, pollInterval: 1000 });
        const text = args.text ?? '';
        setImmediate(() => {
          extra.taskStore
            .storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text }] })
            .catch((e) => console.error('storeTaskResult:', e));
        });
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
  return server;
}

const sessions = new Map(); // session id → transport

function reply(res, status, code, message) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

function readJSON(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > 4 << 20) {
        reject(new Error('body too large'));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      } catch (e) {
        reject(e);
      }
    });
    req.on('error', reject);
  });
}

const httpServer = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    const sid = req.headers['mcp-session-id'];
    if (sid) {
      const transport = sessions.get(sid);
      if (!transport) {
        reply(res, 404, -32001, 'Session not found');
        return;
      }
      const body = req.method === 'POST' ? await readJSON(req) : undefined;
      await transport.handleRequest(req, res, body);
      return;
    }
    if (req.method !== 'POST') {
      reply(res, 400, -32000, 'Bad Request: No valid session ID');
      return;
    }
    const body = await readJSON(req);
    if (body?.method !== 'initialize') {
      reply(res, 400, -32000, 'Bad Request: No valid session ID');
      return;
    }
    if (sessions.size >= MAX_SESSIONS) {
      reply(res, 503, -32000, 'Too many open sessions');
      return;
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await newServer().connect(transport);
    await transport.handleRequest(req, res, body);
  } catch (e) {
    console.error('server.mjs:', e);
    if (!res.headersSent) reply(res, 500, -32603, 'Internal server error');
    else res.end();
  }
});

httpServer.keepAliveTimeout = 120_000;
httpServer.listen(port, '127.0.0.1');

function stop() {
  taskStore.cleanup();
  httpServer.close();
  httpServer.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
