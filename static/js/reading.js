// Reading aids shared by the pages: long texts clamped with "show more", ids copied with one click, and a cut
// table cell's whole text on hover.

// A text longer than this (characters or lines) is clamped to a few lines until the reader asks for more.
const CLAMP_CHARS = 600;
const CLAMP_LINES = 8;

export function clamp(element) {
  if (!element || element.dataset.clamped !== undefined) return;
  const text = element.textContent;
  if (text.length <= CLAMP_CHARS && text.split("\n").length <= CLAMP_LINES) return;
  element.dataset.clamped = "";
  element.classList.add("clamped");
  const more = document.createElement("button");
  more.type = "button";
  more.className = "show-more";
  more.textContent = `show more (${text.length} characters)`;
  more.setAttribute("aria-expanded", "false");
  more.addEventListener("click", () => {
    const open = element.classList.toggle("clamped");
    more.setAttribute("aria-expanded", String(!open));
    more.textContent = open ? `show more (${text.length} characters)` : "show less";
  });
  element.after(more);
}

// Any `[data-copy]` button copies its value and says so for a moment.
document.addEventListener("click", async (event) => {
  const button = event.target.closest?.("button[data-copy]");
  if (!button || !button.dataset.copy) return;
  try {
    await navigator.clipboard.writeText(button.dataset.copy);
    button.textContent = "copied";
  } catch {
    button.textContent = "copy failed";
  }
  setTimeout(() => {
    button.textContent = "copy";
  }, 1500);
});

for (const element of document.querySelectorAll("[data-clamp]")) clamp(element);

// Table cells are laid out fixed and cut with an ellipsis: a cut one shows its whole text on hover.
function titleCutCells() {
  for (const cell of document.querySelectorAll("table.list td.cut")) {
    if (cell.scrollWidth > cell.clientWidth && !cell.title) cell.title = cell.textContent.trim();
  }
}
titleCutCells();
new ResizeObserver(titleCutCells).observe(document.body);
