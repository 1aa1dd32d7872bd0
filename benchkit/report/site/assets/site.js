// benchkit's pages: sortable tables and the operator page's commit picker.
// Plain DOM, no libraries, so the pages work from file:// without a server.
"use strict";

function cellValue(row, column) {
  const cell = row.cells[column];
  if (!cell) return "";
  const raw = cell.dataset.v;
  if (raw !== undefined && raw !== "" && !Number.isNaN(Number(raw))) return Number(raw);
  return cell.textContent.trim().toLowerCase();
}

function sortTable(table, column, header) {
  const ascending = header.getAttribute("aria-sort") !== "ascending";
  for (const th of table.tHead.rows[0].cells) th.removeAttribute("aria-sort");
  header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = cellValue(a, column), y = cellValue(b, column);
    // Empty cells (no value) stay at the bottom whichever the direction.
    if (x === "" || y === "") return (x === "") - (y === "");
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return ascending ? order : -order;
  });
  for (const row of rows) body.appendChild(row);
}

function makeSortable(table) {
  if (!table.tHead || !table.tBodies.length) return;
  Array.from(table.tHead.rows[0].cells).forEach((th, column) => {
    th.title = "sort by " + th.textContent.trim();
    th.addEventListener("click", () => sortTable(table, column, th));
  });
}

function showOperatorCommit(anchor) {
  const sections = document.querySelectorAll("section.ops");
  if (!sections.length) return;
  let shown = document.getElementById(anchor);
  if (!shown || !shown.classList.contains("ops")) shown = sections[0];
  for (const section of sections) section.classList.toggle("hidden", section !== shown);
  const picker = document.getElementById("op-commit");
  if (picker) picker.value = shown.id;
}

// The front page took index.html from asv: a link made for asv's page (index.html#<benchmark>?...,
// index.html#/summarylist) names no anchor here, and goes on to asv's page with its hash.
function forwardAsvHash() {
  const asvPage = document.body.dataset.asvHashes;
  const hash = window.location.hash;
  if (!asvPage || hash.length < 2) return false;
  let anchor = hash.slice(1);
  try { anchor = decodeURIComponent(anchor); } catch (e) { /* keep it as written */ }
  if (document.getElementById(anchor)) return false;
  window.location.replace(asvPage + hash);
  return true;
}

document.addEventListener("DOMContentLoaded", () => {
  if (forwardAsvHash()) return;
  document.querySelectorAll("table.sortable").forEach(makeSortable);
  const picker = document.getElementById("op-commit");
  if (picker) {
    picker.addEventListener("change", () => { window.location.hash = picker.value; });
    window.addEventListener("hashchange", () => showOperatorCommit(window.location.hash.slice(1)));
    showOperatorCommit(window.location.hash.slice(1));
  }
});
