/** A counting Analytics Engine dataset for the metrics tests (src/shared/metrics.ts). */

/** Counts the data points written to it and keeps each one as written. */
export class CountingDataset implements AnalyticsEngineDataset {
  points: AnalyticsEngineDataPoint[] = [];
  writeDataPoint(point?: AnalyticsEngineDataPoint): void {
    this.points.push(structuredClone(point ?? {}));
  }
}

/** A data point's fields by the names of src/shared/metrics.ts' layout. */
export function fieldsOf(point: AnalyticsEngineDataPoint): Record<string, unknown> {
  const [kind, route, outcome, chainId, shard, method] = point.blobs ?? [];
  const [status, durationMs, bytes, delayMs] = point.doubles ?? [];
  return { clientId: point.indexes?.[0], kind, route, outcome, chainId, shard, method, status, durationMs, bytes, delayMs };
}
