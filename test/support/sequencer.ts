/**
 * The order the suite's files start in. Vitest's own puts every file of one project before the
 * next project's, so on two cores the node files (most of their time spent waiting on wrangler,
 * npm start or a window running out) ran first, all together, and the workers files (each a
 * runtime busy with requests) after them. Taking turns between the projects of a group keeps both
 * kinds running side by side, each project's files still in Vitest's order (a file that failed
 * last time first, then the longest or, with no record, the largest).
 */
import { BaseSequencer, type TestSpecification } from "vitest/node";

export default class TakingTurns extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    // Vitest runs the groups (sequence.groupOrder) one after another; turns are taken within one.
    const groups = new Map<number, Map<string, TestSpecification[]>>();
    for (const file of sorted) {
      const projects = groups.get(file.project.config.sequence.groupOrder) ?? new Map<string, TestSpecification[]>();
      groups.set(file.project.config.sequence.groupOrder, projects);
      projects.set(file.project.name, [...(projects.get(file.project.name) ?? []), file]);
    }
    return [...groups.values()].flatMap((projects) => turns([...projects.values()]));
  }
}

/** One of each list in turn, until every list is empty. */
function turns<T>(lists: T[][]): T[] {
  const longest = Math.max(0, ...lists.map((list) => list.length));
  return Array.from({ length: longest }, (_, index) => lists.flatMap((list) => (index < list.length ? [list[index]!] : []))).flat();
}
