// The time axis above the lanes: every run of the execution as a bar from its start to its end on one shared
// scale, in the execution's time (from the first run's start, as the cards' "+12.3 s"), with a ruler; every wait
// between runs as a bar of its own, labelled with its length and cause (waiting for approval, lease expired,
// recovery). Spans and waits are the server's duration model (durations.js). A wait far longer than the runs is drawn shorter, marked "not to scale", and keeps its true length.
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
    ruler.append(el("span", "axis-label sub", "time since the first run started"));
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

  // Runs and waits in time order, from the execution's duration model; each run with its lane.
  entries(now) {
    const entries = this.timeline.durations.entries(now);
    for (const entry of entries) if (!entry.wait) entry.lane = this.timeline.lanes.get(entry.run);
    return entries.filter((entry) => entry.wait || entry.lane);
  }

  render() {
    // Whole seconds: a running run or an open wait grows once a second, not on every drawing batch.
    const now = Math.floor(this.timeline.durations.now() / 1000) * 1000;
    const entries = this.entries(now);
    this.element.hidden = entries.length === 0;
    if (entries.length === 0 || this.width === 0) return;
    const origin = this.timeline.origin ?? entries[0].from;
    const scale = new AxisScale(
      entries.map((entry) => ({ from: entry.from - origin, to: entry.to - origin, wait: Boolean(entry.wait) })),
      this.constants,
    );
    const ticks = scale.ticks(this.width, this.constants.tickSpacingPx);
    const key = JSON.stringify([this.width, origin, entries.map((e) => [e.from, e.to, e.cause, e.lane?.summary, e.lane?.firstPosition]), ticks]);
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
