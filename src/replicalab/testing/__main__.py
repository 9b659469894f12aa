"""``python -m replicalab.testing URL [CHECK ...]``: run the conformance suite against the
store at URL and print one line per check; exit 1 if any failed, 2 for bad input."""

from __future__ import annotations

import sys

from replicalab.testing.conformance import CHECKS, run_conformance


def main(argv: list[str] | None = None) -> int:
    """Run the suite from the command line; return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help"):
        print(f"usage: python -m replicalab.testing URL [CHECK ...]\nchecks: "
              f"{', '.join(CHECKS)}")
        return 0 if args else 2
    try:
        report = run_conformance(args[0], only=args[1:])
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
