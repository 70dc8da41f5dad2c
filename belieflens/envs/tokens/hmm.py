"""Hidden Markov processes given by a transition tensor ``T[symbol, from, to]``, with exact
oracles: the forward algorithm from the stationary distribution, the mixed-state
presentation, exact enumeration and the entropy rate.

``T[x, i, j]`` is the probability of emitting symbol ``x`` and moving to state ``j`` from
state ``i`` (the convention of Shai et al., NeurIPS 2024, and their ``epsilon-transformers``
code). The belief after tokens ``x_1..x_t`` is ``pi T[x_1] ... T[x_t]`` normalised, with
``pi`` the stationary distribution of the state chain ``sum_x T[x]``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jaxtyping import Float

from belieflens.envs.tokens.base import (
    MAX_ROWS,
    Draw,
    Enumeration,
    MixedStates,
    as_tokens,
    check_draw_args,
    check_int,
    entropy,
    episode_rng,
)
from belieflens.errors import ParameterError

ROW_TOLERANCE = 1e-6
"""How far a row of ``sum_x T[x]`` may be from summing to 1 (rows are then renormalised)."""

RATE_ROWS = 1 << 18
"""The most mixed states per level that :meth:`HMM.entropy_rate_bounds` expands."""

MERGE_DECIMALS = 12
"""Beliefs equal to this many decimals are one mixed state."""


def check_transition(tensor: object, what: str = "transition tensor") -> np.ndarray:
    """``tensor`` as a valid float64 ``T[symbol, from, to]``, rows renormalised; else one line
    (:class:`ParameterError`) naming what is wrong: not numeric, wrong rank, non-square,
    non-finite or negative entries, rows of ``sum_x T[x]`` that do not sum to 1."""
    try:
        arr = np.asarray(tensor, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError(
            f"{what} is not a numeric array (ragged or non-numbers): expected T[token, from, to]"
        ) from None
    if arr.ndim != 3:
        raise ParameterError(
            f"{what} has rank {arr.ndim} (shape {arr.shape}): expected rank 3, T[token, from, to]"
        )
    v, s, s2 = arr.shape
    if v < 1 or s < 1 or s != s2:
        raise ParameterError(
            f"{what} has shape {arr.shape}: expected [tokens >= 1, states, states] with the "
            "from and to axes of equal size"
        )
    if not np.isfinite(arr).all():
        raise ParameterError(f"{what} has non-finite entries (NaN or infinity)")
    if (arr < 0).any():
        idx = tuple(int(i) for i in np.argwhere(arr < 0)[0])
        raise ParameterError(
            f"{what} has negative entries, e.g. T{list(idx)} = {arr[idx]:g}: "
            "probabilities must be >= 0"
        )
    rows = arr.sum(axis=(0, 2))
    off = np.abs(rows - 1.0)
    if (off > ROW_TOLERANCE).any():
        i = int(np.argmax(off))
        raise ParameterError(
            f"{what}: rows of sum over tokens of T must sum to 1, but state {i}'s row sums to "
            f"{rows[i]:.6g}"
        )
    out: np.ndarray = arr / rows[None, :, None]
    return out


def stationary(state_chain: Float[np.ndarray, "state state"]) -> Float[np.ndarray, " state"]:
    """The unique stationary distribution of a row-stochastic matrix; one line
    (:class:`ParameterError`) if it is not unique (a reducible chain)."""
    s = state_chain.shape[0]
    a = state_chain.T - np.eye(s)
    sv = np.linalg.svd(a, compute_uv=False)
    null = int((sv < 1e-10).sum())
    if null != 1:
        raise ParameterError(
            f"the state chain sum_x T[x] has {null} stationary distributions: the process must "
            "have exactly one (an irreducible recurrent class)"
        )
    # solve (P^T - I) pi = 0 with sum(pi) = 1, least squares on the stacked system
    lhs = np.vstack([a, np.ones((1, s))])
    rhs = np.zeros(s + 1)
    rhs[-1] = 1.0
    pi = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
    pi = np.clip(pi, 0.0, None)
    out: np.ndarray = pi / pi.sum()
    return out


@dataclass(frozen=True, eq=False)
class HMM:
    """A hidden Markov process ``T[symbol, from, to]`` (validated) and its exact oracles.

    Sequences start from the stationary distribution ``pi``, so the process is stationary.
    """

    transition: Float[np.ndarray, "symbol state state"]
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "transition", check_transition(self.transition))
        self.transition.setflags(write=False)
        _ = self.pi  # validates that the stationary distribution is unique

    @property
    def vocab(self) -> int:
        """Number of symbols."""
        return int(self.transition.shape[0])

    @property
    def n_states(self) -> int:
        """Number of hidden states."""
        return int(self.transition.shape[1])

    @functools.cached_property
    def pi(self) -> Float[np.ndarray, " state"]:
        """The stationary distribution of the state chain ``sum_x T[x]``."""
        return stationary(self.transition.sum(axis=0))

    @functools.cached_property
    def emission(self) -> Float[np.ndarray, "state symbol"]:
        """``E[s, x] = sum_j T[x, s, j]``: the next-token distribution from state ``s``."""
        out: np.ndarray = self.transition.sum(axis=2).T
        return out

    @functools.cached_property
    def _joint_cdf(self) -> Float[np.ndarray, "state pair"]:
        # cdf over (symbol, next state) pairs from each state, pair = symbol * S + next
        joint = np.transpose(self.transition, (1, 0, 2)).reshape(self.n_states, -1)
        cdf = np.cumsum(joint, axis=1)
        cdf[:, -1] = 1.0 + 1e-12
        return cdf

    # ------------------------------------------------------------------------------ sampling
    def from_uniforms(self, u: Float[np.ndarray, "episode draw"]) -> Draw:
        """Sequences from uniforms in [0, 1): ``u[:, 0]`` draws the start state from ``pi``,
        ``u[:, t + 1]`` the pair (token ``t``, next state); ``L = u.shape[1] - 1`` tokens."""
        n, m = u.shape
        s = self.n_states
        pi_cdf = np.cumsum(self.pi)
        pi_cdf[-1] = 1.0 + 1e-12
        state = np.empty((n, m), dtype=np.int64)
        tokens = np.empty((n, m - 1), dtype=np.int64)
        state[:, 0] = np.searchsorted(pi_cdf, u[:, 0], side="right")
        cdf = self._joint_cdf
        for t in range(m - 1):
            rows = cdf[state[:, t]]
            pair = (rows <= u[:, t + 1, None]).sum(axis=1)
            tokens[:, t] = pair // s
            state[:, t + 1] = pair % s
        return Draw(tokens=tokens, truth={"state": state})

    def sample(self, n: int, seed: int, length: int, *, start: int = 0) -> Draw:
        """Episodes ``start..start+n-1`` of ``length`` tokens; episode ``i`` draws its
        ``length + 1`` uniforms from ``np.random.default_rng([seed, i])`` alone."""
        check_draw_args(n, seed, start)
        u = np.empty((n, length + 1))
        for k in range(n):
            u[k] = episode_rng(seed, start + k).random(length + 1)
        return self.from_uniforms(u)

    def sample_batch(self, n: int, rng: np.random.Generator, length: int) -> Draw:
        """``n`` sequences of ``length`` tokens from one generator."""
        return self.from_uniforms(rng.random((n, length + 1)))

    # ------------------------------------------------------------------------------ oracles
    def forward(self, tokens: object) -> Float[np.ndarray, "episode turn state"]:
        """The belief over hidden states after ``t`` tokens, ``t = 0..L`` (forward algorithm
        from ``pi``). A sequence of probability 0 is one line (:class:`ParameterError`)."""
        tok = as_tokens(tokens, self.vocab)
        n, length = tok.shape
        out = np.empty((n, length + 1, self.n_states))
        b = np.broadcast_to(self.pi, (n, self.n_states)).copy()
        out[:, 0] = b
        for t in range(length):
            b = np.einsum("ns,nsd->nd", b, self.transition[tok[:, t]])
            z = b.sum(axis=1)
            if (z <= 0).any():
                i = int(np.argmin(z))
                raise ParameterError(
                    f"sequence {i} has probability 0: token {t} "
                    f"({int(tok[i, t])}) cannot follow its prefix"
                )
            b = b / z[:, None]
            out[:, t + 1] = b
        return out

    def next_token(self, beliefs: Float[np.ndarray, "... state"]) -> np.ndarray:
        """The next-token distribution of each belief: ``belief @ E``."""
        out: np.ndarray = beliefs @ self.emission
        return out

    def next_tokens(self, beliefs: Float[np.ndarray, "... state"], horizon: int
                    ) -> Float[np.ndarray, "... word"]:
        """The joint distribution of the next ``horizon`` tokens from each belief:
        ``belief @ M`` with ``M[s, w] = e_s T[w_1] .. T[w_k] 1``, word ``w`` indexed in base
        ``vocab``, first token most significant (``horizon = 1`` is :meth:`next_token`);
        ``M`` is built once per horizon."""
        key = f"words{horizon}"
        if key not in self._cache:
            words = np.ones((self.n_states, 1))
            for _ in range(horizon):  # prepend one token to every word
                words = np.einsum("xsj,jw->sxw", self.transition, words).reshape(
                    self.n_states, -1)
            self._cache[key] = words
        out: np.ndarray = beliefs @ self._cache[key]
        return out

    def log_prob(self, tokens: object) -> Float[np.ndarray, " episode"]:
        """The exact log-probability of each whole sequence (``-inf`` where it is 0)."""
        tok = as_tokens(tokens, self.vocab)
        n, length = tok.shape
        b = np.broadcast_to(self.pi, (n, self.n_states)).copy()
        logp = np.zeros(n)
        for t in range(length):
            b = np.einsum("ns,nsd->nd", b, self.transition[tok[:, t]])
            z = b.sum(axis=1)
            with np.errstate(divide="ignore"):
                logp += np.log(z)
            b = b / np.where(z > 0, z, 1.0)[:, None]
        return logp

    # ------------------------------------------------------------------- mixed states
    def mixed_states(self, depth: int, start: np.ndarray | None = None,
                     *, merge: bool = True) -> tuple[MixedStates, ...]:
        """The mixed-state presentation from ``start`` (default ``pi``) to ``depth`` tokens.

        ``merge=False`` keeps one row per sequence (the exact enumeration)."""
        check_int("depth", depth, 0, 10_000)
        s = self.n_states
        b0 = self.pi if start is None else np.asarray(start, dtype=np.float64)
        beliefs = b0[None, :].copy()
        prob = np.ones(1)
        paths = np.zeros((1, 0), dtype=np.int64)
        mult = np.ones(1, dtype=np.int64)
        levels = [self._level(0, beliefs, prob, paths, mult)]
        for d in range(1, depth + 1):
            nxt = np.einsum("ks,xsd->kxd", beliefs, self.transition)  # [row, symbol, state]
            p_x = nxt.sum(axis=2)
            keep = p_x > 0
            rows, xs = np.nonzero(keep)
            if len(rows) > MAX_ROWS:
                raise ParameterError(
                    f"the exact enumeration at depth {d} has {len(rows)} rows, more than "
                    f"{MAX_ROWS}: use a smaller length"
                )
            child = nxt[rows, xs] / p_x[rows, xs, None]
            cprob = prob[rows] * p_x[rows, xs]
            cpaths = np.concatenate([paths[rows], xs[:, None]], axis=1)
            cmult = mult[rows]
            if merge:
                key = np.round(child, MERGE_DECIMALS) + 0.0  # +0.0: no negative zeros
                _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
                inv = inv.reshape(-1)
                child, cpaths = child[first], cpaths[first]
                cprob = np.bincount(inv, weights=cprob, minlength=len(first))
                cmult = np.bincount(inv, weights=cmult, minlength=len(first)).astype(np.int64)
            beliefs, prob, paths, mult = child.reshape(-1, s), cprob, cpaths, cmult
            levels.append(self._level(d, beliefs, prob, paths, mult))
        return tuple(levels)

    def _level(self, depth: int, beliefs: np.ndarray, prob: np.ndarray, paths: np.ndarray,
               mult: np.ndarray) -> MixedStates:
        return MixedStates(depth=depth, beliefs=beliefs, prob=prob,
                           next_token=self.next_token(beliefs), paths=paths, multiplicity=mult)

    def enumerate_sequences(self, length: int) -> Enumeration:
        """Every sequence of ``length`` tokens of positive probability (lexicographic order)."""
        last = self.mixed_states(length, merge=False)[-1]
        order = np.lexsort(last.paths.T[::-1]) if length else np.arange(1)
        return Enumeration(tokens=last.paths[order], prob=last.prob[order])

    def conditional_entropy(self, length: int, start: np.ndarray | None = None
                            ) -> Float[np.ndarray, " turn"]:
        """``H(X_t | X_0..X_{t-1})`` in nats for ``t = 0..length-1``, from ``start``."""
        return np.array([float(lv.prob @ entropy(lv.next_token))
                         for lv in self.mixed_states(max(length - 1, 0), start)][:length])

    def entropy_rate_bounds(self, tol: float = 1e-8, max_depth: int = 400
                            ) -> tuple[float, float]:
        """Lower and upper bounds on the entropy rate (nats/token), closer than ``tol`` where
        the enumeration allows.

        Upper: ``H(X_t | X_<t)`` from ``pi``, which decreases to the rate. Lower: the same
        given the initial hidden state, ``sum_s pi_s H(X_t | X_<t, S_0 = s)``, which
        increases to it (Cover & Thomas, Theorem 4.5.1). Both are computed level by level on
        the merged mixed states until they meet within ``tol``, ``max_depth`` is reached or a
        level would exceed :data:`RATE_ROWS` rows (Mess3 stops there, at depth 12, with the
        bounds 1.4e-7 apart; unifilar processes such as RRXOR and Z1R meet within ``tol``).
        """
        key = f"rate:{tol}:{max_depth}"
        if key in self._cache:
            out: tuple[float, float] = self._cache[key]
            return out
        starts = [self.pi, *np.eye(self.n_states)]
        fronts = [(b[None, :].copy(), np.ones(1)) for b in starts]
        upper, lower = np.inf, 0.0
        for _ in range(max_depth + 1):
            ent = [float(p @ entropy(self.next_token(b))) for b, p in fronts]
            upper = min(upper, ent[0])
            lower = max(lower, float(self.pi @ np.array(ent[1:])))
            if upper - lower <= tol:
                break
            grown = [self._grow(b, p) for b, p in fronts]
            if any(g is None for g in grown):
                break
            fronts = [g for g in grown if g is not None]
        self._cache[key] = (lower, upper)
        return lower, upper

    def _grow(self, beliefs: np.ndarray, prob: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray] | None:
        nxt = np.einsum("ks,xsd->kxd", beliefs, self.transition)
        p_x = nxt.sum(axis=2)
        rows, xs = np.nonzero(p_x > 0)
        if len(rows) > RATE_ROWS:
            return None
        child = nxt[rows, xs] / p_x[rows, xs, None]
        key = np.round(child, MERGE_DECIMALS) + 0.0
        _, first, inv = np.unique(key, axis=0, return_index=True, return_inverse=True)
        cprob = np.bincount(inv.reshape(-1), weights=prob[rows] * p_x[rows, xs],
                            minlength=len(first))
        return child[first], cprob

    def entropy_rate(self) -> float:
        """The entropy rate in nats/token: the midpoint of :meth:`entropy_rate_bounds` (within
        7e-8 of the exact value for Mess3, 5e-9 for processes whose mixed states merge)."""
        lo, hi = self.entropy_rate_bounds()
        return 0.5 * (lo + hi)
