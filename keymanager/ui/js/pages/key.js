// One key: details, versions (rotate, minimum decryption version), aliases, tags, its policy with
// a "who can do what" preview (admins edit it), state changes, BYOK import parameters. No
// plaintext, ciphertext or key material ever enters this page.

import { call, get } from "../api.js";
import { append, download, facts, field, h, notice, stateBadge, table, time } from "../dom.js";
import { policySection } from "./policy.js";

export async function keyPage(ctx, ref) {
  const [item] = await get("/v1/inventory/keys", { key: ref });
  const objects = item.versions.length
    ? await get(`/v1/inventory/keys/${encodeURIComponent(item.id)}/hsm-objects`)
    : null;
  const status = h("div", { "aria-live": "polite", id: "key-status" });
  let etag = null;
  let principals = [];
  if (ctx.admin) {
    const [read, listed] = await Promise.all([
      call("GET", `/v1/keys/${encodeURIComponent(item.name)}`),
      get("/v1/principals"),
    ]);
    etag = read.headers.get("ETag");
    principals = listed.filter((p) => p.role !== "auditor").map((p) => p.name);
  }
  const done = (message) => {
    ctx.rerender().then(() => document.getElementById("key-status")?.replaceChildren(notice(message, "success")));
  };
  const act = async (what, method, path, options) => {
    try {
      await call(method, path, options);
      done(what);
    } catch (error) {
      status.replaceChildren(notice(`${error.message} (${error.code})`, "error"));
    }
  };
  const path = `/v1/keys/${encodeURIComponent(item.id)}`;
  const importing = ctx.admin && item.origin === "external" ? await wrappingAlgorithms() : null;
  return h(
    "article",
    { "aria-labelledby": "key-title" },
    h("p", {}, h("a", { href: "#/keys" }, "← All keys")),
    h("h1", { id: "key-title" }, item.name, " ", stateBadge(item.state)),
    status,
    details(item),
    hsmObjects(item, objects),
    versions(ctx, item, path, act),
    names(item),
    policySection(ctx, item, principals, etag, path, act),
    ctx.admin ? stateSection(item, path, act) : null,
    importing ? importSection(item, path, status, importing) : null,
  );
}

function details(item) {
  const token = item.token_format ? JSON.stringify(item.token_format) : null;
  return h(
    "section",
    { "aria-labelledby": "details-title" },
    h("h2", { id: "details-title" }, "Details"),
    facts([
      ["Id", h("span", { class: "mono" }, item.id)],
      ["Spec", item.algorithm],
      ["Usage", item.usage],
      ["Origin", item.origin],
      [
        "Exportable",
        item.exportable
          ? "yes: its material may be fetched over KMIP by principals its policy names"
          : "no: the material never leaves the HSM",
      ],
      ["State", item.state],
      ["KMIP state", item.kmip_state],
      ["Description", item.description],
      ["Rotation", item.rotation_period_days ? `every ${item.rotation_period_days} days` : "manual"],
      ["Created", time(item.created_at)],
      ["Changed", time(item.updated_at)],
      ["Last used", item.last_used ? time(item.last_used) : "not among the newest audit records"],
      ["Deletion date", item.deletion_date ? time(item.deletion_date) : null],
      ["Token format", token],
      [
        "Algorithms",
        (item.signing_algorithms ?? item.encryption_algorithms ?? item.key_agreement_algorithms ?? []).join(", ") ||
          null,
      ],
    ]),
  );
}

/** What the token says of the primary version's objects: its attributes, read back. */
function hsmObjects(item, read) {
  const section = h("section", { "aria-labelledby": "hsm-title" }, h("h2", { id: "hsm-title" }, "In the HSM"));
  if (read === null) return append(section, [h("p", {}, "This key has no version in the HSM.")]);
  const shown = (value) =>
    value === null || value === undefined ? "—" : value === true ? "true" : value === false ? "false" : String(value);
  for (const object of read.objects) {
    if (object.missing) {
      section.append(
        notice(`The ${object.role} of version ${read.version} (${object.label}) is missing from the token.`, "error"),
      );
      continue;
    }
    const a = object.attributes;
    const rows = Object.entries(a).map(([name, value]) => [{ cell: name, class: "mono" }, shown(value)]);
    const gist = `sensitive ${shown(a.CKA_SENSITIVE)}, extractable ${shown(a.CKA_EXTRACTABLE)}, never extractable ${shown(a.CKA_NEVER_EXTRACTABLE)}, made in the token ${shown(a.CKA_LOCAL)}`;
    section.append(
      h(
        "details",
        { class: "hsm-object" },
        h("summary", {}, `Version ${read.version}, ${object.role} (${object.key_type}): ${gist}`),
        table(
          `${object.class}, ${object.key_type}${object.value_len ? `, ${object.value_len} bytes` : ""}, label ${object.label}`,
          ["Attribute", "Value as the token reads it back"],
          rows,
        ),
      ),
    );
  }
  return section;
}

function versions(ctx, item, path, act) {
  const rows = [...item.versions]
    .sort((a, b) => b.version - a.version)
    .map((v) => [
      String(v.version),
      time(v.created_at),
      v.version === item.primary_version
        ? "primary"
        : v.version < item.min_decryption_version
          ? "below the minimum: no longer decrypts"
          : "decrypts",
    ]);
  const parts = [
    h("h2", { id: "versions-title" }, "Versions"),
    table(
      `Primary version ${item.primary_version}; minimum decryption version ${item.min_decryption_version}`,
      ["Version", "Created", "Use"],
      rows,
    ),
  ];
  if (ctx.admin) {
    const minimum = h(
      "select",
      { id: "min-version" },
      item.versions.map((v) =>
        h(
          "option",
          { value: String(v.version), selected: v.version === item.min_decryption_version },
          String(v.version),
        ),
      ),
    );
    parts.push(
      h(
        "div",
        { class: "toolbar" },
        h(
          "button",
          {
            type: "button",
            id: "rotate",
            onclick: () => act("Rotated: a new primary version.", "POST", `${path}/rotate`),
          },
          "Rotate now",
        ),
        h(
          "form",
          {
            class: "inline",
            onsubmit: (e) => {
              e.preventDefault();
              act(`Minimum decryption version set to ${minimum.value}.`, "PATCH", path, {
                body: { min_decryption_version: Number(minimum.value) },
              });
            },
          },
          field("Minimum decryption version", minimum),
          h("button", { type: "submit", class: "secondary", id: "save-min-version" }, "Set minimum"),
        ),
      ),
    );
  }
  return h("section", { "aria-labelledby": "versions-title" }, parts);
}

function names(item) {
  const tags = Object.entries(item.tags);
  return h(
    "section",
    { "aria-labelledby": "names-title" },
    h("h2", { id: "names-title" }, "Aliases and tags"),
    item.aliases.length
      ? h(
          "ul",
          { class: "plain", id: "aliases" },
          item.aliases.map((a) => h("li", {}, `alias/${a}`)),
        )
      : h("p", {}, "No aliases besides its name."),
    tags.length
      ? table(
          "Tags",
          ["Tag", "Value"],
          tags.map(([k, v]) => [k, v]),
        )
      : h("p", {}, "No tags."),
    h("p", { class: "muted" }, "Aliases and tags are set through the AWS KMS API (CreateAlias, TagResource)."),
  );
}

function stateSection(item, path, act) {
  const parts = [h("h2", { id: "state-title" }, "State")];
  const toolbar = h("div", { class: "toolbar" });
  if (item.state === "enabled")
    toolbar.append(
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          id: "disable",
          onclick: () => act("Disabled.", "PATCH", path, { body: { enabled: false } }),
        },
        "Disable",
      ),
    );
  if (item.state === "disabled")
    toolbar.append(
      h(
        "button",
        {
          type: "button",
          class: "secondary",
          id: "enable",
          onclick: () => act("Enabled.", "PATCH", path, { body: { enabled: true } }),
        },
        "Enable",
      ),
    );
  if (item.state === "pending_deletion") {
    toolbar.append(
      h(
        "button",
        {
          type: "button",
          id: "cancel-deletion",
          onclick: () => act("Deletion cancelled: the key is disabled.", "POST", `${path}/cancel-deletion`),
        },
        "Cancel deletion",
      ),
    );
    parts.push(
      h("p", {}, "Deletion is scheduled for ", time(item.deletion_date), ": the HSM objects are destroyed then."),
    );
  }
  parts.push(toolbar);
  if (item.state === "enabled" || item.state === "disabled") {
    const days = h("input", { type: "number", id: "pending-days", value: "30", min: "0", inputmode: "numeric" });
    const confirmName = h("input", { type: "text", id: "confirm-name", autocomplete: "off", spellcheck: "false" });
    const schedule = h(
      "button",
      { type: "submit", class: "danger", id: "schedule-deletion", disabled: true },
      "Schedule deletion",
    );
    confirmName.addEventListener("input", () => {
      schedule.disabled = confirmName.value !== item.name;
    });
    parts.push(
      h(
        "form",
        {
          class: "inline",
          id: "deletion-form",
          onsubmit: (e) => {
            e.preventDefault();
            if (confirmName.value !== item.name) return;
            act(`Deletion scheduled in ${days.value} days.`, "DELETE", path, { query: { pending_days: days.value } });
          },
        },
        field("Waiting period (days)", days),
        field(`Type the key's name (${item.name}) to confirm`, confirmName),
        schedule,
      ),
      h("p", { class: "muted" }, "All use stops at once; the key can be brought back until the waiting period ends."),
    );
  }
  return h("section", { "aria-labelledby": "state-title" }, parts);
}

/** The wrapping algorithms this token supports for imports (the service's "import <name>" features). */
async function wrappingAlgorithms() {
  const service = await get("/v1/inventory/service");
  const names = (service.features?.supported ?? []).filter((f) => f.startsWith("import "));
  return names.map((f) => f.slice("import ".length));
}

function importSection(item, path, status, algorithms) {
  const algorithm = h(
    "select",
    { id: "wrapping-algorithm" },
    algorithms.map((a) => h("option", { value: a }, a)),
  );
  return h(
    "section",
    { "aria-labelledby": "import-title" },
    h("h2", { id: "import-title" }, "Import key material (BYOK)"),
    h(
      "p",
      {},
      "Download a wrapping public key and import token; wrap the key material with it offline, then import it through the API or kmctl.",
    ),
    h(
      "form",
      {
        class: "inline",
        onsubmit: async (e) => {
          e.preventDefault();
          try {
            const { data } = await call("POST", `${path}/import-parameters`, {
              body: { wrapping_algorithm: algorithm.value },
            });
            download(`${item.name}-import-parameters.json`, {
              key_id: item.id,
              wrapping_algorithm: algorithm.value,
              ...data,
            });
            status.replaceChildren(
              notice(
                `Import parameters downloaded; they expire ${new Date(data.expires_at).toLocaleString()}.`,
                "success",
              ),
            );
          } catch (error) {
            status.replaceChildren(notice(`${error.message} (${error.code})`, "error"));
          }
        },
      },
      field("Wrapping algorithm", algorithm),
      h("button", { type: "submit", id: "download-import" }, "Download import parameters"),
    ),
  );
}
