/**
 * The soak's seeded pseudo-random numbers (mulberry32): one seed gives the same fault plan, load
 * mix and injected calls, so a run can be replayed. Free of Node and Workers types: the wrapper
 * Workers use it too.
 */
export class Prng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** A number in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** A whole number from `min` to `max`, both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** A number from `min` up to `max`. */
  between(min: number, max: number): number {
    return min + this.next() * (max - min);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError("pick from nothing");
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** One of the names, each as likely as its weight. */
  weighted<Name extends string>(weights: Readonly<Record<Name, number>>): Name {
    const entries = Object.entries(weights) as [Name, number][];
    let left = this.next() * entries.reduce((sum, [, weight]) => sum + weight, 0);
    for (const [name, weight] of entries) {
      left -= weight;
      if (left < 0) return name;
    }
    return entries.at(-1)![0];
  }

  /**
   * A generator of its own for one concern (the fault plan, one POS client): the draws of one never
   * shift another's, so the plan stays the same whatever the timing of the load.
   */
  fork(label: string): Prng {
    let hash = this.#state ^ 0x811c9dc5;
    for (let i = 0; i < label.length; i += 1) hash = Math.imul(hash ^ label.charCodeAt(i), 0x01000193);
    return new Prng(hash);
  }
}
