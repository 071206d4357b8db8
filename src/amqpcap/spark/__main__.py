"""``python -m amqpcap.spark CAPTURE_OR_DIR... -o OUT``, or
``spark-submit .../amqpcap/spark/__main__.py CAPTURE_OR_DIR... -o OUT``."""

import sys

from amqpcap.spark.cli import main

if __name__ == "__main__":
    sys.exit(main())
