"""The array types of the scheduler: one row per cluster (or per cell), as NumPy arrays.

Apart from the plugin protocols (`drods.scheduler.interface`) because the snapshot and the task,
which those protocols take, are built from them too.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArr = npt.NDArray[np.float64]
BoolArr = npt.NDArray[np.bool_]
IntArr = npt.NDArray[np.intp]
