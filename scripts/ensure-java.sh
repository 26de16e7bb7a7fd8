#!/usr/bin/env bash
# Make sure a Java runtime (17 or 21) is on PATH for PySpark; install one with apt when it is missing.
set -euo pipefail
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1; }
if command -v java >/dev/null 2>&1; then
  major=$(java_major)
  if [ -n "$major" ] && [ "$major" -ge 17 ]; then exit 0; fi
  echo "java $major found; PySpark 4 needs Java 17 or 21" >&2
fi
if command -v apt-get >/dev/null 2>&1; then
  echo "installing a headless Java 17 runtime with apt-get ..."
  "$(dirname "$0")/apt.sh" openjdk-17-jre-headless
  java -version 2>&1 | head -n1
  exit 0
fi
echo "no Java 17+ and no apt-get: install Java 17 or 21 and put it on PATH (needed by the Spark pipeline)" >&2
exit 1
