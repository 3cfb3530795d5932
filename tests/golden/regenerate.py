"""Rewrite the golden results: `python tests/golden/regenerate.py [packet_k4 packet_fig1 system]`.

Commit the result on its own, saying why the numbers moved (see `cases.py`).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cases  # noqa: E402

SHARED = Path(__file__).resolve().parents[2].parent / "shared"


def main(names: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sets = {"packet_k4": cases.packet_k4_cases, "packet_fig1": cases.packet_fig1_cases,
                "system": lambda: cases.system_cases(SHARED, Path(tmp))}
        for name in names or list(sets):
            rows = {key: run() for key, run in sets[name]().items()}
            cases.save(name, rows)
            print(f"{name}: {len(rows)} runs written", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
