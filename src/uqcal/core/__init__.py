"""Shared building blocks, the bottom layer: ``io`` (atomic writes, JSON), ``device`` (torch device choice),
``resume`` (crash-resume of a batch, training checkpoints), ``predictive`` (the predictive objects),
``calibration`` (recalibration maps of PIT levels shared by families), ``recalibration`` (recalibrators of
predictive objects), ``nn`` (small torch helpers), ``gp`` (exact GP algebra) and ``lazy`` (lazy public names of a
package). It imports no other uqcal layer.
"""

__all__: list[str] = []
