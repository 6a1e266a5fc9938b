// @ts-check
/*
 * How both drivers read an int8 (platform/db.ts for PostgreSQL, platform/pglite-worker.mjs for PGlite):
 * plain JavaScript, so the database's thread loads it as the server does.
 */

/** Type oid of int8 (bigint, bigserial, count(*)). */
export const INT8_OID = 20;

/**
 * Reads an int8 as a JS number on both drivers (pg would give a string; PGlite a number, or a BigInt
 * beyond 2^53). A value a number cannot hold exactly is refused, never rounded: read such columns as
 * text (`id::text`, as the outbox cursor does).
 * @param {string} text
 * @returns {number}
 */
export function parseInt8(text) {
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new RangeError(`int8 value ${text} is not a safe integer (beyond 2^53); select it as text`);
  return value;
}
