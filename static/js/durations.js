// The execution's duration model as the server computed it (runs/services/reports/durations.py): each run's
// active span and every wait between runs, in ms since the epoch. The page only extends what is still open
// (`end` null) to now, on the server's clock, so the header, lane heads, gaps and the time axis agree and tick.

export class Durations {
  constructor(times) {
    this.set(times);
  }

  set(times) {
    this.runs = times.runs;
    this.waits = times.waits;
    // How far this browser's clock is ahead of the server's, so an open span ends at the server's "now".
    this.skew = Date.now() - times.now;
  }

  now() {
    return Date.now() - this.skew;
  }

  get start() {
    return this.runs.length ? this.runs[0].start : null;
  }

  get open() {
    return this.runs.some((run) => run.end === null) || this.waits.some((wait) => wait.end === null);
  }

  // Ms the run worked (null: it has not started).
  active(runPk, now = this.now()) {
    const run = this.runs.find((entry) => entry.run === runPk);
    return run ? (run.end ?? now) - run.start : null;
  }

  // The waits after a run: those for its answers (`approval`: drawn at the decision) or all the others.
  after(runPk, { approval }) {
    return this.waits.filter((wait) => wait.after_run === runPk && (wait.kind === "approval") === approval);
  }

  length(wait, now = this.now()) {
    return (wait.end ?? now) - wait.start;
  }

  // Runs and waits in time order, each {from, to, wait, open, ...}.
  entries(now = this.now()) {
    const entries = [];
    for (const run of this.runs) {
      entries.push({ ...run, from: run.start, to: run.end ?? now, wait: false, open: run.end === null });
      for (const wait of this.waits) {
        if (wait.after_run === run.run) entries.push({ ...wait, from: wait.start, to: wait.end ?? now, wait: true, open: wait.end === null });
      }
    }
    return entries;
  }

  totals(now = this.now()) {
    const active = this.runs.reduce((sum, run) => sum + (run.end ?? now) - run.start, 0);
    const waited = this.waits.reduce((sum, wait) => sum + this.length(wait, now), 0);
    const ends = [...this.runs.map((run) => run.end ?? now), ...this.waits.map((wait) => wait.end ?? now)];
    const wall = this.start === null ? 0 : Math.max(...ends) - this.start;
    return { runs: this.runs.length, active, waited, wall };
  }
}
