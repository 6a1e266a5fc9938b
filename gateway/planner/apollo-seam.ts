import { createRequire } from 'node:module';
import type { ApolloGateway } from '@apollo/gateway';
import type * as DataRewrites from '@apollo/gateway/dist/dataRewrites.js';
import type * as ExecuteQueryPlanModule from '@apollo/gateway/dist/executeQueryPlan.js';
import type { OperationContext } from '@apollo/gateway/dist/operationContext.js';
import type * as DeepMerge from '@apollo/gateway/dist/utilities/deepMerge.js';
import type * as DataSourceTypes from '@apollo/gateway/dist/datasources/types.js';
import type * as CacheControlHeader from '@apollo/gateway/dist/datasources/parseCacheControlHeader.js';
import type * as ResultShaping from '@apollo/gateway/dist/resultShaping.js';
import type { GatewayGraphQLRequestContext } from '@apollo/server-gateway-interface';

/*
 * Every reach of this project into `@apollo/gateway`'s private parts, in one file, typed by the library's
 * own declarations (its dist/*.d.ts). Each names what it replaces or borrows. The installed version is the
 * one these reaches were written against, or the process refuses to start with a message saying what to
 * revisit (`checkApolloGatewayVersion`); a declaration that changes shape fails at `tsc`.
 */

const require = createRequire(import.meta.url);

/** The @apollo/gateway version the reaches below were written against (package.json pins it exactly). */
export const PINNED_APOLLO_GATEWAY = '2.14.4';

/**
 * Throws when the installed @apollo/gateway is not the pinned one: the plan executor repeats its
 * semantics line for line (gateway/planner/plan-executor.ts), so another version may answer differently.
 */
export function checkApolloGatewayVersion(installed = (require('@apollo/gateway/package.json') as { version: string }).version): void {
  if (installed === PINNED_APOLLO_GATEWAY) return;
  throw new Error(
    `@apollo/gateway ${installed} is installed, but the gateway's plan executor and its seam (gateway/planner/apollo-seam.ts) follow ${PINNED_APOLLO_GATEWAY}: ` +
      `run npm ci, or revisit gateway/planner/plan-executor.ts and result-shaping.ts against the new version and change PINNED_APOLLO_GATEWAY`,
  );
}

export type ExecuteQueryPlan = typeof ExecuteQueryPlanModule.executeQueryPlan;
export type { OperationContext };

/**
 * `@apollo/gateway/dist/executeQueryPlan.js`: `ApolloGateway` calls `executeQueryPlan` through this CommonJS
 * module's exports object on every request, so replacing the export replaces the execution of every plan.
 */
const planModule = require('@apollo/gateway/dist/executeQueryPlan.js') as typeof ExecuteQueryPlanModule;

/** The stock plan execution, as the module had it before `replaceExecuteQueryPlan`. */
export const stockExecuteQueryPlan: ExecuteQueryPlan = planModule.executeQueryPlan;

/** Error paths for a fetch's errors: the gateway's own `generateHydratedPaths`, borrowed. */
export const generateHydratedPaths: typeof ExecuteQueryPlanModule.generateHydratedPaths = planModule.generateHydratedPaths;

/** Replaces the gateway's plan execution (see `planModule`); throws if the seam has moved. */
export function replaceExecuteQueryPlan(execute: ExecuteQueryPlan): void {
  if (typeof stockExecuteQueryPlan !== 'function' || typeof generateHydratedPaths !== 'function') {
    throw new Error('@apollo/gateway no longer exports executeQueryPlan from dist/executeQueryPlan.js: revisit gateway/planner/apollo-seam.ts');
  }
  (planModule as { executeQueryPlan: ExecuteQueryPlan }).executeQueryPlan = execute;
}

/** The gateway's rewrites of representations and answers (`@apollo/gateway/dist/dataRewrites.js`), borrowed as they are. */
export const { applyRewrites, isObjectOfType } = require('@apollo/gateway/dist/dataRewrites.js') as typeof DataRewrites;

/** The gateway's merge of a fetch's answer into the tree (`@apollo/gateway/dist/utilities/deepMerge.js`), borrowed. */
export const { deepMerge } = require('@apollo/gateway/dist/utilities/deepMerge.js') as typeof DeepMerge;

/** How RemoteGraphQLDataSource reads a subgraph's Cache-Control (`dist/datasources/parseCacheControlHeader.js`), borrowed. */
export const { parseCacheControlHeader } = require('@apollo/gateway/dist/datasources/parseCacheControlHeader.js') as typeof CacheControlHeader;

/** The kind of a data-source request made for a client's operation (an enum of dist/datasources/types.js the package does not export). */
export const INCOMING_OPERATION = (require('@apollo/gateway/dist/datasources/types.js') as typeof DataSourceTypes).GraphQLDataSourceRequestKind
  .INCOMING_OPERATION;

/**
 * The stock result shaping (`@apollo/gateway/dist/resultShaping.js`), which gateway/planner/result-shaping.ts
 * replaces: kept as the reference its tests compare against, answer for answer.
 */
export const stockComputeResponse: typeof ResultShaping.computeResponse = (require('@apollo/gateway/dist/resultShaping.js') as typeof ResultShaping)
  .computeResponse;

/**
 * `ApolloGateway`'s private `validateIncomingRequest` (coerces an operation's variables again before
 * planning, only to find errors): wrapped so a request whose variables were already coerced without error
 * skips it (gateway/pipeline/bounded-errors.ts decides which).
 */
export function wrapIncomingRequestValidation(
  gateway: ApolloGateway,
  skip: (requestContext: GatewayGraphQLRequestContext, operationContext: OperationContext) => boolean,
): void {
  type Validate = (requestContext: GatewayGraphQLRequestContext, operationContext: OperationContext) => readonly unknown[];
  const target = gateway as unknown as { validateIncomingRequest: Validate };
  const validate = target.validateIncomingRequest;
  if (typeof validate !== 'function') throw new Error('@apollo/gateway no longer has validateIncomingRequest: revisit gateway/planner/apollo-seam.ts');
  target.validateIncomingRequest = function (this: unknown, requestContext, operationContext) {
    return skip(requestContext, operationContext) ? [] : validate.call(this, requestContext, operationContext);
  };
}
