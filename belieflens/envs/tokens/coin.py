"""``coin-tokens``: Beta-Bernoulli coin flips as tokens, the token form of ``coin-flip``.

Each sequence draws a bias ``theta ~ Beta(a, b)`` and flips ``length`` times. Symbol 0 is
heads (``H``), 1 is tails (``T``): the order of ``coin-flip``'s next-flip oracle
(P(heads), P(tails)). The belief is the Beta posterior over ``theta``, stored as its exact
mass in each of ``bins`` equal-width bins of [0, 1]; :meth:`CoinTokens.posterior_mean` gives
its mean. The next-token distribution is the posterior predictive. The process is
exchangeable, so the mixed states at depth ``t`` are indexed by the count of heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from jaxtyping import Float, Int

from belieflens.envs.tokens.base import (
    MAX_ROWS,
    Draw,
    Enumeration,
    MixedStates,
    as_tokens,
    check_draw_args,
    check_float,
    check_int,
    entropy,
    episode_rng,
    token_process,
)
from belieflens.episodes.capabilities import ControlOf
from belieflens.episodes.params import param
from belieflens.errors import ParameterError

HEADS, TAILS = 0, 1
"""Symbol ids."""

MAX_LENGTH = 4096
"""The longest sequence a parameter may ask for."""


@dataclass(frozen=True)
class CoinTokensParams:
    """Parameters of ``coin-tokens``."""

    a: float = param(1.0, "Beta prior pseudo-count of heads (> 0)")
    b: float = param(1.0, "Beta prior pseudo-count of tails (> 0)")
    length: int = param(32, "flips per sequence (>= 1)")
    bins: int = param(10, "equal-width bins of theta in which the posterior is stored (2..1000)")

    def __post_init__(self) -> None:
        check_float("a", self.a, 0.0, 1e6, open_lo=True)
        check_float("b", self.b, 0.0, 1e6, open_lo=True)
        check_int("length", self.length, 1, MAX_LENGTH)
        check_int("bins", self.bins, 2, 1000)


@token_process("coin-tokens")
class CoinTokens:
    """Coin flips as tokens (``H``, ``T``): the token form of ``coin-flip``, a Beta(a, b)
    bias and i.i.d. flips; the belief is the posterior over the bias in ``bins`` bins.

    The positive control of the headline study: a model that updates like the Bayesian
    predicts the next flip with the posterior mean (:mod:`belieflens.envs.tokens.env` for the
    read-outs). Beta-Bernoulli flips with the exact posterior at every position (module
    docstring).

    Examples:
        >>> env = belieflens.envs.get("coin-tokens", length=3)
        >>> next(env.episodes(1, seed=0)).turns[0].probes[0].oracle   # the prior's predictive
        (0.5, 0.5)
    """

    name: str
    Params: ClassVar[type[CoinTokensParams]] = CoinTokensParams
    control_of: ClassVar[ControlOf] = ControlOf("coin-flip", {"next-token": "next-flip"})
    """Its environment is the positive control of ``coin-flip``'s next-flip probe."""

    def __init__(self, params: CoinTokensParams) -> None:
        self._params = params
        self._edges = np.linspace(0.0, 1.0, params.bins + 1)

    def __repr__(self) -> str:
        return f"CoinTokens({self._params!r})"

    @property
    def params(self) -> CoinTokensParams:
        """The validated parameters."""
        return self._params

    @property
    def symbols(self) -> tuple[str, ...]:
        """``("H", "T")``: heads is symbol 0."""
        return ("H", "T")

    @property
    def states(self) -> tuple[str, ...]:
        """The bins of theta, e.g. ``0.00 to 0.10`` (the labels of ``coin-flip``'s bias
        probe)."""
        e = self._edges
        return tuple(f"{e[i]:.2f} to {e[i + 1]:.2f}" for i in range(self._params.bins))

    @property
    def length(self) -> int:
        """Flips per sequence by default."""
        return self._params.length

    def _len(self, length: int | None) -> int:
        if length is None:
            return self._params.length
        check_int("length", length, 0, MAX_LENGTH)
        return int(length)

    # ------------------------------------------------------------------------------ sampling
    def sample(self, n: int, seed: int, *, start: int = 0, length: int | None = None) -> Draw:
        """Episodes ``start .. start + n - 1``; episode ``i`` uses
        ``np.random.default_rng([seed, i])`` exactly as ``coin-flip`` does (theta, then the
        flips), so its flips equal ``coin-flip``'s episode ``i`` with ``turns = length``."""
        check_draw_args(n, seed, start)
        length = self._len(length)
        p = self._params
        tokens = np.empty((n, length), dtype=np.int64)
        theta = np.empty(n)
        for k in range(n):
            rng = episode_rng(seed, start + k)
            theta[k] = float(rng.beta(p.a, p.b))
            tokens[k] = np.where(rng.random(length) < theta[k], HEADS, TAILS)
        return Draw(tokens=tokens, truth={"theta": theta})

    def sample_batch(self, n: int, rng: np.random.Generator, *,
                     length: int | None = None) -> Draw:
        """``n`` sequences from one generator, vectorised (for training)."""
        check_int("n", n, 0, 1 << 40)
        length = self._len(length)
        theta = rng.beta(self._params.a, self._params.b, size=n)
        tokens = np.where(rng.random((n, length)) < theta[:, None], HEADS, TAILS)
        return Draw(tokens=tokens.astype(np.int64), truth={"theta": theta})

    # ------------------------------------------------------------------------------ oracles
    def counts(self, tokens: object) -> tuple[Int[np.ndarray, "episode turn"],
                                              Int[np.ndarray, " turn"]]:
        """``(heads, seen)``: heads among the first ``t`` flips and ``t``, for ``t = 0..L``."""
        tok = as_tokens(tokens, 2)
        n, length = tok.shape
        heads = np.zeros((n, length + 1), dtype=np.int64)
        np.cumsum(tok == HEADS, axis=1, out=heads[:, 1:])
        return heads, np.arange(length + 1)

    def posterior_mean(self, tokens: object) -> Float[np.ndarray, "episode turn"]:
        """The posterior mean of theta after ``t`` flips, ``(a + heads) / (a + b + t)``."""
        heads, seen = self.counts(tokens)
        p = self._params
        out: np.ndarray = (p.a + heads) / (p.a + p.b + seen[None, :])
        return out

    def next_token(self, tokens: object) -> Float[np.ndarray, "episode turn symbol"]:
        """The posterior predictive (P(heads), P(tails)) of flip ``t``, ``t = 0..L``."""
        m = self.posterior_mean(tokens)
        return np.stack([m, 1.0 - m], axis=-1)

    def bin_mass(self, heads: np.ndarray, seen: np.ndarray) -> Float[np.ndarray, "... state"]:
        """The exact Beta(a + heads, b + seen - heads) mass of each bin (broadcasting)."""
        from scipy import special  # imported on use: it is slow to import

        p = self._params
        alpha = (p.a + np.asarray(heads, dtype=np.float64))[..., None]
        beta = (p.b + np.asarray(seen, dtype=np.float64) - np.asarray(heads))[..., None]
        cdf = special.betainc(alpha, beta, self._edges)
        mass = np.diff(cdf, axis=-1)
        out: np.ndarray = mass / mass.sum(axis=-1, keepdims=True)
        return out

    def beliefs(self, tokens: object) -> Float[np.ndarray, "episode turn state"]:
        """The posterior over theta after ``t`` flips as exact bin masses, ``t = 0..L``."""
        heads, seen = self.counts(tokens)
        length = heads.shape[1] - 1
        # one table over (t, heads) instead of one betainc call per read-out
        tt, hh = np.meshgrid(np.arange(length + 1), np.arange(length + 1), indexing="ij")
        table = self.bin_mass(np.minimum(hh, tt), tt)
        out: np.ndarray = table[seen[None, :], heads]
        return out

    def log_prob(self, tokens: object) -> Float[np.ndarray, " episode"]:
        """The exact log-probability of each whole sequence: ``B(a + h, b + L - h) / B(a, b)``."""
        from scipy import special

        heads, seen = self.counts(tokens)
        p = self._params
        h, length = heads[:, -1], seen[-1]
        out: np.ndarray = special.betaln(p.a + h, p.b + length - h) - special.betaln(p.a, p.b)
        return out

    def _count_prob(self, depth: int) -> Float[np.ndarray, " row"]:
        """P(heads = h after ``depth`` flips), ``h = 0..depth`` (beta-binomial)."""
        from scipy import special

        p = self._params
        h = np.arange(depth + 1)
        log_choose = (special.gammaln(depth + 1) - special.gammaln(h + 1)
                      - special.gammaln(depth - h + 1))
        logp = log_choose + special.betaln(p.a + h, p.b + depth - h) - special.betaln(p.a, p.b)
        prob = np.exp(logp)
        out: np.ndarray = prob / prob.sum()
        return out

    def mixed_states(self, depth: int) -> tuple[MixedStates, ...]:
        """The mixed states by count: at depth ``t`` one row per heads count ``h = 0..t``, of
        probability beta-binomial(h; t, a, b); its path is ``h`` heads then ``t - h`` tails."""
        from scipy import special

        check_int("depth", depth, 0, MAX_LENGTH)
        p = self._params
        out = []
        for t in range(depth + 1):
            h = np.arange(t + 1)
            mean = (p.a + h) / (p.a + p.b + t)
            paths = np.where(np.arange(t)[None, :] < h[:, None], HEADS, TAILS).astype(np.int64)
            mult = np.rint(np.exp(special.gammaln(t + 1) - special.gammaln(h + 1)
                                  - special.gammaln(t - h + 1))).astype(np.int64)
            out.append(MixedStates(
                depth=t, beliefs=self.bin_mass(h, np.full_like(h, t)), prob=self._count_prob(t),
                next_token=np.stack([mean, 1.0 - mean], axis=-1), paths=paths, multiplicity=mult,
            ))
        return tuple(out)

    def enumerate_sequences(self, length: int | None = None) -> Enumeration:
        """All ``2**length`` sequences (lexicographic), each of probability
        ``B(a + h, b + length - h) / B(a, b)``. Up to :data:`MAX_ROWS` sequences; for longer
        ones use :meth:`mixed_states`, which enumerates by count."""
        length = self._len(length)
        if 2**length > MAX_ROWS:
            raise ParameterError(
                f"enumerating coin-tokens of length {length} gives 2**{length} sequences, more "
                f"than {MAX_ROWS}: use mixed_states(), which enumerates by count"
            )
        idx = np.arange(2**length, dtype=np.int64)
        shifts = np.arange(length - 1, -1, -1, dtype=np.int64)
        tokens = (idx[:, None] >> shifts[None, :]) & 1
        return Enumeration(tokens=tokens, prob=np.exp(self.log_prob(tokens)))

    def optimal_cross_entropy(self, length: int | None = None) -> Float[np.ndarray, " turn"]:
        """``H(X_t | X_<t)`` in nats for ``t = 0..length - 1``: the posterior predictive's
        expected entropy, summed over the heads count."""
        length = self._len(length)
        p = self._params
        out = np.empty(length)
        for t in range(length):
            mean = (p.a + np.arange(t + 1)) / (p.a + p.b + t)
            out[t] = self._count_prob(t) @ entropy(np.stack([mean, 1.0 - mean], axis=-1))
        return out

    def entropy_rate(self) -> float:
        """``E[h(theta)]`` under the prior (nats/token), in closed form:
        ``a/(a+b) (psi(a+b+1) - psi(a+1)) + b/(a+b) (psi(a+b+1) - psi(b+1))``."""
        from scipy import special

        a, b = self._params.a, self._params.b
        psi = special.digamma
        return float(a / (a + b) * (psi(a + b + 1) - psi(a + 1))
                     + b / (a + b) * (psi(a + b + 1) - psi(b + 1)))

