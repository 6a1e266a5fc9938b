import { configSection, intFrom, type ConfigValues } from '../../platform/config.js';

/** The gateway's agents room's section of the configuration: the MCP endpoint (docs/operations.md, generated from it). */
export const agentsConfig = configSection('gateway/agents', 'gateway/agents/config.ts', {
  MCP_MAX_SESSIONS: intFrom('MCP_MAX_SESSIONS', 0, 100_000)
    .default(64)
    .describe(
      'MCP sessions open at once on this process (`/mcp`, [Operations](operations.md#agents-mcp)); a new one past the bound closes the least recently used; `0` turns the endpoint off (404)',
    ),
  MCP_SESSIONS_PER_PRINCIPAL: intFrom('MCP_SESSIONS_PER_PRINCIPAL', 1, 10_000)
    .default(4)
    .describe("MCP sessions one principal holds at once; a new one past it closes that principal's least recently used"),
  MCP_SESSION_IDLE_S: intFrom('MCP_SESSION_IDLE_S', 5, 86_400)
    .default(600)
    .describe('an MCP session unused this long is closed (its next request answers 404, and the client starts a new one)'),
});

export type AgentsConfig = ConfigValues<typeof agentsConfig.shape>;
