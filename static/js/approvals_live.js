// Open approval requests on every page, fed by /ws/approvals/: the nav badge counts them, and the approvals
// inbox (if this page is it) reloads the page of its table it shows when that page's requests or the number of
// pages change. The socket sends every open request, oldest first, as the inbox lists them.

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

// The page of the inbox on show, as the server rendered it (a fetched table brings its own).
function shownPage() {
  const page = inbox.querySelector("[data-inbox-page]")?.dataset || {};
  return { number: Number(page.inboxPage || 1), size: Number(page.pageSize || 1), count: Number(page.pageCount || 1) };
}

function unchanged(requests) {
  const page = shownPage();
  const onPage = requests.slice((page.number - 1) * page.size, page.number * page.size);
  const count = Math.max(1, Math.ceil(requests.length / page.size));
  return count === page.count && shownRequests().join(",") === onPage.join(",");
}

async function refreshInbox(requests) {
  if (!inbox || unchanged(requests)) return;
  const fetchNumber = ++latest;
  const url = new URL(inbox.dataset.rowsUrl, window.location.href);
  url.searchParams.set("page", String(shownPage().number));
  const response = await fetch(url, { credentials: "same-origin" });
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
