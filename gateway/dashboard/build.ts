import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Builds the dashboard into web/dist with Vite, as `npm run build:web` does. */
export async function buildDashboard(): Promise<void> {
  const { build } = await import('vite');
  const root = fileURLToPath(new URL('../../web/', import.meta.url));
  await build({ root, configFile: join(root, 'vite.config.ts'), logLevel: 'warn' });
}
