"""How a client reaches the service: the URL, TLS and token settings (checked when a client is
built, or read from ``KM_*`` variables by ``from_env``), and what a transport error says.

No I/O beyond reading the files the settings name.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from keymanager_sdk._core import __version__
from keymanager_sdk._exceptions import ConfigurationError

Verify = ssl.SSLContext | bool | str | os.PathLike[str] | None
"""What ``verify=`` takes (see ``http_options``)."""
DEFAULT_TIMEOUT = 30.0
"""Seconds to wait for a connection, a free pooled connection, and each read."""
ENVIRONMENT = {
    "base_url": "KM_URL",
    "token": "KM_TOKEN",
    "token_file": "KM_TOKEN_FILE",
    "ca": "KM_CA",
    "client_cert": "KM_CLIENT_CERT",
    "client_key": "KM_CLIENT_KEY",
}
"""The variables ``from_env`` reads (the same names kmctl reads)."""


def ssl_context(ca: str | None = None, client_cert: str | None = None, client_key: str | None = None) -> ssl.SSLContext:
    """A TLS context trusting ``ca`` (the system's CAs when None), with an optional client certificate.

    Raises ``ConfigurationError`` naming the file when one is missing or not PEM of the right kind.
    """
    for what, path in (("CA bundle", ca), ("client certificate", client_cert), ("client key", client_key)):
        if path is not None and not Path(path).is_file():
            raise ConfigurationError(f"{what} {path}: no such file")
    try:
        context = ssl.create_default_context(cafile=ca)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(f"CA bundle {ca}: cannot be loaded ({exc})") from exc
    if client_cert is not None:
        try:
            context.load_cert_chain(client_cert, client_key)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigurationError(f"client certificate {client_cert}: cannot be loaded ({exc})") from exc
    return context


def origin(base_url: str) -> str:
    """``scheme://host:port`` of a checked URL, the port always written (for error messages)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def check_url(base_url: str, insecure_http: bool = False) -> str:
    """``base_url`` when it is an ``https://host[:port][/prefix]`` URL; ``ConfigurationError`` otherwise
    (``http://`` included: the SDK never sends a token or a plaintext in clear, unless the caller
    says so explicitly with ``insecure_http``, to measure what TLS costs against ``keymanager
    serve --insecure-http``)."""
    try:
        parts = urlsplit(base_url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigurationError(f"invalid service URL {base_url!r}: {exc}") from exc
    if parts.scheme == "http" and not insecure_http:
        raise ConfigurationError(
            f"service URL {base_url!r}: plain http:// is refused (tokens and plaintexts would cross the network "
            "in clear); the service speaks HTTPS: use https://"
        )
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigurationError(f"invalid service URL {base_url!r}: expected https://host[:port]")
    return base_url


def http_options(
    token: str | None,
    ca: str | None,
    client_cert: str | None,
    client_key: str | None,
    verify: Verify,
) -> tuple[dict[str, str], ssl.SSLContext]:
    """The headers and the TLS context shared by both clients (files checked now).

    ``verify`` is as httpx takes it: a ready ``ssl.SSLContext`` (used as it is), ``True``/None
    (verify against ``ca``, or the system's CAs), ``False`` (no verification), or the path of a
    CA bundle (the same as ``ca=``; giving both, different, is a ``ConfigurationError``).
    Anything else is a ``TypeError`` that points at ``ca=``: a setting is never ignored.
    """
    headers = {"User-Agent": f"keymanager-sdk/{__version__}"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if isinstance(verify, ssl.SSLContext):
        return headers, verify
    if isinstance(verify, str | os.PathLike):
        bundle = os.fspath(verify)
        if ca is not None and ca != bundle:
            raise ConfigurationError(f"verify={bundle!r} and ca={ca!r} name two CA bundles: give one (ca=)")
        ca, verify = bundle, True
    elif verify is not None and not isinstance(verify, bool):
        raise TypeError(
            f"verify must be a bool or an ssl.SSLContext, not {type(verify).__name__}; "
            "pass the CA bundle's path as ca= (or as verify=)"
        )
    context = ssl_context(ca, client_cert, client_key)
    if verify is False:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return headers, context


def settings_from_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The client arguments named by ``KM_URL``, ``KM_TOKEN`` (or ``KM_TOKEN_FILE``), ``KM_CA``,
    ``KM_CLIENT_CERT`` and ``KM_CLIENT_KEY`` (empty variables count as unset).

    Raises ``ConfigurationError`` when ``KM_URL`` is unset or the token file cannot be read.
    """
    env = os.environ if env is None else env
    values = {name: env[variable] for name, variable in ENVIRONMENT.items() if env.get(variable)}
    if "base_url" not in values:
        raise ConfigurationError("KM_URL is not set (the service URL, e.g. https://127.0.0.1:8443)")
    token_file = values.pop("token_file", None)
    if token_file is not None and "token" not in values:
        values["token"] = read_token_file(token_file)
    return values


def read_token_file(path: str) -> str:
    """The bearer token stored in ``path`` (surrounding whitespace removed); ``ConfigurationError`` naming it."""
    try:
        token = Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise ConfigurationError(f"token file {path}: {exc.strerror or exc}") from exc
    if not token:
        raise ConfigurationError(f"token file {path} is empty")
    return token


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception behind it (causes, contexts, and exceptions carried in ``args``)."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        todo.extend(a for a in current.args if isinstance(a, BaseException))


def transport_message(method: str, origin: str, path: str, exc: BaseException) -> str:
    """The text of a ``TransportError``: method, ``scheme://host:port`` and path, the innermost
    reason, and a hint for the mistakes that look like network faults (an untrusted server
    certificate; an https:// URL against a service that answers plain HTTP)."""
    chain = list(_causes(exc))
    names = " ".join(type(e).__name__ for e in chain)
    reason = str(chain[-1]) or type(chain[-1]).__name__
    if "EmptyPoolError" in names or "PoolTimeout" in names:
        reason = "no free connection in the pool within the pool timeout"
    elif "ConnectTimeout" in names:
        reason = "timed out connecting"
    elif "ReadTimeout" in names:
        reason = "timed out waiting for the answer"
    hint = ""
    text = " ".join(str(e) for e in chain).upper()
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
        hint = (
            "; the server's certificate was not verified: pass ca= (or set KM_CA) to the CA bundle "
            "that signed it (with keymanager's development CA: var/tls/ca.pem)"
        )
    elif origin.startswith("https://") and ("WRONG_VERSION_NUMBER" in text or "RECORD_LAYER_FAILURE" in text):
        hint = "; the service seems to answer plain HTTP: check the URL's scheme"
    return f"{method} {origin}{path}: {reason}{hint}"
