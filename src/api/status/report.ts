/**
 * The status's shape, where test/scripts/status.test.ts still imports it from; its home is
 * src/shared/health-report.ts, beside what both Workers and the scripts share.
 */
export type { HealthReason, HealthReport, ShardHealth } from "../../shared/health-report.ts";
