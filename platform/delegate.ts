/**
 * An object that forwards every property read and method call to whatever `current()` returns at that
 * moment: the parts built from the supergraph (its authorizer, its limits) are swapped on a reload while
 * everything holding them keeps the same reference. Only for plain objects and class instances whose
 * identity nobody checks (not a GraphQLSchema: graphql-js checks `instanceof`).
 */
export function delegate<T extends object>(current: () => T): T {
  return new Proxy({} as T, {
    get(_target, property) {
      const target = current();
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
    has: (_target, property) => Reflect.has(current(), property),
  });
}
