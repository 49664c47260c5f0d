// A copy button for a value shown once (an API token's secret): it copies the text of the element its
// data-copy names and says so beside it. Without the clipboard API (plain http, old browsers) it stays hidden,
// and the value is selected by hand as before.

for (const button of document.querySelectorAll("button[data-copy]")) {
  const source = document.getElementById(button.dataset.copy);
  const state = button.parentElement.querySelector(".copy-state");
  if (!source || !navigator.clipboard) continue;
  button.hidden = false;
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      state.textContent = "Copied.";
    } catch {
      state.textContent = "Could not copy: select the text and copy it by hand.";
    }
  });
}
