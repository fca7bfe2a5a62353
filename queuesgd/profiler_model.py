"""A user's model and batch factory, found by name and checked before anything is called.

:func:`queuesgd.profile` and its reference loop take a model as an
``nn.Module``, a class or factory, or a name (``"module.path:callable"``,
``"torchvision:NAME"``, ``"queuesgd:KIND"``), and a batch factory by name
(``--inputs``). Here a name is imported, its type checked (a class, a marked
factory or one annotated to return a module or tensor: :mod:`queuesgd.profiler_factory`),
and the keyword arguments bound to its signature; only then is a model built.

Examples
--------
>>> factory, label, kwargs = model_factory_of("queuesgd:mlp", {"inputs": 8, "hidden": 4.0})
>>> kwargs, build_model(factory, kwargs, label)[0].out_features   # hidden: int, so 4.0 is read as 4
({'inputs': 8, 'hidden': 4}, 4)
"""

from __future__ import annotations

import builtins
import functools
import importlib
import inspect
import keyword
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from queuesgd import _checks, json_text
from queuesgd.errors import InvalidParameterError, QueuesgdError
from queuesgd.harness import require_torch
from queuesgd.profiler_factory import factory_kind

__all__ = [
    "INPUTS_ACCEPTED",
    "MAX_MODEL_ARGS_CHARS",
    "MODEL_ACCEPTED",
    "build_model",
    "check_declared_args",
    "check_model_args",
    "check_named_model_args",
    "import_callable",
    "inputs_factory_of",
    "model_factory_of",
    "resolve_model",
]

#: The longest ``model_args`` JSON text (``--model-args``).
MAX_MODEL_ARGS_CHARS = 10_000


def resolve_model(model: Any, model_args: Any = None) -> Any:
    """An ``nn.Module`` from a module, a class or factory, or a name; checked before anything is called.

    Names: ``"module.path:callable"`` (in an importable module: an ``nn.Module``
    subclass, a function marked with :func:`queuesgd.model_factory`, or one
    whose return annotation is an ``nn.Module`` subclass; anything else is
    refused without being called), ``"torchvision:NAME"``
    (``torchvision.models.get_model(NAME, weights=None)``: random weights,
    nothing downloaded; where torchvision loads beside torch), or
    ``"queuesgd:KIND"`` (a harness model, the function of that name in
    :mod:`queuesgd.harness.models`: ``mlp``, ``cnn``, ``resnet18s``, ``encoder``,
    with its own arguments). A class or factory is called
    with ``model_args`` as keyword arguments (see :func:`check_model_args`), each checked
    against the type its parameter declares (:func:`check_declared_args`).

    Examples
    --------
    >>> net = resolve_model("queuesgd:mlp", {"inputs": 8, "hidden": 4})
    >>> net[0].in_features, net[0].out_features
    (8, 4)
    >>> resolve_model("os:getcwd")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model: got 'os:getcwd'; accepted: an nn.Module subclass, ...
    """
    factory, label, kwargs = model_factory_of(model, check_model_args("model_args", model_args))
    return model if factory is None else build_model(factory, kwargs, label)


MODEL_ACCEPTED = (
    "an nn.Module subclass, a function marked @queuesgd.model_factory or annotated '-> nn.Module', "
    "named 'module.path:callable' (e.g. 'mypkg.models:make_net'); 'queuesgd:KIND' or 'torchvision:NAME'"
)


def model_factory_of(
    model: Any, kwargs: Mapping[str, Any]
) -> tuple[Callable[..., Any] | None, str, dict[str, Any]]:
    """``(factory, label, kwargs)``: ``factory(**kwargs)`` builds ``model`` (``(None, label, {})``: built).

    Nothing is called: a name is imported and its type checked, and ``kwargs``
    are bound to the factory's signature and checked against the types its
    parameters declare (:func:`check_declared_args`: the kwargs returned are
    the values as those checks read them, ``4.0`` for an ``int`` being 4).
    """
    nn = require_torch().nn
    if isinstance(model, nn.Module):
        if kwargs:
            raise InvalidParameterError(
                "model_args", dict(kwargs), "none for a model already built (they are for a class or factory)"
            )
        return None, type(model).__name__, {}
    if isinstance(model, str):
        mod_name, sep, attr = model.partition(":")
        if not sep or not mod_name or not attr:
            raise InvalidParameterError("model", model, MODEL_ACCEPTED)
        if mod_name == "torchvision":
            return functools.partial(_torchvision, model, attr), model, dict(kwargs)
        if mod_name == "queuesgd":
            from queuesgd.harness import models

            _checks.choice("model", attr, models.MODELS)
            factory: Callable[..., Any] = getattr(models, attr)  # what build(KIND) builds, its own arguments
            return factory, model, _bind(model, factory, kwargs)
        found = import_callable("model", model, MODEL_ACCEPTED)
        if not _is_model_factory(nn, found):
            raise InvalidParameterError(
                "model", model, f"{MODEL_ACCEPTED} (it is {_what(found)}: not called)"
            )
        return found, model, _bind(model, found, kwargs)
    if isinstance(model, type) or callable(model):  # a class or factory the caller passes in code
        label = getattr(model, "__qualname__", type(model).__name__)
        if isinstance(model, type) and not issubclass(model, nn.Module):
            raise InvalidParameterError("model", label, MODEL_ACCEPTED)
        return model, label, _bind(label, model, kwargs)
    raise InvalidParameterError("model", model, f"an nn.Module, or {MODEL_ACCEPTED}")


def build_model(factory: Callable[..., Any], kwargs: Mapping[str, Any], label: str) -> Any:
    """``factory(**kwargs)``, checked to be an ``nn.Module``; its own errors named as the model's."""
    nn = require_torch().nn
    field = "model_args" if kwargs else "model"
    shown = f"{label} with {dict(kwargs)}" if kwargs else label
    try:
        net = factory(**kwargs)
    except QueuesgdError:
        raise
    except Exception as exc:  # the factory's own failure: one line, the cause chained
        raise InvalidParameterError(
            field, shown, f"arguments that build the model (it raised {type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(net, nn.Module):
        raise InvalidParameterError("model", label, f"{MODEL_ACCEPTED} (it returned {_what(net)})")
    return net


def check_model_args(field: str, value: Any) -> dict[str, Any]:
    """Keyword arguments for a model's class or factory: None, a mapping, or the text of a JSON object.

    Names must be Python identifiers; JSON text is at most :data:`MAX_MODEL_ARGS_CHARS`
    characters, with finite numbers.

    Examples
    --------
    >>> check_model_args("--model-args", '{"width": 64}')
    {'width': 64}
    >>> check_model_args("--model-args", "[64]")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: --model-args: got '[64]'; accepted: a JSON object of keyword ...
    """
    accepted = 'a JSON object of keyword arguments, e.g. {"width": 64}'
    if value is None:
        return {}
    if isinstance(value, str):
        shown = value if len(value) <= 80 else value[:77] + "..."
        if len(value) > MAX_MODEL_ARGS_CHARS:
            raise InvalidParameterError(
                field, shown, f"{accepted}, of at most {MAX_MODEL_ARGS_CHARS} characters"
            )
        try:  # NaN, Infinity, 1e400 and a 5000-digit integer are JSONDecodeErrors at their place
            value = json_text.loads(value, finite=True)
        except (ValueError, RecursionError) as exc:
            raise InvalidParameterError(field, shown, f"{accepted} ({type(exc).__name__}: {exc})") from None
        if not isinstance(value, dict):
            raise InvalidParameterError(field, shown, accepted)
    if not isinstance(value, Mapping):
        raise InvalidParameterError(field, value, f"{accepted}, or a dict of them")
    bad = [k for k in value if not isinstance(k, str) or not k.isidentifier() or keyword.iskeyword(k)]
    if bad:
        raise InvalidParameterError(
            f"{field} name", bad[0], "a Python identifier (a keyword argument's name)"
        )
    return dict(value)


def _bind(
    label: str, func: Callable[..., Any], kwargs: Mapping[str, Any], field: str = "model_args"
) -> dict[str, Any]:
    """``kwargs`` checked before ``func`` is called: names (and missing arguments) against its
    signature, values against the types it declares (:func:`check_declared_args`)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):  # no signature to read (some builtins): the call will say
        return dict(kwargs)
    try:
        sig.bind(**kwargs)
    except TypeError as exc:
        names = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        takes = ", ".join(names) or "none"
        raise InvalidParameterError(
            field if kwargs else "model",
            f"{label} with {dict(kwargs)}" if kwargs else label,
            f"the keyword arguments it takes ({takes}; {exc})",
        ) from None
    return check_declared_args(label, func, kwargs, field)


def _string(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidParameterError(field, value, "a string")
    return value


#: The parameter types whose ``model_args`` values are checked before a factory is called, and their checks.
_DECLARED: dict[str, Callable[[str, Any], Any]] = {
    "int": functools.partial(_checks.integer, minimum=None),
    "bool": _checks.boolean,
    "float": _checks.real,
    "str": _string,
}
_TYPE_NAMES = {int: "int", bool: "bool", float: "float", str: "str", type(None): "None"}


def _declared(annotation: Any) -> tuple[str, bool] | None:
    """``(type, None allowed)`` of an annotation naming a type of :data:`_DECLARED` (or ``T | None``).

    With ``from __future__ import annotations`` an annotation is its text (``"int | None"``), read
    as words, not evaluated.
    """
    if isinstance(annotation, str):
        parts = {p.strip() for p in annotation.split("|")}
    else:
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        args = typing.get_args(annotation) if union else (annotation,)
        parts = {_TYPE_NAMES.get(a, "?") if isinstance(a, type) else "?" for a in args}
    kinds = parts - {"None"}
    if len(kinds) != 1 or not kinds <= _DECLARED.keys():
        return None
    return kinds.pop(), "None" in parts


def check_declared_args(
    label: str, factory: Callable[..., Any], kwargs: Mapping[str, Any], field: str = "model_args"
) -> dict[str, Any]:
    """``kwargs`` checked against the types ``factory``'s parameters declare, read as the checks read them.

    A parameter annotated ``int``, ``bool``, ``float`` or ``str`` (or one of
    them ``| None``) takes what :func:`queuesgd._checks.integer` (any sign;
    ``4.0`` is read as 4), :func:`~queuesgd._checks.boolean` and
    :func:`~queuesgd._checks.real` accept, or a string: ``2.5`` layers,
    ``true`` or ``"4"`` for an ``int`` are refused as ``FIELD.NAME``, naming
    the parameter's declaration. A parameter without one of these annotations,
    and the ranges (``layers >= 1``), are the factory's own to check.

    Examples
    --------
    >>> from queuesgd.harness.zoo import gpt
    >>> check_declared_args("gpt", gpt, {"layers": 2.0, "checkpoint": "yes", "vocab": 64})
    {'layers': 2, 'checkpoint': True, 'vocab': 64}
    >>> check_declared_args("gpt", gpt, {"layers": 2.5})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: model_args.layers: got 2.5; accepted: an integer (gpt takes ...)
    """
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature to read: the call will say
        return dict(kwargs)
    out = dict(kwargs)
    for name, value in kwargs.items():
        param = params.get(name)
        if param is None or param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            continue
        declared = _declared(param.annotation)
        if declared is None or (value is None and (declared[1] or param.default is None)):
            continue
        try:
            out[name] = _DECLARED[declared[0]](f"{field}.{name}", value)
        except InvalidParameterError as err:
            ann = param.annotation
            shown = ann if isinstance(ann, str) else inspect.formatannotation(ann)
            raise InvalidParameterError(
                err.field, err.got, f"{err.accepted} ({label} takes {name}: {shown})"
            ) from None
    return out


def check_named_model_args(
    model: Any, kwargs: Mapping[str, Any], field: str = "model_args"
) -> dict[str, Any]:
    """``kwargs`` checked against the parameters of a model the project names, importing no one else's code.

    For ``"queuesgd:KIND"`` and ``"queuesgd.MODULE:FACTORY"`` (a marked
    factory, e.g. ``queuesgd.harness.zoo:vit``) the names are bound to the
    factory's signature and the values checked by :func:`check_declared_args`
    here, so that a campaign spec's mistake is refused as the spec is read;
    any other name is returned unchanged (its module is imported, and its
    arguments checked the same way, when the model is built: :func:`model_factory_of`).

    Examples
    --------
    >>> check_named_model_args("queuesgd.harness.zoo:vit", {"layers": 6.0, "heads": 4})
    {'layers': 6, 'heads': 4}
    >>> check_named_model_args("mypkg.models:Net", {"layers": 2.5})   # not imported here
    {'layers': 2.5}
    >>> check_named_model_args("queuesgd:mlp", {"hidden": "64"}, "RealModel.model_args")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: RealModel.model_args.hidden: got '64'; accepted: an integer (...)
    """
    factory = _project_factory(model)
    return dict(kwargs) if factory is None else _bind(model, factory, kwargs, field)


def _project_factory(model: Any) -> Callable[..., Any] | None:
    """The factory ``model`` names if it is the project's (``queuesgd:KIND``, a marked ``queuesgd.*``)."""
    if not isinstance(model, str):
        return None
    mod_name, _, attr = model.partition(":")
    if mod_name == "queuesgd":
        from queuesgd.harness import models

        return getattr(models, attr) if attr in models.MODELS else None
    if not mod_name.startswith("queuesgd."):
        return None
    try:
        found = import_callable("model", model, MODEL_ACCEPTED)
    except InvalidParameterError:  # refused, naming the model, where it is built
        return None
    return found if factory_kind(found) == "model" else None


def _is_model_factory(nn: Any, obj: Any) -> bool:
    if isinstance(obj, type):
        return issubclass(obj, nn.Module)
    return factory_kind(obj) == "model" or _returns(obj, nn.Module)


def _returns(func: Any, base: type) -> bool:
    """Whether ``func``'s return annotation is a subclass of ``base``, read without evaluating code."""
    try:
        ann = inspect.get_annotations(func).get("return")
    except TypeError:  # not a function, class or module
        return False
    if isinstance(ann, str):  # ``from __future__ import annotations``: look the dotted name up, no eval
        parts = ann.strip().split(".")
        if not all(p.isidentifier() for p in parts):
            return False
        scope = {**vars(builtins), **getattr(func, "__globals__", {})}
        ann = scope.get(parts[0])
        for part in parts[1:]:
            ann = getattr(ann, part, None) if isinstance(ann, (type, types.ModuleType)) else None
    return isinstance(ann, type) and issubclass(ann, base)


def _what(obj: Any) -> str:
    if isinstance(obj, type):
        return f"the class {obj.__qualname__}"
    if callable(obj):
        return f"{type(obj).__name__} {getattr(obj, '__qualname__', '')}".rstrip()
    return f"a {type(obj).__name__}"


def _torchvision(spec: str, name: str, **kwargs: Any) -> Any:
    """``torchvision.models.get_model(name, weights=None, **kwargs)``, or a clear error saying why not."""
    require_torch()
    try:
        import torchvision.models as tvm
    except Exception as exc:  # ImportError, or torchvision's own operators failing to register
        raise InvalidParameterError(
            "model",
            spec,
            f"a torchvision model where torchvision loads beside this torch ({type(exc).__name__}: {exc}); "
            "or 'queuesgd:resnet18s', a ResNet-18-style model that needs no torchvision",
        ) from None
    try:
        return tvm.get_model(name, weights=None, **kwargs)
    except (ValueError, KeyError) as exc:
        with_args = ", with arguments its builder takes" if kwargs else ""
        raise InvalidParameterError(
            "model_args" if kwargs else "model",
            f"{spec} with {kwargs}" if kwargs else spec,
            f"a name torchvision.models.list_models() gives{with_args} ({exc})",
        ) from None


def import_callable(field: str, spec: str, accepted: str) -> Callable[..., Any]:
    """The callable ``"module.path:name"`` names (the module imported, the callable not called).

    Examples
    --------
    >>> import_callable("inputs", "math:sqrt", "a factory")(4.0)
    2.0
    >>> import_callable("inputs", "math:pi", "a factory")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    queuesgd.errors.InvalidParameterError: inputs: got 'math:pi'; accepted: a factory (not callable)
    """
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise InvalidParameterError(field, spec, accepted)
    try:
        found = importlib.import_module(mod_name)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:  # TypeError: a relative name
        raise InvalidParameterError(field, spec, f"{accepted} ({type(exc).__name__}: {exc})") from None
    if not callable(found):
        raise InvalidParameterError(field, spec, f"{accepted} (not callable)")
    return found


INPUTS_ACCEPTED = (
    "a factory inputs(batch_size, device) marked @queuesgd.inputs_factory or annotated '-> torch.Tensor', "
    "named 'module.path:callable'"
)


def inputs_factory_of(torch: Any, spec: str) -> Callable[..., Any]:
    """The batch factory ``spec`` names, checked (marked or annotated, two arguments) but not called."""
    found = import_callable("inputs", spec, INPUTS_ACCEPTED)
    if factory_kind(found) != "inputs" and not _returns(found, torch.Tensor):
        raise InvalidParameterError("inputs", spec, f"{INPUTS_ACCEPTED} (it is {_what(found)}: not called)")
    try:
        inspect.signature(found).bind(1, None)
    except TypeError as exc:
        raise InvalidParameterError("inputs", spec, f"{INPUTS_ACCEPTED} ({exc})") from None
    except ValueError:  # no signature to read
        pass
    return found
