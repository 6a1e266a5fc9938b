/** Type oid of int8 (bigint, bigserial, count(*)). */
export const INT8_OID: 20;
/** Reads an int8 as a JS number, refusing a value beyond 2^53 (platform/int8.mjs). */
export function parseInt8(text: string): number;
