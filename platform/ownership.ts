import { isOperator, SYSTEM_PRINCIPAL, type Principal } from './principal.js';

/*
 * Every row a principal creates, and every event about it, carries its owner: the tenant and the
 * principal of that tenant that made it. Stores take the caller as a `Viewer`, so a read or change that
 * forgets whose rows it may touch does not type-check; an operator is the explicit `all` viewer, never a
 * missing filter.
 */

/** Who owns a row or an event. */
export interface Owner {
  readonly tenant: string;
  readonly principal: string;
}

/**
 * How far ownership reaches: `tenant` (every principal of the owner's tenant sees it: quotes, bookings,
 * quantum runs, which a partner's several apps share) or `principal` (only the principal that made it:
 * bonding sessions and their keys).
 */
export type Grain = 'tenant' | 'principal';

/** Whose rows a store call may see and change: one principal's view, or every owner's (an operator). */
export type Viewer = { readonly all: true; readonly owner: Owner } | { readonly all: false; readonly owner: Owner };

export const ownerOf = (principal: Principal): Owner => ({ tenant: principal.tenant, principal: principal.id });

/** The viewer a principal is: every owner's rows for an operator, its own otherwise. */
export const viewerOf = (principal: Principal): Viewer => ({ all: isOperator(principal), owner: ownerOf(principal) });

/** The deployment's own work (a subgraph reading its own events): every owner's. */
export const SYSTEM_VIEWER: Viewer = viewerOf(SYSTEM_PRINCIPAL);

/**
 * The tenant a viewer's reads are limited to, or null for an operator's (every tenant): the parameter of a
 * `($n::text IS NULL OR tenant = $n)` condition, for rows whose ownership reaches the whole tenant.
 */
export const viewedTenant = (viewer: Viewer): string | null => (viewer.all ? null : viewer.owner.tenant);

/** Whether `viewer` may see a row or event of `owner` at `grain`. */
export function mayView(viewer: Viewer, owner: Owner, grain: Grain): boolean {
  if (viewer.all) return true;
  if (viewer.owner.tenant !== owner.tenant) return false;
  return grain === 'tenant' || viewer.owner.principal === owner.principal;
}

/**
 * The SQL condition restricting rows to what `viewer` may see, on the given owner columns; its parameters
 * are appended to `params`. `TRUE` for an operator.
 */
export function ownedBy(
  viewer: Viewer,
  grain: Grain,
  params: unknown[],
  columns: { tenant: string; principal: string } = { tenant: 'tenant', principal: 'principal' },
): string {
  if (viewer.all) return 'TRUE';
  params.push(viewer.owner.tenant);
  const tenant = `${columns.tenant} = $${params.length}`;
  if (grain === 'tenant') return tenant;
  params.push(viewer.owner.principal);
  return `(${tenant} AND ${columns.principal} = $${params.length})`;
}
