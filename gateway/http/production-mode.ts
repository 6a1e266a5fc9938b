import { productionModeUnlessSet } from './process.js';

/* Imported first by `gateway/main.ts`: NODE_ENV is settled before any module that reads it loads. */
productionModeUnlessSet();
