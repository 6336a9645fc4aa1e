# syntax=docker/dockerfile:1
# Groupless image: one entry point `groupless` for the webhook, the extender and the controller.
#   docker build -t ghcr.io/groupless/groupless:0.1.0 .
# Without a registry to pull the base from: scripts/build-image.sh makes the same Debian root
# filesystem with mmdebstrap, imports it and builds this file with --build-arg BASE=<that image>.
#
# Debian's Python (bookworm: 3.11) on Debian slim. Small (no compiler, no pip in the final
# stage), non-root (uid 65532, as the chart's runAsUser), and friendly to readOnlyRootFilesystem:
# everything byte-compiled at build time, no .pyc written at run time, HOME and every temp file
# under /tmp (an emptyDir in the chart). The dev cluster (localcluster/) is not in the image:
# `groupless dev-cluster` and `groupless demo` run from a checkout.

ARG BASE=debian:bookworm-slim

FROM ${BASE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
 && apt-get clean && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Dependencies first (read from pyproject.toml), so a source change does not re-download them.
COPY pyproject.toml README.md ./
RUN python3 -m venv /opt/groupless \
 && /opt/groupless/bin/python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
 && /opt/groupless/bin/pip install --upgrade pip \
 && /opt/groupless/bin/pip install -r /tmp/requirements.txt
COPY provisioner ./provisioner
COPY extender ./extender
COPY webhook ./webhook
COPY certs ./certs
# The groupless wheel (built from pyproject.toml; packages absent from the context are not in
# it), then byte-compiled: at run time the root filesystem is read-only. pip and setuptools
# leave the venv: nothing installs packages at run time.
RUN /opt/groupless/bin/pip wheel --no-deps --wheel-dir /tmp/wheels . \
 && /opt/groupless/bin/pip install --no-deps /tmp/wheels/groupless-*.whl \
 && /opt/groupless/bin/pip uninstall -y -q pip setuptools \
 && /opt/groupless/bin/python -m compileall -q /opt/groupless/lib

FROM ${BASE}
LABEL org.opencontainers.image.title="groupless" \
      org.opencontainers.image.description="Groupless node autoscaler: admission webhooks, scheduler extender, provisioner" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/groupless/groupless"
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 ca-certificates \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 groupless \
 && useradd --system --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin groupless
COPY --from=build /opt/groupless /opt/groupless
ENV PATH=/opt/groupless/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
WORKDIR /tmp
USER 65532:65532
EXPOSE 8080 8443 8888
ENTRYPOINT ["groupless"]
CMD ["--help"]
