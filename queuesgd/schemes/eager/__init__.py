"""The eager-SGD family: decentralized SGD with partial (solo or majority) all-reduce.

Modules: :mod:`~queuesgd.schemes.eager.eager` (:class:`EagerSGD`) and
:mod:`~queuesgd.schemes.eager.eager_chain` (its embedded Markov chain).
Only the shared modules of :mod:`queuesgd.schemes` are imported.
"""
