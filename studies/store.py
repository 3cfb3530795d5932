"""A study's results store: a Parquet dataset partitioned by point.

    STUDY/spec.yaml                       the spec as last run
    STUDY/plan.json                       its point keys in spec order: what the results show
    STUDY/points/point=<key>/runs.parquet one row: the point's axis values, status, summary
                             ranks.parquet, collectives.parquet, counters.parquet (iterations)
                             stages.parquet, links.parquet (packet runs), flows.parquet (traffic runs)
                             timing.parquet
    STUDY/traces/<workload key>/          synthesized ETs, one folder per distinct workload
    STUDY/configs/                        the system JSON and fabric YAML each point ran with

Invariant: a point's folder appears whole or not at all. Its files are written into a
private temporary folder and renamed into place in one step, so a study killed at any
moment leaves every finished point complete and none half-written; a restart runs exactly
the points whose folder is missing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from ..errors import ConfigError

TABLES = ("runs", "ranks", "collectives", "counters", "flows", "stages", "links", "timing")


class Store:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.points_dir = self.root / "points"
        self.traces_dir = self.root / "traces"
        self.configs_dir = self.root / "configs"

    def create(self) -> "Store":
        for d in (self.points_dir, self.traces_dir, self.configs_dir, self.root / ".tmp"):
            d.mkdir(parents=True, exist_ok=True)
        return self

    def point_dir(self, key: str) -> Path:
        return self.points_dir / f"point={key}"

    def statuses(self) -> dict[str, str]:
        """status (ok / error) of every point stored, by key."""
        out = {}
        if not self.points_dir.is_dir():
            return out
        for d in sorted(self.points_dir.iterdir()):
            runs = d / "runs.parquet"
            if d.name.startswith("point=") and runs.exists():
                out[d.name[len("point="):]] = str(pd.read_parquet(runs, columns=["status"])["status"].iloc[0])
        return out

    def write_point(self, key: str, tables: dict[str, pd.DataFrame], timing: dict[str, Any]) -> float:
        """Write a point's tables atomically (temporary folder, then one rename); returns the
        seconds it took. An earlier folder of the same key (a failed run retried) is replaced."""
        t0 = time.perf_counter()
        tmp = self.root / ".tmp" / f"{key}-{os.getpid()}-{time.monotonic_ns()}"
        tmp.mkdir(parents=True)
        for name, df in tables.items():
            df.to_parquet(tmp / f"{name}.parquet", index=False)
        final = self.point_dir(key)
        if final.exists():
            old = self.root / ".tmp" / f"old-{key}-{time.monotonic_ns()}"
            os.rename(final, old)
            shutil.rmtree(old, ignore_errors=True)
        timing = {**timing, "store_s": time.perf_counter() - t0}
        pd.DataFrame([timing]).to_parquet(tmp / "timing.parquet", index=False)
        os.rename(tmp, final)
        return timing["store_s"]

    def write_config(self, kind: str, content: dict[str, Any]) -> str:
        """A config file named by its content's hash (written once, atomically); its path
        relative to the study folder."""
        text = json.dumps(content, indent=1, sort_keys=True) if kind == "system" else yaml.safe_dump(content, sort_keys=True)
        name = f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:12]}.{'json' if kind == 'system' else 'yml'}"
        path = self.configs_dir / name
        if not path.exists():
            tmp = self.root / ".tmp" / f"{name}-{os.getpid()}"
            tmp.write_text(text)
            os.replace(tmp, path)
        return f"configs/{name}"

    def lock(self) -> "Store":
        """Hold the study folder for this process (until it exits): a second `study` on the
        same folder is refused, so neither cleans up the other's temporary files."""
        try:
            import fcntl
        except ImportError:  # not POSIX: unguarded
            return self
        self._lock_file = open(self.root / ".lock", "a+")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            raise ConfigError(f"{self.root}: another `tracefabric study` is running on this folder; wait for it or "
                              "give --out another folder", "out") from None
        return self

    def unlock(self) -> None:
        f = getattr(self, "_lock_file", None)
        if f is not None:
            f.close()  # closing releases the lock
            self._lock_file = None

    def clean_tmp(self) -> None:
        """Leftovers of a killed run (never renamed, so never part of the results)."""
        tmp = self.root / ".tmp"
        if tmp.is_dir():
            for d in tmp.iterdir():
                shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink(missing_ok=True)
        if self.traces_dir.is_dir():
            for d in self.traces_dir.glob(".tmp-*"):
                shutil.rmtree(d, ignore_errors=True)

    def write_plan(self, keys: list[str]) -> None:
        tmp = self.root / ".tmp" / f"plan-{os.getpid()}.json"
        tmp.write_text(json.dumps({"points": keys}))
        os.replace(tmp, self.root / "plan.json")

    def plan(self) -> list[str] | None:
        """The current spec's point keys, in order; None for a folder without a plan."""
        path = self.root / "plan.json"
        return json.loads(path.read_text())["points"] if path.exists() else None

    def files(self, table: str) -> list[Path]:
        """A table's files of the current plan's points, in plan order (points stored by an
        earlier spec or code version stay on disk but are not results of this one)."""
        keys = self.plan()
        if keys is None:
            return sorted(self.points_dir.glob(f"point=*/{table}.parquet"))
        return [f for f in (self.point_dir(k) / f"{table}.parquet" for k in keys) if f.exists()]

    def read(self, table: str) -> pd.DataFrame:
        """Every point's rows of one table, points in plan order (empty frame if none)."""
        if table not in TABLES:
            raise ConfigError(f"unknown table `{table}`; expected one of {', '.join(TABLES)}", "table")
        frames = [pd.read_parquet(f) for f in self.files(table)]
        frames = [f for f in frames if len(f)]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def open_store(path: str | Path) -> Store:
    """An existing study folder (one `tracefabric study` wrote)."""
    s = Store(path)
    if not s.points_dir.is_dir():
        raise ConfigError(f"{path}: not a study folder (no points/ inside; run `tracefabric study SPEC --out {path}`)", "study")
    return s
