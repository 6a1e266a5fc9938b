import {
  buildASTSchema,
  getNamedType,
  getOperationAST,
  GraphQLError,
  Kind,
  parse,
  print,
  TypeInfo,
  visit,
  visitWithTypeInfo,
  type ConstDirectiveNode,
  type DirectiveNode,
  type DocumentNode,
  type OperationDefinitionNode,
  type GraphQLSchema,
} from 'graphql';
import type { ApolloServerPlugin } from '@apollo/server';
import type { ApolloGateway } from '@apollo/gateway';
import { ANONYMOUS_PRINCIPAL, isOperator, type Principal } from '../platform/principal.js';
import type { GatewayContext } from './context.js';
import { filterOperation, shapeAnswer, type FilteredOperation } from './authorization-filter.js';

/*
 * Who may use what, declared in the subgraph SDLs with the Federation 2 authorization directives and
 * composed into the supergraph: `@requiresScopes(scopes: [["rental:read"]])` (any one inner list, all of
 * its scopes; `[[]]` is a public field) and `@authenticated` (any credential). The gateway reads them
 * from the supergraph and judges every operation before it is planned; `ops:admin` holds every scope.
 * `@apollo/gateway` does not itself support these SECURITY features, so it gets the supergraph without
 * them (`withoutSecurityDirectives`).
 *
 * A query some of whose fields the principal may not use runs without them: they answer `null` with a
 * FORBIDDEN error at their paths while the rest resolves (Apollo Router's default; the gateway's executor
 * is wrapped by `authorizingGateway`). The whole operation is refused instead when nothing of it would
 * remain, when it is a mutation (state changes run as asked or not at all) or a subscription, and for
 * REST routes (a route's answer is its operation's whole answer).
 */

const SECURITY = new Set(['requiresScopes', 'authenticated']);

/** Verdicts kept per document (one per distinct set of scopes that used it). */
const MAX_VERDICTS_PER_DOCUMENT = 64;

export type Verdict = null | { refused: GraphQLError } | { filtered: FilteredOperation };

export interface Requirement {
  authenticated: boolean;
  /** Alternatives, each a set of scopes that must all be held; null when no scope is named. */
  scopes: string[][] | null;
}

export interface Denial {
  /** `Type.field` */
  coordinate: string;
  /** The response path of the field in the operation (no list indices). */
  path: string[];
  requirement: Requirement;
}

export interface Authorizer {
  /** The requirement of every field that declares one, by `Type.field`. */
  readonly rules: ReadonlyMap<string, Requirement>;
  /** The supergraph without its SECURITY features, for the planners (`withoutSecurityDirectives`). */
  readonly plannerSdl: string;
  /** The fields of `document` the principal may not use (empty when it may run the whole operation). */
  denials(document: DocumentNode, principal: Principal): Denial[];
  /** Denials as a GraphQL error: UNAUTHENTICATED for the anonymous principal, FORBIDDEN otherwise. Null when allowed. */
  check(document: DocumentNode, principal: Principal): GraphQLError | null;
  /**
   * What becomes of the operation `operationName` selects: run as it is (`null`), refused whole (an error),
   * or run without its denied fields (a query). Judged once per document and set of scopes.
   */
  judge(document: DocumentNode, operationName: string | null | undefined, principal: Principal): Verdict;
  /** `check` of an operation's text (a REST route's), parsed once. */
  checkOperation(operation: string, principal: Principal): GraphQLError | null;
  /** Every scope an operation's fields name (their first alternatives), for documentation. */
  scopesOf(operation: string): string[];
}

const stringLists = (value: unknown): string[][] | null => {
  if (!Array.isArray(value)) return null;
  return value.map((inner) => (Array.isArray(inner) ? inner.filter((s): s is string => typeof s === 'string') : []));
};

function constValue(node: ConstDirectiveNode | DirectiveNode, name: string): unknown {
  const arg = node.arguments?.find((a) => a.name.value === name);
  if (!arg) return undefined;
  const read = (v: typeof arg.value): unknown => {
    if (v.kind === Kind.LIST) return v.values.map(read);
    if (v.kind === Kind.STRING || v.kind === Kind.ENUM) return v.value;
    return null;
  };
  return read(arg.value);
}

/** The requirements declared in a supergraph, by `Type.field`. */
export function securityRules(supergraphSdl: string): Map<string, Requirement> {
  const rules = new Map<string, Requirement>();
  for (const def of parse(supergraphSdl).definitions) {
    if (def.kind !== Kind.OBJECT_TYPE_DEFINITION && def.kind !== Kind.OBJECT_TYPE_EXTENSION) continue;
    for (const field of def.fields ?? []) {
      const directives = field.directives ?? [];
      const authenticated = directives.some((d) => d.name.value === 'authenticated');
      const scoped = directives.find((d) => d.name.value === 'requiresScopes');
      if (!authenticated && !scoped) continue;
      rules.set(`${def.name.value}.${field.name.value}`, { authenticated, scopes: scoped ? stringLists(constValue(scoped, 'scopes')) : null });
    }
  }
  return rules;
}

/** The supergraph without the SECURITY features (their links, definitions and uses), for `@apollo/gateway`. */
export function withoutSecurityDirectives(supergraphSdl: string): string {
  const securityLink = (d: DirectiveNode) =>
    d.name.value === 'link' && [...SECURITY].some((name) => String(constValue(d, 'url')).includes(`/${name}/`));
  const stripped = visit(parse(supergraphSdl), {
    Directive: (node) => (SECURITY.has(node.name.value) || securityLink(node) ? null : undefined),
    DirectiveDefinition: (node) => (SECURITY.has(node.name.value) ? null : undefined),
    ScalarTypeDefinition: (node) => (node.name.value.startsWith('requiresScopes__') ? null : undefined),
  });
  return print(stripped);
}

export function satisfies(principal: Principal, requirement: Requirement): boolean {
  if (isOperator(principal)) return true;
  if (requirement.authenticated && principal.id === ANONYMOUS_PRINCIPAL.id) return false;
  if (!requirement.scopes) return true;
  return requirement.scopes.some((all) => all.every((scope) => (principal.scopes as readonly string[]).includes(scope)));
}

export function describeRequirement(r: Requirement): string {
  if (!r.scopes) return 'a credential';
  return r.scopes.map((all) => (all.length === 0 ? 'nothing' : all.join(' and '))).join(', or ');
}

/**
 * Judges every operation once it is parsed, validated and its operation chosen, before it is planned or
 * anything runs: GraphQL over HTTP and WebSocket queries, and the REST routes (they run operations
 * through the same server). A denied operation runs nothing and answers 403 (401 without a credential).
 */
export function authorizationPlugin(authorizer: Authorizer): ApolloServerPlugin<GatewayContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ document, operationName, contextValue }) {
          const verdict = authorizer.judge(document, operationName, contextValue.principal);
          if (verdict && 'refused' in verdict) throw verdict.refused;
        },
      };
    },
  };
}

export function createAuthorizer(supergraphSdl: string): Authorizer {
  const rules = securityRules(supergraphSdl);
  const plannerSdl = withoutSecurityDirectives(supergraphSdl);
  const schema: GraphQLSchema = buildASTSchema(parse(plannerSdl), { assumeValidSDL: true });

  const denials = (document: DocumentNode, principal: Principal): Denial[] => {
    if (isOperator(principal)) return [];
    const found: Denial[] = [];
    const typeInfo = new TypeInfo(schema);
    const path: string[] = [];
    visit(
      document,
      visitWithTypeInfo(typeInfo, {
        OperationDefinition: { enter: () => void path.splice(0) },
        FragmentDefinition: { enter: (node) => void path.splice(0, path.length, `...${node.name.value}`) },
        Field: {
          enter(node) {
            path.push(node.alias?.value ?? node.name.value);
            const parent = typeInfo.getParentType();
            if (!parent) return;
            const coordinate = `${getNamedType(parent).name}.${node.name.value}`;
            const requirement = rules.get(coordinate);
            if (requirement && !satisfies(principal, requirement)) found.push({ coordinate, path: [...path], requirement });
          },
          leave() {
            path.pop();
          },
        },
      }),
    );
    return found;
  };

  const parsed = new Map<string, DocumentNode>();
  const check = (document: DocumentNode, principal: Principal): GraphQLError | null => refusal(denials(document, principal), principal);
  const refusal = (denied: Denial[], principal: Principal): GraphQLError | null => {
    if (denied.length === 0) return null;
    const anonymous = principal.id === ANONYMOUS_PRINCIPAL.id;
    const list = denied.map((d) => `${d.path.join('.')} (${d.coordinate}) needs ${describeRequirement(d.requirement)}`).join('; ');
    return new GraphQLError(
      anonymous ? `This operation needs a credential: ${list}` : `Principal ${principal.id} may not run this operation: ${list}`,
      {
        extensions: {
          code: anonymous ? 'UNAUTHENTICATED' : 'FORBIDDEN',
          denied: denied.map((d) => ({ path: d.path, field: d.coordinate, requires: d.requirement.scopes ?? 'authenticated' })),
          http: { status: anonymous ? 401 : 403 },
        },
      },
    );
  };

  const documentOf = (operation: string) => {
    let document = parsed.get(operation);
    if (!document) parsed.set(operation, (document = parse(operation)));
    return document;
  };
  /** A principal with no scope at all is denied every field that names one: their first alternatives. */
  const nobody: Principal = { id: 'documentation', tenant: 'documentation', scopes: [] };

  // Judgements depend on the document, the operation and what the principal holds, not on who it is: the
  // whole-operation refusal (REST) and the verdict (GraphQL) of each are worked out once.
  interface Judgement {
    refused: GraphQLError | null;
    verdict: Verdict;
  }
  const judgements = new WeakMap<DocumentNode, Map<string, Judgement>>();
  const judgement = (document: DocumentNode, operationName: string | null | undefined, principal: Principal): Judgement => {
    const holds = isOperator(principal) ? 'ops:admin' : principal.id === ANONYMOUS_PRINCIPAL.id ? '' : [...principal.scopes].sort().join(' ');
    const key = `${operationName ?? ''}\n${holds}`;
    let byKey = judgements.get(document);
    if (!byKey) judgements.set(document, (byKey = new Map()));
    const known = byKey.get(key);
    if (known) return known;
    if (byKey.size >= MAX_VERDICTS_PER_DOCUMENT) byKey.clear();
    const judged = judgeOnce(document, operationName, principal);
    byKey.set(key, judged);
    return judged;
  };
  const judgeOnce = (document: DocumentNode, operationName: string | null | undefined, principal: Principal): Judgement => {
    const operation = getOperationAST(document, operationName);
    if (!operation) return { refused: null, verdict: null };
    const only: DocumentNode = { ...document, definitions: document.definitions.filter((d) => d.kind !== Kind.OPERATION_DEFINITION || d === operation) };
    const refused = refusal(denials(only, principal), principal);
    return { refused, verdict: refused ? verdictOf(only, operation, principal, refused) : null };
  };
  const verdictOf = (only: DocumentNode, operation: OperationDefinitionNode, principal: Principal, refused: GraphQLError): Verdict => {
    if (operation.operation !== 'query') return { refused };
    const filtered = filterOperation(schema, only, operation, (parent, field) => {
      const coordinate = `${parent.name}.${field.name.value}`;
      const requirement = rules.get(coordinate);
      return requirement && !satisfies(principal, requirement) ? { coordinate, needs: describeRequirement(requirement) } : null;
    });
    // A removed non-null root field the client always asks for would null the whole answer: refused whole.
    return filtered && !filtered.certainlyNull ? { filtered } : { refused };
  };

  return {
    rules,
    plannerSdl,
    denials,
    check,
    judge: (document, operationName, principal) => judgement(document, operationName, principal).verdict,
    checkOperation: (operation, principal) => judgement(documentOf(operation), undefined, principal).refused,
    scopesOf(operation) {
      const names = denials(documentOf(operation), nobody).flatMap((d) => d.requirement.scopes?.[0] ?? []);
      return [...new Set(names)].sort();
    },
  };
}

type Executor = NonNullable<Awaited<ReturnType<ApolloGateway['load']>>['executor']>;
type ExecutorContext = Parameters<Executor>[0];

/**
 * `gateway` with its executor running a query without the fields its principal may not use and shaping
 * the answer back: each such field `null` with a FORBIDDEN (UNAUTHENTICATED without a credential) error
 * at its path. Everything else about the gateway is its own.
 */
export function authorizingGateway(gateway: ApolloGateway, authorizer: Authorizer): Pick<ApolloGateway, 'load' | 'onSchemaLoadOrUpdate' | 'stop'> {
  const load: ApolloGateway['load'] = async (options) => {
    const loaded = await gateway.load(options);
    const executor = loaded.executor;
    if (!executor) return loaded;
    const filtering: Executor = async (requestContext) => {
      const context = requestContext.context as Partial<GatewayContext>;
      const principal = context.principal;
      const verdict = principal ? authorizer.judge(requestContext.document, requestContext.operationName, principal) : null;
      if (!principal || !verdict || !('filtered' in verdict)) return executor(requestContext);
      const { filtered } = verdict;
      // The answer is shaped back whole (denied fields null, each with its error): no incremental parts.
      if (context.incremental) context.incremental.disabled = true;
      const narrowed: ExecutorContext = Object.create(requestContext, {
        document: { value: filtered.document },
        operation: { value: filtered.operation },
        source: { value: filtered.source },
        queryHash: { value: filtered.queryHash },
      });
      const result = await executor(narrowed);
      const anonymous = principal.id === ANONYMOUS_PRINCIPAL.id;
      const shaped = shapeAnswer(filtered.shape, result.data, requestContext.request.variables ?? {}, (path, removal) => {
        const needs = removal.denials.map((d) => `${d.coordinate} needs ${d.needs}`).join('; ');
        const message = removal.emptied
          ? `Principal ${principal.id} may use none of the fields selected under ${path.join('.')}: ${needs}`
          : `Principal ${principal.id} may not use ${path.join('.')}: ${needs}`;
        return new GraphQLError(message, {
          path,
          extensions: {
            code: anonymous ? 'UNAUTHENTICATED' : 'FORBIDDEN',
            denied: removal.denials.map((d) => d.coordinate),
          },
        });
      });
      const errors = [...(result.errors ?? []), ...shaped.errors];
      return { ...result, data: shaped.data, ...(errors.length > 0 ? { errors } : {}) };
    };
    return { ...loaded, executor: filtering };
  };
  return { load, onSchemaLoadOrUpdate: (callback) => gateway.onSchemaLoadOrUpdate(callback), stop: () => gateway.stop() };
}
