import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { composeServices } from '@apollo/composition';
import { Kind, parse, type DocumentNode, type ObjectTypeDefinitionNode, type ObjectTypeExtensionNode, type TypeNode } from 'graphql';
import { readSubgraphSdl } from '../platform/subgraph.js';
import { SUPERGRAPH_PATH } from './supergraph-file.js';
import { subgraphNames, defaultSubgraphUrl, type SubgraphName } from './subgraphs.js';

const ROOTS = new Set(['Query', 'Mutation', 'Subscription']);
const REQUIREMENTS = new Set(['requiresScopes', 'authenticated']);

/**
 * Default deny, checked before anything composes: every field that reads or changes something declares
 * who may use it (`@requiresScopes`, `@authenticated`, or `@requiresScopes(scopes: [[]])`, the explicit
 * public marker). Those are every root field, and every field a subgraph adds to an entity another
 * subgraph serves (a reference it is only handed through `_entities`, such as `Machine.utilizationFeatures`
 * in features, or one an `@interfaceObject` adds to another subgraph's entity interface): such a field reads
 * that subgraph's own store, beside whatever authorized the parent.
 * Key fields and `@external` fields read nothing. Returns `subgraph: Type.field` for each one that does not.
 */
export function undeclaredFields(subgraphs: readonly { name: string; sdl: string }[]): string[] {
  const parsed = subgraphs.map(({ name, sdl }) => ({ name, document: parse(sdl) }));
  const objects = (document: DocumentNode) =>
    document.definitions.filter(
      (d): d is ObjectTypeDefinitionNode | ObjectTypeExtensionNode => d.kind === Kind.OBJECT_TYPE_DEFINITION || d.kind === Kind.OBJECT_TYPE_EXTENSION,
    );
  const keysOf = (type: ObjectTypeDefinitionNode | ObjectTypeExtensionNode) =>
    (type.directives ?? [])
      .filter((d) => d.name.value === 'key')
      .flatMap((d) => {
        const fields = d.arguments?.find((a) => a.name.value === 'fields')?.value;
        return fields?.kind === Kind.STRING ? fields.value.split(/[\s{}]+/).filter(Boolean) : [];
      });
  // Where each type is defined: as an object, or as an interface (an entity interface another subgraph
  // stands for with an `@interfaceObject`).
  const definedIn = new Map<string, Set<string>>();
  for (const { name, document } of parsed)
    for (const type of document.definitions)
      if (type.kind === Kind.OBJECT_TYPE_DEFINITION || type.kind === Kind.OBJECT_TYPE_EXTENSION || type.kind === Kind.INTERFACE_TYPE_DEFINITION)
        definedIn.set(type.name.value, (definedIn.get(type.name.value) ?? new Set()).add(name));
  const missing: string[] = [];
  for (const { name, document } of parsed) {
    const types = objects(document);
    // The types this subgraph returns from some field of its own: the entities it serves, not just references.
    const returned = new Set(types.flatMap((t) => (t.fields ?? []).map((f) => namedType(f.type)).filter((n) => n !== t.name.value)));
    for (const type of types) {
      const root = ROOTS.has(type.name.value);
      const keys = keysOf(type);
      const interfaceObject = (type.directives ?? []).some((d) => d.name.value === 'interfaceObject');
      const reference = keys.length > 0 && (definedIn.get(type.name.value)?.size ?? 0) > 1 && (interfaceObject || !returned.has(type.name.value));
      if (!root && !reference) continue;
      for (const field of type.fields ?? []) {
        const directives = (field.directives ?? []).map((d) => d.name.value);
        if (!root && (keys.includes(field.name.value) || directives.includes('external'))) continue;
        if (!directives.some((d) => REQUIREMENTS.has(d))) missing.push(`${name}: ${type.name.value}.${field.name.value}`);
      }
    }
  }
  return missing;
}

function namedType(type: TypeNode): string {
  return type.kind === Kind.NAMED_TYPE ? type.name.value : namedType(type.type);
}

/** Composes `schema/<name>.graphql` of every subgraph into the supergraph SDL. */
export function composeSupergraph(): string {
  return composeSubgraphs(subgraphNames.map((name) => ({ name, sdl: readSubgraphSdl(name) })));
}

/** Composes subgraph SDLs into the supergraph SDL; throws naming every undeclared field or composition error. */
export function composeSubgraphs(subgraphs: readonly { name: SubgraphName; sdl: string }[]): string {
  const undeclared = undeclaredFields(subgraphs);
  if (undeclared.length > 0) {
    throw new Error(
      `Composition refused: these fields declare no requirement (add @requiresScopes(scopes: [["<scope>"]]), @authenticated, or @requiresScopes(scopes: [[]]) for a public field):\n${undeclared.map((f) => `  - ${f}`).join('\n')}`,
    );
  }
  const result = composeServices(subgraphs.map(({ name, sdl }) => ({ name, typeDefs: parse(sdl), url: defaultSubgraphUrl(name) })));
  if (result.errors) {
    throw new Error(`Composition failed:\n${result.errors.map((e) => `  - ${e.message}`).join('\n')}`);
  }
  return `${result.supergraphSdl.trimEnd()}\n`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    const supergraph = composeSupergraph();
    writeFileSync(SUPERGRAPH_PATH, supergraph);
    console.log(`wrote ${SUPERGRAPH_PATH}`);
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
