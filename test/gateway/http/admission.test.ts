import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { TurnGate } from '../../../gateway/http/admission.js';

describe('operations take turns', () => {
  it('admits one operation per event-loop turn, in arrival order, with the loop free between them', async () => {
    const gate = new TurnGate();
    let turn = 0;
    let counting = true;
    const counter = (async () => {
      while (counting) {
        await nextTurn();
        turn++;
      }
    })();
    const admitted: { id: number; turn: number }[] = [];
    const entries = Array.from({ length: 6 }, (_, id) => gate.enter().then(() => admitted.push({ id, turn })));
    expect(gate.queued).toBe(5);
    await Promise.all(entries);
    counting = false;
    await counter;
    expect(admitted.map((a) => a.id)).toEqual([0, 1, 2, 3, 4, 5]);
    // Every admission in a turn of its own.
    expect(new Set(admitted.map((a) => a.turn)).size).toBe(6);
    expect(gate.queued).toBe(0);
  });

  it('admits at once when nothing else started in this turn', async () => {
    const gate = new TurnGate();
    await gate.enter();
    await nextTurn();
    await nextTurn();
    let admitted = false;
    void gate.enter().then(() => (admitted = true));
    await Promise.resolve();
    expect(admitted).toBe(true);
  });
});
