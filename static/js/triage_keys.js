// Keyboard triage on the approvals inbox and an execution's page. j/k move, o or Enter opens, a approves,
// d denies (asking for a reason), e edits the arguments, ? lists the keys, / focuses the page's filter.
// No key acts while the user types in a field, or with a modifier held, so typing is never a decision.

const inbox = document.querySelector("[data-approvals-inbox]");
const KEYS = [
  ["j / k", "next / previous request"],
  ["o or Enter", "open the request's execution"],
  ["a", "approve"],
  ["d", "deny, with a reason"],
  ["e", "edit the arguments (on the execution's page)"],
  ["n", "next waiting request (on an execution's page)"],
  ["/", "focus the filter"],
  ["?", "show or hide these keys"],
];
let current = 0;

function typing(target) {
  return Boolean(target.closest?.("input, textarea, select, button, a, [contenteditable]"));
}

function items() {
  if (inbox) return Array.from(inbox.querySelectorAll("tr[data-request]"));
  return Array.from(document.querySelectorAll(".approval-form .deferred-request"));
}

function mark(index, { focus = true } = {}) {
  const all = items();
  if (!all.length) return null;
  current = Math.max(0, Math.min(index, all.length - 1));
  all.forEach((item, position) => item.classList.toggle("current", position === current));
  const item = all[current];
  if (!item.hasAttribute("tabindex")) item.tabIndex = -1;
  if (focus) item.focus();
  return item;
}

function open(row, hash = "") {
  if (row?.dataset.executionUrl) window.location.assign(row.dataset.executionUrl + hash);
}

function decideInInbox(row, verdict) {
  const form = row.querySelector("form.row-decision");
  if (!form) return open(row, "#approval-form");
  if (verdict === "deny") {
    const reason = window.prompt("Reason to deny (the model reads it):", "");
    if (reason === null) return;
    form.querySelector("[data-deny-reason]").value = reason;
  }
  form.requestSubmit(form.querySelector(`[data-decide="${verdict}"]`));
}

function chooseOnPage(fieldset, choice) {
  const radio = fieldset.querySelector(`input[type=radio][value="${choice}"]`);
  if (!radio) return;
  radio.checked = true;
  radio.dispatchEvent(new Event("change", { bubbles: true }));
  const field = fieldset.querySelector(`.choice-field[data-for="${choice}"] textarea, .choice-field[data-for="${choice}"] input`);
  if (field) field.focus();
  else fieldset.closest("form").querySelector("button[type=submit]")?.focus();
}

function toggleHelp() {
  let help = document.getElementById("triage-keys");
  if (!help) {
    help = document.createElement("dialog");
    help.id = "triage-keys";
    help.setAttribute("aria-label", "Keyboard shortcuts");
    const list = document.createElement("dl");
    for (const [key, meaning] of KEYS) {
      const term = document.createElement("dt");
      term.append(Object.assign(document.createElement("kbd"), { textContent: key }));
      list.append(term, Object.assign(document.createElement("dd"), { textContent: meaning }));
    }
    const close = Object.assign(document.createElement("button"), { type: "button", textContent: "Close" });
    close.addEventListener("click", () => help.close());
    help.append(Object.assign(document.createElement("h2"), { textContent: "Keys" }), list, close);
    document.body.append(help);
  }
  if (help.open) help.close();
  else help.showModal();
}

function focusFilter() {
  const filter = document.querySelector("[data-timeline-filter] input, form[role=search] input:not([type=hidden])");
  filter?.focus();
  return Boolean(filter);
}

document.addEventListener("keydown", (event) => {
  // Enter in a row's reason denies: the browser would otherwise submit with the row's first button, Approve.
  if (event.key === "Enter" && event.target.matches?.("[data-deny-reason]")) {
    event.preventDefault();
    const form = event.target.form;
    form.requestSubmit(form.querySelector('[data-decide="deny"]'));
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
  // While the list of keys is open (its Close button has the focus), ? closes it and nothing else acts.
  if (document.getElementById("triage-keys")?.open) {
    if (event.key === "?") toggleHelp();
    return;
  }
  // Enter on a focused inbox row opens it; anywhere else Enter keeps its usual meaning.
  const onRow = event.target.matches?.("tr[data-request]");
  if (typing(event.target) && !onRow) return;
  const all = items();
  const item = all[current];
  const handled = {
    j: () => mark(current + 1),
    k: () => mark(current - 1),
    "?": toggleHelp,
    "/": focusFilter,
    n: () => document.getElementById("next-waiting")?.click(),
  };
  if (inbox) {
    Object.assign(handled, {
      o: () => open(item),
      Enter: () => (onRow ? open(item) : null),
      a: () => item && decideInInbox(item, "approve"),
      d: () => item && decideInInbox(item, "deny"),
      e: () => open(item, "#approval-form"),
    });
  } else if (item) {
    Object.assign(handled, {
      a: () => chooseOnPage(item, item.dataset.kind === "approval" ? "approve" : "answer"),
      d: () => chooseOnPage(item, "deny"),
      e: () => chooseOnPage(item, "edit"),
    });
  }
  const action = handled[event.key];
  if (!action) return;
  event.preventDefault();
  action();
});

// The first request is the current one from the start, so a decision takes one key (a) or two (j, a).
mark(0, { focus: false });
document.addEventListener("harness:approvals-rows", () => mark(current, { focus: false }));
