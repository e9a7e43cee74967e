# The long run of the HTTP API fuzz (the suite runs 200 cases), from the repository root:
#   python scripts/serve-fuzz.py --cases 20000 --json
"""Fuzz `mt serve`'s HTTP API for many cases: the property and the request strategies of
tests/test_serve_fuzz.py (Hypothesis), against the app in-process over a fast fake engine, its
/suggest storing into a temporary database.

Every answer must come within 10 s, never be a 500, and be JSON ``{"error": str}`` when its
status is 400 or more. Reports the cases tried, the answers by status and the wall time; exits 1
with the (shrunk) failing request if the property fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from hypothesis import HealthCheck, given, seed, settings

FUZZ = Path(__file__).resolve().parent.parent / "tests" / "test_serve_fuzz.py"


def load_fuzz_module() -> ModuleType:
    """tests/test_serve_fuzz.py, imported by its path (tests/ is no package), with tests/ on the
    path for the helpers it imports (the files it uploads)."""
    sys.path.insert(0, str(FUZZ.parent))
    spec = importlib.util.spec_from_file_location("test_serve_fuzz", FUZZ)
    if spec is None or spec.loader is None:
        sys.exit(f"error: cannot load {FUZZ}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it is executed
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000, help="cases to try (default: 20000)")
    parser.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default: 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = parser.parse_args()

    fuzz = load_fuzz_module()
    folder = tempfile.TemporaryDirectory()  # the database its /suggest writes
    server = fuzz.server(Path(folder.name) / "suggestions.db")
    tried = 0

    @seed(args.seed)
    @settings(max_examples=args.cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(request=fuzz.requests())
    def one_case(request: tuple[str, str, dict]) -> None:
        nonlocal tried
        tried += 1
        method, path, arguments = request
        fuzz.check_answer(server.request(method, path, **arguments), method)

    start = time.monotonic()
    failure = None
    try:
        one_case()
    except AssertionError as err:  # the property failed: Hypothesis has shrunk the request
        failure = str(err)
    finally:
        server.close()
        folder.cleanup()
    result = {
        "cases": tried,
        "seconds": round(time.monotonic() - start, 1),
        "statuses": {str(status): count for status, count in sorted(server.statuses.items())},
        "failure": failure,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['cases']} cases in {result['seconds']} s; answers by status: {result['statuses']}")
        if failure:
            print(f"FAILED: {failure}")
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
