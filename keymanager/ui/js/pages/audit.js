// Audit: the hash-chained log, newest first, filtered by key, principal, action, outcome and
// time, paged by position; the chain's verification (on demand: it reads the whole log) and the
// last checkpoint the answering worker wrote.

import { get } from "../api.js";
import { facts, field, h, notice, table, time } from "../dom.js";

const query = { key: "", principal: "", action: "", outcome: "", since: "", limit: "50" };

function row(r) {
  const key = r.key_id ? h("a", { href: `#/keys/${encodeURIComponent(r.key_id)}`, class: "mono" }, r.key_id) : "—";
  return [
    time(r.time),
    r.principal ?? "—",
    r.action,
    key,
    r.key_version === null ? "—" : String(r.key_version),
    h("span", { class: r.outcome === "ok" ? "ok" : "bad" }, r.outcome),
    String(r.status),
    r.client ?? "—",
    { cell: Object.keys(r.details).length ? JSON.stringify(r.details) : "", class: "details" },
  ];
}

export async function auditPage() {
  const service = await get("/v1/inventory/service");
  const records = await recordsPanel();
  return h(
    "section",
    {},
    h("h1", {}, "Audit log"),
    h("h2", { id: "chain-title" }, "Chain"),
    ...chainPanel(service),
    h("h2", {}, "Records"),
    ...records,
  );
}

/** The chain's verification (on demand) and the last checkpoint the answering worker wrote. */
function chainPanel(service) {
  const chain = h(
    "div",
    { "aria-live": "polite", id: "chain-status" },
    h("p", { class: "muted" }, "Not verified in this view yet."),
  );
  const check = async () => {
    verify.disabled = true;
    chain.replaceChildren(h("p", { role: "status" }, "Verifying every chain and its seals…"));
    try {
      const result = await get("/v1/audit/verify");
      const broken = `Broken at chain ${result.first_broken_chain}, record ${result.first_broken_seq}: ${result.reason}`;
      chain.replaceChildren(
        result.ok
          ? notice(`Intact: ${result.records} records verified, links and HSM seals.`, "success")
          : notice(broken, "error"),
      );
    } catch (error) {
      chain.replaceChildren(notice(`${error.message} (${error.code})`, "error"));
    } finally {
      verify.disabled = false;
    }
  };
  const verify = h(
    "button",
    { type: "button", class: "secondary", id: "verify-chain", onclick: check },
    "Verify the chain",
  );
  const checkpoint = service.checkpoint;
  return [
    h("div", { class: "toolbar" }, verify),
    chain,
    checkpoint
      ? facts([
          ["Last checkpoint", time(checkpoint.time)],
          ["Chains", String(checkpoint.chains)],
          ["Line", h("span", { class: "mono" }, checkpoint.line)],
        ])
      : h(
          "p",
          { class: "muted" },
          `The answering worker (process ${service.process.pid}) has not written a checkpoint yet: ` +
            "it writes one every checkpoint interval when the log moved, and at shutdown.",
        ),
    h(
      "p",
      { class: "muted" },
      "Keep checkpoint lines off the database's host: keymanager audit verify --checkpoint catches a " +
        "truncated tail against one.",
    ),
  ];
}

/** The filter form and the records it finds, newest first, paged by position (the API's cursors). */
async function recordsPanel() {
  const results = h("div", { "aria-live": "polite", id: "audit-results" });
  const inputs = filterInputs();
  const cursors = [];
  const pagerButton = (id, label, disabled, onclick) =>
    h("button", { type: "button", class: "secondary", id, disabled, onclick }, label);
  const load = async (before) => {
    const since = query.since ? new Date(query.since).toISOString() : "";
    try {
      const { key, principal, action, outcome, limit } = query;
      const page = await get("/v1/audit", { order: "desc", key, principal, action, outcome, since, limit, before });
      const older = pagerButton("audit-older", "Older records", page.next === null, () => {
        cursors.push(before);
        load(page.next);
      });
      const newer = pagerButton("audit-newer", "Newer records", cursors.length === 0, () => load(cursors.pop()));
      results.replaceChildren(
        page.records.length
          ? table(
              `${page.records.length} records, newest first`,
              ["Time", "Principal", "Action", "Key", "Version", "Outcome", "Status", "Client", "Details"],
              page.records.map(row),
            )
          : notice("No record matches these filters."),
        h("nav", { class: "pager", "aria-label": "Pages of records" }, newer, older),
      );
    } catch (error) {
      results.replaceChildren(notice(`${error.message} (${error.code})`, "error"));
    }
  };
  const form = h(
    "form",
    {
      class: "inline",
      id: "audit-filters",
      role: "search",
      "aria-label": "Filter the audit log",
      onsubmit: (e) => {
        e.preventDefault();
        for (const [name, input] of Object.entries(inputs)) query[name] = input.value.trim();
        cursors.length = 0;
        load(undefined);
      },
    },
    field("Key", inputs.key),
    field("Principal", inputs.principal),
    field("Action", inputs.action),
    field("Outcome", inputs.outcome),
    field("Since", inputs.since),
    field("Per page", inputs.limit),
    h("button", { type: "submit", id: "audit-apply" }, "Apply filters"),
  );
  await load(undefined);
  return [form, results];
}

function filterInputs() {
  const options = (values, current, none) =>
    values.map((v) => h("option", { value: v, selected: v === current }, v || none));
  return {
    key: h("input", { type: "text", id: "audit-key", value: query.key, placeholder: "name or id" }),
    principal: h("input", { type: "text", id: "audit-principal", value: query.principal }),
    action: h("input", { type: "text", id: "audit-action", value: query.action, placeholder: "key.rotate" }),
    outcome: h("select", { id: "audit-outcome" }, options(["", "ok", "denied", "error"], query.outcome, "any")),
    since: h("input", { type: "datetime-local", id: "audit-since", value: query.since }),
    limit: h("select", { id: "audit-limit" }, options(["25", "50", "100", "500"], query.limit)),
  };
}
