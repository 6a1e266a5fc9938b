/**
 * WebSocket close codes of /graphql beyond graphql-ws's own (4400 bad request, 4406 subprotocol,
 * 4408 connection_init timeout, 4409 duplicate id, 4429 too many connection_init).
 */
export const CloseCode = {
  /**
   * connection_init carried no valid credential, or the JWT the connection was opened with has expired (the
   * socket is closed at its `exp`): connect again with a fresh token and resubscribe from the last cursor.
   */
  Unauthorized: 4401,
  /**
   * The client does not read fast enough: its send buffer overflowed. Reconnect and resubscribe with
   * `after: <last cursor received>` to get every event it missed.
   */
  SlowConsumer: 4413,
} as const;
