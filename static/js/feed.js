// The feed of a timeline: the cursor (last position received), the queue of frames not drawn yet, and the
// drawing loop that applies them in requestAnimationFrame batches within a time budget, so a 20,000-event
// execution opens without freezing the page. No DOM here.

export class Feed {
  constructor(apply, drawn, budgetMs) {
    this.apply = apply; // (frame) => void, one frame at a time, in position order
    this.drawn = drawn; // () => void, after each batch
    this.budgetMs = budgetMs;
    this.cursor = 0; // last position received: where a reconnect resumes
    this.received = 0; // event frames received, duplicates included
    this.queue = [];
    this.head = 0;
    this.scheduled = false;
  }

  push(frame) {
    this.received += 1;
    if (frame.position <= this.cursor) return; // already have it (never expected; cheap to guard)
    this.cursor = frame.position;
    this.queue.push(frame);
    this.schedule();
  }

  reset() {
    this.cursor = 0;
    this.queue = [];
    this.head = 0;
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => this.drain());
  }

  drain() {
    this.scheduled = false;
    const started = performance.now();
    let applied = 0;
    while (this.head < this.queue.length) {
      this.apply(this.queue[this.head]);
      this.head += 1;
      applied += 1;
      if (applied % 64 === 0 && performance.now() - started > this.budgetMs) break;
    }
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else {
      this.schedule();
    }
    this.drawn();
  }
}
