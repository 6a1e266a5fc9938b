/** Small DOM helpers: elements built with text nodes only (never innerHTML), so no answer can inject markup. */

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined>;

function append(parent: Node, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
}

function setAttrs(element: Element, attrs: Attrs): void {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? '' : String(value));
  }
}

/** An HTML element. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  setAttrs(element, attrs);
  append(element, children);
  return element;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element. */
export function s<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  setAttrs(element, attrs);
  append(element, children);
  return element;
}

/** Replaces an element's children. */
export function fill(element: Element, ...children: Child[]): void {
  element.replaceChildren();
  append(element, children);
}

/** The element with this id (the page's skeleton is index.html); a missing one is a build fault. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const element = document.getElementById(id);
  if (!element) throw new Error(`#${id} is missing from index.html`);
  return element as T;
}

/** An enum value as the page shows it: IN_USE -> in use. */
export const label = (value: string): string => value.toLowerCase().replace(/_/g, ' ');
/** An enum value as a data attribute or class: IN_USE -> in_use. */
export const token = (value: string): string => value.toLowerCase();

const timeFormat = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
const clockFormat = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', hour12: false });

/** 14:03:27 */
export const time = (iso: string | number | Date): string => timeFormat.format(new Date(iso));
/** 14:03 */
export const clock = (iso: string | number | Date): string => clockFormat.format(new Date(iso));
export const percent = (value: number, digits = 1): string => `${(value * 100).toFixed(digits)}%`;
export const fixed = (value: number, digits = 2): string => value.toFixed(digits);

/** A duration in minutes as "1 h 05 min" or "42 min". */
export function minutes(value: number): string {
  const total = Math.max(0, Math.round(value));
  if (total < 60) return `${total} min`;
  return `${Math.floor(total / 60)} h ${String(total % 60).padStart(2, '0')} min`;
}

/** A probability as 1.2e-4 or 3.4%. */
export function probability(value: number): string {
  return value >= 0.001 ? percent(value, 2) : value.toExponential(1);
}
