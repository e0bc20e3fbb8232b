"""Reads a Prometheus text exposition on stdin with prometheus-client's parser and prints its
samples as one JSON array: each {"family", "type", "help", "name", "labels", "value"}. A text
the parser refuses ends with its error on stderr and exit status 1."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    text = sys.stdin.read()
    samples = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                samples.append(
                    {
                        "family": family.name,
                        "type": family.type,
                        "help": family.documentation,
                        "name": sample.name,
                        "labels": sample.labels,
                        "value": sample.value,
                    }
                )
    except Exception as error:  # the parser's refusals are ValueError, TypeError, …
        print(f"not Prometheus text: {error}", file=sys.stderr)
        return 1
    json.dump(samples, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
