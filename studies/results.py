"""Reading a study's store: DataFrames, DuckDB SQL over the Parquet files, and the summary
table (mean and 95 % interval over seeds).

    >>> res = StudyResults("runs/schemes-by-model-size")
    >>> res.query("SELECT scheme, avg(iteration_us) FROM runs GROUP BY scheme")
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ConfigError, TracefabricError
from .store import TABLES, open_store

# Columns that name a point (axis values); the rest of a `runs` row is its results.
LABELS = ("kind", "model", "world", "parallel", "gpus_per_server", "precision", "gpu", "seq", "micro_batch", "tp", "ep",
          "pp", "microbatches", "imbalance", "trace_seed", "traffic", "fabric", "system", "scheme",
          "lb", "cc", "loss", "placement", "failures", "backend", "seed")
# Student's t quantile t(0.975, df), df = 1..30; the normal quantile past that.
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    return T975[df - 1] if 1 <= df <= len(T975) else 1.959964


def ci95(values: pd.Series) -> float:
    """Half-width of the 95 % confidence interval of the mean (Student's t); NaN for one value."""
    v = values.dropna().to_numpy(dtype=float)
    if len(v) < 2:
        return math.nan
    return t975(len(v) - 1) * float(np.std(v, ddof=1)) / math.sqrt(len(v))


class StudyResults:
    """A study folder's tables as DataFrames, and SQL over them."""

    def __init__(self, path: str | Path) -> None:
        self.store = open_store(path)
        self.path = Path(path)

    def table(self, name: str) -> pd.DataFrame:
        return self.store.read(name)

    @property
    def runs(self) -> pd.DataFrame:
        return self.table("runs")

    @property
    def ranks(self) -> pd.DataFrame:
        return self.table("ranks")

    @property
    def collectives(self) -> pd.DataFrame:
        return self.table("collectives")

    def connect(self):
        """A DuckDB connection with one view per table that has files (runs, ranks,
        collectives, counters, stages, links, flows, timing), reading the Parquet files in place."""
        import duckdb

        con = duckdb.connect()
        for name in TABLES:
            files = self.store.files(name)
            if files:
                listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
                con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listed}], union_by_name=true)")
        return con

    def query(self, sql: str) -> pd.DataFrame:
        import duckdb

        con = self.connect()
        try:
            return con.execute(sql).df()
        except duckdb.Error as e:
            have = [n for n in TABLES if self.store.files(n)]  # e.g. `flows` only where traffic matrices ran
            raise TracefabricError(f"{self.path}: query failed: {' '.join(str(e).split())} "
                                   f"(this study's tables: {', '.join(have) or 'none yet'})") from None
        finally:
            con.close()

    def summary(self) -> pd.DataFrame:
        return summarize(self.runs)


def varying(runs: pd.DataFrame, exclude: tuple[str, ...] = ("seed",)) -> list[str]:
    """Label columns that take more than one value (the study's axes, seeds aside)."""
    return [c for c in LABELS if c in runs and c not in exclude and runs[c].astype(str).nunique() > 1]


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per point without its seed: seeds run, mean and 95 % interval half-width of the
    iteration time (or CCT for traffic runs), exposed communication and CCT increase over the
    bound; failed points counted apart."""
    if runs.empty:
        raise ConfigError("the study has no stored runs yet", "study")
    ok = runs[runs["status"] == "ok"]
    keys = varying(runs) or ["scheme"]
    order = {c: {v: i for i, v in enumerate(dict.fromkeys(runs[c].astype(str)))} for c in keys}
    rows = []
    for values, g in runs.groupby(keys, sort=False, dropna=False):
        values = values if isinstance(values, tuple) else (values,)
        good = ok.loc[ok.index.intersection(g.index)]
        row = dict(zip(keys, values))
        row.update(seeds=len(good), failed=int((g["status"] != "ok").sum()))
        for col in ("iteration_us", "exposed_comm_us", "cct_us"):
            if col in good and good[col].notna().any():
                row[col] = float(good[col].mean())
                row[f"{col}_ci95"] = ci95(good[col])
        if "cct_increase" in good and good["cct_increase"].notna().any():
            row["cct_increase_pct"] = 100 * float(good["cct_increase"].mean())
            row["cct_increase_pct_ci95"] = 100 * ci95(good["cct_increase"])
        rows.append(row)
    out = pd.DataFrame(rows)
    return out.sort_values(keys, key=lambda c: c.astype(str).map(order[c.name]), kind="stable").reset_index(drop=True)
