import { describe, expect, it } from 'vitest';
import { rocAuc } from '../../../platform/statistics.js';
import { rSquared, undefinedOn } from '../../../subgraphs/features/learn.js';

describe('features learn: metrics are undefined where the data leaves them undefined', () => {
  it('ROC AUC: ranks, ties as half, NaN with one class or no rows', () => {
    expect(rocAuc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])).toBeCloseTo(0.75, 12);
    expect(rocAuc([0.5, 0.5], [0, 1])).toBe(0.5);
    expect(rocAuc([0.2, 0.9], [0, 0])).toBeNaN();
    expect(rocAuc([0.2, 0.9], [1, 1])).toBeNaN();
    expect(rocAuc([], [])).toBeNaN();
  });

  it('R²: 1 for a perfect fit, negative for a worse-than-mean one, NaN with no rows or equal labels', () => {
    expect(rSquared([1, 2, 3], [1, 2, 3])).toBe(1);
    expect(rSquared([3, 2, 1], [1, 2, 3])).toBeCloseTo(-3, 12);
    expect(rSquared([], [])).toBeNaN();
    expect(rSquared([1, 2], [5, 5])).toBeNaN();
  });

  it('undefinedOn names the split and its counts', () => {
    expect(undefinedOn('classification', 'test', [])).toBe('the test split has no rows');
    expect(undefinedOn('classification', 'test', [0, 0, 0])).toBe('the test split holds one class only (0 positive of 3 rows)');
    expect(undefinedOn('classification', 'training', [1, 1])).toBe('the training split holds one class only (2 positive of 2 rows)');
    expect(undefinedOn('classification', 'test', [0, 1])).toBeNull();
    expect(undefinedOn('regression', 'test', [2.5, 2.5])).toBe('every label of the test split is equal (2 rows)');
    expect(undefinedOn('regression', 'test', [2.5, 3])).toBeNull();
  });
});
