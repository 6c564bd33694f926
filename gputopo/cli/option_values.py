"""Option values (text, whole numbers, decimals) turned into Python values without pydantic.

typer 0.28+ turns every option value into its Python type with a pydantic ``TypeAdapter``: importing
pydantic and building one adapter per option costs more than the rest of a ``gputopo scan`` (issue
14). gputopo's options are plain ``str``, ``int``, ``float`` and ``bool``, so ``use_plain_values``
gives each such option a converter that handles the values whose result is certain (``"4"``,
``"0.25"``, ``"name"``, the defaults) exactly as pydantic's lax mode would, and hands anything else
(``" 4"``, ``"4.0"``, ``"1e3"``, ``"abc"``) to typer's own pydantic converter, so results and error
messages stay typer's. On a typer without these internals (older releases use click's types and no
pydantic) nothing is changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from typer.core import TyperCommand

# Only values whose conversion cannot differ from pydantic's (ASCII digits, no spaces, no exponent,
# few enough digits that both parse them exactly).
_PLAIN_INT_RE = re.compile(r"-?[0-9]{1,18}")
_PLAIN_DECIMAL_RE = re.compile(r"-?[0-9]{1,15}(\.[0-9]{1,15})?")
NOT_PLAIN = object()


def plain_value(annotation: type, value: Any) -> Any:
    """``value`` as ``annotation`` (str, int, float or bool) where the result is certain, else
    ``NOT_PLAIN``."""
    if annotation is str:
        return value if isinstance(value, str) else NOT_PLAIN
    if annotation == list[str]:  # an option given several times (`--from a --from b`)
        plain = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
        return list(value) if plain else NOT_PLAIN
    if isinstance(value, bool):
        return value if annotation is bool else NOT_PLAIN
    if annotation is int:
        if isinstance(value, int):
            return value
        if isinstance(value, str) and _PLAIN_INT_RE.fullmatch(value):
            return int(value)
    elif annotation is float:
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str) and _PLAIN_DECIMAL_RE.fullmatch(value):
            return float(value)
    return NOT_PLAIN


def _is_plain_option(param: Any) -> bool:
    descriptor = getattr(param, "type_descriptor", None)
    info = getattr(descriptor, "parameter_info", None)
    if descriptor is None:
        return False
    repeated_text = descriptor.annotation == list[str] and param.multiple
    return (
        (descriptor.annotation in (str, int, float, bool) and not param.multiple or repeated_text)
        and descriptor.file_annotation is None
        and param.nargs == 1
        and getattr(info, "parser", None) is None
        and getattr(info, "min", None) is None
        and getattr(info, "max", None) is None
        and not getattr(info, "clamp", False)
    )


try:  # typer 0.28+: its own converters (pydantic) behind RuntimeParam
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # an older typer converts with click's types, without pydantic: nothing to do
    RuntimeParam = None  # type: ignore[assignment,misc]

if RuntimeParam is not None:

    @dataclass(frozen=True)
    class PlainRuntimeParam(RuntimeParam):  # type: ignore[misc,valid-type]
        """typer's converter contract: plain values here, anything else by typer's own converter."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            result = plain_value(self.annotation, value)  # type: ignore[arg-type]
            if result is not NOT_PLAIN:
                return result
            param._runtime_param = typer_converter = build_runtime_param(param.type_descriptor)
            return typer_converter._coerce_value(value, param=param, ctx=ctx)


def use_plain_values(params: list[Any]) -> list[Any]:
    """Give each plain ``str``/``int``/``float``/``bool`` option of ``params`` (click parameters
    built by typer) that has no converter yet the pydantic-free one; returns ``params``."""
    if RuntimeParam is None:
        return params
    for param in params:
        if getattr(param, "_runtime_param", False) is None and _is_plain_option(param):
            descriptor = param.type_descriptor
            param._runtime_param = PlainRuntimeParam(
                parameter_info=descriptor.parameter_info, annotation=descriptor.annotation
            )
    return params


class PlainValuesCommand(TyperCommand):
    """A typer command whose options (``--help`` included) get the plain converters."""

    def get_params(self, ctx: Any) -> list[Any]:
        return use_plain_values(super().get_params(ctx))
