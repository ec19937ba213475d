"""A flow function's signature derived from a parameter model, so the flow's parameters
(names, types, defaults; what Prefect shows, validates and stores) are the model's fields,
written once in the model and never copied into a `def`."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

F = TypeVar("F", bound=Callable[..., Any])


def model_signature(model: type[BaseModel]) -> inspect.Signature:
    """A keyword-only parameter for every field of `model`, required ones first (keyword-only:
    Prefect then passes every parameter by name to the `**params` function)."""
    required, optional = [], []
    for name, field in model.model_fields.items():
        if field.default is PydanticUndefined:
            required.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                              annotation=field.annotation))
        else:
            optional.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                              default=field.default, annotation=field.annotation))
    return inspect.Signature(required + optional, return_annotation=dict[str, Any])


def takes_model_fields(model: type[BaseModel]) -> Callable[[F], F]:
    """Give a `def f(**params)` the signature of `model`'s fields (apply below @flow)."""

    def wrap(fn: F) -> F:
        fn.__signature__ = model_signature(model)  # type: ignore[attr-defined]
        return fn

    return wrap
