# syntax=docker/dockerfile:1
# Groupless image: one entry point `groupless` for the webhook, the extender and the controller.
#   docker build -t ghcr.io/groupless/groupless:0.1.0 .
# Small (python slim, no compiler in the final stage), non-root (uid 65532), and friendly to
# readOnlyRootFilesystem: no .pyc written at run time, HOME and every temp file under /tmp
# (an emptyDir in the chart).

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first, so a source change does not re-download them.
COPY pyproject.toml README.md ./
RUN python -m venv /opt/groupless \
 && /opt/groupless/bin/pip install --upgrade pip wheel \
 && mkdir -p provisioner extender webhook certs localcluster \
 && for p in provisioner extender webhook certs localcluster; do touch $p/__init__.py; done \
 && /opt/groupless/bin/pip install . \
 && /opt/groupless/bin/pip uninstall -y groupless
COPY provisioner ./provisioner
COPY extender ./extender
COPY webhook ./webhook
COPY certs ./certs
COPY localcluster ./localcluster
RUN /opt/groupless/bin/pip install --no-deps . \
 # Byte-compile now: at run time the root filesystem is read-only.
 && /opt/groupless/bin/python -m compileall -q /opt/groupless/lib

FROM python:${PYTHON_VERSION}-slim
LABEL org.opencontainers.image.title="groupless" \
      org.opencontainers.image.description="Groupless node autoscaler: admission webhooks, scheduler extender, provisioner" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/groupless/groupless"
RUN groupadd --system --gid 65532 groupless \
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
