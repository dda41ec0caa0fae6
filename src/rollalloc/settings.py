"""One configuration grammar for `rollalloc train`, `compare` and `simulate`.

A command's settings are a dataclass whose fields carry their docstrings (`TrainConfig` for train
and compare, `SimulateConfig` for simulate). A field has the same name in three places:

    --config FILE.yaml        a mapping of fields (a nested config as a nested mapping)
    --group-size 16           a flag for the fields used most: --FIELD-NAME, help = the docstring
    --set learner.lr=2e-5     any field by its dotted path; VALUE is YAML (2e-5, null, true, [1, 2])

A strategy's options are spelled the same in every command, under its registry name:

    --set options.pilot-commit.n_pilot=4      (YAML: `options: {pilot-commit: {n_pilot: 4}}`)

In train and compare they go into the `strategy_config` of that strategy's runs (over
`strategy_config.KEY`, which every strategy of a compare gets); naming a strategy that is not in the
run is an error. Precedence: defaults < --config < flags < --set. A path that names no field fails
at once, naming the path and the fields it could be; a strategy option the strategy does not have
fails when the options are checked (`unknown option(s)`), before any run starts.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

OPTIONS = "options"
"""The top-level key of per-strategy options in every command: options.NAME.KEY."""


# ------------------------------------------------------------------ --set PATH=VALUE


def parse_set(item: str) -> tuple[tuple[str, ...], Any]:
    """`a.b.c=VALUE` -> (("a", "b", "c"), VALUE parsed as YAML; an empty VALUE is None)."""
    import yaml

    if "=" not in item:
        raise ValueError(
            f"--set {item!r}: expected KEY=VALUE (e.g. learner.lr=2e-5, "
            "options.pilot-commit.n_pilot=4)"
        )
    key, raw = item.split("=", 1)
    path = tuple(key.strip().split("."))
    if not all(path):
        raise ValueError(f"--set {item!r}: empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        raise ValueError(f"--set {item!r}: the value is not valid YAML ({e})") from None
    return path, value


def _sub_schema(f: dataclasses.Field) -> Any:
    """What lies below a field: a dataclass (its fields are checked), dict (a free mapping:
    task_config, strategy_config, sim, options) or None (a value: nothing below)."""
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        v = f.default_factory()  # type: ignore[misc]
        if dataclasses.is_dataclass(v):
            return type(v)
        if isinstance(v, dict):
            return dict
    return None


def check_path(
    item: str,
    path: tuple[str, ...],
    schema: type,
    alias: Callable[[tuple[str, ...]], tuple[str, ...] | None] | None = None,
) -> tuple[str, ...]:
    """`path` checked against the dataclass `schema` (plus the top-level OPTIONS mapping); an
    unknown first key may be rewritten by `alias` (simulate's old STRATEGY.KEY form)."""
    from rollalloc.allocator import available_strategies

    below: Any = schema
    for i, part in enumerate(path):
        if not dataclasses.is_dataclass(below):
            break  # a free mapping: what it holds is checked by its owner
        fields = {f.name: f for f in dataclasses.fields(below)}
        if i == 0 and part == OPTIONS:
            below = dict
            continue
        if part not in fields:
            if i == 0 and alias is not None and (new := alias(path)) is not None:
                print(
                    f"rollalloc: --set {item}: the STRATEGY.KEY form is deprecated; write "
                    f"--set {'.'.join(new)}={item.split('=', 1)[1]}",
                    file=sys.stderr,
                )
                return check_path(item, new, schema)
            where = ".".join(path[: i + 1])
            known = ", ".join(dict.fromkeys([*fields, OPTIONS]) if i == 0 else fields)
            hint = ""
            if i == 0 and part in available_strategies():
                hint = f"; a strategy's options are set as {OPTIONS}.{part}.KEY"
            raise ValueError(f"--set {item!r}: {where}: unknown field (known: {known}){hint}")
        below = _sub_schema(fields[part])
        if below is None and i < len(path) - 1:
            raise ValueError(f"--set {item!r}: {'.'.join(path[: i + 1])} is not a mapping")
    return path


def apply_sets(
    mapping: dict[str, Any],
    items: Sequence[str] | None,
    schema: type,
    alias: Callable[[tuple[str, ...]], tuple[str, ...] | None] | None = None,
) -> dict[str, Any]:
    """Every `--set PATH=VALUE` of `items` written into `mapping` (a --config mapping of `schema`
    fields), in order; returns `mapping`."""
    for item in items or []:
        path, value = parse_set(item)
        path = check_path(item, path, schema, alias)
        node = mapping
        for i, part in enumerate(path[:-1]):
            if node.get(part) is None:  # absent, or `options:` with nothing under it
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise ValueError(f"--set {item!r}: {'.'.join(path[: i + 1])} is not a mapping")
        node[path[-1]] = value
    return mapping


# ------------------------------------------------------------------ options.NAME.KEY


def strategy_options_by_name(
    options: Any, strategies: Sequence[str], command: str
) -> dict[str, dict[str, Any]]:
    """{strategy: its options} of an `options` mapping whose every name is in `strategies`."""
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"{command}: options must be a mapping name -> options, got {options!r}")
    extra = sorted(set(options) - set(strategies))
    if extra:
        raise ValueError(
            f"{command}: options for strategies not in the run: {extra} "
            f"(--set {OPTIONS}.NAME.KEY / {OPTIONS}:)"
        )
    bad = [k for k, v in options.items() if v is not None and not isinstance(v, dict)]
    if bad:
        raise ValueError(f"{command}: {OPTIONS}.{bad[0]} must be a mapping of option -> value")
    return {k: dict(v or {}) for k, v in options.items()}


def config_for_strategy(mapping: dict[str, Any], strategy: str) -> dict[str, Any]:
    """A TrainConfig mapping for one run of `strategy`: its `options.<strategy>` merged over
    `strategy_config`, the `options` key removed (TrainConfig has no such field)."""
    d = dict(mapping)
    options = d.pop(OPTIONS, None)
    names = list(options) if isinstance(options, dict) else []
    own = strategy_options_by_name(options, names, "config").get(strategy)
    common = d.get("strategy_config")
    if own and (common is None or isinstance(common, dict)):
        d["strategy_config"] = {**(common or {}), **own}
    return d


# ------------------------------------------------------------------ flags from the dataclass


def field_docs(cls: type) -> dict[str, tuple[str, str]]:
    """{field: (annotation as written, docstring)} of the fields declared in `cls`'s own body.

    An undocumented field shares a neighbour's docstring: the next field's when their names differ
    only after the last underscore (`p_min` / `p_max`), else the previous field's when they do
    (`prior_alpha` / `prior_beta`), else the docstring that ends its run of fields (`lower` /
    `upper` under one "Band of ...")."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    ann: dict[str, str] = {}
    own: dict[str, str] = {}  # the docstring right under the field
    covered: dict[str, str] = {}  # the docstring ending the field's run of annotated fields
    pending: list[str] = []
    for node, nxt in zip(body, [*body[1:], None]):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        ann[name], own[name] = ast.unparse(node.annotation), ""
        pending.append(name)
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            own[name] = inspect.cleandoc(nxt.value.value)
            covered.update({p: own[name] for p in pending})
            pending = []
        elif not isinstance(nxt, ast.AnnAssign):
            pending = []  # a method or the end: the fields above stay undocumented
    names = list(ann)
    out: dict[str, tuple[str, str]] = {}
    for i, name in enumerate(names):
        doc, stem = own[name], _stem(name)
        prev = names[i - 1] if i else None
        nxt_ = names[i + 1] if i + 1 < len(names) else None
        if not doc and stem and nxt_ and _stem(nxt_) == stem and covered.get(name):
            doc = covered[name]
        if not doc and stem and prev and _stem(prev) == stem:
            doc = own[prev]
        out[name] = (ann[name], doc or covered.get(name, ""))
    return out


def _stem(name: str) -> str:
    return name.rpartition("_")[0]


def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def int_list(text: str) -> list[int]:
    try:
        return [int(t) for t in csv_list(text)]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from e


def _flag_type(f: dataclasses.Field, annotation: str) -> Callable[[str], Any]:
    """How a flag's text becomes the field's value: from its default, else its annotation."""
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = f.default_factory()  # type: ignore[misc]
    else:
        default = f.default
    if isinstance(default, list) or annotation.startswith("list["):
        return int_list if annotation == "list[int]" else csv_list
    if isinstance(default, bool) or isinstance(default, dict):
        raise TypeError(f"{f.name}: no flag for a {type(default).__name__} field; use --set")
    if default is None:
        kinds = {"int": int, "float": float}
        return next((t for k, t in kinds.items() if annotation.startswith(k)), str)
    return type(default)


def default_text(f: dataclasses.Field) -> str:
    """The default as --help shows it ('' when there is none to show)."""
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        v = f.default_factory()  # type: ignore[misc]
        return ",".join(map(str, v)) if isinstance(v, list) else ""
    if f.default is None or f.default is dataclasses.MISSING:
        return ""
    return (
        f"{f.default:,}" if isinstance(f.default, int) and f.default >= 10_000 else str(f.default)
    )


def add_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    names: Sequence[str],
    **overrides: dict[str, Any],
) -> None:
    """--FIELD-NAME for each field of `names`: type from the field's default, help its docstring
    and default. No argparse default: a flag not given leaves the --config file's value.
    `overrides[name]` adds or replaces add_argument keywords (required, help, ...)."""
    docs = field_docs(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in names:
        f = fields[name]
        annotation, doc = docs.get(name, ("", ""))
        default = default_text(f)
        help_text = " ".join(doc.split()) + (f" (default: {default})" if default else "")
        kw: dict[str, Any] = {
            "dest": name,
            "type": _flag_type(f, annotation),
            "help": help_text.replace("%", "%%"),
        }
        kw.update(overrides.get(name, {}))
        parser.add_argument("--" + name.replace("_", "-"), **kw)


def flag_values(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The fields of `cls` given as flags (those not given are None in `args`)."""
    return {
        f.name: v for f in dataclasses.fields(cls) if (v := getattr(args, f.name, None)) is not None
    }


def add_set_flag(parser: argparse.ArgumentParser, example: str) -> None:
    parser.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help=f"set any field by its dotted path, VALUE as YAML, e.g. --set {example}; a "
        f"strategy's options: --set {OPTIONS}.pilot-commit.n_pilot=4; repeatable",
    )
