// What each AG-UI event type does to the timeline: one handler per type, given the timeline, the scope the
// event belongs to, its frame and the event.

import { el, formatDuration, plural, pretty, setStatus } from "./dom.js";
import { GroupItem, Item, failureFacts, usageText } from "./items.js";
import { clamp } from "./reading.js";

export const HANDLERS = {
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
    item.extra.textContent = "signed";
    item.extra.title = "Signed by the provider: kept for the next request, not readable";
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
      const interrupts = event.outcome.interrupts ?? [];
      scope.lane.waitingFor = timeline.waitingFor(interrupts);
      item = scope.add(new Item(timeline, "interrupt", frame, scope.lane.waitingFor));
      item.element.dataset.tool = interrupts.map((interrupt) => interrupt.metadata?.tool_name ?? "").join(" ").trim();
      for (const interrupt of interrupts) item.body.append(timeline.interruptCard(interrupt));
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
    if (event.name === timeline.config.constants.lifecycleEventName) {
      const type = event.value?.event?.payload?.type;
      if (type === "model_request_started") scope.modelRequest = { startedAt: frame.event.timestamp, firstAt: null, item: null };
      if (type === "model_request_completed" || type === "model_request_failed") scope.modelRequestEnded(frame.event.timestamp);
    }
    if (event.name === timeline.config.constants.decisionEventName) {
      timeline.gap(scope.lane.pk, scope.lane.column, true);
      timeline.decision(scope, frame, event.value ?? {}).claim(frame.position);
      return;
    }
    if (typeof event.name === "string" && event.name.startsWith("a13n.input.")) {
      const input = event.value?.event ?? {};
      const item = scope.add(new Item(timeline, "input", frame, `input · ${input.source ?? event.name.slice(11)}`));
      const text = item.body.appendChild(el("div", "message-text", typeof input.content === "string" ? input.content : pretty(input)));
      clamp(text);
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
