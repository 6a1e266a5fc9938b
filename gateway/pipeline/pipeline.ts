import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { getOperationAST, GraphQLError, specifiedRules, validate, type DocumentNode, type GraphQLSchema, type OperationDefinitionNode } from 'graphql';
import { statusOf, type ErrorCode } from '../../platform/errors.js';
import type { Principal } from '../../platform/principal.js';
import { MAX_ERRORS, operationNotFound } from './graphql-errors.js';
import { jsonKey } from './json-key.js';
import type { OperationPolicy } from './operation-policy.js';

/*
 * One pipeline behind every door. However an operation comes in (GraphQL over POST or GET, graphql-ws,
 * Server-Sent Events, multipart, a REST route, a subgraph server's own port), it passes the same steps in
 * the same order:
 *
 *   documents -> limits -> validation -> authorization -> rate -> audit -> usage
 *
 * The first two take what a request names (text, an APQ hash, a registered id) to a parsed document within
 * the request limits (`Pipeline.intake`); validation checks it against the schema served and selects the
 * operation; the last four are operation policies (gateway/pipeline/operation-policy.ts), run by whichever
 * execution serves the door (Apollo Server's plugin, the direct execution, a stream's admission).
 *
 * A composition root declares every step: `PipelineSteps` is a record over all of them, so a root cannot
 * forget one, and a step that does not apply to it is declared `notApplied` with the reason (a subgraph
 * server takes only its gateway's signed calls: no trusted documents, no rate charge, no usage). The
 * executions refuse an operation whose context carries no intake of its very text (`intakeGuardPolicy`): a
 * door nobody wired fails closed instead of running unjudged.
 */

/** The steps, in the order every operation passes them. */
export const PIPELINE_STEPS = ['documents', 'limits', 'validation', 'authorization', 'rate', 'audit', 'usage'] as const;
type StepName = (typeof PIPELINE_STEPS)[number];

/** What a request names its operation by, as sent. */
interface NamedDocument {
  query?: unknown;
  extensions?: unknown;
  documentId?: unknown;
  doc_id?: unknown;
}

interface IntakeRequest {
  params: NamedDocument;
  variables: Readonly<Record<string, unknown>> | null | undefined;
  operationName: string | null | undefined;
  principal: Principal;
  /** The client the request names (`apollographql-client-name`); trusted documents are looked up by it. */
  clientName: string | undefined;
}

/** A refusal before anything ran: its catalogue code, HTTP status and message. */
export interface Refusal {
  ok: false;
  code: ErrorCode;
  status: number;
  message: string;
  /** The error as GraphQL answers carry it (a limit's `extensions.limit` included). */
  error: GraphQLError;
}

/** The document step's answer: the text to run, or why not. */
type DocumentResolution = { ok: true; query: string; byId: boolean } | Refusal;

export interface DocumentStep {
  resolve(request: IntakeRequest): DocumentResolution;
}

interface LimitStep {
  /** Parses within the token limit and checks every other limit; the parsed document, or the refusal. */
  check(
    query: string,
    variables: Readonly<Record<string, unknown>> | null | undefined,
    operationName?: string | null,
  ): { document: DocumentNode } | { error: GraphQLError };
}

export interface ValidationStep {
  /** The validation errors of a document against the schema served now (none: valid). */
  validate(schema: GraphQLSchema, document: DocumentNode): readonly GraphQLError[];
}

/** A step a composition root leaves out, and why it does not apply there (docs/operations.md). */
interface NotApplied {
  notApplied: string;
}

export interface PipelineSteps {
  documents: DocumentStep | NotApplied;
  limits: LimitStep;
  validation: ValidationStep;
  authorization: OperationPolicy;
  rate: OperationPolicy | NotApplied;
  audit: OperationPolicy | NotApplied;
  usage: OperationPolicy | NotApplied;
}

/** An operation past the document step and the limits: the text it runs and its parsed document. */
export interface Intake {
  readonly source: string;
  readonly document: DocumentNode;
  /** The request named its document by a hash or an id (a GET of it is cacheable). */
  readonly byId: boolean;
  /** The variables the limits judged (the execution must run these). */
  readonly variables: Readonly<Record<string, unknown>> | null | undefined;
  /** The operation name the limits judged. */
  readonly operationName: string | null | undefined;
}

type IntakeResult = { ok: true; intake: Intake } | Refusal;

export interface Pipeline {
  /** Every step in order, with whether this root applies it (and why not). */
  readonly steps: ReadonlyArray<{ name: StepName; applied: true } | { name: StepName; applied: false; reason: string }>;
  /** Document resolution, then the request limits. */
  intake(request: IntakeRequest): IntakeResult;
  /** Validation against the schema served, and the operation the request selects. */
  validate(
    schema: GraphQLSchema,
    document: DocumentNode,
    operationName: string | null | undefined,
  ): { operation: OperationDefinitionNode } | { errors: GraphQLError[] };
  /** The pipeline's own policies, in order: the intake guard, then authorization, rate, audit and usage. */
  readonly checks: readonly OperationPolicy[];
  /**
   * The authorization step alone: a stream judges a query or mutation with it before its response starts
   * (its status is then the refusal's), and the execution judges it again, with every check, as it runs.
   */
  readonly authorization: OperationPolicy;
  /**
   * What every execution of a query or mutation runs, in order: the execution's own policies (`before`: a
   * turn of the event loop, error shaping), then `checks`. A subscription's admission runs `checks`.
   */
  readonly policies: readonly OperationPolicy[];
}

const applies = <T extends object>(step: T | NotApplied): step is T => !('notApplied' in step);

/** A refusal made from a GraphQL error with a catalogue code. */
export function refusalOf(error: GraphQLError): Refusal {
  const code = error.extensions['code'] as ErrorCode;
  return { ok: false, code, status: statusOf(code), message: error.message, error };
}

export interface PipelinePluginOptions {
  /** Each step of the pipeline, or why it does not apply in this process. */
  steps: PipelineSteps;
  /** What every execution does first, before the steps' checks. @default none */
  before?: readonly OperationPolicy[];
  /** Told of every operation the intake refuses (a document not registered, a request limit): its metrics. */
  onRefusal?: (refusal: Refusal) => void;
}

/** The `pipeline` part: the operation pipeline every door runs (`app.pipeline`), made of the steps listed at the root. */
export const pipelinePlugin = fp(
  async (app: FastifyInstance, options: PipelinePluginOptions) => {
    app.decorate('pipeline', createPipeline(options.steps, options.before ?? [], options.onRefusal));
  },
  { name: 'pipeline', fastify: '5.x' },
);

export function createPipeline(steps: PipelineSteps, before: readonly OperationPolicy[], onRefusal?: (refusal: Refusal) => void): Pipeline {
  const { documents, limits, validation } = steps;
  const refuse = (refusal: Refusal): Refusal => {
    onRefusal?.(refusal);
    return refusal;
  };
  const checks: OperationPolicy[] = [intakeGuardPolicy(), steps.authorization];
  for (const step of [steps.rate, steps.audit, steps.usage]) if (applies(step)) checks.push(step);
  const policies = [...before, ...checks];
  return {
    steps: PIPELINE_STEPS.map((name) => {
      const step = steps[name];
      return applies(step) ? { name, applied: true as const } : { name, applied: false as const, reason: step.notApplied };
    }),
    intake(request) {
      let query: string;
      let byId = false;
      if (applies(documents)) {
        const resolution = documents.resolve(request);
        if (!resolution.ok) return refuse(resolution);
        ({ query, byId } = resolution);
      } else {
        if (typeof request.params.query !== 'string' || request.params.query === '') {
          return refuse(refusalOf(new GraphQLError('The request carries no operation text (`query`)', { extensions: { code: 'BAD_REQUEST' } })));
        }
        query = request.params.query;
      }
      const checked = limits.check(query, request.variables, request.operationName);
      if ('error' in checked) return refuse(refusalOf(checked.error));
      return {
        ok: true,
        intake: { source: query, document: checked.document, byId, variables: request.variables, operationName: request.operationName },
      };
    },
    validate(schema, document, operationName) {
      const errors = validation.validate(schema, document);
      if (errors.length > 0) return { errors: [...errors] };
      const operation = getOperationAST(document, operationName);
      if (!operation) return { errors: [operationNotFound(operationName)] };
      return { operation };
    },
    checks,
    authorization: steps.authorization,
    policies,
  };
}

/**
 * First of the pipeline's policies: the operation an execution is about to judge is the one its door took
 * in (document resolution and the limits ran on this very text, these variables and this operation name).
 * An operation that reached an execution another way, or with other values than were judged, is refused
 * and runs nothing, so a door nobody wired fails closed.
 */
function intakeGuardPolicy(): OperationPolicy {
  return {
    resolved({ source, variables, operationName, context }) {
      if (isIntaken(context.intake, source, variables, operationName)) return;
      throw new GraphQLError(
        'This operation reached execution with other text, variables or operation name than its door judged (document resolution and request limits); it was not run',
        { extensions: { code: 'BAD_REQUEST', http: { status: 400 } } },
      );
    },
  };
}

function isIntaken(
  intake: Intake | undefined,
  source: string,
  variables: Readonly<Record<string, unknown>> | undefined,
  operationName: string | null | undefined,
): boolean {
  if (!intake || intake.source !== source || (intake.operationName ?? null) !== (operationName ?? null)) return false;
  const judged = intake.variables ?? undefined;
  if (judged === variables) return true;
  // The same values in another object (a GET's parameters parsed again, a context copied): compared as JSON.
  const [a, b] = [jsonKey(judged), jsonKey(variables)];
  return a !== null && a === b;
}

/**
 * The validation step: graphql-js's specified rules against the schema served, at most MAX_ERRORS errors,
 * kept per schema and document (a reload's new schema judges every document again). Apollo Server's own
 * pipeline validates its operations with the same rules.
 */
export function graphqlValidation(): ValidationStep {
  const kept = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, readonly GraphQLError[]>>();
  return {
    validate(schema, document) {
      let bySchema = kept.get(schema);
      if (!bySchema) kept.set(schema, (bySchema = new WeakMap()));
      let errors = bySchema.get(document);
      if (!errors) bySchema.set(document, (errors = validate(schema, document, specifiedRules, { maxErrors: MAX_ERRORS })));
      return errors;
    },
  };
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The operation pipeline every door runs. */
    pipeline: Pipeline;
  }
}
