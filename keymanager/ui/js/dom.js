// Building the page from data without ever parsing it as markup: every text goes in as textContent
// (the page's Content-Security-Policy enforces Trusted Types, so innerHTML with a string would throw).

/** An element: `h("a", {href, class, onclick}, child, ...)`; children are nodes or text (never markup). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") el.className = value;
    else if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "value" || name === "checked" || name === "disabled" || name === "selected") el[name] = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

/** Append `children` (nodes, text, arrays of them; null and false skipped) to `el`. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** A labelled form field: its label, then the control (`control` made with `h`, given an id). */
export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 10)}`;
  control.id = id;
  const parts = [h("label", { for: id }, label), control];
  if (hint) {
    const hintId = `${id}-hint`;
    control.setAttribute("aria-describedby", hintId);
    parts.push(h("span", { id: hintId, class: "muted" }, hint));
  }
  return h("div", { class: "field" }, parts);
}

/** A table: a caption, column headings and rows of cells (text or nodes; a cell may be {node, class}). */
export function table(caption, headings, rows, className) {
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      { class: className },
      h("caption", {}, caption),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          headings.map((name) => h("th", { scope: "col" }, name)),
        ),
      ),
      h(
        "tbody",
        {},
        rows.map((cells) =>
          h(
            "tr",
            {},
            cells.map((cell) => (cell && cell.cell ? h("td", { class: cell.class }, cell.cell) : h("td", {}, cell))),
          ),
        ),
      ),
    ),
  );
}

/** A list of facts as a description list: `[[term, value], ...]` (null values shown as a dash). */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.map(([term, value]) => [
      h("dt", {}, term),
      h("dd", {}, value === null || value === undefined || value === "" ? "—" : value),
    ]),
  );
}

/** A notice (role status or alert) with `text`. */
export function notice(text, kind = "") {
  return h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, text);
}

/** A time as the reader's locale writes it, with the ISO form as the element's datetime. */
export function time(iso) {
  if (!iso) return "—";
  const at = new Date(iso);
  return h("time", { datetime: iso, title: iso }, at.toLocaleString());
}

/** A badge for a key state. */
export function stateBadge(state) {
  return h("span", { class: `badge state-${state}` }, state.replace(/_/g, " "));
}

/** Offer `data` as a file named `name` (JSON) to download. */
export function download(name, data) {
  const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: name, class: "skip" }, name);
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** An ISO time as a datetime-local input's value, in the reader's time zone ("" for none). */
export function localInput(iso) {
  if (!iso) return "";
  const at = new Date(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())}T${pad(at.getHours())}:${pad(at.getMinutes())}`;
}
