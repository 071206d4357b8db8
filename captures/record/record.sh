#!/bin/sh
# Re-record the RabbitMQ AMQP 0-9-1 captures (run as root on Debian with
# rabbitmq-server, tcpdump, tshark and pip packages pika + amqp installed).
#   captures/record/record.sh                      # all scenarios into captures/
#   captures/record/record.sh --only pika_full     # one scenario
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(cd "$here/.." && pwd)
if [ "$(id -u)" != 0 ]; then
    echo "record.sh: needs root (tcpdump on lo, rabbitmqctl)" >&2
    exit 1
fi
for tool in rabbitmq-server rabbitmqctl tcpdump; do
    command -v "$tool" >/dev/null || { echo "record.sh: $tool not installed (apt-get install rabbitmq-server tcpdump tshark)" >&2; exit 1; }
done
python3 -c 'import pika, amqp' 2>/dev/null || { echo "record.sh: pip install pika amqp" >&2; exit 1; }
exec python3 "$here/record_091.py" --out "$out" "$@"
