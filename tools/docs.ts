import { readCheckedInSupergraph } from '../schema/supergraph-file.js';
import { writeConfigurationTable } from './config-table.js';
import { writeLayout } from './layout.js';
import { writeScopesTable } from './scopes-table.js';

/* `npm run docs`: every generated section of the documentation, made anew from the code. */
writeLayout();
writeConfigurationTable();
writeScopesTable(readCheckedInSupergraph());
console.log('wrote the layout (README.md, docs/architecture.md), the configuration and scopes tables (docs/operations.md)');
