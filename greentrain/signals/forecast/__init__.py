"""Forecasting carbon intensity from a trace, and measuring how wrong forecasts turn out.

``forecaster`` is greentrain's own causal forecaster (daily profile plus
persisting anomaly) and ``lagregression`` its second model family; ``blend``
weighs two forecasters by their measured skill, computed by ``skill``;
``liveskill`` measures the forecast's error by hours ahead while a job runs,
and ``deviation`` scores the forecasts a replay used. None of it reads the
forecast archive. Nothing is imported here: each module is loaded when it is named.
"""
