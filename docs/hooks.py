"""MkDocs hook: the committed files under ``results/`` join the site as ``/results/...``, so
the guides link to them and strict mode checks those links."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from bugzoo.judge.results_index import result_files

SITE_KINDS = {".md", ".csv", ".png", ".txt"}  # pages, tables, figures; not the Parquet data


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each committed results file of a kind a browser shows."""
    results = Path(config.config_file_path).resolve().parent.parent / "results"
    for path in result_files(results):
        if path.suffix in SITE_KINDS:
            uri = "results/" + path.relative_to(results).as_posix()
            files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
