// A bulk operation's page: ask the server for its progress every second until it has finished, and show each
// item's result as it comes.

const progress = document.querySelector("[data-bulk-progress]");

async function poll() {
  const response = await fetch(progress.dataset.bulkProgress, { credentials: "same-origin" }).catch(() => null);
  if (response?.ok && !response.redirected) {
    const state = await response.json();
    for (const [outcome, count] of Object.entries(state.counts)) {
      const counter = progress.querySelector(`[data-outcome-count="${outcome}"] b`);
      if (counter) counter.textContent = String(count);
    }
    for (const item of state.items) {
      const row = document.querySelector(`tr[data-item-execution="${item.execution}"]`);
      if (!row) continue;
      row.querySelector("[data-outcome]").textContent = item.outcome;
      row.querySelector("[data-message]").textContent = item.message;
    }
    if (state.finished) {
      progress.dataset.finished = "yes";
      progress.querySelector("[data-bulk-state]").textContent = "Finished.";
      return;
    }
  }
  window.setTimeout(poll, 1000);
}

if (progress && !progress.dataset.finished) poll();
