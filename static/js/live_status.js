// Live status badges on the threads list and thread pages, fed by /ws/threads/.
// Badges: [data-thread-status="<thread pk>"] and [data-execution-status="<execution pk>"].

import { ReconnectingSocket } from "./socket.js";

function setBadge(element, status) {
  element.textContent = status;
  element.className = element.className.replace(/\bstatus-\S+/g, "").trim() + ` status-${status}`;
}

function applyThreadStatus(message) {
  const threadBadges = document.querySelectorAll(`[data-thread-status="${Number(message.thread)}"]`);
  threadBadges.forEach((badge) => setBadge(badge, message.status));
  document
    .querySelectorAll(`[data-execution-status="${Number(message.execution)}"]`)
    .forEach((badge) => setBadge(badge, message.status));
  const list = document.querySelector("[data-live-threads]");
  if (list && threadBadges.length === 0) {
    const notice = document.getElementById("new-activity");
    if (notice) notice.hidden = false;
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
