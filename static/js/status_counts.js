// The executions list: fetch the counts per status after the page (counting reads every matching execution, the
// page does not wait for it) and put them where the "show counts" link stands; that link stays if they fail.

import { el, link } from "./dom.js";

const nav = document.querySelector("nav.status-counts[data-counts-url]");

async function load() {
  const response = await fetch(nav.dataset.countsUrl, { credentials: "same-origin" }).catch(() => null);
  if (!response?.ok || response.redirected) return;
  const counts = await response.json();
  const links = counts.links.map((entry) => {
    const anchor = link("", `${entry.label} `, entry.url);
    anchor.dataset.statusCount = entry.label;
    if (entry.current) anchor.setAttribute("aria-current", "true");
    anchor.append(el("span", "count", entry.count));
    return anchor;
  });
  nav.replaceChildren(...links.flatMap((anchor) => [anchor, " "]));
  const total = document.querySelector("[data-matching-total]");
  if (total) total.textContent = String(counts.total);
}

if (nav) load();
