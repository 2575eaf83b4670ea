"""The run's picture: a PNG of the expected size that is not blank, the same bytes for the same data, the marks of
a preemption and its resume, and that it reads at a glance: marks in colours no attempt uses, a legend beside the
data, every label inside the figure."""

from __future__ import annotations

import pytest

from jobs.runs.observed import StepPoint, attempt_lines, step_points
from jobs.runs.plot import (
    ATTEMPT_COLOURS,
    DPI,
    MARK_STYLES,
    SIZE_INCHES,
    STAGE_COLOURS,
    Marker,
    draw,
    figure_of,
    mark_label,
    markers,
)
from jobs.runs.step_time import StepTime, step_times
from tests.jobs.runs.test_observed import FILES, RAY, T0, view

WIDTH, HEIGHT = int(SIZE_INCHES[0] * DPI), int(SIZE_INCHES[1] * DPI)


def read_png(path):
    import matplotlib.image

    return matplotlib.image.imread(path)


def test_the_marks_of_a_preemption_and_its_resume():
    figures = view().goodput(now=T0 + 5000)
    assert markers(figures.losses, {1: None, 2: 2}) == [
        Marker(4.0, 1, "preemption"),
        Marker(2.0, 2, "resume"),
    ]


def test_the_plot_is_a_png_of_the_expected_size_and_not_blank(tmp_path):
    lines = attempt_lines(FILES, RAY)
    points, times = step_points(lines, "verl"), step_times(lines, "verl")
    marks = markers(view().goodput(now=T0 + 5000).losses, {2: 2})
    out = draw(points, marks, "verl", "dev-abc: 2 attempts", tmp_path / "plots" / "run.png", times)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = read_png(out)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std() > 0.05
    # the two attempts' lines (tab10 blue and orange), the preemption's red mark and the stages' bars are drawn
    import numpy
    from matplotlib.colors import to_rgb

    colours = {tuple(numpy.round(row, 2)) for row in rgb[::7]}
    stages = [to_rgb(STAGE_COLOURS[stage]) for stage in ("generation", "log-probs", "training", "weight sync")]
    for colour in ((0.12, 0.47, 0.71), (1.0, 0.5, 0.05), (0.84, 0.15, 0.16), *stages):
        assert any(max(abs(a - b) for a, b in zip(seen, colour, strict=True)) < 0.03 for seen in colours), colour


def test_the_same_data_draws_the_same_file(tmp_path):
    lines = attempt_lines(FILES, RAY)
    points, times = step_points(lines, "verl"), step_times(lines, "verl")
    first = draw(points, [], "verl", "t", tmp_path / "a.png", times).read_bytes()
    assert draw(points, [], "verl", "t", tmp_path / "b.png", times).read_bytes() == first


@pytest.mark.parametrize("framework", ["verl", "nemo-rl"])
def test_a_run_without_a_step_still_draws_a_picture(tmp_path, framework):
    out = draw([], [], framework, "no steps", tmp_path / "empty.png")
    assert read_png(out).shape[:2] == (HEIGHT, WIDTH)


def many_attempts(count: int = 20) -> tuple[list[StepPoint], list[Marker]]:
    """`count` attempts of 4 steps each, every one but the last preempted or failed, every later one resumed."""
    points = [
        StepPoint(attempt, step, step * 60.0, 0.9 - 0.01 * step, 80.0 + attempt)
        for attempt in range(1, count + 1)
        for step in range(3 * attempt - 2, 3 * attempt + 2)
    ]
    marks = [
        Marker(3 * attempt + 1, attempt, "preemption" if attempt % 2 else "failure") for attempt in range(1, count)
    ]
    marks += [Marker(3 * attempt - 3, attempt, "resume") for attempt in range(2, count + 1)]
    return points, marks


def drawn(figure):
    """`figure` laid out and drawn, and its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def test_no_attempt_line_has_a_marks_colour_even_with_twenty_attempts():
    from matplotlib.colors import to_rgb

    points, marks = many_attempts(20)
    figure = figure_of(points, marks, "verl", "dev-0123456789: 20 attempts")
    mark_colours = {to_rgb(colour) for colour, _ in MARK_STYLES.values()}
    attempt_lines = [line for axes in figure.axes for line in axes.get_lines() if len(line.get_xdata()) > 2]
    mark_lines = [line for axes in figure.axes for line in axes.get_lines() if line not in attempt_lines]
    assert len(attempt_lines) == 2 * 20 and len(mark_lines) == 2 * len(marks)
    assert {to_rgb(line.get_color()) for line in mark_lines} == mark_colours
    for line in attempt_lines:
        colour = to_rgb(line.get_color())
        # far from every mark colour: at least a quarter of the RGB range apart in one channel
        assert all(max(abs(a - b) for a, b in zip(colour, mark, strict=True)) >= 0.25 for mark in mark_colours), colour
    assert {to_rgb(line.get_color()) for line in attempt_lines} == {to_rgb(colour) for colour in ATTEMPT_COLOURS}


def many_times(points: list[StepPoint]) -> list[StepTime]:
    """A StepTime per point: every stage, a save every third step."""
    stages = {"generation": 40.0, "log-probs": 10.0, "training": 20.0, "weight sync": 2.0}
    return [
        StepTime(point.attempt, point.step, point.time, 75.0 + 30.0 * (point.step % 3 == 0),
                 {**stages, **({"checkpoint save": 30.0} if point.step % 3 == 0 else {})}, 500.0)
        for point in points
    ]  # fmt: skip


@pytest.mark.parametrize(("count", "staged"), [(1, False), (3, False), (20, False), (20, True)])
def test_the_legend_covers_no_data_and_no_label_is_cut_off(count, staged):
    """With stage timings (two legends) checked at the most attempts, where the legends are longest."""
    points, marks = many_attempts(count)
    times = many_times(points) if staged else []
    figure = figure_of(points, marks, "nemo-rl", f"dev-0123456789abcdef0123456789: {count} attempts", times)
    assert len(figure.legends) == (2 if staged else 1)
    renderer = drawn(figure)
    boxes = [legend.get_window_extent(renderer) for legend in figure.legends]
    title = figure.axes[0].title.get_window_extent(renderer)
    assert figure.axes[0].title.get_text() == f"dev-0123456789abcdef0123456789: {count} attempts"
    for box in boxes:
        for axes in figure.axes:
            assert not box.overlaps(axes.get_window_extent(renderer)), "a legend lies over the axes"
        assert not box.overlaps(title), "a legend lies over the title"
    if len(boxes) == 2:
        assert not boxes[0].overlaps(boxes[1]), "the legends overlap"
    # what is drawn of each axes (its tick labels, axis labels and title too) and the legends lie in the figure
    extents = [axes.get_tightbbox(renderer) for axes in figure.axes]
    extents += [title, *boxes]
    whole = figure.bbox
    for extent in extents:
        assert whole.x0 <= extent.x0 and extent.x1 <= whole.x1 and whole.y0 <= extent.y0 and extent.y1 <= whole.y1


def test_the_legend_names_each_kind_of_mark_with_its_steps():
    assert mark_label("resume", [Marker(6, 2, "resume"), Marker(2, 3, "resume")]) == "resumed from step 2, 6"
    assert mark_label("failure", [Marker(0, 1, "failure")]) == "failed at step 0"
    _, marks = many_attempts(20)
    preempted = [mark for mark in marks if mark.kind == "preemption"]
    assert mark_label("preemption", preempted) == "preempted at step 4 to 58 (10 times)"
    figure = figure_of(*many_attempts(3), "verl", "t")
    assert [text.get_text() for text in figure.legends[0].get_texts()] == [
        "attempt 1", "attempt 2", "attempt 3", "preempted at step 4", "failed at step 7", "resumed from step 3, 6",
    ]  # fmt: skip


def bars_of(axes) -> dict[float, list[tuple[float, float, tuple]]]:
    """The bars of `axes` by their centre's x: (bottom, height, colour) from the bottom up."""
    from matplotlib.patches import Rectangle

    found: dict[float, list[tuple[float, float, tuple]]] = {}
    for patch in axes.patches:
        if isinstance(patch, Rectangle):
            x = round(patch.get_x() + patch.get_width() / 2, 3)
            found.setdefault(x, []).append((patch.get_y(), patch.get_height(), patch.get_facecolor()[:3]))
    return {x: sorted(bars) for x, bars in sorted(found.items())}


def test_each_steps_seconds_are_stacked_by_stage_and_a_step_two_attempts_ran_has_a_bar_for_each():
    from matplotlib.colors import to_rgb

    lines = attempt_lines(FILES, RAY)
    times = step_times(lines, "verl")
    marks = markers(view().goodput(now=T0 + 5000).losses, {2: 2})
    figure = figure_of(step_points(lines, "verl"), marks, "verl", "dev-abc: 2 attempts", times)
    reward_axes, time_axes = figure.axes
    bars = bars_of(time_axes)
    # attempt 1 ran steps 1-4, attempt 2 steps 3-5 (test_observed's run): steps 3 and 4 have two bars, older left
    assert list(bars) == [1.0, 2.0, 2.8, 3.2, 3.8, 4.2, 5.0]
    totals = {item.step: item.total_s for item in times}
    order = ["generation", "log-probs", "training", "weight sync", "other"]
    for x, stack in bars.items():
        assert [colour for _, _, colour in stack] == [to_rgb(STAGE_COLOURS[stage]) for stage in order]
        assert stack[-1][0] + stack[-1][1] == pytest.approx(totals[round(x)]), "the stack is the whole step"
        assert [height for _, height, _ in stack][:4] == [50.0, 15.0, 20.0, 3.0]  # verl_log's timing_s/*
    # each bar is capped with its attempt's point: attempt 1 blue on the left, attempt 2 orange on the right
    caps = {round(line.get_xdata()[0], 3): to_rgb(line.get_color()) for line in time_axes.get_lines()
            if len(line.get_xdata()) == 1 and line.get_linestyle() == "None"}  # fmt: skip
    assert caps[2.8] == to_rgb(ATTEMPT_COLOURS[0]) and caps[3.2] == to_rgb(ATTEMPT_COLOURS[1])
    assert time_axes.get_title(loc="left") == "400 tokens/s per GPU (median)"
    assert time_axes.get_ylabel() == "step time by stage (s)"
    assert [text.get_text() for text in figure.legends[1].get_texts()] == list(reversed(order))


def test_no_stage_colour_looks_like_an_attempt_or_a_mark():
    from matplotlib.colors import to_rgb

    others = [to_rgb(colour) for colour in ATTEMPT_COLOURS] + [to_rgb(colour) for colour, _ in MARK_STYLES.values()]
    for stage, colour in STAGE_COLOURS.items():
        rgb = to_rgb(colour)
        for other in others:
            assert max(abs(a - b) for a, b in zip(rgb, other, strict=True)) >= 0.25, (stage, other)


def test_without_stage_timings_the_step_time_is_a_line_per_attempt():
    points = step_points(attempt_lines(FILES, RAY), "verl")
    figure = figure_of(points, [], "verl", "t", [StepTime(1, 1, T0, 91.0)])
    time_axes = figure.axes[1]
    assert bars_of(time_axes) == {} and time_axes.get_ylabel() == "step time (s)"
    assert len([line for line in time_axes.get_lines() if len(line.get_xdata()) > 2]) == 2
    assert len(figure.legends) == 1
