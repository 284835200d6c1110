// The REST API, called with the API's own credentials: a bearer token kept in this module's memory
// for the life of the tab (never in localStorage, sessionStorage or a cookie), or the browser's
// TLS client certificate (no token at all). Every call has a deadline.

const DEADLINE_MS = 30_000;

let token = null;
let onSignedOut = () => {};

/** An answer of the API that is not a success: its status, error code and message. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Use `value` (a bearer token, or null: the client certificate) for every later call. */
export function useToken(value) {
  token = value;
}

/** Forget the credential. */
export function forget() {
  token = null;
}

/** Called with the reason when the service stops accepting the credential (401). */
export function whenSignedOut(callback) {
  onSignedOut = callback;
}

/**
 * Call the API: `method` `path` with a JSON `body` and `query` parameters (empty ones left out);
 * resolves to `{data, headers, status}`, rejects with an ApiError (a 401 also signs out).
 */
export async function call(method, path, { body, query, headers } = {}) {
  const sent = { Accept: "application/json", ...(headers ?? {}) };
  if (token) sent.Authorization = `Bearer ${token}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value !== undefined && value !== null && value !== "") params.set(name, String(value));
  }
  const url = params.size ? `${path}?${params}` : path;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), DEADLINE_MS);
  let response;
  try {
    response = await fetch(url, {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "same-origin",
      redirect: "error",
      signal: controller.signal,
    });
  } catch (error) {
    throw new ApiError(
      0,
      "unreachable",
      controller.signal.aborted ? "the service did not answer in time" : "the service cannot be reached",
    );
  } finally {
    clearTimeout(timer);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (response.status === 202 && data?.status === "pending_approval") {
    // Dual control: the call did not run; every page shows why, naming the approval request.
    throw new ApiError(202, "approval_pending", data.message ?? `approval pending: request ${data.request_id}`);
  }
  if (!response.ok) {
    const code = data?.error?.code ?? `http_${response.status}`;
    const message = data?.error?.message ?? response.statusText;
    const failure = new ApiError(response.status, code, message);
    if (response.status === 401) onSignedOut(`The service no longer accepts this credential (${code}: ${message}).`);
    throw failure;
  }
  return { data, headers: response.headers, status: response.status };
}

/** `call` for the data alone. */
export async function get(path, query) {
  return (await call("GET", path, { query })).data;
}
