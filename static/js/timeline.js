// Execution timeline: one lane per harness run, side by side and aligned in time, fed by /ws/executions/<pk>/.
//
// The socket replays stored AG-UI events after our cursor, says `ready`, then streams live ones; we keep the
// last position received as the cursor and resubscribe from it after a reconnect. Frames are queued and drawn
// in requestAnimationFrame batches so a 20,000-event execution opens without freezing the page; deltas are
// folded into their message and runs of harness CUSTOM events into one collapsed group.
//
// Every string from an event reaches the DOM through textContent / text nodes, never as HTML.

import { LaneComparison } from "./compare.js";
import { ReconnectingSocket } from "./socket.js";

const BATCH_BUDGET_MS = 12;
const CURSOR_ERRORS = new Set(["cursor_beyond_end", "cursor_execution_mismatch", "bad_cursor"]);
const MAX_RESETS = 3;
const FRAGMENT_EVENT_NAME = "a13n.stream.fragment";
const DECISION_EVENT_NAME = "a13n.host.decision";
const LIFECYCLE_EVENT_NAME = "a13n.harness.lifecycle";
// A pause shorter than this between runs is not drawn.
const GAP_MIN_MS = 1000;
const VERDICTS = {
  approved: "approved",
  denied: "denied",
  expired: "expired",
  external_result: "result entered",
  answered: "answered",
  cancelled: "cancelled",
};
const ACTIVE_STATUSES = new Set(["queued", "running", "waiting", "recovering"]);

function el(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined && text !== null) element.textContent = String(text);
  return element;
}

function link(className, text, href, title) {
  const anchor = el("a", className, text);
  anchor.href = href;
  if (title) anchor.title = title;
  return anchor;
}

// JSON (or JSON-in-a-string, as tool arguments and results often are) pretty-printed; other text as is.
function pretty(value) {
  if (typeof value === "string") {
    try {
      const parsed = JSON.parse(value);
      if (parsed !== null && typeof parsed === "object") return JSON.stringify(parsed, null, 2);
    } catch {
      // not JSON: show the text itself
    }
    return value;
  }
  return JSON.stringify(value, null, 2);
}

// The exact time of an event in the server's zone, zone named: "2026-11-30 16:09:30.123 UTC".
function exactTime(ms, timeZone) {
  if (typeof ms !== "number") return "";
  const format = new Intl.DateTimeFormat("sv-SE", {
    timeZone: timeZone || "UTC",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    fractionalSecondDigits: 3,
    timeZoneName: "short",
    hour12: false,
  });
  return format.format(new Date(ms)).replace(",", ".");
}

// "+12.3 s": an event's place on the execution's time axis, from its first event.
function offset(ms, origin) {
  if (typeof ms !== "number" || origin === null) return "";
  return `+${formatDuration(Math.max(0, ms - origin) / 1000)}`;
}

// Same format as runs.services.timeline.format_duration.
function formatDuration(seconds) {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.floor(seconds);
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) return `${minutes} min ${String(whole % 60).padStart(2, "0")} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

// "1 event", "2 events": English plurals of the nouns this page counts.
function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function setStatus(element, status) {
  if (!element || !status) return;
  element.textContent = status;
  element.className = `${element.className.replace(/\bstatus-\S+/g, "").trim()} status-${status}`;
}

// AG-UI usage is a list of TokenUsage entries (one per model/provider).
function usageText(usage) {
  const entries = Array.isArray(usage) ? usage : usage ? [usage] : [];
  if (entries.length === 0) return null;
  const texts = entries.map((entry) => {
    const parts = [`in ${entry.inputTokens ?? 0}`, `out ${entry.outputTokens ?? 0}`];
    if (entry.reasoningTokens) parts.push(`reasoning ${entry.reasoningTokens}`);
    if (entry.cachedInputTokens) parts.push(`cached ${entry.cachedInputTokens}`);
    const label = [entry.provider, entry.model].filter(Boolean).join(" ");
    return `${label ? `${label}: ` : ""}${parts.join(" · ")}`;
  });
  return `tokens: ${texts.join("; ")}`;
}

// What the RUN_ERROR's failure details say (runs/services/failures.py shows the same on the run page).
// Provider response bodies are never stored, so there is none to show.
function failureFacts(event, run) {
  const details = event.rawEvent?.failure?.details ?? {};
  const facts = el("dl", "failure-facts");
  const fact = (label, value, className = "") => {
    if (value === undefined || value === null || value === "") return;
    facts.append(el("dt", null, label), el("dd", className, value));
  };
  fact("Code", event.code, "mono failure-code");
  fact("Exception", details.error_type, "mono failure-type");
  fact("Its message", details.error_message, "failure-error-message");
  fact("HTTP status", details.status_code, "failure-status");
  fact("Provider code", details.provider_error_code, "mono failure-provider-code");
  fact("Model", details.model_name, "mono");
  if (run.attempt) fact("Attempt", `${run.attempt} · tool recovery ${run.tool_recovery}`, "failure-attempt");
  if (String(event.code ?? "").startsWith("model_")) {
    const note = el("dd", "sub failure-body-note", "The provider's response body is not stored: it can echo prompts and secrets.");
    facts.append(note);
  }
  return facts;
}

// One visible entry of a lane: a message, a tool call, a terminal card, a group of harness events, ...
class Item {
  constructor(timeline, kind, frame, label) {
    this.timeline = timeline;
    this.kind = kind;
    this.positions = [];
    this.element = el("article", `item item-${kind}`);
    this.element.id = `pos-${frame.position}`;
    this.timestamp = frame.event.timestamp;
    const head = el("header", "item-head");
    this.label = el("span", "item-label", label);
    this.extra = el("span", "item-extra");
    head.append(
      this.label,
      this.extra,
      timeline.timeElement(frame.event.timestamp),
      link("item-pos", `#${frame.position}`, `#pos-${frame.position}`, "Permalink"),
      link("item-raw", "raw", timeline.eventUrl(frame.position), "Raw JSON of this event"),
    );
    this.body = el("div", "item-body");
    this.element.append(head, this.body);
  }

  claim(position) {
    this.positions.push(position);
    this.timeline.claim(position, this);
  }

  section(label, className = "") {
    const section = el("div", `section ${className}`.trim());
    section.append(el("div", "section-label", label));
    this.body.append(section);
    return section;
  }

  reveal() {}
}

// Consecutive harness CUSTOM events of one scope, collapsed; rows are built only when opened.
// An oversized CUSTOM event arrives as `a13n.stream.fragment` events (spec 4.8): it gets one row, shown once
// its last fragment is in, with the original name and value.
class GroupItem extends Item {
  constructor(timeline, frame) {
    super(timeline, "group", frame, "harness events");
    this.entries = [];
    this.count = 0;
    this.names = new Set();
    this.details = el("details", "group");
    this.summary = el("summary");
    this.list = el("div", "group-list");
    this.rendered = 0;
    this.details.append(this.summary, this.list);
    this.details.addEventListener("toggle", () => this.renderRows());
    this.body.append(this.details);
  }

  add(frame) {
    this.count += 1;
    this.claim(frame.position);
    const event = frame.event;
    if (event.name === FRAGMENT_EVENT_NAME) {
      const whole = this.timeline.assemble(event.value);
      if (whole) {
        this.entries.push({ position: frame.position, name: whole.name, value: whole.value, note: whole.note });
        this.names.add(whole.name);
      }
    } else {
      this.entries.push({ position: frame.position, name: event.name, value: event.value });
      this.names.add(event.name);
    }
    const labels = Array.from(new Set(Array.from(this.names, (name) => this.timeline.eventLabel(name))));
    const shown = labels.slice(0, 3).join(", ") + (labels.length > 3 ? `, +${labels.length - 3} more` : "");
    this.summary.textContent = `${plural(this.count, "harness event")}: ${shown}`;
    this.summary.title = Array.from(this.names).join(", ");
    if (this.details.open) this.renderRows();
  }

  renderRows() {
    if (!this.details.open) return;
    for (; this.rendered < this.entries.length; this.rendered += 1) {
      const entry = this.entries[this.rendered];
      const row = el("div", "group-row");
      row.dataset.pos = entry.position;
      row.append(
        link("item-pos", `#${entry.position}`, `#pos-${entry.position}`),
        el("span", "group-name", `${this.timeline.eventLabel(entry.name)}${entry.note ? ` (${entry.note})` : ""}`),
        link("item-raw", "raw", this.timeline.eventUrl(entry.position)),
        el("code", "group-raw-name sub", entry.name),
        el("pre", "json", pretty(entry.value)),
      );
      this.list.append(row);
    }
  }

  reveal(position) {
    this.details.open = true;
    this.renderRows();
    return this.list.querySelector(`[data-pos="${position}"]`);
  }
}

// Where items of one run (root) or one inline child run go.
class Scope {
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

class Lane {
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
    this.firstTimestamp = null;
    this.lastTimestamp = null;
    this.previousTimestamp = null;
    this.resetScopes();
    this.update(summary);
  }

  resetScopes() {
    this.scopes = new Map([["", new Scope(this.timeline, this, null, null)]]);
    this.items = []; // the run's own top-level items, in order (what a comparison lines up)
    this.count = 0;
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
    if (!before || before.lastTimestamp === null || typeof start !== "number") return;
    const { reason } = this.summary;
    let cause = "before the next run";
    if (reason === "resume") cause = "from the answer to the resuming run";
    if (reason === "recovery") cause = before.summary.status === "abandoned" ? "lease expired, then recovery" : "until recovery";
    this.timeline.gap(start - before.lastTimestamp, cause, this.column);
  }

  saw(frame) {
    this.count += 1;
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

const HANDLERS = {
  RUN_STARTED(timeline, scope, frame, event) {
    const item = scope.add(new Item(timeline, "marker", frame, "run started"));
    item.extra.textContent = event.runId;
    item.claim(frame.position);
  },

  TEXT_MESSAGE_START(timeline, scope, frame, event) {
    timeline.message(scope, frame, event).claim(frame.position);
  },
  TEXT_MESSAGE_CONTENT(timeline, scope, frame, event) {
    const item = timeline.message(scope, frame, event);
    item.text.appendData(event.delta);
    item.claim(frame.position);
  },
  TEXT_MESSAGE_END(timeline, scope, frame, event) {
    const item = timeline.message(scope, frame, event);
    item.element.classList.remove("streaming");
    item.claim(frame.position);
  },

  REASONING_MESSAGE_START(timeline, scope, frame, event) {
    timeline.reasoning(scope, frame, event.messageId).claim(frame.position);
  },
  REASONING_MESSAGE_CONTENT(timeline, scope, frame, event) {
    const item = timeline.reasoning(scope, frame, event.messageId);
    item.text.appendData(event.delta);
    item.summary.textContent = `reasoning · ${plural(item.text.length, "character")}`;
    item.claim(frame.position);
  },
  REASONING_MESSAGE_END(timeline, scope, frame, event) {
    const item = timeline.reasoning(scope, frame, event.messageId);
    item.element.classList.remove("streaming");
    item.claim(frame.position);
  },
  REASONING_ENCRYPTED_VALUE(timeline, scope, frame, event) {
    const item = timeline.reasoning(scope, frame, event.entityId);
    // The provider's opaque reasoning signature: kept for the next request, nothing a person can read.
    item.extra.textContent = "signed by the provider (not readable)";
    item.claim(frame.position);
  },

  TOOL_CALL_START(timeline, scope, frame, event) {
    timeline.tool(scope, frame, event.toolCallId, event.toolCallName).claim(frame.position);
  },
  TOOL_CALL_ARGS(timeline, scope, frame, event) {
    const item = timeline.tool(scope, frame, event.toolCallId);
    item.rawArgs += event.delta;
    item.args.textContent = item.rawArgs;
    item.claim(frame.position);
  },
  TOOL_CALL_END(timeline, scope, frame, event) {
    const item = timeline.tool(scope, frame, event.toolCallId);
    item.args.textContent = item.rawArgs ? pretty(item.rawArgs) : "(no arguments)";
    item.element.classList.remove("streaming");
    item.calledAt = frame.event.timestamp;
    if (scope.lane.summary.status === "running" && !item.element.classList.contains("has-result")) timeline.startRunning(item);
    item.claim(frame.position);
  },
  TOOL_CALL_RESULT(timeline, scope, frame, event) {
    const item = timeline.tool(scope, frame, event.toolCallId);
    item.element.classList.remove("streaming");
    timeline.stopRunning(item);
    if (typeof item.calledAt === "number" && typeof frame.event.timestamp === "number") {
      const took = el("span", "tool-duration", `took ${formatDuration((frame.event.timestamp - item.calledAt) / 1000)}`);
      item.extra.after(took);
    }
    item.element.classList.add("has-result");
    item.result.hidden = false;
    item.result.querySelector("pre").textContent = pretty(event.content);
    item.claim(frame.position);
  },

  RUN_FINISHED(timeline, scope, frame, event) {
    const outcome = event.outcome?.type ?? "success";
    scope.stopTools();
    let item;
    if (outcome === "interrupt") {
      item = scope.add(new Item(timeline, "interrupt", frame, "waiting for approval"));
      for (const interrupt of event.outcome.interrupts ?? []) item.body.append(timeline.interruptCard(interrupt));
    } else if (outcome === "cancelled") {
      item = scope.add(new Item(timeline, "cancelled", frame, "run cancelled"));
      scope.interruptOpenTools("cancelled before it returned");
    } else {
      item = scope.add(new Item(timeline, "finished", frame, "run finished"));
      if (event.result !== undefined) item.section("result").append(el("pre", "json", pretty(event.result)));
    }
    const usage = usageText(event.usage);
    if (usage) item.body.append(el("div", "usage", usage));
    item.claim(frame.position);
  },
  RUN_ERROR(timeline, scope, frame, event) {
    scope.stopTools();
    const item = scope.add(new Item(timeline, "error", frame, "run failed"));
    scope.interruptOpenTools("the run failed before it returned");
    if (event.code) item.extra.textContent = event.code;
    item.body.append(el("div", "error-message", event.message));
    item.body.append(failureFacts(event, scope.lane.summary));
    const usage = usageText(event.usage);
    if (usage) item.body.append(el("div", "usage", usage));
    item.claim(frame.position);
  },

  SUBAGENT_STARTED(timeline, scope, frame, event) {
    const lane = scope.lane;
    let child = lane.scopes.get(event.subagentRunId);
    if (!child) {
      const parent = lane.scopes.get(event.parentSubagentRunId ?? "") ?? scope;
      const tool = parent.tools.get(event.parentToolCallId);
      child = lane.nest(parent, tool, event.subagentRunId, event.name ?? event.subagentRunId, frame);
    }
    child.item.claim(frame.position);
  },
  SUBAGENT_FINISHED(timeline, scope, frame) {
    const item = scope.item ?? timeline.generic(scope, frame);
    setStatus(item.status, "completed");
    item.claim(frame.position);
  },
  SUBAGENT_ERROR(timeline, scope, frame, event) {
    const item = scope.item ?? timeline.generic(scope, frame);
    setStatus(item.status, "failed");
    item.body.append(el("div", "error-message", [event.code, event.message].filter(Boolean).join(": ")));
    item.claim(frame.position);
  },

  CUSTOM(timeline, scope, frame, event) {
    if (event.name === LIFECYCLE_EVENT_NAME) {
      const type = event.value?.event?.payload?.type;
      if (type === "model_request_started") scope.modelRequest = { startedAt: frame.event.timestamp, firstAt: null, item: null };
      if (type === "model_request_completed" || type === "model_request_failed") scope.modelRequestEnded(frame.event.timestamp);
    }
    if (event.name === DECISION_EVENT_NAME) {
      const lane = scope.lane;
      if (lane.previousTimestamp !== null && typeof frame.event.timestamp === "number") {
        const waited = frame.event.timestamp - lane.previousTimestamp;
        timeline.gap(waited, event.value?.expired ? "waiting for approval, then expired" : "waiting for approval", lane.column);
      }
      timeline.decision(scope, frame, event.value ?? {}).claim(frame.position);
      return;
    }
    if (typeof event.name === "string" && event.name.startsWith("a13n.input.")) {
      const input = event.value?.event ?? {};
      const item = scope.add(new Item(timeline, "input", frame, `input · ${input.source ?? event.name.slice(11)}`));
      item.body.append(el("div", "message-text", typeof input.content === "string" ? input.content : pretty(input)));
      item.claim(frame.position);
      return;
    }
    if (!scope.group) {
      const group = scope.add(new GroupItem(timeline, frame));
      scope.group = group;
    }
    scope.group.add(frame);
  },
};

class Timeline {
  constructor(root, config) {
    this.root = root;
    this.config = config;
    this.status = document.getElementById("execution-status");
    this.connection = document.getElementById("connection");
    this.cursor = 0; // last position received: where a reconnect resumes
    this.rendered = 0; // last position drawn
    this.queue = [];
    this.queueHead = 0;
    this.scheduled = false;
    this.heads = root.querySelector(".lane-heads");
    this.lanes = new Map();
    this.byPosition = new Map();
    // Calls made before this execution's first event (a fork's or a resume's start checkpoint), by id.
    this.toolsById = new Map(Object.entries(config.inheritedTools ?? {}));
    this.toolCards = new Map(); // tool call id -> the card of the call itself (where a decision's outcome goes)
    this.formLinks = new Map(); // tool call id -> its interrupt card's link to the form, or the note that replaced it
    this.executionStatus = config.status;
    this.origin = null; // the first event's timestamp: zero of the time axis
    this.running = new Set(); // tool cards whose call is under way
    const toggle = document.getElementById("compare-toggle");
    this.comparison = toggle ? new LaneComparison(this, toggle, document.getElementById("compare")) : null;
    this.fragments = new Map();
    this.touched = new Set();
    this.wanted = null;
    this.resets = 0;
    this.received = 0; // event frames received, duplicates included
    this.subscriptions = []; // the cursor sent with each subscribe
    for (const summary of config.runs) this.lane(summary);
    window.addEventListener("hashchange", () => this.want(location.hash));
    this.want(location.hash);
    setInterval(() => {
      for (const lane of this.lanes.values()) if (lane.summary.status === "running") lane.renderDuration();
      for (const tool of this.running) this.renderElapsed(tool);
      this.renderTotals();
    }, 1000);
  }

  // A human label for a CUSTOM event name (the server's list); an unknown name is shown as it is.
  eventLabel(name) {
    return this.config.eventLabels?.[name] ?? name;
  }

  eventUrl(position) {
    return this.config.eventUrl.replace(/0\/$/, `${position}/`);
  }

  runUrl(pk) {
    return this.config.runUrl.replace(/0\/$/, `${pk}/`);
  }

  lane(summary) {
    let lane = this.lanes.get(summary.pk);
    if (!lane) {
      lane = new Lane(this, summary);
      this.lanes.set(summary.pk, lane);
      this.root.style.setProperty("--lanes", this.lanes.size);
      this.comparison?.lanesChanged();
      document.getElementById("timeline-empty").hidden = true;
    }
    return lane;
  }

  timeElement(timestamp) {
    const element = el("time", "item-time", offset(timestamp, this.origin));
    element.title = exactTime(timestamp, this.config.timeZone);
    if (typeof timestamp === "number") element.dateTime = new Date(timestamp).toISOString();
    return element;
  }

  // A pause on the time axis, across all lanes: its length grows with the pause (log scale), labelled.
  gap(ms, cause, column) {
    if (!(ms >= GAP_MIN_MS)) return;
    const gap = el("div", "time-gap");
    gap.style.setProperty("--gap-size", `${Math.min(6, 1 + Math.log2(1 + ms / 1000) * 0.5)}rem`);
    gap.dataset.column = column;
    gap.append(el("span", "gap-label", `${formatDuration(ms / 1000)} · ${cause}`));
    this.root.append(gap);
  }

  startRunning(tool) {
    tool.element.classList.add("running");
    tool.element.setAttribute("aria-busy", "true");
    tool.elapsed = el("span", "tool-elapsed");
    tool.extra.after(tool.elapsed);
    this.running.add(tool);
    this.renderElapsed(tool);
  }

  stopRunning(tool) {
    if (!this.running.delete(tool)) return;
    tool.element.classList.remove("running");
    tool.element.removeAttribute("aria-busy");
    tool.elapsed.remove();
  }

  renderElapsed(tool) {
    const ms = Math.max(0, Date.now() - tool.calledAt);
    tool.elapsed.dataset.elapsedMs = ms;
    tool.elapsed.textContent = `running ${formatDuration(ms / 1000)}`;
  }

  // The execution's totals: runs, wall time from the first run's start to the last one's end, tokens.
  renderTotals() {
    const element = document.getElementById("execution-totals");
    if (!element || this.lanes.size === 0) return;
    const lanes = Array.from(this.lanes.values());
    const starts = lanes.map((lane) => Date.parse(lane.summary.started_at)).filter((ms) => !Number.isNaN(ms));
    const active = lanes.some((lane) => lane.summary.status === "running") || ACTIVE_STATUSES.has(this.executionStatus);
    const ends = lanes.map((lane) => Date.parse(lane.summary.finished_at)).filter((ms) => !Number.isNaN(ms));
    const parts = [plural(lanes.length, "run")];
    if (starts.length) {
      const end = active ? Date.now() : Math.max(...ends, ...starts);
      parts.push(`wall time ${formatDuration(Math.max(0, end - Math.min(...starts)) / 1000)}`);
    }
    const tokens = lanes.map((lane) => lane.summary.tokens).filter(Boolean);
    if (tokens.length) {
      const sum = (key) => tokens.reduce((total, entry) => total + (entry[key] ?? 0), 0);
      parts.push(`${sum("input")} in · ${sum("output")} out tokens`);
    }
    element.textContent = parts.join(" · ");
  }

  // Items stack in event order (block flow, cheap to lay out at any length); --col shifts each into its lane.
  place(element, column) {
    element.style.setProperty("--col", column - 1);
    this.root.append(element);
  }

  claim(position, item) {
    this.byPosition.set(position, item);
    this.touched.add(item);
  }

  message(scope, frame, event) {
    let item = scope.messages.get(event.messageId);
    if (!item) {
      item = scope.add(new Item(this, "message", frame, event.role ?? "assistant"));
      scope.modelItem(item, frame.event.timestamp);
      item.element.classList.add("streaming");
      const text = el("div", "message-text");
      item.text = document.createTextNode("");
      text.append(item.text);
      item.body.append(text);
      scope.messages.set(event.messageId, item);
    }
    return item;
  }

  reasoning(scope, frame, messageId) {
    let item = scope.messages.get(messageId);
    if (!item) {
      item = scope.add(new Item(this, "reasoning", frame, "reasoning"));
      scope.modelItem(item, frame.event.timestamp);
      item.element.classList.add("streaming");
      const details = el("details", "reasoning");
      item.summary = el("summary", null, "reasoning");
      const text = el("div", "message-text");
      item.text = document.createTextNode("");
      text.append(item.text);
      details.append(item.summary, text);
      item.body.append(details);
      scope.messages.set(messageId, item);
    }
    return item;
  }

  tool(scope, frame, toolCallId, name) {
    let item = scope.tools.get(toolCallId);
    if (!item) {
      // A result whose call was made by an earlier run (e.g. an approved call executed on resume).
      const known = name ?? this.toolsById.get(toolCallId);
      item = scope.add(new Item(this, "tool", frame, known ? `tool ${known}` : "tool result"));
      if (name !== undefined) scope.modelItem(item, frame.event.timestamp);
      item.element.classList.add("streaming");
      item.extra.textContent = toolCallId;
      item.rawArgs = "";
      if (name === undefined) {
        item.args = el("pre");
      } else {
        item.args = item.section("arguments", "tool-args").appendChild(el("pre", "json"));
      }
      item.children = el("div", "tool-children");
      item.body.append(item.children);
      item.result = item.section("result", "tool-result");
      item.result.append(el("pre", "json"));
      item.result.hidden = true;
      scope.tools.set(toolCallId, item);
      if (name) this.toolsById.set(toolCallId, name);
      if (!this.toolCards.has(toolCallId)) this.toolCards.set(toolCallId, item);
    }
    return item;
  }

  interruptCard(interrupt) {
    const metadata = interrupt.metadata ?? {};
    const card = el("div", `interrupt-card reason-${interrupt.reason ?? "approval"}`);
    const title = interrupt.reason === "external" ? "waiting for an external result" : "waiting for approval";
    card.append(el("div", "interrupt-title", `${title}: ${metadata.tool_name ?? "tool"}`));
    card.append(el("div", "mono sub", interrupt.toolCallId ?? interrupt.id));
    if (metadata.args !== undefined) card.append(el("pre", "json", pretty(metadata.args)));
    // Only a set the execution still waits on can be answered; its decision item or the status closes the link.
    const callId = interrupt.toolCallId ?? interrupt.id;
    if (this.executionStatus !== "waiting") {
      const note = card.appendChild(el("div", "interrupt-closed sub", "no longer open"));
      this.formLinks.set(callId, note);
      return card;
    }
    const open = link("interrupt-link", "Open the approval form", this.config.approvalsUrl);
    // The form is on this page while the execution waits (approvals.js may load it later than this card).
    open.addEventListener("click", (event) => {
      const form = document.getElementById("approval-form");
      if (!form) return;
      event.preventDefault();
      form.scrollIntoView({ block: "start" });
      form.querySelector("input[type=radio], textarea, button")?.focus();
    });
    card.append(open);
    this.formLinks.set(callId, open);
    return card;
  }

  // The status closes a link ("no longer open"); a decision item also names the verdict (`final`).
  closeFormLink(callId, text, final = false) {
    const current = this.formLinks.get(callId);
    if (!current) return;
    if (current.tagName === "A") {
      const note = el("div", "interrupt-closed sub", text);
      current.replaceWith(note);
      this.formLinks.set(callId, note);
    } else if (final) {
      current.textContent = text;
    }
  }

  // A decided (or expired) set: one item with who, when, each verdict, edits as a diff and the message; the
  // calls' own tool cards get their outcome, and the interrupt cards lose their link to the form.
  decision(scope, frame, value) {
    const who = value.decided_by ?? "the host";
    const calls = value.calls ?? [];
    const cancelled = calls.length > 0 && calls.every((call) => call.verdict === "cancelled");
    const label = value.expired ? "expired" : `${cancelled ? "cancelled" : "decided"} by ${who}`;
    const item = scope.add(new Item(this, "decision", frame, label));
    item.element.classList.toggle("expired", Boolean(value.expired));
    item.extra.textContent = value.resume_run ? `run ${value.resume_run} resumes` : "";
    item.element.querySelector(".item-time").title = value.decided_at ?? "";
    if (value.expired) item.body.append(el("div", "decision-note", "No answer arrived before the approval timeout."));
    for (const call of calls) {
      const verdict = call.edits?.length ? "approved with edited arguments" : (VERDICTS[call.verdict] ?? call.verdict);
      const row = el("div", `decided-call verdict-${call.verdict}`);
      const head = el("div", "decided-head");
      head.append(el("code", "tool-name", call.tool_name), el("span", "badge verdict", verdict), el("span", "mono sub", call.tool_call_id));
      row.append(head);
      if (call.edits?.length) row.append(this.argumentDiff(call.edits));
      if (call.message) row.append(el("div", "decision-message", call.message));
      if (call.result !== null && call.result !== undefined) row.append(el("pre", "json decision-result", pretty(call.result)));
      item.body.append(row);
      this.settle(call, verdict, who);
    }
    document.dispatchEvent(
      new CustomEvent("harness:decision", {
        detail: {
          execution: this.config.execution,
          calls: calls.map((call) => call.tool_call_id),
          expired: Boolean(value.expired),
          cancelled,
          decidedBy: value.decided_by ?? null,
          decidedAt: value.decided_at ?? null,
        },
      }),
    );
    return item;
  }

  argumentDiff(edits) {
    const table = el("table", "arg-diff");
    table.append(el("caption", "sub", "edited arguments"));
    for (const edit of edits) {
      const row = el("tr", `diff-${edit.change}`);
      const before = el("td", "diff-before");
      const after = el("td", "diff-after");
      if (edit.change !== "added") before.append(el("del", "json", JSON.stringify(edit.before)));
      if (edit.change !== "removed") after.append(el("ins", "json", JSON.stringify(edit.after)));
      row.append(el("th", "mono", edit.path), before, el("td", "diff-arrow", "→"), after);
      table.append(row);
    }
    return table;
  }

  // The outcome of a decided call on the card of the call itself (a denied call has no later card at all).
  settle(call, verdict, who) {
    const card = this.toolCards.get(call.tool_call_id);
    this.closeFormLink(call.tool_call_id, `${verdict} (see the decision below)`, true);
    if (!card) return;
    card.element.classList.remove("streaming");
    card.element.classList.add(`outcome-${call.verdict}`);
    const outcome = card.outcome ?? (card.outcome = card.section("outcome", "tool-outcome"));
    outcome.replaceChildren(outcome.firstChild, el("div", "outcome-text", `${verdict} by ${who}${call.message ? `: ${call.message}` : ""}`));
  }

  // The original CUSTOM event once all fragments of `value.id` are in (null before, or if they do not parse).
  assemble(value) {
    let parts = this.fragments.get(value.id);
    if (!parts) {
      parts = new Array(value.count).fill(null);
      this.fragments.set(value.id, parts);
    }
    parts[value.index] = value.data;
    if (parts.some((part) => part === null)) return null;
    this.fragments.delete(value.id);
    try {
      const event = JSON.parse(parts.join(""));
      return { name: event.name, value: event.value, note: `reassembled from ${parts.length} fragments` };
    } catch {
      return null;
    }
  }

  generic(scope, frame) {
    const item = scope.add(new Item(this, "generic", frame, frame.event.type));
    item.body.append(el("pre", "json", pretty(frame.event)));
    return item;
  }

  // --- socket input ---

  receive(message) {
    switch (message.type) {
      case "event":
        this.enqueue(message);
        break;
      case "events":
        for (const frame of message.events) this.enqueue(frame);
        break;
      case "status":
        this.executionStatus = message.status;
        setStatus(this.status, message.status);
        if (message.status !== "waiting") for (const callId of this.formLinks.keys()) this.closeFormLink(callId, "no longer open");
        for (const form of document.querySelectorAll("form.cancel")) form.hidden = !ACTIVE_STATUSES.has(message.status);
        // Once a worker took the run, the page no longer waits for the queue.
        if (message.status !== "queued") document.getElementById("queue-wait")?.remove();
        for (const run of message.runs ?? []) this.lane(run).update(run);
        // approvals.js fetches the approval form when the execution starts waiting.
        document.dispatchEvent(
          new CustomEvent("harness:execution-status", {
            detail: { execution: message.execution, status: message.status },
          }),
        );
        break;
      case "ready":
        this.setConnection("live");
        break;
      case "error":
        this.onError(message);
        break;
      default:
        break;
    }
  }

  enqueue(frame) {
    this.received += 1;
    if (frame.position <= this.cursor) return; // already have it (never expected; cheap to guard)
    this.cursor = frame.position;
    this.queue.push(frame);
    this.schedule();
  }

  onError(message) {
    this.setConnection("error", `${message.code}: ${message.message}`);
    if (CURSOR_ERRORS.has(message.code) && this.resets < MAX_RESETS) {
      // Our cursor no longer fits this timeline (e.g. the database was restored): start over from nothing.
      this.resets += 1;
      this.reset();
      this.socket.restart();
    }
  }

  reset() {
    for (const child of Array.from(this.root.children)) if (child !== this.heads) child.remove();
    this.cursor = 0;
    this.rendered = 0;
    this.queue = [];
    this.queueHead = 0;
    this.byPosition.clear();
    this.toolsById = new Map(Object.entries(this.config.inheritedTools ?? {}));
    this.toolCards.clear();
    this.formLinks.clear();
    this.fragments.clear();
    this.touched.clear();
    this.running.clear();
    for (const lane of this.lanes.values()) {
      lane.resetScopes();
      lane.placed = false;
    }
  }

  setConnection(state, detail) {
    this.connection.dataset.state = state;
    this.connection.textContent = state;
    this.connection.title = detail ?? "Live connection";
  }

  // --- drawing ---

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => this.drain());
  }

  drain() {
    this.scheduled = false;
    const started = performance.now();
    let applied = 0;
    while (this.queueHead < this.queue.length) {
      this.apply(this.queue[this.queueHead]);
      this.queueHead += 1;
      applied += 1;
      if (applied % 64 === 0 && performance.now() - started > BATCH_BUDGET_MS) break;
    }
    if (this.queueHead === this.queue.length) {
      this.queue = [];
      this.queueHead = 0;
    } else {
      this.schedule();
    }
    for (const item of this.touched) item.element.dataset.positions = item.positions.join(" ");
    this.touched.clear();
    for (const lane of this.lanes.values()) lane.renderCount();
    this.root.dataset.rendered = this.rendered;
    this.comparison?.refresh();
    this.showWanted();
  }

  apply(frame) {
    const lane = this.lane({ pk: frame.run, run_id: frame.run_id });
    lane.saw(frame);
    // SUBAGENT_STARTED carries the child's id but opens the child's lane inside its parent's scope.
    const scope =
      frame.event.type === "SUBAGENT_STARTED" ? lane.scopes.get("") : lane.scope(frame.subagent_run_id ?? "", frame);
    const handler = HANDLERS[frame.event.type];
    if (handler) {
      handler(this, scope, frame, frame.event);
    } else {
      this.generic(scope, frame).claim(frame.position);
    }
    this.rendered = frame.position;
  }

  // --- permalinks: #pos-N scrolls to the item holding position N and highlights it ---

  want(hash) {
    const match = /^#pos-(\d+)$/.exec(hash);
    this.wanted = match ? Number(match[1]) : null;
    this.showWanted();
  }

  showWanted() {
    if (this.wanted === null) return;
    const item = this.byPosition.get(this.wanted);
    if (!item) return;
    const target = item.reveal(this.wanted) ?? item.element;
    for (const old of this.root.querySelectorAll(".highlight")) old.classList.remove("highlight");
    target.classList.add("highlight");
    // Items off screen are laid out with an estimated height (content-visibility), so the first scroll can
    // land short; scrolling again once the neighbours have their real size settles it.
    let settles = 3;
    const scroll = () => {
      target.scrollIntoView({ block: "center" });
      settles -= 1;
      if (settles > 0) requestAnimationFrame(scroll);
    };
    scroll();
    this.wanted = null;
  }
}

const config = JSON.parse(document.getElementById("timeline-config").textContent);
const timeline = new Timeline(document.getElementById("timeline"), config);
timeline.socket = new ReconnectingSocket(config.socket, {
  onOpen: () => {
    timeline.setConnection("replaying");
    const after = timeline.cursor || null;
    timeline.subscriptions.push(after);
    timeline.socket.send({ type: "subscribe", execution: config.execution, after });
  },
  onMessage: (message) => timeline.receive(message),
  onState: (state) => timeline.setConnection(state),
});
timeline.socket.start();
window.harnessTimeline = timeline;
