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


def read_rows(paths) -> dict:
    """The records of JSON-lines files grouped by ``(dataset, framing)``, in file order."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                rows.setdefault((r["dataset"], r["framing"]), []).append(r)
    return rows


def runs_main(doc: str, run, table) -> None:
    """The command line of a script whose unit of work is ``run(name, framing, seed) -> dict``:
    ``--runs NAME:FRAMING:SEED ...`` (each record emitted, appended to ``--out``), or ``--table
    JSONL ...`` (``table(paths)`` printed)."""
    import argparse
    import warnings

    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--runs", nargs="*", default=[], metavar="NAME:FRAMING:SEED")
    ap.add_argument("--out", help="JSON lines appended here")
    ap.add_argument("--table", nargs="+", metavar="JSONL")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    warnings.filterwarnings("ignore")
    for spec in args.runs:
        name, framing, seed = spec.split(":")
        emit(run(name, framing, int(seed)), args.out)
