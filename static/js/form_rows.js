// Rows of a policy list (approval rules, redaction patterns): "Add" appends a blank row, numbered after the others,
// and raises the row count the server reads; ticking "remove" greys a row out (the server drops it on save).
// Without script the page still offers one blank row per save.

function renumber(row, index) {
  row.dataset.row = String(index);
  row.classList.remove("row-invalid", "row-removed");
  for (const field of row.querySelectorAll("[name]")) {
    field.name = field.name.replace(/-\d+-([a-z]+)$/, `-${index}-$1`);
    if (field.id) field.id = field.id.replace(/-\d+-([a-z]+)$/, `-${index}-$1`);
    if (field.type === "checkbox") field.checked = false;
    else field.value = "";
    const label = field.getAttribute("aria-label");
    if (label) field.setAttribute("aria-label", label.replace(/\d+$/, String(index + 1)));
  }
  for (const errors of row.querySelectorAll(".row-errors")) errors.remove();
}

for (const editor of document.querySelectorAll("[data-rows-of]")) {
  const count = editor.querySelector("[data-rows-count]");
  const body = editor.querySelector("tbody");
  const add = editor.querySelector("[data-add-row]");
  add.hidden = false;
  add.addEventListener("click", () => {
    const row = body.lastElementChild.cloneNode(true);
    const index = Number(count.value);
    renumber(row, index);
    body.append(row);
    count.value = String(index + 1);
    row.querySelector("input[type=text], select")?.focus();
  });
  body.addEventListener("change", (event) => {
    if (event.target.type === "checkbox") event.target.closest("tr").classList.toggle("row-removed", event.target.checked);
  });
}
