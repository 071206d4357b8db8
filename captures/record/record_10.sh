#!/bin/sh
# Re-record the RabbitMQ AMQP 1.0 captures (run as root on Debian with rabbitmq-server,
# tcpdump, tshark, node/npm, and python-qpid-proton + pika in the Python that runs it).
#   captures/record/record_10.sh                          # all scenarios into captures/
#   captures/record/record_10.sh --only rhea_outcomes     # one scenario
#   PYTHON=.venv/bin/python captures/record/record_10.sh  # another interpreter
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(cd "$here/.." && pwd)
py=${PYTHON:-python3}
if [ "$(id -u)" != 0 ]; then
    echo "record_10.sh: needs root (tcpdump on lo, rabbitmqctl)" >&2
    exit 1
fi
for tool in rabbitmq-server rabbitmqctl rabbitmq-plugins tcpdump node npm; do
    command -v "$tool" >/dev/null || { echo "record_10.sh: $tool not installed (apt-get install rabbitmq-server tcpdump tshark nodejs npm)" >&2; exit 1; }
done
"$py" -c 'import proton, pika' 2>/dev/null || { echo "record_10.sh: $py -m pip install python-qpid-proton pika" >&2; exit 1; }
[ -d "$here/node_modules/rhea" ] || npm ci --no-audit --no-fund --prefix "$here"
exec "$py" "$here/record_10.py" --out "$out" "$@"
