/**
 * How the instance ID of a part of an erasure names the erasure it belongs to: the erasure's
 * Workflow makes the ID, `npm run jobs` reads it back to show each part under its erasure.
 */

// Instance IDs hold at most 100 characters; the part's suffix takes at most 30 of them.
const PARENT_CHARS = 64;
const PART_SUFFIX = /^(.+)-part(\d+)-([0-9a-f]{12})$/;

/**
 * The ID of part `index` of the erasure `parentId` whose event is `eventId`: the same on every
 * run of the step that starts it, so that a step run again finds its part instead of starting a
 * second, and new for an erasure started again (a new event_id), whose parts must reach its own
 * instant. The parent's ID is cut to its first 64 characters.
 *
 * @example erasurePartId("7f0c…", "0199…-8abc-0123456789ab", 2) // "7f0c…-part2-0123456789ab"
 */
export function erasurePartId(parentId: string, eventId: string, index: number): string {
  return `${parentId.slice(0, PARENT_CHARS)}-part${index}-${eventId.slice(-12)}`;
}

/** The erasure (its ID, cut as {@link erasurePartId} cuts it) whose part `id` is, or undefined for an ID of no part. */
export function erasureOfPart(id: string): string | undefined {
  return PART_SUFFIX.exec(id)?.[1];
}
