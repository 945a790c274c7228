/** The percentile both harnesses report (bench latencies, soak delivery delays). */

/** The value below which `share` of the sorted values lie, to a tenth. */
export function percentile(sorted: number[], share: number): number {
  if (sorted.length === 0) return 0;
  return Math.round(sorted[Math.ceil(share * sorted.length) - 1]! * 10) / 10;
}
