// native-server.mjs is an MCP server with tasks of its own, as a user would
// write one with the official TypeScript SDK v1 (registerToolTask over an
// InMemoryTaskStore, stateful Streamable HTTP): the upstream of taskgate's
// "upstreams that already have tasks" e2e tests (native_test.go).
//
//   node native-server.mjs PORT [--listen-on-line]
//
// With --listen-on-line it loads, says "native-server loaded" on stderr and
// listens only once a line arrives on stdin: a restart (native_test.go)
// starts the next process before it kills this one, so the port is down
// only between the kill and the line, not for a whole node start.
//
// Tools:
//   research {topic}  taskSupport "required": a task that asks the client
//                     (elicitation/create through the task's queue, so it
//                     reaches the client on tasks/result) which angle to take,
//                     then completes with "research on <topic>: <angle>".
//   survey {topic}    the same, under another name (for a second rule).
//   slow {ms}         taskSupport "optional": completes after ms with
//                     "slow done after <ms>ms"; a cancelled task stays so.
//                     Prints "task-created slow <id>" on stderr.
//   wait {ms}         a plain tool (no task support): answers after ms.
//   broken            taskSupport "optional", but its task-augmented call is
//                     answered with a malformed CreateTaskResult (a taskId
//                     that is a number), as a buggy server might.
// It listens on 127.0.0.1 only and exits on SIGTERM/SIGINT.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import { ElicitResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node native-server.mjs PORT');
  process.exit(2);
}

const taskStore = new InMemoryTaskStore();
const taskMessageQueue = new InMemoryTaskMessageQueue();
const MAX_SESSIONS = 64;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// asking registers a required task tool that elicits an angle, then
// completes with it.
function asking(server, name) {
  server.experimental.tasks.registerToolTask(
    name,
    {
      description: `Researches a topic as a task; asks the user which angle to take (${name}).`,
      inputSchema: { topic: z.string() },
      execution: { taskSupport: 'required' },
    },
    {
      createTask: async (args, extra) => {
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 60_000, pollInterval: 200 });
        (async () => {
          await extra.taskStore.updateTaskStatus(task.taskId, 'input_required', 'Which angle?');
          const answer = await extra.sendRequest(
            {
              method: 'elicitation/create',
              params: {
                message: `Which angle on ${args.topic}?`,
                requestedSchema: { type: 'object', properties: { angle: { type: 'string' } }, required: ['angle'] },
              },
            },
            ElicitResultSchema,
            { relatedTask: { taskId: task.taskId } },
          );
          await extra.taskStore.updateTaskStatus(task.taskId, 'working', 'Researching');
          const angle = answer.action === 'accept' ? answer.content?.angle : `(${answer.action})`;
          await extra.taskStore.storeTaskResult(task.taskId, 'completed', {
            content: [{ type: 'text', text: `${name} on ${args.topic}: ${angle}` }],
          });
        })().catch((e) => {
          extra.taskStore.updateTaskStatus(task.taskId, 'failed', String(e)).catch(() => {});
        });
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
}

function newServer() {
  const server = new McpServer(
    { name: 'taskgate-e2e-native', version: '0.0.0' },
    {
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } },
      taskStore,
      taskMessageQueue,
    },
  );
  asking(server, 'research');
  asking(server, 'survey');
  server.experimental.tasks.registerToolTask(
    'slow',
    {
      description: 'Completes after ms milliseconds, as a task.',
      inputSchema: { ms: z.number() },
      execution: { taskSupport: 'optional' },
    },
    {
      createTask: async (args, extra) => {
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 60_000, pollInterval: 200 });
        console.error(`task-created slow ${task.taskId}`);
        (async () => {
          await sleep(args.ms);
          const now = await extra.taskStore.getTask(task.taskId);
          if (now && now.status === 'working') {
            await extra.taskStore.storeTaskResult(task.taskId, 'completed', {
              content: [{ type: 'text', text: `slow done after ${args.ms}ms` }],
            });
          }
        })().catch(() => {});
        return { task };
      },
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
  server.experimental.tasks.registerToolTask(
    'broken',
    { description: 'Answers task-augmented calls with a malformed CreateTaskResult.', execution: { taskSupport: 'optional' } },
    {
      createTask: async (_args, extra) => ({ task: await extra.taskStore.createTask({ ttl: 1000 }) }),
      getTask: async (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => extra.taskStore.getTaskResult(extra.taskId),
    },
  );
  server.registerTool(
    'wait',
    { description: 'Answers after ms milliseconds.', inputSchema: { ms: z.number() } },
    async (args) => {
      await sleep(args.ms);
      return { content: [{ type: 'text', text: `waited ${args.ms}ms` }] };
    },
  );
  return server;
}

const sessions = new Map(); // session id → transport

function reply(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
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
    const body = req.method === 'POST' ? await readJSON(req) : undefined;
    if (body?.method === 'tools/call' && body.params?.name === 'broken' && body.params?.task) {
      reply(res, 200, { jsonrpc: '2.0', id: body.id, result: { task: { taskId: 42, status: 'working' } } });
      return;
    }
    if (sid) {
      const transport = sessions.get(sid);
      if (!transport) {
        reply(res, 404, { jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
        return;
      }
      await transport.handleRequest(req, res, body);
      return;
    }
    if (body?.method !== 'initialize') {
      reply(res, 400, { jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID' }, id: null });
      return;
    }
    if (sessions.size >= MAX_SESSIONS) {
      reply(res, 503, { jsonrpc: '2.0', error: { code: -32000, message: 'Too many open sessions' }, id: null });
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
    console.error('native-server.mjs:', e);
    if (!res.headersSent) reply(res, 500, { jsonrpc: '2.0', error: { code: -32603, message: 'Internal server error' }, id: null });
    else res.end();
  }
});

httpServer.keepAliveTimeout = 120_000;
const listen = () => httpServer.listen(port, '127.0.0.1', () => console.error(`native-server listening on ${port}`));
if (process.argv[3] === '--listen-on-line') {
  console.error('native-server loaded');
  createInterface({ input: process.stdin }).once('line', listen);
} else {
  listen();
}

function stop() {
  taskStore.cleanup();
  httpServer.close();
  httpServer.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
