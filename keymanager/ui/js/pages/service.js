// HSM and service: the token and what it can do (its mechanism table by name, what each key spec
// needs), readiness, the database and its replicas, the doors and their ports, the worker.

import { get } from "../api.js";
import { facts, field, h, table } from "../dom.js";

const yesNo = (value) => (value === null || value === undefined ? "unknown" : value ? "yes" : "no");

export async function servicePage() {
  const s = await get("/v1/inventory/service");
  const filter = h("input", { type: "search", id: "mechanism-filter", placeholder: "AES, SHA256_HMAC, EC…" });
  const mechanisms = h("div", { "aria-live": "polite" });
  const showMechanisms = () => {
    const text = filter.value.trim().toUpperCase();
    const rows = s.mechanisms
      .filter((m) => !text || m.name.includes(text))
      .map((m) => [
        { cell: m.name, class: "mono" },
        String(m.min_key_size),
        String(m.max_key_size),
        m.flags === null ? "not reported reliably by this module" : m.flags.join(", "),
      ]);
    mechanisms.replaceChildren(
      table(
        `${rows.length} of ${s.mechanisms.length} mechanisms the token lists`,
        ["Mechanism", "Min key size", "Max key size", "Flags"],
        rows,
      ),
    );
  };
  filter.addEventListener("input", showMechanisms);
  showMechanisms();
  const unsupported = Object.entries(s.features?.unsupported ?? {});
  const db = s.database;
  const replicas = db.replicas ?? null;
  return h(
    "section",
    {},
    h("h1", {}, "HSM and service"),
    h("h2", {}, "Readiness"),
    facts(
      Object.entries(s.readiness).map(([part, state]) => [
        part,
        h("span", { class: state === "ok" ? "ok" : "bad" }, state),
      ]),
    ),
    h("h2", {}, "Token"),
    facts([
      ["Label", s.token.label],
      ["PKCS#11 module", h("span", { class: "mono" }, s.token.module)],
      ["Manufacturer", s.token.manufacturer],
      ["Model", s.token.model],
      ["Serial", s.token.serial],
      ["Error", s.token.error],
    ]),
    h("h2", {}, "Database"),
    facts([
      ["Dialect", db.dialect],
      ["Driver", db.driver],
      ["Version", db.version],
      ["Standby", db.standby === undefined ? null : yesNo(db.standby)],
      [
        "Streaming replicas",
        replicas === null
          ? "not applicable"
          : replicas.length
            ? replicas.map((r) => `${r.name} (${r.state}, ${r.sync})`).join("; ")
            : "none visible",
      ],
    ]),
    h("h2", {}, "Doors"),
    table(
      "Which doors are on, and where",
      ["Door", "On", "Host", "Port", "Path", "Authentication"],
      s.doors.map((d) => [d.name, yesNo(d.on), d.host, d.port === null ? "—" : String(d.port), d.path ?? "—", d.auth]),
    ),
    h("h2", {}, "This worker"),
    facts([
      ["Process", String(s.process.pid)],
      ["Workers setting", s.process.workers === null ? "one per CPU" : String(s.process.workers)],
      ["Environment", s.process.env],
    ]),
    h("h2", {}, "Key specs this token supports"),
    table(
      "From the table of key types, against the token's mechanisms",
      ["Spec", "Usage", "Supported"],
      s.specs.map((spec) => [
        spec.algorithm,
        spec.usage,
        h("span", { class: spec.supported ? "ok" : "bad" }, yesNo(spec.supported)),
      ]),
    ),
    unsupported.length
      ? table(
          "What the service cannot do with this token, and why",
          ["Feature", "Missing"],
          unsupported.map(([f, why]) => [f, why]),
        )
      : h("p", {}, "Every feature of the service is available on this token."),
    h("h2", {}, "Mechanisms"),
    h(
      "form",
      { class: "inline", role: "search", "aria-label": "Filter mechanisms", onsubmit: (e) => e.preventDefault() },
      field("Filter by name", filter),
    ),
    mechanisms,
  );
}
