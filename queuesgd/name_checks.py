"""How a name given as a parameter is read: any case, surrounding spaces ignored, stored as listed.

The one rule for the named values of :class:`~queuesgd.HybridParallel` and
:class:`~queuesgd.hybrid_space.HybridSpace` (``schedule``, ``recompute``,
``layout``, the optimizer's name; ``tp_overlap`` and ``zero_overlap``, whose
words ``"all"``, ``"backward"``, ``"post"`` and the boolean spellings read the
same way): ``"1F1B"``, ``" Full "`` and ``"ADAM"`` are ``"1f1b"``, ``"full"``
and ``"adam"``, and where None is accepted the text ``"none"`` (any case) is
None. What is kept is the name as the code lists it, so equal
configurations compare equal whatever their spelling. Anything else -- a
misspelling, a number, an array, a NumPy boolean -- is refused with an
:class:`~queuesgd.errors.UnknownNameError` naming the field and the names.

Examples
--------
>>> name_choice("HybridParallel.schedule", " 1F1B ", ("1f1b", "gpipe", "interleaved"))
'1f1b'
>>> name_choice("HybridParallel.recompute", "NONE", (None, "full", "selective")) is None
True
>>> name_choice("schedule", "zb", ("1f1b", "gpipe"))
Traceback (most recent call last):
...
queuesgd.errors.UnknownNameError: schedule: got 'zb'; accepted: one of '1f1b', 'gpipe' (any case)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from queuesgd.errors import UnknownNameError

__all__ = ["name_choice", "name_key"]


def name_key(text: str) -> str:
    """The spelling names are matched by: ``text`` lower-cased, without surrounding spaces.

    Examples
    --------
    >>> name_key(" Head-Slots ")
    'head-slots'
    """
    return text.strip().lower()


def name_choice(field: str, value: Any, names: Iterable[str | None], *, also: str = "") -> Any:
    """The one of ``names`` that ``value`` spells (:func:`name_key`); ``"none"`` is None where None is listed.

    ``also`` is added to the refusal's list of what is accepted (another
    kind of value the caller reads itself, e.g. ``"or a number >= 0"``).

    Examples
    --------
    >>> name_choice("optimizer", "Adam", ("sgd", "momentum", "adam"))
    'adam'
    >>> name_choice("optimizer", 2, ("sgd", "adam"), also="or a number")
    Traceback (most recent call last):
    ...
    queuesgd.errors.UnknownNameError: optimizer: got 2; accepted: one of 'sgd', 'adam' (any case) or a number
    """
    options = tuple(names)
    if value is None and None in options:
        return None
    if isinstance(value, str):
        key = name_key(value)
        if key == "none" and None in options:
            return None
        for option in options:
            if isinstance(option, str) and name_key(option) == key:
                return option
    raise UnknownNameError(field, value, options, also=f"(any case) {also}".rstrip())
