"""The picture of a run (`python -m jobs plot`): the reward and the step time against the step, one line
per attempt, each preemption or failure and each resume marked. Matplotlib with the Agg backend (no display).

Data in (jobs/observed.py step points, jobs/goodput.py losses), a PNG out; the same data draws the same file
(no timestamp or software version in the PNG's metadata).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jobs.goodput import Loss
from jobs.observed import StepPoint
from jobs.record import GPU_CAPACITY_LOST

SIZE_INCHES = (10.0, 7.0)
"""The figure's width and height."""

DPI = 100
"""Pixels per inch: SIZE_INCHES at DPI is a 1000 x 700 PNG."""

REWARD_LABEL = {"verl": "critic/score/mean", "nemo-rl": "average reward"}
"""The reward each framework logs, as the plot's axis names it."""


@dataclass(frozen=True)
class Marker:
    """A vertical mark at a step: where an attempt ended badly, or where the next one resumed."""

    step: float
    """The step it stands at."""
    label: str
    """What happened there."""
    kind: str
    """`preemption`, `failure` or `resume`."""


def markers(losses: Sequence[Loss], resumed: dict[int, int | None]) -> list[Marker]:
    """The marks of a run: each loss at its last step (step 0 before any), each later attempt's resume step."""
    found = []
    for loss in losses:
        kind = "preemption" if loss.failure == GPU_CAPACITY_LOST else "failure"
        found.append(Marker(float(loss.last_step or 0), f"attempt {loss.attempt}: {kind}", kind))
    for attempt, step in sorted(resumed.items()):
        if step is not None:
            found.append(Marker(float(step), f"attempt {attempt} resumed from step {step}", "resume"))
    return found


_STYLES = {"preemption": ("tab:red", "--"), "failure": ("tab:orange", "--"), "resume": ("tab:green", ":")}


def draw(points: Sequence[StepPoint], marks: Sequence[Marker], framework: str, title: str, out: Path) -> Path:
    """Draw the run's reward and step time against the step into the PNG `out`; return it."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.figure import Figure

    figure = Figure(figsize=SIZE_INCHES, dpi=DPI)
    reward_axes, time_axes = figure.subplots(2, 1, sharex=True)
    attempts = sorted({point.attempt for point in points})
    colours = pyplot.get_cmap("tab10")
    for index, attempt in enumerate(attempts):
        own = [point for point in points if point.attempt == attempt]
        colour = colours(index % 10)
        rewards = [(point.step, point.reward) for point in own if point.reward is not None]
        times = [(point.step, point.step_s) for point in own if point.step_s is not None]
        if rewards:
            reward_axes.plot(*zip(*rewards, strict=True), marker=".", color=colour, label=f"attempt {attempt}")
        if times:
            time_axes.plot(*zip(*times, strict=True), marker=".", color=colour, label=f"attempt {attempt}")
    for mark in marks:
        colour, style = _STYLES[mark.kind]
        for axes in (reward_axes, time_axes):
            axes.axvline(mark.step, color=colour, linestyle=style, linewidth=1.2)
        reward_axes.annotate(
            mark.label, (mark.step, 1.0), xycoords=("data", "axes fraction"), rotation=90, va="top", ha="right",
            fontsize=8, color=colour,
        )  # fmt: skip
    reward_axes.set_ylabel(REWARD_LABEL.get(framework, "reward"))
    time_axes.set_ylabel("step time (s)")
    time_axes.set_xlabel("step")
    reward_axes.set_title(title)
    for axes in (reward_axes, time_axes):
        axes.grid(True, alpha=0.3)
        if attempts:
            axes.legend(loc="lower right", fontsize=8)
    if not points:
        reward_axes.text(0.5, 0.5, "no training step yet", transform=reward_axes.transAxes, ha="center")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png", metadata={"Software": None})
    return out
