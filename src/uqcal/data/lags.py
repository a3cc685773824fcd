"""Wide time series -> lagged multi-task table (the ``reshape: {lags: ...}`` step).

Iwata & Kumagai (Sec. 5, following their ref. [26]) build Sales as: a task is a week t, an instance a
product, the features its sales in weeks t-1..t-n_lags and the target its sales in week t.  With UCI's
811 products x 52 weeks (W0..W51) and n_lags = 5 this gives 47 tasks of 811 instances, as in the paper.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from uqcal.data.errors import DataSourceError


def lagged_long(frame: pd.DataFrame, *, id: str, columns: str, n_lags: int, value_name: str = "value",
                task_name: str = "t") -> pd.DataFrame:
    """One row per (id, time t >= n_lags): ``id, task_name, lag1..lag{n_lags}, value_name``.

    ``columns`` is a regex with a named group matching the time index in the column name (e.g.
    ``'^W(?P<week>\\d+)$'``); only the matching columns are used, ordered by that index.
    """
    pattern = re.compile(columns)
    times = {}
    for column in frame.columns:
        match = pattern.match(str(column))
        if match:
            times[column] = int(match.groups()[0])
    if len(times) <= n_lags:
        raise DataSourceError(f"reshape.lags: {len(times)} columns match {columns!r}; need more than "
                              f"n_lags = {n_lags}")
    ordered = sorted(times, key=times.get)
    index = np.array([times[c] for c in ordered])
    if not np.array_equal(index, np.arange(index[0], index[0] + len(index))):
        raise DataSourceError(f"reshape.lags: the time indices of {columns!r} are not consecutive")
    values = frame[ordered].to_numpy(dtype=np.float64)  # (n_ids, n_times)
    parts = []
    for step in range(n_lags, len(ordered)):
        part = {id: frame[id].to_numpy(), task_name: np.full(len(frame), index[step])}
        for lag in range(1, n_lags + 1):
            part[f"lag{lag}"] = values[:, step - lag]
        part[value_name] = values[:, step]
        parts.append(pd.DataFrame(part))
    return pd.concat(parts, ignore_index=True)
