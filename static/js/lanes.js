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
    const full = `model: first part after ${first}, response in ${whole}`;
    // A reasoning card is compact: its response time alone, the rest on hover.
    request.item.latency.textContent = request.item.kind === "reasoning" ? whole : full;
    request.item.latency.title = full;
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
    // The run an item belongs to, whatever scope of it: what the timeline's run filter asks.
    item.element.dataset.run = this.lane.pk;
    if (this.container) {
      this.container.append(item.element);
    } else {
      this.lane.opening();
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
    this.head.dataset.col = this.column;
    this.resetScopes();
    this.update(summary);
  }

  resetScopes() {
    this.scopes = new Map([["", new Scope(this.timeline, this, null, null)]]);
    this.items = []; // the run's own top-level items, in order (what a comparison lines up)
    this.count = 0;
    this.firstPosition = null;
    this.waitingFor = null; // what its suspension waits for, as the interrupt item says it
  }

  update(summary) {
    for (const key of Object.keys(this.summary)) {
      if (summary[key] !== undefined && summary[key] !== null && summary[key] !== "") this.summary[key] = summary[key];
    }
    const { run_id: runId, number, reason, status } = this.summary;
    const run = this.head.querySelector(".lane-run");
    run.textContent = runId || "run not started";
    run.href = this.timeline.runUrl(this.pk);
    this.head.querySelector(".copy").dataset.copy = runId;
    if (number !== "") this.head.querySelector(".lane-number").textContent = `run ${number}`;
    const reasonElement = this.head.querySelector(".lane-reason");
    reasonElement.textContent = reason;
    reasonElement.className = `lane-reason reason-${reason}`;
    setStatus(this.head.querySelector(".lane-status"), status);
    if (status !== "running") for (const scope of this.scopes.values()) scope.stopTools();
    this.renderDuration();
    this.renderTokens();
  }

  renderTokens() {
    const tokens = this.summary.tokens;
    if (!tokens) return;
    this.head.querySelector(".lane-tokens").textContent = `${tokens.input} in · ${tokens.output} out tokens`;
  }

  // The lane's first item: the pause since the lane before it (lease expired, recovery, the resuming run) is
  // drawn above it; a wait for answers is drawn at its decision instead.
  opening() {
    if (this.placed) return;
    this.placed = true;
    const before = Array.from(this.timeline.lanes.values()).find((lane) => lane.column === this.column - 1);
    if (before) this.timeline.gap(before.pk, this.column, false);
  }

  saw(frame) {
    this.count += 1;
    this.firstPosition ??= frame.position;
    this.timeline.origin ??= typeof frame.event.timestamp === "number" ? frame.event.timestamp : null;
  }

  // The run's active time, from the execution's duration model.
  renderDuration(now) {
    const ms = this.timeline.durations.active(this.pk, now);
    this.head.querySelector(".lane-duration").textContent = ms === null ? "" : formatDuration(ms / 1000);
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
    item.element.dataset.run = this.pk;
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
