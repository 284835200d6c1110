// Keys: every key with its spec, usage, state, primary version, rotation and last use (from the
// audit chain); search by name, alias or id, filter by spec, state and tag, paged. Admins create keys here.

import { call, get } from "../api.js";
import { field, h, notice, stateBadge, table, time } from "../dom.js";

const PAGE_SIZE = 20;
const filters = { text: "", spec: "", state: "", tag: "", page: 0 };

function matches(key) {
  const text = filters.text.toLowerCase();
  if (text && ![key.name, key.id, key.description, ...key.aliases].some((s) => s.toLowerCase().includes(text)))
    return false;
  if (filters.spec && key.algorithm !== filters.spec) return false;
  if (filters.state && key.state !== filters.state) return false;
  if (filters.tag) {
    const [tagKey, ...rest] = filters.tag.split("=");
    const value = rest.join("=");
    if (!(tagKey in key.tags)) return false;
    if (rest.length && key.tags[tagKey] !== value) return false;
  }
  return true;
}

function rotation(key) {
  return key.rotation_period_days ? `every ${key.rotation_period_days} days` : "manual";
}

function choice(id, label, values, current) {
  const select = h(
    "select",
    { id },
    h("option", { value: "" }, "any"),
    values.map((v) => h("option", { value: v, selected: v === current }, v)),
  );
  return [field(label, select), select];
}

export async function keysPage(ctx) {
  const keys = await get("/v1/inventory/keys");
  const listing = h("div", { "aria-live": "polite" });
  const specs = [...new Set(keys.map((k) => k.algorithm))].sort();
  const states = [...new Set(keys.map((k) => k.state))].sort();
  const search = h("input", { type: "search", id: "key-search", value: filters.text });
  const [specField, specSelect] = choice("key-spec", "Spec", specs, filters.spec);
  const [stateField, stateSelect] = choice("key-state", "State", states, filters.state);
  const tag = h("input", { type: "text", id: "key-tag", value: filters.tag, placeholder: "key or key=value" });

  const show = () => {
    const shown = keys.filter(matches);
    const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
    filters.page = Math.min(filters.page, pages - 1);
    const slice = shown.slice(filters.page * PAGE_SIZE, (filters.page + 1) * PAGE_SIZE);
    const rows = slice.map((k) => [
      h("a", { href: `#/keys/${encodeURIComponent(k.name)}` }, k.name),
      k.algorithm,
      k.usage,
      stateBadge(k.state),
      String(k.primary_version),
      rotation(k),
      k.last_used ? time(k.last_used) : h("span", { class: "muted" }, "not recently"),
      k.aliases.join(", "),
    ]);
    const first = shown.length ? filters.page * PAGE_SIZE + 1 : 0;
    const summary = `Keys ${first}–${filters.page * PAGE_SIZE + slice.length} of ${shown.length} (${keys.length} in all)`;
    const previous = h(
      "button",
      {
        type: "button",
        class: "secondary",
        disabled: filters.page === 0,
        onclick: () => {
          filters.page -= 1;
          show();
        },
      },
      "Previous page",
    );
    const next = h(
      "button",
      {
        type: "button",
        class: "secondary",
        disabled: filters.page >= pages - 1,
        onclick: () => {
          filters.page += 1;
          show();
        },
      },
      "Next page",
    );
    listing.replaceChildren(
      shown.length
        ? table(
            summary,
            ["Name", "Spec", "Usage", "State", "Primary version", "Rotation", "Last used", "Aliases"],
            rows,
          )
        : notice(keys.length ? "No key matches these filters." : "No keys yet."),
      h(
        "nav",
        { class: "pager", "aria-label": "Pages of keys" },
        previous,
        h("span", {}, `Page ${filters.page + 1} of ${pages}`),
        next,
      ),
    );
  };
  const refilter = () => {
    Object.assign(filters, {
      text: search.value.trim(),
      spec: specSelect.value,
      state: stateSelect.value,
      tag: tag.value.trim(),
      page: 0,
    });
    show();
  };
  for (const control of [search, specSelect, stateSelect, tag]) control.addEventListener("input", refilter);
  show();

  return h(
    "section",
    {},
    h("h1", {}, "Keys"),
    ctx.admin ? createKeyForm() : h("p", { class: "muted" }, "Read-only: only admins create and change keys."),
    h(
      "form",
      { class: "inline", role: "search", "aria-label": "Filter keys", onsubmit: (e) => e.preventDefault() },
      field("Search name, alias or id", search),
      specField,
      stateField,
      field("Tag", tag),
    ),
    listing,
  );
}

function createKeyForm() {
  const name = h("input", {
    type: "text",
    id: "new-key-name",
    required: true,
    maxlength: "128",
    pattern: "[A-Za-z][A-Za-z0-9_.\\-]*",
  });
  const spec = h(
    "select",
    { id: "new-key-spec" },
    h("option", { value: "AES_256_CBC_HMAC_SHA256|" }, "AES_256_CBC_HMAC_SHA256"),
  );
  const description = h("input", { type: "text", id: "new-key-description", maxlength: "256" });
  const rotationDays = h("input", {
    type: "number",
    id: "new-key-rotation",
    min: "1",
    max: "36500",
    inputmode: "numeric",
  });
  const status = h("div", { "aria-live": "polite" });
  const panel = h("details", { id: "create-key" }, h("summary", {}, "Create a key"));
  let loaded = false;
  panel.addEventListener("toggle", async () => {
    if (!panel.open || loaded) return;
    loaded = true;
    const service = await get("/v1/inventory/service");
    const offered = service.specs.filter((s) => s.supported !== false && s.algorithm !== "FF1_AES_256");
    spec.replaceChildren(
      ...offered.map((s) =>
        h(
          "option",
          {
            value: `${s.algorithm}|${s.default_usage ? "" : s.usage}`,
            selected: s.algorithm === "AES_256_CBC_HMAC_SHA256",
          },
          s.default_usage ? s.algorithm : `${s.algorithm} (${s.usage})`,
        ),
      ),
    );
  });
  const form = h(
    "form",
    {
      class: "inline",
      "aria-label": "Create a key",
      onsubmit: async (event) => {
        event.preventDefault();
        const [algorithm, usage] = spec.value.split("|");
        const body = { name: name.value.trim(), algorithm, policy: {}, description: description.value };
        if (usage) body.usage = usage;
        if (rotationDays.value) body.rotation_period_days = Number(rotationDays.value);
        try {
          const { data } = await call("POST", "/v1/keys", { body });
          location.hash = `#/keys/${encodeURIComponent(data.name)}`;
        } catch (error) {
          status.replaceChildren(notice(`The key was not created: ${error.message} (${error.code})`, "error"));
        }
      },
    },
    field("Name", name),
    field("Spec", spec),
    field("Description", description),
    field("Rotate every (days)", rotationDays),
    h("button", { type: "submit" }, "Create key"),
  );
  panel.append(
    form,
    status,
    h(
      "p",
      { class: "muted" },
      "A new key's policy grants nothing: name who may use it on its page. FF1 tokenization keys need a token format: create them through the API or kmctl.",
    ),
  );
  return panel;
}
