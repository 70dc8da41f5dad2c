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
from belieflens.envs.tokens.coin import CoinTokensParams
from belieflens.envs.tokens.named import HMMFileParams, Mess3Params, RRXORParams, Z1RParams
from belieflens.envs.tokens.process import TokenProcess, get, param_values
from belieflens.envs.tokens.report import SECTIONS, targets
from belieflens.episodes.base import Episode, Probe, Query, Turn
from belieflens.episodes.capabilities import ControlOf
from belieflens.report.section import SectionFn

PROBE = "next-token"
"""The one probe of a token-level environment."""

CHUNK = 4096
"""Episodes drawn and scored at once."""


class TokenEnvironment:
    """A token-level process as an environment (module docstring); subclasses name the
    process and its parameter record."""

    name: ClassVar[str]
    Params: ClassVar[type[Any]]
    sections: ClassVar[tuple[SectionFn, ...]] = SECTIONS
    """Sections of ``belieflens analyze`` for token-level environments."""
    readout_targets = staticmethod(targets)
    """The belief-geometry targets of a cache file of the process (the floors' targets)."""

    def __init__(self, params: Any) -> None:
        self._params = params
        self.process: TokenProcess = get(self.name, **param_values(params))

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


@register
class CoinTokensEnv(TokenEnvironment):
    """Coin flips as tokens (``H``, ``T``): the token form of ``coin-flip``, a Beta(a, b)
    bias and i.i.d. flips; the belief is the posterior over the bias in ``bins`` bins.

    The positive control of the headline study: a model that updates like the Bayesian
    predicts the next flip with the posterior mean (module docstring for the read-outs).

    Examples:
        >>> env = belieflens.envs.get("coin-tokens", length=3)
        >>> next(env.episodes(1, seed=0)).turns[0].probes[0].oracle   # the prior's predictive
        (0.5, 0.5)
    """

    name = "coin-tokens"
    Params = CoinTokensParams
    control_of = ControlOf("coin-flip", {"next-token": "next-flip"})


@register
class Mess3Env(TokenEnvironment):
    """Mess3 (x, alpha): a 3-state hidden Markov process whose beliefs form a fractal in the
    2-simplex (Shai et al., NeurIPS 2024); symbols 0, 1, 2, states A, B, C.

    Examples:
        >>> belieflens.envs.get("mess3").process.states
        ('A', 'B', 'C')
    """

    name = "mess3"
    Params = Mess3Params


@register
class RRXOREnv(TokenEnvironment):
    """RRXOR: two random bits then their XOR; beliefs over its 5 states are spread across
    layers and are not a function of the next-token prediction (Shai et al.).

    Examples:
        >>> len(belieflens.envs.get("rrxor").process.states)
        5
    """

    name = "rrxor"
    Params = RRXORParams


@register
class Z1REnv(TokenEnvironment):
    """Zero-one-random: ``0``, ``1``, then a random bit; beliefs over its 3 states.

    Examples:
        >>> belieflens.envs.get("z1r").process.symbols
        ('0', '1')
    """

    name = "z1r"
    Params = Z1RParams


@register
class HMMEnv(TokenEnvironment):
    """A hidden Markov process read from a file: a transition tensor ``T[token, from, to]``
    (``.npz`` or JSON); sequences start from the stationary distribution. Without ``path``,
    the packaged golden-mean process.

    Examples:
        >>> belieflens.envs.get("hmm").process.states   # the golden-mean example
        ('A', 'B')
    """

    name = "hmm"
    Params = HMMFileParams
