// Live status badges on the threads list and thread pages, fed by /ws/threads/.
// Badges: [data-thread-status="<thread pk>"] and [data-execution-status="<execution pk>"].

import { setStatus as setBadge } from "./dom.js";
import { ReconnectingSocket } from "./socket.js";

// Something this page does not list yet changed: offer a reload rather than guessing where it belongs.
function announceNewActivity() {
  const notice = document.getElementById("new-activity");
  if (notice) notice.hidden = false;
}

function applyThreadStatus(message) {
  const threadBadges = document.querySelectorAll(`[data-thread-status="${Number(message.thread)}"]`);
  threadBadges.forEach((badge) => setBadge(badge, message.status));
  const executionBadges = document.querySelectorAll(`[data-execution-status="${Number(message.execution)}"]`);
  executionBadges.forEach((badge) => setBadge(badge, message.status));
  if (document.querySelector("[data-live-threads]") && threadBadges.length === 0) announceNewActivity();
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
