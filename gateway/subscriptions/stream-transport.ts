import type { IncomingHttpHeaders, ServerResponse } from 'node:http';

/*
 * A transport of operations streamed over HTTP (Server-Sent Events, multipart): how a request asks for it,
 * and how results are written on the response. The admission, the caps, credentials and slow consumers
 * are the same for every transport (gateway/subscriptions/http-streams.ts).
 */

/** An Accept header's media types, each as its type then its parameters, lower case. */
type AcceptedTypes = ReadonlyArray<readonly string[]>;

/** How one streamed operation's results are written on its response. */
export interface StreamWriter {
  next(result: unknown, cursor: string | null): void;
  /** A last error that ends the operation (its credential expired), before `end`. */
  failed(errors: readonly { message: string; extensions: { code: string } }[]): void;
  heartbeat(): void;
  end(): void;
}

export interface StreamTransport {
  /** Whether the request's Accept asks for this transport, for an operation that is (or is not) a subscription. */
  accepts(types: AcceptedTypes, subscription: boolean): boolean;
  /** The cursor a reconnecting client asks to resume after, as it sent it; undefined when it names none. */
  resumeFrom(headers: IncomingHttpHeaders): string | string[] | undefined;
  /** Writes the head and returns the writer of the response's results. */
  open(response: ServerResponse, headers: Record<string, unknown>): StreamWriter;
}

/**
 * Each result as JSON text, made once however many streams send it: subscribers of one shared stream get
 * the same result object.
 */
const serialized = new WeakMap<object, string>();
export function jsonOf(result: unknown): string {
  if (typeof result !== 'object' || result === null) return JSON.stringify(result);
  let text = serialized.get(result);
  if (text === undefined) {
    text = JSON.stringify(result);
    serialized.set(result, text);
  }
  return text;
}
