import { z } from 'zod';
import { configSection, type ConfigValues } from '../../platform/config.js';

/** The dashboard room's section of the configuration: the browser pages (docs/operations.md, generated from it). */
export const dashboardConfig = configSection('gateway/dashboard', 'gateway/dashboard/config.ts', {
  GRAPHQL_EXPLORER: z
    .enum(['demo', 'on', 'off'])
    .default('demo')
    .describe(
      'the GraphQL explorer (GraphiQL, built into the dashboard at install) at `/graphiql`, where a browser opening `/graphql` is sent: `demo` serves it in demo mode only, `on` always (the page is public; every operation it sends needs a credential, typed into its headers), `off` never (a browser at `/graphql` gets 406) ([Operations](operations.md#the-graphql-explorer))',
    ),
});

export type DashboardConfig = ConfigValues<typeof dashboardConfig.shape>;
