// Approval form behaviour: show the field a choice needs, check the whole set before it leaves the browser
// (edited arguments against the tool's JSON schema, results as JSON), submit it once, and count down expiry.
// Handlers are delegated from `document`, so a form inserted later (a page fetching the fragment when its
// execution starts waiting) works without re-binding. The server checks everything again. A module: the
// browser runs it once however many times a page includes it.
//
// The open set stays true to the server while the page is open: the form disables itself when its expiry
// passes, and the whole "Waiting for a decision" box gives way to a notice when the execution stops waiting
// (answered in another session, expired by the host, cancelled, ended) or its decision item arrives.

import { typeOf, validate } from "./approval_schema.js";
import { el } from "./dom.js";

const MAX_VALUE_BYTES = 64 * 1024;

const parseJson = (text, what) => {
  if (new TextEncoder().encode(text).length > MAX_VALUE_BYTES) return { error: `${what}: larger than ${MAX_VALUE_BYTES} bytes` };
  if (!text.trim()) return { error: `${what}: empty; enter JSON` };
  try {
    return { value: JSON.parse(text) };
  } catch (exc) {
    return { error: `${what}: not valid JSON (${exc.message})` };
  }
};

const chosen = (row) => row.querySelector("input[type=radio]:checked")?.value || "";

const showFields = (row) => {
  const choice = chosen(row);
  row.querySelectorAll(".choice-field").forEach((field) => { field.hidden = field.dataset.for !== choice; });
};

const rowErrors = (row) => {
  const choice = chosen(row);
  if (!choice) return ["choose how to answer this request"];
  if (choice === "edit") {
    const parsed = parseJson(row.querySelector("textarea[name$='-args']").value, "edited arguments");
    if (parsed.error) return [parsed.error];
    if (typeOf(parsed.value) !== "object") return ["the edited arguments must be a JSON object"];
    const schema = JSON.parse(row.dataset.schema || "null");
    const errors = [];
    if (schema) validate(parsed.value, schema, schema, "", errors);
    return errors;
  }
  if (choice === "result") {
    const parsed = parseJson(row.querySelector("textarea[name$='-result']").value, "result");
    return parsed.error ? [parsed.error] : [];
  }
  if (choice === "answer" && !row.querySelector("textarea[name$='-answer']").value.trim()) return ["the answer is empty"];
  return [];
};

const setError = (element, text) => {
  if (!element) return;
  element.textContent = text;
  element.hidden = !text;
};

document.addEventListener("change", (event) => {
  const row = event.target.closest(".approval-form .deferred-request");
  if (row && event.target.type === "radio") showFields(row);
});

document.addEventListener("submit", async (event) => {
  const form = event.target.closest("form.approval-form");
  if (!form) return;
  event.preventDefault();
  // One set, one post: a second click while the first is in flight (or after it landed) does nothing.
  if (form.dataset.state) return;
  let valid = true;
  form.querySelectorAll(".deferred-request").forEach((row) => {
    const errors = rowErrors(row);
    setError(row.querySelector(".row-error"), errors.join("; "));
    if (errors.length) valid = false;
  });
  const formError = form.querySelector(".approval-error");
  if (!valid) {
    setError(formError, "Some answers need fixing before the set can be submitted.");
    return;
  }
  setError(formError, "");
  const set = form.closest(".approval-set");
  const button = form.querySelector("button[type=submit]");
  form.dataset.state = "sending";
  button.disabled = true;
  button.textContent = "Submitting…";
  try {
    const response = await fetch(form.action, {
      method: "POST",
      body: new FormData(form),
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
    const reply = await response.json().catch(() => ({ ok: false, message: `The server answered ${response.status}.` }));
    if (response.ok && reply.ok) {
      form.dataset.state = "done";
      button.textContent = "Submitted";
      form.replaceWith(el("p", "approval-done notice", reply.message));
      return;
    }
    setError(formError, reply.message || `The server refused the set (${response.status}).`);
    // A stale or repeated set cannot succeed by resubmitting; fixable input can.
    const final = response.status === 409 || response.status === 403;
    form.dataset.state = final ? "done" : "";
    button.disabled = final;
    button.textContent = final ? "Not submitted" : "Submit all decisions";
  } catch (exc) {
    form.dataset.state = "";
    button.disabled = false;
    button.textContent = "Submit all decisions";
    setError(formError, `Could not reach the server: ${exc.message}`);
  }
  // The set closed (here or elsewhere) while this post was on its way: close it now that the answer is in.
  if (set?.dataset.closing) closeSet(set, set.dataset.closing);
});

// The timeout passed: the host denies the set at its next sweep, and the server refuses answers now.
const expireForm = (form) => {
  if (form.dataset.state) return;
  form.dataset.state = "expired";
  form.querySelectorAll("input, textarea, button").forEach((control) => { control.disabled = true; });
  setError(form.querySelector(".approval-error"), "The approval timeout has passed: the host denies these calls.");
};

const renderCountdowns = () => {
  const now = Date.now();
  document.querySelectorAll("[data-expires]").forEach((element) => {
    const left = Math.round((Date.parse(element.dataset.expires) - now) / 1000);
    element.textContent = left > 0 ? `in ${Math.floor(left / 60)}m ${String(left % 60).padStart(2, "0")}s` : "now (expired)";
    const form = left > 0 ? null : element.closest(".approval-set")?.querySelector("form.approval-form");
    if (form) expireForm(form);
  });
  document.querySelectorAll("[data-since]").forEach((element) => {
    const age = Math.max(0, Math.round((now - Date.parse(element.dataset.since)) / 1000));
    element.textContent = `${Math.floor(age / 60)}m ${String(age % 60).padStart(2, "0")}s`;
  });
};

const timeOf = (iso) => (iso ? new Date(iso).toLocaleTimeString() : "");

// Replace the open set's box with a notice (our own accepted submission keeps its own notice). While its
// post is on the way, the text is kept for when the answer is in; a decision's text outranks a status's.
const closeSet = (set, text, fromDecision = false) => {
  if (set.querySelector('form.approval-form[data-state="sending"]')) {
    if (fromDecision || !set.dataset.closingFinal) set.dataset.closing = text;
    if (fromDecision) set.dataset.closingFinal = "yes";
    return;
  }
  const done = set.querySelector(".approval-done");
  if (done) {
    done.classList.add("approval-closed");
    set.replaceWith(done);
    return;
  }
  const notice = el("p", "approval-closed notice", text);
  notice.dataset.calls = Array.from(set.querySelectorAll("[data-call-id]"), (row) => row.dataset.callId).join(" ");
  set.replaceWith(notice);
};

const STATUS_NOTICES = {
  cancelled: "The execution was cancelled: these requests can no longer be answered.",
  failed: "The execution failed: these requests can no longer be answered.",
};

// The timeline's decision item for this set: say who answered it and when, or that it expired.
document.addEventListener("harness:decision", (event) => {
  const { execution, calls = [], expired, cancelled, decidedBy, decidedAt } = event.detail || {};
  const slot = document.querySelector(`[data-approval-slot="${execution}"]`);
  if (!slot) return;
  const who = decidedBy ?? "the host";
  const text = expired
    ? "Expired: no answer arrived before the approval timeout, so the host denied these calls."
    : `${cancelled ? "Cancelled" : "Answered"} by ${who} at ${timeOf(decidedAt)}; see the decision in the timeline.`;
  const set = slot.querySelector(".approval-set");
  const ours = (ids) => calls.length > 0 && ids.length > 0 && ids.every((id) => calls.includes(id));
  if (set && ours(Array.from(set.querySelectorAll("[data-call-id]"), (row) => row.dataset.callId))) {
    closeSet(set, text, true);
    return;
  }
  const closed = slot.querySelector(".approval-closed");
  if (closed && !closed.dataset.final && ours((closed.dataset.calls || "").split(" ").filter(Boolean))) {
    closed.dataset.final = "decision";
    closed.textContent = text;
  }
});

// The execution page announces status changes. Leaving `waiting` closes the open set; starting to wait
// with no form open loads the form of the new request set into the slot the template tag left.
document.addEventListener("harness:execution-status", async (event) => {
  const { execution, status } = event.detail || {};
  const slot = document.querySelector(`[data-approval-slot="${execution}"]`);
  if (!slot) return;
  if (status !== "waiting") {
    const set = slot.querySelector(".approval-set");
    if (set) closeSet(set, STATUS_NOTICES[status] ?? `These requests are no longer open: the execution is ${status}.`);
    return;
  }
  const open = slot.querySelector("form.approval-form");
  if (open && open.dataset.state !== "done") return;
  const response = await fetch(slot.dataset.fragmentUrl, { credentials: "same-origin" });
  if (!response.ok) return;
  slot.innerHTML = await response.text();
  prepare(slot);
  renderCountdowns();
});

// Call with the element a fetched form fragment was inserted into.
const prepare = (root) => root.querySelectorAll(".approval-form .deferred-request").forEach(showFields);

const start = () => {
  prepare(document);
  renderCountdowns();
  setInterval(renderCountdowns, 1000);
  document.addEventListener("harness:approvals-rows", renderCountdowns);
};

start();
