"""The public surface of plugin.experiments changes only on purpose."""

import affect_memory.experiments as experiments


def test_exported_members_are_pinned() -> None:
    assert sorted(experiments.__all__) == sorted([
        "DEFAULT_SEARCH", "REGIMES", "REGIME_NAMES", "FitResult", "FitStep", "LabelledPools",
        "LabelledQuery", "PoolQuery", "QueryBatch", "RankingMetrics", "SyntheticConfig",
        "additive_scores", "evaluate",
        "evaluate_scorers", "fit_weights", "generate_from_weights", "generate_regime",
        "kernel_breakdown", "kernel_scorer", "kernel_scores", "label_pools", "labelled_pool",
        "mean_reciprocal_rank",
        "metrics_table", "ranks", "recall_at_k", "significance_sweep", "similarity_scores",
        "split_queries", "standard_scorers",
        # issue 21: fitting any recall setting through recall itself, held out by user
        "SettingsFit", "SettingsStep", "fit_settings", "split_users",
    ])
    for name in experiments.__all__:
        assert getattr(experiments, name).__doc__ or name.isupper(), name
