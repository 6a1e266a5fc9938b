/** The layout's rules (tools/layout-rules.mjs): data, the one judgement of an import, and the linter's plugin. */

export interface Room {
  about: string;
  /** The other rooms its files may import (type-only imports included). */
  imports: readonly string[];
}

export const TOP_FOLDERS: ReadonlyArray<readonly [string, string]>;
export const GATEWAY_ROOMS: Readonly<Record<string, Room>>;
export const GATEWAY_ENTRY_POINTS: Readonly<Record<string, string>>;
export function importViolation(file: string, target: string): string | null;
export function importTarget(file: string, specifier: string): string;
export const layoutPlugin: { meta: { name: string }; rules: Record<string, unknown> };
