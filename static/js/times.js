// <time class="when"> elements (the `when` template filter) read "3 min ago"; the exact time stays on hover.

const UNITS = [
  ["day", 86400],
  ["h", 3600],
  ["min", 60],
  ["s", 1],
];

export function relative(ms, now = Date.now()) {
  const seconds = Math.round((now - ms) / 1000);
  const size = Math.abs(seconds);
  if (size < 5) return "just now";
  const [unit, length] = UNITS.find(([, length]) => size >= length);
  const count = Math.floor(size / length);
  const text = `${count} ${unit}${unit === "day" && count !== 1 ? "s" : ""}`;
  return seconds >= 0 ? `${text} ago` : `in ${text}`;
}

function refresh() {
  for (const element of document.querySelectorAll("time.when[datetime]")) {
    const ms = Date.parse(element.getAttribute("datetime"));
    if (!Number.isNaN(ms)) element.textContent = relative(ms);
  }
}

refresh();
setInterval(refresh, 15_000);
