import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

/*
 * Self time of a V8 CPU profile (`node --cpu-prof`), by function and by where the code lives (a package,
 * a file of the project, Node's internals, the garbage collector), as shares of the profile's busy time
 * (idle excluded).
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  /** Microseconds on the monotonic clock that process.hrtime reads too. */
  startTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

interface SelfTime {
  name: string;
  ms: number;
  /** Share of the busy (non-idle) time, in percent. */
  percent: number;
}

export interface ProfileSummary {
  busyMs: number;
  idleMs: number;
  functions: SelfTime[];
  places: SelfTime[];
}

/** Self times of the samples taken within `window` (monotonic microseconds, as `process.hrtime.bigint() / 1000n`). */
export function summarizeProfile(file: string, root: string, window: { fromUs: number; toUs: number }, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (at >= window.fromUs && at <= window.toUs) selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
  });
  const functions = new Map<string, number>();
  const places = new Map<string, number>();
  let idleUs = 0;
  let busyUs = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)!.callFrame;
    if (frame.functionName === '(idle)') {
      idleUs += us;
      continue;
    }
    busyUs += us;
    const place = placeOf(frame.url, root);
    const name = frame.url
      ? `${frame.functionName || '(anonymous)'} ${place.startsWith('node: ') ? shortUrl(frame.url) : fileOf(frame.url, root)}:${frame.lineNumber + 1}`
      : frame.functionName;
    functions.set(name, (functions.get(name) ?? 0) + us);
    places.set(frame.url ? place : frame.functionName, (places.get(frame.url ? place : frame.functionName) ?? 0) + us);
  }
  const rank = (m: Map<string, number>): SelfTime[] =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: Math.round(us / 100) / 10, percent: Math.round((1000 * us) / busyUs) / 10 }));
  return { busyMs: Math.round(busyUs / 1000), idleMs: Math.round(idleUs / 1000), functions: rank(functions), places: rank(places) };
}

/** `node_modules/<package>` (scoped names whole), a project folder, or a part of Node's internals. */
function placeOf(url: string, root: string): string {
  if (url.startsWith('node:')) return nodePart(url.slice('node:'.length));
  // WebAssembly in a gateway process: the HTTP parser (llhttp) of Node's fetch.
  if (url.startsWith('wasm:')) return 'wasm (llhttp, for fetch)';
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const [scope, name] = path.slice(modules + '/node_modules/'.length).split('/');
    return scope?.startsWith('@') ? `${scope}/${name}` : (scope ?? path);
  }
  const inProject = relative(root, path);
  return inProject.startsWith('..') ? path : `project ${inProject.split('/').slice(0, -1).join('/') || '.'}/`;
}

/** Node's internals in the parts a gateway leans on. */
function nodePart(module: string): string {
  if (module.includes('undici')) return 'node: fetch (undici)';
  if (/abort_controller|event_target|js_transferable|^events$|internal\/events/.test(module)) return 'node: abort signals, events';
  if (/^_http|^http|^net$|stream|^internal\/(http|net|dns)/.test(module)) return 'node: http, net, streams';
  if (/modules|bootstrap|^vm$/.test(module)) return 'node: module loading';
  if (/timers|task_queues|async_hooks/.test(module)) return 'node: timers, task queues';
  return 'node: other';
}

function fileOf(url: string, root: string): string {
  const path = url.replace(/^file:\/\//, '');
  const modules = path.lastIndexOf('/node_modules/');
  return modules >= 0 ? path.slice(modules + '/node_modules/'.length) : relative(root, path);
}

function shortUrl(url: string): string {
  return url.replace(/^node:/, '');
}
