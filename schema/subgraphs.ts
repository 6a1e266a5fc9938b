/** The subgraphs composed into the supergraph, and the port each listens on when run on its own. */
export const subgraphPorts = {
  rental: 4101,
  prediction: 4102,
  bonding: 4103,
  features: 4104,
  optimization: 4105,
} as const;

export type SubgraphName = keyof typeof subgraphPorts;

export const subgraphNames = Object.keys(subgraphPorts) as SubgraphName[];

/** The URL recorded in the supergraph; `SUBGRAPH_URLS` overrides it in distributed mode. */
export function defaultSubgraphUrl(name: SubgraphName): string {
  return `http://127.0.0.1:${subgraphPorts[name]}/graphql`;
}
