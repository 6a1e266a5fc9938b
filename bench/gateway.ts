import { randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { argv, env } from 'node:process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { withoutSecurityDirectives } from '../gateway/security/authorization.js';
import { PRINCIPAL_HEADER, PrincipalSigner, SYSTEM_PRINCIPAL } from '../platform/principal.js';
import { subgraphNames } from '../schema/subgraphs.js';
import type { LoadResult } from './gateway/load.js';
import {
  LoadGenerator,
  measurePaired,
  measureRound,
  pairedSide,
  resetPeaks,
  summarize,
  type Cell,
  type CellResult,
  type CpuMeter,
  type Round,
  type RunSettings,
  type Target,
} from './gateway/measure.js';
import { summarizeProfile, type ProfileSummary } from './gateway/profile.js';
import { freePort, machineCpuMs, peakRssMiB, postgresCpuMs, startServer, stopServer, type ServerProcess } from './gateway/processes.js';
import { printResults, writeResults, type BenchResults, type PairedResult, type WorkloadResult } from './gateway/report.js';
import { machineId, POOL_FIRST_MACHINE, seedDatabase } from './gateway/seed.js';
import { verifyMutations, verifyPaging, verifyRest, verifySameData, type Endpoint } from './gateway/verify.js';
import { FEDERATED_QUERY, graphql, mixRequests, PAGE_SIZE, PAGING_QUERY, restPairs, SHALLOW_QUERY } from './gateway/workloads.js';
import { hiveGatewayArgs } from './peers/hive.js';

/*
 * npm run bench -- gateway [--quick] [--seconds N] [--warmup N] [--rounds N] [--connections N]
 *                          [--paging-rows N] [--only w1,w2] [--targets k1,k2] [--profile-seconds N] [--profile-mix] [--out DIR]
 *                          [--baseline DIR [--baseline-env NAME=value,...]] [--env NAME=value,...]
 *
 * The five subgraphs start once, as processes of their own, on PostgreSQL (BENCH_DATABASE_URL, or the
 * local postgres://postgres@127.0.0.1:5432/test when it answers; a schema of this run's own, dropped
 * afterwards) or else on PGlite. In front of them, each its own process: the project's gateway
 * (distributed mode), stock @apollo/gateway + @apollo/server, Hive Gateway and Hive Gateway with Hive
 * Router's Rust query planner (`--hive-router-runtime`), all on the checked-in
 * supergraph (pointed at this run's subgraph ports); beside them the project's one-process server
 * (`npm start`) on PGlite and on PostgreSQL. The load generator (autocannon) is a process of its own.
 * The subgraph servers serve only calls signed with PRINCIPAL_SECRET (one of this run's own, given to every
 * server): the peers sign theirs with the project's PrincipalSigner (bench/peers), so every gateway compared
 * pays the same signing work per call.
 *
 * Every workload is first checked: each gateway must answer its operations with the same data. Then each
 * target is warmed up, and the rounds interleave the targets, in turn forwards and backwards (A B C,
 * C B A, ...), so that the machine's drift falls on all of them alike, and so does going first after
 * another server's turn (its leftover work, cold caches). Written to bench/results/gateway.{md,json} (a full run) with the date,
 * the machine's load average and the commit.
 *
 * `--baseline DIR`: another checkout of this project (with its node_modules), whose gateway and one-process
 * server run beside this tree's, against the same subgraph processes, in place of the peers: the same
 * checks that every target answers alike, and the two trees' rates and CPU side by side in one run.
 * `--baseline-env NAME=value[,...]` sets variables for the baseline's servers only: with `--baseline .`, one
 * tree against itself with a setting changed (`USAGE_RECORDING=false` measures what field usage costs).
 * `--env NAME=value[,...]` sets variables for this tree's servers only. Two slots of identical code can
 * differ by several percent in one run (docs/performance.md), so a setting's cost is measured crossed over:
 * one run with it on in this tree's slot and off in the baseline's, one the other way round; the slots'
 * bias cancels in the geometric mean of the two ratios.
 * `--targets project,project-baseline` runs only those targets (keys as in bench/results/gateway.json).
 */

const root = fileURLToPath(new URL('..', import.meta.url));
const LOCAL_POSTGRES = 'postgres://postgres@127.0.0.1:5432/test';

export interface Options {
  quick: boolean;
  seconds: number;
  warmup: number;
  rounds: number;
  connections: number;
  /** Rows the paging workload reads per target, over all rounds (by default 200,000: a million over five targets). */
  pagingRows: number;
  bookings: number;
  only: Set<string> | null;
  /** Target keys to run (`project`, `project-baseline`, `one-process-pglite`, ...); null: all of them. */
  targets: Set<string> | null;
  profileSeconds: number;
  /** Profile on the mix of distinct queries instead of the federated query. */
  profileMix: boolean;
  out: string | null;
  /** Another checkout whose gateway and one-process server run beside this tree's (in place of the peers). */
  baseline: string | null;
  /** Environment of the baseline's servers only (`--baseline-env USAGE_RECORDING=false`): one tree, two settings. */
  baselineEnv: Record<string, string>;
  /** Environment of this tree's servers only (`--env`): with `--baseline-env`, a crossed-over measurement. */
  treeEnv: Record<string, string>;
}

const WORKLOADS = ['federated', 'shallow', 'federated-unshared', 'shallow-unshared', 'mix', 'rest', 'paging', 'mutations'] as const;
/** The workloads run with nothing shared between requests, on targets of their own. */
const UNSHARED_WORKLOADS: readonly string[] = ['federated-unshared', 'shallow-unshared'];
/** This project's gateway with nothing shared between requests: no collapsing of identical fetches, no fetch cache. */
const PROJECT_UNSHARED_ENV = { GATEWAY_COLLAPSE_FETCHES: 'false', GATEWAY_FETCH_CACHE_MB: '0' };
/** Hive Gateway with nothing shared (bench/peers/hive.config.ts): its HTTP transport's deduplication of identical subgraph requests in flight off. */
const HIVE_UNSHARED_ENV = { HIVE_DEDUPLICATE_INFLIGHT_REQUESTS: 'false' };
type WorkloadName = (typeof WORKLOADS)[number];

function parseOptions(args: string[]): Options {
  const value = (flag: string) => {
    const i = args.indexOf(flag);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const number = (flag: string, fallback: number) => {
    const raw = value(flag);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} wants a positive number, not ${raw}`);
    return n;
  };
  const quick = args.includes('--quick');
  const only = value('--only')?.split(',');
  for (const name of only ?? []) if (!(WORKLOADS as readonly string[]).includes(name)) throw new Error(`--only: no workload ${name} (${WORKLOADS.join(', ')})`);
  return {
    quick,
    seconds: number('--seconds', quick ? 3 : 5),
    warmup: number('--warmup', quick ? 2 : 2),
    // An even count, so every target goes as often forwards as backwards.
    rounds: number('--rounds', quick ? 1 : 4),
    connections: number('--connections', 50),
    pagingRows: number('--paging-rows', quick ? 20_000 : 200_000),
    bookings: quick ? 2_000 : 10_000,
    only: only ? new Set(only) : null,
    targets: value('--targets') ? new Set(value('--targets')!.split(',')) : null,
    profileSeconds: number('--profile-seconds', quick ? 3 : 8),
    profileMix: args.includes('--profile-mix'),
    // bench/results holds the comparison with the peers: a quick run or a baseline run writes nothing unless asked.
    out: value('--out') ?? (quick || args.includes('--baseline') ? null : join(root, 'bench', 'results')),
    baseline: value('--baseline') ?? null,
    baselineEnv: envOption(value('--baseline-env'), '--baseline-env'),
    treeEnv: envOption(value('--env'), '--env'),
  };
}

function envOption(raw: string | undefined, flag: string): Record<string, string> {
  return Object.fromEntries(
    (raw?.split(',') ?? []).map((pair) => {
      const [name, ...rest] = pair.split('=');
      if (!name || rest.length === 0) throw new Error(`${flag} wants NAME=value[,NAME=value], not ${pair}`);
      return [name, rest.join('=')];
    }),
  );
}

export default async function gatewayBench(): Promise<void> {
  const options = parseOptions(argv.slice(3));
  const tmp = mkdtempSync(join(tmpdir(), 'ops-supergraph-bench-gateway-'));
  const servers: ServerProcess[] = [];
  let postgres: { url: string; schema: string } | null = null;
  let load: LoadGenerator | null = null;
  const started = new Date();
  const loadAverages: number[] = [loadavg()[0]!];
  try {
    const url = await postgresUrl();
    postgres = url ? { url, schema: `bench_gateway_${Date.now().toString(36)}` } : null;
    // Six targets at most, 150 machines each from EQ-100: the pool fills the ids up to EQ-999.
    const plan = { bookings: options.bookings, poolMachines: 6 * POOL_PER_TARGET };
    log(`seeding ${plan.bookings} bookings and ${plan.poolMachines} pool machines: PGlite${postgres ? ` and PostgreSQL schema ${postgres.schema}` : ''}`);
    const template = join(tmp, 'pglite-template');
    await seedDatabase({ dataDir: template }, plan);
    if (postgres) await seedDatabase(postgres, plan);
    const copyOfTemplate = (name: string) => {
      const dir = join(tmp, `data-${name}`);
      cpSync(template, dir, { recursive: true });
      return dir;
    };
    // The subgraph servers serve only calls signed with PRINCIPAL_SECRET: one secret of this run's own for every
    // server, the peers included (they sign with the project's PrincipalSigner, bench/peers).
    const principalSecret = randomBytes(24).toString('base64url');
    const baseEnv = serverEnv(principalSecret);
    const signer = PrincipalSigner.from(principalSecret)!;
    const database = (name: string): Record<string, string> =>
      postgres ? { DATABASE_URL: postgres.url, DATABASE_SCHEMA: postgres.schema } : { DATA_DIR: copyOfTemplate(name) };
    const logDir = join(tmp, 'logs');
    mkdirSync(logDir);
    const start = async (name: string, args: string[], extra: Record<string, string>, cwd = root, probeHeaders?: (body: string) => Record<string, string>) => {
      const port = extra['PORT'] ? Number(extra['PORT']) : await freePort();
      const server = await startServer({
        name,
        args,
        env: { ...baseEnv, ...extra, PORT: String(port) },
        port,
        cwd,
        logDir,
        startTimeoutMs: 240_000,
        ...(probeHeaders ? { probeHeaders } : {}),
      });
      servers.push(server);
      return server;
    };

    log(`starting the subgraphs (${subgraphNames.join(', ')}) on ${postgres ? 'PostgreSQL' : 'PGlite'}`);
    // Rental asks prediction for its trucks' travel forecasts: prediction starts first, and rental's
    // process names it in SUBGRAPH_URLS.
    // BENCH_SUBGRAPH_PROFILE_DIR=dir: each subgraph process writes a CPU profile of its whole run there when it stops.
    const subgraphProfile = env['BENCH_SUBGRAPH_PROFILE_DIR'];
    const startSubgraph = (name: string, extra: Record<string, string> = {}) =>
      start(
        `subgraph-${name}`,
        [...(subgraphProfile ? ['--cpu-prof', `--cpu-prof-dir=${join(subgraphProfile, name)}`] : []), '--import', 'tsx', 'gateway/subgraph-main.ts', name],
        { ...database(`subgraph-${name}`), ...extra },
        root,
        // Its readiness request is signed too, as the system's (a probe).
        (body) => ({ [PRINCIPAL_HEADER]: signer.sign(SYSTEM_PRINCIPAL, { subgraph: name, method: 'POST', path: '/graphql', body }) }),
      );
    const first = subgraphNames.filter((name) => name !== 'rental');
    const firstServers = await Promise.all(first.map((name) => startSubgraph(name)));
    const subgraphUrls: Record<string, string> = Object.fromEntries(first.map((name, i) => [name, `${firstServers[i]!.url}/graphql`]));
    const rentalServer = await startSubgraph('rental', { SUBGRAPH_URLS: `prediction=${subgraphUrls['prediction']}` });
    subgraphUrls['rental'] = `${rentalServer.url}/graphql`;
    const subgraphs = subgraphNames.map((name) => (name === 'rental' ? rentalServer : firstServers[first.indexOf(name)]!));
    const supergraphFile = join(tmp, 'supergraph.graphql');
    writeFileSync(
      supergraphFile,
      // The peers get the supergraph without the SECURITY features (@requiresScopes, @authenticated), which
      // stock @apollo/gateway refuses to load; the project gateway runs in demo mode, whose principal
      // holds every scope, so every gateway gives the same answers.
      withoutSecurityDirectives(readFileSync(join(root, 'schema', 'supergraph.graphql'), 'utf8')).replace(
        /@join__graph\(name: "(\w+)", url: "[^"]*"\)/g,
        (m, name: string) => (subgraphUrls[name] ? `@join__graph(name: "${name}", url: "${subgraphUrls[name]}")` : m),
      ),
    );

    log('starting the gateways');
    const urls = subgraphNames.map((name) => `${name}=${subgraphUrls[name]}`).join(',');
    type Spec = {
      key: string;
      label: string;
      args: string[];
      env: Record<string, string>;
      remoteSubgraphs: boolean;
      project: boolean;
      unshared?: boolean;
      cwd?: string;
    };
    const unsharedWanted = !options.only || UNSHARED_WORKLOADS.some((w) => options.only!.has(w));
    const peerSpecs = async (): Promise<Spec[]> => {
      const hivePort = await freePort();
      const hiveRustPort = await freePort();
      const hiveRustUnsharedPort = await freePort();
      return [
        {
          key: 'stock',
          label: 'stock @apollo/gateway',
          args: ['--import', 'tsx', 'bench/peers/apollo-stock.ts'],
          env: { SUPERGRAPH_FILE: supergraphFile },
          remoteSubgraphs: true,
          project: false,
        },
        {
          key: 'hive',
          label: 'Hive Gateway',
          args: hiveGatewayArgs(supergraphFile, hivePort),
          env: { PORT: String(hivePort), SUBGRAPH_URLS: urls },
          remoteSubgraphs: true,
          project: false,
        },
        {
          key: 'hive-rust',
          label: 'Hive Gateway, Rust planner',
          args: hiveGatewayArgs(supergraphFile, hiveRustPort, { rustPlanner: true }),
          env: { PORT: String(hiveRustPort), SUBGRAPH_URLS: urls },
          remoteSubgraphs: true,
          project: false,
        },
        ...(unsharedWanted
          ? [
              {
                key: 'hive-rust-unshared',
                label: 'Hive Gateway, Rust planner, nothing shared',
                args: hiveGatewayArgs(supergraphFile, hiveRustUnsharedPort, { rustPlanner: true }),
                env: { PORT: String(hiveRustUnsharedPort), SUBGRAPH_URLS: urls, ...HIVE_UNSHARED_ENV },
                remoteSubgraphs: true,
                project: false,
                unshared: true,
              },
            ]
          : []),
      ];
    };
    /** One of this project's servers (`gateway/main.ts`): distributed when it is given SUBGRAPH_URLS, else one process. */
    const projectServer = (key: string, label: string, env: Record<string, string>, extra: { unshared?: boolean; cwd?: string } = {}): Spec => ({
      key,
      label,
      args: ['--import', 'tsx', 'gateway/main.ts'],
      env,
      remoteSubgraphs: 'SUBGRAPH_URLS' in env,
      project: true,
      ...extra,
    });
    const baselineSpecs = (dir: string): Spec[] => [
      projectServer('project-baseline', 'project gateway (distributed), baseline', { SUBGRAPH_URLS: urls, ...options.baselineEnv }, { cwd: dir }),
      projectServer(
        'one-process-pglite-baseline',
        'npm start (PGlite), baseline',
        { DATA_DIR: copyOfTemplate('one-process-baseline'), ...options.baselineEnv },
        { cwd: dir },
      ),
      ...(unsharedWanted
        ? [
            projectServer(
              'project-baseline-unshared',
              'project gateway (distributed), baseline, nothing shared',
              { SUBGRAPH_URLS: urls, ...PROJECT_UNSHARED_ENV, ...options.baselineEnv },
              { unshared: true, cwd: dir },
            ),
          ]
        : []),
    ];
    const specs: Spec[] = [
      projectServer('project', 'project gateway (distributed)', { SUBGRAPH_URLS: urls, ...options.treeEnv }),
      ...(unsharedWanted
        ? [
            projectServer(
              'project-unshared',
              'project gateway (distributed), nothing shared',
              { SUBGRAPH_URLS: urls, ...PROJECT_UNSHARED_ENV, ...options.treeEnv },
              { unshared: true },
            ),
          ]
        : []),
      ...(options.baseline ? baselineSpecs(options.baseline) : await peerSpecs()),
      projectServer('one-process-pglite', 'npm start (PGlite)', { DATA_DIR: copyOfTemplate('one-process'), ...options.treeEnv }),
      ...(postgres
        ? [
            projectServer('one-process-postgres', 'npm start (PostgreSQL)', {
              DATABASE_URL: postgres.url,
              DATABASE_SCHEMA: postgres.schema,
              ...options.treeEnv,
            }),
          ]
        : []),
    ];
    const unknown = [...(options.targets ?? [])].filter((key) => !specs.some((s) => s.key === key));
    if (unknown.length > 0) throw new Error(`--targets: no target ${unknown.join(', ')} (${specs.map((s) => s.key).join(', ')})`);
    const targets: Target[] = await Promise.all(
      specs
        .filter((s) => !options.targets || options.targets.has(s.key))
        .map(async ({ key, label, args, env: extra, cwd, unshared, ...shape }) => ({
          key,
          label,
          server: await start(key, args, extra, cwd),
          unshared: unshared === true,
          ...shape,
        })),
    );
    load = new LoadGenerator(root);
    const processes: Record<string, CpuMeter> = Object.fromEntries(subgraphNames.map((name, i) => [name, subgraphs[i]!.child.pid!]));
    processes['load generator'] = load.pid;
    // PostgreSQL's own CPU when it runs on this machine (its processes are read from /proc), and the machine's.
    if (postgres && isLocal(postgres.url) && postgresCpuMs() !== null) processes['database'] = () => postgresCpuMs() ?? Number.NaN;
    processes['machine'] = machineCpuMs;

    /** The processes that serve a target's requests: its gateway and, in distributed mode, the subgraphs. */
    const serving = (target: Target) => [target.server.child.pid!, ...(target.remoteSubgraphs ? subgraphs.map((s) => s.child.pid!) : [])];
    const wanted = (w: WorkloadName) => !options.only || options.only.has(w);
    const endpoints: Endpoint[] = targets.map((t) => ({ name: t.label, url: t.server.url }));
    const projectEndpoints = endpoints.filter((_, i) => targets[i]!.project);
    const mix = mixRequests(options.bookings);
    const pairs = restPairs();
    log('checking that every gateway answers the same data');
    const checked: Record<string, string> = {};
    // Every target answers alike, the nothing-shared ones included (they are among the endpoints).
    if (wanted('federated') || wanted('federated-unshared')) {
      checked['federated'] = checked['federated-unshared'] = `${await verifySameData(endpoints, [graphql(FEDERATED_QUERY)])} operation`;
    }
    if (wanted('shallow') || wanted('shallow-unshared')) {
      checked['shallow'] = checked['shallow-unshared'] = `${await verifySameData(endpoints, [graphql(SHALLOW_QUERY)])} operation`;
    }
    if (wanted('mix')) checked['mix'] = `${await verifySameData(endpoints, mix)} operations`;
    if (wanted('rest')) checked['rest'] = `${await verifyRest(projectEndpoints, pairs)} answers, each REST body equal to its operation's GraphQL data mapped`;
    let pageStarts: (string | null)[] = [null];
    if (wanted('paging')) {
      const walk = await verifyPaging(endpoints);
      checked['paging'] = `a whole walk of ${walk.rows.toLocaleString('en-US')} rows`;
      pageStarts = walk.pageStarts;
    }

    // The targets with nothing shared run the nothing-shared workloads only; every other workload runs on the rest.
    const shared = targets.filter((t) => !t.unshared);
    const everyTarget = (plan: Cell['plan']) => shared.map((target) => ({ target, variant: 'graphql', plan }));
    const everyUnshared = (plan: Cell['plan']) => targets.filter((t) => t.unshared).map((target) => ({ target, variant: 'graphql', plan }));
    const pagesPerRound = Math.max(1, Math.round(options.pagingRows / PAGE_SIZE / options.rounds));
    const conns = options.connections;
    const timed: RunSettings = { connections: conns, seconds: options.seconds };
    const warm: RunSettings = { connections: conns, seconds: options.warmup };
    const workloads: {
      name: WorkloadName;
      title: string;
      cells: () => Cell[];
      /** How a target is warmed up, and how much a round sends given what its warm-up did. */
      warmup?: RunSettings;
      round?: (warmup: LoadResult) => RunSettings;
    }[] = [
      {
        name: 'federated',
        title: 'federated query: bookings(first: 20) with machines, bill, deliveryForecast',
        cells: () => everyTarget({ kind: 'cycle', requests: [graphql(FEDERATED_QUERY)] }),
      },
      { name: 'shallow', title: 'shallow query: fleetSummary', cells: () => everyTarget({ kind: 'cycle', requests: [graphql(SHALLOW_QUERY)] }) },
      {
        name: 'federated-unshared',
        title: 'federated query with nothing shared between requests (no collapsing, no fetch cache; the peer without deduplication)',
        cells: () => everyUnshared({ kind: 'cycle', requests: [graphql(FEDERATED_QUERY)] }),
      },
      {
        name: 'shallow-unshared',
        title: 'shallow query (fleetSummary) with nothing shared between requests',
        cells: () => everyUnshared({ kind: 'cycle', requests: [graphql(SHALLOW_QUERY)] }),
      },
      { name: 'mix', title: `mix of ${mix.length} distinct queries over four subgraphs`, cells: () => everyTarget({ kind: 'cycle', requests: mix }) },
      {
        name: 'rest',
        title: 'REST GET /rental/bookings?limit=20 and /rental/fleet/summary in turn, against the same operations as GraphQL POST',
        cells: () =>
          shared
            .filter((t) => t.project)
            .flatMap((target) => [
              { target, variant: 'rest', plan: { kind: 'cycle' as const, requests: pairs.map((p) => p.rest) } },
              { target, variant: 'graphql', plan: { kind: 'cycle' as const, requests: pairs.map((p) => p.graphql) } },
            ]),
      },
      {
        name: 'paging',
        title: `paging through the ledger, ${PAGE_SIZE} rows a page: ${options.pagingRows.toLocaleString('en-US')} rows per target (${options.bookings.toLocaleString('en-US')} bookings walked again and again)`,
        // Each connection starts at its own page, spread over the ledger, so that concurrent requests differ.
        cells: () =>
          everyTarget({
            kind: 'paging',
            query: PAGING_QUERY,
            starts: Array.from({ length: conns }, (_, i) => pageStarts[Math.floor((i * pageStarts.length) / conns)]!),
          }),
        round: () => ({ connections: conns, amount: pagesPerRound }),
      },
      {
        name: 'mutations',
        title: 'mutation mix: createQuote, confirmBooking, completeBooking in turn, one machine per chain',
        // Whole chains only (a stop in the middle would leave quotes holding machines): the warm-up is one chain per
        // connection, a round as many chains per connection as the warm-up's pace fits in --seconds.
        warmup: { connections: conns, amount: 3 * conns },
        round: (w) => ({ connections: conns, amount: 3 * conns * Math.max(1, Math.round(((w.ok / w.seconds) * options.seconds) / (3 * conns))) }),
        cells: () =>
          shared.map((target, i) => ({
            target,
            variant: 'graphql',
            plan: { kind: 'mutations' as const, poolKey: target.key, pool: poolOf(i).slice(1) },
          })),
      },
    ];

    const results: WorkloadResult[] = [];
    for (const workload of workloads) {
      if (!wanted(workload.name)) continue;
      if (workload.name === 'mutations') {
        log('checking that every gateway answers quote, confirm and complete alike');
        await verifyMutations(shared.map((t, i) => ({ name: t.label, url: t.server.url, machine: poolOf(i)[0]! })));
        checked['mutations'] = 'a quote, confirm and complete each, ids left out';
      }
      const cells = workload.cells();
      const pids = [...new Set(cells.map((c) => c.target.server.child.pid!)), ...subgraphs.map((s) => s.child.pid!)];
      const peaksReset = resetPeaks(pids);
      loadAverages.push(loadavg()[0]!);
      log(`${workload.name}: warm-up per target`);
      const warmups = new Map<Cell, LoadResult>();
      for (const cell of cells) warmups.set(cell, (await measureRound(load, cell, workload.warmup ?? warm, {}, serving(cell.target))).load);
      const rounds = new Map<Cell, Round[]>(cells.map((cell) => [cell, []]));
      for (let r = 1; r <= options.rounds; r++) {
        log(`${workload.name}: round ${r} of ${options.rounds} (load average ${loadavg()[0]!.toFixed(2)})`);
        for (const cell of inRoundOrder(cells, r)) {
          const settings = workload.round?.(warmups.get(cell)!) ?? timed;
          rounds.get(cell)!.push(await measureRound(load, cell, settings, { ...processes, gateway: cell.target.server.child.pid! }, serving(cell.target)));
        }
      }
      const cellResults: CellResult[] = cells.map((cell) => summarize(cell, rounds.get(cell)!, subgraphNames, peakRssMiB(cell.target.server.child.pid!)));
      // REST against GraphQL once more, both sent at the same time to each project target (half the connections
      // each), so that their tails meet the same moments of the machine.
      const paired: PairedResult[] = [];
      if (workload.name === 'rest') {
        const projectTargets = shared.filter((t) => t.project);
        const runs = new Map(projectTargets.map((t) => [t, { rest: [] as LoadResult[], graphql: [] as LoadResult[] }]));
        const each = { connections: Math.max(1, Math.floor(conns / 2)), seconds: options.seconds };
        for (let r = 1; r <= options.rounds; r++) {
          log(`rest: REST and GraphQL at once, round ${r} of ${options.rounds}`);
          for (const target of inRoundOrder(projectTargets, r)) {
            const [rest, post] = await measurePaired(
              load,
              target,
              [
                { kind: 'cycle', requests: pairs.map((p) => p.rest) },
                { kind: 'cycle', requests: pairs.map((p) => p.graphql) },
              ],
              each,
              serving(target),
            );
            runs.get(target)!.rest.push(rest);
            runs.get(target)!.graphql.push(post);
          }
        }
        for (const [target, { rest, graphql: post }] of runs) {
          paired.push({
            target: target.key,
            label: target.label,
            connectionsEach: each.connections,
            seconds: each.seconds * options.rounds,
            rest: pairedSide(rest),
            graphql: pairedSide(post),
          });
        }
      }
      results.push({
        name: workload.name,
        title: workload.title,
        verified: checked[workload.name] ?? '',
        peakRssPerWorkload: peaksReset,
        cells: cellResults,
        ...(paired.length > 0 ? { paired } : {}),
      });
      printResults([results[results.length - 1]!]);
    }
    loadAverages.push(loadavg()[0]!);

    const profiles: { target: string; summary: ProfileSummary }[] = [];
    // A baseline run compares two trees side by side; profiles are for a run of one.
    if (options.profileSeconds > 0 && !options.baseline && (options.profileMix ? wanted('mix') : wanted('federated') || wanted('federated-unshared'))) {
      for (const [key, label, args, extra] of [
        ['project', 'project gateway (distributed)', ['gateway/main.ts'], { SUBGRAPH_URLS: urls }],
        ['project-unshared', 'project gateway (distributed), nothing shared', ['gateway/main.ts'], { SUBGRAPH_URLS: urls, ...PROJECT_UNSHARED_ENV }],
        ['stock', 'stock @apollo/gateway', ['bench/peers/apollo-stock.ts'], { SUPERGRAPH_FILE: supergraphFile }],
        ['one-process-pglite', 'npm start (PGlite)', ['gateway/main.ts'], { DATA_DIR: copyOfTemplate('one-process-profiled') }],
      ] as const) {
        if (options.targets && !options.targets.has(key)) continue;
        if (key === 'project-unshared' && !unsharedWanted) continue;
        log(`profiling the ${label} on the ${options.profileMix ? 'mix' : 'federated query'} for ${options.profileSeconds} s`);
        const dir = join(tmp, `profile-${key}`);
        const server = await start(`${key}-profiled`, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--import', 'tsx', ...args], extra);
        const target: Target = {
          key,
          label,
          server,
          remoteSubgraphs: key !== 'one-process-pglite',
          project: key !== 'stock',
          unshared: key === 'project-unshared',
        };
        const cell: Cell = { target, variant: 'graphql', plan: { kind: 'cycle', requests: options.profileMix ? mix : [graphql(FEDERATED_QUERY)] } };
        await measureRound(load, cell, { connections: options.connections, seconds: 2 }, {}, serving(target));
        // Only the samples of the measured stretch count: not the start, the warm-up or the shutdown.
        const fromUs = Number(process.hrtime.bigint() / 1000n);
        await measureRound(load, cell, { connections: options.connections, seconds: options.profileSeconds }, {}, serving(target));
        const toUs = Number(process.hrtime.bigint() / 1000n);
        await stopServer(server);
        const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
        if (file) profiles.push({ target: label, summary: summarizeProfile(join(dir, file), root, { fromUs, toUs }) });
        // The whole profile, for a closer look (Chrome DevTools, speedscope), when asked for.
        if (file && env['BENCH_PROFILE_DIR']) cpSync(join(dir, file), join(env['BENCH_PROFILE_DIR'], `${key}.cpuprofile`));
      }
    }

    const bench: BenchResults = {
      date: started.toISOString(),
      seconds: Math.round((Date.now() - started.getTime()) / 1000),
      options: {
        ...options,
        only: options.only ? [...options.only] : null,
        targets: options.targets ? [...options.targets] : null,
        out: options.out ? relative(root, options.out) : null,
      },
      database: postgres ? 'PostgreSQL (subgraph processes and npm start on PostgreSQL share one schema)' : 'PGlite (a data directory per process)',
      loadAverages,
      targets: targets.map((t) => ({ key: t.key, label: t.label })),
      workloads: results,
      profiles,
    };
    printResults(results, bench);
    if (options.out) {
      const written = writeResults(bench, options.out, root);
      log(`written: ${written.join(', ')}`);
    }
  } finally {
    load?.close();
    await Promise.all(servers.map(stopServer));
    if (postgres) await dropSchema(postgres.url, postgres.schema).catch((e: unknown) => log(`could not drop schema ${postgres!.schema}: ${String(e)}`));
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** The targets of round `r` (from 1): forwards in odd rounds, backwards in even ones. */
function inRoundOrder<T>(list: readonly T[], r: number): readonly T[] {
  return r % 2 === 1 ? list : [...list].reverse();
}

/** Machines per target for the mutation mix (each target quotes only its own). */
const POOL_PER_TARGET = 150;

function poolOf(index: number): string[] {
  return Array.from({ length: POOL_PER_TARGET }, (_, k) => machineId(POOL_FIRST_MACHINE + index * POOL_PER_TARGET + k));
}

/**
 * The environment of every server: as `npm start` runs, with the project's own settings left at their defaults,
 * and this run's PRINCIPAL_SECRET, shared by the subgraph servers and every gateway that calls them.
 */
function serverEnv(principalSecret: string): Record<string, string> {
  const setting =
    /^(PORT|HOST|DATA_DIR|DATABASE_|QUOTE_|API_KEYS|LOG_LEVEL|BODY_LIMIT|BONDING_|FEATURES_|REDIS_URL|FLEET_|OPTIMIZATION_|SUBGRAPH_|PEER_|TRACKING_|WS_|HTTP_|GRAPHQL_|SUPERGRAPH_)/;
  const base = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && !setting.test(e[0])));
  return {
    ...base,
    NODE_ENV: env['NODE_ENV'] ?? 'production',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    APOLLO_TELEMETRY_DISABLED: 'true',
    PRINCIPAL_SECRET: principalSecret,
  };
}

/** The database server runs on this machine (its processes can be measured here). */
function isLocal(url: string): boolean {
  const host = new URL(url).hostname;
  return host === '127.0.0.1' || host === 'localhost' || host === '[::1]' || host === '';
}

async function postgresUrl(): Promise<string | null> {
  const url = env['BENCH_DATABASE_URL'] ?? LOCAL_POSTGRES;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return url;
  } catch (error) {
    if (env['BENCH_DATABASE_URL']) throw new Error(`BENCH_DATABASE_URL does not answer: ${String(error)}`, { cause: error });
    return null;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}

function log(message: string): void {
  console.log(`[gateway bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
}
