"""Studies: a product of axes (model, world, parallelism, fabric, scheme, failures, backend,
seed) run as one resumable job, locally or on Ray, into a Parquet store queried with DuckDB,
with plots, an HTML report and the papers' figures (`replicate`).

This layer sits above `interop` and below `tools` (the CLI composes it)."""

from .execute import StudyRun, plan_study, run_study
from .results import StudyResults, summarize
from .spec import StudySpec, load_spec, spec_from_dict

__all__ = ["StudyRun", "StudyResults", "StudySpec", "load_spec", "plan_study", "run_study", "spec_from_dict", "summarize"]
