"""argparse types for the benches' sizes and durations: a bad one is one error line before anything starts
(a fleet of 0 members failed after starting, a rate of 0 divided by zero 12 s in)."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: must be 1 or more")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: must be more than 0")
    return value

