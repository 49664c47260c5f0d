// Filtering one execution's timeline (by item kind, tool name, run and text) and jumping to its next failure,
// decision or wait. The items stay in the page: a filter only hides the ones that do not match, and the timeline
// asks it again about every item a batch of live events drew or changed (`refresh`), so new cards obey it too.
// Everything is read from the items' classes, data attributes and textContent: no model text becomes markup.

import { el } from "./dom.js";

const ITEMS = "article.item";

// What each jump goes to, and how its status line names it.
const JUMPS = {
  failure: { selector: ".item-error, .item-tool.outcome-failed", name: "failure" },
  decision: { selector: ".item-decision", name: "decision" },
  wait: { selector: ".item-interrupt", name: "wait" },
};

export class TimelineFilter {
  constructor(timeline, form, jumps) {
    this.timeline = timeline;
    this.root = timeline.root;
    this.form = form;
    this.runs = form.elements.namedItem("run");
    this.toolList = document.getElementById(form.elements.namedItem("tool").getAttribute("list"));
    this.status = form.querySelector("[data-filter-status]");
    this.tools = new Set();
    this.at = null; // the item the last jump went to: the next jump goes on from it
    this.criteria = this.read();
    form.addEventListener("submit", (event) => event.preventDefault());
    form.addEventListener("input", () => this.changed());
    // A reset empties the fields after its event: read them once it is done.
    form.addEventListener("reset", () => setTimeout(() => this.changed()));
    for (const button of jumps.querySelectorAll("[data-jump]")) {
      button.addEventListener("click", () => this.jump(button.dataset.jump));
    }
  }

  read() {
    const value = (name) => String(this.form.elements.namedItem(name).value).trim();
    return {
      text: value("text").toLowerCase(),
      kind: value("kind"),
      tool: value("tool").toLowerCase(),
      run: value("run"),
    };
  }

  get active() {
    const { text, kind, tool, run } = this.criteria;
    return Boolean(text || kind || tool || run);
  }

  changed() {
    this.criteria = this.read();
    // Harness events are behind their own toggle: asking for them shows them.
    if (this.criteria.kind === "group") this.timeline.showInternal(true);
    this.root.classList.toggle("filtering", this.active);
    for (const item of this.root.querySelectorAll(ITEMS)) this.show(item);
    this.count();
  }

  // After a drawn batch: the items it drew or changed, the items around them (a nested card shows its parent)
  // and the tools and runs the filter offers.
  refresh(elements) {
    for (const element of elements) {
      const tool = element.dataset.tool;
      if (tool && !this.tools.has(tool)) {
        this.tools.add(tool);
        this.toolList.append(Object.assign(document.createElement("option"), { value: tool }));
      }
    }
    if (!this.active) return;
    const touched = new Set();
    for (const element of elements) {
      for (let item = element; item; item = item.parentElement?.closest(ITEMS)) touched.add(item);
      for (const nested of element.querySelectorAll(ITEMS)) touched.add(nested);
    }
    for (const item of touched) this.show(item);
    this.count();
  }

  lanesChanged(lanes) {
    const chosen = this.runs.value;
    const options = [el("option", null, "any run")];
    options[0].value = "";
    for (const lane of lanes) {
      const { number, reason } = lane.summary;
      const option = el("option", null, `run ${number || lane.column}${reason ? ` · ${reason}` : ""}`);
      option.value = String(lane.pk);
      options.push(option);
    }
    this.runs.replaceChildren(...options);
    this.runs.value = chosen;
  }

  matches(item) {
    const { text, kind, tool, run } = this.criteria;
    if (kind && !item.classList.contains(`item-${kind}`)) return false;
    if (run && item.dataset.run !== run) return false;
    if (tool && !(item.dataset.tool ?? "").toLowerCase().includes(tool)) return false;
    return !text || item.textContent.toLowerCase().includes(text);
  }

  // An item is shown when it matches, or sits inside one that does, or holds one that does.
  show(item) {
    let shown = !this.active || this.matches(item);
    for (let outer = item.parentElement?.closest(ITEMS); !shown && outer; outer = outer.parentElement?.closest(ITEMS)) {
      shown = this.matches(outer);
    }
    if (!shown) shown = Array.from(item.querySelectorAll(ITEMS)).some((nested) => this.matches(nested));
    item.classList.toggle("filtered-out", !shown);
  }

  count() {
    const all = this.root.querySelectorAll(ITEMS);
    const shown = Array.from(all).filter((item) => !item.classList.contains("filtered-out")).length;
    this.say(this.active ? `${shown} of ${all.length} items shown` : "");
  }

  say(text) {
    this.status.textContent = text;
  }

  // The next item of a kind after the last one jumped to (in timeline order), from the first again after the last.
  jump(kind) {
    const { selector, name } = JUMPS[kind];
    const targets = Array.from(this.root.querySelectorAll(selector)).filter((item) => !item.closest(".filtered-out"));
    if (targets.length === 0) {
      this.say(`No ${name} in this timeline${this.active ? " matches the filter" : ""}.`);
      return;
    }
    const following = (item) => this.at && this.at.compareDocumentPosition(item) & Node.DOCUMENT_POSITION_FOLLOWING;
    const target = targets.find(following) ?? targets[0];
    this.at = target;
    if (target.matches(".item-group, .item-group *")) this.timeline.showInternal(true);
    for (const old of this.root.querySelectorAll(".highlight")) old.classList.remove("highlight");
    target.classList.add("highlight");
    target.tabIndex = -1;
    target.scrollIntoView({ block: "center" });
    target.focus({ preventScroll: true });
    this.say(`${name} ${targets.indexOf(target) + 1} of ${targets.length}`);
  }
}
