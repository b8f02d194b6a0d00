"""The ``autoscaling`` section of the configuration file (`drods.config`): the autoscaler's period,
history, pre-scaling horizon and the feedback loop's gains. Defaults are the dataclasses' (one
default per knob)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from drods.autoscaling.cluster_weights import WeightSettings
from drods.autoscaling.controller import AutoscalerSettings
from drods.autoscaling.feedback import FeedbackSettings

_A = AutoscalerSettings()
_F = FeedbackSettings()
_W = WeightSettings()


class FeedbackConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kp: float = Field(default=_F.kp, ge=0)  # proportional gain scaling out
    kpDown: float = Field(default=_F.kp_down, ge=0)  # proportional gain scaling in
    ki: float = Field(default=_F.ki, ge=0)  # integral gain (scaling out)
    integralLimit: float = Field(default=_F.integral_limit, ge=0)
    deadband: float = Field(default=_F.deadband, ge=0)  # slack below the target left alone
    tolerance: float = Field(default=_F.tolerance, ge=0)  # a miss this small is noise
    maxStep: int = Field(default=_F.max_step, ge=1)
    maxStepFraction: float = Field(default=_F.max_step_fraction, ge=0, le=1)
    cooldownSeconds: float = Field(default=_F.cooldown_s, ge=0)
    maxAgeSeconds: float = Field(default=_F.max_age_s, gt=0)
    confirmDown: int = Field(default=_F.confirm_down, ge=1)
    # Prometheus that spec.feedback.promql queries are evaluated against (None: not evaluated)
    prometheusUrl: str | None = Field(default=_A.feedback_prometheus_url, pattern=r"^https?://")

    def settings(self) -> FeedbackSettings:
        return FeedbackSettings(kp=self.kp, kp_down=self.kpDown, ki=self.ki, integral_limit=self.integralLimit,
                                deadband=self.deadband, tolerance=self.tolerance, max_step=self.maxStep,
                                max_step_fraction=self.maxStepFraction, cooldown_s=self.cooldownSeconds,
                                max_age_s=self.maxAgeSeconds, confirm_down=self.confirmDown)


class WeightsConfig(BaseModel):
    """Per-cluster weights from per-cluster feedback (`drods.autoscaling.cluster_weights`)."""

    model_config = ConfigDict(extra="forbid")

    gain: float = Field(default=_W.gain, ge=0)  # weight change per unit of a cluster's miss above the mean
    maxShift: float = Field(default=_W.max_shift, gt=0, lt=1)  # bound of one move, as a fraction of the weight
    minWeight: float = Field(default=_W.min_weight, ge=0, lt=0.5)  # no reporting cluster gets less
    tolerance: float = Field(default=_W.tolerance, ge=0)  # misses this close to the mean are balanced
    cooldownSeconds: float = Field(default=_W.cooldown_s, ge=0)
    maxAgeSeconds: float = Field(default=_W.max_age_s, gt=0)

    def settings(self) -> WeightSettings:
        return WeightSettings(gain=self.gain, max_shift=self.maxShift, min_weight=self.minWeight,
                              tolerance=self.tolerance, cooldown_s=self.cooldownSeconds, max_age_s=self.maxAgeSeconds)


class CustomMetricsConfig(BaseModel):
    """Where a FederatedHPA's Pods/Object/External metrics are read (`drods.autoscaling.custom_metrics`)."""

    model_config = ConfigDict(extra="forbid")

    # None: read from autoscaling.feedback.prometheusUrl
    prometheusUrl: str | None = Field(default=_A.custom_metrics_prometheus_url, pattern=r"^https?://")


class AutoscalingConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    syncSeconds: float = Field(default=_A.sync_seconds, gt=0)  # every autoscaler evaluated this often
    historyRetentionSeconds: float = Field(default=_A.history_retention_s, gt=0)  # decisions kept
    forecastHorizonSeconds: float = Field(default=_A.forecast_horizon_s, ge=0)  # pre-scaling; 0: off
    # how long a count adopted from a pull-mode agent stands before the autoscaler decides again
    adoptHoldSeconds: float = Field(default=_A.adopt_hold_s, ge=0)
    feedback: FeedbackConfig = Field(default_factory=FeedbackConfig)
    weights: WeightsConfig = Field(default_factory=WeightsConfig)
    customMetrics: CustomMetricsConfig = Field(default_factory=CustomMetricsConfig)

    def settings(self) -> AutoscalerSettings:
        return AutoscalerSettings(sync_seconds=self.syncSeconds, history_retention_s=self.historyRetentionSeconds,
                                  forecast_horizon_s=self.forecastHorizonSeconds, adopt_hold_s=self.adoptHoldSeconds,
                                  feedback_prometheus_url=self.feedback.prometheusUrl,
                                  custom_metrics_prometheus_url=self.customMetrics.prometheusUrl,
                                  feedback=self.feedback.settings(), weights=self.weights.settings())
