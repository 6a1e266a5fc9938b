/*
 * Statistics more than one subgraph uses: the logistic function of the seeded generators and the logistic
 * models, and ROC AUC, the metric of every classifier they report.
 */

/** The logistic function: log-odds as a probability. */
export function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/**
 * ROC AUC as the Mann-Whitney statistic: the share of (positive, negative) pairs the score orders
 * correctly, a tied pair counting half, computed from the positives' rank sum with tied scores given their
 * mean rank. A label above 0 is positive, any other negative. NaN where it is undefined (no positive or no
 * negative label).
 */
export function rocAuc(score: ArrayLike<number>, label: ArrayLike<number>): number {
  const order = Array.from({ length: score.length }, (_, i) => i).sort((a, b) => score[a]! - score[b]!);
  let rankSum = 0;
  let positives = 0;
  for (let start = 0; start < order.length;) {
    let end = start;
    while (end + 1 < order.length && score[order[end + 1]!] === score[order[start]!]) end++;
    const meanRank = (start + end) / 2 + 1;
    for (let k = start; k <= end; k++) {
      if (label[order[k]!]! > 0) {
        rankSum += meanRank;
        positives++;
      }
    }
    start = end + 1;
  }
  const negatives = order.length - positives;
  if (positives === 0 || negatives === 0) return NaN;
  return (rankSum - (positives * (positives + 1)) / 2) / (positives * negatives);
}
