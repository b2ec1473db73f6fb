#!/usr/bin/env bash
# Set up .venv at the repository root for sharedq, checking the system tools it needs.
#
#   bash scripts/setup.sh         the library, its CLI and the Spark pipeline
#   bash scripts/setup.sh --dev   also the test and lint tools; checks for redis-server
#
# It never asks questions: a missing system tool is installed with apt-get when this
# runs as root on Debian or Ubuntu, and otherwise named with the command that
# installs it, and the script stops.  Repeated runs are quick: packages are
# reinstalled only when pyproject.toml changes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

extras="spark,redis"
if [ "${1:-}" = "--dev" ]; then extras="dev"; fi

say() { printf 'setup: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

apt_install() {
  # Install Debian packages without asking, where that is possible.
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing Debian package(s): $*"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null 2>&1; then
      apt-get update -q >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null
    fi
  else
    return 1
  fi
}

# Python 3.11 or newer.
python="${PYTHON:-python3}"
command -v "$python" >/dev/null 2>&1 \
  || die "python3 not found: install Python 3.11+ (Debian: apt-get install python3 python3-venv)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$("$python" --version 2>&1) is too old: sharedq needs Python 3.11 or newer"

# A Java 17+ runtime: the pipeline runs on Spark.
java_major() {
  java -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == "1") ? v[2] : v[1]; exit }'
}
if ! command -v java >/dev/null 2>&1 || [ "$(java_major)" -lt 17 ]; then
  apt_install openjdk-17-jre-headless \
    || die "Spark needs a Java 17+ runtime on PATH: install one (Debian: apt-get install openjdk-17-jre-headless; macOS: brew install openjdk@17)"
fi

# redis-server: the tests start private Redis servers of their own.
if [ "$extras" = "dev" ] && ! command -v redis-server >/dev/null 2>&1; then
  apt_install redis-server \
    || die "the tests need the redis-server binary: install it (Debian: apt-get install redis-server; macOS: brew install redis)"
fi
if [ "$extras" = "dev" ]; then
  redis_major="$(redis-server --version | sed -n 's/.* v=\([0-9]*\)\..*/\1/p')"
  [ "${redis_major:-0}" -ge 7 ] \
    || die "redis-server $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p') is too old: sharedq needs Redis 7.0+ (Debian 12+: apt-get install redis-server; otherwise the packages of redis.io)"
fi
# openssl: the TLS tests make a private CA and a server certificate with it.
if [ "$extras" = "dev" ] && ! command -v openssl >/dev/null 2>&1; then
  apt_install openssl \
    || die "the TLS tests need the openssl command: install it (Debian: apt-get install openssl)"
fi

# The virtual environment and the packages.
if [ ! -x .venv/bin/python ]; then
  say "creating .venv"
  "$python" -m venv .venv
fi
stamp=".venv/.sharedq-setup"
digest="$(sha256sum pyproject.toml | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
if [ "$have" != "$digest dev" ] && [ "$have" != "$digest $extras" ]; then
  say "installing sharedq[$extras] into .venv (first run: a few minutes)"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]"
  echo "$digest $extras" > "$stamp"
fi
say "ready: .venv (sharedq[$extras])"
