"""What every coordination scheme offers: parameters in, models out."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from queuesgd.errors import NotRepresentable

if TYPE_CHECKING:
    from queuesgd.queueing import ClosedNetwork
    from queuesgd.workload import Cluster, Workload


class Scheme:
    """Base class of coordination schemes (small frozen dataclasses).

    A scheme builds each model that can represent it; a model that cannot
    raises :class:`~queuesgd.errors.NotRepresentable`.
    """

    #: Name used by the CLI (``--scheme``).
    key: ClassVar[str] = ""
    #: Methods ``predict`` accepts for this scheme, cheapest exact first.
    methods: ClassVar[tuple[str, ...]] = ()

    def queueing_network(self, workload: Workload, cluster: Cluster) -> ClosedNetwork:
        """The closed queueing network of this scheme."""
        raise NotRepresentable(f"{type(self).__name__} has no closed queueing network model")
