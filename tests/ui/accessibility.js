// The accessibility checks of tests/ui/test_access.py, run in the page: every problem found, as
// text. WCAG 2.1 AA where it can be told from the DOM alone: every control and link has an
// accessible name (1.3.1, 4.1.2), one h1 and no skipped heading level (1.3.1), tables with a
// caption and column headers (1.3.1), unique ids (4.1.1), the document's language (3.1.1), and
// text contrast of at least 4.5:1 (3:1 for large text) against its background (1.4.3).
() => {
  const problems = [];
  const visible = (el) => !el.closest("[hidden]") && el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  const text = (el) => (el ? el.textContent : "").trim();
  const nameOf = (el) => {
    const labelled = (el.getAttribute("aria-labelledby") || "").split(/\s+/).filter(Boolean).map((id) => text(document.getElementById(id))).join(" ");
    const labels = el.labels ? [...el.labels].map(text).join(" ") : "";
    const own = ["BUTTON", "A", "SUMMARY"].includes(el.tagName) ? text(el) : "";
    return (el.getAttribute("aria-label") || labelled || labels || own || el.getAttribute("title") || "").trim();
  };
  for (const el of document.querySelectorAll("input, select, textarea, button, a[href], summary")) {
    if (!visible(el)) continue;
    if (!nameOf(el)) problems.push(`no accessible name: ${el.outerHTML.slice(0, 100)}`);
  }
  if (!document.documentElement.lang) problems.push("the document names no language");
  const h1s = [...document.querySelectorAll("h1")].filter(visible);
  if (h1s.length !== 1) problems.push(`${h1s.length} visible h1 headings`);
  let level = 0;
  for (const heading of [...document.querySelectorAll("h1, h2, h3, h4, h5, h6")].filter(visible)) {
    const next = Number(heading.tagName[1]);
    if (next > level + 1) problems.push(`heading level skipped: h${level} then h${next} "${text(heading)}"`);
    level = next;
  }
  for (const tableEl of document.querySelectorAll("table")) {
    if (!text(tableEl.querySelector("caption"))) problems.push("a table without a caption");
    if (!tableEl.querySelector("thead th[scope=col]")) problems.push(`a table without column headers: ${text(tableEl.querySelector("caption"))}`);
  }
  const ids = [...document.querySelectorAll("[id]")].map((el) => el.id);
  for (const id of new Set(ids.filter((id, i) => ids.indexOf(id) !== i))) problems.push(`duplicate id ${id}`);

  const rgba = (value) => {
    const parts = value.match(/[\d.]+/g)?.map(Number) ?? [0, 0, 0, 0];
    return { r: parts[0], g: parts[1], b: parts[2], a: parts.length > 3 ? parts[3] : 1 };
  };
  const background = (el) => {
    for (let at = el; at; at = at.parentElement) {
      const colour = rgba(getComputedStyle(at).backgroundColor);
      if (colour.a > 0.5) return colour;
    }
    return { r: 255, g: 255, b: 255, a: 1 };
  };
  const luminance = ({ r, g, b }) => {
    const lin = (c) => { const s = c / 255; return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  for (const el of document.body.querySelectorAll("*")) {
    const ownText = [...el.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!ownText || !visible(el) || ["SCRIPT", "STYLE", "OPTION"].includes(el.tagName)) continue;
    if (el.disabled) continue; // WCAG 1.4.3 exempts inactive controls
    const style = getComputedStyle(el);
    const fg = rgba(style.color);
    const bg = background(el);
    const [light, dark] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
    const ratio = (light + 0.05) / (dark + 0.05);
    const size = parseFloat(style.fontSize);
    const large = size >= 24 || (size >= 18.66 && Number(style.fontWeight) >= 700);
    if (ratio < (large ? 3 : 4.5)) problems.push(`contrast ${ratio.toFixed(2)}:1 for "${text(el).slice(0, 40)}" (${style.color} on rgb(${bg.r}, ${bg.g}, ${bg.b}))`);
  }
  return problems;
}
