import { describe, expect, it } from 'vitest';
import { closeBill, leadTimeFactor, priceQuote, surgeMultiplier } from '../../../subgraphs/rental/pricing.js';
import { haversineKm } from '../../../subgraphs/rental/geo.js';

describe('yield pricing formula', () => {
  it('surge is flat to 60% utilization, then quadratic to 2.5x at 100%', () => {
    expect(surgeMultiplier(0)).toBe(1);
    expect(surgeMultiplier(0.6)).toBe(1);
    expect(surgeMultiplier(0.8)).toBe(1.375);
    // (14/15 - 0.6) / 0.4 = 0.8333; 1 + 1.5 x 0.8333^2 = 2.0417
    expect(surgeMultiplier(14 / 15)).toBe(2.0417);
    expect(surgeMultiplier(1)).toBe(2.5);
  });

  it('lead-time factor interpolates between its knots', () => {
    expect(leadTimeFactor(0)).toBe(1.2);
    expect(leadTimeFactor(12)).toBe(1.125);
    expect(leadTimeFactor(24)).toBe(1.05);
    expect(leadTimeFactor(48)).toBe(1.025);
    expect(leadTimeFactor(72)).toBe(1);
    expect(leadTimeFactor(1000)).toBe(0.92);
  });

  it('haversine matches a known distance (Rotterdam centre to Utrecht centre, about 48 km)', () => {
    expect(haversineKm({ latitude: 51.9225, longitude: 4.4792 }, { latitude: 52.0907, longitude: 5.1214 })).toBeCloseTo(47.9, 0);
  });

  it('prices line items, one truck per depot, and the total', () => {
    const price = priceQuote({
      machines: [
        { id: 'EQ-002', hourlyRateCents: 9200, depotId: 'D2', depot: { latitude: 52.0, longitude: 5.0 } },
        { id: 'EQ-001', hourlyRateCents: 9500, depotId: 'D1', depot: { latitude: 51.9, longitude: 4.4 } },
        { id: 'EQ-003', hourlyRateCents: 4200, depotId: 'D1', depot: { latitude: 51.9, longitude: 4.4 } },
      ],
      site: { latitude: 51.9, longitude: 4.5 },
      startTime: new Date('2026-01-02T00:00:00Z'),
      durationHours: 8,
      countsAfter: { available: 3, reserved: 10, inUse: 2, total: 15 },
      pricedAt: new Date('2026-01-01T00:00:00Z'),
    });
    expect(price.utilization).toBe(0.8);
    expect(price.surgeMultiplier).toBe(1.375);
    expect(price.leadTimeHours).toBe(24);
    expect(price.leadTimeFactor).toBe(1.05);
    // 95.00 x 8 h x 1.375 x 1.05 = 1097.25
    expect(price.lineItems.map((l) => [l.machineId, l.amountCents])).toEqual([
      ['EQ-001', 109725],
      ['EQ-002', 106260],
      ['EQ-003', 48510],
    ]);
    expect(price.deliveries.map((d) => [d.depotId, d.machineIds])).toEqual([
      ['D1', ['EQ-001', 'EQ-003']],
      ['D2', ['EQ-002']],
    ]);
    const d1 = price.deliveries[0]!;
    // 75.00 + 2.40/km x road km + 25.00 for the second machine on the truck
    expect(d1.amountCents).toBe(Math.round(7500 + 240 * d1.distanceKm + 2500));
    expect(price.totalCents).toBe(price.subtotalCents + price.deliveryCents);
  });

  it('bills at least the quote, and overtime at 125% of the effective hourly rate', () => {
    const start = new Date('2026-01-01T08:00:00Z');
    const early = closeBill({ quotedHours: 8, subtotalCents: 80_000, totalCents: 90_000, rentalStart: start, completedAt: new Date('2026-01-01T12:00:00Z') });
    expect(early).toEqual({ actualHours: 4, billableHours: 8, overtimeCents: 0, finalCents: 90_000 });
    // 9 h 10 min rounds up to 9.25 h: 1.25 h overtime x 100.00/h x 1.25 = 156.25
    const late = closeBill({ quotedHours: 8, subtotalCents: 80_000, totalCents: 90_000, rentalStart: start, completedAt: new Date('2026-01-01T17:10:00Z') });
    expect(late).toEqual({ actualHours: 9.25, billableHours: 9.25, overtimeCents: 15_625, finalCents: 105_625 });
  });
});
