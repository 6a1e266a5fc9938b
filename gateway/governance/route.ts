import type { FastifyInstance } from 'fastify';
import type { GraphQLSchema } from 'graphql';
import { z } from 'zod';
import { refuse } from '../http/problem.js';
import { lookUpCoordinate } from './coordinates.js';
import type { UsageRecorder } from './usage.js';

const query = z
  .object({
    coordinate: z.string().min(1).max(300),
    since: z.iso.datetime({ offset: true }).optional(),
  })
  .strict();

/**
 * `GET /admin/usage?coordinate=Type.field&since=<ISO time>` (`ops:admin`): every client and operation that used
 * the coordinate since then (default: the retention window), newest counts flushed first. And
 * `GET /admin/supergraph` (`ops:admin`): the supergraph SDL served.
 */
export function registerUsageRoute(
  app: FastifyInstance,
  options: { usage: UsageRecorder | null; schema: () => GraphQLSchema; retentionMs: number; supergraphSdl: () => string },
): void {
  // The supergraph this gateway serves, for `npm run schema:check -- --url` (ops:admin).
  app.get('/admin/supergraph', { config: { requires: 'ops:admin' } }, async (_request, reply) =>
    reply.type('application/json').send({ supergraph: options.supergraphSdl() }),
  );

  app.get('/admin/usage', { config: { requires: 'ops:admin' } }, async (request, reply) => {
    const parsed = query.safeParse(request.query);
    if (!parsed.success) {
      const detail = parsed.error.issues.map((i) => `${i.path.join('.') || 'query'}: ${i.message}`).join('; ');
      return refuse(reply, request, 'BAD_USER_INPUT', `${detail} (send coordinate=Type.field and optionally since=<ISO 8601 time>)`);
    }
    const { coordinate } = parsed.data;
    const found = lookUpCoordinate(options.schema(), coordinate);
    if (!found)
      return refuse(
        reply,
        request,
        'BAD_USER_INPUT',
        `coordinate: "${coordinate}" is not a schema coordinate (Type, Type.field, Type.field(argument:), Enum.VALUE)`,
      );
    if (!found.exists) return refuse(reply, request, 'NOT_FOUND', `coordinate: the served schema has no ${coordinate}`);
    if (!options.usage) return refuse(reply, request, 'CONFLICT', 'Field usage is not recorded here (USAGE_RECORDING=false)');
    const since = parsed.data.since ? new Date(parsed.data.since) : new Date(Date.now() - options.retentionMs);
    const rows = await options.usage.usage(coordinate, since);
    return {
      coordinate,
      deprecated: found.deprecated,
      since: since.toISOString(),
      requests: rows.reduce((sum, r) => sum + r.requests, 0),
      clients: rows,
    };
  });
}
