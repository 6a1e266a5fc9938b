import {
  isAbstractType,
  OperationTypeNode,
  buildASTSchema,
  GraphQLError,
  Kind,
  parse,
  print,
  visit,
  type ConstDirectiveNode,
  type DirectiveNode,
  type DocumentNode,
  type FieldNode,
  type GraphQLNamedType,
  type OperationDefinitionNode,
  type GraphQLSchema,
  type FieldDefinitionNode,
  type InterfaceTypeDefinitionNode,
  type ObjectTypeDefinitionNode,
  type ObjectTypeExtensionNode,
  type TypeNode,
} from 'graphql';
import type { ApolloGateway } from '@apollo/gateway';
import { ANONYMOUS_PRINCIPAL, isOperator, type Principal } from '../../platform/principal.js';
import type { GatewayContext } from '../pipeline/context.js';
import type { OperationPolicy } from '../pipeline/operation-policy.js';
import { filterOperation, shapeAnswer, type FilteredOperation } from './authorization-filter.js';
import { collectRunFields, conditionKey, operationOf } from './operation-fields.js';

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

type Verdict = null | { refused: GraphQLError } | { filtered: FilteredOperation };

export interface Requirement {
  authenticated: boolean;
  /** Alternatives, each a set of scopes that must all be held; null when no scope is named. */
  scopes: string[][] | null;
  /** A field that must declare a requirement and declares none: nobody may use it (default deny). */
  undeclared?: true;
}

/** What a root field that declares nothing requires: no one may run it, operators included. */
const UNDECLARED: Requirement = { authenticated: true, scopes: [], undeclared: true };

/**
 * Federation's own root fields of a subgraph server (`_entities`, `_service`): declared by the federation
 * library, not the SDL, and served to its gateway's signed calls only (gateway/subgraph-host/caller.ts).
 */
const FEDERATION_RULES: ReadonlyMap<string, Requirement> = new Map([
  ['Query._entities', { authenticated: false, scopes: null }],
  ['Query._service', { authenticated: false, scopes: null }],
]);

const ROOT_TYPES = new Set(['Query', 'Mutation', 'Subscription']);

/**
 * The root fields an SDL defines that declare no requirement: `npm run compose` refuses them, and so does
 * building an authorizer (a supergraph loaded or reloaded from a file that was not composed here).
 */
function undeclaredRootFields(document: DocumentNode, rules: ReadonlyMap<string, Requirement>): string[] {
  const missing: string[] = [];
  for (const def of document.definitions) {
    if (def.kind !== Kind.OBJECT_TYPE_DEFINITION && def.kind !== Kind.OBJECT_TYPE_EXTENSION) continue;
    if (!ROOT_TYPES.has(def.name.value)) continue;
    for (const field of def.fields ?? []) if (!rules.has(`${def.name.value}.${field.name.value}`)) missing.push(`${def.name.value}.${field.name.value}`);
  }
  return missing;
}

/**
 * The fields a subgraph adds to an entity another subgraph serves (`Machine.utilizationFeatures`, which
 * features resolves on a machine it is only handed through `_entities`) that declare no requirement, read
 * from the supergraph's join directives: the second half of compose's check (schema/compose.ts,
 * `undeclaredFields`), run again on a supergraph loaded or reloaded from a file. A graph serves a type when
 * it returns it from a field of its own; key fields and `@external` ones read nothing.
 */
function undeclaredEntityFields(document: DocumentNode, rules: ReadonlyMap<string, Requirement>): string[] {
  // The check reads the join spec's directives by their own names: a supergraph that renames them is refused.
  const renamedJoin = document.definitions.some(
    (d) =>
      d.kind === Kind.SCHEMA_DEFINITION &&
      (d.directives ?? []).some((l) => l.name.value === 'link' && String(constValue(l, 'url')).includes('/join/') && constValue(l, 'as') !== undefined),
  );
  if (renamedJoin) return ['(the join spec is linked under another name: its entity fields cannot be checked)'];
  const objects = document.definitions.filter(
    (d): d is ObjectTypeDefinitionNode | ObjectTypeExtensionNode | InterfaceTypeDefinitionNode =>
      d.kind === Kind.OBJECT_TYPE_DEFINITION || d.kind === Kind.OBJECT_TYPE_EXTENSION || d.kind === Kind.INTERFACE_TYPE_DEFINITION,
  );
  /** Per type, the graphs that declare it: the key each gives (null: none), and whether it is that graph's interface object. */
  const typeGraphs = new Map<string, Map<string, { key: string | null; interfaceObject: boolean }>>();
  for (const type of objects) {
    const graphs = typeGraphs.get(type.name.value) ?? new Map<string, { key: string | null; interfaceObject: boolean }>();
    for (const d of type.directives ?? []) {
      if (d.name.value !== 'join__type') continue;
      const graph = String(constValue(d, 'graph'));
      const key = constValue(d, 'key');
      const before = graphs.get(graph);
      graphs.set(graph, {
        key: [before?.key, typeof key === 'string' ? key : null].filter((k): k is string => typeof k === 'string').join(' ') || null,
        interfaceObject: before?.interfaceObject === true || constValue(d, 'isInterfaceObject') === true,
      });
    }
    typeGraphs.set(type.name.value, graphs);
  }
  /** The graphs that resolve a field: its `@join__field` graphs (not external), else every graph of its type. */
  const resolvers = (type: string, field: FieldDefinitionNode): string[] | 'unnamed' => {
    const joins = (field.directives ?? []).filter((d) => d.name.value === 'join__field');
    if (joins.length === 0) return [...(typeGraphs.get(type)?.keys() ?? [])];
    // A `@join__field` naming no graph (composition writes one for a field an interface object adds to the
    // types implementing its interface): resolved by a graph this check cannot name, so it must declare.
    if (joins.some((d) => constValue(d, 'graph') === undefined)) return 'unnamed';
    return joins.filter((d) => constValue(d, 'external') !== true).map((d) => String(constValue(d, 'graph')));
  };
  const returned = new Map<string, Set<string>>();
  for (const type of objects)
    for (const field of type.fields ?? []) {
      const named = namedTypeOf(field.type);
      const graphs = resolvers(type.name.value, field);
      if (named === type.name.value || graphs === 'unnamed') continue;
      for (const graph of graphs) returned.set(graph, (returned.get(graph) ?? new Set()).add(named));
    }
  const missing: string[] = [];
  for (const type of objects) {
    const graphs = typeGraphs.get(type.name.value)!;
    if (ROOT_TYPES.has(type.name.value)) continue;
    for (const field of type.fields ?? []) {
      const coordinate = `${type.name.value}.${field.name.value}`;
      // An interface's field declares on itself (the rules hold object fields: they judge concrete types).
      if (rules.has(coordinate) || (field.directives ?? []).some((d) => SECURITY.has(d.name.value))) continue;
      const resolvedBy = resolvers(type.name.value, field);
      if (resolvedBy === 'unnamed') {
        missing.push(coordinate);
        continue;
      }
      if (graphs.size < 2) continue;
      for (const graph of resolvedBy) {
        const declared = graphs.get(graph);
        const key = declared?.key ?? null;
        // A reference: an entity this graph is handed (through `_entities`) and does not return itself, or an
        // interface object (it stands for another graph's interface).
        const reference = key !== null && (declared!.interfaceObject || !returned.get(graph)?.has(type.name.value));
        if (reference && !key.split(/[\s{}]+/).includes(field.name.value)) missing.push(coordinate);
      }
    }
  }
  return [...new Set(missing)];
}

function namedTypeOf(type: TypeNode): string {
  return type.kind === Kind.NAMED_TYPE ? type.name.value : namedTypeOf(type.type);
}

interface Denial {
  /** `Type.field` */
  coordinate: string;
  /** The response path of the field in the operation (no list indices). */
  path: string[];
  requirement: Requirement;
  /** The field as selected in the document. */
  node: FieldNode;
}

type Variables = Readonly<Record<string, unknown>> | null | undefined;

export interface Authorizer {
  /** The requirement of every field that declares one, by `Type.field`. */
  readonly rules: ReadonlyMap<string, Requirement>;
  /** The supergraph without its SECURITY features, for the planners (`withoutSecurityDirectives`). */
  readonly plannerSdl: string;
  /**
   * The fields of the operation `operationName` selects (the only one when omitted) that the principal may
   * not use, as the operation runs: fragments followed, `@skip`/`@include` resolved against `variables`
   * (a condition on a variable not given counts as running). Empty when it may run the whole operation.
   */
  denials(document: DocumentNode, principal: Principal, variables?: Variables, operationName?: string | null): Denial[];
  /** Denials as a GraphQL error: UNAUTHENTICATED for the anonymous principal, FORBIDDEN otherwise. Null when allowed. */
  check(document: DocumentNode, principal: Principal): GraphQLError | null;
  /**
   * What becomes of the operation `operationName` selects: run as it is (`null`), refused whole (an error),
   * or run without its denied fields (a query). Judged once per document, set of scopes and resolved
   * conditions; the refusal's message is made for this principal.
   */
  judge(document: DocumentNode, operationName: string | null | undefined, principal: Principal, variables: Variables): Verdict;
  /** The whole operation refused when any field it runs is denied (a subgraph server's rule); null: allowed. */
  refusal(document: DocumentNode, operationName: string | null | undefined, principal: Principal, variables: Variables): GraphQLError | null;
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
    if (v.kind === Kind.BOOLEAN) return v.value;
    return null;
  };
  return read(arg.value);
}

/** The requirements declared in a supergraph, by `Type.field`. */
export function securityRules(supergraph: string | DocumentNode): Map<string, Requirement> {
  const rules = new Map<string, Requirement>();
  for (const def of (typeof supergraph === 'string' ? parse(supergraph) : supergraph).definitions) {
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
  return print(withoutSecurity(parse(supergraphSdl)));
}

function withoutSecurity(document: DocumentNode): DocumentNode {
  const securityLink = (d: DirectiveNode) => d.name.value === 'link' && [...SECURITY].some((name) => String(constValue(d, 'url')).includes(`/${name}/`));
  return visit(document, {
    Directive: (node) => (SECURITY.has(node.name.value) || securityLink(node) ? null : undefined),
    DirectiveDefinition: (node) => (SECURITY.has(node.name.value) ? null : undefined),
    ScalarTypeDefinition: (node) => (node.name.value.startsWith('requiresScopes__') ? null : undefined),
  });
}

export function satisfies(principal: Principal, requirement: Requirement): boolean {
  if (requirement.undeclared) return false;
  if (isOperator(principal)) return true;
  if (requirement.authenticated && principal.id === ANONYMOUS_PRINCIPAL.id) return false;
  if (!requirement.scopes) return true;
  return requirement.scopes.some((all) => all.every((scope) => (principal.scopes as readonly string[]).includes(scope)));
}

function describeRequirement(r: Requirement): string {
  if (r.undeclared) return 'a requirement its subgraph never declared (refused to everyone)';
  if (!r.scopes) return 'a credential';
  return r.scopes.map((all) => (all.length === 0 ? 'nothing' : all.join(' and '))).join(', or ');
}

/**
 * Judges every operation once it is parsed, validated and its operation chosen, before it is planned or
 * anything runs: GraphQL over HTTP and WebSocket queries, and the REST routes (they run operations
 * through the same policies). A denied operation runs nothing and answers 403 (401 without a credential).
 */
export function authorizationPolicy(authorizer: Authorizer): OperationPolicy {
  return {
    resolved({ document, operation, context, variables }) {
      // An operation that cannot be told is judged as nothing at all: refused, never allowed.
      if (!operation)
        throw new GraphQLError('The operation to run cannot be told from the document: name it with operationName', {
          extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
        });
      const verdict = authorizer.judge(document, operation.name?.value ?? null, context.principal, variables);
      if (verdict && 'refused' in verdict) throw verdict.refused;
    },
  };
}

/**
 * A subgraph server's authorization step: the whole operation refused when any field it runs is denied
 * (its gateway has already left out what it filters for the caller).
 */
export function wholeAuthorizationPolicy(authorizer: Authorizer): OperationPolicy {
  return {
    resolved({ document, operationName, context, variables }) {
      const refused = authorizer.refusal(document, operationName, context.principal, variables);
      if (refused) throw refused;
    },
  };
}

/**
 * Introspection reads the whole schema: it needs `schema:read` (demo mode's principal holds every scope, so
 * a demo deployment keeps it on), as Apollo Router turns it off in production. `__typename` stays open.
 */
export const INTROSPECTION_RULES: ReadonlyMap<string, Requirement> = new Map([
  ['Query.__schema', { authenticated: true, scopes: [['schema:read']] }],
  ['Query.__type', { authenticated: true, scopes: [['schema:read']] }],
]);

/**
 * The authorizer of a schema: the gateway's, from the supergraph; a subgraph server's, from its own SDL and
 * the schema it serves (`options.schema`), judging with the same rules and the same code.
 */
export function createAuthorizer(supergraphSdl: string, options: { schema?: GraphQLSchema } = {}): Authorizer {
  return new DeclaredRulesAuthorizer(supergraphSdl, options);
}

/** A principal with no scope at all: it is denied every field that names one (their first alternatives, for `scopesOf`). */
const NOBODY: Principal = { id: 'documentation', tenant: 'documentation', scopes: [] };

/**
 * What an operation comes to: its denied fields, and for a query some of whose fields are denied the
 * operation without them (null: refused whole). It depends on the document, the operation, what its
 * conditions resolve to and what the principal holds, not on who it is: worked out once and kept. The
 * messages name the caller, so they are made for each request from what is kept, never kept themselves.
 */
interface Judgement {
  denied: Denial[];
  filtered: FilteredOperation | null;
}

/**
 * The rules declared in an SDL, with the schema they judge operations on. Its methods share the judgements
 * kept per document and the documents of REST operations parsed once.
 */
class DeclaredRulesAuthorizer implements Authorizer {
  readonly rules: ReadonlyMap<string, Requirement>;
  readonly plannerSdl: string;
  private readonly schema: GraphQLSchema;
  /** Per document, its judgements by operation, holdings and resolved conditions (at most MAX_VERDICTS_PER_DOCUMENT). */
  private readonly judgements = new WeakMap<DocumentNode, Map<string, Judgement>>();
  /** REST operations' documents, by their text. */
  private readonly parsed = new Map<string, DocumentNode>();

  constructor(supergraphSdl: string, options: { schema?: GraphQLSchema }) {
    // Parsed once: the rules, both checks and the planners' copy are read from this one document.
    const document = parse(supergraphSdl);
    const rules = securityRules(document);
    const undeclared = [...undeclaredRootFields(document, rules), ...undeclaredEntityFields(document, rules)];
    if (undeclared.length > 0) {
      throw new Error(
        `every root field, and every field a subgraph adds to an entity another serves, declares who may use it (@requiresScopes, @authenticated; @requiresScopes(scopes: [[]]) for a public one), and these declare nothing: ${undeclared.join(', ')}`,
      );
    }
    for (const [coordinate, requirement] of INTROSPECTION_RULES) rules.set(coordinate, requirement);
    if (options.schema) for (const [coordinate, requirement] of FEDERATION_RULES) rules.set(coordinate, requirement);
    const plannerDocument = withoutSecurity(document);
    this.rules = rules;
    this.plannerSdl = print(plannerDocument);
    this.schema = options.schema ?? buildASTSchema(plannerDocument, { assumeValidSDL: true });
  }

  denials(document: DocumentNode, principal: Principal, variables?: Variables, operationName?: string | null): Denial[] {
    const operation = operationOf(document, operationName);
    return operation ? this.deniedIn(document, operation, principal, variables) : [];
  }

  check(document: DocumentNode, principal: Principal): GraphQLError | null {
    return refusalFor(this.denials(document, principal), principal);
  }

  judge(document: DocumentNode, operationName: string | null | undefined, principal: Principal, variables: Variables): Verdict {
    const { denied, filtered } = this.judgement(document, operationName, principal, variables);
    if (denied.length === 0) return null;
    return filtered ? { filtered } : { refused: refusalFor(denied, principal)! };
  }

  refusal(document: DocumentNode, operationName: string | null | undefined, principal: Principal, variables: Variables): GraphQLError | null {
    return refusalFor(this.judgement(document, operationName, principal, variables).denied, principal);
  }

  checkOperation(operation: string, principal: Principal): GraphQLError | null {
    return refusalFor(this.judgement(this.documentOf(operation), undefined, principal, undefined).denied, principal);
  }

  scopesOf(operation: string): string[] {
    const names = this.denials(this.documentOf(operation), NOBODY).flatMap((d) => d.requirement.scopes?.[0] ?? []);
    return [...new Set(names)].sort();
  }

  /**
   * What a field that runs requires. A field selected on an interface or union is judged by every concrete
   * type it may resolve on (the strictest of their rules); a root field that declares nothing is refused to
   * everyone (a supergraph whose root field declares nothing does not load, so this is the last guard).
   */
  private requirementOf(field: { coordinate: string; parent: GraphQLNamedType; node: FieldNode }): Requirement | undefined {
    const name = field.node.name.value;
    const own = this.rules.get(field.coordinate);
    if (own) return own;
    if (isAbstractType(field.parent)) {
      const concrete = this.schema
        .getPossibleTypes(field.parent)
        .map((type) => this.rules.get(`${type.name}.${name}`))
        .filter((r): r is Requirement => r !== undefined);
      if (concrete.length === 0) return undefined;
      return concrete.length === 1 ? concrete[0] : strictest(concrete);
    }
    if (ROOT_TYPES.has(field.parent.name) && !name.startsWith('__')) return UNDECLARED;
    return undefined;
  }

  /** The fields of the operation that runs that `principal` may not use, fragments followed, conditions resolved. */
  private deniedIn(document: DocumentNode, operation: OperationDefinitionNode, principal: Principal, variables: Variables): Denial[] {
    // Collected for every caller, operators too: a document too large to judge is refused whoever sends it.
    const fields = collectRunFields(this.schema, document, operation, variables);
    // An operator holds every scope: only a field that declares nothing is refused to it.
    const operator = isOperator(principal);
    const found: Denial[] = [];
    for (const field of fields) {
      const requirement = this.requirementOf(field);
      if (!requirement || (operator && !requirement.undeclared)) continue;
      if (!satisfies(principal, requirement)) found.push({ coordinate: field.coordinate, path: [...field.path], requirement, node: field.node });
    }
    return found;
  }

  private documentOf(operation: string): DocumentNode {
    let document = this.parsed.get(operation);
    if (!document) this.parsed.set(operation, (document = parse(operation)));
    return document;
  }

  /** The judgement of the operation for what `principal` holds, kept per document. */
  private judgement(document: DocumentNode, operationName: string | null | undefined, principal: Principal, variables: Variables): Judgement {
    const key = `${operationName ?? ''}\n${holdsOf(principal)}\n${conditionKey(document, variables)}`;
    let byKey = this.judgements.get(document);
    if (!byKey) this.judgements.set(document, (byKey = new Map<string, Judgement>()));
    const known = byKey.get(key);
    if (known) return known;
    if (byKey.size >= MAX_VERDICTS_PER_DOCUMENT) byKey.clear();
    const judged = this.judgeOnce(document, operationName, principal, variables);
    byKey.set(key, judged);
    return judged;
  }

  private judgeOnce(document: DocumentNode, operationName: string | null | undefined, principal: Principal, variables: Variables): Judgement {
    const operation = operationOf(document, operationName);
    if (!operation) return { denied: [], filtered: null };
    const denied = this.deniedIn(document, operation, principal, variables);
    // Introspection denied refuses the whole operation: it is not a field a partial answer could leave out.
    if (denied.length === 0 || operation.operation !== OperationTypeNode.QUERY || denied.some((d) => INTROSPECTION_RULES.has(d.coordinate)))
      return { denied, filtered: null };
    const only: DocumentNode = { ...document, definitions: document.definitions.filter((d) => d.kind !== Kind.OPERATION_DEFINITION || d === operation) };
    const byNode = new Map(denied.map((d) => [d.node, d]));
    const filtered = filterOperation(this.schema, only, operation, (_parent, field) => {
      const denial = byNode.get(field);
      return denial ? { coordinate: denial.coordinate, needs: describeRequirement(denial.requirement) } : null;
    });
    // A removed non-null root field the client always asks for would null the whole answer: refused whole.
    return { denied, filtered: filtered && !filtered.certainlyNull ? filtered : null };
  }
}

/**
 * Every one of several requirements at once (a field of an interface, judged by each type that implements
 * it): each alternative of the result holds one alternative of each.
 */
function strictest(requirements: readonly Requirement[]): Requirement {
  if (requirements.some((r) => r.undeclared)) return UNDECLARED;
  let scopes: string[][] | null = null;
  for (const r of requirements) {
    if (!r.scopes) continue;
    scopes = scopes === null ? r.scopes.map((all) => [...all]) : scopes.flatMap((held) => r.scopes!.map((all) => [...new Set([...held, ...all])]));
  }
  return { authenticated: requirements.some((r) => r.authenticated), scopes };
}

/** What a principal holds, as judgements are keyed by it (kept per principal object: one per credential or token). */
const holdings = new WeakMap<Principal, string>();
function holdsOf(principal: Principal): string {
  let holds = holdings.get(principal);
  if (holds === undefined) {
    holds = isOperator(principal) ? 'ops:admin' : principal.id === ANONYMOUS_PRINCIPAL.id ? '' : [...principal.scopes].sort().join(' ');
    holdings.set(principal, holds);
  }
  return holds;
}

/** The refusal of an operation with these denied fields, worded for the principal that asked (null: none denied). */
function refusalFor(denied: readonly Denial[], principal: Principal): GraphQLError | null {
  if (denied.length === 0) return null;
  const anonymous = principal.id === ANONYMOUS_PRINCIPAL.id;
  const list = denied.map((d) => `${d.path.join('.')} (${d.coordinate}) needs ${describeRequirement(d.requirement)}`).join('; ');
  return new GraphQLError(anonymous ? `This operation needs a credential: ${list}` : `Principal ${principal.id} may not run this operation: ${list}`, {
    extensions: {
      code: anonymous ? 'UNAUTHENTICATED' : 'FORBIDDEN',
      denied: denied.map((d) => ({ path: d.path, field: d.coordinate, requires: d.requirement.scopes ?? 'authenticated' })),
      http: { status: anonymous ? 401 : 403 },
    },
  });
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
      const verdict = principal ? authorizer.judge(requestContext.document, requestContext.operationName, principal, requestContext.request.variables) : null;
      if (!principal || !verdict || !('filtered' in verdict)) return executor(requestContext);
      const { filtered } = verdict;
      // The answer is shaped back whole (denied fields null, each with its error): no incremental parts.
      if (context.incremental) context.incremental.disabled = true;
      const narrowed = Object.create(requestContext, {
        document: { value: filtered.document },
        operation: { value: filtered.operation },
        source: { value: filtered.source },
        queryHash: { value: filtered.queryHash },
      }) as ExecutorContext;
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
