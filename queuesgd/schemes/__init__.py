"""Coordination schemes of distributed SGD: parameters in, models out."""

from queuesgd.schemes.async_ps import AsyncPS
from queuesgd.schemes.base import Scheme

#: CLI names of the schemes.
SCHEMES: dict[str, type[Scheme]] = {cls.key: cls for cls in (AsyncPS,)}

__all__ = ["AsyncPS", "Scheme", "SCHEMES"]
