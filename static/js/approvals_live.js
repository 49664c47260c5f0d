// Open approval requests on every page, fed by /ws/approvals/: the nav badge counts them, and the approvals
// inbox (if this page is it) reloads its table from the server when the set of open requests changes.

import { ReconnectingSocket } from "./socket.js";

const badge = document.querySelector("[data-approvals-count]");
const inbox = document.querySelector("[data-approvals-inbox]");
let latest = 0; // the newest table fetch; an older one that answers late is dropped

function showCount(count) {
  if (!badge) return;
  badge.textContent = String(count);
  badge.hidden = count === 0;
}

function shownRequests() {
  return Array.from(inbox.querySelectorAll("tr[data-request]"), (row) => Number(row.dataset.request));
}

async function refreshInbox(requests) {
  if (!inbox || shownRequests().join(",") === requests.join(",")) return;
  const fetchNumber = ++latest;
  const response = await fetch(inbox.dataset.rowsUrl, { credentials: "same-origin" });
  // A session that ended answers with the login page (a redirect): never put that into the table.
  if (!response.ok || response.redirected || fetchNumber !== latest) return;
  const html = await response.text();
  if (fetchNumber !== latest) return;
  inbox.innerHTML = html;
  document.dispatchEvent(new CustomEvent("harness:approvals-rows"));
}

const socket = new ReconnectingSocket("/ws/approvals/", {
  onOpen: () => socket.send({ type: "subscribe" }),
  onMessage: (message) => {
    if (message.type !== "approvals") return;
    showCount(message.count);
    refreshInbox(message.requests);
    document.documentElement.dataset.approvalsSocket = "live";
  },
  onState: (state) => {
    document.documentElement.dataset.approvalsSocket = state;
  },
});
socket.start();
