import { readCheckedInSupergraph } from '../schema/compose.js';
import { writeLayout } from './layout.js';
import { writeScopesTable } from './scopes-table.js';

/* `npm run docs`: every generated section of the documentation, made anew from the code. */
writeLayout();
writeScopesTable(readCheckedInSupergraph());
console.log('wrote the layout (README.md, docs/architecture.md) and the scopes table (docs/operations.md)');
