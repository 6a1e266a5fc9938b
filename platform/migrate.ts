import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Database } from './db.js';

export interface MigrationSet {
  /** Owner of the migrations, used to namespace their names ("platform", "rental", ...). */
  owner: string;
  /** Folder of `NNN_name.sql` files, applied in name order. */
  dir: string;
}

/**
 * Applies every migration not yet recorded in `schema_migrations`, each in its own transaction.
 * On PostgreSQL an advisory lock keeps two starting instances from migrating at once.
 */
export async function migrate(db: Database, sets: MigrationSet[]): Promise<string[]> {
  await db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    name text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const applied: string[] = [];
  for (const set of sets) {
    const files = readdirSync(set.dir)
      .filter((f) => /^\d{3}_.+\.sql$/.test(f))
      .sort();
    for (const file of files) {
      const name = `${set.owner}/${file}`;
      const sql = readFileSync(join(set.dir, file), 'utf8');
      const done = await db.transaction(async (tx) => {
        if (db.kind === 'postgres') await tx.query(`SELECT pg_advisory_xact_lock(hashtext('schema_migrations'))`);
        const seen = await tx.query('SELECT 1 FROM schema_migrations WHERE name = $1', [name]);
        if (seen.rowCount > 0) return false;
        for (const statement of splitStatements(sql)) await tx.query(statement);
        await tx.query('INSERT INTO schema_migrations (name) VALUES ($1)', [name]);
        return true;
      });
      if (done) applied.push(name);
    }
  }
  return applied;
}

/**
 * Splits a migration into statements on `;` at line ends (migrations keep one statement per `;`). A
 * dollar-quoted body (`$$ ... $$`, `$fn$ ... $fn$`: a function's) is kept whole, whatever its lines end with.
 */
function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let statement = '';
  const cut = (text: string) => {
    const pieces = text.split(/;\s*(?:\n|$)/);
    statement += pieces[0];
    for (const piece of pieces.slice(1)) {
      statements.push(statement);
      statement = piece;
    }
  };
  let at = 0;
  for (const quoted of sql.matchAll(/\$(\w*)\$[\s\S]*?\$\1\$/g)) {
    cut(sql.slice(at, quoted.index));
    statement += quoted[0];
    at = quoted.index + quoted[0].length;
  }
  cut(sql.slice(at));
  statements.push(statement);
  return statements.map((s) => s.replace(/^\s*--.*$/gm, '').trim()).filter((s) => s.length > 0);
}
