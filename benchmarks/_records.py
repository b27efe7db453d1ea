"""The JSON-lines records the benchmark scripts write as each result lands (standard library
only)."""

import json


def emit(rec: dict, out: str | None = None) -> None:
    """Print ``rec`` as one JSON line and, with ``out``, append the line to that file."""
    line = json.dumps(rec)
    print(line, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(line + "\n")
