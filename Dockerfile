# syntax=docker/dockerfile:1
#
# Two images from one wheel, each with what its processes run and nothing more:
#
#   runtime (the default target): the coordinator, the operator and berth-groups. No Java, no Spark.
#     docker build -t berth:0.1.0 .
#     docker run --rm berth:0.1.0 berth-coordinator --data-dir /var/lib/berth --host 0.0.0.0
#     docker run --rm berth:0.1.0 berth-operator --coordinator-url http://berth-coordinator.berth:9094
#
#   analytics: berth-analyze, with the pipeline extra (pyspark, pyarrow, pandas, matplotlib) and a Java 17 runtime.
#     docker build --target analytics -t berth-analytics:0.1.0 .
#     docker run --rm -v "$PWD/journal:/journal" berth-analytics:0.1.0 berth-analyze --journal /journal --out /tmp/a
#
# tini (PID 1) runs whichever console script the container's arguments name. Kubernetes manifests set `args:`
# (not `command:`) so tini stays PID 1: it forwards SIGTERM to the process (the coordinator flushes and exits 0 on
# it) and reaps the JVM children that Spark starts.
#
# The test suite builds both targets and runs them as pods on a real node (tests/node: test_images.py runs each
# image's programs, test_install.py the chart as docs/install.md installs it), with buildah on a base made from
# Debian packages (tests/support/node_images.py) passed as PYTHON_IMAGE.

# Every stage uses the same Python image, so a virtualenv built in one runs unchanged in another (its interpreter
# symlinks point at the same python3.11 in all: /usr/local/bin in the default image, /usr/bin on a Debian-built
# base). The base must be Debian bookworm with python, pip and venv: bookworm, because it packages the Java 17
# runtime that Spark needs; the default (trixie) slim image has only Java 21+.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------------------------
# wheel: Berth's wheel, built once for both images.
FROM ${PYTHON_IMAGE} AS wheel

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Only what the wheel is built from, and the pinned versions the venvs below install (constraints.txt, the same
# pins as make install's); .dockerignore keeps the rest of the repository out of the build context.
COPY pyproject.toml README.md constraints.txt ./
COPY coordinator/ coordinator/
COPY operator/ operator/
COPY pipeline/ pipeline/

# A wheel, not an editable or source-tree install: no image holds a source tree. hatchling is fetched in pip's
# isolated build environment and stays in this stage.
RUN pip wheel --no-deps --wheel-dir /dist . && cp constraints.txt /dist/

# ---------------------------------------------------------------------------------------------------------------
# runtime-venv: the wheel without extras (no Spark, no matplotlib), and each service's command line answering.
FROM ${PYTHON_IMAGE} AS runtime-venv

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

COPY --from=wheel /dist /dist
RUN python -m venv /opt/berth \
 && /opt/berth/bin/pip install -c /dist/constraints.txt "$(ls /dist/berth-*.whl)" \
 && /opt/berth/bin/berth-coordinator --help > /dev/null \
 && /opt/berth/bin/berth-operator --help > /dev/null \
 && /opt/berth/bin/berth-groups --help > /dev/null

# ---------------------------------------------------------------------------------------------------------------
# analytics-venv: the wheel with the pipeline extra, everything berth-analyze imports when it runs.
FROM ${PYTHON_IMAGE} AS analytics-venv

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

COPY --from=wheel /dist /dist
RUN python -m venv /opt/berth \
 && /opt/berth/bin/pip install -c /dist/constraints.txt "$(ls /dist/berth-*.whl)[pipeline]" \
 && /opt/berth/bin/berth-analyze --version > /dev/null

# ---------------------------------------------------------------------------------------------------------------
# base: what both images share: tini, the non-root user, the environment. No compiler, no pip cache, no source.
FROM ${PYTHON_IMAGE} AS base

LABEL org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

# tini: a minimal init for PID 1 (signal forwarding, zombie reaping).
RUN apt-get update \
 && apt-get install --yes --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*

# A fixed numeric UID/GID (10001), so that Kubernetes' runAsNonRoot can verify it without a passwd lookup and the
# chart's runAsUser/fsGroup match the owner of /var/lib/berth.
RUN groupadd --system --gid 10001 berth \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/berth --create-home --shell /usr/sbin/nologin berth \
 && mkdir -p /var/lib/berth \
 && chown 10001:10001 /var/lib/berth

ENV PATH=/opt/berth/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /home/berth
ENTRYPOINT ["/usr/bin/tini", "--"]

# ---------------------------------------------------------------------------------------------------------------
# analytics: berth-analyze (embedded Spark, or Spark on Kubernetes through berth.pipeline.k8s_entrypoint).
FROM base AS analytics

LABEL org.opencontainers.image.title="berth-analytics" \
      org.opencontainers.image.description="Berth's journal analytics: berth-analyze on PySpark and Java 17"

# openjdk-17-jre-headless: the JVM that pyspark launches (no X11 libraries). The man1 directory: the JRE's postinst
# registers java.1.gz alternatives there, and slim images strip it.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install --yes --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture)" /usr/lib/jvm/java-17

COPY --from=analytics-venv /opt/berth /opt/berth
ENV JAVA_HOME=/usr/lib/jvm/java-17 \
    BERTH_CLASS_DATA=/opt/berth/class-data

# The class-data archive of the classes Spark's driver JVM loads (docs/pipeline.md, "Class data"): written here
# once, by a run over the small journal the package bundles, for this image's Java, Spark and JVM options; every
# berth-analyze in the image maps it (about 6 CPU-seconds less per run). Read-only at run time: a run whose JVM
# options differ goes without it, saying so in a line. The build fails if the JVM writes no archive.
RUN journal="$(python -c 'import berth.pipeline, os; print(os.path.join(berth.pipeline.__path__[0], "data"))')" \
 && berth-analyze --journal "$journal/training-journal.jsonl" --out /tmp/class-data-run --master 'local[2]' \
 && ls "$BERTH_CLASS_DATA"/*.jsa \
 && rm -rf /tmp/class-data-run /tmp/spark-* /tmp/blockmgr-*

USER 10001:10001
CMD ["berth-analyze", "--help"]

# ---------------------------------------------------------------------------------------------------------------
# runtime (last, so the default target): coordinator, operator, berth-groups.
FROM base AS runtime

LABEL org.opencontainers.image.title="berth" \
      org.opencontainers.image.description="Berth: ConsumerFleet operator, group coordinator and admin CLI"

COPY --from=runtime-venv /opt/berth /opt/berth

USER 10001:10001

# The coordinator's default port (HTTP API, /healthz, /readyz, /metrics).
EXPOSE 9094

# With no arguments: a coordinator on all interfaces, its state in /var/lib/berth (mount a volume there to keep it).
CMD ["berth-coordinator", "--data-dir", "/var/lib/berth", "--host", "0.0.0.0", "--port", "9094"]
