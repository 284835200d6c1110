// Approvals (dual control): the requests guarded calls made, what each will run (operations, target,
// arguments) and its digest; an approver approves by that digest or denies. Admins and auditors see
// them; who may approve one is the request's rule's (the service refuses anyone else, and the requester).

import { call, get } from "../api.js";
import { h, notice, table, time } from "../dom.js";

const STATES = ["pending", "approved", "executed", "denied", "expired"];

export async function approvalsPage(ctx) {
  const wanted = new URLSearchParams(location.hash.split("?")[1] ?? "").get("state") ?? "pending";
  const state = STATES.includes(wanted) ? wanted : "pending";
  const status = h("div", { "aria-live": "polite", id: "approval-status" });
  const listed = await get("/v1/approvals", { state });
  const failed = (error) => status.replaceChildren(notice(`${error.message} (${error.code})`, "error"));
  const done = async (what) => {
    await ctx.rerender();
    document.getElementById("approval-status")?.replaceChildren(notice(what, "success"));
  };
  const rows = listed.map((r) => [
    h("span", { class: "mono" }, r.id),
    r.operations.join(", "),
    h("span", { class: "mono" }, r.target),
    h("code", { class: "mono" }, JSON.stringify(r.arguments)),
    r.requester,
    `${r.approvals.length} of ${r.approvals_required}`,
    time(r.expires_at),
    h("span", { class: "mono", title: r.digest }, `${r.digest.slice(0, 16)}…`),
    r.state === "pending" && r.requester !== ctx.principal.name ? decide(r, done, failed) : r.state,
  ]);
  return h(
    "section",
    {},
    h("h1", {}, "Approvals"),
    h(
      "p",
      {},
      "Guarded calls wait here for their approvals. An approval counts for exactly what is shown: " +
        "the operations, their target and arguments, bound by the digest. The requester then sends the same call again.",
    ),
    h(
      "nav",
      { "aria-label": "Approval states" },
      STATES.map((s) => [
        h("a", { href: `#/approvals?state=${s}`, "aria-current": s === state ? "page" : undefined }, s),
        " ",
      ]),
    ),
    status,
    table(
      `${listed.length} ${state} requests`,
      ["Request", "Operations", "Target", "Arguments", "Requester", "Approvals", "Expires", "Digest", ""],
      rows,
    ),
  );
}

function decide(r, done, failed) {
  const path = `/v1/approvals/${encodeURIComponent(r.id)}`;
  return h(
    "div",
    { class: "toolbar" },
    h(
      "button",
      {
        type: "button",
        "aria-label": `Approve request ${r.id}`,
        onclick: () => call("POST", `${path}/approve`, { body: { digest: r.digest } }).then(() => done("Approved."), failed),
      },
      "Approve",
    ),
    h(
      "button",
      {
        type: "button",
        class: "danger",
        "aria-label": `Deny request ${r.id}`,
        onclick: () => call("POST", `${path}/deny`, { body: { reason: null } }).then(() => done("Denied."), failed),
      },
      "Deny",
    ),
  );
}
