/**
 * An object that forwards every property read and method call to whatever `current()` returns at that
 * moment: the parts built from the supergraph (its authorizer, its limits) are swapped on a reload while
 * everything holding them keeps the same reference. Only for plain objects and class instances whose
 * identity nobody checks (not a GraphQLSchema: graphql-js checks `instanceof`).
 */
export function delegate<T extends object>(current: () => T): T {
  // Methods are bound once per object served, not at every call (the authorizer and the limits are read on
  // every request).
  const bound = new WeakMap<object, Map<PropertyKey, unknown>>();
  return new Proxy({} as T, {
    get(_target, property) {
      const target = current();
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      let methods = bound.get(target);
      if (!methods) bound.set(target, (methods = new Map<PropertyKey, unknown>()));
      let method = methods.get(property);
      if (method === undefined) methods.set(property, (method = (value as (...args: unknown[]) => unknown).bind(target)));
      return method;
    },
    has: (_target, property) => Reflect.has(current(), property),
  });
}
