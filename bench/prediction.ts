import { availableParallelism, cpus } from 'node:os';
import { loadConfig } from '../gateway/config.js';
import { startServer } from '../gateway/server.js';
import type { ModelName } from '../subgraphs/prediction/features.js';
import { generate } from '../subgraphs/prediction/generator.js';
import { loadModels } from '../subgraphs/prediction/model.js';
import { quantile as percentile } from './support/stats.js';

/*
 * `npm run bench -- prediction`: predictions per second and latency of the REST path (HTTP on loopback,
 * validation, the gateway, the subgraph, the model) against the in-process model call, side by side in
 * one run. Every measurement is bounded by a count and a time budget.
 */

const MAX_SECONDS = 3;
const MAX_CALLS = 5000;
const WARMUP = 50;
const BATCH = 100;
const CONCURRENCY = 16;

interface Row {
  model: ModelName;
  path: string;
  mode: string;
  predictionsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
}

/**
 * Runs `call` from `workers` concurrent loops until MAX_CALLS calls or MAX_SECONDS; each call makes
 * `perCall` predictions. Latency is per call.
 */
async function measure(call: (i: number) => unknown, perCall: number, workers = 1) {
  for (let i = 0; i < WARMUP; i++) await call(i);
  const latencies: number[] = [];
  const deadline = performance.now() + MAX_SECONDS * 1000;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < MAX_CALLS && performance.now() < deadline) {
        const i = next++;
        const t = performance.now();
        await call(i);
        latencies.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    predictionsPerSecond: (latencies.length * perCall) / elapsed,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}

const REST_PATHS: Record<ModelName, string> = {
  dwell: '/prediction/predict/dwell_advanced',
  travel: '/prediction/predict/travel_time',
  locker: '/prediction/predict/locker_advanced',
};

export default async function benchPrediction(): Promise<void> {
  const server = await startServer({
    config: loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: ':memory:', LOG_LEVEL: 'silent' }),
  });
  const models = loadModels();
  const rows: Row[] = [];
  try {
    for (const model of ['dwell', 'travel', 'locker'] as const) {
      const records = generate(model, 1000, 777).map((s) => s.features);
      const predict = (record: Record<string, number>) => (model === 'locker' ? models.locker.predict(record) : models[model].predict(record));
      const batches = Array.from({ length: 10 }, (_, b) => records.slice(b * BATCH, (b + 1) * BATCH));
      const post = async (path: string, body: unknown) => {
        const res = await fetch(`${server.url}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        if (res.status !== 200) throw new Error(`${path}: HTTP ${res.status} ${await res.text()}`);
        return res.json();
      };
      const add = (path: string, mode: string, m: Awaited<ReturnType<typeof measure>>) => rows.push({ model, path, mode, ...m });

      add('in-process model', 'single', await measure((i) => predict(records[i % records.length]!), 1));
      add('in-process model', `batch of ${BATCH}`, await measure((i) => batches[i % batches.length]!.map(predict), BATCH));
      add('REST', 'single, 1 client', await measure((i) => post(REST_PATHS[model], records[i % records.length]), 1));
      add('REST', `single, ${CONCURRENCY} clients`, await measure((i) => post(REST_PATHS[model], records[i % records.length]), 1, CONCURRENCY));
      add('REST', `batch of ${BATCH}`, await measure((i) => post(`${REST_PATHS[model]}/batch`, { instances: batches[i % batches.length] }), BATCH));
    }
  } finally {
    await server.close();
  }

  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  console.log(`\nprediction benchmark: Node ${process.version}, ${availableParallelism()} cores (${cpu}); one process, loopback HTTP`);
  console.log(`each row: up to ${MAX_CALLS} calls or ${MAX_SECONDS} s after ${WARMUP} warm-up calls; latency per call\n`);
  console.log('| model | path | mode | predictions/s | p50 ms | p99 ms |');
  console.log('|---|---|---|---:|---:|---:|');
  for (const r of rows) {
    const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(3));
    console.log(`| ${r.model} | ${r.path} | ${r.mode} | ${Math.round(r.predictionsPerSecond).toLocaleString('en-US')} | ${fmt(r.p50Ms)} | ${fmt(r.p99Ms)} |`);
  }
  for (const model of ['dwell', 'travel', 'locker'] as const) {
    const of = (path: string, mode: string) => rows.find((r) => r.model === model && r.path === path && r.mode === mode)!;
    const direct = of('in-process model', 'single').predictionsPerSecond;
    const single = of('REST', 'single, 1 client').predictionsPerSecond;
    const batch = of('REST', `batch of ${BATCH}`).predictionsPerSecond;
    console.log(
      `${model}: in-process single call is ${(direct / single).toFixed(0)}x REST single; REST batch of ${BATCH} is ${(batch / single).toFixed(1)}x REST single`,
    );
  }
}
