"""The picture of a run (`python -m jobs plot`): above, the reward against the step, one line per attempt; below,
each step's seconds stacked by stage (jobs/runs/step_time.py: generation, log-probs, training, weight sync,
checkpoint save, other) with the median tokens per second per GPU in its title; each preemption or failure and each
resume marked across both. A step that two attempts ran (the one lost to a preemption, the one after the resume) has
a bar for each, side by side, the older on the left. Without any stage timings (a log that logs none) the lower axes
shows each attempt's step time as a line instead. Matplotlib with the Agg backend (no display).

Read at a glance: the marks' colours are never an attempt's or a stage's (MARK_STYLES, ATTEMPT_COLOURS,
STAGE_COLOURS), the legend sits beside the axes so it covers no data, and the constrained layout keeps every label
inside the figure. Data in (jobs/runs/observed.py step points, jobs/runs/step_time.py step times, jobs/runs/goodput.py
losses), a PNG out; the same data draws the same file (no timestamp or software version in the PNG's metadata).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from incluster.record import GPU_CAPACITY_LOST
from jobs.runs.goodput import Loss
from jobs.runs.observed import StepPoint
from jobs.runs.step_time import OTHER, STAGES, StepTime, breakdown

if TYPE_CHECKING:
    from matplotlib.axes import Axes
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

STAGE_COLOURS = {
    "generation": "#a6cee3",
    "log-probs": "#ffd92f",
    "training": "#66c2a5",
    "weight sync": "#e5c494",
    "checkpoint save": "#fc8d62",
    OTHER: "#dddddd",
}
"""Each stage's bar colour: light tints (ColorBrewer's Paired and Set2) at least a quarter of the RGB range from every
attempt's colour and every mark's in one channel, so a bar never reads as an attempt or a mark; `other` light grey."""

BAR_WIDTH = 0.8
"""The width of a step's bars in steps, shared by the attempts that ran the step."""

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


def figure_of(
    points: Sequence[StepPoint], marks: Sequence[Marker], framework: str, title: str, times: Sequence[StepTime] = ()
) -> Figure:
    """The run's reward against the step (one line per attempt) over its step time by stage (stacked bars; without
    stage timings, a line per attempt), a vertical line per mark, and beside the axes a legend naming the attempts
    and the steps of each kind of mark, and one naming the stages."""
    # matplotlib: 1.5-3 s to import (python -X importtime), which only `plot` pays, not every CLI command
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=SIZE_INCHES, dpi=DPI, layout="constrained")
    reward_axes, time_axes = figure.subplots(2, 1, sharex=True)
    staged = [item for item in times if item.total_s is not None and item.stages]
    handles, labels = [], []
    for index, attempt in enumerate(sorted({point.attempt for point in points})):
        own = [point for point in points if point.attempt == attempt]
        colour, marker = attempt_style(index)
        style = {"marker": marker, "markersize": 4, "color": colour, "linewidth": 1.5}
        rewards = [(point.step, point.reward) for point in own if point.reward is not None]
        step_s = [(point.step, point.step_s) for point in own if point.step_s is not None]
        if rewards:
            reward_axes.plot(*zip(*rewards, strict=True), **style)
        if step_s and not staged:
            time_axes.plot(*zip(*step_s, strict=True), **style)
        handles.append(Line2D([], [], **style))
        labels.append(f"attempt {attempt}")
    for kind, (colour, line_style) in MARK_STYLES.items():
        own_marks = [mark for mark in marks if mark.kind == kind]
        for mark in own_marks:
            for axes in (reward_axes, time_axes):
                axes.axvline(mark.step, color=colour, linestyle=line_style, linewidth=1.4)
        if own_marks:
            handles.append(Line2D([], [], color=colour, linestyle=line_style, linewidth=1.4))
            labels.append(mark_label(kind, own_marks))
    styles = {attempt: attempt_style(index) for index, attempt in enumerate(sorted({p.attempt for p in points}))}
    drawn = stacked_bars(time_axes, staged, styles)
    reward_axes.set_ylabel(REWARD_LABEL.get(framework, "reward"))
    time_axes.set_ylabel("step time by stage (s)" if staged else "step time (s)")
    figures = breakdown(times, framework)
    if figures is not None and figures.tokens_per_gpu_s is not None:
        time_axes.set_title(f"{figures.tokens_per_gpu_s:,.0f} tokens/s per GPU (median)", loc="left", fontsize=10)
    time_axes.set_xlabel("step")
    time_axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    reward_axes.set_title(title)  # over the axes, never under the legends beside them (a figure title can be)
    for axes in (reward_axes, time_axes):
        axes.grid(True, alpha=0.3)
        axes.set_axisbelow(True)
    if handles:
        figure.legend(handles, labels, loc="outside right upper", fontsize=9)
    if drawn:
        stages = [Patch(facecolor=STAGE_COLOURS[stage], edgecolor="none") for stage in reversed(drawn)]
        figure.legend(stages, list(reversed(drawn)), loc="outside right lower", fontsize=9, title="stage")
    if not points:
        reward_axes.text(0.5, 0.5, "no training step yet", transform=reward_axes.transAxes, ha="center")
    return figure


def stacked_bars(axes: Axes, times: Sequence[StepTime], styles: dict[int, tuple[str, str]]) -> list[str]:
    """Draw each step's seconds stacked by stage on `axes`, the attempts that ran one step side by side, each bar
    capped with its attempt's point (`styles`: colour and marker by attempt); the stages drawn, in STAGES order and
    `other` last (the stack's order from the bottom)."""
    drawn = [stage for stage in (*STAGES, OTHER) if any(_seconds(item, stage) > 0 for item in times)]
    by_step: dict[int, list[StepTime]] = {}
    for item in sorted(times, key=lambda item: (item.step, item.attempt)):
        by_step.setdefault(item.step, []).append(item)
    for step, items in by_step.items():
        width = BAR_WIDTH / len(items)
        for index, item in enumerate(items):
            x = step - BAR_WIDTH / 2 + width * (index + 0.5)
            bottom = 0.0
            for stage in drawn:
                seconds = _seconds(item, stage)
                if seconds > 0:
                    axes.bar(x, seconds, width=width * 0.9, bottom=bottom, color=STAGE_COLOURS[stage], linewidth=0)
                    bottom += seconds
            colour, marker = styles.get(item.attempt, attempt_style(0))
            axes.plot([x], [bottom], marker=marker, markersize=5, color=colour, linestyle="none")
    return drawn


def _seconds(item: StepTime, stage: str) -> float:
    return item.other_s if stage == OTHER else item.stages.get(stage, 0.0)


def draw(
    points: Sequence[StepPoint],
    marks: Sequence[Marker],
    framework: str,
    title: str,
    out: Path,
    times: Sequence[StepTime] = (),
) -> Path:
    """Draw the run's reward and step time by stage against the step into the PNG `out`; return it."""
    import matplotlib  # 1.5-3 s to import: only `plot` pays it (see figure_of)

    matplotlib.use("Agg")
    figure = figure_of(points, marks, framework, title, times)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="png", metadata={"Software": None})
    return out
