import { fill, h, label, token } from '../dom.js';
import type { Machine, MachineEvent } from '../schemas.js';

/** The 15 machines as tiles coloured by status; a tile flashes when its machine changes. */
export class FleetPanel {
  private readonly tiles = new Map<string, { tile: HTMLElement; status: HTMLElement }>();

  constructor(private readonly root: HTMLElement) {}

  load(machines: readonly Machine[]): void {
    this.tiles.clear();
    fill(
      this.root,
      ...machines.map((machine) => {
        const status = h('span', { class: 'tile-status' }, label(machine.status));
        const tile = h(
          'div',
          {
            class: 'tile',
            'data-machine': machine.id,
            'data-status': token(machine.status),
            title: `${machine.name}, ${label(machine.category)} (${machine.depot.id})`,
          },
          h('span', { class: 'tile-id' }, machine.id),
          h('span', { class: 'tile-name' }, machine.name),
          status,
        );
        this.tiles.set(machine.id, { tile, status });
        return tile;
      }),
    );
  }

  apply(event: MachineEvent): void {
    const entry = this.tiles.get(event.machine.id);
    if (!entry) return;
    entry.tile.dataset['status'] = token(event.status);
    entry.status.textContent = label(event.status);
    entry.tile.classList.remove('changed');
    // Restart the flash animation (a reflow between removing and adding the class).
    void entry.tile.offsetWidth;
    entry.tile.classList.add('changed');
  }
}
