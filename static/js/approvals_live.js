// Open approval requests on every page, fed by /ws/approvals/: the nav badge counts them, and the approvals
// inbox (if this page is it) reloads the page of its table it shows when that page's requests or the number of
// pages change. The socket sends every open request oldest first; the inbox lists them newest first unless sorted.
// A request that arrives while a page is open shows a toast there.

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

let everyRequest = null; // the whole open set last seen, for sorts the socket's order does not give

function unchanged(requests) {
  const page = shownPage();
  const count = Math.max(1, Math.ceil(requests.length / page.size));
  const sort = inbox.querySelector("[data-sort]")?.dataset.sort || "newest";
  if (sort !== "oldest" && sort !== "newest") {
    // Sorted by expiry or tool: any change of the open set may move rows onto or off this page.
    const same = everyRequest !== null && everyRequest === requests.join(",");
    everyRequest = requests.join(",");
    return same && count === page.count;
  }
  const ordered = sort === "newest" ? [...requests].reverse() : requests;
  const onPage = ordered.slice((page.number - 1) * page.size, page.number * page.size);
  return count === page.count && shownRequests().join(",") === onPage.join(",");
}

async function refreshInbox(requests) {
  if (!inbox || unchanged(requests)) return;
  const fetchNumber = ++latest;
  const url = new URL(inbox.dataset.rowsUrl, window.location.href);
  url.searchParams.set("page", String(shownPage().number));
  url.searchParams.set("sort", inbox.querySelector("[data-sort]")?.dataset.sort || "newest");
  const response = await fetch(url, { credentials: "same-origin" });
  // A session that ended answers with the login page (a redirect): never put that into the table.
  if (!response.ok || response.redirected || fetchNumber !== latest) return;
  const html = await response.text();
  if (fetchNumber !== latest) return;
  // Rows selected for a bulk decision stay selected in the new table (those still in it).
  const selected = new Set(Array.from(inbox.querySelectorAll("input[name=execution]:checked"), (box) => box.value));
  inbox.innerHTML = html;
  for (const box of inbox.querySelectorAll("input[name=execution]")) box.checked = selected.has(box.value);
  document.dispatchEvent(new CustomEvent("harness:approvals-rows"));
}

// A toast (and, if the user allowed it, a browser notification) when a request they may decide arrives. The first
// message after the page loads (or the socket reconnects) is what was already there, so it announces nothing.
let known = null;

function announce(requests) {
  const fresh = known === null ? [] : requests.filter((pk) => !known.has(pk));
  known = new Set(requests);
  if (!fresh.length) return;
  const text = fresh.length === 1 ? "A new request waits for your decision." : `${fresh.length} new requests wait for your decision.`;
  let toast = document.getElementById("approval-toast");
  if (!toast) {
    toast = document.createElement("div");
    toast.id = "approval-toast";
    toast.className = "toast";
    toast.setAttribute("role", "status");
    document.body.append(toast);
  }
  const link = Object.assign(document.createElement("a"), { href: "/approvals/", textContent: "Open the inbox" });
  const close = Object.assign(document.createElement("button"), { type: "button", textContent: "Dismiss" });
  close.addEventListener("click", () => toast.remove());
  const parts = [Object.assign(document.createElement("span"), { textContent: text }), " ", link, " ", close];
  if ("Notification" in window && Notification.permission === "default") {
    const ask = Object.assign(document.createElement("button"), { type: "button", textContent: "Notify me in the browser" });
    ask.addEventListener("click", () => Notification.requestPermission().then(() => ask.remove()));
    parts.push(" ", ask);
  }
  toast.replaceChildren(...parts);
  if ("Notification" in window && Notification.permission === "granted" && document.hidden) {
    const note = new Notification("Harness Host", { body: text, tag: "harness-approvals" });
    note.onclick = () => {
      window.focus();
      window.location.assign("/approvals/");
    };
  }
}

const socket = new ReconnectingSocket("/ws/approvals/", {
  onOpen: () => socket.send({ type: "subscribe" }),
  onMessage: (message) => {
    if (message.type !== "approvals") return;
    showCount(message.count);
    announce(message.requests);
    refreshInbox(message.requests);
    document.documentElement.dataset.approvalsSocket = "live";
  },
  onState: (state) => {
    document.documentElement.dataset.approvalsSocket = state;
  },
});
socket.start();
