import { fill, h, time } from '../dom.js';

export interface FeedItem {
  /** The event's cursor in its stream. */
  cursor: string;
  /** Which stream it came from (machines, tracking, bonding, runs). */
  stream: string;
  /** The subgraph that owns it, shown as a tag. */
  source: 'rental' | 'prediction' | 'bonding' | 'optimization';
  at: string;
  title: string;
  detail?: string;
  /** A tone for the item's marker (a status: available, reserved, in_use, degraded, ...). */
  tone?: string;
  /** More data attributes (the machine or booking it is about). */
  data?: Record<string, string>;
}

const KEEP = 80;

/** The live event feed, newest first, in the order events arrived. */
export class FeedPanel {
  private readonly list: HTMLOListElement;
  private readonly empty: HTMLElement;

  constructor(root: HTMLElement) {
    this.list = h('ol', { class: 'feed', id: 'feed' });
    this.empty = h('p', { class: 'muted' }, 'Waiting for events…');
    fill(root, this.empty, this.list);
  }

  add(item: FeedItem): void {
    this.empty.hidden = true;
    const attrs: Record<string, string> = { 'data-cursor': item.cursor, 'data-stream': item.stream, 'data-tone': item.tone ?? 'neutral' };
    for (const [name, value] of Object.entries(item.data ?? {})) attrs[`data-${name}`] = value;
    const li = h(
      'li',
      { class: 'feed-item', ...attrs },
      h('time', { datetime: item.at }, time(item.at)),
      h('span', { class: `tag ${item.source}` }, item.source),
      h('span', { class: 'feed-text' }, h('strong', {}, item.title), item.detail ? h('span', { class: 'feed-detail' }, item.detail) : null),
    );
    this.list.prepend(li);
    while (this.list.children.length > KEEP) this.list.lastElementChild?.remove();
  }
}
