#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh Debian machine, then run it.
#   bash scripts/test.sh [pytest args...]
# System packages: gcc + python3-dev (build the optional compiled parts, setup.py), a Java
# runtime and the JDK's tools (pyspark; jcmd), tshark (differential tests against Wireshark's
# dissector), tcpdump (a real loopback capture read back by our reader), rabbitmq-server
# (amqpcap live against a real broker on loopback), capsh (libcap2-bin: live without capture
# privilege, as root).
# Python packages go into .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
# the JDK, not the JRE alone: the class-archive test reads the JVM's counters with jcmd
command -v jcmd >/dev/null 2>&1 || need+=(default-jdk-headless)
command -v rabbitmq-server >/dev/null 2>&1 || need+=(rabbitmq-server)
command -v capsh >/dev/null 2>&1 || need+=(libcap2-bin)
# setup.py builds the compiled parts when these are there
command -v gcc >/dev/null 2>&1 || need+=(gcc)
python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' || need+=(python3-dev)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing ${need[*]} (apt)"
  echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections || true
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[test,spark]"
.venv/bin/amqpcap --version
# lint and format (pyproject.toml [tool.ruff]): a finding fails the run before the tests
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .
export AMQPCAP_REQUIRE_TOOLS="${AMQPCAP_REQUIRE_TOOLS:-${CI:-}}"
# the whole suite twice: with every compiled part, then with none (the pure-Python reference).
# With CI set, a compiled pass in which a part is not built or stale fails at its start
# (tests/conftest.py), and tests marked compiled(part) run in the compiled pass only.
# The two passes run side by side (most tests keep one core busy; CI has two), each with its own
# pytest temporary directory and analysis cache; the pure pass prints when it has finished.
# AMQPCAP_TEST_ONE_PASS_AT_A_TIME=1 runs them one after the other instead.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
run_pass() {  # NAME [env assignments...] -- pytest args...
  local name="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" XDG_CACHE_HOME="$work/$name-cache" \
    .venv/bin/python -m pytest -q -p no:cacheprovider --basetemp="$work/$name" --durations=15 "$@"
}
if [ -n "${AMQPCAP_TEST_ONE_PASS_AT_A_TIME:-}" ]; then
  echo "== compiled parts in use"
  run_pass compiled -- "$@"
  echo "== pure Python (AMQPCAP_PURE=1)"
  run_pass pure AMQPCAP_PURE=1 -- "$@"
  exit 0
fi
run_pass pure AMQPCAP_PURE=1 -- "$@" > "$work/pure.log" 2>&1 &
pure=$!
echo "== compiled parts in use (the pure-Python pass runs beside it)"
compiled_rc=0
run_pass compiled -- "$@" || compiled_rc=$?
pure_rc=0
wait "$pure" || pure_rc=$?
echo "== pure Python (AMQPCAP_PURE=1)"
cat "$work/pure.log"
[ "$compiled_rc" -eq 0 ] || { echo "the compiled pass failed (exit $compiled_rc)"; exit "$compiled_rc"; }
[ "$pure_rc" -eq 0 ] || { echo "the pure-Python pass failed (exit $pure_rc)"; exit "$pure_rc"; }
