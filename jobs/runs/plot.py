"""The picture of a run (`python -m jobs plot`): the reward and the step time against the step, one line
per attempt, each preemption or failure and each resume marked. Matplotlib with the Agg backend (no display).

Read at a glance: the marks' colours are never an attempt's (MARK_STYLES, ATTEMPT_COLOURS), the legend sits
beside the axes so it covers no data, and the constrained layout keeps every label inside the figure.
Data in (jobs/runs/observed.py step points, jobs/runs/goodput.py losses), a PNG out; the same data draws the same file
(no timestamp or software version in the PNG's metadata).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from incluster.record import GPU_CAPACITY_LOST
from jobs.runs.goodput import Loss
from jobs.runs.observed import StepPoint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SIZE_INCHES = (10.0, 7.0)
"""The figure's width and height."""

DPI = 100
"""Pixels per inch: SIZE_INCHES at DPI is a 1000 x 700 PNG."""

REWARD_LABEL = {"verl": "critic/score/mean", "nemo-rl": "average reward"}
"""The reward each framework logs, as the plot's axis names it."""

MARK_STYLES = {"preemption": ("#d62728", "--"), "failure": ("#000000", "-."), "resume": ("#2ca02c", ":")}
"""Colour and line style of each kind of mark: red, black and green."""

ATTEMPT_COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
"""The attempts' line colours, in turn: matplotlib's tab10 without its red, green and grey, so no attempt looks like
a mark (or like the grid)."""

ATTEMPT_MARKERS = (".", "s", "^")
"""The attempts' point markers: the next one each time the colours come round again (an 8th attempt and on)."""

LISTED_STEPS = 6
"""Marks of one kind whose steps the legend lists; past it, it gives their number and range."""


@dataclass(frozen=True)
class Marker:
    """A vertical mark at a step: where an attempt ended badly, or where the next one resumed."""

    step: float
    """The step it stands at."""
    attempt: int
    """The attempt that ended there, or that resumed from there."""
    kind: str
    """`preemption`, `failure` or `resume`."""


def markers(losses: Sequence[Loss], resumed: dict[int, int | None]) -> list[Marker]:
    """The marks of a run: each loss at its last step (step 0 before any), each later attempt's resume step."""
    found = []
    for loss in losses:
        kind = "preemption" if loss.failure == GPU_CAPACITY_LOST else "failure"
        found.append(Marker(float(loss.last_step or 0), loss.attempt, kind))
    for attempt, step in sorted(resumed.items()):
        if step is not None:
            found.append(Marker(float(step), attempt, "resume"))
    return found


_KIND_WORDS = {"preemption": "preempted at step", "failure": "failed at step", "resume": "resumed from step"}


def mark_label(kind: str, marks: Sequence[Marker]) -> str:
    """The legend's text for the marks of one kind: `resumed from step 2, 6`, or their number and range."""
    steps = sorted({int(mark.step) for mark in marks})
    words = _KIND_WORDS[kind]
    if len(steps) <= LISTED_STEPS:
        return f"{words} {', '.join(map(str, steps))}"
    return f"{words} {steps[0]} to {steps[-1]} ({len(marks)} times)"


def attempt_style(index: int) -> tuple[str, str]:
    """Colour and point marker of the `index`-th attempt drawn (0 first)."""
    colour = ATTEMPT_COLOURS[index % len(ATTEMPT_COLOURS)]
    return colour, ATTEMPT_MARKERS[index // len(ATTEMPT_COLOURS) % len(ATTEMPT_MARKERS)]


def figure_of(points: Sequence[StepPoint], marks: Sequence[Marker], framework: str, title: str) -> Figure:
    """The run's reward and step time against the step: one line per attempt, a vertical line per mark, and one
    legend beside the axes naming the attempts and the steps of each kind of mark."""
    # matplotlib: 1.5-3 s to import (python -X importtime), which only `plot` pays, not every CLI command
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=SIZE_INCHES, dpi=DPI, layout="constrained")
    reward_axes, time_axes = figure.subplots(2, 1, sharex=True)
    handles, labels = [], []
    for index, attempt in enumerate(sorted({point.attempt for point in points})):
        own = [point for point in points if point.attempt == attempt]
        colour, marker = attempt_style(index)
        style = {"marker": marker, "markersize": 4, "color": colour, "linewidth": 1.5}
        rewards = [(point.step, point.reward) for point in own if point.reward is not None]
        times = [(point.step, point.step_s) for point in own if point.step_s is not None]
        if rewards:
            reward_axes.plot(*zip(*rewards, strict=True), **style)
        if times:
            time_axes.plot(*zip(*times, strict=True), **style)
        handles.append(Line2D([], [], **style))
        labels.append(f"attempt {attempt}")
    for kind, (colour, line_style) in MARK_STYLES.items():
        own = [mark for mark in marks if mark.kind == kind]
        for mark in own:
            for axes in (reward_axes, time_axes):
                axes.axvline(mark.step, color=colour, linestyle=line_style, linewidth=1.4)
        if own:
            handles.append(Line2D([], [], color=colour, linestyle=line_style, linewidth=1.4))
            labels.append(mark_label(kind, own))
    reward_axes.set_ylabel(REWARD_LABEL.get(framework, "reward"))
    time_axes.set_ylabel("step time (s)")
    time_axes.set_xlabel("step")
    time_axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.suptitle(title)
    for axes in (reward_axes, time_axes):
        axes.grid(True, alpha=0.3)
    if handles:
        figure.legend(handles, labels, loc="outside right upper", fontsize=9)
    if not points:
        reward_axes.text(0.5, 0.5, "no training step yet", transform=reward_axes.transAxes, ha="center")
    return figure


def draw(points: Sequence[StepPoint], marks: Sequence[Marker], framework: str, title: str, out: Path) -> Path:
    """Draw the run's reward and step time against the step into the PNG `out`; return it."""
    import matplotlib  # 1.5-3 s to import: only `plot` pays it (see figure_of)

    matplotlib.use("Agg")
    figure = figure_of(points, marks, framework, title)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png", metadata={"Software": None})
    return out
