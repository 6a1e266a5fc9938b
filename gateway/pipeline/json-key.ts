/**
 * A value as the text of a cache key, or null when it cannot be written (nested past the stack, as hostile
 * variables can be): the caller then does the work without keeping it.
 */
export function jsonKey(value: unknown): string | null {
  try {
    return JSON.stringify(value ?? {});
  } catch {
    return null;
  }
}
