"""MkDocs hooks: the reference pages' tables come from the code when the site is built.

A page asks for generated Markdown with a line ``<!-- generated: NAME -->``:

- ``cli``: every command of ``shardq.cli.main.build_parser()`` with every flag, the
  tuning flags that only ``--help-all`` lists included;
- ``settings``: every field of the settings dataclasses, with its default, range,
  flag and ``SHARDQ_*`` variable, from the field metadata that makes the flags;
- ``metrics``: the worker's Prometheus metrics, from a fresh ``Metrics`` registry;
- ``alerts``: the alert rules of ``deploy/prometheus/shardq-rules.yml``;
- ``schema``: the DDL of ``shardq migrate --sql --dialect postgresql``;
- ``sql``: every statement of ``shardq sql list``, as ``shardq sql show`` prints it for
  each engine it is sent to;
- ``bench-suite``: the generated tables of ``bench/results/suite/report.md``.

The benchmark plots and the files under ``deploy/`` are added to the site as they are
in the repository, so pages can show and link them.  An unknown name, or a generator
that finds nothing, fails the build.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)

# Files of the repository served with the site: (source, path in the site).
ASSETS = [
    *((p, f"explanation/plots/{p.name}")
      for p in sorted((ROOT / "bench/results/suite/plots").glob("*.png"))),
    (ROOT / "bench/results/soak.png", "explanation/plots/soak.png"),
    (ROOT / "deploy/prometheus/shardq-rules.yml", "how-to/files/shardq-rules.yml"),
    (ROOT / "deploy/prometheus/shardq-rules-test.yml", "how-to/files/shardq-rules-test.yml"),
    (ROOT / "deploy/grafana/shardq.json", "how-to/files/shardq-grafana.json"),
]


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the repository's plots and deployment files to the site."""
    for source, uri in ASSETS:
        if not source.is_file():
            raise PluginError(f"docs/hooks.py: {source} is missing")
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace each ``<!-- generated: NAME -->`` line with NAME's Markdown."""
    def expand(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise PluginError(f"{page.file.src_uri}: unknown generated section {name!r}")
        text = GENERATORS[name]()
        if not text.strip():
            raise PluginError(f"{page.file.src_uri}: generated section {name!r} is empty")
        return text

    return MARKER.sub(expand, markdown)


# -- the command line ----------------------------------------------------------------

def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's arguments, in the order they were added."""
    return parser._actions  # noqa: SLF001 (argparse has no public way to list them)


def _subparsers(action: argparse.Action) -> dict[str, argparse.ArgumentParser]:
    """The subcommands an action stands for (none unless it is a subparsers action)."""
    choices = action.choices
    if isinstance(choices, dict) and all(isinstance(p, argparse.ArgumentParser)
                                         for p in choices.values()):
        return choices
    return {}


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each subcommand of ``parser`` (recursively), by its full name."""
    for action in _actions(parser):
        for name, sub in _subparsers(action).items():
            yield name, sub
            for subname, nested in _subcommands(sub):
                yield f"{name} {subname}", nested


def _hidden_help(parser: argparse.ArgumentParser) -> dict[argparse.Action, str]:
    """The help of the flags that only ``--help-all`` shows."""
    from shardq.core.config import HelpAll

    hidden: dict[argparse.Action, str] = {}
    for action in _actions(parser):
        if isinstance(action, HelpAll):
            hidden.update(action.hidden)
    return hidden


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    """One table row per argument: the ones ``--help`` shows, then the tuning ones."""
    hidden = _hidden_help(parser)
    rows: list[tuple[bool, str]] = []
    for action in _actions(parser):
        if _subparsers(action) or action.dest == "help":
            continue
        if action.option_strings:
            names = ", ".join(f"`{s}`" for s in action.option_strings)
            if action.nargs != 0 and not isinstance(action, argparse.BooleanOptionalAction):
                names += f" `{action.metavar or action.dest.upper()}`"
        else:
            names = f"`{action.metavar or action.dest}`"
        help_text = hidden.get(action) or action.help or ""
        if action.choices and not isinstance(action.choices, dict):
            help_text += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
        tuning = action in hidden
        rows.append((tuning, f"| {names} | {_cell(help_text)} | {'tuning' if tuning else ''} |"))
    return [row for _, row in sorted(rows, key=lambda r: r[0])]


def cli_reference() -> str:
    """Every ``shardq`` command with its arguments and flags."""
    from shardq.cli.main import build_parser

    parser = build_parser()
    out = ["## `shardq`", "", "```text", parser.format_usage().strip(), "```", "",
           "| argument | meaning | |", "| --- | --- | --- |", *_flag_rows(parser), ""]
    for name, sub in _subcommands(parser):
        out += [f"## `shardq {name}`", ""]
        if sub.description:
            out += [sub.description[0].upper() + sub.description[1:] + ".", ""]
        out += ["```text", sub.format_usage().replace("usage: ", "").strip(), "```", ""]
        rows = _flag_rows(sub)
        if rows:
            out += ["| argument | meaning | |", "| --- | --- | --- |", *rows, ""]
    return "\n".join(out)


# -- settings ---------------------------------------------------------------------------

def _number(value: float) -> str:
    return f"{value:,.10g}"


def _settings_table(cls: type[Any]) -> list[str]:
    from shardq.core.config import env_name

    rows = ["| setting | default | range | flag and variable | meaning |",
            "| --- | --- | --- | --- | --- |"]
    for f in dataclasses.fields(cls):
        default = f.default
        shown = ("none" if default is None else "empty" if default == ()
                 else _number(default) if isinstance(default, int | float)
                 and not isinstance(default, bool) else str(default).lower()
                 if isinstance(default, bool) else f"`{default}`")
        low, high = f.metadata.get("low"), f.metadata.get("high")
        bounds = (f"{_number(low)} to {_number(high)}"
                  if low is not None and high is not None else "")
        flag = "--" + f.name.replace("_", "-")
        if "bool" in str(f.type):
            flag += f"`, `--no-{f.name.replace('_', '-')}"
        tuning = " *(tuning: `--help-all`)*" if f.metadata["tuning"] else ""
        rows.append(f"| `{f.name}` | {shown} | {bounds} | `{flag}`, `{env_name(f.name)}` "
                    f"| {_cell(f.metadata['help'])}{tuning} |")
    return rows


def settings_reference() -> str:
    """The three settings classes, each a table."""
    from shardq.core.config import ClientConfig
    from shardq.web.config import DashboardConfig
    from shardq.worker.config import WorkerConfig

    sections = [
        (ClientConfig, "Client settings",
         "Keywords of `shardq.Client`, `shardq.AsyncClient` and `shardq.App`, and flags of "
         "every `shardq` command that connects to a database."),
        (WorkerConfig, "Worker settings",
         "Flags of `shardq consume` (and of `shardq doctor`, which counts the connections "
         "a worker with these settings opens)."),
        (DashboardConfig, "Dashboard settings", "Flags of `shardq dashboard`."),
    ]
    out: list[str] = []
    for cls, title, intro in sections:
        out += [f"## {title}: `{cls.__module__}.{cls.__name__}`", "", intro, "",
                *_settings_table(cls), ""]
    return "\n".join(out)


# -- metrics and alerts -------------------------------------------------------------------

SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"],
            "gauge": [""]}


def metrics_reference() -> str:
    """Each metric a worker exports: its name as scraped, type, labels and help."""
    from prometheus_client import Counter, Gauge, Histogram

    from shardq.worker.metrics import Metrics

    metrics = Metrics()
    # One series per labelled metric, so that a scrape shows its labels.
    collectors = [*vars(metrics).values(), *metrics.queue_gauges.values()]
    for collector in collectors:
        if isinstance(collector, Counter | Gauge | Histogram):
            labels = ["example"] * len(getattr(collector, "_labelnames", ()))
            with contextlib.suppress(ValueError):  # a metric without labels refuses
                collector.labels(*labels)
    metrics.durations.recorder().observe("example", 0.01)
    rows = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for family in sorted(metrics.registry.collect(), key=lambda f: f.name):
        labels = sorted({k for s in family.samples for k in s.labels if k != "le"})
        names = "<br>".join(f"`{family.name}{s}`" for s in SUFFIXES[family.type])
        rows.append(f"| {names} | {family.type} | {', '.join(f'`{k}`' for k in labels)} "
                    f"| {_cell(family.documentation)} |")
    return "\n".join(rows) + "\n"


def alerts_reference() -> str:
    """The alert rules shipped in deploy/prometheus, with their expressions."""
    rules = yaml.safe_load((ROOT / "deploy/prometheus/shardq-rules.yml").read_text())
    out = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            out += [f"### `{rule['alert']}`", "",
                    f"{rule['annotations']['summary']} (severity "
                    f"`{rule['labels']['severity']}`"
                    + (f", after {rule['for']}" if "for" in rule else "") + ").", "",
                    "```promql", rule["expr"].strip(), "```", ""]
    return "\n".join(out)


# -- schema and benchmarks -----------------------------------------------------------------

def schema_reference() -> str:
    """What ``shardq migrate --sql --dialect postgresql`` prints."""
    from shardq.core import migrate

    out = io.StringIO()
    migrate.upgrade(None, sql=True, dialect="postgresql", output=out)
    return "```sql\n" + out.getvalue().strip() + "\n```\n"


ENGINES = {"postgresql": "PostgreSQL", "cockroachdb": "CockroachDB"}


def sql_reference() -> str:
    """Each statement ``shardq sql show`` prints, a tab per engine."""
    from shardq.cli import sqlshow

    out: list[str] = []
    for shown in sqlshow.STATEMENTS.values():
        out += [f"## `{shown.name}`", "", shown.about[0].upper() + shown.about[1:] + ".", ""]
        for engine in shown.dialects:
            text = sqlshow.show(shown.name, engine)
            out += [f'=== "{ENGINES[engine]}"', "", "    ```sql",
                    *(f"    {line}".rstrip() for line in text.splitlines()), "    ```", ""]
    return "\n".join(out)


def bench_reference() -> str:
    """Sections 1 to 8 of the suite's report (its generated tables), one level down."""
    report = (ROOT / "bench/results/suite/report.md").read_text()
    header, _, rest = report.partition("\n## 1. ")
    tables = "## 1. " + rest.split("\n## Targets")[0]
    facts = [line for line in header.splitlines() if line.startswith("- ")]
    return "\n".join([*facts, "", re.sub(r"^## ", "### ", tables, flags=re.MULTILINE)])


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli_reference,
    "settings": settings_reference,
    "metrics": metrics_reference,
    "alerts": alerts_reference,
    "schema": schema_reference,
    "sql": sql_reference,
    "bench-suite": bench_reference,
}
