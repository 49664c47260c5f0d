// Lanes (one per harness run) and their scopes (the run itself, or one of its inline child runs).

import { el, formatDuration, plural, setStatus } from "./dom.js";
import { Item } from "./items.js";

// Where items of one run (root) or one inline child run go.
export class Scope {
  constructor(timeline, lane, container, item) {
    this.timeline = timeline;
    this.lane = lane;
    this.container = container; // null: the lane's own column of the timeline
    this.item = item; // the nested-lane item of a child run
    this.messages = new Map();
    this.tools = new Map();
    this.group = null;
    this.modelRequest = null; // {startedAt, firstAt, item} of the model request under way
  }

  // The run of this scope ended: no tool of it is running any more.
  stopTools() {
    for (const tool of this.tools.values()) this.timeline.stopRunning(tool);
  }

  // The first item a model response produced carries the response's latency.
  modelItem(item, timestamp) {
    const request = this.modelRequest;
    if (!request || request.item || typeof timestamp !== "number") return;
    request.item = item;
    request.firstAt = timestamp;
    item.latency = el("span", "model-latency");
    item.latency.textContent = `first part after ${formatDuration((timestamp - request.startedAt) / 1000)}`;
    item.label.after(item.latency);
  }

  modelRequestEnded(timestamp) {
    const request = this.modelRequest;
    this.modelRequest = null;
    if (!request?.item || typeof timestamp !== "number") return;
    const first = formatDuration((request.firstAt - request.startedAt) / 1000);
    const whole = formatDuration((timestamp - request.startedAt) / 1000);
    request.item.latency.textContent = `model: first part after ${first}, response in ${whole}`;
  }

  // Tool calls of this scope still without a result when the run ended: cut short, never to return.
  interruptOpenTools(why) {
    for (const tool of this.tools.values()) {
      const classes = tool.element.classList;
      if (classes.contains("has-result") || classes.contains("interrupted") || tool.outcome) continue;
      classes.remove("streaming");
      classes.add("interrupted");
      const mark = el("span", "badge tool-interrupted", "interrupted");
      mark.title = why;
      tool.extra.after(mark);
    }
  }

  add(item) {
    if (this.container) {
      this.container.append(item.element);
    } else {
      this.lane.opening(item);
      this.lane.items.push(item);
      this.timeline.place(item.element, this.lane.column);
    }
    this.group = null;
    return item;
  }
}

export class Lane {
  constructor(timeline, summary) {
    this.timeline = timeline;
    this.pk = summary.pk;
    this.column = timeline.lanes.size + 1;
    this.summary = {
      status: "",
      reason: "",
      number: "",
      run_id: "",
      started_at: null,
      finished_at: null,
      attempt: null,
      tool_recovery: "",
      tokens: null,
    };
    this.placed = false;
    this.head = timeline.root.querySelector(`.lane-head[data-run="${this.pk}"]`);
    if (!this.head) {
      this.head = el("header", "lane-head");
      this.head.dataset.run = this.pk;
      this.head.append(document.getElementById("lane-head-template").content.cloneNode(true));
      timeline.heads.append(this.head);
    }
    this.resetScopes();
    this.update(summary);
  }

  resetScopes() {
    this.scopes = new Map([["", new Scope(this.timeline, this, null, null)]]);
    this.items = []; // the run's own top-level items, in order (what a comparison lines up)
    this.count = 0;
    this.firstPosition = null;
    this.firstTimestamp = null;
    this.lastTimestamp = null;
    this.previousTimestamp = null;
    this.endedAt = null; // the run's own terminal event
    this.lastAlive = null; // the last event before it (a dead run's lane is closed long after it died)
    this.decision = null; // {at, expired} of the decision on its requests
    this.waitingFor = null; // what its suspension waits for, as the interrupt item says it
  }

  ended(timestamp) {
    if (typeof timestamp !== "number") return;
    this.endedAt = timestamp;
    this.lastAlive = this.previousTimestamp;
  }

  // When the run ran, ms since the epoch (start null before it started); a run under way ends `now`, and a run
  // whose worker died ends at its last event: the time until its lease expired is a wait, not work.
  span(now) {
    const started = Date.parse(this.summary.started_at);
    const start = this.firstTimestamp ?? (Number.isNaN(started) ? null : started);
    const finished = Date.parse(this.summary.finished_at);
    const { status } = this.summary;
    let end;
    if (status === "abandoned") end = this.lastAlive ?? this.lastTimestamp ?? finished;
    else if (this.endedAt !== null) end = this.endedAt;
    else if (status === "running") end = now;
    else end = Number.isNaN(finished) ? this.lastTimestamp : finished;
    return { start, end: Number.isNaN(end) || end === null ? start : Math.max(start, end) };
  }

  update(summary) {
    for (const key of Object.keys(this.summary)) {
      if (summary[key] !== undefined && summary[key] !== null && summary[key] !== "") this.summary[key] = summary[key];
    }
    const { run_id: runId, number, reason, status } = this.summary;
    const run = this.head.querySelector(".lane-run");
    run.textContent = runId || "run not started";
    run.href = this.timeline.runUrl(this.pk);
    if (number !== "") this.head.querySelector(".lane-number").textContent = `run ${number}`;
    const reasonElement = this.head.querySelector(".lane-reason");
    reasonElement.textContent = reason;
    reasonElement.className = `lane-reason reason-${reason}`;
    setStatus(this.head.querySelector(".lane-status"), status);
    if (status !== "running") for (const scope of this.scopes.values()) scope.stopTools();
    this.renderDuration();
    this.renderTokens();
    this.timeline.renderTotals();
  }

  renderTokens() {
    const tokens = this.summary.tokens;
    if (!tokens) return;
    this.head.querySelector(".lane-tokens").textContent = `${tokens.input} in · ${tokens.output} out tokens`;
  }

  // The lane's first item: the gap since the lane before it ended is drawn above it, with its cause.
  opening(item) {
    if (this.placed) return;
    this.placed = true;
    const before = Array.from(this.timeline.lanes.values()).find((lane) => lane.column === this.column - 1);
    const start = item.timestamp;
    if (!before) return;
    // A dead run's lane is closed long after its last sign of life: the pause counts from that.
    const dead = before.summary.status === "abandoned";
    const end = dead ? (before.lastAlive ?? before.lastTimestamp) : before.lastTimestamp;
    if (end === null || typeof start !== "number") return;
    const { reason } = this.summary;
    let cause = "before the next run";
    if (reason === "resume") cause = "from the answer to the resuming run";
    if (reason === "recovery") cause = dead ? "lease expired, then recovery" : "until recovery";
    this.timeline.gap(start - end, cause, this.column);
  }

  saw(frame) {
    this.count += 1;
    this.firstPosition ??= frame.position;
    this.previousTimestamp = this.lastTimestamp;
    this.timeline.origin ??= typeof frame.event.timestamp === "number" ? frame.event.timestamp : null;
    const timestamp = frame.event.timestamp;
    if (typeof timestamp === "number") {
      if (this.firstTimestamp === null) this.firstTimestamp = timestamp;
      this.lastTimestamp = timestamp;
    }
  }

  renderDuration() {
    const { started_at: startedAt, finished_at: finishedAt, status } = this.summary;
    const start = startedAt ? Date.parse(startedAt) : this.firstTimestamp;
    if (start === null || Number.isNaN(start)) return;
    let end = finishedAt ? Date.parse(finishedAt) : null;
    if (end === null && status === "running") end = Date.now();
    if (end === null) end = this.lastTimestamp;
    if (end === null) return;
    this.head.querySelector(".lane-duration").textContent = formatDuration(Math.max(0, end - start) / 1000);
  }

  renderCount() {
    this.head.querySelector(".lane-count").textContent = plural(this.count, "event");
  }

  // The scope of a child run; a child seen before its SUBAGENT_STARTED gets a nested lane at the top level.
  scope(subagentRunId, frame) {
    let scope = this.scopes.get(subagentRunId);
    if (!scope) scope = this.nest(this.scopes.get(""), null, subagentRunId, subagentRunId, frame);
    return scope;
  }

  nest(parent, tool, runId, name, frame) {
    const item = new Item(this.timeline, "subagent", frame, `subagent ${name}`);
    item.extra.textContent = runId;
    item.status = el("span", "badge status-running", "running");
    item.extra.after(item.status);
    const body = el("div", "nested-lane-body");
    item.body.append(body);
    if (tool) {
      tool.children.append(item.element);
    } else {
      parent.add(item);
    }
    const scope = new Scope(this.timeline, this, body, item);
    this.scopes.set(runId, scope);
    return scope;
  }
}
