// Worker threads start without the TypeScript loader of the parent: register it, then load the worker.
import { workerData } from 'node:worker_threads';
import { tsImport } from 'tsx/esm/api';

await tsImport(workerData.entry, import.meta.url);
