"""``ds.bl``: the analysis of a cache file as methods of its Dataset.

Importing :mod:`belieflens.analysis` (or ``belieflens``) registers the accessor (a study of
two episodes below, so the decoders take two folds).

Examples:
    >>> ds = belieflens.open_cache("study.h5")
    >>> ds.bl.beliefs().dims
    ('delivery', 'probe', 'episode', 'turn', 'outcome')
    >>> ds.bl.beliefs(source="logit-lens").dims        # any Lens object too, e.g. a TunedLens
    ('delivery', 'probe', 'episode', 'turn', 'layer', 'outcome')
    >>> ds.bl.divergence("kl").name                   # KL(oracle || belief) per instance
    'kl'
    >>> ds.bl.summary(decoders=False)["tvd_mean"].dims  # TVD per layer and source
    ('delivery', 'probe', 'turn', 'layer', 'source')
    >>> ds.bl.decoders(probe="next-flip", n_folds=2).sizes["layer"]  # held-out, per layer
    31

Every method returns an xarray object with named dimensions and is a thin wrapper of a
function in :mod:`belieflens.analysis`; nothing is cached between calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np
import xarray as xr

from belieflens.analysis.baselines import Statistics, baselines
from belieflens.analysis.beliefs import lens_beliefs, output_beliefs, point_estimates
from belieflens.analysis.decoders.layers import decoder_layers
from belieflens.analysis.divergence import chebyshev, js, kl, l1, sym_kl, tvd
from belieflens.analysis.floor import floor
from belieflens.analysis.geometry import DEFAULT_LAGS, Target, geometry, target_of
from belieflens.analysis.own_answer import own_answer_floor, own_answer_values
from belieflens.analysis.position_bias import position_bias
from belieflens.analysis.summary import DECODER_FOLDS, decoder_tvd, summary
from belieflens.analysis.tables import unpad
from belieflens.analysis.transfer import Condition, transfer_floor, transfer_values
from belieflens.dims import OUTCOME, PROBE, QUERY
from belieflens.errors import ParameterError
from belieflens.lens import Lens
from belieflens.lens.apply import MultiToken
from belieflens.types import DebiasMethod

BeliefSource = Literal["output", "logit-lens"]
"""Where a belief is read: the model's output, or every layer through the logit lens (pass a
:class:`~belieflens.lens.Lens` object for any other lens, e.g. a tuned lens)."""

Metric = Literal["tvd", "kl", "sym_kl", "js", "l1", "chebyshev", "mae"]
"""How far a belief is from the oracle (:mod:`belieflens.analysis.divergence`); ``mae`` is the
absolute error of the point estimate (:func:`~belieflens.analysis.beliefs.point_estimates`)
per instance, whose mean is the MAE."""

BELIEF_SOURCES: tuple[BeliefSource, ...] = get_args(BeliefSource)
METRICS: tuple[Metric, ...] = get_args(Metric)

_DISTANCES: dict[str, Callable[[xr.DataArray, xr.DataArray, str], xr.DataArray]] = {
    "tvd": tvd, "kl": kl, "sym_kl": sym_kl, "js": js, "l1": l1, "chebyshev": chebyshev,
}


@xr.register_dataset_accessor("bl")  # type: ignore[no-untyped-call]
class BeliefLensAccessor:
    """Analysis methods on a cache Dataset (``ds.bl``); see the module docstring.

    Examples:
        >>> ds = belieflens.open_cache("study.h5")
        >>> ds.bl.beliefs().dims
        ('delivery', 'probe', 'episode', 'turn', 'outcome')
    """

    def __init__(self, ds: xr.Dataset) -> None:
        self._ds = ds

    def beliefs(
        self,
        source: BeliefSource | Lens = "output",
        *,
        method: DebiasMethod = "geometric",
        multi_token: MultiToken = "auto",
        chunk: int = 256,
    ) -> xr.DataArray:
        """Debiased beliefs over outcomes.

        ``source="output"``: the model's output, dims ``(delivery, probe, episode, turn,
        outcome)``; ``"logit-lens"`` or a :class:`~belieflens.lens.Lens` (checked
        against the file first): every layer, dims ``(delivery, probe, episode, turn, layer,
        outcome)``. ``method`` pools the Latin-square rotations; ``multi_token`` and
        ``chunk`` are passed to :func:`~belieflens.analysis.beliefs.lens_beliefs`.

        Args:
            source: ``"output"``, ``"logit-lens"`` or a lens object.
            method: ``"geometric"`` (mean log-prob over rotations) or ``"arithmetic"``.
            multi_token: ``"auto"`` scores whole continuations where the file has
                ``cont_resid``; ``"first-token"`` never.
            chunk: queries read at a time (lens sources).

        Returns:
            Probabilities over outcomes (NaN past a probe's outcomes), dims ``(delivery,
            probe, episode, turn, outcome)``, with ``layer`` before ``outcome`` for a lens.

        Examples:
            >>> ds.bl.beliefs().dims
            ('delivery', 'probe', 'episode', 'turn', 'outcome')
            >>> ds.bl.beliefs(source="logit-lens").dims
            ('delivery', 'probe', 'episode', 'turn', 'layer', 'outcome')
        """
        if isinstance(source, str):
            if source == "output":
                out = output_beliefs(self._ds, method=method)
                return out["belief"].assign_attrs(out.attrs)
            if source == "logit-lens":
                return lens_beliefs(self._ds, method=method, multi_token=multi_token,
                                    chunk=chunk)
            raise ParameterError(
                f"source = {source!r} is not allowed: one of {', '.join(BELIEF_SOURCES)} or a "
                "Lens"
            )
        source.check_file(self._ds)
        return lens_beliefs(self._ds, method=method, lens=source, multi_token=multi_token,
                            chunk=chunk)

    def oracle(self) -> xr.DataArray:
        """The exact Bayesian distribution per instance, dims ``(delivery, probe, episode,
        turn, outcome)`` (NaN where a probe has none or past its outcomes).

        Examples:
            >>> prior = ds.bl.oracle().sel(delivery="single-turn", probe="next-flip",
            ...                            episode=0, turn=0)
            >>> prior.values[:2].tolist()
            [0.5, 0.5]
        """
        return output_beliefs(self._ds)["oracle"]

    def labels(self) -> xr.DataArray:
        """Each probe's outcome labels, dims ``(probe, outcome)`` (``""`` past its outcomes).

        Examples:
            >>> ds.bl.labels().sel(probe="next-flip").values[:2].tolist()
            ['heads', 'tails']
        """
        return output_beliefs(self._ds)["outcome_label"]

    def divergence(
        self,
        metric: Metric = "tvd",
        *,
        source: BeliefSource | Lens = "output",
        method: DebiasMethod = "geometric",
        multi_token: MultiToken = "auto",
        chunk: int = 256,
    ) -> xr.DataArray:
        """How far the beliefs of ``source`` are from the oracle, per instance (and layer).

        Distances take the oracle first (``kl`` = KL(oracle ‖ belief)) and ignore outcomes
        past each probe's ``K``; NaN where a probe has no oracle. Dims: those of
        :meth:`beliefs` without ``outcome``; the result is named after the metric.

        Args:
            metric: ``tvd``, ``kl``, ``sym_kl``, ``js``, ``l1``, ``chebyshev`` or ``mae``
                (the absolute error of the point estimate).
            source: as for :meth:`beliefs`.
            method: as for :meth:`beliefs`.
            multi_token: as for :meth:`beliefs`.
            chunk: as for :meth:`beliefs`.

        Returns:
            Dims ``(delivery, probe, episode, turn)``, with ``layer`` for a lens.

        Examples:
            >>> kl = ds.bl.divergence("kl")
            >>> kl.name, kl.dims
            ('kl', ('delivery', 'probe', 'episode', 'turn'))
            >>> ds.bl.divergence("tvd", source="logit-lens").dims[-1]
            'layer'
        """
        if metric not in METRICS:
            raise ParameterError(f"metric = {metric!r} is not allowed: one of {', '.join(METRICS)}")
        out = output_beliefs(self._ds, method=method)
        belief = self.beliefs(source, method=method, multi_token=multi_token, chunk=chunk)
        if metric == "mae":
            est = point_estimates(xr.Dataset({
                "belief": belief, "oracle": out["oracle"], "outcome_label": out["outcome_label"],
            }))
            res = abs(est["estimate"] - est["oracle_estimate"])
        else:
            labels = out["outcome_label"]
            res = _DISTANCES[metric](unpad(out["oracle"], labels), unpad(belief, labels),
                                     OUTCOME)
        dims = [d for d in belief.dims if d != OUTCOME]
        res = res.transpose(*dims)
        res.name = metric
        res.attrs = {"metric": metric, "source": _source_name(source), "debias": method}
        return res

    def summary(self, lens: Lens | None = None, **kwargs: Any) -> xr.Dataset:
        """:func:`belieflens.analysis.summary.summary` of this file (TVD to the oracle per
        delivery, probe, turn, layer and source); keyword arguments are passed on.

        Args:
            lens: the tuned-lens column's lens (``None``: that column is NaN).
            **kwargs: ``method``, ``decoders`` (``False`` skips the decoder fits), ``seed``, ...

        Returns:
            Variables ``tvd_mean``, ``tvd_sem`` and ``n`` (episodes with a value), dims
            ``(delivery, probe, turn, layer, source)``; ``source`` is ``output``,
            ``logit-lens``, ``tuned-lens`` or ``decoder``.

        Examples:
            >>> table = ds.bl.summary(decoders=False)
            >>> table["tvd_mean"].dims
            ('delivery', 'probe', 'turn', 'layer', 'source')
            >>> table["source"].values.tolist()
            ['output', 'logit-lens', 'tuned-lens', 'decoder']
        """
        return summary(self._ds, lens, **kwargs)

    def position_bias(self, *, method: DebiasMethod = "geometric") -> xr.Dataset:
        """:func:`belieflens.analysis.position_bias.position_bias` of this file: how far each
        rotation's belief is from the debiased one, and each answer position's excess.

        Args:
            method: how rotations are pooled into the debiased belief.

        Returns:
            ``rotation_tvd_mean``, ``rotation_tvd_sem``, ``rotation_n`` (dims ``delivery,
            probe, rotation``) and ``position_excess_mean``, ``position_excess_sem`` (dims
            ``delivery, probe, option``).

        Examples:
            >>> ds.bl.position_bias()["rotation_tvd_mean"].dims
            ('delivery', 'probe', 'rotation')
        """
        return position_bias(self._ds, method=method)

    def decoders(
        self,
        target: str | xr.DataArray = "oracle",
        *,
        probe: str | None = None,
        seed: int = 0,
        **kwargs: Any,
    ) -> xr.Dataset:
        """Held-out scores of linear decoders per layer, read from the residuals at the answer
        position (the "linear probes" of the interpretability literature; in belieflens a
        *probe* is a belief question).

        ``target="oracle"``: a softmax decoder of the oracle distribution of one belief
        question (``probe``; needed when the file has several), scored by held-out
        KL(oracle ‖ decoder). Any other name is a ``(query,)`` variable of the file (e.g. a
        ``truth_*`` value) for a ridge decoder over the rows of ``probe`` (all rows if
        ``None``); a DataArray over ``query`` is used as is. Folds are grouped by episode and
        seeded by ``seed``; keyword arguments go to
        :func:`~belieflens.analysis.decoders.decoder_layers`. Returns a Dataset over ``layer``.

        Args:
            target: ``"oracle"``, the name of a ``(query,)`` variable, or a DataArray over
                ``query``.
            probe: the probe question whose rows are used.
            seed: seeds the folds.
            **kwargs: ``n_folds`` (default 5: the file needs as many episodes), ``lam``, ...

        Returns:
            Held-out scores and their controls per layer, dims ``(layer,)``.

        Examples:
            >>> scores = ds.bl.decoders(probe="next-flip", n_folds=2)
            >>> scores.sizes["layer"]
            31
        """
        ds = self._ds
        names = [str(p) for p in np.unique(np.asarray(ds[PROBE].values).astype(str))]
        if probe is not None and probe not in names:
            raise ParameterError(f"probe = {probe!r} is not in this file: {', '.join(names)}")
        if isinstance(target, str) and target == "oracle" and probe is None:
            if len(names) != 1:
                raise ParameterError(
                    f"this file has probes {', '.join(names)}: pass probe= to pick one"
                )
            probe = names[0]
        rows = (np.arange(ds.sizes[QUERY]) if probe is None
                else np.flatnonzero(np.asarray(ds[PROBE].values).astype(str) == probe))
        sub = ds.isel({QUERY: rows})
        if isinstance(target, xr.DataArray):
            tgt = target.isel({QUERY: rows})
        elif target == "oracle":
            k = int(np.max((np.asarray(sub["outcome_label"].values).astype(str) != "")
                           .sum(axis=1)))
            tgt = sub["oracle"].isel({OUTCOME: slice(0, k)})
        else:
            tgt = sub[target]
        return decoder_layers(sub["resid"], tgt, np.random.default_rng(seed), **kwargs)

    def geometry(self, *, target: str | Target = "belief_state", seed: int = 0,
                 n_folds: int = 5, lags: tuple[int, ...] = DEFAULT_LAGS) -> xr.Dataset:
        """The belief-state geometry of a token-level file (Shai et al.): held-out R² and
        MSE of an affine map from the residual to the belief, per layer and on all layers
        concatenated, beside a permutation null, recent-token baselines and the model's own
        next-token distribution (:func:`~belieflens.analysis.geometry.geometry`).

        Args:
            target: ``belief_state`` (the hidden-state belief), ``oracle`` (the
                next-token distribution; for ``coin-tokens`` the posterior mean) or a
                :class:`~belieflens.analysis.geometry.Target`.
            seed: seeds the folds (whole episodes) and the permutations.
            n_folds: held-out folds.
            lags: the ``k`` of the last-``k``-token baselines.

        Returns:
            A Dataset over ``layer`` and ``lag`` (and scalars for the concatenation).

        Examples:
            Not run here (the doc study is a text environment; a token-level file comes
            from e.g. ``belieflens extract mess3 --model mess3-toy``):

            >>> belieflens.open_cache("mess3.h5").bl.geometry()["r2"].dims  # doctest: +SKIP
            ('layer',)
        """
        return geometry(self._ds, np.random.default_rng(seed), target=target,
                        n_folds=n_folds, lags=lags)

    def baselines(self, statistics: Statistics, *, seed: int = 0,
                  decoders: bool = True) -> xr.Dataset:
        """The statistic baselines beside the decoders: each baseline's held-out TVD to the
        oracle, fitted with the decoders' estimator and folds on the features the file's
        environment declares, and (``decoders``) the decoders' selectivity against the best
        baseline per layer (:func:`~belieflens.analysis.baselines.baselines`).

        Args:
            statistics: each baseline's features per read-out
                (``belieflens.envs.statistic_features(ds)``).
            seed: seeds the folds (the decoders' of ``ds.bl.summary(seed=...)``).
            decoders: fit the decoders too, for their selectivity.

        Returns:
            A Dataset: ``tvd_mean``, ``tvd_sem`` over ``(delivery, probe, turn, baseline)``;
            with ``decoders`` ``decoder_tvd``, ``selectivity`` over ``(delivery, probe,
            layer)`` and ``best`` over ``(delivery, probe)``.

        Examples:
            Not run here (the features rebuild the study's episodes, and a fit takes 3
            episodes or more):

            >>> stats = belieflens.envs.statistic_features(ds)          # doctest: +SKIP
            >>> ds.bl.baselines(stats)["selectivity"].dims             # doctest: +SKIP
            ('delivery', 'probe', 'layer')
        """
        rows = (decoder_tvd(self._ds, np.random.default_rng(seed), n_folds=DECODER_FOLDS)
                if decoders else None)
        return baselines(self._ds, statistics, seed=seed, decoder=rows)

    def floor(self, controls: Sequence[xr.Dataset | str | os.PathLike[str]], *,
              targets: Mapping[str, Target] | None = None, decoders: bool = True,
              seed: int = 0, method: DebiasMethod = "geometric",
              statistics: Statistics | None = None) -> xr.Dataset:
        """Every lens, decoder and geometry read-out of this study per layer beside its
        floor, the same read-out of untrained ``controls`` (files or Datasets of the same
        study, ``extract --init random:SEED``, two or more), and beside its statistic
        baselines: the trained value, each control's (dim ``control``, coordinate ``seed``),
        the floor's mean, min and max, each baseline's value (dim ``baseline``), and the
        selectivity against the floor, the best baseline and the larger of the two, with
        intervals over episodes and seeds corrected across layers
        (:func:`~belieflens.analysis.floor.floor`).

        Args:
            controls: the control files.
            targets: geometry targets by name (default: the file's ``belief_state``, if
                any; ``belieflens.envs.readout_targets(ds)`` gives the process's own).
            decoders: include the decoders (their fits are the cost).
            seed: seeds the folds and the bootstrap.
            method: how rotations are pooled.
            statistics: the statistic baselines' features
                (``belieflens.envs.statistic_features(ds)``; none: no baselines).

        Returns:
            A Dataset over ``source``, ``layer``, ``control`` and ``baseline``.

        Examples:
            Not run here (the controls are extracted with ``--init random:0`` and
            ``random:1``):

            >>> ds.bl.floor(["random0.h5", "random1.h5"])["selectivity"].dims  # doctest: +SKIP
            ('source', 'layer')
        """
        if targets is None:
            targets = ({"belief": target_of(self._ds, "belief_state")}
                       if "belief_state" in self._ds.variables else {})
        return floor(self._ds, controls, method=method, decoders=decoders, seed=seed,
                     targets=targets, statistics=statistics)

    def transfer(self, other: xr.Dataset | None = None, *,
                 deliveries: tuple[str | None, str | None] = (None, None),
                 controls: Sequence[xr.Dataset] = (), other_controls: Sequence[xr.Dataset] = (),
                 statistics: Statistics | None = None,
                 other_statistics: Statistics | None = None, seed: int = 0) -> xr.Dataset:
        """Transfer decoders: this file's decoders of the oracle (analyze's: the one
        estimator, its folds from ``seed``) fitted on its rows of ``deliveries[0]`` and scored
        on ``other``'s rows of ``deliveries[1]`` (``other``: another condition of the study,
        e.g. its paraphrase; ``None``: this file, e.g. ``("multi-turn", "single-turn")``),
        each read-out held out by episode (:mod:`belieflens.analysis.transfer`).

        Args:
            other: the test condition's file (``None``: this one).
            deliveries: the training and test sides' deliveries (``None``: every delivery).
            controls: untrained controls of this study (``--init random:SEED``); with them
                the result is the transfer beside its floor.
            other_controls: ``other``'s controls of the same networks.
            statistics: this file's statistic baselines' features
                (``belieflens.envs.statistic_features(ds)``), transferred where ``other``'s
                declare the same.
            other_statistics: ``other``'s.
            seed: seeds the folds (and the bootstrap).

        Returns:
            Without ``controls``: ``transfer`` and ``within`` (the decoder fitted on the test
            condition itself), TVD to the test oracle, dims ``(delivery, probe, episode, turn,
            layer)``, and ``baseline_transfer``, ``baseline_within`` over ``baseline``. With
            them: the floor Dataset of the sources ``transfer`` and ``within`` (dims
            ``source``, ``layer``, ``control``, ``baseline``;
            :func:`~belieflens.analysis.transfer.transfer_floor`).

        Examples:
            Not run here (a transfer needs 3 episodes or more):

            >>> ds.bl.transfer(deliveries=("multi-turn", "single-turn"))["transfer"].dims
            ... # doctest: +SKIP
            ('delivery', 'probe', 'episode', 'turn', 'layer')
        """
        train = Condition(self._ds, deliveries[0], statistics or {})
        test = Condition(other if other is not None else self._ds, deliveries[1],
                         (other_statistics if other is not None else statistics) or {})
        if not controls:
            return transfer_values(train, test, seed=seed)
        named = [(f"control {i}", c) for i, c in enumerate(controls)]
        theirs = [(f"other control {i}", c) for i, c in enumerate(other_controls)]
        return transfer_floor(train, test, controls=named, test_controls=theirs, seed=seed)

    def own_answer(self, *, controls: Sequence[xr.Dataset] = (),
                   statistics: Statistics | None = None, seed: int = 0,
                   method: DebiasMethod = "geometric") -> xr.Dataset:
        """Own-answer decoders: the model's own debiased answer decoded from each layer's
        residual (analyze's estimator and folds, held-out R²), beside the statistic baselines
        fitted to the same answer (:mod:`belieflens.analysis.own_answer`).

        Args:
            controls: untrained controls of this study; with them the result is the
                own-answer decoders beside their floor (the same target decoded from the
                controls' residuals).
            statistics: the statistic baselines' features
                (``belieflens.envs.statistic_features(ds)``).
            seed: seeds the folds (and the bootstrap).
            method: how rotations are pooled into the answer.

        Returns:
            Without ``controls``: ``r2 (probe, layer)`` and ``baseline_r2 (probe,
            baseline)``. With them: the floor Dataset of the sources ``own answer: PROBE``
            (:func:`~belieflens.analysis.own_answer.own_answer_floor`).

        Examples:
            Not run here (a fit takes 3 episodes or more):

            >>> ds.bl.own_answer()["r2"].dims                       # doctest: +SKIP
            ('probe', 'layer')
        """
        if not controls:
            return own_answer_values(self._ds, seed=seed, method=method,
                                     statistics=statistics)
        return own_answer_floor(self._ds, [(f"control {i}", c) for i, c in enumerate(controls)],
                                seed=seed, method=method, statistics=statistics)


def _source_name(source: BeliefSource | Lens) -> str:
    return source if isinstance(source, str) else source.name
