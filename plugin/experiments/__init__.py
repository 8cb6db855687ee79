"""Offline ranking experiments: synthetic benchmarks, scorers and weight fitting.

The notebooks in ``notebooks/`` call these; nothing here is needed at serving time. The
ranking metrics are ``affect_memory.metrics``'s (the benchmarks' and the tests' too),
re-exported here. The plotting helpers live in ``affect_memory.experiments.plots`` and are not
imported here, so using the rest does not import matplotlib (the ``dev`` extra's).
"""

from affect_memory.experiments.data import LabelledQuery, QueryBatch
from affect_memory.experiments.fitting import (
    DEFAULT_SEARCH,
    FitResult,
    FitStep,
    fit_weights,
    split_queries,
)
from affect_memory.experiments.pools import LabelledPools, PoolQuery, label_pools, labelled_pool
from affect_memory.experiments.report import metrics_table
from affect_memory.experiments.scorers import (
    additive_scores,
    kernel_breakdown,
    kernel_scorer,
    kernel_scores,
    significance_sweep,
    similarity_scores,
    standard_scorers,
)
from affect_memory.experiments.settings_fitting import (
    SettingsFit,
    SettingsStep,
    fit_settings,
    split_users,
)
from affect_memory.experiments.synthetic import (
    REGIME_NAMES,
    REGIMES,
    SyntheticConfig,
    generate_from_weights,
    generate_regime,
)
from affect_memory.metrics import (
    RankingMetrics,
    evaluate,
    evaluate_scorers,
    mean_reciprocal_rank,
    ranks,
    recall_at_k,
)

__all__ = [
    "DEFAULT_SEARCH",
    "REGIMES",
    "REGIME_NAMES",
    "FitResult",
    "FitStep",
    "LabelledPools",
    "LabelledQuery",
    "PoolQuery",
    "QueryBatch",
    "RankingMetrics",
    "SettingsFit",
    "SettingsStep",
    "SyntheticConfig",
    "additive_scores",
    "evaluate",
    "evaluate_scorers",
    "fit_settings",
    "fit_weights",
    "generate_from_weights",
    "generate_regime",
    "kernel_breakdown",
    "kernel_scorer",
    "kernel_scores",
    "label_pools",
    "labelled_pool",
    "mean_reciprocal_rank",
    "metrics_table",
    "ranks",
    "recall_at_k",
    "significance_sweep",
    "similarity_scores",
    "split_queries",
    "split_users",
    "standard_scorers",
]
