// Sign-in: paste an admin's or auditor's bearer token (kept in memory for this tab only), or use
// the browser's TLS client certificate when the service asks for one.

import { field, h, notice } from "../dom.js";

export function signInPage({ facts, reason, refused, signIn }) {
  const input = h("input", {
    type: "password",
    id: "token",
    name: "token",
    autocomplete: "off",
    spellcheck: "false",
    required: true,
  });
  const status = h("div", { "aria-live": "polite" });
  if (reason) status.append(notice(reason, refused ? "error" : ""));
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    {
      class: "signin",
      onsubmit: async (event) => {
        event.preventDefault();
        submit.disabled = true;
        const failed = await signIn(input.value.trim());
        submit.disabled = false;
        if (failed) {
          status.replaceChildren(notice(failed, "error"));
          input.select();
        }
      },
    },
    field(
      "Bearer token",
      input,
      "An admin's or auditor's token. It stays in this tab's memory: closing or reloading the tab signs out.",
    ),
    h("p", {}, submit),
  );
  const parts = [h("h1", { id: "signin-title" }, "Sign in"), status, form];
  if (facts.client_certificates) {
    parts.push(
      h("h2", {}, "Or with a client certificate"),
      h(
        "p",
        {},
        "The service accepts TLS client certificates bound to a principal. If this browser presented one, use it:",
      ),
      h(
        "p",
        {},
        h(
          "button",
          {
            type: "button",
            class: "secondary",
            id: "use-certificate",
            onclick: async () => {
              const failed = await signIn(null);
              if (failed) status.replaceChildren(notice(failed, "error"));
            },
          },
          "Use my client certificate",
        ),
      ),
    );
  }
  return h("section", { "aria-labelledby": "signin-title" }, parts);
}
