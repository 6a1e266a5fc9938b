import { rentalRoutes } from '../../subgraphs/rental/rest.js';
import { machineId, seededBookingId } from './seed.js';

/*
 * The operations of `npm run bench -- gateway`, as data the load generator (bench/gateway/load.ts) sends
 * and the check (bench/gateway/verify.ts) compares across gateways.
 */

/** One HTTP request as the load generator sends it. */
export interface RequestSpec {
  method: 'GET' | 'POST';
  path: string;
  body?: string;
}

/**
 * What the load generator sends on each of its connections:
 * - `cycle`: the requests in turn, one shared sequence across connections (concurrent requests differ
 *   whenever the list has more than one);
 * - `paging`: one walker per connection, each starting at its own page (`starts`, spread over the ledger, so
 *   that concurrent requests differ), follows `endCursor` to the last page, then starts again at the first;
 * - `mutations`: quote one machine of the pool, confirm the quote, complete the booking; then again.
 */
export type LoadPlan =
  | { kind: 'cycle'; requests: RequestSpec[] }
  | { kind: 'paging'; query: string; starts: (string | null)[] }
  | { kind: 'mutations'; pool: string[]; poolKey: string };

export function graphql(query: string, variables?: Record<string, unknown>): RequestSpec {
  return { method: 'POST', path: '/graphql', body: JSON.stringify(variables ? { query, variables } : { query }) };
}

/** Operations per batch in the batched workload. */
export const BATCH_SIZE = 10;

/** One POST carrying these operations as a batch (a JSON array of their bodies). */
export function batchOf(requests: readonly RequestSpec[]): RequestSpec {
  return { method: 'POST', path: '/graphql', body: `[${requests.map((r) => r.body!).join(',')}]` };
}

/** The federated query: a ledger page with each booking's machines (rental), bill and delivery forecast (prediction). */
export const FEDERATED_QUERY = `query Ledger { bookings(first: 20) { totalCount pageInfo { hasNextPage endCursor }
  edges { cursor node { id status customerName startTime durationHours location { id name }
    machines { id name category hourlyRate depot { id } }
    bill { currency quotedAmount overtimeAmount finalAmount closed }
    deliveryForecast { q10Minutes q50Minutes q90Minutes arrivalQ50 } } } } }`;

/** The shallow query: one root field of one subgraph. */
export const SHALLOW_QUERY = 'query Fleet { fleetSummary { available reserved inUse total utilization surgeMultiplier } }';

/** A ledger page of 100 as a partner's export walks it. */
export const PAGE_SIZE = 100;
export const PAGING_QUERY = `query LedgerPage($after: String) { bookings(first: ${PAGE_SIZE}, after: $after) {
  pageInfo { hasNextPage endCursor }
  edges { node { id status customerName startTime durationHours machines { id } bill { quotedAmount finalAmount closed } } } } }`;

export const QUOTE_MUTATION = `mutation Quote($input: CreateQuoteInput!) { createQuote(input: $input) {
  id status machines { id } location { id } durationHours currency } }`;
export const CONFIRM_MUTATION = `mutation Confirm($input: ConfirmBookingInput!) { confirmBooking(input: $input) {
  id status customerName machines { id } } }`;
export const COMPLETE_MUTATION = `mutation Complete($id: ID!) { completeBooking(bookingId: $id) {
  id status machines { id } bill { currency closed } } }`;

const BOOKING_DETAIL = `query BookingDetail($id: ID!) { booking(id: $id) { id status customerName location { id }
  machines { id name } bill { finalAmount closed } deliveryForecast { q50Minutes q90Minutes } } }`;
const MACHINE = 'query Machine($id: ID!) { machine(id: $id) { id name category hourlyRate status depot { id name } } }';
const LEDGER_HEAD = 'query LedgerHead($first: Int!) { bookings(first: $first) { edges { node { id customerName bill { finalAmount } } } } }';
const TRAVEL = `query Travel($input: TravelInput!) { predictTravelTime(input: $input) { q10Minutes q50Minutes q90Minutes modelVersion } }`;
const LOCKER = 'query Locker($input: LockerInput!) { predictLockerDiversion(input: $input) { successProbability modelVersion } }';
const PATHS = `query Paths($paths: [PathInput!]!) { recommendPaths(paths: $paths) { feasible pair { a b jointOutage availability }
  expectedGoodputMbps pathsConsidered pairsEvaluated } }`;

/**
 * The mix: 270 distinct operations over four subgraphs (booking lookups with their forecast, machines,
 * ledger heads of every length from 1 to 30, travel and locker predictions, path recommendations), in a
 * fixed interleaved order, so concurrent requests are never the same request.
 */
export function mixRequests(bookings: number): RequestSpec[] {
  const groups: RequestSpec[][] = [
    Array.from({ length: 100 }, (_, k) => graphql(BOOKING_DETAIL, { id: seededBookingId(1 + ((k * 97) % bookings)) })),
    Array.from({ length: 15 }, (_, k) => graphql(MACHINE, { id: machineId(k + 1) })),
    Array.from({ length: 30 }, (_, k) => graphql(LEDGER_HEAD, { first: k + 1 })),
    Array.from({ length: 60 }, (_, k) => graphql(TRAVEL, { input: travelInput(k) })),
    Array.from({ length: 45 }, (_, k) => graphql(LOCKER, { input: lockerInput(k) })),
    Array.from({ length: 20 }, (_, k) => graphql(PATHS, { paths: paths(k) })),
  ];
  const mixed: RequestSpec[] = [];
  for (let round = 0; groups.some((g) => g.length > 0); round++) {
    for (const group of groups) {
      const next = group.shift();
      if (next) mixed.push(next);
    }
  }
  return mixed;
}

function travelInput(k: number) {
  const hour = (k * 5) % 24;
  const day = k % 7;
  return {
    originDensity: 0.3 + (k % 5) * 0.1,
    destinationDensity: 0.8 - (k % 4) * 0.1,
    distanceKm: 5 + k * 3.5,
    roadType: ['URBAN', 'ARTERIAL', 'MOTORWAY', 'RURAL'][k % 4],
    weather: ['CLEAR', 'RAIN', 'FOG', 'SNOW_ICE'][k % 4],
    traffic: ['FREE_FLOW', 'MODERATE', 'HEAVY', 'CONGESTED'][(k >> 2) % 4],
    publicHoliday: k % 11 === 0,
    peakHour: hour >= 7 && hour <= 9,
    hourSin: Math.sin((2 * Math.PI * hour) / 24),
    hourCos: Math.cos((2 * Math.PI * hour) / 24),
    daySin: Math.sin((2 * Math.PI * day) / 7),
    dayCos: Math.cos((2 * Math.PI * day) / 7),
  };
}

function lockerInput(k: number) {
  const hour = (k * 7) % 24;
  return {
    organType: ['KIDNEY', 'LIVER', 'HEART', 'LUNG'][k % 4],
    lockerDistanceKm: 0.5 + k * 0.8,
    lockerOccupancy: (k % 10) / 10,
    temperatureControlled: k % 2 === 0,
    handoffWindowMin: 30 + k * 9,
    urbanDensity: (k % 9) / 10,
    weatherSeverity: (k % 5) / 10,
    trafficCongestion: (k % 7) / 10,
    hourSin: Math.sin((2 * Math.PI * hour) / 24),
    hourCos: Math.cos((2 * Math.PI * hour) / 24),
  };
}

function paths(k: number) {
  return [
    { id: 'fiber', kind: 'FIBER', latencyMs: 8 + k, lossPct: 0.1, capacityMbps: 900, sharedRisk: ['duct-a'] },
    { id: 'cable', kind: 'CABLE', latencyMs: 14, lossPct: 0.3 + k / 100, capacityMbps: 400, sharedRisk: ['duct-a'] },
    { id: 'lte', kind: 'LTE', latencyMs: 45, lossPct: 1.2, capacityMbps: 60 + k * 5 },
    { id: 'sat', kind: 'SATELLITE', latencyMs: 600, lossPct: 2, capacityMbps: 100 },
  ];
}

/** A REST path of the rental service, and the same operation sent as a GraphQL POST. */
export interface RestPair {
  rest: RequestSpec;
  graphql: RequestSpec;
  /** The REST engine's mapping of the operation's data to the documented body. */
  result(data: unknown): unknown;
}

/** The REST paths for the data of the federated and shallow workloads: the ledger (20) and the fleet summary. */
export function restPairs(): RestPair[] {
  const route = (path: string) => {
    const found = rentalRoutes.find((r) => r.method === 'GET' && r.path === path);
    if (!found) throw new Error(`no rental route GET ${path}`);
    return found;
  };
  const ledger = route('/bookings');
  const summary = route('/fleet/summary');
  return [
    {
      rest: { method: 'GET', path: '/rental/bookings?limit=20' },
      graphql: graphql(ledger.operation, { first: 20, after: null }),
      result: (data) => ledger.result(data),
    },
    { rest: { method: 'GET', path: '/rental/fleet/summary' }, graphql: graphql(summary.operation, {}), result: (data) => summary.result(data) },
  ];
}
