"""The lab: scoring saved completions, the estimator audit, comparisons, metrics, data hygiene."""
