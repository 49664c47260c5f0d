// A re-mask's status row on the policy page: ask the server for its progress every second until it is done.

const row = document.querySelector("[data-remask-progress]");

async function poll() {
  const response = await fetch(row.dataset.remaskProgress, { credentials: "same-origin" }).catch(() => null);
  if (response?.ok && !response.redirected) {
    const state = await response.json();
    row.querySelector("[data-remask-done]").textContent = String(state.done);
    row.querySelector("[data-remask-total]").textContent = String(state.total);
    const bar = row.querySelector("progress");
    bar.max = Math.max(state.total, 1);
    bar.value = state.total ? state.done : 1;
    if (state.finished) {
      row.dataset.finished = "yes";
      const changed = state.changed_events;
      row.querySelector("[data-remask-state]").textContent =
        `Done: ${changed} timeline event${changed === 1 ? "" : "s"} changed.`;
      return;
    }
  }
  window.setTimeout(poll, 1000);
}

if (row && !row.dataset.finished) poll();
