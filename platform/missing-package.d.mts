/** The name of the package whose absence `error` reports, or null (platform/missing-package.mjs). */
export function missingPackage(error: unknown): string | null;
/** What to tell the operator about a missing package. */
export function missingPackageMessage(name: string): string;
