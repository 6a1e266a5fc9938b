import { configSection, intFrom, type ConfigValues } from '../../platform/config.js';

/** The gateway's subscriptions room's section of the configuration: WebSockets and shared subscription streams (docs/operations.md, generated from it). */
export const subscriptionsConfig = configSection('gateway/subscriptions', 'gateway/subscriptions/config.ts', {
  WS_CONNECTION_INIT_TIMEOUT_MS: intFrom('WS_CONNECTION_INIT_TIMEOUT_MS', 100, 60_000)
    .default(3000)
    .describe('a WebSocket that sends no `connection_init` by then is closed with 4408'),
  WS_KEEPALIVE_MS: intFrom('WS_KEEPALIVE_MS', 100, 600_000).default(12_000).describe('WebSocket ping interval; a peer that does not answer is dropped'),
  WS_MAX_BUFFERED_BYTES: intFrom('WS_MAX_BUFFERED_BYTES', 1024, 256 * 1024 * 1024)
    .default(1024 * 1024)
    .describe("bytes that may wait in one socket's send buffer before it is closed as a slow consumer (4413)"),
  WS_MAX_QUEUED_EVENTS: intFrom('WS_MAX_QUEUED_EVENTS', 1, 1_000_000)
    .default(1000)
    .describe('events that may wait for one subscription before its connection is closed as a slow consumer (4413)'),
  WS_MAX_SUBSCRIPTIONS: intFrom('WS_MAX_SUBSCRIPTIONS', 1, 100_000)
    .default(100)
    .describe(
      'operations one WebSocket connection may have open at once; one more is refused with an `error` (`SUBSCRIPTION_LIMIT_EXCEEDED`), the connection kept',
    ),
  HTTP_MAX_STREAMS_PER_PRINCIPAL: intFrom('HTTP_MAX_STREAMS_PER_PRINCIPAL', 1, 1_000_000)
    .default(1000)
    .describe(
      'subscriptions one principal may have open at once over Server-Sent Events and multipart HTTP; one more is refused with `SUBSCRIPTION_LIMIT_EXCEEDED` (400). `WS_MAX_BUFFERED_BYTES` and `WS_MAX_QUEUED_EVENTS` hold these streams too',
    ),
  HTTP_STREAM_HEARTBEAT_MS: intFrom('HTTP_STREAM_HEARTBEAT_MS', 100, 600_000)
    .default(5000)
    .describe('interval of the heartbeat on subscriptions over HTTP (an SSE comment, an empty multipart part), so proxies keep an idle stream open'),
  SUBSCRIPTION_RESUME_GRACE_MS: intFrom('SUBSCRIPTION_RESUME_GRACE_MS', 0, 600_000)
    .default(30_000)
    .describe(
      'how long a subscription whose subgraph was lost (restarted, redeployed) keeps reopening it from its last event, its subscribers seeing a pause; past it they get `UPSTREAM_UNAVAILABLE` and resume themselves; `0` ends it at once',
    ),
});

export type SubscriptionsConfig = ConfigValues<typeof subscriptionsConfig.shape>;
