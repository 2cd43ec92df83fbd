"""The class report's one script, and the Content-Security-Policy that lets only it run.

The report shows text students control (ids, names, printed output, exception messages). The templates escape all
of it; the page's CSP is a second wall: `script-src` allows exactly the script below, by the SHA-256 of its text, so
a script smuggled in by a student (should escaping ever fail) would not run, and neither would an inline event
handler (`onerror=`), which no hash allows. The script is ours, static, and reads nothing but the table: it adds a
<button> to each sortable column head (keyboard accessible; without JavaScript the headers stay plain text and the
table keeps the server's order), sorts by each cell's `data-sort` when it has one (numbers for numeric columns,
`data-type="number"` on the head), else its text (numeric-aware, locale collation), puts cells without a value
last in either direction, keeps the order of equal rows (a stable sort: sort by section, then by score), and sets
`aria-sort`.
Feedback pages have no script at all.
"""
from __future__ import annotations

import base64
import hashlib

SORT_SCRIPT = """
(function () {
  "use strict";
  var lang = document.documentElement.lang || undefined;  // zh: Chinese names in pinyin order
  var collator = new Intl.Collator(lang, {numeric: true, sensitivity: "base"});
  function value(cell, numeric) {
    var text = cell.hasAttribute("data-sort") ? cell.getAttribute("data-sort") : cell.textContent.trim();
    return numeric ? parseFloat(text) : text;
  }
  function sortBy(table, head, column) {
    var numeric = head.getAttribute("data-type") === "number";
    var ascending = head.getAttribute("aria-sort") !== "ascending";
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = value(a.cells[column], numeric), y = value(b.cells[column], numeric);
      var xNone = numeric ? isNaN(x) : x === "", yNone = numeric ? isNaN(y) : y === "";
      if (xNone || yNone) return xNone - yNone;  // no value: last, in either direction
      var c = numeric ? x - y : collator.compare(x, y);
      return ascending ? c : -c;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) { th.removeAttribute("aria-sort"); });
    head.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (head, column) {
      if (!head.hasAttribute("data-type")) return;
      var button = document.createElement("button");
      button.type = "button";
      while (head.firstChild) button.appendChild(head.firstChild);
      head.appendChild(button);
      button.addEventListener("click", function () { sortBy(table, head, column); });
    });
    table.classList.add("sortable-ready");
  });
})();
"""


def script_hash(script: str = SORT_SCRIPT) -> str:
    """The CSP source for `script`: 'sha256-<base64 of the SHA-256 of its UTF-8 text>' (CSP Level 2)."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(script: str = SORT_SCRIPT) -> str:
    """Nothing loads or runs but inline styles, data: images (the histogram) and this one script."""
    return (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_hash(script)}; "
            "base-uri 'none'; form-action 'none'")
