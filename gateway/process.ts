import { exit } from 'node:process';
import { ConfigError, loadConfig, type Config } from '../platform/config.js';

/** The environment's config, or exit 2 with the message naming each bad variable. */
export function configOrExit(env: Record<string, string | undefined> = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(error.message);
      exit(2);
    }
    throw error;
  }
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
