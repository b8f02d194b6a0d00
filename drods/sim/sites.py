"""Where simulated members stand: region, zone, provider and city code of each, so a fleet of sims
(`drods dev up`, `drods sim fleet`) spreads over the topology the scheduler and steering read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Site:
    name: str
    region: str
    zone: str
    provider: str
    city: str
    preload: float = 0.0
    extra: tuple[str, ...] = ()  # further `drods sim` flags (GPUs) for the members `drods dev up` starts


SITES: tuple[Site, ...] = (
    Site("aws-dfw", "us-east", "us-east-1a", "aws", "DFW"),
    Site("azure-lhr", "eu-west", "westeurope-1", "azure", "LHR", preload=0.4),
    Site("gcp-sin", "ap-south", "asia-southeast1-a", "gcp", "SIN", extra=("--gpus", "2", "--gpu-model", "A100")),
    Site("aws-sea", "us-west", "us-west-2a", "aws", "SEA"),
    Site("azure-ams", "eu-north", "northeurope-1", "azure", "AMS"),
    Site("gcp-ord", "us-central", "us-central1-a", "gcp", "ORD"),
    Site("aws-nrt", "ap-northeast", "ap-northeast-1a", "aws", "NRT"),
    Site("azure-syd", "ap-southeast", "australiaeast-1", "azure", "SYD"),
)


def site(i: int) -> Site:
    """The i-th member: the table above, then numbered copies of it."""
    base = SITES[i % len(SITES)]
    if i < len(SITES):
        return base
    n = i // len(SITES) + 1
    return Site(f"{base.name}-{n}", base.region, base.zone, base.provider, base.city, base.preload, base.extra)
