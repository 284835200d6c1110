// A key's policy: the "who can do what" preview every reader sees, and the editor admins save
// with If-Match (a change made meanwhile is refused with 412, never overwritten).

import { field, h, localInput, table } from "../dom.js";

const TIMES = ["not_before", "not_after"];

/** The operations of a policy object (every field but the two times), in the API's order. */
function operations(policy) {
  return Object.keys(policy).filter((name) => !TIMES.includes(name));
}

/** "Who can do what": each principal the policy names, with its operations. */
function preview(policy) {
  const who = new Map();
  for (const operation of operations(policy)) {
    for (const name of policy[operation]) who.set(name, [...(who.get(name) ?? []), operation]);
  }
  const window = TIMES.filter((t) => policy[t])
    .map((t) => `${t.replace("_", " ")} ${policy[t]}`)
    .join(", ");
  const items = [...who.entries()]
    .sort()
    .map(([name, ops]) => h("li", {}, h("strong", {}, name), `: ${ops.join(", ")}`));
  return h(
    "div",
    { id: "policy-preview", "aria-live": "polite" },
    h("h3", {}, "Who can do what"),
    items.length
      ? h("ul", { class: "plain" }, items)
      : h("p", {}, "Nobody may use this key (its policy grants nothing)."),
    window ? h("p", { class: "muted" }, `Only ${window}.`) : null,
    h("p", { class: "muted" }, "Admins manage every key, but use one only where its policy names them."),
  );
}

export function policySection(ctx, item, principals, etag, path, act) {
  const policy = item.policy;
  const section = h("section", { "aria-labelledby": "policy-title" }, h("h2", { id: "policy-title" }, "Policy"));
  const previewHolder = h("div", {}, preview(policy));
  section.append(previewHolder);
  if (!ctx.admin) return section;
  const ops = operations(policy);
  const names = [...new Set([...principals, ...ops.flatMap((op) => policy[op])])].sort();
  const boxes = [];
  const draft = () => {
    const next = Object.fromEntries(ops.map((op) => [op, []]));
    for (const box of boxes) if (box.checked) next[box.dataset.operation].push(box.dataset.principal);
    for (const t of TIMES) if (times[t].value) next[t] = new Date(times[t].value).toISOString();
    return next;
  };
  const times = Object.fromEntries(
    TIMES.map((t) => [t, h("input", { type: "datetime-local", id: `policy-${t}`, value: localInput(policy[t]) })]),
  );
  const update = () => previewHolder.replaceChildren(preview(draft()));
  const rows = names.map((name) => [
    name,
    ...ops.map((op) => {
      const box = h("input", {
        type: "checkbox",
        checked: policy[op].includes(name),
        "aria-label": `${name} may ${op.replace(/_/g, " ")}`,
        onchange: update,
      });
      box.dataset.operation = op;
      box.dataset.principal = name;
      boxes.push(box);
      return box;
    }),
  ]);
  section.append(
    h(
      "form",
      {
        id: "policy-editor",
        onsubmit: (e) => {
          e.preventDefault();
          act("Policy saved.", "PATCH", path, { body: { policy: draft() }, headers: etag ? { "If-Match": etag } : {} });
        },
      },
      h("h3", {}, "Edit the policy"),
      names.length
        ? table(
            "Principals (rows) and the operations each may do (columns)",
            ["Principal", ...ops.map((op) => op.replace(/_/g, " "))],
            rows,
            "grid-check",
          )
        : h("p", {}, "No app or admin principal exists yet."),
      h("div", { class: "toolbar" }, field("Not before", times.not_before), field("Not after", times.not_after)),
      h("p", {}, h("button", { type: "submit", id: "save-policy" }, "Save policy")),
      h(
        "p",
        { class: "muted" },
        "The policy is replaced whole, only if nobody changed the key since this page was loaded.",
      ),
    ),
  );
  for (const t of TIMES) times[t].addEventListener("input", update);
  return section;
}
