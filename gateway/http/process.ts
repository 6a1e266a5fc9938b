import { exit } from 'node:process';
import { ConfigError } from '../../platform/config.js';
import { connectivityFailure, DatabaseUnavailableError } from '../../platform/db-errors.js';
import { StartupError } from '../../platform/startup-error.js';
import { missingPackage, missingPackageMessage } from '../../platform/missing-package.mjs';

/**
 * Server processes run with NODE_ENV=production unless told otherwise, set before graphql-js is loaded:
 * graphql-js then checks types with plain `instanceof` instead of its development check (which looks up
 * class names on every miss, about 5% of a 1,000-item batch's CPU). Nothing else depends on it: Apollo's
 * introspection and stack-trace settings are explicit (gateway/server.ts). The test suite keeps the
 * development checks.
 */
export function productionModeUnlessSet(): void {
  process.env['NODE_ENV'] ??= 'production';
}

/** Closes the server on SIGINT / SIGTERM (once), then exits: 0 when it closed cleanly. */
export function closeOnSignal(server: { close(): Promise<void> }, log: { info(msg: string): void }): void {
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info(`${signal}: shutting down`);
    server.close().then(
      () => exit(0),
      (error: unknown) => {
        console.error(error);
        exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

/**
 * Ends a start that failed. A cause the operator can fix (a busy port, an unreachable database, a data
 * directory held by another process, a bad variable) is one line on stderr, without a stack trace; anything
 * else is printed whole. Exit code 1 (2 for configuration, as `configOrExit`).
 */
export function exitOnStartFailure(error: unknown, what: string): never {
  if (error instanceof StartupError) {
    console.error(`${what} cannot start: ${error.message}`);
    exit(1);
  }
  if (error instanceof DatabaseUnavailableError) {
    // Reached at first, then lost while migrating or starting the subgraphs.
    console.error(`${what} cannot start: the database was lost during the start (${connectivityFailure(error)})`);
    exit(1);
  }
  if (error instanceof ConfigError) {
    console.error(error.message);
    exit(2);
  }
  const missing = missingPackage(error);
  if (missing) {
    console.error(`${what} cannot start: ${missingPackageMessage(missing)}`);
    exit(1);
  }
  console.error(error);
  exit(1);
}
