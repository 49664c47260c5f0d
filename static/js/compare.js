// Compare lanes: two runs of one execution lined up item by item, with the first point where they diverge.
//
// Items are compared by what the model and tools did (kind, tool name, arguments, results, texts), not by ids
// or times, which always differ between runs. Harness event groups and decision items are host bookkeeping and
// are left out of the comparison.

import { el, plural } from "./dom.js";

const SKIPPED = new Set(["group", "decision"]);
const SHOWN_CHARS = 160;


// An element's text with its parts kept apart ("result · Here", not "resultHere").
export function readable(element) {
  const parts = element.children.length
    ? Array.from(element.children, readable)
    : [element.textContent.trim()];
  return parts.filter(Boolean).join(" · ");
}

// What an item did, as the parts a comparison looks at.
export function describe(item) {
  const label = item.label.textContent;
  switch (item.kind) {
    case "message":
    case "reasoning":
    case "input":
      return { kind: item.kind, head: label, text: item.text?.data ?? item.body.textContent };
    case "tool":
      return {
        kind: "tool",
        head: label,
        args: item.rawArgs ?? "",
        text: item.result && !item.result.hidden ? item.result.querySelector("pre").textContent : "",
      };
    case "marker":
      return { kind: "marker", head: label, text: "" };
    case "error":
      return { kind: "error", head: label, text: item.body.querySelector(".error-message")?.textContent ?? "" };
    default:
      return { kind: item.kind, head: label, text: readable(item.body) };
  }
}

function article(kind) {
  return `${/^[aeiou]/.test(kind) ? "an" : "a"} ${kind}`;
}

function commonPrefix(a, b) {
  let index = 0;
  while (index < a.length && index < b.length && a[index] === b[index]) index += 1;
  return index;
}

// Why two described items differ (null when they do not).
export function difference(left, right) {
  if (!left || !right) return left ? "only in the left run" : "only in the right run";
  if (left.kind !== right.kind) return `${article(left.kind)} on the left, ${article(right.kind)} on the right`;
  if (left.head !== right.head) return `${left.head} on the left, ${right.head} on the right`;
  if ((left.args ?? "") !== (right.args ?? "")) return "the arguments differ";
  if (left.text !== right.text) {
    const at = commonPrefix(left.text, right.text);
    return left.kind === "tool" ? "the results differ" : `the text differs from character ${at + 1}`;
  }
  return null;
}

function summary(described) {
  if (!described) return "—";
  const parts = [described.head];
  if (described.args) parts.push(described.args);
  if (described.text) parts.push(described.text);
  const text = parts.join(" · ");
  return text.length > SHOWN_CHARS ? `${text.slice(0, SHOWN_CHARS)}…` : text;
}

export class LaneComparison {
  constructor(timeline, toggle, section) {
    this.timeline = timeline;
    this.toggle = toggle;
    this.section = section;
    this.left = section.querySelector("select[name=left]");
    this.right = section.querySelector("select[name=right]");
    this.table = section.querySelector(".compare-rows");
    this.verdict = section.querySelector(".compare-verdict");
    toggle.addEventListener("click", () => this.setOpen(section.hidden));
    for (const select of [this.left, this.right]) select.addEventListener("change", () => this.render());
  }

  setOpen(open) {
    this.section.hidden = !open;
    this.toggle.setAttribute("aria-expanded", String(open));
    this.toggle.textContent = open ? "Hide the comparison" : "Compare lanes";
    if (open) this.render();
  }

  // Lanes changed (a new run): offer them; the toggle exists only once there are two.
  lanesChanged() {
    const lanes = Array.from(this.timeline.lanes.values());
    this.toggle.hidden = lanes.length < 2;
    for (const [select, fallback] of [
      [this.left, 0],
      [this.right, 1],
    ]) {
      const chosen = select.value;
      select.replaceChildren(
        ...lanes.map((lane) => {
          const option = el("option", null, `run ${lane.summary.number} (${lane.summary.reason})`);
          option.value = lane.pk;
          return option;
        }),
      );
      select.value = chosen && lanes.some((lane) => String(lane.pk) === chosen) ? chosen : String(lanes[fallback]?.pk ?? "");
    }
  }

  // New items arrived: an open comparison follows them.
  refresh() {
    if (!this.section.hidden) this.render();
  }

  // The items of a lane that a comparison looks at, each with the last position it holds.
  steps(lane) {
    return (lane?.items ?? []).filter((item) => !SKIPPED.has(item.kind));
  }

  // How many of `earlier`'s steps `later` took over (it went on from a checkpoint of that run), else 0.
  takenOver(earlier, later) {
    const takeover = this.timeline.config.takeovers?.[later?.pk];
    if (!earlier || !takeover || takeover.fromRun !== earlier.pk) return 0;
    return this.steps(earlier).filter((item) => Math.max(...item.positions) <= takeover.afterPosition).length;
  }

  render() {
    const lane = (select) => this.timeline.lanes.get(Number(select.value));
    const leftLane = lane(this.left);
    const rightLane = lane(this.right);
    // A run that went on from the other's checkpoint starts beside the step after the prefix it took over.
    const leftShift = this.takenOver(rightLane, leftLane);
    const rightShift = this.takenOver(leftLane, rightLane);
    const pad = (count) => Array.from({ length: count }, () => undefined);
    // After a takeover the later run's "run started" is no step of the work.
    const after = (steps, shift) => (shift && steps[0]?.kind === "marker" ? steps.slice(1) : steps);
    const left = [...pad(leftShift), ...after(this.steps(leftLane), leftShift).map(describe)];
    const right = [...pad(rightShift), ...after(this.steps(rightLane), rightShift).map(describe)];
    const shift = Math.max(leftShift, rightShift);
    const rows = [];
    let first = null;
    for (let index = 0; index < Math.max(left.length, right.length); index += 1) {
      const prefix = index < shift;
      const why = prefix ? null : difference(left[index], right[index]);
      const row = el("tr", prefix ? "taken-over" : why ? "differs" : "same");
      row.append(el("td", "compare-index", index + 1), el("td", "compare-left", summary(left[index])), el("td", "compare-right", summary(right[index])));
      const taker = leftShift ? leftLane : rightLane;
      const note = el("td", "compare-note", prefix ? `taken over by run ${taker.summary.number}` : (why ?? "same"));
      if (why && first === null) {
        first = index;
        row.classList.add("first-divergence");
        note.prepend(el("span", "badge divergence-badge", "first divergence"), " ");
      }
      row.append(note);
      rows.push(row);
    }
    this.table.replaceChildren(...rows);
    const compared = rows.length - shift;
    const aligned = shift ? ` after the ${plural(shift, "step")} taken over` : "";
    this.verdict.textContent =
      first === null ? `The runs do the same ${plural(compared, "step")}${aligned}.` : `The runs diverge at step ${first + 1}${aligned}.`;
  }
}
