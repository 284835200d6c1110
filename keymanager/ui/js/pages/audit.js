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
  const results = h("div", { "aria-live": "polite", id: "audit-results" });
  const inputs = {
    key: h("input", { type: "text", id: "audit-key", value: query.key, placeholder: "name or id" }),
    principal: h("input", { type: "text", id: "audit-principal", value: query.principal }),
    action: h("input", { type: "text", id: "audit-action", value: query.action, placeholder: "key.rotate" }),
    outcome: h("select", { id: "audit-outcome" }, ["", "ok", "denied", "error"].map((o) => h("option", { value: o, selected: o === query.outcome }, o || "any"))),
    since: h("input", { type: "datetime-local", id: "audit-since", value: query.since }),
    limit: h("select", { id: "audit-limit" }, ["25", "50", "100", "500"].map((n) => h("option", { value: n, selected: n === query.limit }, n))),
  };
  const cursors = [];
  const load = async (before) => {
    const since = query.since ? new Date(query.since).toISOString() : "";
    try {
      const page = await get("/v1/audit", { order: "desc", key: query.key, principal: query.principal, action: query.action, outcome: query.outcome, since, limit: query.limit, before });
      const older = h("button", { type: "button", class: "secondary", id: "audit-older", disabled: page.next === null, onclick: () => { cursors.push(before); load(page.next); } }, "Older records");
      const newer = h("button", { type: "button", class: "secondary", id: "audit-newer", disabled: cursors.length === 0, onclick: () => load(cursors.pop()) }, "Newer records");
      results.replaceChildren(
        page.records.length
          ? table(`${page.records.length} records, newest first`, ["Time", "Principal", "Action", "Key", "Version", "Outcome", "Status", "Client", "Details"], page.records.map(row))
          : notice("No record matches these filters."),
        h("nav", { class: "pager", "aria-label": "Pages of records" }, newer, older),
      );
    } catch (error) {
      results.replaceChildren(notice(`${error.message} (${error.code})`, "error"));
    }
  };
  const form = h("form", { class: "inline", id: "audit-filters", role: "search", "aria-label": "Filter the audit log", onsubmit: (e) => {
    e.preventDefault();
    for (const [name, input] of Object.entries(inputs)) query[name] = input.value.trim();
    cursors.length = 0;
    load(undefined);
  } },
    field("Key", inputs.key), field("Principal", inputs.principal), field("Action", inputs.action), field("Outcome", inputs.outcome),
    field("Since", inputs.since), field("Per page", inputs.limit),
    h("button", { type: "submit", id: "audit-apply" }, "Apply filters"));

  const chain = h("div", { "aria-live": "polite", id: "chain-status" }, h("p", { class: "muted" }, "Not verified in this view yet."));
  const verify = h("button", { type: "button", class: "secondary", id: "verify-chain", onclick: async () => {
    verify.disabled = true;
    chain.replaceChildren(h("p", { role: "status" }, "Verifying every chain and its seals…"));
    try {
      const result = await get("/v1/audit/verify");
      chain.replaceChildren(result.ok
        ? notice(`Intact: ${result.records} records verified, links and HSM seals.`, "success")
        : notice(`Broken at chain ${result.first_broken_chain}, record ${result.first_broken_seq}: ${result.reason}`, "error"));
    } catch (error) {
      chain.replaceChildren(notice(`${error.message} (${error.code})`, "error"));
    } finally {
      verify.disabled = false;
    }
  } }, "Verify the chain");
  const service = await get("/v1/inventory/service");
  const checkpoint = service.checkpoint;
  await load(undefined);
  return h(
    "section",
    {},
    h("h1", {}, "Audit log"),
    h("h2", { id: "chain-title" }, "Chain"),
    h("div", { class: "toolbar" }, verify),
    chain,
    checkpoint
      ? facts([["Last checkpoint", time(checkpoint.time)], ["Chains", String(checkpoint.chains)], ["Line", h("span", { class: "mono" }, checkpoint.line)]])
      : h("p", { class: "muted" }, `The answering worker (process ${service.process.pid}) has not written a checkpoint yet: it writes one every checkpoint interval when the log moved, and at shutdown.`),
    h("p", { class: "muted" }, "Keep checkpoint lines off the database's host: keymanager audit verify --checkpoint catches a truncated tail against one."),
    h("h2", {}, "Records"),
    form,
    results,
  );
}
