// Principals: names, roles and credentials of every kind (bearer tokens, shown once; access keys,
// their secrets shown once; certificate subjects). Only admins list and manage principals.

import { call, get } from "../api.js";
import { field, h, notice, table, time } from "../dom.js";

/** A secret shown once, with a button that removes it from the page. */
function shownOnce(title, pairs) {
  const box = h(
    "div",
    { class: "once", role: "alert", id: "shown-once" },
    h("h3", {}, title),
    h("p", {}, "Copy it now: it is never shown again."),
  );
  for (const [label, value] of pairs) {
    box.append(field(label, h("input", { type: "text", readonly: true, value, class: "mono", spellcheck: "false" })));
  }
  box.append(
    h("p", {}, h("button", { type: "button", id: "dismiss-once", onclick: () => box.remove() }, "I have copied it")),
  );
  return box;
}

export async function principalsPage(ctx) {
  const section = h("section", {}, h("h1", {}, "Principals"));
  if (!ctx.admin) {
    section.append(
      notice(
        "Only admins list and manage principals: the API refuses this page to an auditor's token. " +
          "The audit log names every principal that acted.",
      ),
    );
    return section;
  }
  const status = h("div", { "aria-live": "polite", id: "principal-status" });
  const listed = await get("/v1/principals");
  const actions = {
    refresh: async (shown) => {
      await ctx.rerender();
      if (shown) document.getElementById("principal-status")?.replaceChildren(shown);
    },
    failed: (error) => status.replaceChildren(notice(`${error.message} (${error.code})`, "error")),
  };
  const rows = listed.map((p) => [
    p.name,
    p.role,
    p.cert_subject ?? h("span", { class: "muted" }, "none"),
    p.key_store ? "yes, a KMIP key store" : p.create_keys ? "yes" : "no",
    time(p.created_at),
    accessKeys(p, actions),
    p.name === ctx.principal.name ? h("span", { class: "muted" }, "you") : deleteButton(p, actions),
  ]);
  section.append(
    status,
    createPrincipalForm(actions),
    table(
      `${listed.length} principals`,
      ["Name", "Role", "Certificate subject", "Creates keys", "Created", "Access keys", ""],
      rows,
    ),
    h(
      "p",
      { class: "muted" },
      "Bearer tokens are stored only as hashes: a principal's token is shown once, when it is created. " +
        "To replace a lost token, delete the principal and create it again.",
    ),
  );
  return section;
}

/** The access keys of principal `p`: listed on demand, each deletable, a new one's secret shown once. */
function accessKeys(p, { refresh, failed }) {
  const base = `/v1/principals/${encodeURIComponent(p.name)}/access-keys`;
  const cell = h("div", {});
  const remove = (k) =>
    h(
      "button",
      {
        type: "button",
        class: "secondary",
        "aria-label": `Delete access key ${k.access_key_id}`,
        onclick: () =>
          call("DELETE", `${base}/${encodeURIComponent(k.access_key_id)}`).then(
            () => refresh(notice(`Access key ${k.access_key_id} deleted.`, "success")),
            failed,
          ),
      },
      "Delete",
    );
  const create = async () => {
    try {
      const { data } = await call("POST", base, { body: {} });
      const pairs = [
        ["Access key id", data.access_key_id],
        ["Secret access key", data.secret_access_key],
      ];
      refresh(shownOnce(`Access key for ${p.name}`, pairs));
    } catch (error) {
      failed(error);
    }
  };
  const show = async () => {
    try {
      const keys = await get(base);
      const items = keys.map((k) =>
        h("li", {}, h("span", { class: "mono" }, k.access_key_id), " ", time(k.created_at), " ", remove(k)),
      );
      cell.replaceChildren(
        items.length ? h("ul", { class: "plain" }, items) : h("span", { class: "muted" }, "none"),
        h(
          "button",
          { type: "button", class: "secondary", "aria-label": `Create an access key for ${p.name}`, onclick: create },
          "Create access key",
        ),
      );
    } catch (error) {
      failed(error);
    }
  };
  cell.append(h("button", { type: "button", class: "secondary", onclick: show }, "Show access keys"));
  return cell;
}

/** Delete principal `p`: a first press arms the button, a second deletes. */
function deleteButton(p, { refresh, failed }) {
  const button = h(
    "button",
    {
      type: "button",
      class: "danger",
      "aria-label": `Delete principal ${p.name}`,
      onclick: () => {
        if (button.dataset.armed !== "yes") {
          button.dataset.armed = "yes";
          button.textContent = `Confirm: delete ${p.name}`;
          button.setAttribute("aria-label", `Confirm deleting principal ${p.name}`);
          return;
        }
        call("DELETE", `/v1/principals/${encodeURIComponent(p.name)}`).then(
          () => refresh(notice(`Principal ${p.name} deleted: its credentials stopped working.`, "success")),
          failed,
        );
      },
    },
    "Delete",
  );
  return button;
}

function createPrincipalForm({ refresh, failed }) {
  const name = h("input", { type: "text", id: "new-principal-name", required: true, maxlength: "64" });
  const role = h(
    "select",
    { id: "new-principal-role" },
    ["app", "admin", "auditor"].map((r) => h("option", { value: r }, r)),
  );
  const subject = h("input", {
    type: "text",
    id: "new-principal-subject",
    maxlength: "1024",
    placeholder: "CN=billing,O=example",
  });
  const createKeys = h("input", { type: "checkbox", id: "new-principal-create-keys" });
  const keyStore = h("input", { type: "checkbox", id: "new-principal-key-store" });
  return h(
    "details",
    { id: "create-principal" },
    h("summary", {}, "Create a principal"),
    h(
      "form",
      {
        class: "inline",
        "aria-label": "Create a principal",
        onsubmit: async (e) => {
          e.preventDefault();
          const body = { name: name.value.trim(), role: role.value };
          if (subject.value.trim()) body.cert_subject = subject.value.trim();
          if (createKeys.checked || keyStore.checked) body.create_keys = true;
          if (keyStore.checked) body.key_store = true;
          try {
            const { data } = await call("POST", "/v1/principals", { body });
            refresh(shownOnce(`Bearer token of ${data.name}`, [["Token", data.token]]));
          } catch (error) {
            failed(error);
          }
        },
      },
      field("Name", name),
      field("Role", role),
      field("Client certificate subject (optional)", subject),
      h(
        "div",
        { class: "field" },
        h("label", { for: "new-principal-create-keys" }, "May create its own keys"),
        createKeys,
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: "new-principal-key-store" }, "KMIP key store (its AES keys are exportable to it)"),
        keyStore,
      ),
      h("button", { type: "submit" }, "Create principal"),
    ),
  );
}
