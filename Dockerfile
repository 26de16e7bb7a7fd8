# syntax=docker/dockerfile:1
#
# One image for every Berth process. The console scripts are on PATH, and tini (PID 1) runs whichever one the
# container's arguments name:
#
#   docker run --rm berth:0.1.0 berth-coordinator --data-dir /var/lib/berth --host 0.0.0.0
#   docker run --rm berth:0.1.0 berth-operator --coordinator-url http://berth-coordinator.berth:9094
#   docker run --rm berth:0.1.0 berth-analyze --help
#
# Kubernetes manifests set `args:` (not `command:`) so tini stays PID 1: it forwards SIGTERM to the process (the
# coordinator flushes and exits 0 on it) and reaps the JVM children that Spark starts.
#
# Build: docker build -t berth:0.1.0 .

# Both stages use the same Python image, so the virtualenv built in the first runs unchanged in the second
# (its interpreter symlinks point at /usr/local/bin/python3.11 in both). Bookworm, because it packages the
# Java 17 runtime that Spark 4 needs; the default (trixie) slim image has only Java 21+.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------------------------
# Builder: build Berth's wheel and install it with the pipeline extra (pyspark, pandas, pyarrow) into /opt/berth.
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/berth

WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps the rest of the repository out of the build context).
COPY pyproject.toml README.md ./
COPY coordinator/ coordinator/
COPY operator/ operator/
COPY pipeline/ pipeline/

# A wheel, not an editable or source-tree install: the final image holds no source tree. hatchling is fetched in
# pip's isolated build environment and stays in this stage.
RUN pip wheel --no-deps --wheel-dir /dist . \
 && /opt/berth/bin/pip install "$(ls /dist/berth-*.whl)[pipeline]" \
 && /opt/berth/bin/berth-coordinator --help > /dev/null \
 && /opt/berth/bin/berth-operator --help > /dev/null \
 && /opt/berth/bin/berth-analyze --help > /dev/null

# ---------------------------------------------------------------------------------------------------------------
# Runtime: the slim Python image, a headless Java 17 runtime for Spark, tini, the virtualenv. No compiler, no pip
# cache, no source tree.
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.description="Berth: ConsumerFleet operator, group coordinator and journal analytics" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

# openjdk-17-jre-headless: the JVM that pyspark launches for berth-analyze (no X11 libraries).
# tini: a minimal init for PID 1 (signal forwarding, zombie reaping).
# The man1 directory: the JRE's postinst registers java.1.gz alternatives there, and slim images strip it.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install --yes --no-install-recommends openjdk-17-jre-headless tini \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture)" /usr/lib/jvm/java-17

# A fixed numeric UID/GID (10001), so that Kubernetes' runAsNonRoot can verify it without a passwd lookup and the
# chart's runAsUser/fsGroup match the owner of /var/lib/berth.
RUN groupadd --system --gid 10001 berth \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/berth --create-home --shell /usr/sbin/nologin berth \
 && mkdir -p /var/lib/berth \
 && chown 10001:10001 /var/lib/berth

COPY --from=builder /opt/berth /opt/berth

ENV PATH=/opt/berth/bin:$PATH \
    JAVA_HOME=/usr/lib/jvm/java-17 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

USER 10001:10001
WORKDIR /home/berth

# The coordinator's default port (HTTP API, /healthz, /readyz, /metrics).
EXPOSE 9094

ENTRYPOINT ["/usr/bin/tini", "--"]
# With no arguments: a coordinator on all interfaces, its state in /var/lib/berth (mount a volume there to keep it).
CMD ["berth-coordinator", "--data-dir", "/var/lib/berth", "--host", "0.0.0.0", "--port", "9094"]
