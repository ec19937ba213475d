"""Command-line options derived from a pydantic parameter model: one option per field, its type,
choices, help and default taken from the field; an option left out is not passed on, so the
model's own default applies."""

from __future__ import annotations

import argparse
import json
import types
import typing
from collections.abc import Iterable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def add_model_options(parser: argparse.ArgumentParser, model: type[BaseModel], exclude: Iterable[str] = ()) -> None:
    skip = set(exclude)
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        help_text = field.description or ""
        if field.is_required():
            kwargs: dict[str, Any] = {"required": True}
        else:
            kwargs = {"default": argparse.SUPPRESS}
            if field.default is not None:
                help_text = f"{help_text} (default: {field.default})".strip()
        kind = _base_type(field.annotation)
        if kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typing.get_origin(kind) is Literal:
            kwargs["choices"] = typing.get_args(kind)
        elif kind is dict or typing.get_origin(kind) is dict:
            kwargs.update(type=_json_object, metavar="JSON")
        else:
            kwargs.update(type=kind, metavar=name.upper())
        parser.add_argument("--" + name.replace("_", "-"), dest=name, help=help_text, **kwargs)


def model_from_args(model: type[M], args: argparse.Namespace, **extra: Any) -> M:
    """The model from the options given (the others take the model's defaults)."""
    given = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    return model(**given, **extra)


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("a JSON object is needed, e.g. '{\"name\": 1}'")
    return value


def _base_type(annotation: Any) -> Any:
    """`int | None` -> int; other annotations as they are."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation
