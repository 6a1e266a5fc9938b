import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  isInitializeRequest,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { Counter } from 'prom-client';
import { getVariableValues, printSchema, type GraphQLSchema } from 'graphql';
import { z } from 'zod';
import { sectionOf } from '../../platform/config.js';
import { hasScope, samePrincipal, type Principal } from '../../platform/principal.js';
import type { DocumentRegistry } from '../graphql/documents.js';
import type { TrustedDocument } from '../graphql/manifests.js';
import { refusedWith, requestCaller, type OperationCaller, type OperationParams, type OperationRunner } from '../graphql/operation-runner.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { principalOf } from '../pipeline/context.js';
import { agentsConfig, type AgentsConfig } from './config.js';
import { documentTools, EXECUTE_INPUT, EXECUTE_TOOL, type DocumentTool, type ToolParts } from './tools.js';

/*
 * The MCP endpoint (`/mcp`): the Model Context Protocol's Streamable HTTP transport, served by the official
 * SDK's server core (`Server` and the web-standard transport) over this app's routes, so every request to it
 * meets the edge as any other does: its credential (`x-api-key` or `Authorization`), browser rules, the
 * edge's rate token, the body limit. The SDK's Express and Hono adapters are not used.
 *
 * Its tools are the registered documents of the clients the caller may act as (gateway/agents/tools.ts), and
 * `execute` for a caller holding `schema:free-text`; the served schema is a resource for a caller holding
 * `schema:read`. A tool call is one operation run as a JSON POST of it runs (gateway/graphql/operation-runner.ts):
 * the whole pipeline, with the credential of the HTTP request that carries the call. Arguments are checked
 * against the operation's variables before anything runs; an unknown tool or arguments that do not match
 * are JSON-RPC errors (-32602), an operation's refusal or error is the tool's result with `isError`.
 *
 * Sessions are kept in this process, bound to the principal that opened them (another principal's request
 * naming one is answered as if it did not exist), bounded in number overall and per principal (a new one
 * past a bound closes the least recently used), and closed when idle. A request carries one message.
 * Answers are JSON (the transport's `enableJsonResponse`); the endpoint sends nothing unasked, so GET (a
 * stream for server-initiated messages) answers 405, as the transport's specification allows.
 */

const MCP_PATH = '/mcp';
const SESSION_HEADER = 'mcp-session-id';
const SCHEMA_RESOURCE = 'graphql://schema';
const ANSWER_TYPE = 'application/json; charset=utf-8';

export interface McpPluginOptions {
  config: AgentsConfig;
}

/** The `mcp` part: `/mcp`, unless MCP_MAX_SESSIONS=0. */
export const mcpPlugin = fp(
  async (app: FastifyInstance, options: McpPluginOptions) => {
    const config = sectionOf(agentsConfig, options.config, 'mcp');
    if (config.MCP_MAX_SESSIONS === 0) return;
    const endpoint = new McpEndpoint(config, {
      log: app.log,
      runner: app.operations,
      documents: app.documents,
      schema: () => app.supergraph.schema(),
      metrics: app.metrics,
    });
    app.post(MCP_PATH, (request, reply) => endpoint.serve(request, reply));
    app.delete(MCP_PATH, (request, reply) => endpoint.serve(request, reply));
    app.addHook('onClose', () => endpoint.close());
  },
  { name: 'mcp', fastify: '5.x', dependencies: ['metrics', 'supergraph', 'documents', 'graphql-route'] },
);

interface EndpointParts {
  log: FastifyBaseLogger;
  runner: OperationRunner;
  documents: DocumentRegistry;
  schema: () => GraphQLSchema;
  metrics: GatewayMetrics;
}

interface Session {
  id: string;
  transport: WebStandardStreamableHTTPServerTransport;
  server: Server;
  principal: Principal;
  lastUsed: number;
  /** Requests being answered: a session is not closed for idleness or room while it answers one. */
  inFlight: number;
  /** Settles when the session is closed (a request still waiting on it is then answered 404). */
  closed: Promise<void>;
  close: () => void;
}

/** What a handler knows of the HTTP request that carried its message (the SDK's `authInfo.extra`). */
interface CarriedBy {
  caller: OperationCaller;
}

const executeArguments = z
  .object({
    query: z.string().min(1),
    variables: z.record(z.string(), z.unknown()).optional(),
    operationName: z.string().min(1).optional(),
  })
  .strict();

class McpEndpoint {
  private readonly sessions = new Map<string, Session>();
  private readonly sweeper: NodeJS.Timeout;
  private readonly calls: (outcome: 'ok' | 'error' | 'refused') => void;
  /** What each document's tool is made of, and the tool lists made, per schema served (a reload makes them again). */
  private readonly made = new WeakMap<
    GraphQLSchema,
    { parts: ToolParts; lists: Map<string, { documents: readonly TrustedDocument[]; tools: ReadonlyMap<string, DocumentTool> }> }
  >();

  constructor(
    private readonly config: AgentsConfig,
    private readonly parts: EndpointParts,
  ) {
    const idleMs = config.MCP_SESSION_IDLE_S * 1000;
    this.sweeper = setInterval(() => this.sweep(idleMs), Math.max(1000, idleMs / 4));
    this.sweeper.unref();
    const sessions = this.sessions;
    parts.metrics.gauge({
      name: 'mcp_sessions',
      help: 'MCP sessions open on this process',
      collect: (gauge) => gauge.set(sessions.size),
    });
    const counter = new Counter({
      name: 'mcp_tool_calls_total',
      help: 'MCP tool calls by outcome: ok (answered without errors), error (the operation answered errors), refused (unknown tool, arguments that do not match)',
      labelNames: ['outcome'],
      registers: [parts.metrics.registry],
    });
    this.calls = (outcome) => counter.inc({ outcome });
  }

  async serve(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const principal = principalOf(request);
    // One message per request (the protocol's revision of 2025-06-18 dropped JSON-RPC batches): each request
    // pays its own edge token, and a tool call is one operation.
    if (Array.isArray(request.body)) return jsonRpcError(reply, 400, -32600, 'Invalid request: send one JSON-RPC message per request (batches are not served)');
    const id = request.headers[SESSION_HEADER];
    let session: Session | undefined;
    if (typeof id === 'string') {
      session = this.sessions.get(id);
      // Another principal's session does not exist for this one.
      if (!session || !samePrincipal(session.principal, principal)) return jsonRpcError(reply, 404, -32001, 'Session not found: start a new one (initialize)');
    } else if (request.method === 'POST' && isInitializeRequest(request.body)) {
      session = await this.open(principal);
    } else {
      return jsonRpcError(reply, 400, -32000, `Bad request: send ${SESSION_HEADER} (from the answer to initialize), or an initialize request`);
    }
    session.lastUsed = Date.now();
    session.inFlight++;
    try {
      const carried: CarriedBy = { caller: callerOf(request) };
      const handled = session.transport.handleRequest(webRequestOf(request), {
        parsedBody: request.body,
        authInfo: { token: '', clientId: principal.id, scopes: [...principal.scopes], extra: carried as unknown as Record<string, unknown> },
      });
      // A session closed while this request waits (its client's DELETE, room made for another) leaves the
      // transport's answer unsettled; a DELETE is the closing itself, and is answered by the transport.
      const answer = request.method === 'DELETE' ? await handled : await Promise.race([handled, session.closed.then(() => null)]);
      if (!answer) return jsonRpcError(reply, 404, -32001, 'Session closed while this request was answered: start a new one (initialize)');
      reply.code(answer.status);
      answer.headers.forEach((value, name) => void reply.header(name, value));
      const body = await answer.text();
      return reply.send(body === '' ? undefined : body);
    } finally {
      session.inFlight--;
      session.lastUsed = Date.now();
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    await Promise.all([...this.sessions.values()].map((s) => this.end(s)));
  }

  /**
   * A new session for `principal`, within the bounds: past its share, its own least recently used is closed;
   * with the process full, the least recently used of all (its client gets 404 and starts again), so no set
   * of credentials can hold the endpoint for itself. Sessions answering a request are left open.
   */
  private async open(principal: Principal): Promise<Session> {
    const idle = (s: Session) => s.inFlight === 0;
    const byAge = (list: Session[]) => list.filter(idle).sort((a, b) => a.lastUsed - b.lastUsed);
    const own = [...this.sessions.values()].filter((s) => samePrincipal(s.principal, principal));
    for (const old of byAge(own).slice(0, Math.max(0, own.length - this.config.MCP_SESSIONS_PER_PRINCIPAL + 1))) await this.end(old);
    const over = this.sessions.size - this.config.MCP_MAX_SESSIONS + 1;
    if (over > 0) for (const old of byAge([...this.sessions.values()]).slice(0, over)) await this.end(old);
    const server = this.serverFor();
    let close = () => {};
    const closed = new Promise<void>((resolve) => (close = resolve));
    const session: Session = {
      id: '',
      server,
      principal,
      lastUsed: Date.now(),
      inFlight: 0,
      closed,
      close,
      transport: new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: true,
        onsessioninitialized: (id) => {
          session.id = id;
          this.sessions.set(id, session);
        },
        onsessionclosed: (id) => {
          this.sessions.delete(id);
          session.close();
        },
      }),
    };
    await server.connect(session.transport);
    return session;
  }

  private async end(session: Session): Promise<void> {
    this.sessions.delete(session.id);
    session.close();
    await session.server.close().catch(() => {});
  }

  private sweep(idleMs: number): void {
    const now = Date.now();
    for (const session of this.sessions.values()) if (session.inFlight === 0 && now - session.lastUsed > idleMs) void this.end(session);
  }

  /** The protocol server of one session: its handlers read the caller from the request that carries each message. */
  private serverFor(): Server {
    const server = new Server({ name: 'ops-supergraph', version: '1.0.0' }, { capabilities: { tools: {}, resources: {} } });
    server.setRequestHandler(ListToolsRequestSchema, (_request, extra) => {
      const { principal } = carriedBy(extra.authInfo?.extra).caller;
      const tools = [...this.toolsFor(principal).values()].map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));
      if (hasScope(principal, 'schema:free-text')) {
        tools.push({ name: EXECUTE_TOOL, description: 'Runs a GraphQL query or mutation sent as text, with its variables', inputSchema: EXECUTE_INPUT });
      }
      return { tools };
    });
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const { caller } = carriedBy(extra.authInfo?.extra);
      const { name } = request.params;
      const args = request.params.arguments ?? {};
      if (name === EXECUTE_TOOL && hasScope(caller.principal, 'schema:free-text')) {
        const parsed = executeArguments.safeParse(args);
        if (!parsed.success) {
          this.calls('refused');
          throw new McpError(
            ErrorCode.InvalidParams,
            `Arguments of ${name}: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`).join('; ')}`,
          );
        }
        const { query, variables, operationName } = parsed.data;
        return this.callTool({ query, variables: variables ?? null, operationName: operationName ?? null }, caller, null);
      }
      const tool = this.toolsFor(caller.principal).get(name);
      if (!tool) {
        this.calls('refused');
        throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${name} (tools/list names the tools this credential may call)`);
      }
      // The registered text, run as the client that registered it: it resolves whatever the mode.
      const params = { query: tool.document.body, variables: args, operationName: tool.operation.name?.value ?? null };
      return this.callTool(params, { ...caller, clientName: tool.document.client }, tool);
    });
    server.setRequestHandler(ListResourcesRequestSchema, (_request, extra) => {
      const { principal } = carriedBy(extra.authInfo?.extra).caller;
      if (!hasScope(principal, 'schema:read')) return { resources: [] };
      return {
        resources: [{ uri: SCHEMA_RESOURCE, name: 'schema', mimeType: 'application/graphql', description: 'The GraphQL schema this gateway serves (SDL)' }],
      };
    });
    server.setRequestHandler(ReadResourceRequestSchema, (request, extra) => {
      const { principal } = carriedBy(extra.authInfo?.extra).caller;
      // The schema is read as introspection reads it: with schema:read (gateway/security/authorization.ts).
      if (request.params.uri !== SCHEMA_RESOURCE || !hasScope(principal, 'schema:read')) {
        throw new McpError(-32002, `Resource not found: ${request.params.uri}`);
      }
      return { contents: [{ uri: SCHEMA_RESOURCE, mimeType: 'application/graphql', text: printSchema(this.parts.schema()) }] };
    });
    return server;
  }

  /**
   * Runs one operation through the pipeline, as its caller: its document and limits first, then (for a
   * registered document's tool) its arguments against the operation's variables, then the rest of the
   * pipeline as it runs. Its answer or refusal is the tool's result; arguments that do not fit are -32602.
   */
  private async callTool(params: OperationParams, caller: OperationCaller, tool: DocumentTool | null): Promise<CallToolResult> {
    try {
      const judged = this.parts.runner.judge(params, caller);
      let body: string;
      if (!judged.ok) body = judged.body;
      else if (judged.streamed)
        body = refusedWith(
          400,
          'BAD_REQUEST',
          `A tool answers once: ${judged.streamed === 'subscription' ? 'a subscription' : '@defer'} is not served here`,
        ).body;
      else {
        const problems = tool ? this.argumentProblems(tool, (params['variables'] ?? {}) as Record<string, unknown>) : [];
        if (problems.length > 0) {
          this.calls('refused');
          throw new McpError(ErrorCode.InvalidParams, `Arguments of ${tool!.name} do not match its input schema: ${problems.join('; ')}`);
        }
        body = (await this.parts.runner.run(judged, caller, ANSWER_TYPE)).body;
      }
      const answer = JSON.parse(body) as Record<string, unknown>;
      const failed = Array.isArray(answer['errors']) && answer['errors'].length > 0;
      this.calls(failed ? 'error' : 'ok');
      return { content: [{ type: 'text', text: body }], structuredContent: answer, ...(failed ? { isError: true } : {}) };
    } catch (error) {
      if (error instanceof McpError) throw error;
      // What failed inside is logged, not told: as /graphql answers an unexpected error.
      this.parts.log.error({ err: error }, 'an MCP tool call failed');
      throw new McpError(ErrorCode.InternalError, 'Internal error');
    }
  }

  /** Why arguments do not fit a tool's operation: names it does not declare, values its variables do not take. */
  private argumentProblems(tool: DocumentTool, args: Record<string, unknown>): string[] {
    const declared = new Set((tool.operation.variableDefinitions ?? []).map((d) => d.variable.name.value));
    const unknown = Object.keys(args)
      .filter((key) => !declared.has(key))
      .map((key) => `"${key}" is not an argument of ${tool.name}`);
    if (unknown.length > 0) return unknown;
    const coerced = getVariableValues(this.parts.schema(), tool.operation.variableDefinitions ?? [], args, { maxErrors: 10 });
    return coerced.errors?.map((e) => e.message) ?? [];
  }

  /** The tools of the documents a principal's clients registered, by name: made once per schema, documents and clients. */
  private toolsFor(principal: Principal): ReadonlyMap<string, DocumentTool> {
    const schema = this.parts.schema();
    const documents = this.parts.documents.documentsFor(principal);
    let bySchema = this.made.get(schema);
    if (!bySchema) this.made.set(schema, (bySchema = { parts: new WeakMap(), lists: new Map() }));
    // The same documents (objects a reload replaces) make the same tools.
    const key = documents.map((d) => `${d.client}\u0000${d.id}`).join('\u0001');
    const known = bySchema.lists.get(key);
    if (known && known.documents.every((d, i) => d === documents[i])) return known.tools;
    const tools = new Map(documentTools(documents, schema, bySchema.parts).map((t) => [t.name, t] as const));
    if (bySchema.lists.size >= 256) bySchema.lists.clear();
    bySchema.lists.set(key, { documents, tools });
    return tools;
  }
}

/** The caller of an HTTP request to /mcp, as the operation runner takes it: the edge's token is its call's. */
function callerOf(request: FastifyRequest): OperationCaller {
  const prepaid = request.prepaid;
  request.prepaid = 0;
  // A tool call is not made idempotent by a key the transport repeats on every request of the session.
  const { 'idempotency-key': _key, ...headers } = request.headers;
  return requestCaller(request, prepaid, headers);
}

function carriedBy(extra: Record<string, unknown> | undefined): CarriedBy {
  const carried = extra as unknown as CarriedBy | undefined;
  // Every message reaches a handler through `serve`, which always says who carried it.
  if (!carried?.caller) throw new McpError(ErrorCode.InternalError, 'a message reached the MCP server without its request');
  return carried;
}

/** The fastify request as the web-standard transport reads it (its body already parsed, passed beside). */
function webRequestOf(request: FastifyRequest): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  return new Request(`http://${request.hostname || 'localhost'}${MCP_PATH}`, { method: request.method, headers });
}

function jsonRpcError(reply: FastifyReply, status: number, code: number, message: string): FastifyReply {
  return reply.code(status).type('application/json; charset=utf-8').send({ jsonrpc: '2.0', error: { code, message }, id: null });
}
