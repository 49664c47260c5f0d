// DOM and text helpers shared by the page scripts (timeline, status badges, comparison).
//
// Every string from the server reaches the DOM through textContent, never as HTML.

export function el(tag, className, text) {
  const element = document.createElement(tag);
  if (className) element.className = className;
  if (text !== undefined && text !== null) element.textContent = String(text);
  return element;
}

export function link(className, text, href, title) {
  const anchor = el("a", className, text);
  anchor.href = href;
  if (title) anchor.title = title;
  return anchor;
}

// JSON (or JSON-in-a-string, as tool arguments and results often are) pretty-printed; other text as is.
export function pretty(value) {
  if (typeof value === "string") {
    try {
      const parsed = JSON.parse(value);
      if (parsed !== null && typeof parsed === "object") return JSON.stringify(parsed, null, 2);
    } catch {
      // not JSON: show the text itself
    }
    return value;
  }
  return JSON.stringify(value, null, 2);
}

// The exact time of an event in the server's zone, zone named: "2026-11-30 16:09:30.123 UTC".
export function exactTime(ms, timeZone) {
  if (typeof ms !== "number") return "";
  const format = new Intl.DateTimeFormat("sv-SE", {
    timeZone: timeZone || "UTC",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    fractionalSecondDigits: 3,
    timeZoneName: "short",
    hour12: false,
  });
  return format.format(new Date(ms)).replace(",", ".");
}

// "+12.3 s": an event's place on the execution's time axis, from its first event.
export function offset(ms, origin) {
  if (typeof ms !== "number" || origin === null) return "";
  return `+${formatDuration(Math.max(0, ms - origin) / 1000)}`;
}

// Same format as runs.services.timeline.read_side.format_duration.
export function formatDuration(seconds) {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.floor(seconds);
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) return `${minutes} min ${String(whole % 60).padStart(2, "0")} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

// "1 event", "2 events": English plurals of the nouns this page counts.
export function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

export function setStatus(element, status) {
  if (!element || !status) return;
  element.textContent = status;
  element.className = `${element.className.replace(/\bstatus-\S+/g, "").trim()} status-${status}`;
}
