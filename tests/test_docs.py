"""The README (the door) and the docs site (the house): the site builds strictly, and neither can
drift from the code: every registered scheme, preset and CLI command is documented, and the
README's quick-start commands are the ones CI runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from tracefabric.astra_configs import scheme_presets
from tracefabric.tools.cli import app
from tracefabric.network_backends.packet import scheme_names

from conftest import REPO

DOCS = REPO / "docs"
README = (REPO / "README.md").read_text()


def test_site_builds_strictly(tmp_path):
    """Strict: a broken link or anchor, a page missing from the nav or a nav entry without a
    page fails the build."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pages = sorted(p.relative_to(DOCS).with_suffix("") for p in DOCS.rglob("*.md"))
    for page in pages:  # every page rendered: index.md -> index.html, the rest -> name/index.html
        html = tmp_path / "site" / (page.parent if page.name == "index" else page) / "index.html"
        assert html.is_file(), f"docs/{page}.md was not rendered"
    assert len(pages) >= 20


def _table_names(page: Path, section: str = "") -> list[str]:
    """The `name` in the first column of each table row of the page (or of one `## section`)."""
    text = page.read_text()
    if section:
        text = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z0-9_]+)` \|", text, flags=re.M)


@pytest.mark.parametrize("family", ["lb", "cc", "loss", "receiver", "qdisc"])
def test_scheme_pages_list_exactly_the_registry(family):
    registered = scheme_names()[family]
    documented = _table_names(DOCS / "schemes" / f"{family}.md")
    assert sorted(documented) == sorted(registered), f"docs/schemes/{family}.md"
    assert len(documented) == len(set(documented))


def test_every_family_has_a_page():
    assert sorted(scheme_names()) == sorted(p.stem for p in (DOCS / "schemes").glob("*.md") if p.stem != "index")


def test_presets_page_lists_every_preset():
    documented = _table_names(DOCS / "schemes" / "index.md", "Presets")
    assert sorted(documented) == scheme_presets()
    assert len(scheme_presets()) >= 22


def _commands(group, prefix: str = "tracefabric") -> list[str]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        if hasattr(cmd, "commands"):
            out += _commands(cmd, f"{prefix} {name}")
        else:
            out.append(f"{prefix} {name}")
    return out


def test_command_reference_lists_every_command():
    commands = _commands(typer.main.get_command(app))
    reference = (DOCS / "cli.md").read_text()
    rows = re.findall(r"^\| `(tracefabric[a-z -]*)` \|", reference, flags=re.M)
    assert sorted(rows) == commands
    assert "tracefabric net compare" in commands and "tracefabric study" in commands and len(commands) == 20
    for command in commands:  # each with an example
        assert re.search(rf"^{command}( |$)", reference, flags=re.M), command


def test_readme_is_the_door():
    lines = README.splitlines()
    assert len(lines) <= 150
    assert "pip install . && tracefabric study examples/schemes_by_model_size.yaml" in lines
    # CI runs exactly the README's test command (the last line of .ci/run).
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == 'pip install ".[test]" && python -m pytest'
    assert ci[-1] in lines


def test_readme_links_resolve():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert len(targets) >= 15
    for target in targets:
        assert (REPO / target).is_file(), target
