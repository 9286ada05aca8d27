"""Typer options generated from a list of fields, so a command line never lists its options by hand.

Each generated option defaults to None, so that "not given" can be told apart from "given the default value";
the command receives the given ones as ``{path: value}`` in the parameter named by ``into``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Protocol

import typer


class OptionField(Protocol):
    """What an option is made of (``myolo.events.payloads.trainer_fields.TrainerField`` is one)."""

    @property
    def path(self) -> str: ...
    @property
    def param(self) -> str: ...
    @property
    def section(self) -> str: ...
    @property
    def kind(self) -> type: ...
    @property
    def default(self) -> Any: ...
    @property
    def help(self) -> str: ...
    @property
    def flag(self) -> str: ...
    @property
    def negative(self) -> str | None: ...


def _shown(default: Any) -> str:
    if default is None or default == {}:
        return "none"
    return str(default).lower() if isinstance(default, bool) else str(default)


def _parameter(f: OptionField, panel: Callable[[OptionField], str]) -> inspect.Parameter:
    decls = [f"{f.flag}/{f.negative}"] if f.negative else [f.flag]
    kind: Any = list[str] if f.kind is list else f.kind
    option = typer.Option(
        *decls, help=f"{f.help} ({f.path}; default: {_shown(f.default)})", rich_help_panel=panel(f), show_default=False
    )
    return inspect.Parameter(
        f.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind | None, option]
    )


def with_options(
    fields: Sequence[OptionField], into: str, panel: Callable[[OptionField], str] = lambda f: f.section.title()
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command: its parameter ``into`` is replaced by one option per field (grouped in --help by
    ``panel``) and receives the given ones by path."""

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func, eval_str=True)
        own = [p for p in sig.parameters.values() if p.name != into]
        made = [_parameter(f, panel) for f in fields]
        by_param = {f.param: f.path for f in fields}

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            given = {by_param[k]: kwargs.pop(k) for k in list(kwargs) if k in by_param}
            return func(**kwargs, **{into: {k: v for k, v in given.items() if v is not None}})

        params = own + made
        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # type: ignore[attr-defined] # typer must read the new signature, not func's
        return command

    return wrap
