// Live status badges on the threads list and thread pages, fed by /ws/threads/.
// Badges: [data-thread-status="<thread pk>"] and [data-execution-status="<execution pk>"].

import { setStatus as setBadge } from "./dom.js";
import { ReconnectingSocket } from "./socket.js";

// Something this page does not list yet changed: on the threads list its rows are read again (the server's
// order and filters decide where a new thread belongs); elsewhere, or if that fails, a reload is offered.
let refreshing = null;

function announceNewActivity() {
  const notice = document.getElementById("new-activity");
  if (notice) notice.hidden = false;
}

async function refreshThreadRows() {
  const table = document.querySelector("[data-live-threads]");
  try {
    const response = await fetch(window.location.href, { headers: { Accept: "text/html" } });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html").querySelector("[data-live-threads] tbody");
    if (!fresh) throw new Error("no rows");
    table.querySelector("tbody").replaceWith(document.adoptNode(fresh));
    document.dispatchEvent(new CustomEvent("harness:rows-replaced"));
  } catch {
    announceNewActivity();
  }
}

function newThreadActivity() {
  if (!document.querySelector("[data-live-threads]")) return;
  // Several threads changing at once are read in one go.
  refreshing ??= setTimeout(() => {
    refreshing = null;
    refreshThreadRows();
  }, 300);
}

function applyThreadStatus(message) {
  const threadBadges = document.querySelectorAll(`[data-thread-status="${Number(message.thread)}"]`);
  threadBadges.forEach((badge) => setBadge(badge, message.status));
  const executionBadges = document.querySelectorAll(`[data-execution-status="${Number(message.execution)}"]`);
  executionBadges.forEach((badge) => setBadge(badge, message.status));
  if (document.querySelector("[data-live-threads]") && threadBadges.length === 0) newThreadActivity();
  // The execution that kept this thread busy ended: a new one may start.
  const busy = document.querySelector(`form[data-busy-execution="${Number(message.execution)}"]`);
  if (busy && !["queued", "running", "waiting", "recovering"].includes(message.status)) {
    busy.querySelector("button[type=submit]").disabled = false;
    busy.querySelector("#busy-note")?.remove();
    delete busy.dataset.busyExecution;
  }
  const executions = document.querySelector("[data-live-executions]");
  const ours = executions && Number(executions.dataset.liveExecutions) === message.thread;
  // Only the first page lists the newest executions: on a later page an unlisted one is not news.
  if (ours && message.execution && executionBadges.length === 0 && executions.dataset.newestShown !== undefined) {
    announceNewActivity();
  }
}

const threadPks = Array.from(document.querySelectorAll("[data-thread]"), (row) => Number(row.dataset.thread));
const socket = new ReconnectingSocket("/ws/threads/", {
  onOpen: () => socket.send({ type: "subscribe", threads: threadPks }),
  onMessage: (message) => {
    if (message.type === "thread.status") applyThreadStatus(message);
    if (message.type === "ready") document.body.dataset.liveStatus = "live";
  },
  onState: (state) => {
    document.body.dataset.liveStatus = state;
  },
});
socket.start();
