"""Token-level environments: a process's sequences read out at every position.

An episode is one sequence drawn from the process (:mod:`belieflens.envs.tokens.process`);
turn ``t`` is the read-out after its first ``t`` tokens (turn 0: the BOS alone). Each turn
has one probe, ``next-token``, whose outcomes are the process's symbols and whose oracle is
the exact next-token distribution; its query is in the ``tokens`` format (the symbols fed as
vocabulary ids, no chat template, no text), so the read-out is the model's next-token
distribution over the symbols, and every position of a sequence shares its prefix with the
previous one in the cache's radix tree. The exact belief over the hidden states (for
``coin-tokens``: the posterior mass of each bin of the bias) rides on the probe and is stored
as ``belief_state[query, state]``.

Every process registered in :mod:`belieflens.envs.tokens.process` is an environment of the
same name, with its parameters and its docstring (:func:`environment_of`).

Examples:
    >>> env = belieflens.envs.get("mess3", length=4)
    >>> episode = next(env.episodes(1, seed=0))
    >>> len(episode.turns), episode.turns[0].probes[0].labels
    (5, ('0', '1', '2'))
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from belieflens.envs.registry import register
from belieflens.envs.tokens.coin import HEADS, CoinTokens
from belieflens.envs.tokens.metrics import targets
from belieflens.envs.tokens.process import PROCESSES, ProcessClass, TokenProcess
from belieflens.envs.tokens.report import SECTIONS
from belieflens.episodes.base import Episode, Probe, Query, Turn
from belieflens.episodes.capabilities import ControlOf
from belieflens.episodes.statistics import counts, recency
from belieflens.report.section import SectionFn

PROBE = "next-token"
"""The one probe of a token-level environment."""

CHUNK = 4096
"""Episodes drawn and scored at once."""


class TokenEnvironment:
    """A token-level process as an environment (module docstring); each registered process
    has its subclass, made by :func:`environment_of`."""

    name: ClassVar[str]
    Params: ClassVar[type[Any]]
    process_class: ClassVar[ProcessClass]
    """The process's registered class."""
    sections: ClassVar[tuple[SectionFn, ...]] = SECTIONS
    """Sections of ``belieflens analyze`` for token-level environments."""
    readout_targets = staticmethod(targets)
    """The belief-geometry targets of a cache file of the process (the floors' targets)."""

    def __init__(self, params: Any) -> None:
        self._params = params
        self.process: TokenProcess = self.process_class(params)

    @property
    def params(self) -> Any:
        """The validated parameters."""
        return self._params

    def episodes(self, n: int, seed: int) -> Iterator[Episode]:
        """Yield ``n`` episodes; episode ``i`` is the process's sequence ``i`` of ``seed``
        (the same in any shard)."""
        for start in range(0, n, CHUNK):
            draw = self.process.sample(min(CHUNK, n - start), seed, start=start)
            beliefs = self.process.beliefs(draw.tokens)
            nexts = self.process.next_token(draw.tokens)
            for k in range(draw.tokens.shape[0]):
                truth = {key: float(np.asarray(v)[k]) for key, v in draw.truth.items()
                         if np.asarray(v).ndim == 1}
                yield self._episode(start + k, draw.tokens[k], beliefs[k], nexts[k], truth)

    def statistic_features(self, episode: Episode) -> dict[str, np.ndarray]:
        """The statistic baselines' features of ``episode``, each ``[turn, feature]``: the
        turn and the last ``k`` tokens (:func:`~belieflens.episodes.statistics.recency`), and
        for ``coin-tokens``, whose oracle conditions on them, the counts of heads and
        flips."""
        symbols = self.process.symbols
        revealed = [[symbols.index(t.observation)] if t.observation else []
                    for t in episode.turns]
        out = recency(revealed, len(symbols), ("token", "tokens"))
        if isinstance(self.process, CoinTokens):
            out = {"counts": counts(revealed, HEADS), **out}
        return out

    def _episode(self, index: int, tokens: np.ndarray, beliefs: np.ndarray,
                 nexts: np.ndarray, truth: dict[str, float]) -> Episode:
        symbols, states = self.process.symbols, self.process.states
        outcome = tuple(range(len(symbols)))
        words = [symbols[int(t)] for t in tokens]
        turns = []
        for t in range(len(words) + 1):
            query = Query(messages=(), prefill=" ".join(words[:t]), options=symbols,
                          outcome=outcome, format="tokens")
            probe = Probe(PROBE, symbols, tuple(float(x) for x in nexts[t]), (query,),
                          "single-turn", kind="next-token",
                          state=tuple(float(x) for x in beliefs[t]), state_labels=states)
            turns.append(Turn(index=t, observation=words[t - 1] if t else "",
                              messages={"single-turn": ()}, probes=(probe,)))
        return Episode(index=index, turns=tuple(turns), truth=truth)


def environment_of(process: ProcessClass) -> type[TokenEnvironment]:
    """The environment of a registered process, registered under the process's name: a
    :class:`TokenEnvironment` named ``<Process>Env`` with the process's ``Params``, its
    docstring (summary, examples) and any capability the process class declares
    (``control_of``: :class:`~belieflens.episodes.capabilities.ControlOf`); its reference
    page shows the process class (``reference``)."""
    attrs: dict[str, Any] = {
        "name": process.name, "Params": process.Params, "process_class": process,
        "__doc__": process.__doc__, "__module__": __name__,
        "__qualname__": f"{process.__name__}Env",
        "reference": f"{process.__module__}.{getattr(process, '__qualname__', process.__name__)}",
    }
    control = getattr(process, "control_of", None)
    if isinstance(control, ControlOf):
        attrs["control_of"] = control
    env: type[TokenEnvironment] = register(type(attrs["__qualname__"], (TokenEnvironment,),
                                                attrs))
    return env


ENVIRONMENTS: dict[str, type[TokenEnvironment]] = {
    name: environment_of(process) for name, process in PROCESSES.items()}
"""The environment of every registered process, by name (each also a name of this module)."""
globals().update({env.__name__: env for env in ENVIRONMENTS.values()})
