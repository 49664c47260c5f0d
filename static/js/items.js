// The items of a lane: one visible entry each (a message, a tool call, a terminal card, a group of harness
// events, ...), and what failure and usage cards say.

import { el, link, plural, pretty } from "./dom.js";

// AG-UI usage is a list of TokenUsage entries (one per model/provider).
export function usageText(usage) {
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

// What the RUN_ERROR's failure details say (runs/services/reports/failures.py shows the same on the run page).
// Provider response bodies are never stored, so there is none to show.
export function failureFacts(event, run) {
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
export class Item {
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
// An oversized CUSTOM event arrives as `a13n.stream.fragment` events: it gets one row, shown once
// its last fragment is in, with the original name and value.
export class GroupItem extends Item {
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
    if (event.name === this.timeline.config.constants.fragmentEventName) {
      const whole = this.timeline.fragments.add(event.value);
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
