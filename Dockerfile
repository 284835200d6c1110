# syntax=docker/dockerfile:1
#
# keymanager server image: FastAPI over HTTPS (uvicorn), keys in a PKCS#11 HSM.
#
#   docker build -t keymanager:0.1.0 .
#   docker run --rm keymanager:0.1.0 --help
#
# Base images are pinned by tag: Python minor version (3.11) and Debian release (12,
# bookworm). A tag is not immutable: the same tag is rebuilt with Debian and Python patch
# releases, which is what we want for security fixes when the image is rebuilt. For a
# byte-for-byte reproducible release build, pin the digest as well, e.g.
#   FROM python:3.11-slim-bookworm@sha256:<digest>
# (`docker buildx imagetools inspect python:3.11-slim-bookworm` prints it) and let a bot
# such as Renovate or Dependabot propose digest updates. Both stages must use the same
# image: the wheels built in the first stage are installed by the same Python in the second.
#
# Nothing secret is baked in: no PIN, no key, no token, no certificate. At run time give
#   KM_PKCS11_PIN_FILE  a mounted secret file holding the HSM user PIN
#   KM_TLS_CERT / KM_TLS_KEY  the server certificate (otherwise `keymanager init` writes a
#                       development PKI into KM_VAR_DIR/tls)
#   KM_DATABASE_URL     postgresql+psycopg://... for several replicas (default: SQLite in KM_VAR_DIR)
# See deploy/README.md.

# ---------------------------------------------------------------------------------------
# Stage 1: build wheels of the server and of all its dependencies.
# Only the server distribution (`keymanager`, pyproject.toml at the root) is built; the SDK
# (`sdk/`, distribution `keymanager-sdk`) is not part of this image and is kept out of the
# build context by .dockerignore.
FROM python:3.11-slim-bookworm AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY keymanager ./keymanager

# Every dependency ships binary wheels for linux/amd64 and linux/arm64 (python-pkcs11,
# psycopg[binary], cryptography, uvloop, httptools, pydantic-core), so no compiler is needed.
# On a platform without wheels, install build-essential here: it stays out of the runtime.
RUN pip wheel --wheel-dir /wheels .

# ---------------------------------------------------------------------------------------
# Stage 2: runtime.
FROM python:3.11-slim-bookworm AS runtime

LABEL org.opencontainers.image.title="keymanager" \
      org.opencontainers.image.description="Self-hosted encryption key manager backed by a PKCS#11 HSM"

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# SoftHSM2 is the development HSM (library /usr/lib/softhsm/libsofthsm2.so). A real HSM's
# PKCS#11 client is added in an image derived from this one (deploy/README.md).
# Debian package versions are not pinned on purpose: bookworm's archive keeps only the
# current version of a package, so a pin breaks the build at the next security update.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends softhsm2 \
    && rm -rf /var/lib/apt/lists/*

# A fixed uid/gid so that volumes, Kubernetes fsGroup and secret file ownership can name it.
RUN groupadd --system --gid 10001 keymanager \
    && useradd --system --uid 10001 --gid keymanager --home-dir /var/lib/keymanager \
       --no-create-home --shell /usr/sbin/nologin keymanager \
    && install -d -o keymanager -g keymanager -m 0700 /var/lib/keymanager

# The server and its dependencies, from the wheels of the first stage only (--no-index:
# nothing is fetched from PyPI here). The wheels are bind-mounted, so they add no layer.
RUN --mount=type=bind,from=builder,source=/wheels,target=/tmp/wheels \
    python -m venv /opt/keymanager \
    && /opt/keymanager/bin/pip install --no-index --find-links=/tmp/wheels keymanager

COPY deploy/docker/healthcheck.py /opt/keymanager/libexec/healthcheck.py

# Settings (every KM_ variable is documented in README.md and deploy/README.md):
#  - KM_ENV=production: the service refuses to start with the development PIN, so a PIN
#    must be given (KM_PKCS11_PIN_FILE). For a throw-away local try, set KM_ENV=development.
#  - KM_VAR_DIR: state of the container: the SoftHSM token and its configuration
#    (softhsm/), the development PKI (tls/), the first admin token (admin.token) and, without
#    KM_DATABASE_URL, the SQLite database.
#  - KM_SOFTHSM2_CONF: the SoftHSM configuration `keymanager init` writes; its token
#    directory is KM_VAR_DIR/softhsm/tokens. To use another token directory, mount your own
#    softhsm2.conf and set SOFTHSM2_CONF to its path: when set, it wins over KM_SOFTHSM2_CONF
#    for the library. SOFTHSM2_CONF is deliberately left unset here.
#  - KM_PKCS11_MODULE: the PKCS#11 library; SoftHSM2 by default.
ENV PATH=/opt/keymanager/bin:$PATH \
    KM_ENV=production \
    KM_VAR_DIR=/var/lib/keymanager \
    KM_SOFTHSM2_CONF=/var/lib/keymanager/softhsm/softhsm2.conf \
    KM_PKCS11_MODULE=/usr/lib/softhsm/libsofthsm2.so \
    KM_HOST=0.0.0.0 \
    KM_PORT=8443

# The whole state directory is a volume, the SoftHSM token directory included: keys
# (token objects) and metadata (SQLite) must survive together. Mount a named volume here,
# shared by every replica on one host (deploy/docker-compose.yml).
VOLUME ["/var/lib/keymanager"]
WORKDIR /var/lib/keymanager

# Numeric, so that Kubernetes' runAsNonRoot can verify it without a passwd lookup.
USER 10001:10001

EXPOSE 8443

# Readiness (HSM and database answer) over HTTPS on the loopback address, with Python's
# standard library (no curl in the image). The check does NOT verify the server
# certificate: it connects to 127.0.0.1 inside the container's own network namespace,
# sends no credentials and reads only the status code, so there is nothing for a
# verified chain to protect; and a production certificate names the service's DNS
# name, not 127.0.0.1, so hostname verification would fail anyway. Clients of the
# service always verify. Serving with --insecure-http makes this check fail.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "/opt/keymanager/libexec/healthcheck.py"]

ENTRYPOINT ["keymanager"]
CMD ["serve"]
