// The time axis above the lanes: every run of the execution as a bar from its start to its end on one shared
// scale, in the execution's time (from its first event, as the cards' "+12.3 s"), with a ruler; every wait
// between runs as a bar of its own, labelled with its length and cause (waiting for approval, lease expired,
// recovery). A wait far longer than the runs is drawn shorter, marked "not to scale", and keeps its true length.
// It depends only on the lanes' summaries and a few timestamps, and is redrawn only when what it shows
// changed, so a 20,000-event replay costs it nothing.

import { AxisScale, axisTime } from "./axis_scale.js";
import { el, exactTime, formatDuration, link } from "./dom.js";

// A label this far (px) from either end of the ruler is aligned to that end, so it never sticks out.
const EDGE_PX = 36;

export class TimeAxis {
  constructor(timeline, element) {
    this.timeline = timeline;
    this.element = element;
    this.constants = timeline.config.constants.axis;
    const ruler = el("div", "axis-row axis-ruler");
    ruler.append(el("span", "axis-label sub", "time since the first event"));
    this.ruler = ruler.appendChild(el("div", "axis-track"));
    this.rows = el("div", "axis-rows");
    element.append(ruler, this.rows);
    this.width = 0;
    this.shown = "";
    // The ruler's width sets how many ticks fit; read from the observer, never by forcing a layout.
    new ResizeObserver(([entry]) => {
      this.width = entry.contentRect.width;
      this.render();
    }).observe(this.ruler);
  }

  // The runs that started, in order, as spans of ms since the epoch; `now` ends what is still under way.
  runs(now) {
    const lanes = Array.from(this.timeline.lanes.values()).sort((a, b) => a.column - b.column);
    return lanes.map((lane) => ({ lane, ...lane.span(now) })).filter((run) => run.start !== null);
  }

  // What the time between a run and the next one (or, with none yet, now) was spent on.
  waits(run, next, now) {
    const lane = run.lane;
    const from = run.end;
    const to = next ? next.start : now;
    const reason = next?.lane.summary.reason;
    const decision = lane.decision;
    if (reason === "resume" || (!next && lane.summary.status === "suspended")) {
      const waiting = lane.waitingFor ?? "waiting for approval";
      if (decision && decision.at >= from && decision.at <= to) {
        const waited = decision.expired ? `${waiting}, then expired` : waiting;
        return [
          { from, to: decision.at, cause: waited, kind: "approval" },
          { from: decision.at, to, cause: "from the answer to the resuming run", kind: "resume" },
        ];
      }
      return [{ from, to, cause: next ? "before the resuming run" : waiting, kind: next ? "resume" : "approval" }];
    }
    if (lane.summary.status === "abandoned") {
      const abandoned = Date.parse(lane.summary.finished_at);
      if (abandoned >= from && abandoned <= to) {
        return [
          { from, to: abandoned, cause: "lease expired", kind: "lease" },
          { from: abandoned, to, cause: "recovery", kind: "recovery" },
        ];
      }
      return [{ from, to, cause: "lease expired, then recovery", kind: "recovery" }];
    }
    if (reason === "recovery") return [{ from, to, cause: "recovery", kind: "recovery" }];
    return [{ from, to, cause: "before the next run", kind: "other" }];
  }

  // Runs and waits in time order; a wait after the last run only while the execution still goes on.
  entries(now) {
    const runs = this.runs(now);
    const active = this.timeline.config.constants.activeStatuses.includes(this.timeline.executionStatus);
    const entries = [];
    runs.forEach((run, index) => {
      const next = runs[index + 1] ?? null;
      entries.push({ ...run, kind: "run" });
      if (next || (active && run.lane.summary.status !== "running")) {
        for (const wait of this.waits(run, next, now)) entries.push({ ...wait, wait: true, open: !next });
      }
    });
    // Clocks of different workers may disagree by a little: time on the axis never runs backwards.
    let last = -Infinity;
    for (const entry of entries) {
      entry.from = Math.max(entry.from ?? entry.start, last);
      entry.to = Math.max(entry.to ?? entry.end, entry.from);
      last = entry.to;
    }
    return entries;
  }

  render() {
    // Whole seconds: a running run or an open wait grows once a second, not on every drawing batch.
    const now = Math.floor(Date.now() / 1000) * 1000;
    const entries = this.entries(now);
    this.element.hidden = entries.length === 0;
    if (entries.length === 0 || this.width === 0) return;
    const origin = this.timeline.origin ?? entries[0].from;
    const scale = new AxisScale(
      entries.map((entry) => ({ from: entry.from - origin, to: entry.to - origin, wait: Boolean(entry.wait) })),
      this.constants,
    );
    const ticks = scale.ticks(this.width, this.constants.tickSpacingPx);
    const key = JSON.stringify([this.width, origin, entries.map((e) => [e.from, e.to, e.cause, e.lane?.summary]), ticks]);
    if (key === this.shown) return;
    this.shown = key;
    this.drawRuler(scale, ticks, origin);
    this.rows.replaceChildren(
      ...entries.map((entry, index) => {
        const piece = scale.pieces[index];
        const row = entry.wait ? this.waitRow(entry, piece) : this.runRow(entry);
        const bar = row.querySelector(".axis-bar");
        bar.style.left = percent(piece.start / (scale.total || 1));
        bar.style.width = percent(piece.shown / (scale.total || 1));
        bar.title = `${bar.title}: ${axisTime(piece.from)} to ${axisTime(piece.to)}${piece.compressed ? ", drawn shorter (not to scale)" : ""}`;
        for (const other of scale.pieces) if (other.compressed) row.querySelector(".axis-track").prepend(squeeze(other, scale));
        return row;
      }),
    );
  }

  drawRuler(scale, ticks, origin) {
    const marks = [];
    for (const piece of scale.pieces) if (piece.compressed) marks.push(squeeze(piece, scale, "≈"));
    // The last label is aligned to the end, so it takes the room of the tick before it if that one is close.
    const spacing = this.constants.tickSpacingPx;
    const last = ticks.at(-1);
    if (ticks.length > 2 && last.at * this.width > this.width - EDGE_PX && (last.at - ticks.at(-2).at) * this.width < spacing + EDGE_PX) {
      ticks = [...ticks.slice(0, -2), last];
    }
    for (const tick of ticks) {
      const mark = el("span", "axis-tick", axisTime(tick.ms));
      mark.style.left = percent(tick.at);
      const x = tick.at * this.width;
      if (x < EDGE_PX) mark.classList.add("at-start");
      if (x > this.width - EDGE_PX) mark.classList.add("at-end");
      mark.title = exactTime(origin + tick.ms, this.timeline.config.timeZone);
      marks.push(mark);
    }
    this.ruler.replaceChildren(...marks);
  }

  runRow(run) {
    const { lane } = run;
    const { number, reason, status } = lane.summary;
    const row = el("div", `axis-row axis-run`);
    row.dataset.run = lane.pk;
    const name = `run ${number}${reason ? ` · ${reason}` : ""}`;
    // The label jumps to the run's first item in its lane (or, before it is drawn, to the run's page).
    const label = link("axis-label", name, lane.firstPosition ? `#pos-${lane.firstPosition}` : this.timeline.runUrl(lane.pk));
    label.append(" ", el("span", "axis-length", formatDuration((run.to - run.from) / 1000)));
    const bar = el("span", `axis-bar status-${status}`);
    bar.title = `${name}, ${status}, ${formatDuration((run.to - run.from) / 1000)}`;
    row.append(label, trackWith(bar));
    return row;
  }

  waitRow(wait, piece) {
    const row = el("div", `axis-row axis-wait wait-${wait.kind}`);
    row.classList.toggle("compressed", piece.compressed);
    row.classList.toggle("open", wait.open);
    row.classList.toggle("short", wait.to - wait.from < this.timeline.config.constants.gapMinMs);
    const length = `${formatDuration((wait.to - wait.from) / 1000)}${wait.open ? " so far" : ""}`;
    const label = el("span", "axis-label");
    label.append(el("span", "axis-cause", wait.cause), " ", el("span", "axis-length", length));
    if (piece.compressed) label.append(" ", el("span", "axis-compressed", "not to scale"));
    const bar = el("span", "axis-bar");
    bar.title = `${wait.cause}, ${length}`;
    if (piece.compressed) bar.append(el("span", "axis-break", "≈"));
    row.append(label, trackWith(bar));
    return row;
  }
}

function percent(fraction) {
  return `${(fraction * 100).toFixed(3)}%`;
}

function trackWith(bar) {
  const track = el("div", "axis-track");
  track.append(bar);
  return track;
}

// The band of a compressed wait, drawn behind every row (and, with its mark, on the ruler).
function squeeze(piece, scale, text) {
  const band = el("span", "axis-squeeze", text);
  band.style.left = percent(piece.start / scale.total);
  band.style.width = percent(piece.shown / scale.total);
  band.title = `${axisTime(piece.to - piece.from)} drawn shorter`;
  return band;
}
