import type { Clock } from '../../platform/clock.js';
import { domainError } from '../../platform/errors.js';
import { ownerOf, viewerOf } from '../../platform/ownership.js';
import { isOperator, type Principal } from '../../platform/principal.js';
import { currentTrace } from '../../platform/state-trace.js';
import { invalidInput } from '../../platform/validate.js';
import { berthInstance, convoyInstance, qubitsFor, regular3Instance, type Instance } from './instances.js';
import type { StartRunInput } from './inputs.js';
import type { JobResult } from './job.js';
import { WorkerPool } from './runner.js';
import { BACKEND } from './statevector.js';
import type { FleetClockRecord, RunRecord, TrackPointRecord, VesselRecord } from './records.js';
import type { OptimizationStore } from './store.js';
import { verifyFleet, type Verification } from './verify.js';

export interface RunLimits {
  maxQubits: number;
  /** Runs in progress at once, across every tenant and instance. */
  maxConcurrentRuns: number;
  /** Runs in progress at once of one tenant (operators are not capped by it): no tenant holds every slot. */
  maxConcurrentRunsPerTenant: number;
  maxEstimatedSeconds: number;
}

/**
 * Estimated compute seconds of a run on one core: each optimizer evaluation simulates `depth` layers,
 * a layer costing about 6 ns per amplitude and qubit (measured: about 1.6 s for one layer at 24 qubits on
 * a busy core), plus the cost table and the final state. Deliberately pessimistic: it only refuses runs.
 */
function estimateSeconds(qubits: number, depth: number, evaluations: number): number {
  const amplitudes = 2 ** qubits;
  const layer = amplitudes * qubits * 6e-9;
  return (evaluations + 1) * depth * layer + amplitudes * 1e-7;
}

interface Pending {
  cancel(): Promise<void>;
  done: Promise<void>;
}

/*
 * The optimization rules: which quantum runs may start (qubits, estimated time, global and per-tenant
 * caps), running them in worker threads and recording their outcome, and proofs of the fleet's safety
 * constraints. Resolvers call OptimizationService, which holds both and the fleet and run reads; it
 * reads and writes through the store (subgraphs/optimization/store.ts), which holds the SQL.
 */

/** A fleet safety proof as of one fleet tick. */
type TickVerification = Verification & { tick: number; timestamp: string };

/** Starts runs in worker threads, records their outcome, and stops them when the service stops. */
class RunService {
  private readonly pending = new Map<string, Pending>();
  private readonly pool = new WorkerPool();

  constructor(
    private readonly store: OptimizationStore,
    private readonly clock: Clock,
    readonly limits: RunLimits,
    private readonly onFault: (error: unknown) => void = () => undefined,
  ) {}

  /** Starts a run for `principal`, whose tenant owns it. */
  async start(input: StartRunInput, principal: Principal): Promise<RunRecord> {
    const qubits = qubitsFor(input.problem, input.size);
    if (qubits > this.limits.maxQubits) {
      throw invalidInput([{ field: 'input.size', message: `needs ${qubits} qubits; at most ${this.limits.maxQubits} are simulated` }]);
    }
    const estimate = estimateSeconds(qubits, input.depth, input.maxEvaluations);
    if (estimate > this.limits.maxEstimatedSeconds) {
      throw invalidInput([
        {
          field: 'input.maxEvaluations',
          message: `the run is estimated at ${Math.round(estimate)} s of compute (${qubits} qubits, depth ${input.depth}, ${input.maxEvaluations} evaluations), over the limit of ${this.limits.maxEstimatedSeconds} s: use fewer qubits, a lower depth or fewer evaluations`,
        },
      ]);
    }
    let instance: Instance;
    let fleetTick: number | null = null;
    if (input.problem === 'REGULAR3_MAXCUT') {
      instance = regular3Instance(input.size, input.seed);
    } else {
      const snapshot = await this.store.snapshot();
      fleetTick = snapshot.clock.tick;
      if (snapshot.vessels.length < input.size) {
        throw invalidInput([{ field: 'input.size', message: `the fleet has ${snapshot.vessels.length} vessels` }]);
      }
      instance = input.problem === 'CONVOY_MAXCUT' ? convoyInstance(snapshot.vessels, input.size) : berthInstance(snapshot.vessels, input.size);
    }
    const run = await this.store.insertRun(
      {
        problem: input.problem,
        size: input.size,
        qubits,
        depth: input.depth,
        shots: input.shots,
        seed: input.seed,
        maxEvaluations: input.maxEvaluations,
        refineTop: input.refineTop,
        fleetTick,
        instance: { description: instance.description, variables: instance.variables, edges: instance.edges },
        backend: BACKEND.name,
      },
      ownerOf(principal),
      { global: this.limits.maxConcurrentRuns, tenant: isOperator(principal) ? null : this.limits.maxConcurrentRunsPerTenant },
      this.clock.now(),
    );
    if ('full' in run) {
      throw domainError(
        'RATE_LIMITED',
        run.full === 'global'
          ? `${this.limits.maxConcurrentRuns} quantum runs are in progress, the most allowed at once; start this one when one of them has completed`
          : `Tenant ${principal.tenant} has ${this.limits.maxConcurrentRunsPerTenant} quantum runs in progress, the most one tenant may have at once; start this one when one of them has completed`,
      );
    }
    this.launch(run, instance, input);
    return run;
  }

  private launch(run: RunRecord, instance: Instance, input: StartRunInput): void {
    const t0 = performance.now();
    const job = this.pool.run(instance.problem, {
      depth: input.depth,
      shots: input.shots,
      seed: input.seed,
      maxEvaluations: input.maxEvaluations,
      refineTop: input.refineTop,
    });
    const finish = async (outcome: { result: JobResult } | { error: unknown }) => {
      try {
        if ('result' in outcome) await this.store.completeRun(run.id, outcome.result, this.clock.now());
        else {
          const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
          await this.store.failRun(run.id, message, Math.round(performance.now() - t0), this.clock.now());
        }
      } catch (error) {
        this.onFault(error);
      }
    };
    const done = job.result.then(
      (result) => finish({ result }),
      (error: unknown) => finish({ error }),
    );
    this.pending.set(run.id, { cancel: () => job.cancel(), done });
    void done.finally(() => this.pending.delete(run.id));
  }

  /** Stops every run in progress; each is recorded as failed. */
  async close(): Promise<void> {
    const pending = [...this.pending.values()];
    await Promise.all(pending.map((p) => p.cancel()));
    await Promise.all(pending.map((p) => p.done));
    await this.pool.close();
  }
}

/** Proofs of the fleet's separation constraint (SMT, subgraphs/optimization/verify.ts), one per fleet tick and threshold. */
class SafetyService {
  /** A proof is a function of the fleet tick and the threshold: the last few are kept. */
  private readonly proofs = new Map<string, Promise<TickVerification>>();
  private loaded = false;

  constructor(private readonly store: OptimizationStore) {}

  async verify(minSeparationM: number): Promise<TickVerification> {
    const { clock: fleetClock, vessels } = await this.store.snapshot();
    const key = `${fleetClock.tick}|${minSeparationM}`;
    let proof = this.proofs.get(key);
    if (!proof) {
      proof = verifyFleet(vessels, minSeparationM).then((v) => {
        this.loaded = true;
        return { ...v, tick: fleetClock.tick, timestamp: fleetClock.updatedAt };
      });
      proof.catch(() => this.proofs.delete(key));
      this.proofs.set(key, proof);
      while (this.proofs.size > 8) this.proofs.delete(this.proofs.keys().next().value!);
    }
    return proof;
  }

  /** Whether the solver has been loaded (by a first proof). */
  solverLoaded(): boolean {
    return this.loaded;
  }
}

export interface OptimizationServiceOptions {
  limits: RunLimits;
  /** How often the fleet moves (FLEET_TICK_MS), as the status reports it. */
  tickIntervalMs: number;
  /** Whether the database answers (the subgraph's readiness). */
  databaseAnswers: () => Promise<boolean>;
}

/** The optimization subgraph's operations: quantum runs, safety proofs, and the fleet and run reads. */
export class OptimizationService {
  readonly limits: RunLimits;
  readonly tickIntervalMs: number;
  private readonly runs: RunService;
  private readonly safety: SafetyService;
  private readonly databaseAnswers: () => Promise<boolean>;

  constructor(
    private readonly store: OptimizationStore,
    clock: Clock,
    options: OptimizationServiceOptions,
  ) {
    this.limits = options.limits;
    this.tickIntervalMs = options.tickIntervalMs;
    this.databaseAnswers = options.databaseAnswers;
    this.runs = new RunService(store, clock, options.limits);
    // The solver's WebAssembly (a few hundred ms to seconds of CPU) is compiled on the first proof, not at
    // start: processes and tests that never verify do not pay for it.
    this.safety = new SafetyService(store);
  }

  /** Whether the database answers, the fleet's tick (0 while it does not), and whether the solver is loaded. */
  async health(): Promise<{ database: boolean; fleetTick: number; solverLoaded: boolean }> {
    // Whether the database answers now, and the solver loaded in this process: no event says when either changes.
    currentTrace()?.refuse('health is a check made now');
    const database = await this.databaseAnswers();
    const clock = database ? await this.store.fleetClock() : null;
    return { database, fleetTick: clock?.tick ?? 0, solverLoaded: this.safety.solverLoaded() };
  }

  /** The fleet's clock and the runs by status the principal may count (its tenant's; every tenant's for an operator). */
  async status(principal: Principal): Promise<{ clock: FleetClockRecord; runs: { total: number; running: number; completed: number; failed: number } }> {
    const [clock, runs] = await Promise.all([this.store.fleetClock(), this.store.runCounts(viewerOf(principal))]);
    return { clock, runs };
  }

  /** Starts a run for `principal`, whose tenant owns it. */
  start(input: StartRunInput, principal: Principal): Promise<RunRecord> {
    return this.runs.start(input, principal);
  }

  /** The separation proof of the fleet's current tick. */
  verify(minSeparationM: number): Promise<TickVerification> {
    return this.safety.verify(minSeparationM);
  }

  snapshot(): Promise<{ clock: FleetClockRecord; vessels: VesselRecord[] }> {
    return this.store.snapshot();
  }

  vesselsByMmsi(mmsis: readonly string[]): Promise<VesselRecord[]> {
    return this.store.vesselsByMmsi(mmsis);
  }

  /** A vessel's last `last` positions. */
  track(mmsi: string, last: number): Promise<TrackPointRecord[]> {
    return this.store.track(mmsi, last);
  }

  /** The runs among `ids` the principal may see (another tenant's are left out, as unknown ids are). */
  runsByIds(ids: readonly string[], principal: Principal): Promise<RunRecord[]> {
    return this.store.runsByIds(ids, viewerOf(principal));
  }

  /** The principal's runs, newest first, `first` of them after (older than) the run with sequence number `beforeSeq`. */
  runsPage(first: number, beforeSeq: string | null, principal: Principal): Promise<{ runs: RunRecord[]; hasNext: boolean; total: number }> {
    return this.store.runsPage(first, beforeSeq, viewerOf(principal));
  }

  /** The principal's newest completed run. */
  latestCompleted(principal: Principal): Promise<RunRecord | null> {
    return this.store.latestCompleted(viewerOf(principal));
  }

  eventCursor(): Promise<string> {
    return this.store.eventCursor();
  }

  /** Stops every run in progress; each is recorded as failed. */
  close(): Promise<void> {
    return this.runs.close();
  }
}
