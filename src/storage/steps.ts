/**
 * What the jobs over every shard (the erasure, the archive's move) are made of: a shard that runs
 * a batch of statements, and named steps, durable in a Workflow and plain calls elsewhere (the
 * soak, the tests). Free of Workers types, so the jobs run on Node too.
 */
import type { ShardBase } from "../shared/shard-ids.ts";
import type { Statement } from "./statement.ts";

/** Runs statements on one shard as one batch and returns each statement's rows. */
export type RunStatements = (statements: readonly Statement[]) => Promise<unknown[][]>;

/** A shard as a job sees it: the shard, and a way to run SQL on it. */
export interface JobShard extends ShardBase {
  run: RunStatements;
}

/**
 * Runs one named step of a job and returns its result: a durable step in the Workflow, whose
 * result a resumed run gets back without running the step again; a plain call elsewhere.
 * Results are plain JSON.
 */
export type StepRunner = <T extends Json>(name: string, work: () => Promise<T>) => Promise<T>;

/** A value a step may return. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** Steps as plain calls, one after another: a job outside a Workflow. */
export const runAtOnce: StepRunner = (_name, work) => work();
