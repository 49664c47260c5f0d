// Execution timeline: one lane per harness run, side by side and aligned in time, fed by /ws/executions/<pk>/.
//
// The socket replays stored AG-UI events after our cursor, says `ready`, then streams live ones; the feed keeps
// the last position received as the cursor and we resubscribe from it after a reconnect. Deltas are folded
// into their message and runs of harness CUSTOM events into one collapsed group. The modules: feed.js (cursor,
// queue, drawing batches; no DOM), handlers.js (one handler per event type), lanes.js (lanes and scopes),
// items.js (item kinds), fragments.js (oversized events), compare.js, dom.js (helpers shared by the pages).
// Constants come from the server, in the page's `timeline-config` (runs/services/reports/timeline_page.py).

import { LaneComparison } from "./compare.js";
import { el, exactTime, formatDuration, link, offset, plural, pretty, setStatus } from "./dom.js";
import { Durations } from "./durations.js";
import { Feed } from "./feed.js";
import { FragmentAssembler } from "./fragments.js";
import { HANDLERS } from "./handlers.js";
import { Item } from "./items.js";
import { Lane } from "./lanes.js";
import { ReconnectingSocket } from "./socket.js";
import { TimeAxis } from "./time_axis.js";
import { TimelineFilter } from "./timeline_filter.js";

// What a suspended run's interrupt card says it waits for, by the interrupt's reason (else an approval).
const INTERRUPT_TITLES = {
  external: "waiting for an external result",
  question: "waiting for an answer",
  child: "waiting for a child execution",
};

// AG-UI names a question's interrupt "external"; the tool's metadata carries the question.
function interruptKind(interrupt) {
  const reason = interrupt.reason ?? "approval";
  return reason === "external" && interrupt.metadata?.tool_metadata?.question !== undefined ? "question" : reason;
}

export class Timeline {
  constructor(root, config) {
    this.root = root;
    this.config = config;
    this.status = document.getElementById("execution-status");
    this.connection = document.getElementById("connection");
    this.feed = new Feed((frame) => this.apply(frame), () => this.drawn(), config.constants.batchBudgetMs);
    this.rendered = 0; // last position drawn
    this.heads = root.querySelector(".lane-heads");
    this.lanes = new Map();
    this.byPosition = new Map();
    // Calls made before this execution's first event (a fork's or a resume's start checkpoint), by id.
    this.toolsById = new Map(Object.entries(config.inheritedTools ?? {}));
    this.toolCards = new Map(); // tool call id -> the card of the call itself (where a decision's outcome goes)
    this.formLinks = new Map(); // tool call id -> its interrupt card's link to the form, or the note that replaced it
    this.executionStatus = config.status;
    this.durations = new Durations(config.times);
    // Zero of the time axis and of the cards' "+12.3 s": the first run's start (else its first event's time).
    this.origin = this.durations.start;
    this.gaps = []; // the pauses drawn between items: [{element, run, approval}], filled from the model
    this.running = new Set(); // tool cards whose call is under way
    const toggle = document.getElementById("compare-toggle");
    this.comparison = toggle ? new LaneComparison(this, toggle, document.getElementById("compare")) : null;
    // Harness bookkeeping (lifecycle, checkpoints) is behind one toggle: hidden until asked for.
    this.internalToggle = document.getElementById("internal-toggle");
    this.internalToggle?.addEventListener("click", () => this.showInternal(!root.classList.contains("show-internal")));
    const axis = document.getElementById("time-axis");
    this.axis = axis ? new TimeAxis(this, axis) : null;
    this.fragments = new FragmentAssembler();
    this.touched = new Set();
    this.wanted = null;
    this.resets = 0;
    this.subscriptions = []; // the cursor sent with each subscribe
    const filter = document.getElementById("timeline-filter");
    this.filter = filter ? new TimelineFilter(this, filter, document.getElementById("timeline-jumps")) : null;
    for (const summary of config.runs) this.lane(summary);
    window.addEventListener("hashchange", () => this.want(location.hash));
    this.want(location.hash);
    setInterval(() => {
      for (const tool of this.running) this.renderElapsed(tool);
      if (this.durations.open) this.renderTimes();
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

  executionUrl(pk) {
    return this.config.executionUrl.replace(/0\/$/, `${pk}/`);
  }

  lane(summary) {
    let lane = this.lanes.get(summary.pk);
    if (!lane) {
      lane = new Lane(this, summary);
      this.lanes.set(summary.pk, lane);
      this.root.style.setProperty("--lanes", this.lanes.size);
      this.comparison?.lanesChanged();
      this.renderSwitcher();
      this.filter?.lanesChanged(this.lanes.values());
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

  // A pause across all lanes after run `run`: the waits for its answers (`approval`, drawn at the decision) or
  // the others (drawn above the next lane's first item). Its text and size come from the model and follow it.
  gap(run, column, approval) {
    const gap = { element: el("div", "time-gap"), run, approval };
    gap.element.dataset.column = column;
    // A pause belongs to every lane: it is never hidden with one.
    gap.element.append(el("span", "gap-label"));
    this.root.append(gap.element);
    this.gaps.push(gap);
    this.renderGap(gap);
  }

  renderGap(gap, now = this.durations.now()) {
    const waits = this.durations.after(gap.run, { approval: gap.approval });
    const ms = waits.reduce((sum, wait) => sum + this.durations.length(wait, now), 0);
    gap.element.hidden = !(ms >= this.config.constants.gapMinMs);
    gap.element.style.setProperty("--gap-size", `${Math.min(6, 1 + Math.log2(1 + ms / 1000) * 0.5)}rem`);
    const cause = waits.map((wait) => wait.cause).join(", then ");
    const open = waits.some((wait) => wait.end === null) ? " so far" : "";
    gap.element.firstChild.textContent = `${formatDuration(ms / 1000)}${open} · ${cause}`;
  }

  // Everything that shows a duration, from the model: lane heads, gaps, the header's totals, the axis.
  renderTimes() {
    const now = this.durations.now();
    for (const lane of this.lanes.values()) lane.renderDuration(now);
    for (const gap of this.gaps) this.renderGap(gap, now);
    this.renderTotals(now);
    this.axis?.render();
  }

  // A run started or ended: the server's model changed (a failed fetch keeps the last one; the next status retries).
  async refreshTimes() {
    try {
      const response = await fetch(this.config.timesUrl, { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      this.durations.set(await response.json());
      this.origin ??= this.durations.start;
      this.renderTimes();
    } catch {
      // Offline for a moment: the socket reconnects and its first status frame fetches again.
    }
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

  // The execution's totals as the header says them (templates/runs/execution.html): runs, active time, wall
  // time with what of it was waiting, tokens.
  renderTotals(now = this.durations.now()) {
    const element = document.getElementById("execution-totals");
    if (!element) return;
    const totals = this.durations.totals(now);
    if (totals.runs === 0) return;
    const parts = [plural(totals.runs, "run"), `active ${formatDuration(totals.active / 1000)}`];
    const wall = `wall ${formatDuration(totals.wall / 1000)}`;
    parts.push(totals.waited >= 50 ? `${wall} (waited ${formatDuration(totals.waited / 1000)})` : wall);
    const tokens = Array.from(this.lanes.values(), (lane) => lane.summary.tokens).filter(Boolean);
    if (tokens.length) {
      const sum = (key) => tokens.reduce((total, entry) => total + (entry[key] ?? 0), 0);
      parts.push(`${sum("input")} in · ${sum("output")} out tokens`);
    }
    element.textContent = parts.join(" · ");
  }

  // On a narrow screen one lane is shown at a time: a switcher names every run, the latest one first chosen.
  renderSwitcher() {
    const switcher = document.getElementById("lane-switcher");
    if (!switcher) return;
    const lanes = Array.from(this.lanes.values());
    switcher.hidden = lanes.length < 2;
    if (this.shownLane === undefined || this.shownLane === lanes.length - 1) this.shownLane = lanes.length;
    switcher.replaceChildren(
      ...lanes.map((lane) => {
        const button = el("button", "lane-choice", `run ${lane.summary.number || lane.column}${lane.summary.reason ? ` · ${lane.summary.reason}` : ""}`);
        button.type = "button";
        button.setAttribute("aria-pressed", String(lane.column === this.shownLane));
        button.addEventListener("click", () => this.showLane(lane.column));
        return button;
      }),
    );
    this.showLane(this.shownLane);
  }

  showLane(column) {
    this.shownLane = column;
    this.root.dataset.lane = column;
    for (const [index, button] of Array.from(document.querySelectorAll("#lane-switcher .lane-choice")).entries()) {
      button.setAttribute("aria-pressed", String(index + 1 === column));
    }
    // timeline.css shows only this lane on a narrow screen (the page's CSP allows no inline style rules).
  }

  // Items stack in event order (block flow, cheap to lay out at any length); --col shifts each into its lane.
  place(element, column) {
    element.dataset.col = column;
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
      if (known) item.element.dataset.tool = known;
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

  // What a suspended run waits for, from its interrupts' reasons: one kind is named, a mix is "answers".
  waitingFor(interrupts) {
    const reasons = new Set(interrupts.map(interruptKind));
    if (reasons.size > 1) return "waiting for answers";
    return INTERRUPT_TITLES[[...reasons][0]] ?? "waiting for approval";
  }

  interruptCard(interrupt) {
    const metadata = interrupt.metadata ?? {};
    const card = el("div", `interrupt-card reason-${interrupt.reason ?? "approval"}`);
    const child = interrupt.reason === "child";
    const title = INTERRUPT_TITLES[interruptKind(interrupt)] ?? "waiting for approval";
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
    const open = link(
      "interrupt-link",
      child ? "Open the child execution" : "Open the approval form",
      this.config.approvalsUrl,
    );
    // The form is on this page while the execution waits (approvals.js may load it later than this card); so is
    // the link to a Host-managed child, in the waiting set's list of children.
    open.addEventListener("click", (event) => {
      if (child) {
        const childLink = document.querySelector(`.child-requests [data-call-id="${CSS.escape(interrupt.id)}"] a.child-link`);
        if (!childLink) return;
        event.preventDefault();
        window.location.assign(childLink.href);
        return;
      }
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

  // A decided (or expired) set, or a Host-managed child's answer: one item with who, when, each verdict, edits as
  // a diff and the message; the calls' own tool cards get their outcome, and the interrupt cards lose their link.
  decision(scope, frame, value) {
    const child = value.child;
    // Every child is execution #1 of its own thread: the note below names which one.
    const who = child ? "its child execution" : (value.decided_by ?? "the host");
    const calls = value.calls ?? [];
    const cancelled = calls.length > 0 && calls.every((call) => call.verdict === "cancelled");
    const label = value.expired ? "expired" : `${child ? "answered" : cancelled ? "cancelled" : "decided"} by ${who}`;
    const item = scope.add(new Item(this, "decision", frame, label));
    item.element.dataset.tool = calls.map((call) => call.tool_name).join(" ");
    item.element.classList.toggle("expired", Boolean(value.expired));
    item.extra.textContent = value.resume_run ? `run ${value.resume_run} resumes` : "";
    item.element.querySelector(".item-time").title = value.decided_at ?? "";
    if (value.expired) item.body.append(el("div", "decision-note", "No answer arrived before the approval timeout."));
    if (child) {
      const note = el("div", "decision-note", "The child execution ended: ");
      note.append(link("answering-child", `${child.thread} · execution #${child.number}`, this.executionUrl(child.execution)));
      item.body.append(note);
    }
    for (const call of calls) {
      const verdict = call.edits?.length
        ? "approved with edited arguments"
        : child && call.verdict === "external_result"
          ? "the child's result"
          : (this.config.constants.verdicts[call.verdict] ?? call.verdict);
      const row = el("div", `decided-call verdict-${call.verdict}`);
      const head = el("div", "decided-head");
      head.append(el("code", "tool-name", call.tool_name), el("span", "badge verdict", verdict), el("span", "mono sub", call.tool_call_id));
      row.append(head);
      if (call.edits?.length) row.append(this.argumentDiff(call.edits));
      if (call.message) row.append(el("div", "decision-message", call.message));
      if (call.result !== null && call.result !== undefined) row.append(el("pre", "json decision-result", pretty(call.result)));
      item.body.append(row);
      this.settle(call, verdict, child ? null : who);
    }
    document.dispatchEvent(
      new CustomEvent("harness:decision", {
        detail: {
          execution: this.config.execution,
          calls: calls.map((call) => call.tool_call_id),
          expired: Boolean(value.expired),
          cancelled,
          decidedBy: child ? who : (value.decided_by ?? null),
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
      const key = el("th", "mono", edit.path);
      key.title = edit.path;
      row.append(key, before, el("td", "diff-arrow", "→"), after);
      table.append(row);
    }
    return table;
  }

  // The outcome of a decided call on the card of the call itself (its result, a denial's too, shows in the lane of
  // the run that resumes); `who` is null for a child's answer, whose verdict already says where it came from.
  settle(call, verdict, who) {
    const card = this.toolCards.get(call.tool_call_id);
    this.closeFormLink(call.tool_call_id, `${verdict} (see the decision below)`, true);
    if (!card) return;
    card.element.classList.remove("streaming");
    card.element.classList.add(`outcome-${call.verdict}`);
    const outcome = card.outcome ?? (card.outcome = card.section("outcome", "tool-outcome"));
    const by = who ? ` by ${who}` : "";
    outcome.replaceChildren(outcome.firstChild, el("div", "outcome-text", `${verdict}${by}${call.message ? `: ${call.message}` : ""}`));
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
        this.feed.push(message);
        break;
      case "events":
        for (const frame of message.events) this.feed.push(frame);
        break;
      case "status":
        this.executionStatus = message.status;
        setStatus(this.status, message.status);
        if (message.status !== "waiting") for (const callId of this.formLinks.keys()) this.closeFormLink(callId, "no longer open");
        for (const form of document.querySelectorAll("form.cancel")) form.hidden = !this.config.constants.activeStatuses.includes(message.status);
        // Once a worker took the run, the page no longer waits for the queue.
        if (message.status !== "queued") document.getElementById("queue-wait")?.remove();
        for (const run of message.runs ?? []) this.lane(run).update(run);
        if (message.runs?.length) this.filter?.lanesChanged(this.lanes.values());
        this.refreshTimes();
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

  showInternal(shown) {
    this.root.classList.toggle("show-internal", shown);
    if (!this.internalToggle) return;
    this.internalToggle.setAttribute("aria-pressed", String(shown));
    this.internalToggle.textContent = shown ? "Hide harness events" : "Show harness events";
  }

  // Read by the browser tests: what the feed received and where a reconnect resumes.
  get received() {
    return this.feed.received;
  }

  get cursor() {
    return this.feed.cursor;
  }

  onError(message) {
    this.setConnection("error", `${message.code}: ${message.message}`);
    if (this.config.constants.cursorErrors.includes(message.code) && this.resets < this.config.constants.maxResets) {
      // Our cursor no longer fits this timeline (e.g. the database was restored): start over from nothing.
      this.resets += 1;
      this.reset();
      this.socket.restart();
    }
  }

  reset() {
    for (const child of Array.from(this.root.children)) if (child !== this.heads) child.remove();
    this.feed.reset();
    this.rendered = 0;
    this.byPosition.clear();
    this.toolsById = new Map(Object.entries(this.config.inheritedTools ?? {}));
    this.toolCards.clear();
    this.formLinks.clear();
    this.fragments.clear();
    this.touched.clear();
    this.running.clear();
    this.gaps = [];
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

  // After each batch the feed drew: positions on the items, counts, the comparison, a wanted permalink.
  drawn() {
    for (const item of this.touched) item.element.dataset.positions = item.positions.join(" ");
    // New and changed cards obey the filter in force.
    this.filter?.refresh(Array.from(this.touched, (item) => item.element));
    this.touched.clear();
    for (const lane of this.lanes.values()) lane.renderCount();
    this.root.dataset.rendered = this.rendered;
    this.comparison?.refresh();
    this.axis?.render();
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
    if (item.kind === "group") this.showInternal(true);
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
