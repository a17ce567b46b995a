// A per-frame time budget. Rendering a burst of completed markdown blocks in one frame would
// block the main thread for hundreds of milliseconds (a 30 ms kernel batch can complete dozens
// of blocks); views spend the budget and leave the rest for the next frame instead.

/** @typedef {() => number} Clock */

/** @type {Clock} */
const defaultClock = () =>
  typeof performance !== "undefined" ? performance.now() : Date.now();

export class FrameBudget {
  /** @param {number} ms  time per frame @param {Clock} [now] */
  constructor(ms, now = defaultClock) {
    this.ms = ms;
    this.now = now;
    this.deadline = Infinity;
    this.spent = false;
  }

  /** A new frame begins. */
  start() {
    this.deadline = this.now() + this.ms;
    this.spent = false;
  }

  /** Some work was done this frame (the first piece of work always fits, so frames progress). */
  spend() {
    this.spent = true;
  }

  /** No more work this frame. */
  get exhausted() {
    return this.spent && this.now() >= this.deadline;
  }
}

/** A budget that never runs out (rendering outside of frames). */
export const UNLIMITED = new FrameBudget(Infinity, () => 0);
