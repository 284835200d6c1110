"""Container health check: ``GET https://127.0.0.1:$KM_PORT/v1/ready``; exit 0 on 200, else 1.

Standard library only (the image has no curl). Run by the Dockerfile's HEALTHCHECK.

The server certificate is deliberately NOT verified. The check connects to the loopback
address inside the container's own network namespace, sends no credential and reads only
the status code, so a verified chain would protect nothing; and a production certificate
names the service's DNS name, not 127.0.0.1, so hostname verification would fail. Clients
of the service always verify its certificate.
"""

from __future__ import annotations

import http.client
import os
import ssl
import sys

PATH = "/v1/ready"
TIMEOUT_SECONDS = 4.0


def main() -> int:
    port = int(os.environ.get("KM_PORT", "8443"))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # loopback only, see the module docstring
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=TIMEOUT_SECONDS, context=context)
    try:
        connection.request("GET", PATH, headers={"Accept": "application/json"})
        response = connection.getresponse()
        body = response.read(512).decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as exc:
        print(f"unhealthy: {PATH}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    if response.status != 200:
        print(f"unhealthy: {PATH} answered {response.status}: {body}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
