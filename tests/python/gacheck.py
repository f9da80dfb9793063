"""The Python tests' verdicts, one way for every script: check() prints
one line per assertion, "ok" or "FAIL", what was checked and what was
seen, and counts the failures; done() exits 1 if there was any, else 0.
"""
import sys

failures = 0


def check(what, ok, detail=""):
    """Print WHAT's verdict (OK true or false) with DETAIL; return OK."""
    global failures
    print("%s: %s%s" % ("ok" if ok else "FAIL", what, ": " + detail if detail else ""))
    failures += not ok
    return ok


def done():
    """Exit with the verdict of every check so far."""
    sys.exit(1 if failures else 0)
