// Forms with data-confirm="question" ask before they submit (cancelling an execution cannot be undone).
document.addEventListener("submit", (event) => {
  const question = event.target.dataset?.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
